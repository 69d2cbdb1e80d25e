"""What moving an engine command line from one release to another changes (``gpustack-k3 upgrade-check``).

The facts are data: catalog/data/upgrades/<engine>-<from>-<to>.yaml, one entry per change found by
tools/release_diff.py between the two releases (docs/releases/), each citing the target release's source
(file:line@version). An entry has a kind (refused / changed / deprecated), a condition on the command line and
its environment (``when``, every clause must hold; the clause forms are listed in the data file's header) and,
where the change is mechanical, a rewrite (drop a key of a JSON option, drop an option, unset an environment
variable).

The command line is read with the FROM release's parser dump (catalog/data/engines/...-options.json): an option is
found under any of its spellings (``--speculative-config``, ``-sc``, ``--speculative-config=...``) and a
JSON option's keys in either form vLLM accepts (``--speculative-config '{"k": v}'``, ``--speculative-config.k v``).
The verdict is what the data file says the target does; it is not a run of the target's own validation.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Callable

import yaml

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core.argv.dumps import ParserDump, load_dump
from gpustack_k3.errors import CatalogError, InputError
from gpustack_k3.catalog.loader import load_catalog
from gpustack_k3.core.argv.read import read_argv

UPGRADES = DATA / "upgrades"
KINDS = ("refused", "changed", "deprecated")
CLAUSE_KEYS = {"env", "env_unset", "is", "is_not", "option", "option_unset", "default", "key", "key_any", "in",
               "not_in", "truthy", "absent", "gt"}


@dataclass(frozen=True)
class Change:
    id: str
    kind: str
    when: tuple[dict, ...]
    message: str
    cite: tuple[str, ...]
    rewrite: dict | None = None


@dataclass(frozen=True)
class Upgrade:
    engine: str
    from_version: str
    to_version: str
    report: str
    changes: tuple[Change, ...]
    path: str


def available() -> list[tuple[str, str, str]]:
    """(engine, from, to) of every upgrade data file."""
    return sorted((u.engine, u.from_version, u.to_version) for u in (_load(p.name) for p in UPGRADES.glob("*.yaml")))


@cache
def _load(name: str) -> Upgrade:
    path = UPGRADES / name
    rel = f"catalog/data/upgrades/{name}"
    try:
        d = yaml.safe_load(path.read_text(encoding="utf-8"))
        changes = []
        for i, c in enumerate(d["changes"]):
            where = f"{rel} changes[{i}] ({c.get('id')})"
            if c["kind"] not in KINDS:
                raise CatalogError(f"{where}: kind {c['kind']!r} is not one of {', '.join(KINDS)}")
            for clause in c["when"]:
                bad = set(clause) - CLAUSE_KEYS
                if bad or not ({"env", "env_unset", "option", "option_unset"} & set(clause)):
                    raise CatalogError(f"{where}: clause {clause} (unknown {sorted(bad)} or no env/option)")
            if not c.get("cite"):
                raise CatalogError(f"{where}: no cite (file:line@version of the target's source)")
            rw = c.get("rewrite")
            if rw is not None and set(rw) - {"drop_key", "drop_option", "unset_env"}:
                raise CatalogError(f"{where}: rewrite {rw} is not drop_key, drop_option or unset_env")
            changes.append(Change(c["id"], c["kind"], tuple(c["when"]), " ".join(c["message"].split()),
                                  tuple(c["cite"]), rw))
        return Upgrade(d["engine"], str(d["from"]), str(d["to"]), d.get("report", ""), tuple(changes), rel)
    except (KeyError, TypeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{rel}: malformed upgrade data ({exc!r})") from exc


def find_upgrade(engine: str, from_version: str, to_version: str) -> Upgrade:
    name = f"{engine}-{from_version}-{to_version}.yaml"
    if not (UPGRADES / name).is_file():
        known = ", ".join(f"{e} {a} -> {b}" for e, a, b in available()) or "none"
        raise InputError("--from/--to", f"no upgrade data for {engine} {from_version} -> {to_version}",
                         f"known upgrades: {known}")
    return _load(name)


# ----------------------------------------------------------------------------------------- reading the line

@dataclass
class Occurrence:
    dest: str
    flag: str               # the option string as written (without =VALUE)
    start: int              # index of the option token in argv
    stop: int               # one past its value
    key: str | None         # dotted form --flag.KEY
    value: str | None


@dataclass
class Line:
    argv: list[str]
    env: dict[str, str]
    occurrences: list[Occurrence] = field(default_factory=list)

    def given(self, dest: str) -> list[Occurrence]:
        return [o for o in self.occurrences if o.dest == dest]


def _json(o: Occurrence) -> Any:
    try:
        return json.loads(o.value or "")
    except json.JSONDecodeError as exc:
        raise InputError(f"argv[{o.start}] {o.flag}", f"value {o.value!r} is not JSON ({exc.msg})",
                         "quote the JSON object as one argument") from exc


def read_line(dump: ParserDump, argv: list[str], env: dict[str, str]) -> Line:
    line = Line(list(argv), dict(env))
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            break
        if not tok.startswith("-") or tok == "-":
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        base, _, key = name.partition(".") if name.startswith("--") else (name, "", "")
        key = key or None
        if dump.engine == ENGINE_VLLM and name.startswith("--"):
            base = "--" + base[2:].replace("_", "-")    # vLLM's parser reads underscores as dashes
        opt = dump.flag(base)
        if opt is None:
            i += 1
            continue
        if eq:
            value, stop = inline, i + 1
        elif opt.takes_value and i + 1 < len(argv):
            value, stop = argv[i + 1], i + 2
        else:
            value, stop = None, i + 1
        line.occurrences.append(Occurrence(opt.dest, name, i, stop, key, value))
        i = stop
    return line


# ----------------------------------------------------------------------------------------- judging

@dataclass
class View:
    """What judges a line: the options the FROM release's parser set (dest -> value after the engine's own
    conversion and merging, core.argv.read.read_argv) and the environment."""
    values: dict[str, Any]
    env: dict[str, str]


def view(engine: str, from_version: str, argv: list[str], env: dict[str, str],
         read_file: Callable[[str], str] | None = None) -> View:
    cat = load_catalog()
    version = cat.engines[engine].versions.get(from_version)
    if version is None or version.parser is None:
        raise InputError("--from", f"{engine} {from_version} is not a pinned release with a parser dump",
                         f"pinned: {', '.join(cat.engines[engine].versions)}")
    reading = read_argv(cat.engine(engine), version, argv, **({"read_file": read_file} if read_file else {}))
    if reading.refusals:
        r = reading.refusals[0]
        raise InputError(r.where, f"{engine} {from_version}'s own parser refuses the line: {r.message}",
                         f"fix the line first (gpustack-k3 check-args --engine {engine} --engine-version "
                         f"{from_version} -- ARGV)")
    return View({d: g.value for d, g in reading.given.items()}, dict(env))


def _holds(clause: dict, v: View) -> bool:
    if "env_unset" in clause:
        return clause["env_unset"] not in v.env
    if "env" in clause:
        e = v.env.get(clause["env"])
        if e is None:
            return False
        if "is" in clause and e != str(clause["is"]):
            return False
        return not ("is_not" in clause and e == str(clause["is_not"]))
    if "option_unset" in clause:
        return clause["option_unset"] not in v.values
    dest = clause["option"]
    if dest not in v.values:
        if "default" not in clause:
            return False
        return _value_holds(clause, clause["default"])     # the parser's default stands for the absent option
    value = v.values[dest]
    if "gt" in clause:
        try:
            return float(value) > clause["gt"]
        except (TypeError, ValueError):
            return False
    if "key" not in clause and "key_any" not in clause:
        return _value_holds(clause, value)
    obj = value if isinstance(value, dict) else {}
    if "key_any" in clause:
        return any(k in obj for k in clause["key_any"])
    if clause.get("absent"):
        return clause["key"] not in obj
    if clause["key"] not in obj:
        return False
    return _value_holds(clause, obj[clause["key"]])


def _value_holds(clause: dict, v: Any) -> bool:
    if "is" in clause and v != clause["is"]:
        return False
    if "in" in clause and v not in clause["in"]:
        return False
    if "not_in" in clause and v in clause["not_in"]:
        return False
    return not (clause.get("truthy") and not v)


def _drop_key(argv: list[str], line: Line, dest: str, key: str) -> list[str]:
    """argv without ``key`` in the option's JSON values and without its dotted ``--flag.key`` tokens."""
    out = list(argv)
    for o in sorted(line.given(dest), key=lambda o: -o.start):
        if o.key == key:
            del out[o.start:o.stop]
        elif o.key is None:
            v = _json(o)
            if isinstance(v, dict) and key in v:
                v = {k: x for k, x in v.items() if k != key}
                text = json.dumps(v, separators=(",", ":"))
                if o.stop - o.start == 1:           # --flag=VALUE
                    out[o.start] = out[o.start].partition("=")[0] + "=" + text
                else:
                    out[o.start + 1] = text
    return out


