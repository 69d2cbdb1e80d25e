"""The engine-check table: an engine release's simple config-time refusals as catalog data, one rule per entry.

``gpustack_k3/catalog/data/checks/<engine>.yaml`` lists refusals of the kind "X requires Y", "X must be positive",
"X must divide Y", "X only for architectures A, B" (format below). This module reads the tables once at import, validates every entry
(a malformed entry fails the import naming the entry's id: :class:`ChecksTableError`), and registers one rule per
entry in the registry (family ``args``, ``checked_by="oracle"``, severity error unless the entry says otherwise),
switched on only for the releases the entry lists, with each release's own source in the rule's ``sources``.

What an entry's predicates read, for one resolved document:

- ``dest``: the value of a parser destination as the release's own parser gives it for the command line the engine
  receives: the document's rendered arguments (``core.flags.render_args``, what the launch spec carries; for a
  command line read by check-args that is the line itself, re-rendered) read by ``core.argv.read_argv`` with the
  release's parser dump; where the line does not give the option, the dump's default. ``model_path`` is the model.
- ``env``: the variable as the release reads it (``core.rules.envs``: the parser the release's catalog entry declares
  for it, else the entry's ``as:``), from ``spec.env`` (a command line's ``--env``), as every env rule reads it.
- ``model``: the model's config.json through the one reader (``core.model_config``; the document's own config.json
  where one was read, else the catalog entry's config.json-shaped block). Without one the entry does not fire;
  an entry with ``reads_model`` for the document's release then did not run.

Format (``format: 1``)::

    checks:
      - id: sglang-sidecar-needs-grpc-port      # the rule id
        title: ...                              # one line
        releases: {"0.5.23": "sglang/srt/arg_groups/serving_hook.py:411@0.5.23"}   # catalog key -> file:line@version
        when:                                   # ALL hold -> the engine refuses
          - {dest: sidecar, is: notnull}
          - {dest: grpc_port, is: null}
          - {env: SGLANG_GRPC_PORT, as: sglang_env_int, is: unset}
        message: "--sidecar requires --grpc-port or SGLANG_GRPC_PORT."   # the engine's; {dest} gives its value
        why: ...
        fix: ...
        severity: error                         # optional (error, warning, info)
        field: spec.extraArgs                   # optional: the finding's field (default: the first dest's field)
        examples:                               # the lines that verify the entry (tests: product and engine)
          - refuse: [--model-path, /models/Kimi-K3, --sidecar, x]             # the engine refuses it here
            accept: [--model-path, /models/Kimi-K3, --sidecar, x, --grpc-port, "50051"]   # the condition flipped
            env: {}                             # optional, for both lines; accept_env: {} replaces it for accept
            releases: ["0.5.23"]                # optional: the releases the example is for (default: all listed)
            model: kimi-k3                      # optional: the catalog model (default: the one the line's path names)
            shape: hybrid                       # optional, instead of model: a model the catalog does not know, given
                                                # to the product by its public config.json (gpustack_k3/oracle/models.py
                                                # SHAPES: mla-moe, gqa-dense, gqa-yarn, hybrid; the line names
                                                # /models/shape-<shape>, the oracle's directory of the same file)

A condition is a predicate, ``{any: [conditions]}`` (one of them; the engine's ``or``) or ``{all: [conditions]}``.
A predicate has one subject (``dest: NAME``, ``env: NAME`` [``as: PARSER``, ``default: V``], ``model: {...}``) and
one test (``in_stripped_lower`` / ``not_in_stripped_lower``: a string whose ``.strip().lower()`` is / is not in
the list); ``is: set | unset | true | false | null | notnull | blank | notblank | truthy | falsy`` (blank: a string
that is empty after ``str.strip()``; truthy/falsy: Python's ``if value``); ``eq``, ``ne``, ``in``, ``not_in``; ``lt``, ``le``,
``gt``, ``ge`` (a number or ``{dest: OTHER}``); ``divides`` / ``not_divides`` (``{dest: OTHER}`` or a number: the
value divides / does not divide it); ``multiple_of`` / ``not_multiple_of`` (the value is / is not a multiple of it);
``json_type`` / ``not_json_type`` (``object``, ``array``, ``string``, ``number``, ``boolean``, ``null``: the value as
the release's parser decoded it is / is not of that JSON type: a JSON option the release tests with ``isinstance``);
``keys_outside: [names]`` (the value is an object with a key not in the list); ``len_gt`` / ``len_lt`` (a number: the
value is a list, object or string longer / shorter than it: an ``nargs`` option's count).
``set``/``unset`` say whether the line (or the environment) gives the option (variable) at all; ``null``/``notnull``
test the value in effect (the default where not given). A comparison with a value that is not a number (None, a
string) does not hold. A ``dest`` predicate may carry ``key: FIELD`` (dotted for nesting) to test a field of a JSON option (``--speculative-config``,
``--compilation-config``, ...) instead of the option: ``is: set/unset`` = the JSON gives the field; the value is the
JSON's, else ``default: V`` (the config class's field default: the entry cites it), else None. ``model`` takes ``{architectures_in: [..]}``, ``{architectures_not_in: [..]}`` (the first of
config.json's ``architectures``, as the engines read it) or ``{field: NAME, <test>}`` (a figure of
``core.model_config.ModelArch``, or a key of the language model's config as written) or ``{top_field: NAME, <test>}``
(a key of config.json's top level as written, beside any text_config: what the release's ``hf_config.NAME`` reads;
no config.json object: does not hold).
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gpustack_k3 import _startup_cache
from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM
from gpustack_k3.catalog.loader import DATA
from gpustack_k3.core import argv as engine_argv    # its modules load on first use (CLI start-up)
from gpustack_k3.core.flags import render_args
from gpustack_k3.core.rules import envs
from gpustack_k3.core.rules.args import extra_arg
from gpustack_k3.core.rules.registry import RULES, ReleaseRule, RuleDefinitionError, rule

FORMAT = 1
CHECKS_DIR = DATA / "checks"
ENGINES = (ENGINE_VLLM, ENGINE_SGLANG)
NO_CEL = ("reads the command line the engine receives through the release's own parser (spec fields and extraArgs "
          "together, argv tokenising) and the release's environment readers: beyond CEL")
_ENTRY_KEYS = {"id", "title", "releases", "when", "message", "why", "fix", "severity", "field", "examples"}
_EXAMPLE_KEYS = {"releases", "refuse", "accept", "env", "accept_env", "model", "shape"}
_REQUIRED = ("id", "title", "releases", "when", "message", "why", "fix")
_IS = ("set", "unset", "true", "false", "null", "notnull", "blank", "notblank", "truthy", "falsy")
_TESTS = ("is", "eq", "ne", "in", "not_in", "in_stripped_lower", "not_in_stripped_lower", "lt", "le", "gt", "ge", "divides", "not_divides", "multiple_of",
          "not_multiple_of", "json_type", "not_json_type", "keys_outside", "len_gt", "len_lt")
# json_type / not_json_type: the JSON type of a value as the release's parser made it (a decoded JSON option)
_JSON_TYPES = {"object": lambda x: isinstance(x, dict), "array": lambda x: isinstance(x, list),
               "string": lambda x: isinstance(x, str), "boolean": lambda x: isinstance(x, bool),
               "number": lambda x: isinstance(x, (int, float)) and not isinstance(x, bool),
               "null": lambda x: x is None}
_SUBJECTS = ("dest", "env", "model")
# a release's source: file.py:LINES@version (LINES: 411, 411-415, 411,420-422), several joined by ', ' or '; '
_SOURCE = re.compile(r"^[\w./-]+\.py:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*@[\w.+-]+"
                     r"(?:[,;] [\w./-]+\.py:\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*@[\w.+-]+)*(?: \(.+\))?$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ChecksTableError(RuleDefinitionError):
    """A malformed entry of a checks table (a bug in the package's data, found when it is imported)."""


class RawTables:
    """The check tables as their YAML files hold them (engine -> the file's object): what the start-up cache keeps,
    so the YAML is parsed only when a file changed."""

    __slots__ = ("files",)

    def __init__(self, files: dict[str, Any]) -> None:
        self.files = files


class Entry:
    """One compiled entry: its metadata and its condition (a function of a :class:`LineView`)."""

    __slots__ = ("id", "engine", "title", "releases", "message", "why", "fix", "severity", "field", "cond",
                 "dests", "env_names", "reads_model")

    def __init__(self, id: str, engine: str, raw: dict, cond: Callable[[LineView], bool], dests: list[str],
                 env_names: list[str], reads_model: bool) -> None:
        self.id, self.engine = id, engine
        self.title, self.message, self.why, self.fix = raw["title"], raw["message"], raw["why"], raw["fix"]
        self.releases: dict[str, str] = dict(raw["releases"])
        self.severity = raw.get("severity", "error")
        self.field = raw.get("field")
        self.cond = cond
        self.dests, self.env_names, self.reads_model = dests, env_names, reads_model

    def __repr__(self) -> str:
        return f"Entry({self.id!r}, {sorted(self.releases)})"


# ------------------------------------------------------------------ what a predicate reads

class LineView:
    """The values one document gives the engine (plain: docs/architecture.md, Start-up)."""

    __slots__ = ("reading", "env", "version", "arch")

    def __init__(self, reading: Any, env: dict[str, str], version: Any, arch: Any) -> None:
        self.reading, self.env, self.version, self.arch = reading, env, version, arch

    def given(self, dest: str) -> bool:
        return (self.reading.model is not None) if dest == "model_path" else dest in self.reading.given

    def value(self, dest: str) -> Any:
        if dest == "model_path":
            return self.reading.model
        g = self.reading.given.get(dest)
        if g is not None:
            return g.value
        opt = self.reading.dump.dest(dest)
        return None if opt is None else opt.default

    def json_object(self, dest: str) -> dict:
        """A JSON-object option (``--compilation-config``, ``--speculative-config``, ...) as given: its text parsed, or
        the object the parser built (a config object's fields); ``{}`` when not given (the parser's default is an
        object marker, not the config) or not an object."""
        if not self.given(dest):
            return {}
        raw = self.value(dest)
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except ValueError:
                return {}
        if hasattr(raw, "model_dump"):
            raw = raw.model_dump()
        elif not isinstance(raw, dict):
            raw = getattr(raw, "__dict__", None)
        return raw if isinstance(raw, dict) else {}

    def env_set(self, name: str) -> bool:
        return name in self.env

    def env_value(self, name: str, parser: str | None, default: Any) -> Any:
        raw = self.env.get(name)
        p = envs.declared_parser(self.version, name) or (envs.PARSERS.get(parser) if parser else None)
        v = None if raw is None or p is None else p.read(raw)
        return default if v is None else v


# ------------------------------------------------------------------ compiling an entry

def _fail(entry_id: str, where: str, problem: str) -> ChecksTableError:
    return ChecksTableError(f"checks table entry {entry_id}: {where}: {problem}")


def is_number(x: Any) -> bool:
    """A number as a config class reads one: int or float, never a bool."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _operand(eid: str, where: str, spec: Any, dests: list[str]) -> Callable[[LineView], Any]:
    """A comparison's right-hand side: a literal, or ``{dest: OTHER}``."""
    if isinstance(spec, dict):
        if set(spec) != {"dest"} or not isinstance(spec["dest"], str):
            raise _fail(eid, where, f"an operand is a literal or {{dest: NAME}}, got {spec!r}")
        other = spec["dest"]
        dests.append(other)
        return lambda v: v.value(other)
    return lambda v: spec


def _test(eid: str, where: str, op: str, arg: Any, dests: list[str]) -> Callable[[Any, Callable[[], bool]], bool]:
    """``test(value, given) -> bool`` for one test of a predicate; ``given()`` says whether the option is given."""
    if op == "is":
        # YAML reads an unquoted true/false/null as a value: the same word
        arg = {True: "true", False: "false", None: "null"}.get(arg, arg) if not isinstance(arg, str) else arg
        if arg not in _IS:
            raise _fail(eid, where, f"is: must be one of {', '.join(_IS)}, got {arg!r}")
        return {"set": lambda x, g: g(), "unset": lambda x, g: not g(), "true": lambda x, g: x is True,
                "false": lambda x, g: x is False, "null": lambda x, g: x is None,
                "notnull": lambda x, g: x is not None,
                "blank": lambda x, g: isinstance(x, str) and not x.strip(),
                "notblank": lambda x, g: isinstance(x, str) and bool(x.strip()),
                "truthy": lambda x, g: bool(x), "falsy": lambda x, g: not x}[arg]
    if op in ("json_type", "not_json_type"):
        if arg not in _JSON_TYPES:
            raise _fail(eid, where, f"{op}: one of {', '.join(_JSON_TYPES)}, got {arg!r}")
        is_type = _JSON_TYPES[arg]
        return (lambda x, g: is_type(x)) if op == "json_type" else (lambda x, g: not is_type(x))
    if op == "keys_outside":
        if not isinstance(arg, list) or not all(isinstance(k, str) for k in arg):
            raise _fail(eid, where, f"{op}: takes a list of key names")
        keys = set(arg)
        return lambda x, g: isinstance(x, dict) and any(k not in keys for k in x)
    if op in ("len_gt", "len_lt"):
        if not is_number(arg):
            raise _fail(eid, where, f"{op}: takes a number")
        return (lambda x, g: isinstance(x, (list, dict, str)) and len(x) > arg) if op == "len_gt" else (
            lambda x, g: isinstance(x, (list, dict, str)) and len(x) < arg)
    if op in ("in", "not_in"):
        if not isinstance(arg, list) or not arg:
            raise _fail(eid, where, f"{op}: takes a non-empty list")
        vals = list(arg)
        return (lambda x, g: x in vals) if op == "in" else (lambda x, g: x not in vals)
    if op in ("in_stripped_lower", "not_in_stripped_lower"):
        if not isinstance(arg, list) or not arg or not all(isinstance(v, str) for v in arg):
            raise _fail(eid, where, f"{op}: takes a non-empty list of strings")
        low = [v.lower() for v in arg]
        inside = op == "in_stripped_lower"
        return lambda x, g: isinstance(x, str) and (x.strip().lower() in low) == inside
    if op in ("lt", "le", "gt", "ge", "divides", "not_divides", "multiple_of", "not_multiple_of"):
        if not (is_number(arg) or isinstance(arg, dict)):
            raise _fail(eid, where, f"{op}: takes a number or {{dest: NAME}}, got {arg!r}")
    rhs = _operand(eid, where, arg, dests)
    if op == "eq":
        return _bind(rhs, lambda x, y: x == y)
    if op == "ne":
        return _bind(rhs, lambda x, y: x != y)
    cmp = {"lt": lambda x, y: x < y, "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
           "divides": lambda x, y: x != 0 and y % x == 0, "not_divides": lambda x, y: x == 0 or y % x != 0,
           "multiple_of": lambda x, y: y != 0 and x % y == 0,
           "not_multiple_of": lambda x, y: y == 0 or x % y != 0}.get(op)
    if cmp is None:
        raise _fail(eid, where, f"unknown test {op!r} (one of {', '.join(_TESTS)})")
    return _bind(rhs, lambda x, y: is_number(x) and is_number(y) and cmp(x, y))


def _bind(rhs: Callable[[LineView], Any], fn: Callable[[Any, Any], bool]):
    # the view is bound per evaluation (see _predicate): the test reads the right-hand side from it
    def test(x: Any, g: Callable[[], bool], view: LineView | None = None) -> bool:
        return bool(fn(x, rhs(view)))
    test.needs_view = True   # type: ignore[attr-defined]
    return test


def _one_test(eid: str, where: str, pred: dict, allowed_extra: set[str]) -> tuple[str, Any]:
    tests = [k for k in pred if k in _TESTS]
    unknown = set(pred) - set(_TESTS) - allowed_extra
    if unknown:
        raise _fail(eid, where, f"unknown key(s) {', '.join(sorted(unknown))}")
    if len(tests) != 1:
        raise _fail(eid, where, f"a predicate has exactly one test ({', '.join(_TESTS)}), got {tests or 'none'}")
    return tests[0], pred[tests[0]]


def _apply(test, x: Any, given: Callable[[], bool], view: LineView) -> bool:
    return test(x, given, view) if getattr(test, "needs_view", False) else test(x, given)


def _condition(eid: str, where: str, c: Any, acc: dict) -> Callable[[LineView], bool]:
    if not isinstance(c, dict) or not c:
        raise _fail(eid, where, f"a condition is a mapping, got {c!r}")
    if "any" in c or "all" in c:
        key = "any" if "any" in c else "all"
        if set(c) != {key} or not isinstance(c[key], list) or not c[key]:
            raise _fail(eid, where, f"{key}: takes a non-empty list of conditions and nothing beside it")
        parts = [_condition(eid, f"{where}.{key}[{i}]", x, acc) for i, x in enumerate(c[key])]
        return (lambda v: any(p(v) for p in parts)) if key == "any" else (lambda v: all(p(v) for p in parts))
    subjects = [k for k in _SUBJECTS if k in c]
    if len(subjects) != 1:
        raise _fail(eid, where, f"a predicate has exactly one of dest, env, model (or any/all), got {sorted(c)}")
    subj = subjects[0]
    if subj == "dest":
        name = c["dest"]
        if not isinstance(name, str) or not name.isidentifier():
            raise _fail(eid, where, f"dest must be a parser destination name, got {name!r}")
        if "key" in c:
            return _key_condition(eid, where, c, acc)
        if "default" in c:
            raise _fail(eid, where, "default: goes with key: (a JSON option's field default)")
        op, arg = _one_test(eid, where, c, {"dest"})
        acc["dests"].append(name)
        test = _test(eid, where, op, arg, acc["dests"])
        return lambda v: _apply(test, v.value(name), lambda: v.given(name), v)
    if subj == "env":
        name, parser, default = c["env"], c.get("as"), c.get("default")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name):
            raise _fail(eid, where, f"env must be a variable name, got {name!r}")
        if parser is not None and parser not in envs.PARSERS:
            raise _fail(eid, where, f"as: {parser!r} is not a parser of core/rules/envs.py ({', '.join(envs.PARSERS)})")
        op, arg = _one_test(eid, where, c, {"env", "as", "default"})
        if op not in ("is",) or arg not in ("set", "unset"):
            if parser is None:
                raise _fail(eid, where, f"env {name}: a test of its value needs as: PARSER (how the release reads it)")
        test = _test(eid, where, op, arg, acc["dests"])
        acc["envs"].append(name)
        return lambda v: _apply(test, v.env_value(name, parser, default), lambda: v.env_set(name), v)
    # model
    m = c["model"]
    if set(c) != {"model"} or not isinstance(m, dict):
        raise _fail(eid, where, "model: takes a mapping (architectures_in, architectures_not_in, or field + a test)")
    acc["model"] = True
    if "architectures_in" in m or "architectures_not_in" in m:
        key = "architectures_in" if "architectures_in" in m else "architectures_not_in"
        names = m[key]
        if set(m) != {key} or not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise _fail(eid, where, f"model.{key} takes a non-empty list of architecture names and nothing beside it")
        inside = key == "architectures_in"
        return lambda v: v.arch is not None and _architecture(v.arch) is not None and (
            (_architecture(v.arch) in names) == inside)
    if "top_field" in m:
        # a key of config.json's top level as written (the object the release's hf_config is made of: its
        # model_type, not a text_config's), for a release that tests hf_config.<key> itself
        top = m["top_field"]
        if not isinstance(top, str) or "field" in m:
            raise _fail(eid, where, "model.top_field takes a config.json key name (and no field: beside it)")
        op, arg = _one_test(eid, where, m, {"top_field"})
        test = _test(eid, where, op, arg, acc["dests"])
        return lambda v: v.arch is not None and isinstance(getattr(v.arch, "raw", None), dict) and _apply(
            test, v.arch.raw.get(top), lambda: v.arch.raw.get(top) is not None, v)
    fld = m.get("field")
    if not isinstance(fld, str):
        raise _fail(eid, where, "model: needs field: NAME (or top_field: NAME) with a test, or architectures_in / "
                                "architectures_not_in")
    op, arg = _one_test(eid, where, m, {"field"})
    test = _test(eid, where, op, arg, acc["dests"])
    return lambda v: v.arch is not None and _apply(test, _model_field(v.arch, fld), lambda: _model_field(
        v.arch, fld) is not None, v)


