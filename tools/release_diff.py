"""Diff the validation code of two releases of an engine: what a new release refuses, drops, renames or defaults
differently, read from the two wheels' Python sources (nothing is imported from them).

  python3 -m tools.release_diff vllm 0.33.0 0.34.0                     # Markdown summary on stdout
  python3 -m tools.release_diff vllm 0.33.0 0.34.0 -o json             # the JSON on stdout
  python3 -m tools.release_diff vllm 0.33.0 0.34.0 --write docs/releases   # both, as vllm-0.33.0-to-0.34.0.{json,md}
  python3 -m tools.release_diff vllm A B --old-tree DIR --new-tree DIR  # any two unpacked trees (DIR holds vllm/)
  python3 -m tools.release_diff vllm 0.33.0 0.35.0 --fetch --dump-parser /tmp/dumps   # a new release, one command

The releases come from the wheel cache (`bash .ci/setup_engine_wheels.sh`), unpacked without their compiled
extensions by tools/engine_parsers/dump.py (imported read-only). What is compared, over the files SCOPES names per
engine (the code that judges a launch line):

- raise sites (ast): each ``raise X(msg)`` with its exception type, message template (f-string fields kept as
  ``{expr}``) and file:line; matched across releases by (file, enclosing function, type, template); the same
  (type, template) in another function or file is "moved"; an unmatched old/new pair in the same file whose
  texts are alike (difflib ratio >= SIMILAR; SIMILAR_ELSEWHERE across files) is "changed"; the rest are "new" or "removed". A site that only
  moved lines is not reported.
- deprecation warnings: ``logger.warning*``/``warnings.warn`` calls whose template says "deprecat";
- config fields: annotated class attributes (pydantic dataclasses of config/, EngineArgs): added, removed, and
  changed default or annotation;
- environment variables: vLLM's ``envs.environment_variables`` dict (key -> default expression), SGLang's
  ``srt/environ.py`` ``class Envs`` attributes;
- module constants: UPPERCASE module-level literals (NIXL_CONNECTOR_VERSION, ...);
- flags: from the two parser dumps (tools/engine_parsers/dump.py format: the catalog's committed dump when the
  release is pinned, else ``--old-dump``/``--new-dump``); without a dump, the static list (literal
  ``add_argument("--x")`` flags + EngineArgs fields as ``--kebab-case``) is diffed and the output says so.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMAT = 1

# per engine: the package directory name, the files (globs relative to it) whose raise sites/fields/constants are
# diffed, where its environment variables are declared, and the class whose fields become CLI flags
SCOPES: dict[str, dict] = {
    "vllm": {
        "package": "vllm",
        "files": ["config/*.py", "engine/arg_utils.py", "entrypoints/cli/serve.py",
                  "entrypoints/openai/cli_args.py", "platforms/interface.py", "envs.py",
                  "distributed/kv_transfer/kv_connector/v1/nixl/*.py",
                  # 0.34.0 moved the per-method speculative checks out of SpeculativeConfig.__post_init__
                  "v1/worker/gpu/spec_decode/*config.py", "v1/worker/gpu/spec_decode/*/config.py"],
        "envs": ("envs.py", "dict", "environment_variables"),
        "args_class": ("engine/arg_utils.py", "EngineArgs"),
    },
    "sglang": {
        "package": "sglang",
        # 0.5.2x declares and validates ServerArgs in srt/arg_groups/ (fields, hooks, per-model overrides)
        "files": ["srt/server_args.py", "srt/environ.py", "srt/arg_groups/*.py", "srt/arg_groups/*/*.py",
                  "srt/disaggregation/nixl/*.py",
                  "srt/disaggregation/mooncake/*.py", "srt/speculative/spec_info.py"],
        "envs": ("srt/environ.py", "class", "Envs"),
        "args_class": ("srt/server_args.py", "ServerArgs"),
    },
}
LOG_CALLS = {"warning", "warning_once", "warn", "warning_once_rank0", "info_once", "info"}


class ReleaseDiffError(Exception):
    pass


# ----------------------------------------------------------------------------------------------- extraction

def template(node: ast.AST | None) -> str:
    """A message as written: literal text, f-string fields as ``{expr}``, ``+`` concatenations joined,
    ``"...".format(...)``/``%`` reduced to their format string; anything else as its source."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                out.append("{" + ast.unparse(part.value) + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return template(node.left) + template(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return template(node.left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        return template(node.func.value)
    return "{" + ast.unparse(node) + "}"


@dataclass
class Site:
    file: str
    line: int
    where: str          # enclosing Class.function (or <module>)
    kind: str           # exception type, or the logging call
    message: str

    def key(self) -> tuple:
        return (self.file, self.where, self.kind, self.message)

    def as_json(self, version: str) -> dict:
        return {"file": self.file, "line": self.line, "at": f"{self.file}:{self.line}@{version}",
                "where": self.where, "kind": self.kind, "message": self.message}


@dataclass
class FileFacts:
    raises: list[Site] = field(default_factory=list)
    deprecations: list[Site] = field(default_factory=list)
    fields: dict[str, dict] = field(default_factory=dict)      # "Class.name" -> {annotation, default, line}
    constants: dict[str, dict] = field(default_factory=dict)   # NAME -> {value, line}
    flags: dict[str, int] = field(default_factory=dict)        # literal add_argument flags -> line


class _Walker(ast.NodeVisitor):
    def __init__(self, rel: str, facts: FileFacts):
        self.rel, self.facts, self.stack = rel, facts, []
        self.assigns: list[dict[str, ast.AST]] = [{}]   # per function: the last `name = <str expr>` seen

    def _where(self) -> str:
        return ".".join(self.stack) or "<module>"

    def visit_ClassDef(self, node: ast.ClassDef):
        self.stack.append(node.name)
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and len(self.stack) == 1:
                name = stmt.target.id
                if name.startswith("_") or "ClassVar" in ast.unparse(stmt.annotation):
                    continue
                self.facts.fields[f"{node.name}.{name}"] = {
                    "annotation": ast.unparse(stmt.annotation),
                    "default": None if stmt.value is None else ast.unparse(stmt.value),
                    "line": stmt.lineno}
        self.generic_visit(node)
        self.stack.pop()

    def _function(self, node):
        self.stack.append(node.name)
        self.assigns.append({})
        self.generic_visit(node)
        self.assigns.pop()
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_If(self, node: ast.If):
        if not self.stack and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            return          # type-checker declarations (envs.py's annotated defaults), not runtime values
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            self.assigns[-1][name] = node.value
            if not self.stack and name.isupper():
                self._constant(name, node.value, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign):
        if not self.stack and isinstance(node.target, ast.Name) and node.target.id.isupper() and node.value:
            self._constant(node.target.id, node.value, node.lineno)
        self.generic_visit(node)

    def _constant(self, name: str, value: ast.AST, line: int):
        try:
            lit = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return
        if isinstance(lit, (int, float, str, bool)):
            self.facts.constants[name] = {"value": lit, "line": line}

    def _message(self, args: list[ast.expr]) -> str:
        if not args:
            return ""
        first = args[0]
        if isinstance(first, ast.Name) and first.id in self.assigns[-1]:
            first = self.assigns[-1][first.id]
        return template(first)

    def visit_Raise(self, node: ast.Raise):
        exc = node.exc
        if exc is not None:
            if isinstance(exc, ast.Call):
                kind, msg = ast.unparse(exc.func), self._message(exc.args)
            else:
                kind, msg = ast.unparse(exc), ""
            self.facts.raises.append(Site(self.rel, node.lineno, self._where(), kind, msg))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute):
            if func.attr in LOG_CALLS and node.args:
                msg = self._message(node.args)
                if "deprecat" in msg.lower():
                    self.facts.deprecations.append(
                        Site(self.rel, node.lineno, self._where(), ast.unparse(func), msg))
            if func.attr == "add_argument":
                for a in node.args:
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--"):
                        self.facts.flags.setdefault(a.value, node.lineno)
        self.generic_visit(node)