def _found(up: Upgrade, v: View) -> list[Change]:
    return [c for c in up.changes if all(_holds(cl, v) for cl in c.when)]


def check(engine: str, from_version: str, to_version: str, argv: list[str], env: dict[str, str],
          read_file: Callable[[str], str] | None = None) -> dict:
    """The upgrade report of one command line (a JSON-ready dict; ``refused`` decides the exit code). The
    rewritten line is judged again: ``complete`` only when no refusal is left in it."""
    up = find_upgrade(engine, from_version, to_version)
    found = _found(up, view(engine, from_version, argv, env, read_file))
    dump = load_dump(f"engines/{engine}-{from_version}-options.json")
    new_argv, new_env, unset = list(argv), dict(env), []
    rewritten = []
    for c in found:
        rw = c.rewrite or {}
        if "drop_key" in rw:
            # each drop reads the line as it now is (positions move as tokens go)
            new_argv = _drop_key(new_argv, read_line(dump, new_argv, new_env), rw["drop_key"]["option"],
                                 rw["drop_key"]["key"])
            rewritten.append(c.id)
        if "drop_option" in rw:
            now = read_line(dump, new_argv, new_env)
            for o in sorted(now.given(rw["drop_option"]), key=lambda o: -o.start):
                del new_argv[o.start:o.stop]
            rewritten.append(c.id)
        if "unset_env" in rw and rw["unset_env"] in new_env:
            del new_env[rw["unset_env"]]
            unset.append(rw["unset_env"])
            rewritten.append(c.id)
    left = []
    if rewritten:
        left = [c.id for c in _found(up, view(engine, from_version, new_argv, new_env, read_file))
                if c.kind == "refused"]
    items = [{"id": c.id, "kind": c.kind, "message": c.message, "cite": list(c.cite),
              "rewritten": c.id in rewritten and c.id not in left} for c in found]
    return {
        "engine": engine, "from": from_version, "to": to_version,
        "source": up.path, "report": up.report,
        "judged_by": f"the changes listed in {up.path} (found by tools/release_diff.py) on the line as "
                     f"{engine} {from_version}'s parser reads it, not a run of {engine} {to_version}'s own validation",
        "refused": [x for x in items if x["kind"] == "refused"],
        "changed": [x for x in items if x["kind"] == "changed"],
        "deprecated": [x for x in items if x["kind"] == "deprecated"],
        "rewrite": None if not rewritten else {
            "argv": new_argv, "unset_env": unset,
            "env": new_env,
            "complete": not left,
            "still_refused": left},
    }