def _key_condition(eid: str, where: str, c: dict, acc: dict) -> Callable[[LineView], bool]:
    """``{dest: NAME, key: a.b, [default: V,] <test>}``: a field of a JSON option (the dict the release's parser
    made of it; a dotted key descends into nested objects). ``is: set/unset`` = the JSON gives the key; the value
    is the JSON's, else ``default`` (the config class's field default, which its validator sees), else None. A
    value that is not an object (the option not given: the parser's default) gives no key."""
    name, key = c["dest"], c["key"]
    if not isinstance(key, str) or not all(p.isidentifier() for p in key.split(".")):
        raise _fail(eid, where, f"key must be a JSON field name (dotted for nesting), got {key!r}")
    op, arg = _one_test(eid, where, c, {"dest", "key", "default"})
    has_default, default = "default" in c, c.get("default")
    acc["dests"].append(name)
    test = _test(eid, where, op, arg, acc["dests"])
    parts = key.split(".")

    def lookup(v: LineView) -> tuple[bool, Any]:
        obj = v.value(name) if v.given(name) else None
        for p in parts:
            if not isinstance(obj, dict) or p not in obj:
                return False, None
            obj = obj[p]
        return True, obj

    def cond(v: LineView) -> bool:
        found, x = lookup(v)
        if not found and has_default:
            x = default
        return _apply(test, x, lambda: lookup(v)[0], v)
    return cond