def scan_file(path: Path, rel: str) -> FileFacts:
    facts = FileFacts()
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
    except SyntaxError as exc:
        raise ReleaseDiffError(f"{rel}: not Python this interpreter parses ({exc})") from exc
    _Walker(rel, facts).visit(tree)
    return facts


def env_vars(pkg: Path, spec: tuple[str, str, str]) -> dict[str, dict]:
    """Environment variable -> {default (source of its definition), line}."""
    rel, style, name = spec
    path = pkg / rel
    if not path.is_file():
        return {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, dict] = {}
    for node in tree.body:
        if style == "dict" and isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == name and isinstance(node.value, ast.Dict):
                for k, v in zip(node.value.keys, node.value.values):
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        body = v.body if isinstance(v, ast.Lambda) else v
                        out[k.value] = {"default": ast.unparse(body), "line": k.lineno}
        if style == "class" and isinstance(node, ast.ClassDef) and node.name == name:
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id.isupper():
                    out[stmt.targets[0].id] = {"default": ast.unparse(stmt.value), "line": stmt.lineno}
    return out


@dataclass
class Release:
    engine: str
    version: str
    root: Path          # the directory holding the package directory
    label: str          # how the tree was obtained (wheel name / path), for the output

    @property
    def pkg(self) -> Path:
        return self.root / SCOPES[self.engine]["package"]


