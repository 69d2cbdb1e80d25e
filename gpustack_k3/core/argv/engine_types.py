"""The engines' own argparse ``type=`` functions and custom actions, re-implemented from their source.

A parser dump names each type function and custom action class with a hash of its source
(tools/engine_parsers/describe.py). ``TYPES`` and ``ACTIONS`` map those names to our implementation and list
the source hashes the implementation was written against; a dump naming a function or hash not listed here is
refused (``UnknownEngineCode``) rather than read approximately. To add an engine version whose code changed:
read the function in its wheel, update or add the implementation here, add the hash.
"""
from __future__ import annotations

import argparse
import functools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpustack_k3.errors import OperationalError


class UnknownEngineCode(OperationalError):
    """A parser dump names engine code this reader does not implement (by name or by source hash)."""


# ------------------------------------------------------------------ vLLM

def _vllm_human_readable_int(suffixes: str) -> Callable[[str], int]:
    """vllm human_readable_int: '1k' -> 1000, '1K' -> 1024, '25.6k' -> 25600; decimals only with the decimal
    (lower-case) suffixes. utils/argparse_utils.py@0.33.0 (k m g t / K M G T); engine/arg_utils.py:1740@0.11.0
    (k m g / K M G)."""
    pattern = re.compile(rf"(\d+(?:\.\d+)?)([{suffixes}])")

    def human_readable_int(value: str) -> int:
        value = value.strip()
        m = pattern.fullmatch(value)
        if m:
            number, suffix = m.groups()
            if suffix.islower():
                return int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
            try:
                return int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to use "
                    f"{number}{suffix.lower()} instead?") from None
        return int(value)

    return human_readable_int


def _vllm_human_readable_int_or_auto(value: str) -> int:
    """utils/argparse_utils.py human_readable_int_or_auto@0.33.0: '-1' or 'auto' (any case) -> -1."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return _vllm_human_readable_int("kmgtKMGT")(value)


def _vllm_parse_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """engine/arg_utils.py parse_type: a ValueError of the wrapped type becomes an ArgumentTypeError."""
    def _parse_type(val: str) -> Any:
        try:
            return return_type(val)
        except ValueError as e:
            # the engine prints the type's repr ("<function loads at 0x7f...>"): its name, without the address
            # that changes every run
            name = f"{getattr(return_type, '__module__', None) or ''}.{getattr(return_type, '__qualname__', '')}"
            shown = f"<function {name.lstrip('.')}>" if getattr(return_type, "__qualname__", None) else return_type
            raise argparse.ArgumentTypeError(f"Value {val} cannot be converted to {shown}.") from e

    _parse_type.__name__ = "_parse_type"
    return _parse_type


def _vllm_optional_type(return_type: Callable[[str], Any]) -> Callable[[str], Any]:
    """engine/arg_utils.py optional_type: '' and 'None' are None, else parse_type(return_type)."""
    def _optional_type(val: str) -> Any:
        if val == "" or val == "None":
            return None
        return _vllm_parse_type(return_type)(val)

    _optional_type.__name__ = "_optional_type"
    return _optional_type


def _vllm_union_dict_and_str(val: str) -> Any:
    """engine/arg_utils.py union_dict_and_str: a JSON object when it looks like one, else the string."""
    if not re.match(r"(?s)^\s*{.*}\s*$", val):
        return str(val)
    return _vllm_optional_type(json.loads)(val)


_HUMAN_NUMBER = r"\b\d+(?:\.\d+)?[kKmMgGtT]\b"   # compiled on first use (re's cache), not at every import


def _expand_json_human_readable_numbers(val: str) -> str:
    """engine/arg_utils.py _expand_json_human_readable_numbers@0.33.0: bare 80m / 1K outside JSON strings."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(_HUMAN_NUMBER, lambda m: str(_vllm_human_readable_int("kmgtKMGT")(m.group())), parts[i])
    return "".join(parts)