def _architecture(arch: Any) -> str | None:
    return getattr(arch, "architecture", None)


def _model_field(arch: Any, name: str) -> Any:
    if name in type(arch).__slots__ and name not in ("text", "raw"):
        return getattr(arch, name)
    return arch.get(name)


def compile_entry(engine: str, raw: Any, index: int) -> Entry:
    """One entry of ``<engine>.yaml`` compiled; :class:`ChecksTableError` naming the entry when it is malformed."""
    eid = raw.get("id") if isinstance(raw, dict) else None
    label = eid if isinstance(eid, str) else f"#{index} of {engine}.yaml"
    if not isinstance(raw, dict):
        raise _fail(label, "entry", "an entry is a mapping")
    unknown = set(raw) - _ENTRY_KEYS
    if unknown:
        raise _fail(label, "entry", f"unknown key(s) {', '.join(sorted(unknown))}")
    missing = [k for k in _REQUIRED if not raw.get(k)]
    if missing:
        raise _fail(label, "entry", f"missing {', '.join(missing)}")
    for k in ("id", "title", "message", "why", "fix"):
        if not isinstance(raw[k], str):
            raise _fail(label, k, "must be a string")
    if not raw["id"].startswith(f"{engine}-"):
        raise _fail(label, "id", f"an entry of {engine}.yaml has an id starting with '{engine}-'")
    rel = raw["releases"]
    if not isinstance(rel, dict):
        raise _fail(label, "releases", "maps a catalog release key to its source file:line@version")
    for key, src in rel.items():
        if not isinstance(key, str) or not isinstance(src, str) or not _SOURCE.match(src):
            raise _fail(label, f"releases[{key}]", f"the source is file.py:LINE@version, got {src!r}")
    if raw.get("severity", "error") not in ("error", "warning", "info"):
        raise _fail(label, "severity", "error, warning or info")
    _check_examples(label, raw.get("examples"), rel)
    when = raw["when"]
    if not isinstance(when, list) or not when:
        raise _fail(label, "when", "a non-empty list of conditions (all hold: the engine refuses)")
    acc: dict[str, Any] = {"dests": [], "envs": [], "model": False}
    parts = [_condition(label, f"when[{i}]", c, acc) for i, c in enumerate(when)]
    known = set(acc["dests"]) | set(acc["envs"])
    for name in _PLACEHOLDER.findall(raw["message"]):
        if name not in known:
            raise _fail(label, "message", f"{{{name}}} is not a dest or env the entry reads")
    return Entry(raw["id"], engine, raw, lambda v: all(p(v) for p in parts), acc["dests"], acc["envs"], acc["model"])