def scan(rel: Release) -> dict:
    spec = SCOPES[rel.engine]
    if not rel.pkg.is_dir():
        raise ReleaseDiffError(f"{rel.engine} {rel.version}: no {spec['package']}/ under {rel.root}")
    files: dict[str, FileFacts] = {}
    for pattern in spec["files"]:
        for p in sorted(rel.pkg.glob(pattern)):
            r = p.relative_to(rel.pkg).as_posix()
            if p.is_file() and r not in files:
                files[r] = scan_file(p, r)
    args_file, args_class = spec["args_class"]
    static_flags: dict[str, str] = {}
    for r, facts in files.items():
        for flag, line in facts.flags.items():
            static_flags.setdefault(flag, f"{r}:{line}")
    if args_file in files:
        for key, meta in files[args_file].fields.items():
            cls, _, name = key.partition(".")
            if cls == args_class:
                static_flags.setdefault("--" + name.replace("_", "-"), f"{args_file}:{meta['line']}")
    return {
        "files": sorted(files),
        "raises": [s for f in files.values() for s in f.raises],
        "deprecations": [s for f in files.values() for s in f.deprecations],
        "fields": {f"{r}::{k}": v for r, f in files.items() for k, v in f.fields.items()},
        "constants": {f"{r}::{k}": v for r, f in files.items() for k, v in f.constants.items()},
        "env": env_vars(rel.pkg, spec["envs"]),
        "static_flags": static_flags,
    }


# ----------------------------------------------------------------------------------------------- comparison

SIMILAR = 0.7     # difflib ratio above which an unmatched old/new pair of messages is one "changed" site
SIMILAR_ELSEWHERE = 0.85    # the same, for a pair in two different files


def _ratio(a: Site, b: Site) -> float:
    return difflib.SequenceMatcher(None, a.kind + " " + a.message, b.kind + " " + b.message).ratio()