def _vllm_parse_dataclass(cls: dict, expand_numbers: bool) -> Callable[[str], Any]:
    """engine/arg_utils.py _compute_kwargs.parse_dataclass: ``TypeAdapter(cls).validate_json(val)``. The dump
    gives the config dataclass's fields and, per field, its JSON value types (from pydantic's schema of the class;
    "any" where the engine validates with its own code); the JSON is validated by pydantic against a model of
    those types, with the class's ``extra`` setting, so keys and value types are accepted or refused as the
    engine's model does. A dump that records the class's schema (``schema``: each field as pydantic's JSON schema
    of the class states it, tools/engine_parsers/describe.py field_schemas) gives the fields their bounds (ge, gt,
    le, lt), enum and Literal values and nested config objects' keys; a refusal names the field's declaration
    (``at``). Not seen: what the class's own validators accept or refuse (a field they decide is "validated":
    any value)."""
    fields = list(cls.get("fields") or ())
    forbid = cls.get("extra") == "forbid"
    name = cls.get("dataclass", "config").rsplit(".", 1)[-1]
    types = cls.get("types") or {f: ["any"] for f in fields}
    ignored = {f for f, alts in types.items() if alts == ["ignored"]}
    refused = {f for f, alts in types.items() if alts == ["refused"]}
    schemas = {f: js for f, js in (cls.get("schema") or {}).items() if types.get(f) not in (["validated"], ["ignored"], ["refused"])}
    at = cls.get("at") or {}
    types_json = json.dumps(types, sort_keys=True)
    schemas_json = json.dumps(schemas, sort_keys=True)

    def parse_dataclass(val: str) -> Any:
        text = _expand_json_human_readable_numbers(val) if expand_numbers else val
        # the model is built when the option is first given (cached), not with the parser: building the ~16
        # config models of a vLLM parser costs pydantic hundreds of ms that most command lines never use
        model = _dataclass_model(name, types_json, forbid, schemas_json)
        try:
            obj = model.model_validate_json(text)
        except ValueError as e:   # pydantic's ValidationError is a ValueError
            where = _error_field(e)
            source = f" ({name}.{where}, {at[where]})" if where in at else ""
            raise argparse.ArgumentTypeError(f"validation error for {name}: {_first_error(e)}{source}") from None
        except RecursionError:
            raise argparse.ArgumentTypeError(f"validation error for {name}: JSON nested too deeply") from None
        bad = sorted(refused & obj.model_fields_set)
        if bad:   # an init=False field of a pydantic dataclass
            raise argparse.ArgumentTypeError(f"validation error for {name}: {bad[0]}: Unexpected keyword argument")
        post = _POST_INIT.get(name)
        problem = post(obj.model_dump(mode="json")) if post else None
        if problem:   # the dataclass's own __post_init__, which TypeAdapter(cls).validate_json runs
            raise argparse.ArgumentTypeError(f"validation error for {name}: {problem}")
        # the keys given, with the values as the engine's model converted them ("3" -> 3 for an int field);
        # an init=False field is accepted and dropped, as the dataclass's constructor never receives it
        return obj.model_dump(mode="json", exclude_unset=True, exclude=ignored)

    parse_dataclass.__name__ = "parse_dataclass"
    return parse_dataclass


_KV_ROLES = ("kv_producer", "kv_both", "kv_consumer")   # get_args(KVRole): the order the engine prints


def _kv_transfer_post_init(cfg: dict) -> str | None:
    """KVTransferConfig.__post_init__ (config/kv_transfer.py:113-124@0.33.0, :95-106@0.29.0 and @0.28.0,
    :83-93@0.11.0): a connector needs a kv_role. (A kv_role outside the three is refused by its Literal type.)"""
    if cfg.get("kv_connector") is not None and cfg.get("kv_role") is None:
        return f"Please specify kv_role when kv_connector is set, supported roles are {_KV_ROLES}"
    return None


# A config dataclass's own __post_init__ checks, by class name: what the dump cannot carry (it records fields and
# their types); each cites the release lines it transcribes
_POST_INIT = {"KVTransferConfig": _kv_transfer_post_init}