def _check_examples(label: str, examples: Any, releases: dict) -> None:
    if examples is None:
        return
    if not isinstance(examples, list) or not examples:
        raise _fail(label, "examples", "a non-empty list of {refuse: [argv], accept: [argv]}")
    for i, ex in enumerate(examples):
        where = f"examples[{i}]"
        if not isinstance(ex, dict) or set(ex) - _EXAMPLE_KEYS or not {"refuse", "accept"} <= set(ex):
            raise _fail(label, where, f"refuse and accept (argv lists), optionally {', '.join(sorted(_EXAMPLE_KEYS - {'refuse', 'accept'}))}")
        for k in ("refuse", "accept"):
            if not isinstance(ex[k], list) or not all(isinstance(t, str) for t in ex[k]):
                raise _fail(label, f"{where}.{k}", "an argv: a list of strings")
        for k in ("env", "accept_env"):
            if k in ex and not (isinstance(ex[k], dict) and all(isinstance(v, str) for v in ex[k].values())):
                raise _fail(label, f"{where}.{k}", "a mapping of variable names to strings")
        if "model" in ex and not isinstance(ex["model"], str):
            raise _fail(label, f"{where}.model", "a catalog model key")
        if "releases" in ex and not (isinstance(ex["releases"], list) and set(ex["releases"]) <= set(releases)):
            raise _fail(label, f"{where}.releases", "a list of releases the entry lists")