def diff_sites(old: list[Site], new: list[Site], vold: str, vnew: str) -> dict:
    """new / removed / changed / moved sites (see the module doc); multiset-matched so duplicated messages
    count. Passes: same (file, function, type, message) = unchanged; same (type, message) elsewhere = moved
    (e.g. a check split out of ``__post_init__``); similar message in the same file = changed."""
    def unmatched(a: list[Site], b: list[Site], key) -> list[Site]:
        kb, seen, out = Counter(key(s) for s in b), Counter(), []
        for s in a:
            seen[key(s)] += 1
            if seen[key(s)] > kb[key(s)]:
                out.append(s)
        return out

    left_old, left_new = unmatched(old, new, Site.key), unmatched(new, old, Site.key)
    moved = []
    pool: dict[tuple, list[Site]] = defaultdict(list)
    for s in left_old:
        pool[(s.kind, s.message)].append(s)
    rest_new = []
    for s in left_new:
        cands = pool.get((s.kind, s.message))
        if cands and s.message:
            moved.append({"old": cands.pop(0).as_json(vold), "new": s.as_json(vnew)})
        else:
            rest_new.append(s)
    by_file: dict[str, list[Site]] = defaultdict(list)
    for c in pool.values():
        for s in c:
            by_file[s.file].append(s)
    changed, added = [], []
    for s in rest_new:
        cands = by_file.get(s.file, [])
        if not cands or max(_ratio(c, s) for c in cands) < SIMILAR:
            # a check moved to another file and reworded (e.g. into a per-method config module)
            elsewhere = [c for f, cs in by_file.items() if f != s.file for c in cs]
            near = max(elsewhere, key=lambda c: _ratio(c, s), default=None)
            if near is not None and _ratio(near, s) >= SIMILAR_ELSEWHERE:
                by_file[near.file].remove(near)
                changed.append({"old": near.as_json(vold), "new": s.as_json(vnew)})
                continue
        best, ratio = None, 0.0
        for c in cands:
            r = _ratio(c, s)
            if r > ratio:
                best, ratio = c, r
        if best is not None and ratio >= SIMILAR:
            cands.remove(best)
            changed.append({"old": best.as_json(vold), "new": s.as_json(vnew)})
        else:
            added.append(s.as_json(vnew))
    removed = sorted((s.as_json(vold) for c in by_file.values() for s in c), key=lambda x: (x["file"], x["line"]))
    return {"new": added, "removed": removed, "changed": changed, "moved": moved}


def diff_maps(old: dict[str, dict], new: dict[str, dict], keys: tuple[str, ...], vold: str, vnew: str,
              where=lambda k, m: None) -> dict:
    """Added / removed / changed entries of two name -> {attrs..., line} maps, comparing ``keys``."""
    def at(k, m, v):
        loc = where(k, m)
        return f"{loc}@{v}" if loc else None

    added = [{"name": k, **{a: new[k].get(a) for a in keys}, "at": at(k, new[k], vnew)}
             for k in sorted(new.keys() - old.keys())]
    removed = [{"name": k, **{a: old[k].get(a) for a in keys}, "at": at(k, old[k], vold)}
               for k in sorted(old.keys() - new.keys())]
    changed = []
    for k in sorted(old.keys() & new.keys()):
        diffs = {a: {"old": old[k].get(a), "new": new[k].get(a)} for a in keys if old[k].get(a) != new[k].get(a)}
        if diffs:
            changed.append({"name": k, **diffs, "at": at(k, new[k], vnew), "was_at": at(k, old[k], vold)})
    return {"added": added, "removed": removed, "changed": changed}


def _file_line(k: str, m: dict) -> str:
    return f"{k.split('::')[0]}:{m['line']}"


def _without_locations(v):
    """A dump value without the declaration sites (``at``: file:line@version) the dump records for config fields:
    a line that moved between releases is not a change of the option."""
    if isinstance(v, dict):
        return {k: _without_locations(x) for k, x in v.items() if k != "at"}
    if isinstance(v, list):
        return [_without_locations(x) for x in v]
    return v


def dump_options(doc: dict) -> dict[str, dict]:
    """A parser dump's options by their first long flag."""
    out = {}
    for o in doc["parser"]["options"]:
        longs = [f for f in o.get("flags") or [] if f.startswith("--")] or o.get("flags") or [o["dest"]]
        out[longs[0]] = {"flags": o.get("flags"), "default": o.get("default"), "choices": o.get("choices"),
                         "action": o.get("action"), "nargs": o.get("nargs"), "type": _without_locations(o.get("type"))}
    return out


def committed_dump(engine: str, version: str) -> Path | None:
    p = REPO / "gpustack_k3" / "catalog" / "data" / "engines" / f"{engine}-{version}-options.json"
    return p if p.is_file() else None