def _first_error(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(map(str, first.get('loc', ()))) or 'input'}: {first.get('msg')}"
    return str(e).splitlines()[0]


def _error_field(e: ValueError) -> str | None:
    """The top-level field a pydantic error is about (None: the object itself)."""
    errors = getattr(e, "errors", None)
    loc = errors()[0].get("loc", ()) if callable(errors) and errors() else ()
    return str(loc[0]) if loc else None


_NUMBER_BOUNDS = {"minimum": "ge", "exclusiveMinimum": "gt", "maximum": "le", "exclusiveMaximum": "lt"}


def schema_annotation(js: Any, path: str = "config") -> Any:
    """A Python annotation pydantic validates as the engine's config class validates the field whose JSON schema
    (as the parser dump records it, tools/engine_parsers/describe.py prune_schema) is ``js``: numbers with their
    bounds (``Field(ge=, gt=, le=, lt=)``), an enum class (``ref``) as an Enum of its values (it takes ``"2"`` for
    2 as the engine's IntEnum does; a Literal does not), a Literal's values, lists, string-keyed maps and nested
    config objects (extra keys refused where the schema says ``additionalProperties: false``). An empty schema
    (a type JSON schema cannot show) is any value."""
    import enum
    from typing import Annotated, Literal, Union

    from pydantic import Field

    if not isinstance(js, dict):
        return Any
    alts = js.get("anyOf") or js.get("oneOf")
    if alts:
        out = [schema_annotation(a, path) for a in alts]
        if Any in out:
            return Any
        return Union[tuple(out)] if len(out) > 1 else out[0]
    if "enum" in js or "const" in js:
        values = list(js["enum"]) if "enum" in js else [js["const"]]
        if not values:
            return Any
        if js.get("ref") and "enum" in js:
            mixin = {"integer": int, "string": str, "number": float}.get(js.get("type"))
            members = {f"V{i}": v for i, v in enumerate(values)}
            return enum.Enum(js["ref"], members, type=mixin) if mixin else enum.Enum(js["ref"], members)
        return Literal[tuple(values)]
    t = js.get("type")
    if isinstance(t, list):
        return schema_annotation({"anyOf": [{**js, "type": x} for x in t]}, path)
    bounds = {_NUMBER_BOUNDS[k]: js[k] for k in _NUMBER_BOUNDS if k in js}
    if t in ("integer", "number"):
        base = int if t == "integer" else float
        return Annotated[base, Field(**bounds)] if bounds else base
    if t == "string":
        return str
    if t == "boolean":
        return bool
    if t == "null":
        return type(None)
    if t == "array":
        return list[schema_annotation(js.get("items", {}), path)]
    if t == "object":
        if "properties" in js:
            return _object_model(json.dumps(js, sort_keys=True), path)
        extra = js.get("additionalProperties")
        return dict[str, schema_annotation(extra, path)] if isinstance(extra, dict) else dict
    return Any


@functools.lru_cache(maxsize=256)
def _object_model(js_json: str, path: str):
    """A nested config object's model: its keys' schemas, its required keys, extra keys refused where the schema
    says so (a vLLM config class forbids them) and kept as given otherwise."""
    from pydantic import ConfigDict, create_model

    js = json.loads(js_json)
    required = set(js.get("required") or ())
    fields = {k: (schema_annotation(v, f"{path}.{k}"), ... if k in required else None)
              for k, v in js["properties"].items()}
    extra = "forbid" if js.get("additionalProperties") is False else "allow"   # allow: the keys given are kept
    return create_model(js.get("ref") or path.rsplit(".", 1)[-1], __config__=ConfigDict(extra=extra), **fields)