# ------------------------------------------------------------------ reading the tables

def _read_files() -> RawTables:
    import yaml  # only on a start-up cache miss

    files = {}
    for p in sorted(CHECKS_DIR.glob("*.yaml")):
        with p.open(encoding="utf-8") as fh:
            files[p.stem] = yaml.load(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506 - safe
    return RawTables(files)


def raw_tables() -> RawTables:
    paths = sorted(CHECKS_DIR.glob("*.yaml"))
    name = _startup_cache.entry_name("checks", (Path(__file__),), CHECKS_DIR, paths) if paths else None
    return _startup_cache.cached(name, RawTables, _read_files)


def compile_tables(files: dict[str, Any]) -> dict[str, Entry]:
    """Every entry of the tables (engine -> file object), by id; :class:`ChecksTableError` on the first malformed."""
    out: dict[str, Entry] = {}
    for engine, doc in files.items():
        if engine not in ENGINES:
            raise ChecksTableError(f"checks table {engine}.yaml: not an engine ({', '.join(ENGINES)})")
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("checks"), list):
            raise ChecksTableError(f"checks table {engine}.yaml: needs format: {FORMAT} and a checks: list")
        for i, raw in enumerate(doc["checks"]):
            e = compile_entry(engine, raw, i)
            if e.id in out:
                raise _fail(e.id, "id", "defined twice")
            out[e.id] = e
    return out