def diff_flags(old: Release, new: Release, so: dict, sn: dict, old_dump: Path | None, new_dump: Path | None) -> dict:
    od = old_dump or committed_dump(old.engine, old.version)
    nd = new_dump or committed_dump(new.engine, new.version)
    if od and nd:
        o, n = dump_options(json.loads(od.read_text())), dump_options(json.loads(nd.read_text()))
        d = diff_maps(o, n, ("flags", "default", "choices", "action", "nargs", "type"), old.version, new.version)
        return {"source": "parser dumps", "old_dump": _show(od), "new_dump": _show(nd), **d}
    missing = [f"{r.engine} {r.version}" for r, p in ((old, od), (new, nd)) if not p]
    o = {k: {"line": v} for k, v in so["static_flags"].items()}
    n = {k: {"line": v} for k, v in sn["static_flags"].items()}
    d = diff_maps(o, n, (), old.version, new.version, where=lambda k, m: m["line"])
    return {"source": "static (no parser dump of " + ", ".join(missing) + "): literal add_argument flags and "
            f"{SCOPES[old.engine]['args_class'][1]} fields; defaults and choices not compared", **d}


def _show(p: Path) -> str:
    p = p.resolve()
    return p.relative_to(REPO).as_posix() if p.is_relative_to(REPO) else p.name


def release_diff(old: Release, new: Release, old_dump: Path | None = None, new_dump: Path | None = None) -> dict:
    if old.engine != new.engine:
        raise ReleaseDiffError(f"two engines: {old.engine} and {new.engine}")
    so, sn = scan(old), scan(new)
    vo, vn = old.version, new.version
    return {
        "format": FORMAT,
        "engine": old.engine,
        "old": {"version": vo, "source": old.label},
        "new": {"version": vn, "source": new.label},
        "made_by": "tools/release_diff.py",
        "scope": {"files_old": len(so["files"]), "files_new": len(sn["files"]),
                  "globs": SCOPES[old.engine]["files"],
                  "files_added": sorted(set(sn["files"]) - set(so["files"])),
                  "files_removed": sorted(set(so["files"]) - set(sn["files"]))},
        "raises": diff_sites(so["raises"], sn["raises"], vo, vn),
        "deprecations": diff_sites(so["deprecations"], sn["deprecations"], vo, vn),
        "constants": diff_maps(so["constants"], sn["constants"], ("value",), vo, vn, where=_file_line),
        "env": diff_maps(so["env"], sn["env"], ("default",), vo, vn,
                         where=lambda k, m: f"{SCOPES[old.engine]['envs'][0]}:{m['line']}"),
        "fields": diff_maps(so["fields"], sn["fields"], ("annotation", "default"), vo, vn, where=_file_line),
        "flags": diff_flags(old, new, so, sn, old_dump, new_dump),
    }


def _cite_re(version: str):
    import re

    return re.compile(rf"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.py):(\d+)(?:-(\d+))?@{re.escape(version)}(?![\w.-])")


def citations(root: Path, version: str, files: list[str]) -> dict[tuple[str, int, int], list[str]]:
    """(scope file, first line, last line) -> where under ``root`` it is cited as ``path:line[-line]@version``
    (the path may be shortened to a suffix of the scope file's path, or carry the package prefix)."""
    rx = _cite_re(version)
    out: dict[tuple[str, int, int], list[str]] = defaultdict(list)
    for p in sorted(root.rglob("*")):
        if p.suffix not in (".py", ".yaml", ".json", ".md") or not p.is_file():
            continue
        for n, text in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in rx.finditer(text):
                path = m[1].split("/", 1)[1] if m[1].startswith(("vllm/", "sglang/")) else m[1]
                match = [f for f in files if f == path or f.endswith("/" + path)]
                if len(match) == 1:
                    a = int(m[2])
                    out[(match[0], a, int(m[3] or a))].append(f"{p.relative_to(root.parent).as_posix()}:{n}")
    return out