@functools.lru_cache(maxsize=64)
def _dataclass_model(name: str, types_json: str, forbid: bool, schemas_json: str = "{}"):
    """A pydantic model of a JSON object with these fields' value types (a field left out keeps its default;
    a null is a value, checked like any other); a field with a recorded schema is validated by it
    (schema_annotation: bounds, enums, nested objects)."""
    from typing import Literal, Union

    from pydantic import ConfigDict, create_model

    simple = {"int": int, "float": float, "str": str, "bool": bool, "null": type(None), "object": dict}

    def annotation(alts: list) -> Any:
        out = []
        for a in alts:
            if isinstance(a, dict) and "enum" in a:
                out.append(Literal[tuple(a["enum"])] if a["enum"] else Any)
            elif isinstance(a, dict) and "list" in a:
                out.append(list[annotation(a["list"])])
            elif isinstance(a, dict) and "dict" in a:
                out.append(dict[str, annotation(a["dict"])])
            else:
                out.append(simple.get(a, Any))   # "any", and "validated": the engine's own code decides
        if Any in out:
            return Any
        return Union[tuple(out)] if len(out) > 1 else out[0]

    schemas = json.loads(schemas_json)
    fields = {f: (schema_annotation(schemas[f], f) if f in schemas else annotation(alts), None)
              for f, alts in json.loads(types_json).items()}
    return create_model(name, __config__=ConfigDict(extra="forbid" if forbid else "ignore"), **fields)


def _vllm_parse_reasoning_parser(val: str) -> str:
    """engine/arg_utils.py parse_reasoning_parser@0.33.0: 'none' (any case) is the unset default."""
    return "" if val.lower() == "none" else val


def _lower_dashes(s: str) -> str:
    return s.lower().replace("-", "_")


def _device_ids(s: str) -> list:
    return [int(d) if d.isdigit() else d for d in (part.strip() for part in s.split(","))]


# ------------------------------------------------------------------ SGLang

def _sglang_human_readable_int(value: str) -> int:
    """srt/utils/common.py human_readable_int@0.5.23: SI k M G T (decimals allowed), IEC Ki Mi Gi Ti."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if m:
        number, suffix = m.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(f"Decimals are not allowed with IEC suffixes like '{suffix}'.")
            return int(number) * iec[suffix]
        from decimal import Decimal

        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. Use a plain integer or a suffix (k, M, G, T, Ki, Mi, Gi, Ti).") from None


def _sglang_json_list_type(value: str) -> Any:
    """srt/utils/common.py json_list_type@0.5.23 (orjson.loads)."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


def _sglang_nullable_str(val: str) -> Any:
    """srt/utils/common.py nullable_str@0.5.23."""
    if not val or val == "None":
        return None
    return val