# ------------------------------------------------------------------ the view of one document

def line_view(r: Any) -> LineView | None:
    """The values ``r`` gives the engine, memoised on ``r`` (None: the release's parser refuses the rendered line, or
    the release has no parser dump: rule argv-refused / extra-arg-* report that)."""
    memo = getattr(r, "_checks_view", None)
    key = (tuple(r.spec.extraArgs), getattr(r.version, "key", None), id(r.spec))
    if memo is not None and memo[0] == key:
        return memo[1]
    view = _view(r)
    try:
        r._checks_view = (key, view)
    except AttributeError:
        pass
    return view


def _view(r: Any) -> LineView | None:
    if engine_argv.version_dump(r.version) is None:
        return None
    argv = [t for a in render_args(r) for t in a.tokens]
    reading = engine_argv.read_argv(r.engine, r.version, argv)
    if reading.refusals:
        return None
    return LineView(reading, dict(r.spec.env), r.version, r.model_arch)


def _field(r: Any, e: Entry) -> str:
    if e.field:
        return e.field
    if e.dests:
        dump = engine_argv.version_dump(r.version)
        dump_opt = dump.dest(e.dests[0]) if dump is not None else None
        if dump_opt is not None:
            for f in r.engine.flags:
                if f.flag in dump_opt.flags:
                    return f"spec.{f.field}"
            found = extra_arg(r, *dump_opt.flags)
            if found is not None:
                return f"spec.extraArgs[{found[0]}]"
        return "spec.extraArgs"
    if e.env_names:
        return f"spec.env.{e.env_names[0]}"
    return "spec.model.name"