def rule_coverage(doc: dict, so: dict, sn: dict, root: Path) -> dict:
    """What the rules under ``root`` cite of the old release's raise sites, and what each became; and the new
    release's new or changed raise sites no citation @new names (what has no rule yet)."""
    vo, vn = doc["old"]["version"], doc["new"]["version"]
    fate: dict[tuple[str, int], tuple[str, str | None]] = {}
    by_key: dict[tuple, list[Site]] = defaultdict(list)
    for s in sn["raises"]:
        by_key[s.key()].append(s)
    for s in so["raises"]:
        twins = by_key.get(s.key())
        if twins:       # same file, function, type and message: the site itself, maybe at another line
            t = twins.pop(0)
            fate[(s.file, s.line)] = ("unchanged", f"{t.file}:{t.line}@{vn}")
    for kind in ("changed", "moved"):
        for c in doc["raises"][kind]:
            fate[(c["old"]["file"], c["old"]["line"])] = (kind, c["new"]["at"])
    for r in doc["raises"]["removed"]:
        fate[(r["file"], r["line"])] = ("removed", None)
    removed_fields = {x["name"] for x in doc["fields"]["removed"]}
    old_cites = []
    for (f, a, b), where in sorted(citations(root, vo, so["files"]).items()):
        for s in so["raises"]:
            if s.file == f and a <= s.line <= b:
                status, new_at = fate.get((s.file, s.line), ("removed", None))
                old_cites.append({"cite": f"{f}:{a}" + (f"-{b}" if b != a else "") + f"@{vo}", "cited_in": where,
                                  "site": f"{s.file}:{s.line}@{vo}", "message": s.message, "status": status,
                                  "new_at": new_at})
        for name, meta in so["fields"].items():
            file = name.split("::")[0]
            if file == f and a <= meta["line"] <= b and name in removed_fields:
                old_cites.append({"cite": f"{f}:{a}" + (f"-{b}" if b != a else "") + f"@{vo}", "cited_in": where,
                                  "site": f"{file}:{meta['line']}@{vo}", "message": f"field {name.split('::')[1]}",
                                  "status": "field removed", "new_at": None})
    cited_new = citations(root, vn, sn["files"])
    uncited = [x for x in doc["raises"]["new"] + [c["new"] for c in doc["raises"]["changed"]]
               if not any(f == x["file"] and a <= x["line"] <= b for (f, a, b) in cited_new)]
    return {"scanned": root.name + "/", "old_citations": old_cites, "no_rule_yet": uncited}


# ----------------------------------------------------------------------------------------------- output

def _counts(d: dict) -> str:
    return ", ".join(f"{len(v)} {k}" for k, v in d.items() if isinstance(v, list))


def _one(s: str, limit: int = 160) -> str:
    s = " ".join(s.split()).replace("|", "\\|")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _dump_args(doc: dict) -> str:
    """The --old-dump/--new-dump arguments that reproduce ``doc`` (none for the catalog's own dumps)."""
    out = ""
    for side in ("old", "new"):
        p = doc["flags"].get(f"{side}_dump")
        if p and not p.startswith("gpustack_k3/"):
            out += f" --{side}-dump {p}"
    return out