def _sglang_cuda_graph_backend(raw: str) -> str:
    """srt/model_executor/cuda_graph_config.py parse_cuda_graph_backend_arg@0.5.23."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def _sglang_cuda_graph_config(desc: dict) -> Callable[[str], Any]:
    """srt/model_executor/cuda_graph_config.py parse_cuda_graph_config_arg@0.5.23: a JSON object of
    phase -> settings object, phases and keys per phase from the dump (Phase.ALL, ALLOWED_KEYS_PER_PHASE)."""
    refs = desc.get("refs") or {}
    phases = list(refs.get("Phase.ALL") or [])
    allowed = refs.get("ALLOWED_KEYS_PER_PHASE") or {}

    def parse_cuda_graph_config_arg(raw: str) -> Any:
        try:
            parsed = json.loads(raw)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {e}") from None
        if not isinstance(parsed, dict):
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
        for phase, settings in parsed.items():
            if str(phase) not in phases:
                raise argparse.ArgumentTypeError(f"--cuda-graph-config: unknown phase '{phase}', expected one of {phases}")
            if not isinstance(settings, dict):
                raise argparse.ArgumentTypeError(
                    f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}")
            if "backend" in settings:
                _sglang_cuda_graph_backend(settings["backend"])
            bad = [k for k in settings if k not in allowed.get(str(phase), ())]
            if bad:
                raise argparse.ArgumentTypeError(f"--cuda-graph-config['{phase}']: unknown key(s) {bad}")
        return parsed

    return parse_cuda_graph_config_arg


# ------------------------------------------------------------------ registry

# name -> (source hashes it was written against, builder(descriptor, build_inner) -> callable)
if TYPE_CHECKING:   # a type only: subscribing Callable at every import cost 0.28 M instructions (callgrind)
    Builder = Callable[[dict, Callable[[Any], Callable[[str], Any]]], Callable[[str], Any]]

TYPES: dict[str, tuple[frozenset[str], Builder]] = {
    "human_readable_int": (frozenset({"b6220b880fe0"}), lambda d, inner: _vllm_human_readable_int("kmgtKMGT")),
    "human_readable_int@0.11": (frozenset({"ff256af0ef99"}), lambda d, inner: _vllm_human_readable_int("kmgKMG")),
    "human_readable_int_or_auto": (frozenset({"b097f9dd51c8"}), lambda d, inner: _vllm_human_readable_int_or_auto),
    "optional_type": (frozenset({"eb8ebe7a1606", "e61edc4e63df"}),
                      lambda d, inner: _vllm_optional_type(inner(d["return_type"]))),
    "parse_type": (frozenset({"c59c48181f54", "4f0f4617ebb6"}), lambda d, inner: _vllm_parse_type(inner(d["return_type"]))),
    "union_dict_and_str": (frozenset({"520e4df987d2", "4950cc4f21bb"}), lambda d, inner: _vllm_union_dict_and_str),
    "_compute_kwargs.parse_dataclass": (frozenset({"36c3fe76426f"}), lambda d, inner: _vllm_parse_dataclass(d["cls"], True)),
    "_compute_kwargs.parse_dataclass@0.11": (frozenset({"6f1989f7a9f8"}),
                                              lambda d, inner: _vllm_parse_dataclass(d["cls"], False)),
    "parse_reasoning_parser": (frozenset({"afd921ec0bd0"}), lambda d, inner: _vllm_parse_reasoning_parser),
    "sglang.human_readable_int": (frozenset({"044db408df2e"}), lambda d, inner: _sglang_human_readable_int),
    "json_list_type": (frozenset({"21272671ccec"}), lambda d, inner: _sglang_json_list_type),
    "nullable_str": (frozenset({"900c08104995"}), lambda d, inner: _sglang_nullable_str),
    "parse_cuda_graph_backend_arg": (frozenset({"d972a254f19e"}), lambda d, inner: _sglang_cuda_graph_backend),
    "parse_cuda_graph_config_arg": (frozenset({"2c0e46c8c45e"}), lambda d, inner: _sglang_cuda_graph_config(d)),
}

# lambda source text (whitespace-normalised by the dump) -> implementation
LAMBDAS: dict[str, Callable[[str], Any]] = {
    'lambda s: s.lower().replace("-", "_")': _lower_dashes,
    'lambda s: [int(device_id) if device_id.isdigit() else device_id for device_id in '
    '(part.strip() for part in s.split(","))]': _device_ids,
}

_BUILTIN_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str, "json": json.loads,
                                                   "bool": bool}


def build_type(desc: Any) -> Callable[[str], Any] | None:
    """The callable for a dump's type descriptor; UnknownEngineCode for code this reader does not know."""
    if desc is None:
        return None
    if isinstance(desc, str):
        if desc not in _BUILTIN_TYPES:
            raise UnknownEngineCode(f"type {desc!r}")
        return _BUILTIN_TYPES[desc]
    if "lambda" in desc:
        fn = LAMBDAS.get(desc["lambda"])
        if fn is None:
            raise UnknownEngineCode(f"type {desc['lambda']}")
        return fn
    name = desc["fn"] + (f".{desc['inner']}" if desc.get("inner") == "parse_dataclass" else "")
    for key in (name, f"{name}@0.11", f"sglang.{name}"):
        entry = TYPES.get(key)
        if entry and desc.get("src") in entry[0]:
            return entry[1](desc, build_type)
    raise UnknownEngineCode(f"type function {name} with source hash {desc.get('src')}")


# ------------------------------------------------------------------ custom actions

class EnableDisableAction(argparse.Action):
    """vllm utils/argparse_utils.py EnableDisableAction@0.33.0: a BooleanOptionalAction whose negative strings
    (``--no-enable-x``, ``--disable-x``) are listed by the dump."""

    def __init__(self, option_strings, dest, negative=(), **kw):
        self.negative = frozenset(negative)
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string not in self.negative)