def _message(e: Entry, v: LineView) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name in e.dests:
            return str(v.value(name))
        raw = v.env.get(name)
        return str(raw) if raw is not None else "unset"
    return _PLACEHOLDER.sub(sub, e.message)


def _check_of(e: Entry) -> Callable[..., Iterator[tuple]]:
    def check(r: Any, c: Any) -> Iterator[tuple]:
        v = line_view(r)
        if v is None or (e.reads_model and v.arch is None):
            return
        if e.cond(v):
            yield _field(r, e), _message(e, v)
    check.__name__ = f"check_{e.id.replace('-', '_')}"
    return check


def _register(e: Entry) -> None:
    newest = max(e.releases, key=_release_order)
    rule(e.id, family="args", severity=e.severity, engines=[e.engine], field=e.field or "spec.extraArgs",
         title=e.title, why=e.why, fix=e.fix, source=e.releases[newest],
         sources={f"{e.engine} {k}": src for k, src in e.releases.items()},
         checked_by="oracle", no_cel=NO_CEL if e.severity == "error" else None)(_check_of(e))
    RULES[e.id] = ReleaseRule.of(RULES[e.id])


def _release_order(key: str) -> tuple:
    return tuple(int(p) if p.isdigit() else -1 for p in re.split(r"[.-]", key))


TABLE: dict[str, Entry] = compile_tables(raw_tables().files)
for _entry in TABLE.values():
    _register(_entry)