def markdown(doc: dict) -> str:
    e, vo, vn = doc["engine"], doc["old"]["version"], doc["new"]["version"]
    L = [f"# {e} {vo} → {vn}: what the validation code changed", "",
         f"Made by `python3 -m tools.release_diff {e} {vo} {vn}{_dump_args(doc)} --write docs/releases` from "
         f"{doc['old']['source']} "
         f"and {doc['new']['source']} (the wheels' Python sources, read with `ast`; nothing imported). "
         f"Scope: {doc['scope']['files_new']} files ({', '.join('`' + g + '`' for g in doc['scope']['globs'])}).",
         "", "| what | counts |", "|---|---|"]
    for k in ("raises", "deprecations", "constants", "env", "fields", "flags"):
        L.append(f"| {k} | {_counts(doc[k])} |")
    L.append("")
    if doc["scope"]["files_added"] or doc["scope"]["files_removed"]:
        L += ["Files added: " + (", ".join(f"`{f}`" for f in doc["scope"]["files_added"]) or "none") + "; removed: "
              + (", ".join(f"`{f}`" for f in doc["scope"]["files_removed"]) or "none") + ".", ""]
    for title, key in (("Raise sites", "raises"), ("Deprecation warnings", "deprecations")):
        d = doc[key]
        L += [f"## {title}", ""]
        for label, items in (("new", d["new"]), ("removed", d["removed"])):
            L += [f"### {label} ({len(items)})", ""]
            L += [f"- `{s['at']}` {s['where']}: {s['kind']}: {_one(s['message'])}" for s in items] or ["none"]
            L.append("")
        L += [f"### changed ({len(d['changed'])})", ""]
        L += [f"- `{c['new']['at']}` (was `{c['old']['at']}`) {c['new']['where']}: {c['new']['kind']}: "
              f"{_one(c['old']['message'], 110)} → {_one(c['new']['message'], 110)}" for c in d["changed"]] or ["none"]
        L += ["", f"### moved to another function or file, message unchanged ({len(d['moved'])})", ""]
        L += [f"- `{c['new']['at']}` {c['new']['where']} (was `{c['old']['at']}` {c['old']['where']}): "
              f"{_one(c['new']['message'], 90)}" for c in d["moved"]] or ["none"]
        L.append("")
    for title, key, attrs in (("Module constants", "constants", ("value",)),
                              ("Environment variables", "env", ("default",)),
                              ("Config / argument fields", "fields", ("annotation", "default")),
                              ("Flags", "flags", ("default", "choices", "action", "nargs", "type"))):
        d = doc[key]
        L += [f"## {title}", ""]
        if key == "flags":
            L += [f"Source: {d['source']}.", ""]
            for v, why in (d.get("dump_failed") or {}).items():
                L += [f"Parser dump of {v} failed (tools/engine_parsers/dump.py): {_one(why, 200)}", ""]
        for label in ("added", "removed"):
            L += [f"### {label} ({len(d[label])})", ""]
            L += [f"- `{x['name']}`" + (f" (`{x['at']}`)" if x.get("at") else "")
                  + "".join(f" {a}=`{_one(json.dumps(x[a]) if not isinstance(x[a], str) else x[a], 90)}`"
                            for a in attrs if x.get(a) is not None) for x in d[label]] or ["none"]
            L.append("")
        L += [f"### changed ({len(d['changed'])})", ""]
        for x in d["changed"]:
            parts = [f"{a}: `{_one(str(x[a]['old']), 80)}` → `{_one(str(x[a]['new']), 80)}`" for a in attrs if a in x]
            L.append(f"- `{x['name']}`" + (f" (`{x['at']}`)" if x.get("at") else "") + ": " + "; ".join(parts))
        if not d["changed"]:
            L.append("none")
        L.append("")
    if "rules" in doc:
        r = doc["rules"]
        moved = [c for c in r["old_citations"] if c["status"] != "unchanged" or c["new_at"] is None]
        L += [f"## Rules: citations of {vo} raise sites in {r['scanned']}", "",
              f"{len(r['old_citations'])} cited sites; {len(moved)} removed, changed or moved "
              "(the rules citing them need review):", ""]
        L += [f"- `{c['cite']}` ({', '.join(c['cited_in'])}): {c['status']}"
              + (f" → `{c['new_at']}`" if c["new_at"] else "") + f": {_one(c['message'], 100)}" for c in moved] or ["none"]
        L += ["", "Carried over unchanged (re-cite at the new line): "
              + (", ".join(f"`{c['cite']}` → `{c['new_at']}`" for c in r["old_citations"]
                           if c["status"] == "unchanged" and c["new_at"]) or "none"), "",
              f"## No rule yet: new or changed {vn} raise sites nothing cites @{vn} ({len(r['no_rule_yet'])})", ""]
        L += [f"- `{x['at']}` {x['where']}: {_one(x['message'])}" for x in r["no_rule_yet"]] or ["none"]
    return "\n".join(L).rstrip() + "\n"


def fetch(engine: str, version: str) -> None:
    """``pip download --no-deps`` the release's wheel into the cache, as .ci/setup_engine_wheels.sh does."""
    import subprocess

    from tools.engine_parsers import dump as dump_tool

    dest = dump_tool.wheels_dir()
    if list(dest.glob(f"{dump_tool.DIST[engine]}-{version}-*.whl")):
        return
    dest.mkdir(parents=True, exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", f"{dump_tool.DIST[engine]}=={version}", "-d", str(dest)],
                       capture_output=True, text=True, timeout=1800, check=False)
    if p.returncode != 0:
        raise ReleaseDiffError(f"pip download {engine}=={version} failed: {p.stderr.strip()[-500:]}")


