"""A coverage-driven corpus (issue 31 item 1): lines synthesized for the raise sites of a release's validation code
the corpus has not reached yet, judged with coverage on, kept when they reach a new site.

  python3 -m tools.engine_oracle.synth --release vllm-0.33.0 --seed 7919 [--base 60] [--rounds 3] \\
      [--budget 120] [--per-site 2] [--product] [--out bench/results/raise-sites-vllm-0.33.0-synth-seed7919.json]

Round 0 judges the seed lines and ``--base`` lines of the random corpus (tools/engine_oracle/corpus.py ``generate``,
exploring any parser option). Each later round takes the sites still unreached that reachability.py classes
reachable, entered functions first, and writes up to ``--per-site`` candidate lines for each (at most ``--budget``
per round): the knobs of the site's guarding conditions (tools/engine_oracle/knobs.py: the attributes, env vars and
config.json fields its ``if`` tests read and the constants they compare with), or, for a function never entered,
those of the branches around its callers, set on a line that entered the function (or a caller) when one did, else
on a seed line. A config.json field is set in a copy of the line's model directory (the oracle and the product both
read that copy). Each line's coverage is its own data file (one forked child per judged line), so a line is kept
(greedy, in judging order) when it reaches a site no kept line reached. ``--product``: gpustack-k3's verdict on every
judged line (tools/engine_oracle/product.py): misses (the release refuses, the product passes) and false refusals
(the release accepts, the product refuses), each with the line's target site and where the release raised.
Deterministic for a seed (the candidate choices; the verdicts are the release's).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpustack_k3.oracle.judge import RELEASES, cpu_python
from tools.engine_oracle import knobs as K
from tools.engine_oracle.corpus import (_flag_value, _json_of, drop_flag, generate, parser_options, return_type,
                                        schema_value, seed_lines, set_flag)
from tools.engine_oracle.knobs import substitute_property
from tools.engine_oracle.raise_sites import _root, first_line, raise_sites, validation_files
from tools.engine_oracle.reachability import _enclosing, _Index, classify

_READ = r"""
import json, sys
import coverage
out = {}
for f in json.load(sys.stdin):
    d = coverage.CoverageData(basename=f)
    d.read()
    out[f] = {s: sorted(d.lines(s) or []) for s in d.measured_files()}
print(json.dumps(out))
"""


def read_data_files(paths: list[str], cwd: str) -> dict[str, dict[str, list[int]]]:
    """Executed lines per source file of each coverage data file (coverage.py's CoverageData, in the oracle's
    interpreter, which has coverage installed)."""
    if not paths:
        return {}
    res = subprocess.run([str(cpu_python()), "-I", "-c", _READ], input=json.dumps(paths), capture_output=True,
                         text=True, cwd=cwd, check=True)
    return json.loads(res.stdout)


def public_configs() -> dict[str, dict]:
    """file stem -> config.json of every model family aiconfigurator-core ships (``aiconfigurator_core/model_configs/
    <stem>_config.json``; the ``*_hf_quant`` files are quantization sidecars, not config.json), read from the installed
    package without importing it and never copied into the repository; {} without the package."""
    from importlib.util import find_spec

    try:
        spec = find_spec("aiconfigurator_core")
    except (ImportError, ValueError):
        return {}
    out = {}
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        for f in sorted((Path(root) / "model_configs").glob("*_config.json")):
            stem = f.name[: -len("_config.json")]
            if stem.endswith("_hf_quant"):
                continue
            try:
                cfg = json.loads(f.read_text())
            except ValueError:
                continue
            if isinstance(cfg, dict) and config_arch(cfg):
                out[stem] = cfg
    return out


def compact_variant(cfg: dict, public: dict[str, dict]):
    """A report's ``model_variants`` entry: a config.json that is one of aiconfigurator-core's public files with some
    keys set (a public model's line, a config.json copy of it or of a model shape, which are public files too) is kept
    as ``{"__public__": stem, "__set__": {key: value}, "__text_set__": {...}}``, the public text itself never copied
    into a report (the repository); any other config.json as it is. ``expand_variant`` inverts it."""
    best, size = cfg, len(json.dumps(cfg))
    for stem, pc in public.items():
        if any(k not in cfg for k in pc):
            continue
        top = {k: v for k, v in cfg.items() if k != "text_config" and pc.get(k, _MISSING) != v}
        entry = {"__public__": stem, "__set__": top}
        tc, pt = cfg.get("text_config"), pc.get("text_config")
        if tc != pt:
            if not (isinstance(tc, dict) and isinstance(pt, dict)) or any(k not in tc for k in pt):
                continue
            entry["__text_set__"] = {k: v for k, v in tc.items() if pt.get(k, _MISSING) != v}
        n = len(json.dumps(entry))
        if n < size:
            best, size = entry, n
    return best


def expand_variant(entry: dict, public: dict[str, dict]) -> dict | None:
    """The config.json of a ``model_variants`` entry (``compact_variant``); None when it names a public file the
    installed aiconfigurator-core does not hold (the line cannot be judged again as it was)."""
    if "__public__" not in entry:
        return entry
    base = public.get(entry["__public__"])
    if base is None:
        return None
    cfg = json.loads(json.dumps(base))
    cfg.update(entry.get("__set__") or {})
    if entry.get("__text_set__"):
        cfg["text_config"].update(entry["__text_set__"])
    return cfg


_MISSING = object()


def config_arch(cfg: dict) -> str | None:
    """A config.json's architecture (``architectures[0]``, else its ``text_config``'s)."""
    archs = cfg.get("architectures") or (cfg.get("text_config") or {}).get("architectures") or []
    return archs[0] if archs and isinstance(archs[0], str) else None


def config_heads(cfg: dict) -> int | None:
    for c in (cfg, cfg.get("text_config") or {}, cfg.get("llm_config") or {}):
        h = c.get("num_attention_heads")
        if isinstance(h, int) and h > 0:
            return h
    return None


# release analysis cache (h-synth11): key -> what Synth.__init__ derives from the release's files and the parser dump
_ANALYSES: dict[tuple, dict] = {}
# the attributes that analysis sets (their values: fresh containers per Synth, the AST nodes and _Index shared, unchanged)
_ANALYSIS_ATTRS = ("sites", "trees", "fields", "props", "resolved_from", "defaults", "aliases_t", "compared", "index",
                   "site_at")
# the knobs module's tables the analysis fills (K.learn_*), restored on every Synth as a fresh analysis would set them
_KNOB_TABLES = ("OPTION_CLASSES", "FIELD_OWNERS", "CONSTANTS", "ENUMS")


def _stamp(path) -> tuple:
    """A file's identity for the cache: path, mtime (ns), size; (path, None, None) for no file."""
    try:
        st = os.stat(path)
    except OSError:
        return (str(path), None, None)
    return (str(path), st.st_mtime_ns, st.st_size)


def _stamps(paths) -> tuple:
    return tuple(_stamp(p) for p in paths)


def _analysis_key(release: str, root: Path, files: list, dump: Path) -> tuple:
    """The release, its unpacked directory, and the stamp of every validation file and of the parser dump: a changed
    wheel or file is another key. (The modules those files import are stamped in the entry: _import_candidates.)"""
    return (release, str(root), _stamps(files), _stamp(dump))


def _import_candidates(trees, root: Path) -> list[Path]:
    """Every file ``knobs.imported_trees`` may read for ``trees`` (both ``mod.py`` and ``mod/__init__.py`` of each
    vllm/sglang module imported): the entry's stamps of them tell a changed, added or removed module."""
    return [f for files in K.imported_candidates(trees, root) for f in files]