class StoreValues(argparse.Action):
    """Custom actions that store what argparse converted, after a deprecation warning (vllm
    DeprecatedLogConfigFileAction, SGLang DeprecatedAliasStoreAction)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class StoreTrue(argparse.Action):
    """SGLang DeprecatedStoreTrueAction (srt/arg_groups/argparse_actions.py@0.5.23)."""

    def __init__(self, option_strings, dest, **kw):
        kw.setdefault("nargs", 0)
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


class StoreConstValue(argparse.Action):
    """SGLang DeprecatedStoreConstAction: stores ``const_value``."""

    def __init__(self, option_strings, dest, const_value=None, **kw):
        self.const_value = const_value
        kw.setdefault("nargs", 0)
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const_value)


class VllmLoRAModules(argparse.Action):
    """vllm LoRAParserAction (entrypoints/common/cli_args.py@0.33.0, entrypoints/openai/cli_args.py@0.11.0):
    ``name=path`` or a JSON object with the LoRAModulePath fields (``fields`` / ``required`` from the dump)."""

    def __init__(self, option_strings, dest, fields=(), required_fields=(), **kw):
        self.fields, self.required_fields = set(fields), set(required_fields)
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        if values is None:
            values = []
        if isinstance(values, str):
            raise TypeError("Expected values to be a list")
        out = []
        for item in values:
            if item in (None, ""):
                continue
            if "=" in item and "," not in item:
                out.append(item)
                continue
            try:
                obj = json.loads(item)
            except ValueError:
                parser.error(f"Invalid JSON format for --lora-modules: {item}")
            if not isinstance(obj, dict) or set(obj) - self.fields or self.required_fields - set(obj):
                parser.error(f"Invalid fields for --lora-modules: {item}")
            out.append(obj)
        setattr(namespace, self.dest, out)


class SglangLoRAPaths(argparse.Action):
    """SGLang LoRAPathAction (srt/arg_groups/argparse_actions.py@0.5.23)."""

    def __call__(self, parser, namespace, values, option_string=None):
        out = []
        for p in values or []:
            p = p.strip()
            if p.startswith("{") and p.endswith("}"):
                obj = json.loads(p)
                assert "lora_path" in obj and "lora_name" in obj, f"{p!r} looks like a JSON str without lora keys"
                out.append(obj)
            else:
                out.append(p)
        setattr(namespace, self.dest, out)


# custom action class (module.Class) -> (source hashes, our action class); the argparse kind each behaves as
# is dumps.CUSTOM_ACTION_KINDS
ACTIONS: dict[str, tuple[frozenset[str], type[argparse.Action]]] = {
    "vllm.utils.argparse_utils.EnableDisableAction": (frozenset({"d0042998c525"}), EnableDisableAction),
    "vllm.entrypoints.common.cli_args.LoRAParserAction": (frozenset({"f5de51b9af81"}), VllmLoRAModules),
    "vllm.entrypoints.openai.cli_args.LoRAParserAction": (frozenset({"869c2517107f", "be071f37943d"}), VllmLoRAModules),
    # 0.29.0 moved 0.28.0's class (same source) from entrypoints/openai/ to entrypoints/launchers/
    "vllm.entrypoints.launchers.cli_args.LoRAParserAction": (frozenset({"f5de51b9af81", "be071f37943d"}),
                                                             VllmLoRAModules),
    "vllm.engine.arg_utils.DeprecatedLogConfigFileAction": (frozenset({"9434e209b8f0"}), StoreValues),
    "sglang.srt.arg_groups.argparse_actions.LoRAPathAction": (frozenset({"90bb96649a28"}), SglangLoRAPaths),
    "sglang.srt.arg_groups.argparse_actions.DeprecatedStoreTrueAction": (frozenset({"ac3ce141f606"}), StoreTrue),
    "sglang.srt.arg_groups.argparse_actions.DeprecatedStoreConstAction": (frozenset({"bac3563615ed"}), StoreConstValue),
}