def dump_parser(engine: str, version: str, out: Path) -> str | None:
    """The release's parser dump (tools/engine_parsers/dump.py) written to ``out``; the reason when it fails."""
    from tools.engine_parsers import dump as dump_tool

    try:
        dump_tool.write(dump_tool.dump(engine, version), out)
    except dump_tool.DumpError as exc:
        return str(exc).strip().splitlines()[-1][:300]
    return None


def locate(engine: str, version: str) -> Release:
    """The release unpacked from the wheel cache (tools/engine_parsers/dump.py's unpack, read-only)."""
    from tools.engine_parsers import dump as dump_tool

    try:
        wheel = dump_tool.find_wheel(engine, version)
    except dump_tool.DumpError as exc:
        raise ReleaseDiffError(str(exc)) from exc
    root, _ = dump_tool.unpack(wheel)
    return Release(engine, version, root, wheel.name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tools.release_diff", description=__doc__.split("\n")[0])
    ap.add_argument("engine", choices=sorted(SCOPES))
    ap.add_argument("old", metavar="OLD_VERSION")
    ap.add_argument("new", metavar="NEW_VERSION")
    ap.add_argument("--old-tree", type=Path, help="an unpacked OLD release (the directory holding the package)")
    ap.add_argument("--new-tree", type=Path, help="an unpacked NEW release")
    ap.add_argument("--old-dump", type=Path, help="OLD's parser dump (default: the catalog's committed one)")
    ap.add_argument("--new-dump", type=Path, help="NEW's parser dump (default: the catalog's committed one)")
    ap.add_argument("--fetch", action="store_true", help="pip download a release's wheel when the cache lacks it")
    ap.add_argument("--dump-parser", type=Path, metavar="DIR",
                    help="dump the parser of a release the catalog has no dump of into DIR (tools/engine_parsers/"
                         "dump.py) and diff the flags from it; when that fails the static flag list is used")
    ap.add_argument("--rules", type=Path, metavar="DIR", nargs="?", const=REPO / "gpustack_k3",
                    help="also list what the files under DIR (default: gpustack_k3/) cite of OLD's raise sites and "
                         "what each became, and NEW's new or changed raise sites nothing cites @NEW (no rule yet)")
    ap.add_argument("-o", "--output", choices=("md", "json"), default="md", help="stdout format")
    ap.add_argument("--write", type=Path, metavar="DIR", help="also write ENGINE-OLD-to-NEW.{json,md} into DIR")
    args = ap.parse_args(argv)
    dump_failures: dict[str, str] = {}
    try:
        if args.fetch:
            for v, tree in ((args.old, args.old_tree), (args.new, args.new_tree)):
                if tree is None:
                    fetch(args.engine, v)
        if args.dump_parser:
            args.dump_parser.mkdir(parents=True, exist_ok=True)
            for v, attr in ((args.old, "old_dump"), (args.new, "new_dump")):
                if getattr(args, attr) is None and committed_dump(args.engine, v) is None:
                    out = args.dump_parser / f"{args.engine}-{v}-options.json"
                    why = dump_parser(args.engine, v, out)
                    if why is None:
                        setattr(args, attr, out)
                    else:
                        dump_failures[v] = why
        old = (Release(args.engine, args.old, args.old_tree, args.old_tree.name) if args.old_tree
               else locate(args.engine, args.old))
        new = (Release(args.engine, args.new, args.new_tree, args.new_tree.name) if args.new_tree
               else locate(args.engine, args.new))
        for p in (args.old_dump, args.new_dump):
            if p and not p.is_file():
                raise ReleaseDiffError(f"no parser dump at {p}")
        doc = release_diff(old, new, args.old_dump, args.new_dump)
        if args.rules:
            doc["rules"] = rule_coverage(doc, scan(old), scan(new), args.rules.resolve())
        if dump_failures:
            doc["flags"]["dump_failed"] = dump_failures
    except ReleaseDiffError as exc:
        print(f"release_diff: {exc}", file=sys.stderr)
        return 2
    text_json = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    text_md = markdown(doc)
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        stem = f"{args.engine}-{args.old}-to-{args.new}"
        (args.write / f"{stem}.json").write_text(text_json)
        (args.write / f"{stem}.md").write_text(text_md)
    sys.stdout.write(text_json if args.output == "json" else text_md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