def _copy(v):
    """A fresh container (one level deep for a dict of containers), so a Synth's changes stay its own."""
    if isinstance(v, dict):
        return {k: _copy_leaf(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy_leaf(x) for x in v]
    return v


def _copy_leaf(x):
    return dict(x) if isinstance(x, dict) else list(x) if isinstance(x, list) else set(x) if isinstance(x, set) else x


def _keep_analysis(sy: "Synth") -> dict:
    imported = _import_candidates(sy.trees.values(), sy.root)
    return {"attrs": {a: _copy(getattr(sy, a)) for a in _ANALYSIS_ATTRS},
            "tables": {t: _copy(getattr(K, t)) for t in _KNOB_TABLES},
            "imported": imported, "imported_stamps": _stamps(imported)}


def _restore_analysis(sy: "Synth", cached: dict) -> None:
    for a, v in cached["attrs"].items():
        setattr(sy, a, _copy(v))
    for t, v in cached["tables"].items():
        table = getattr(K, t)
        table.clear()
        table.update(_copy(v))


class Synth:
    def __init__(self, release: str, seed: int, data_dir: Path, product: bool = False):
        """One release's raise sites, its parser's options, and an oracle measuring coverage (``with``)."""
        self.release, self.seed = release, seed
        self.engine, self.version, _w = RELEASES[release]
        self.rnd = random.Random(f"synth:{release}:{seed}")
        self.root = _root(release)
        self.files = validation_files(release, self.root)
        self.data_dir = data_dir
        self.variants = data_dir / "models"
        self.records: list[dict] = []
        self.product = product
        opts = parser_options(release)
        self.dests = {o["dest"]: o for o in opts}
        from gpustack_k3.catalog.loader import DATA

        dump = DATA / "engines" / f"{self.engine}-{self.version}-options.json"
        allopts = json.loads(dump.read_text())["parser"]["options"] if dump.is_file() else []
        self.json_opts = {o["dest"]: o for o in allopts if o.get("flags") and _is_json(o)}
        # the options the random corpus leaves out (paths, ports, URLs, keys, names: corpus._FLAG_SKIP) are knobs
        # too when a raise site's condition reads them: set to a value of their kind (free_value)
        self.free_dests = set()
        self.all_dests = {o["dest"] for o in allopts if o.get("flags")}
        self.serve_configs: dict[str, str] = {}
        for o in allopts:
            if o.get("flags") and o.get("action") != "help" and o["dest"] not in self.dests and \
                    o["dest"] not in self.json_opts and o["dest"] not in ("model", "model_tag", "config", "help"):
                self.dests[o["dest"]] = o
                self.free_dests.add(o["dest"])
        # the release's analysis (raise sites, parsed validation files, knobs) is a pure function of the files it
        # reads and of the parser dump: built once per process and key (_analysis_key), copied into each Synth
        key = _analysis_key(release, self.root, self.files, dump)
        cached = _ANALYSES.get(key)
        if cached is not None and _stamps(cached["imported"]) == cached["imported_stamps"]:
            _restore_analysis(self, cached)
        else:
            self.sites = raise_sites(self.files)
            self.trees = {str(f): ast.parse(Path(f).read_text(errors="replace")) for f in self.files}
            self.fields = K.class_fields(self.trees.values())
            self.props = K.learn_properties(self.trees.values())
            self.learn_resolved_from()
            K.learn_option_classes(self.json_opts)
            K.learn_field_owners(self.fields, self.json_opts)
            self.defaults = K.class_defaults(self.trees.values())
            # the imported modules' constants first, the validation files' own win a name both define
            K.learn_constants(K.imported_trees(self.trees.values(), self.root) + list(self.trees.values()))
            self.aliases_t = K.type_aliases(self.trees.values())
            self.compared = K.compared_constants(self.trees.values())
            self.index = _Index([Path(f) for f in self.files])
            self.site_at = {f"{os.path.relpath(x['file'], self.root)}:{x['line']}": i for i, x in enumerate(self.sites)}
            _ANALYSES[key] = _keep_analysis(self)
        self._oracle = None
        self.aliases: dict[str, str] = {}
        self.blockers: dict[str, list[int]] = {}
        self.blocker_msgs: dict[str, list[str]] = {}
        self.failed_models: dict[str, set] = {}
        self.tried: dict[int, int] = {}
        # the public config.json files of aiconfigurator-core (model families beyond the catalog's and the four
        # shapes): a site whose conditions test the architecture gets a line on a model of that architecture, not a
        # renamed config of another family
        self.public = public_configs()
        self.public_by_arch: dict[str, list[str]] = {}
        for stem, cfg in self.public.items():
            self.public_by_arch.setdefault(config_arch(cfg), []).append(stem)
        self._arch_cache: dict[str, str | None] = {}

    # ------------------------------------------------------------------ judging
    def __enter__(self):
        from gpustack_k3.oracle.judge import Oracle

        self._oracle = Oracle(self.release, coverage={"dir": str(self.data_dir), "include": [str(f) for f in self.files]})
        self.aliases = dict(self._oracle.aliases)
        return self

    def __exit__(self, *exc):
        if self._oracle is not None:
            self._oracle.close()

    def judge(self, lines: list[dict], round_no: int) -> list[dict]:
        recs, pending = [], []
        for line in lines:
            before = set(os.listdir(self.data_dir))
            hw = line["gpu_type"] if line["gpu_type"] != "cpu" else "b300"
            ans = self._oracle.judge_line(line["argv"], line["env"], hw, line.get("gpus"))
            new = sorted(f for f in set(os.listdir(self.data_dir)) - before if f.startswith(".coverage"))
            rec = {"line": line, "verdict": ans.get("verdict"), "reason": ans.get("reason"),
                   "message": (ans.get("message") or ans.get("detail") or "")[:300], "where": ans.get("where"),
                   "round": round_no, "data": [str(self.data_dir / f) for f in new],
                   "answer": ans}   # the oracle's whole answer (stage, stand-ins), for records in the differential's form
            recs.append(rec)
            pending += rec["data"]
        cov = read_data_files(pending, str(self.data_dir))
        for rec in recs:
            ex: dict[str, set] = {}
            for d in rec.pop("data"):
                for f, ls in (cov.get(d) or {}).items():
                    ex.setdefault(f, set()).update(ls)
            rec["executed"] = ex
            rec["sites"] = {i for i, s in enumerate(self.sites) if s["line"] in ex.get(s["file"], ())}
        self.records += recs
        # what stopped a line short of its target: the site the release raised at, avoided by the next round
        for rec in recs:
            t, w = rec["line"].get("target"), rec.get("where")
            if t and rec["verdict"] == "refused" and w != t and rec["message"]:
                self.blocker_msgs.setdefault(t, []).append(rec["message"])
                self.failed_models.setdefault(t, set()).add(_model_of(rec["line"]))
            if t and w and w != t and w in self.site_at:
                self.blockers.setdefault(t, [])
                if self.site_at[w] not in self.blockers[t]:
                    self.blockers[t].append(self.site_at[w])
        return recs

    def executed(self) -> dict[str, set]:
        out: dict[str, set] = {}
        for r in self.records:
            for f, ls in r["executed"].items():
                out.setdefault(f, set()).update(ls)
        return out

    def reached(self) -> set[int]:
        return set().union(*(r["sites"] for r in self.records)) if self.records else set()

    # ------------------------------------------------------------------ synthesis
    seed_json: dict = {}
    seed_values: dict = {}

    def learn_seeds(self, seeds: list[dict]) -> None:
        """The JSON options' values on the presets' lines: a valid object per option, and per key the values the
        presets give (a draft model's path, a method): what a key without a usable constant is set to first."""
        self.seed_json, self.seed_values = {}, {}
        for line in seeds:
            for dest, o in self.json_opts.items():
                v = _json_of(line["argv"], tuple(o["flags"]))
                if v:
                    self.seed_json.setdefault(dest, v)
                    for k, x in v.items():
                        vals = self.seed_values.setdefault(dest, {}).setdefault(k, [])
                        if x not in vals:
                            vals.append(x)
    def learn_history(self, reports: list[Path]) -> int:
        """What the judged lines of earlier reports of the release learnt about their targets (their ``judged``
        records: target, verdict, where the release raised, its message): the blockers to avoid, the refusals' words,
        the models a target's line was refused on, how often each site was tried (a site tried before takes other
        values first). A run continuing earlier corpora (``--corpus-from``) starts from what they learnt instead of
        learning it again. Returns the number of records read."""
        n = 0
        for rp in reports:
            doc = json.loads(Path(rp).read_text())
            if doc.get("release") != self.release:
                continue
            restored = _restore_variants(doc.get("model_variants") or {}, self.variants)
            for r in doc.get("judged") or []:
                t, w = r.get("target"), r.get("where")
                if not t:
                    continue
                n += 1
                if t in self.site_at:
                    i = self.site_at[t]
                    self.tried[i] = self.tried.get(i, 0) + 1
                if r.get("verdict") == "refused" and w != t and r.get("message"):
                    self.blocker_msgs.setdefault(t, []).append(r["message"])
                    self.failed_models.setdefault(t, set()).add(_model_of(_remap(r, restored)))
                if w and w != t and w in self.site_at:
                    self.blockers.setdefault(t, [])
                    if self.site_at[w] not in self.blockers[t]:
                        self.blockers[t].append(self.site_at[w])
        return n

    def _entered(self, rec: dict, file: str, def_line: int | None) -> bool:
        return def_line is not None and def_line in rec["executed"].get(file, ())

    def _callers(self, name: str) -> list[tuple[str, ast.AST]]:
        return [(k[0], f["node"]) for k, f in self.index.funcs.items() if name in f["calls"] or name in f["attrs"]
                and f["name"] != name]

    def targets(self, classes: list[dict]) -> list[tuple[int, str]]:
        """(site index, "entered"|"caller"|"cold") for the reachable sites not reached yet, entered first."""
        out = {"registry": [], "entered": [], "caller": [], "cold": []}
        reached = self.reached()   # the classes may predate the last round
        registry_fns: set = set()
        for i, (s, c) in enumerate(zip(self.sites, classes)):
            if c["class"] != "reachable" or i in reached:
                continue
            entered = any(self._entered(r, s["file"], s["def_line"]) for r in self.records)
            if entered:
                out["entered"].append(i)
                continue
            if s["file"] in getattr(self, "trees", {}) and K.registry_knobs(self.trees[s["file"]], s["line"]):
                # a function registered for model architectures (SGLang's model overrides): one config.json with the
                # architecture enters it; one site per function until it is entered
                if (s["file"], s["def_line"]) not in registry_fns:
                    registry_fns.add((s["file"], s["def_line"]))
                    out["registry"].append(i)
                continue
            name = s["function"].split(".")[-1]
            if name in ("__post_init__", "__init__") and "." in s["function"]:
                name = s["function"].split(".")[-2]
            callers = self._callers(name)
            if not callers and name in self.extra_called():
                # called only from the EXTRA_CALLERS files (SGLang's enum dispatch to _handle_uno), whose coverage
                # the oracle does not record: first, like a registered function, one site per function until entered
                if (s["file"], s["def_line"]) not in registry_fns:
                    registry_fns.add((s["file"], s["def_line"]))
                    out["registry"].append(i)
                continue
            hot = any(any(self._entered(r, f, first_line(n)) for r in self.records) for f, n in callers[:20])
            out["caller" if hot else "cold"].append(i)
        tried = getattr(self, "tried", {})
        for v in out.values():
            self.rnd.shuffle(v)
            # sites never tried first, then those a blocker was learnt for (the next candidate avoids it)
            v.sort(key=lambda i: (tried.get(i, 0), -len(self.blockers.get(self._where(i), []))))
        return [(i, "cold" if k == "registry" else k) for k in ("registry", "entered", "caller", "cold") for i in out[k]]

    def _where(self, i: int) -> str:
        s = self.sites[i]
        return f"{os.path.relpath(s['file'], self.root)}:{s['line']}"

    def site_knob_sets(self, i: int) -> tuple[list, list]:
        """(the knobs on the path to the raise, [the knobs around each call of its function])."""
        s = self.sites[i]
        tree = self.trees[s["file"]]
        chain = _enclosing(tree, s["line"])
        with K.local_constants(chain):
            return self._site_knob_sets(i, s, tree, chain)

    def _site_knob_sets(self, i: int, s: dict, tree, chain) -> tuple[list, list]:
        own = _merge(K.param_substitute(K.substitute_locals(K.validator_rename(
            chain, K.path_knobs(chain) + K.early_exit_knobs(chain)), chain), chain, self.trees.values()) +
            K.registry_knobs(tree, s["line"]))
        # a property of a config read through its one return expression (``use_ubatching`` -> enable_dbo,
        # ubatch_size) when the chain itself lands nowhere
        site_cls0 = s["function"].split(".")[0] if s["function"][:1].isupper() else None
        props = getattr(self, "props", {})
        lifted = []
        for kn in own:
            sub = substitute_property(kn, props) if not self._settable(kn[0], site_cls0) else None
            lifted += sub if sub else [kn]
        own = _merge(lifted)
        # the checks before the site in its blocks, on the names the path's knobs set: their values must pass them
        # (``assert cfg.max_ep_size > 0`` before a site wanting ``max_ep_size > tp_size``)
        names = {c[-1] for c, _v, _w in own}
        pre = K.param_substitute(K.substitute_locals(K.validator_rename(chain, K.precondition_knobs(chain)), chain),
                                 chain, self.trees.values())
        guards = K.param_substitute(K.substitute_locals(K.validator_rename(chain, K.guard_knobs(chain, names)), chain),
                                    chain, self.trees.values())
        # a function called before the site that may refuse the line: its first early exit on a word, taken
        callee = [k for k in K.callee_exit_knobs(chain, tree) if k[0][-1] not in names]
        own = _merge(own + [k for k in pre if k[0][-1] in names] + guards + callee)
        # a name the path only wants set (``max_ep_size is not None``) takes a value the checks before it give first
        own = [(c, [x for x in v if x not in (None, "__set__") and not str(x).startswith("__")][:1] + v, w)
               if v and v[0] == "__set__" else (c, v, w) for c, v, w in own]
        name = s["function"].split(".")[-1]
        if name in ("__post_init__", "__init__") and "." in s["function"]:
            name = s["function"].split(".")[-2]
        around = []
        if s["function"] != "<module>":
            for f, t in self.trees.items():
                around += [_merge(k) for k in K.call_knobs(t, name, _enclosing) if k]
            if not around:
                # called only from code on the config path outside the validation files (EXTRA_CALLERS: SGLang's
                # ``SpeculativeAlgorithm.handle_server_args`` -> ``_handle_uno``, spec_info.py:235-262@0.5.23)
                for t in self.extra_trees():
                    around += [_merge(k) for k in K.call_knobs(t, name, _enclosing) if k]
        return own, around[:6]

    def extra_called(self) -> set[str]:
        """The names the ``EXTRA_CALLERS`` files call (once)."""
        if getattr(self, "_extra_called", None) is None:
            self._extra_called = {n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
                                  for t in self.extra_trees() for n in ast.walk(t)
                                  if isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))}
        return self._extra_called

    def extra_trees(self) -> list:
        """The parsed ``reachability.EXTRA_CALLERS`` files of the release (once)."""
        if getattr(self, "_extra_trees", None) is None:
            from tools.engine_oracle.reachability import EXTRA_CALLERS

            if not hasattr(self, "engine") or not hasattr(self, "root"):   # a test's partial Synth
                return []
            pkg = "vllm" if self.engine == "vllm" else "sglang"
            extra = sorted({p for x in EXTRA_CALLERS[self.engine] for p in (self.root / pkg).glob(x) if p.is_file()
                            and str(p) not in self.trees})
            self._extra_trees = []
            for p in extra:
                try:
                    self._extra_trees.append(ast.parse(p.read_text(errors="replace")))
                except SyntaxError:
                    continue
        return self._extra_trees

    def base_for(self, i: int, kind: str, seeds: list[dict], need_model: bool = False) -> dict:
        s = self.sites[i]
        pool = []
        if kind == "entered":
            pool = [dict(r["line"], _accepted=r["verdict"] == "accepted") for r in self.records
                    if self._entered(r, s["file"], s["def_line"])]
        elif kind == "caller":
            name = s["function"].split(".")[-1]
            if name in ("__post_init__", "__init__") and "." in s["function"]:
                name = s["function"].split(".")[-2]
            callers = self._callers(name)[:20]
            pool = [dict(r["line"], _accepted=r["verdict"] == "accepted") for r in self.records
                    if any(self._entered(r, f, first_line(n)) for f, n in callers)]
        # a line the release accepted whole: the knobs are then the only change, so what refuses it is the target
        # (a refused line that entered the function may stop later at a check of its own)
        pool = [p for p in pool if p.get("_accepted")] or pool
        # a model a line for this site was refused on before its target: another model first
        failed = self.failed_models.get(self._where(i), set()) if hasattr(self, "failed_models") else set()
        pool = [p for p in pool if _model_of(p) not in failed] or pool
        if need_model:   # a config.json field to set: a line naming a model directory (a shape's first)
            pool = [p for p in pool if self._model_dir(p)]
            seeds = [p for p in seeds if p.get("model_config") and self._model_dir(p)] or \
                [p for p in seeds if self._model_dir(p)] or seeds
        # a model first, each as likely (the catalog's models and the shapes: a check keyed on the architecture, a
        # predicate over hf_config, needs the right one), then the plainest of its lines (fewest argv tokens, a third):
        # fewer other settings that could refuse the line before its target
        models = sorted({_model_of(p) for p in pool})
        if len(models) > 1:
            m = self.rnd.choice(models)
            pool = [p for p in pool if _model_of(p) == m]
        if len(pool) > 3:
            pool = sorted(pool, key=lambda p: (len(p["argv"]), _key(p)))[:max(3, len(pool) // 3)]
        return self.rnd.choice(pool or seeds)

    def apply(self, line: dict, knob, value, site_cls: str | None) -> tuple[dict, str] | None:
        chain, _values, _want = knob
        where = self.resolve(chain, site_cls)
        if where is None:
            return None
        kind, name = where
        if kind == "strjson":
            return self._set_str_json(line, name, value)
        argv = list(line["argv"])
        if kind == "env":
            return self._apply_env(line, name, value)
        if kind == "flag" and name in self.json_opts:
            # a JSON option tested for being set: the presets' own value (a valid config) or none
            flags = tuple(self.json_opts[name]["flags"])
            if value in (None, False, 0):
                return dict(line, argv=drop_flag(argv, flags)), f"flag:{name}=unset"
            if _json_of(argv, flags) is not None:
                return None
            if not self.seed_json.get(name):
                obj = self.json_value(name)
                if obj is None:
                    return None
                return dict(line, argv=set_flag(argv, flags, json.dumps(obj))), f"flag:{name}=minimal"
            return dict(line, argv=set_flag(argv, flags, json.dumps(self.seed_json[name]))), f"flag:{name}=preset"
        if kind == "flag" and name in getattr(self, "free_dests", ()) and self.dests[name]["action"] not in (
                "store_true", "store_false") and self.dests[name].get("nargs") != 0:
            return self._apply_free(line, name, value)
        if kind == "flag":
            o = self.dests[name]
            flags = tuple(o["flags"])
            boolish = o["action"] in ("store_true", "store_false") or o.get("nargs") == 0
            argv = drop_flag(argv, flags)
            if value is None or (value is False and boolish and not o.get("negative")) or \
                    (value is False and not boolish):   # a falsy test of a valued option: the option left out
                return dict(line, argv=argv), f"flag:{name}=unset"
            if boolish:
                neg = [f for f in (o.get("negative") or []) if f.startswith("--no-")]
                flag = (neg[0] if neg else None) if value in (False, 0) else o["flags"][0]
                if flag is None:
                    return dict(line, argv=argv), f"flag:{name}=unset"
                return dict(line, argv=argv + [flag]), f"flag:{flag}"
            if isinstance(value, list) and o.get("nargs") in ("+", "*"):
                # a list for an option taking several values (``--numa-bind-nodes -1``): one token per element
                flag = next((f for f in o["flags"] if f.startswith("--")), o["flags"][0])
                toks = ["" if x is None or x is False else str(x) for x in value]
                return dict(line, argv=argv + [flag] + toks), f"flag:{name}={' '.join(toks)[:40]}"
            allowed = o.get("choices") or (o.get("metavar") if isinstance(o.get("metavar"), list) else None)
            value, allowed = self._free_string(name, o, value, allowed, ".".join(chain[-2:]))
            if isinstance(value, str) and value.startswith("__") or isinstance(value, list) or \
                    allowed and str(value) not in [str(c) for c in allowed] or not _fits(o, value):
                # a value the parser would refuse before any config check: one of the option's own instead (within
                # the bounds of the config field of that name, pydantic's Field(gt/ge/lt/le))
                bounds = self._dest_bounds(name)
                pref = [c for c in allowed or [] if isinstance(value, str) and len(value) > 1 and
                        str(c).startswith(value) and str(c) != value]
                if pref:   # ``backend.startswith("lora")``: a choice that starts so
                    flag = [f for f in o["flags"] if f.startswith("--")][0] if any(
                        f.startswith("--") for f in o["flags"]) else o["flags"][0]
                    v = str(self.rnd.choice(pref))
                    return dict(line, argv=argv + [flag, v]), f"flag:{name}={v}"
                for _try in range(6):
                    flag, v = _flag_value(o, self.rnd)
                    try:
                        num = float(v) if v is not None else None
                    except ValueError:
                        num = None
                    if num is None or K.within_bounds([num], bounds):
                        break
            else:
                flag = [f for f in o["flags"] if f.startswith("--")][0] if any(
                    f.startswith("--") for f in o["flags"]) else o["flags"][0]
                v = ("true" if value else "false") if isinstance(value, bool) and o.get("type") in ("bool", None) \
                    and not o.get("choices") else json.dumps(value) if isinstance(value, (dict, list)) else str(
                    int(value) if isinstance(value, bool) else value)
            tail = self._list_tail(o, v)
            return dict(line, argv=argv + ([flag] if v is None else [flag, v] + tail)), \
                f"flag:{name}={' '.join([str(v)] + tail)}"
        if kind == "json":
            return self._apply_json(line, name, value)
        if kind == "hf":
            if name == "hf_config":
                return None   # a predicate over the whole config: the base line's model stands for it
            if name in ("architectures", "model_type") and not (
                    isinstance(value, str) and (name == "model_type" or K.ARCH_RE.match(value)) and
                    not value.startswith("__")):
                return None   # a made-up architecture / model type: refused by the registry, nothing learnt
            return self._hf(line, name, self._plain(value)), f"hf:{name}={json.dumps(self._plain(value))[:40]}"
        return None

    def _apply_json(self, line: dict, name: tuple, value) -> tuple[dict, str] | None:
        """``value`` under a key path of a JSON option (``name``: dest, path), typed by the config class's field."""
        argv = list(line["argv"])
        dest, path = name
        o = self.json_opts[dest]
        flags = tuple(o["flags"])
        # the key must be a field of the option's config class (a method or derived attribute read by the
        # condition is not something a line sets); its value one the field's annotation takes
        ann = K.field_annotation(self.fields, dest, path)
        if ann is None:
            return None
        typed = K.within_bounds(K.annotation_values(ann, self.aliases_t),
                                K.field_bounds(self.defaults, dest, path, self.fields))
        seen = self.seed_values.get(dest, {}).get(path[-1], [])
        if value not in ("__set__", None) and not isinstance(value, dict) and \
                any(isinstance(n, ast.Name) and n.id in self.fields for n in ast.walk(ann)) and \
                not K.annotation_values(ann, self.aliases_t):
            return None   # an object of a config class (``target_model_config: ModelConfig``): not a number
        if value == "__set__":
            # a field tested for being set (``hisparse_config is not None``): a value, never null; a nested
            # config class: an object with its required fields
            pool = [v for v in seen + typed if v is not None]
            nested = [n.id for n in ast.walk(ann) if isinstance(n, ast.Name) and n.id in self.fields]
            if nested:
                value = self.minimal_json(K.class_dest(nested[0])) or {}
            elif pool:
                value = self.rnd.choice(pool)
            elif self.compared.get(f"{dest}.{path[-1]}") or self.compared.get(path[-1]):
                # an enum-typed field (``backend: AttentionBackendEnum | None``): a name the release compares it with
                value = self.rnd.choice(self.compared.get(f"{dest}.{path[-1]}") or self.compared[path[-1]])
                typed = []
            elif re.search(r"\bstr\b", ast.unparse(ann)):
                value = "synth"
        if value == "__none_of__" and re.search(r"\bstr\b", ast.unparse(ann)) and \
                not K.annotation_values(ann, self.aliases_t):
            value = "synth-other"   # a free string none of the compared ones is (``custom_ops: list[str]``)
        free_str = isinstance(value, str) and not value.startswith("__") and \
            re.search(r"\bstr\b", ast.unparse(ann)) is not None   # a plain str field takes the constant
        if isinstance(value, str) and value.startswith("__") or typed and not free_str and \
                not K.fits_values(value, typed) and not isinstance(value, dict):
            pool = seen + typed
            if value == "__other__":   # ``policy != "default"``: a value other than the field's default
                d = self.defaults.get(K.dest_class(self.fields, dest) or "", {}).get(path[-1]) if len(path) == 1 \
                    else None
                other = [v for v in pool if not (isinstance(d, ast.Constant) and v == d.value)]
                # only the default known (an alias of a registry's names): a constant the release compares the
                # field with, else a word none of them is
                pool = other or [c for c in self.compared.get(path[-1], []) if not (
                    isinstance(d, ast.Constant) and c == d.value)] or ["synth-other"]
            value = self.rnd.choice(pool) if pool else self._plain(value)
        if K.is_list_annotation(ann) and value is not None and not isinstance(value, list):
            value = [value]   # a list field (compile_sizes: list[int]) takes a list of the value
        cur = _json_of(argv, flags) or dict(self.seed_json.get(dest) or self.minimal_json(dest) or {}) \
            if path != ("method",) else \
            _json_of(argv, flags) or {}
        obj = cur
        for p in path[:-1]:
            obj = obj.setdefault(p, {}) if isinstance(obj.get(p, {}), dict) else obj
        obj[path[-1]] = value
        return dict(line, argv=set_flag(argv, flags, json.dumps(cur))), f"json:{dest}.{'.'.join(path)}={json.dumps(value)[:40]}"

    def _apply_env(self, line: dict, name: str, value) -> tuple[dict, str]:
        env = dict(line["env"])
        if value is None:
            env.pop(name, None)
        else:
            env[name] = "1" if value is True else "0" if value is False else \
                str(self.rnd.choice(["1", "0", "2"])) if isinstance(value, str) and value.startswith("__") \
                else str(value)
        return dict(line, env=env), f"env:{name}"

    def _apply_free(self, line: dict, name: str, value) -> tuple[dict, str]:
        """An option the random corpus leaves out (a path, port, URL, key, name): a value of its kind."""
        o = self.dests[name]
        argv = drop_flag(list(line["argv"]), tuple(o["flags"]))
        if value in (None, False, 0):
            return dict(line, argv=argv), f"flag:{name}=unset"
        flag = next((f for f in o["flags"] if f.startswith("--")), o["flags"][0])
        if isinstance(value, list) and o.get("nargs") in ("+", "*"):
            toks = ["" if x is None or x is False else str(x) for x in value]
            return dict(line, argv=argv + [flag] + toks), f"flag:{name}={' '.join(toks)[:40]}"
        v = value if isinstance(value, (str, int, float)) and not isinstance(value, bool) and \
            not str(value).startswith("__") else self.free_value(name, o)
        found = self._model_dir(line) if re.search(r"(^|_)(draft_)?model_path$", name) else None
        if found and (str(v).startswith(str(self.data_dir)) or not str(v).startswith("/")):
            v = found[0]   # a draft model's path: a model directory (the line's own), not an empty file or a number
        tail = self._list_tail(o, str(v))
        return dict(line, argv=argv + [flag, str(v)] + tail), f"flag:{name}={' '.join([str(v)] + tail)[:40]}"

    def _list_tail(self, o: dict, v) -> list[str]:
        """More elements after ``v`` for an option taking a list (``nargs`` + or *): a rule's head the condition
        compares (SGLang's ``--prompt-tokens-buckets tse``) is followed half the time by 1 to 3 of 0, 1, 2, x (its
        parameters: a count, a base, a word where a number is wanted)."""
        if o.get("nargs") not in ("+", "*") or not isinstance(v, str) or self.rnd.random() < 0.5:
            return []
        pool = [str(c) for c in o["choices"]] if o.get("choices") else ["0", "1", "2", "x"]   # within its choices
        return [self.rnd.choice(pool) for _ in range(self.rnd.choice([1, 2, 3]))]

    def _settable(self, chain: tuple, site_cls: str | None) -> bool:
        """Whether a chain lands somewhere a line sets (a JSON key only when it is a field of the option's class)."""
        where = self.resolve(chain, site_cls)
        if where is None:
            return False
        return where[0] != "json" or K.field_annotation(self.fields, where[1][0], where[1][1]) is not None

    def resolve(self, chain: tuple, site_cls: str | None):
        """Where a chain lands (knobs.resolve), or a key of the JSON text of a string option for a field resolved
        from it (SGLang's ``watermark_context_window``: ``Arg(help="Resolved from --watermark-config.")``)."""
        got = K.resolve(chain, set(self.dests), self.json_opts, site_cls, self.engine)
        if got is None and chain and chain[-1] in getattr(self, "resolved_from", {}):
            return "strjson", self.resolved_from[chain[-1]]
        return got

    def learn_resolved_from(self) -> dict[str, tuple[str, str]]:
        """field -> (option dest, JSON key) for the fields of the validation files declared ``Arg(help="Resolved
        from --<option>.", no_cli=True)`` of a string option holding JSON: the key is the field's name without the
        option's stem (``watermark_context_window`` of ``--watermark-config`` -> ``context_window``)."""
        out = {}
        for tree in self.trees.values():
            for node in ast.walk(tree):
                if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                    continue
                m = re.search(r"Resolved from --([a-z0-9-]+)\.", ast.unparse(node.annotation))
                dest = m.group(1).replace("-", "_") if m else None
                o = self.dests.get(dest) if dest else None
                stem = dest[: -len("_config")] + "_" if dest and dest.endswith("_config") else None
                if o and stem and node.target.id.startswith(stem) and o.get("type") in (None, "str"):
                    out[node.target.id] = (dest, node.target.id[len(stem):])
        self.resolved_from = out
        return out

    def _set_str_json(self, line: dict, where: tuple[str, str], value):
        """``value`` under ``key`` of the inline JSON object the string option ``dest`` holds (made when absent)."""
        dest, key = where
        o = self.dests[dest]
        flags = tuple(o["flags"])
        cur = _flag_value_in(line["argv"], flags)
        try:
            obj = json.loads(cur) if cur else {}
        except ValueError:
            obj = {}
        obj = obj if isinstance(obj, dict) else {}
        if value is None or value is False and key not in obj:
            obj.pop(key, None)
        else:
            obj[key] = self._plain(value)
        argv = set_flag(drop_flag(list(line["argv"]), flags), flags, json.dumps(obj))
        return dict(line, argv=argv), f"strjson:{dest}.{key}={json.dumps(obj.get(key))[:40]}"

    def _free_string(self, name: str, o: dict, value, allowed, field: str | None = None):
        """(value, allowed) for a string option whose parser takes any string: a placeholder value becomes a constant
        the release's conditions compare the option with (SGLang's --speculative-algorithm: not a made-up word its
        own lookup refuses before the target); a condition wanting a value outside the known ones
        (``not is_known_kv_cache_dtype(x)``) on an option with no parser ``choices`` (only a metavar list, a
        ``Literal | str`` field) takes a word none of them is, which the parser passes to the check."""
        # the constants compared with the option's dest or with the config field the condition read
        # (``self.mamba_config.backend`` -> --mamba-backend)
        known = getattr(self, "compared", {})
        compared = [c for c in known.get(name) or known.get(field) or [] if not allowed or str(c) in [str(a) for a in allowed]]
        free = o.get("type") in (None, "str") or return_type(o.get("type")) == "str"
        if isinstance(value, str) and value.isupper() and value.lower() in compared and not allowed and free:
            value = value.lower()   # an enum member's name: the option takes its value
        if value == "__other__" and compared and not allowed and free:
            # ``x != <default>`` is the usual test: a compared constant other than the option's default
            other = [c for c in compared if str(c) != str(o.get("default"))]
            return self.rnd.choice(other or compared), allowed
        if isinstance(value, str) and value.startswith("__") and compared and not allowed and free:
            return self.rnd.choice(compared), allowed
        if value in ("__other__", "__none_of__") and not o.get("choices") and free and \
                o.get("action") not in ("store_true", "store_false"):
            return "synth-other", None
        return value, allowed

    def json_value(self, dest: str):
        """A JSON option no preset sets: its config class's required fields (``minimal_json``), else, for an option
        of no config class (``--custom-histogram-buckets``), a value of the option's schema (the parser dump's)."""
        obj = self.minimal_json(dest)
        return obj if obj is not None else schema_value((self.json_opts[dest].get("config") or {}).get("schema"))

    def minimal_json(self, dest: str) -> dict | None:
        """A JSON option no preset sets (``--watermark-config``): its config class's fields without a default, each a
        value its annotation takes (a string field: a word), the others left to their defaults; None when the class
        is not among the validation files'."""
        cls = K.dest_class(self.fields, dest)
        if cls is None:
            return None
        out = {}
        for f, ann in self.fields[cls].items():
            dv = self.defaults.get(cls, {}).get(f)
            required = dv is None or isinstance(dv, ast.Call) and ast.unparse(dv.func).split(".")[-1] == "Field" \
                and not dv.args and not any(k.arg in ("default", "default_factory") for k in dv.keywords)
            if not required or f.startswith("_"):
                continue
            bounds = K.field_bounds(self.defaults, dest, (f,), self.fields)
            vals = [v for v in K.within_bounds(K.annotation_values(ann, self.aliases_t), bounds) if v is not None]
            text = ast.unparse(ann)
            out[f] = vals[0] if vals else "synth" if re.search(r"\bstr\b", text) else None
            if out[f] is None:
                return None
        return out

    def free_value(self, dest: str, o: dict | None = None) -> str:
        """A value of the kind an option's name says (the options the random corpus skips): a port, a loopback host
        or URL, a file or directory this run owns (made empty), a key or a name; an option typed int/float (the
        parser refuses a word for it before any check) a number, one with choices its first."""
        d = self.data_dir / "free"
        if (o or {}).get("choices"):   # --hicache-host-memory-mode: one of its choices, not a host address
            return str(self.rnd.choice(o["choices"]))
        if re.search(r"(^|_)ports?($|_)", dest):
            return "30011"
        if re.search(r"(^|_)(url|urls|endpoint|endpoints)($|_)", dest):
            return "http://127.0.0.1:9"
        if re.search(r"(^|_)(host|hosts)($|_)", dest):
            return "127.0.0.1"
        if re.search(r"(^|_)(dir|directory|root)($|_)", dest):
            (d / dest).mkdir(parents=True, exist_ok=True)
            return str(d / dest)
        if re.search(r"(^|_)(path|paths|file|files|keyfile|certfile|socket|uds)($|_)", dest):
            d.mkdir(parents=True, exist_ok=True)
            (d / dest).touch()
            return str(d / dest)
        if re.search(r"(^|_)(cpus|cores)($|_)", dest):
            return "0-3"          # a CPU list (numactl syntax, as the release's message asks: '0-3' or '0,2,4-7')
        if re.search(r"(^|_)(nodes|node_ids)($|_)", dest):
            return "0"
        rt = return_type((o or {}).get("type"))
        if (o or {}).get("choices"):
            return str(o["choices"][0])
        if rt == "int" or "int" in str(rt):
            return "1"
        if rt == "float":
            return "0.5"
        return "synth-" + dest.replace("_", "-")

    def fit_gpus(self, line: dict) -> dict:
        """A line whose TP x PP (x local DP) outgrew its GPUs gets that many (up to a node's 8): the release would
        refuse it for the world size (parallel.py's "larger than the number of available GPUs") before the target."""
        def val(*dests):
            for d in dests:
                o = self.dests.get(d)
                if not o:
                    continue
                v = _flag_value_in(line["argv"], o["flags"])
                if v is not None:
                    try:
                        return max(1, int(v))
                    except ValueError:
                        return 1
            return 1
        world = val("tensor_parallel_size", "tp_size") * val("pipeline_parallel_size", "pp_size") * \
            val("data_parallel_size_local")
        if line.get("gpus") and line["gpus"] < world <= 8:
            return dict(line, gpus=world)
        return line

    def message_knobs(self, where: str, site_cls: str | None) -> list:
        """Fields a refusal of an earlier line for this site named (pydantic's "proton_profiler_dir must be set when
        ...", "requires --x"): a field of a JSON option's config class or an option of the parser, set on the next
        line (a path-like field to a directory the run owns). Words of the release's message steer the generator
        only; the verdicts stay the release's."""
        out, seen = [], set()
        for msg in self.blocker_msgs.get(where, [])[-2:]:
            for word in re.findall(r"--([a-z][a-z0-9-]+)|\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b", msg):
                w = (word[0] or word[1]).replace("-", "_")
                if w in seen:
                    continue
                seen.add(w)
                values = []
                if re.search(r"(_dir|_path|_root)$", w):
                    (self.data_dir / "dirs" / w).mkdir(parents=True, exist_ok=True)
                    values = [str(self.data_dir / "dirs" / w)]
                for dest in self.json_opts:
                    if K.field_annotation(self.fields, dest, (w,)) is not None and \
                            (site_cls is None or K.class_dest(site_cls) == dest or len(out) < 4):
                        out.append((("self", dest, w), values, True))
                        break
                else:
                    if w in self.dests and w not in self.json_opts:
                        out.append((("self", w), values, True))
        return out[:4]

    def _dest_bounds(self, dest: str) -> dict:
        for cls, fs in self.defaults.items():
            if dest in fs:
                b = K.field_bounds(self.defaults, K.class_dest(cls), (dest,), self.fields)
                if b:
                    return b
        return {}

    def _plain(self, value):
        if isinstance(value, str) and value.startswith("__len__"):
            return [1] * max(0, int(value[7:]))
        if isinstance(value, str) and value.startswith("__"):
            return self.rnd.choice([0, 1, 2, -1, 8, True, "auto"])
        return value

    def _model_dir(self, line: dict) -> tuple[str, str] | None:
        """(argv token naming the model, its directory)."""
        cfg = line.get("model_config")
        if not cfg and line.get("model"):
            from tools.engine_oracle.product import model_config

            cfg = model_config(line["model"])
        if not cfg:
            return None
        d = str(Path(cfg).parent)
        for tok in line["argv"]:
            if self.aliases.get(tok) == d or tok == d:
                return tok, d
        return None

    def _hf(self, line: dict, field: str, value) -> dict:
        found = self._model_dir(line)
        if found is None:
            return line
        tok, d = found
        cfg = json.loads((Path(d) / "config.json").read_text())
        if field == "architectures" and isinstance(value, str):
            value = [value]
        cfg[field] = value
        if isinstance(cfg.get("text_config"), dict):
            cfg["text_config"][field] = value
        text = json.dumps(cfg, indent=1, sort_keys=True)
        out = self.variants / hashlib.sha1(text.encode()).hexdigest()[:12]
        if not out.is_dir():
            out.mkdir(parents=True)
            for p in Path(d).iterdir():
                if p.name != "config.json" and p.is_file():
                    shutil.copy(p, out / p.name)
            (out / "config.json").write_text(text + "\n")
        argv = [str(out) if t == tok else t for t in line["argv"]]
        return dict(line, argv=argv, model_config=str(out / "config.json"))

    def _public_dir(self, stem: str) -> Path:
        """A model directory of the run for a public config.json (aiconfigurator-core's ``stem``): the config and the
        oracle's tokenizer double (gpustack_k3/oracle/models.py tokenizer_files), named like the config.json copies
        (``_hf``), so the report's ``model_variants`` keeps it for ``--corpus-from`` / ``--product-from``."""
        from gpustack_k3.oracle.models import tokenizer_files

        text = json.dumps(self.public[stem], indent=1, sort_keys=True)
        out = self.variants / hashlib.sha1(text.encode()).hexdigest()[:12]
        if not out.is_dir():
            out.mkdir(parents=True)
            for name, body in tokenizer_files().items():
                (out / name).write_text(body)
            (out / "config.json").write_text(text + "\n")
        return out

    def public_line(self, stem: str, line: dict) -> dict | None:
        """``line`` on the public model ``stem`` instead of its own: the model token replaced by the model's directory,
        the tensor-parallel size lowered to one dividing the model's attention heads (the release's head check would
        refuse the line before any site of the model's family)."""
        found = self._model_dir(line)
        if found is None:
            return None
        tok, _d = found
        out = self._public_dir(stem)
        argv = [str(out) if t == tok else t for t in line["argv"]]
        heads = config_heads(self.public[stem])
        o = self.dests.get("tensor_parallel_size") or self.dests.get("tp_size")
        if heads and o:
            cur = _flag_value_in(argv, o["flags"])
            try:
                tp = int(cur) if cur is not None else 1
            except ValueError:
                tp = 1
            if tp > 0 and heads % tp:
                tp = max(d for d in (1, 2, 4, 8) if d <= tp and heads % d == 0)
                argv = set_flag(argv, tuple(o["flags"]), str(tp))
        return dict(line, argv=argv, model=None, model_config=str(out / "config.json"))

    def public_lines(self, seeds: list[dict]) -> list[dict]:
        """Round 0's lines on the public models: one per (architecture, quantization method) of aiconfigurator-core's
        config.json files (the first file of each, by name), each on the first model-shape seed line (``shape/*``):
        the corpus then holds a line per family for the sites whose conditions test the model."""
        template = next((x for x in seeds if str(x.get("seed", "")).startswith("shape/") and self._model_dir(x)), None)
        if template is None:
            return []
        from gpustack_k3.oracle.models import SHAPES

        shapes = {stem for stem, _path in SHAPES.values()}
        seen, out = set(), []
        for stem in sorted(self.public):
            cfg = self.public[stem]
            key = (config_arch(cfg), (cfg.get("quantization_config") or {}).get("quant_method"))
            if stem in shapes or key in seen:
                continue
            seen.add(key)
            line = self.public_line(stem, template)
            if line is not None:
                out.append(dict(line, mutations=[f"model:{stem}"], seed=f"public/{stem}"))
        return out

    def config_file_lines(self, seeds: list[dict]) -> list[dict]:
        """vLLM's ``--config FILE`` (utils/argparse_utils.py ``_pull_args_from_config`` / ``load_config_file``: the
        options read from a YAML file before parsing), on the first model-shape seed line: its options moved into a
        YAML file the run owns; that file under a non-YAML name; two ``--config``; ``--config`` with no file; the file
        without the model and no model on the line; a file that does not exist. Each file's text is kept in the
        report (``serve_configs``), so ``--corpus-from`` judges the line again as it was."""
        if self.engine != "vllm" or "config" not in self.all_dests:
            return []
        base = next((x for x in seeds if str(x.get("seed", "")).startswith("shape/")), None)
        if base is None or not base["argv"] or base["argv"][0].startswith("-"):
            return []
        model, opts = base["argv"][0], base["argv"][1:]
        d = self.data_dir / "serve-config"
        d.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{a.lstrip('-')}: {b}\n" for a, b in zip(opts[::2], opts[1::2]) if a.startswith("--"))

        def file(name: str, body: str | None = text) -> str:
            if body is not None:
                (d / name).write_text(body)
                self.serve_configs[str(d / name)] = body
            return str(d / name)

        variants = [
            ("yaml", [model, "--config", file("serve.yaml")]),
            ("non-yaml", [model, "--config", file("serve.json")]),
            ("twice", [model, "--config", file("serve.yaml"), "--config", file("serve2.yml")]),
            ("no-file", [model, "--config"]),
            ("no-model", ["--config", file("serve-nomodel.yaml")]),
            ("missing", [model, "--config", file("absent.yaml", None)]),
        ]
        return [dict(base, argv=argv, mutations=[f"config-file:{what}"], seed="config-file") for what, argv in variants]

    def line_arch(self, line: dict) -> str | None:
        cfg = line.get("model_config")
        if not cfg and line.get("model"):
            from tools.engine_oracle.product import model_config

            cfg = model_config(line["model"])
        if not cfg:
            return None
        if cfg not in self._arch_cache:
            try:
                self._arch_cache[cfg] = config_arch(json.loads(Path(cfg).read_text()))
            except (OSError, ValueError):
                self._arch_cache[cfg] = None
        return self._arch_cache[cfg]

    def rebase_for_arch(self, line: dict, knobs: list, site_cls: str | None) -> tuple[dict, str] | None:
        """A site whose conditions want the architecture among named ones (``model_arch in (...)``, a model override
        registered for them): the line moved to a public model of one of them (aiconfigurator-core) when its own
        model is of none; None when the line's model already is, or no public config.json has one."""
        for chain, values, want in knobs:
            if not want or K.resolve(chain, set(self.dests), self.json_opts, site_cls, self.engine) != \
                    ("hf", "architectures"):
                continue
            names = [v for v in values if isinstance(v, str) and K.ARCH_RE.match(v)]
            if not names or self.line_arch(line) in names:
                continue
            # a line the release accepted on a model of one of them (a catalog model, with its processor files)
            # first: a public config.json copy lacks what a multimodal family loads (Kimi-K3's image processor)
            own = sorted((r["line"] for r in self.records if r["verdict"] == "accepted" and
                          self.line_arch(r["line"]) in names), key=lambda x: (len(x["argv"]), _key(x)))
            if own:
                got = dict(own[0], mutations=[], target=None)
                return got, f"model:{_model_of(got)}:{self.line_arch(got)}"
            stems = [st for v in names for st in self.public_by_arch.get(v, [])]
            if not stems:
                continue
            got = self.public_line(self.rnd.choice(stems), line)
            if got is not None:
                return got, f"model:{Path(got['model_config']).parent.name}:{self.line_arch(got)}"
        return None

    def candidates(self, i: int, kind: str, seeds: list[dict], k: int) -> list[dict]:
        own, around = self.site_knob_sets(i)
        s = self.sites[i]
        site_cls = s["function"].split(".")[0] if s["function"][:1].isupper() else None
        out = []
        dests, jsons = set(self.dests), self.json_opts
        rel = os.path.relpath(s["file"], self.root)
        avoid = []
        for b in self.blockers.get(f"{rel}:{s['line']}", [])[-4:]:
            bs = self.sites[b]
            avoid += K.avoid_knobs(_enclosing(self.trees[bs["file"]], bs["line"]))
        own = _merge(own + avoid + self.message_knobs(f"{rel}:{s['line']}", site_cls))
        for n0 in range(k):
            n = n0 + self.tried.get(i, 1) - 1   # a site tried again: other values than its first try's
            knobs = list(own)
            if kind != "entered" and around:
                knobs += around[n % len(around)]
            need_model = any((K.resolve(kn[0], dests, jsons, site_cls, self.engine) or ("",))[0] == "hf"
                             for kn in knobs)
            base = self.base_for(i, kind, seeds, need_model)
            line, kinds, places = dict(base), [], set()
            rebased = self.rebase_for_arch(line, knobs, site_cls)
            if rebased is not None:
                line, what = rebased
                kinds.append(what)
                places.add(json.dumps(["hf", "architectures"]))
            for kn in knobs:
                # one value per place on the line: a second knob landing on the same flag/key (an avoid knob of a
                # blocker, a second test of the same name) does not undo the first
                where = self.resolve(kn[0], site_cls)
                place = json.dumps(where, default=str) if where else None
                if place in places:
                    continue
                places.add(place)
                if where and where[0] in ("json", "strjson"):   # a key set: the option is not unset by a later knob
                    places.add(json.dumps(["flag", where[1][0]]))
                values = kn[1] or ["__type__"]
                # the first value meets the site's own test (and, merged, the checks before it): a site tried again
                # takes it half the time, another of the candidates else
                value = values[0] if n == 0 or self.rnd.random() < 0.5 else self.rnd.choice(values)
                if n > 1 and self.rnd.random() < 0.3:
                    continue
                got = self.apply(line, kn, value, site_cls)
                if got:
                    line, what = got
                    kinds.append(what)
            line.pop("_accepted", None)
            line = self.fit_gpus(line)
            if kinds:
                out.append(dict(line, mutations=kinds, target=f"{rel}:{s['line']}", seed=base.get("seed", "")))
        return out


def _model_of(line: dict) -> str:
    return str(line.get("model_config") or line.get("model") or "")


def _flag_value_in(argv: list[str], flags) -> str | None:
    """The value the last of ``flags`` on ``argv`` takes (``--x v`` or ``--x=v``), None when absent."""
    out = None
    for i, t in enumerate(argv):
        for f in flags:
            if t == f and i + 1 < len(argv):
                out = argv[i + 1]
            elif t.startswith(f + "="):
                out = t[len(f) + 1:]
    return out


def _fits(o: dict, value) -> bool:
    """Whether the parser takes ``value`` for an option of type int/float (anything for other types)."""
    t = o.get("type")
    rt = t.get("return_type") if isinstance(t, dict) else t
    if rt == "int" or isinstance(t, dict) and "int" in str(t.get("fn")):
        return isinstance(value, int) or isinstance(value, str) and value.lstrip("-").isdigit()
    if rt == "float":
        return isinstance(value, (int, float))
    return True


def _merge(knobs: list) -> list:
    """One knob per chain (a name tested twice on the path: its candidate values merged, first test's first)."""
    out: dict = {}
    for chain, values, want in knobs:
        if chain in out:
            out[chain] = (chain, out[chain][1] + [v for v in values if v not in out[chain][1]], out[chain][2])
        else:
            out[chain] = (chain, list(values), want)
    return list(out.values())


def _is_json(o: dict) -> bool:
    t = o.get("type")
    # the innermost return type too: ``optional_type(parse_type(json.loads))`` (--custom-histogram-buckets)
    # a config class inside ``optional_type`` (``--pooler-config``, ``--quantization-config``, ``--engram-config``,
    # ``--kv-transfer-config``: the dataclass under the wrapper's return type) too
    return isinstance(t, dict) and (return_type(t) == "json" or "cls" in t or "dict" in json.dumps(t) or
                                    '"cls": {"dataclass"' in json.dumps(t))


def _key(line: dict) -> str:
    return json.dumps([line["argv"], sorted(line["env"].items())])


def earlier_corpus(reports: list[Path], release: str, variants: Path,
                   serve_configs: dict[str, str] | None = None) -> list[dict]:
    """The kept lines (``corpus``) of earlier reports of the same engine, for round 0 of a run that continues them:
    their config.json copies (the report's ``model_variants``) written again under ``variants``, their ``--config``
    files (``serve_configs``) beside it (recorded in ``serve_configs`` for this run's report); a line whose copy the
    report does not hold is left out (it could not be judged as it was). Another release's kept lines are judged as
    they are (an option this release lacks is its parser's refusal): a newer release's corpus starts an older one's."""
    from gpustack_k3.oracle.judge import RELEASES

    out = []
    for rp in reports:
        doc = json.loads(Path(rp).read_text())
        if RELEASES.get(doc.get("release"), ("?",))[0] != RELEASES[release][0]:
            raise ValueError(f"{rp}: a report of {doc.get('release')}, not of a {RELEASES[release][0]} release")
        restored = _restore_variants(doc.get("model_variants") or {}, variants)
        files = {}
        for old, text in (doc.get("serve_configs") or {}).items():
            new = variants.parent / "serve-config" / Path(old).name
            new.parent.mkdir(parents=True, exist_ok=True)
            new.write_text(text)
            files[old] = str(new)
            if serve_configs is not None:
                serve_configs[str(new)] = text
        for c in doc.get("corpus") or []:
            line = {k: c.get(k) for k in ("argv", "env", "model", "model_config", "gpu_type", "gpus", "mutations",
                                          "target")}
            line["env"] = dict(line["env"] or {})
            line = _remap(line, restored)
            if any(str(Path(t).parent).endswith("serve-config") for t in line["argv"]):
                line["argv"] = [files.get(t, str(variants.parent / "serve-config" / Path(t).name))
                                if str(Path(t).parent).endswith("serve-config") else t for t in line["argv"]]
            if line.get("model_config") and not Path(line["model_config"]).is_file():
                continue
            line["seed"] = f"{Path(rp).name}"
            out.append(line)
    return out


def run(release: str, seed: int, base: int = 10, rounds: int = 3, budget: int = 120, per_site: int = 2,
        product: bool = False, explore: float = 0.5, log=None, corpus_from: list[Path] | None = None,
        families: bool = True) -> dict:
    """The synthesis for one release and seed; the report (``report``), with the product's verdicts if asked.
    ``families`` False: round 0 without the public model families' and the --config lines (a small sample)."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="oracle-synth-") as d:
        with Synth(release, seed, Path(d), product) as sy:
            seeds = [dict(s, mutations=[]) for s in seed_lines(release) if "argv" in s]
            sy.learn_seeds(seeds)
            # the presets' lines once each (their /no-parsers and /unnamed copies reach the same code) and ``base``
            # mutated lines of the random corpus
            first = seeds + [x for x in generate(release, base + 4 * len(seeds), seed, explore) if x["mutations"]][:base]
            # a line per public model family (aiconfigurator-core's config.json files): the models the sites' model
            # conditions test
            first += (sy.public_lines(seeds) + sy.config_file_lines(seeds)) if families else []
            if corpus_from:   # the kept lines of earlier reports: their coverage is this run's start
                first += earlier_corpus(corpus_from, release, sy.variants, sy.serve_configs)
                sy.learn_history(corpus_from)
            seen, dedup = set(), []
            for x in first:
                if _key(x) not in seen:
                    seen.add(_key(x))
                    dedup.append(x)
            first = dedup
            sy.judge(first, 0)
            history = [{"round": 0, "lines": len(first), "reached": len(sy.reached()),
                        "seconds": round(time.monotonic() - t0, 1)}]
            if log:
                log(history[-1])
            for rno in range(1, rounds + 1):
                if rno == 1:   # the classes once (a classification costs ~10-20 s on a loaded box); the final
                    # report classifies again with every line's coverage
                    classes = classify(release, sy.sites, sy.executed(), sy.root, residue=None, files=sy.files,
                                       callers=False)
                todo = sy.targets(classes)
                batch = []
                for i, kind in todo:
                    if len(batch) >= budget:
                        break
                    sy.tried[i] = sy.tried.get(i, 0) + 1
                    for c in sy.candidates(i, kind, seeds, per_site):
                        if _key(c) not in seen and len(batch) < budget:
                            seen.add(_key(c))
                            batch.append(c)
                before = sy.reached()
                sy.judge(batch, rno)
                history.append({"round": rno, "targets": len(todo), "lines": len(batch),
                                "reached": len(sy.reached()), "new": len(sy.reached() - before),
                                "seconds": round(time.monotonic() - t0, 1)})
                if log:
                    log(history[-1])
                if not batch:
                    break
            doc = report(sy, history, t0)
            if product:
                doc["product"] = product_verdicts(release, doc["judged"], doc.get("model_variants"))
            doc["seconds"] = round(time.monotonic() - t0, 1)
            return doc


def report(sy: Synth, history: list[dict], t0: float) -> dict:
    from tools.engine_oracle.reachability import summarize as summarize_classes

    executed = sy.executed()
    classes = classify(sy.release, sy.sites, executed, sy.root, files=sy.files)
    kept, union = [], set()
    for r in sy.records:
        new = r["sites"] - union
        if new:
            union |= new
            kept.append(r)
    root = str(sy.root)

    def where(i):
        s = sy.sites[i]
        return f"{os.path.relpath(s['file'], root)}:{s['line']}"

    verdicts = {}
    for r in sy.records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    by_round = {}
    for r in kept:
        by_round[r["round"]] = by_round.get(r["round"], 0) + 1
    return {"release": sy.release, "seed": sy.seed, "judged_lines": len(sy.records), "kept_lines": len(kept),
            "kept_by_round": by_round, "rounds": history, "verdicts": verdicts,
            "reachability": summarize_classes(sy.release, classes), "sites": classes,
            "corpus": [{"argv": r["line"]["argv"], "env": r["line"]["env"], "model": r["line"].get("model"),
                        "model_config": r["line"].get("model_config"), "gpu_type": r["line"]["gpu_type"],
                        "gpus": r["line"].get("gpus"), "mutations": r["line"].get("mutations"),
                        "target": r["line"].get("target"), "round": r["round"], "verdict": r["verdict"],
                        "new_sites": sorted(where(i) for i in r["sites"])} for r in kept],
            "judged": [judged_record(sy, r) for r in sy.records],
            # the config.json copies the lines name (their directory dies with the run): --product-from restores them
            # (a public config.json is named, never copied: compact_variant)
            "model_variants": {str(p): compact_variant(json.loads(p.read_text()), sy.public)
                               for p in sorted(sy.variants.glob("*/config.json"))} if sy.variants.is_dir() else {},
            # the --config files the lines name (config_file_lines), by path: --corpus-from writes them again
            "serve_configs": dict(sorted(sy.serve_configs.items())),
            "executed_lines": {os.path.relpath(f, root): sorted(v) for f, v in executed.items()}}


def judged_record(sy: Synth, r: dict) -> dict:
    line = r["line"]
    root = str(sy.root)
    return {"argv": line["argv"], "env": line["env"], "model": line.get("model"),
            "model_config": line.get("model_config"), "gpu_type": line["gpu_type"], "gpus": line.get("gpus"),
            "target": line.get("target"), "mutations": line.get("mutations"), "round": r["round"],
            "verdict": r["verdict"], "reason": r.get("reason"), "where": r.get("where"), "message": r["message"],
            "raise_sites_run": sorted(f"{os.path.relpath(sy.sites[i]['file'], root)}:{sy.sites[i]['line']}"
                                      for i in r["sites"] if sy.sites[i]["kind"] == "raise")}


def product_verdicts(release: str, judged: list[dict], variants: dict | None = None,
                     serve_configs: dict[str, str] | None = None) -> dict:
    """gpustack-k3's verdict (tools/engine_oracle/product.py check_args) on every decidable judged line of a report:
    misses (the release refuses, the product passes) and false refusals (the release accepts, the product refuses),
    each with the site the line was made for (``target``), where the release raised (``engine_where``) and the raise
    sites the line ran. The report's ``--config`` files (``serve_configs``: path -> text; their run's directory is
    gone) are written again and named on their lines, so the product reads the file the release read; a line that
    names a run's ``--config`` file the report does not hold is counted (``serve_config_gone``), not judged."""
    from tools.engine_oracle import product as P

    engine, version, _w = RELEASES[release]
    t0 = time.monotonic()
    misses, false_refusals, runtime_only = [], [], []
    counts = {"decidable": 0, "engine_refused": 0, "miss": 0, "false_refusal": 0, "runtime_only": 0, "agree": 0,
              "model_config_gone": 0, "serve_config_gone": 0}
    runtime_rules = _runtime_only_rules()
    with tempfile.TemporaryDirectory(prefix="synth-variants-") as vd:
        restored = _restore_variants(variants or {}, Path(vd))
        files = _restore_serve_configs(serve_configs or {}, Path(vd))
        for r in judged:
            if r["verdict"] not in ("accepted", "refused"):
                continue
            r = _remap(r, restored)
            if r.get("model_config") and not Path(r["model_config"]).is_file():
                # a config.json copy of a report written before the copies were kept in it: not re-checkable
                counts["model_config_gone"] += 1
                continue
            r = _remap_serve_configs(r, files)
            if not files and any(_is_serve_config(t) and not Path(t).is_file() for t in r["argv"]):
                # a run's --config file, and a report that kept none of them: not re-checkable (with the files
                # kept, a path they do not hold is the line's own missing file, which both must refuse)
                counts["serve_config_gone"] += 1
                continue
            _check_one(P, engine, version, r, counts, misses, false_refusals, runtime_only, runtime_rules)
    counts["miss_rate_of_decidable"] = round(counts["miss"] / counts["decidable"], 4) if counts["decidable"] else None
    by_site: dict[str, int] = {}
    for m in misses:
        k = m.get("where") or m.get("target") or "?"
        by_site[k] = by_site.get(k, 0) + 1
    return {"how": "tools/engine_oracle/product.py check_args (the check-args command in-process) on every decidable "
                   "judged line of the report; a refusal by runtime-only rules alone (bench/oracle_differential.py "
                   "runtime_only_rules) is counted apart, as the differential does", "seconds": round(time.monotonic() - t0, 1),
            "counts": counts, "misses_by_engine_site": dict(sorted(by_site.items(), key=lambda kv: -kv[1])),
            "misses": misses, "false_refusals": false_refusals, "runtime_only": runtime_only}


def _runtime_only_rules() -> set[str]:
    """bench/oracle_differential.py ``runtime_only_rules``, from one module per process (registered as
    ``_oracle_differential``, as tools/engine_oracle/aimed_records.py ``differential`` does): the module keeps its
    answer (the registry's rules asked through ``explain``), so it is computed once, not on every report."""
    import importlib.util

    mod = sys.modules.get("_oracle_differential")
    if mod is None:
        path = Path(__file__).resolve().parents[2] / "bench" / "oracle_differential.py"
        spec = importlib.util.spec_from_file_location("_oracle_differential", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules["_oracle_differential"] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop("_oracle_differential", None)   # a half-run module is not kept for the next caller
            raise
    return set(mod.runtime_only_rules())


def _restore_variants(variants: dict[str, dict], into: Path) -> dict[str, str]:
    """The report's config.json copies written again (their run's directory is gone): old dir -> new dir."""
    from gpustack_k3.oracle.models import tokenizer_files

    out = {}
    public = public_configs() if any("__public__" in c for c in variants.values()) else {}
    for old, entry in variants.items():
        cfg = expand_variant(entry, public)
        if cfg is None:
            continue
        d = into / Path(old).parent.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.json").write_text(json.dumps(cfg, indent=1, sort_keys=True) + "\n")
        # the oracle's tokenizer double beside it, as in the run that wrote the copy (a --reasoning-parser line
        # encodes its markers with it)
        for name, body in tokenizer_files().items():
            if not (d / name).is_file():
                (d / name).write_text(body)
        out[str(Path(old).parent)] = str(d)
    return out


def _is_serve_config(token: str) -> bool:
    """Whether an argv token names a file of a run's ``serve-config/`` directory (Synth.config_file_lines)."""
    return Path(token).parent.name == "serve-config"


def _restore_serve_configs(serve_configs: dict[str, str], into: Path) -> dict[str, str]:
    """The report's ``--config`` files written again under ``into`` (one directory per original directory, so two
    runs' files of the same name stay apart): old path -> new path."""
    out, dirs = {}, {}
    for old, text in sorted(serve_configs.items()):
        parent = str(Path(old).parent)
        d = dirs.setdefault(parent, into / f"serve-config-{len(dirs)}" / "serve-config")
        d.mkdir(parents=True, exist_ok=True)
        (d / Path(old).name).write_text(text)
        out[old] = str(d / Path(old).name)
    return out


def _remap_serve_configs(r: dict, files: dict[str, str]) -> dict:
    """``r`` with each ``--config`` file its argv names (the token after ``--config``, as Synth.config_file_lines
    writes it) replaced by its copy."""
    if not files:
        return r
    return dict(r, argv=[files.get(t, t) for t in r["argv"]])


def _remap(r: dict, restored: dict[str, str]) -> dict:
    if not r.get("model_config") or not restored:
        return r
    old = str(Path(r["model_config"]).parent)
    if old not in restored:
        return r
    new = restored[old]
    return dict(r, model_config=str(Path(new) / "config.json"), argv=[new if t == old else t for t in r["argv"]])


def _check_one(P, engine, version, r, counts, misses, false_refusals, runtime_only, runtime_rules) -> None:
    """The product's verdict on one judged line, counted and listed."""
    pv = P.check_args(engine, version, r)
    counts["decidable"] += 1
    counts["engine_refused"] += r["verdict"] == "refused"
    item = {k: r.get(k) for k in ("argv", "env", "model", "model_config", "target", "mutations", "where",
                                  "message", "raise_sites_run")}
    if r["verdict"] == "refused" and pv["verdict"] == "pass":
        counts["miss"] += 1
        misses.append(item)
    elif r["verdict"] == "accepted" and pv["verdict"] != "pass":
        rec = {**item, "product_rules": pv.get("rules"), "product_message": pv.get("message")}
        if pv.get("rules") and set(pv["rules"]) <= runtime_rules:
            counts["runtime_only"] += 1
            runtime_only.append(rec)
        else:
            counts["false_refusal"] += 1
            false_refusals.append(rec)
    else:
        counts["agree"] += 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="a coverage-driven corpus for a release's raise sites (JSON report)")
    ap.add_argument("--release", choices=sorted(RELEASES), help="required unless --product-from")
    ap.add_argument("--seed", type=int, default=7919)
    ap.add_argument("--base", type=int, default=10,
                    help="mutated lines of the random corpus (corpus.generate) judged first, beside the presets' lines")
    ap.add_argument("--explore", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=120, help="candidate lines judged per round at most")
    ap.add_argument("--per-site", type=int, default=2, help="candidate lines per target site and round")
    ap.add_argument("--product", action="store_true", help="gpustack-k3's verdict on every judged line (misses)")
    ap.add_argument("--corpus-from", type=Path, nargs="+", metavar="REPORT",
                    help="round 0 also judges the kept lines of these earlier reports of the engine (their config.json "
                         "copies restored): the run continues their coverage")
    ap.add_argument("--no-families", action="store_true",
                    help="round 0 without a line per public model family (aiconfigurator-core) and the --config lines")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--product-from", type=Path, metavar="REPORT",
                    help="no judging: (re)compute the product's verdicts on the judged lines of a report written by "
                         "--out (after the rules changed) and write them into it")
    a = ap.parse_args(argv)
    if a.product_from:
        doc = json.loads(a.product_from.read_text())
        doc["product"] = product_verdicts(doc["release"], doc["judged"], doc.get("model_variants"),
                                          doc.get("serve_configs"))
        doc["product"]["command"] = "python3 -m tools.engine_oracle.synth --product-from " + str(a.product_from)
        doc["product"]["at_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        a.product_from.write_text(json.dumps(doc, indent=1, default=sorted))
        print(json.dumps(doc["product"]["counts"], indent=1))
        return 0
    if not a.release:
        ap.error("--release is required (or --product-from REPORT)")
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # the code that runs: the commit at the start (a commit made while the run goes on is not in it), and whether
    # tools/ or gpustack_k3/ had uncommitted changes then
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "tools", "gpustack_k3"], capture_output=True,
                                text=True).stdout.strip())
    doc = run(a.release, a.seed, a.base, a.rounds, a.budget, a.per_site, a.product, a.explore,
              log=lambda h: print(json.dumps(h), file=sys.stderr, flush=True), corpus_from=a.corpus_from,
              families=not a.no_families)
    doc = {"command": "python3 -m tools.engine_oracle.synth " + " ".join(sys.argv[1:] if argv is None else argv),
           "code_commit": commit or None, "code_dirty": dirty, "started_utc": started,
           "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **doc}
    if a.out:
        a.out.write_text(json.dumps(doc, indent=1, default=sorted))
    short = {k: v for k, v in doc.items() if k not in ("sites", "corpus", "executed_lines", "product")}
    if "product" in doc:
        short["product"] = doc["product"]["counts"]
    print(json.dumps(short, indent=1, default=sorted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
