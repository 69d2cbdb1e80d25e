"""Rule vllm-config-field-bounds and the JSON options' class schemas: the constraints the parser dump records per
option (tools/engine_parsers/describe.py config_fields: class, field, declaration, pydantic's schema) refuse what
the release's config class refuses -- a number outside ge/gt/le/lt, a value outside an enum or Literal, an unknown
key of a class that forbids extra keys -- on a command line (check-args), in spec.extraArgs and inside JSON options,
on two releases per kind; the value on the bound is accepted; a typed field another rule judges gets one finding.
The release's own verdicts on a seeded sample of the same constraints: tests/engine_oracle/test_config_field_bounds_oracle.py."""
from __future__ import annotations

import argparse
import json

import pytest
from click.testing import CliRunner

from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import cli
from gpustack_k3.core.argv import version_dump
from gpustack_k3.core.argv.engine_types import _vllm_parse_dataclass, schema_annotation
from gpustack_k3.core.rules import validate

from .conftest import preset_doc

RULE = "vllm-config-field-bounds"
# the rule's firing cases are the command lines below (tests/core/test_registry.py, tests/core/test_rules.py)
CFB_DIRECT = {RULE}
BASE = ["vllm", "serve", "/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]


def check_args(version: str, argv: list[str]) -> tuple[int, list[dict]]:
    res = CliRunner().invoke(cli, ["check-args", "--engine", "vllm", "--engine-version", version, "-o", "json",
                                   "--", *BASE, *argv], catch_exceptions=False)
    return res.exit_code, [f for f in json.loads(res.stdout)["findings"] if f["severity"] == "error"]


# (kind, release, refused argv, the rule that reports it, words of its message, accepted argv: the bound itself)
REFUSED = [
    ("ge", "0.33.0", ["--max-num-queued-reqs", "-1"], RULE,
     ("--max-num-queued-reqs -1", "SchedulerConfig.max_num_queued_reqs", "greater than or equal to 0",
      "vllm/config/scheduler.py:92@0.33.0"), ["--max-num-queued-reqs", "0"]),
    ("ge", "0.34.0", ["--max-num-queued-reqs", "-1"], RULE,
     ("SchedulerConfig.max_num_queued_reqs", "greater than or equal to 0", "@0.34.0"), ["--max-num-queued-reqs", "0"]),
    ("ge", "0.33.0", ["--prefill-context-parallel-size", "-1"], RULE,
     ("ParallelConfig.prefill_context_parallel_size", "greater than or equal to 1"),
     ["--prefill-context-parallel-size", "1"]),
    ("ge", "0.28.0", ["--prefill-context-parallel-size", "-1"], RULE,
     ("ParallelConfig.prefill_context_parallel_size", "@0.28.0"), ["--prefill-context-parallel-size", "1"]),
    ("ge typed field", "0.33.0", ["--max-num-batched-tokens", "0"], RULE,
     ("SchedulerConfig.max_num_batched_tokens", "greater than or equal to 1"), ["--max-num-batched-tokens", "16384"]),
    ("gt", "0.33.0", ["--mamba-block-size", "0"], RULE, ("CacheConfig.mamba_block_size", "greater than 0"),
     ["--mamba-block-size", "1"]),
    ("gt", "0.34.0", ["--mamba-block-size", "0"], RULE, ("CacheConfig.mamba_block_size", "greater than 0"),
     ["--mamba-block-size", "1"]),
    ("gt behind a None-skipping wrap validator", "0.33.0", ["--block-size", "0"], RULE,
     ("CacheConfig.block_size", "greater than 0", "vllm/config/cache.py:187@0.33.0"), ["--block-size", "16"]),
    ("ge behind a None-skipping wrap validator", "0.34.0", ["--elastic-ep-max-dp-size", "0"], RULE,
     ("ParallelConfig.elastic_ep_max_dp_size", "greater than or equal to 1"), ["--elastic-ep-max-dp-size", "1"]),
    ("type of a map's values", "0.33.0", ["--media-io-kwargs", '{"bogus":1}'], RULE,
     ("MultiModalConfig.media_io_kwargs key 'bogus'", "valid dictionary"),
     ["--media-io-kwargs", '{"video":{"num_frames":4}}']),
    ("type (a union: the location names no union member)", "0.33.0", ["--pt-load-map-location", '{"bogus":1}'], RULE,
     ("LoadConfig.pt_load_map_location: Input should be a valid string",),
     ["--pt-load-map-location", '{"cuda:1":"cuda:0"}']),
    ("le", "0.33.0", ["--data-parallel-rpc-port", "65536"], RULE,
     ("ParallelConfig.data_parallel_rpc_port", "less than or equal to 65535"), ["--data-parallel-rpc-port", "65535"]),
    ("le", "0.29.0", ["--data-parallel-rpc-port", "65536"], RULE,
     ("ParallelConfig.data_parallel_rpc_port", "less than or equal to 65535"), ["--data-parallel-rpc-port", "65535"]),
    ("lt", "0.33.0", ["--video-pruning-rate", "1.0"], RULE,
     ("MultiModalConfig.video_pruning_rate", "less than 1"), ["--video-pruning-rate", "0.5"]),
    ("lt", "0.34.0", ["--video-pruning-rate", "1.0"], RULE,
     ("MultiModalConfig.video_pruning_rate", "less than 1"), ["--video-pruning-rate", "0.5"]),
    ("enum class", "0.33.0", ["--optimization-level", "none"], RULE,
     ("VllmConfig.optimization_level", "Input should be 0, 1, 2 or 3"), ["--optimization-level", "3"]),
    ("enum class", "0.34.0", ["--optimization-level", "4"], RULE, ("VllmConfig.optimization_level",),
     ["--optimization-level", "0"]),
    ("Literal in a JSON option", "0.33.0", ["--structured-outputs-config", '{"backend":"bogus"}'], "argv-refused",
     ("StructuredOutputsConfig.backend", "vllm/config/structured_outputs.py:"),
     ["--structured-outputs-config", '{"backend":"xgrammar"}']),
    ("Literal in a JSON option", "0.11.0", ["--structured-outputs-config", '{"backend":"bogus"}'], "argv-refused",
     ("StructuredOutputsConfig.backend", "@0.11.0"), ["--structured-outputs-config", '{"backend":"xgrammar"}']),
    ("bound in a JSON option", "0.33.0", ["--watchdog-config", '{"timeout":0}'], "argv-refused",
     ("WatchdogConfig.timeout", "greater than 0"), ["--watchdog-config", '{"timeout":1}']),
    ("bound in a JSON option", "0.34.0", ["--profiler-config", '{"active_iterations":0}'], "argv-refused",
     ("ProfilerConfig.active_iterations", "greater than or equal to 1"), ["--profiler-config", '{"active_iterations":1}']),
    ("nested class forbids extra keys", "0.33.0", ["--compilation-config", '{"dynamic_shapes_config":{"bogus":1}}'],
     "argv-refused", ("dynamic_shapes_config.bogus", "Extra inputs are not permitted"),
     ["--compilation-config", '{"dynamic_shapes_config":{}}']),
    ("nested class forbids extra keys", "0.34.0", ["--kernel-config", '{"ir_op_priority":{"bogus":1}}'],
     "argv-refused", ("ir_op_priority.bogus",), ["--kernel-config", '{"ir_op_priority":{}}']),
    ("class field forbids extra keys", "0.33.0", ["--diffusion-config", '{"bogus":1}'], RULE,
     ("VllmConfig.diffusion_config", "'bogus'", "Extra inputs are not permitted"), ["--diffusion-config", "{}"]),
    ("class field forbids extra keys", "0.34.0", ["--diffusion-config", '{"bogus":1}'], RULE,
     ("VllmConfig.diffusion_config",), ["--diffusion-config", "{}"]),
]


@pytest.mark.parametrize("kind,version,argv,rule,words,accepted", REFUSED,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(REFUSED)])
def test_refused_outside_accepted_on_the_bound(kind, version, argv, rule, words, accepted):
    code, found = check_args(version, argv)
    hits = [f for f in found if f["rule"] == rule]
    assert code == 1 and len(hits) == 1, found
    for w in words:
        assert w in hits[0]["message"], hits[0]["message"]
    code, found = check_args(version, accepted)   # (0.11.0 has no Kimi-K3: rule model-not-in-release stays)
    assert not [f for f in found if f["rule"] in (RULE, "argv-refused")], found


def test_0_11_declares_no_bounds():
    """0.11.0's config classes declare no numeric bounds (its config_bounds trait is false): the dump records none,
    so the values 0.33.0 refuses pass."""
    code, found = check_args("0.11.0", ["--max-num-batched-tokens", "0", "--max-parallel-loading-workers", "0"])
    assert RULE not in {f["rule"] for f in found}


def test_none_is_the_engines_unset():
    """optional_type reads "None" as None: the engine fills the default, the class never sees it."""
    code, found = check_args("0.33.0", ["--max-num-queued-reqs", "None"])
    assert code == 0 and not found, found


def test_lora_fields_only_with_enable_lora():
    """LoRAConfig is built only with --enable-lora (engine/arg_utils.py:2691-2710@0.33.0)."""
    assert check_args("0.33.0", ["--max-loras", "0"]) == (0, [])
    code, found = check_args("0.33.0", ["--enable-lora", "--max-loras", "0"])
    # Kimi-K3's class does not implement SupportsLoRA on 0.33.0 (vllm-lora-architecture-unsupported, its own
    # finding: tests/core/test_lora7_rules.py); the bound is judged beside it
    rules = [f["rule"] for f in found]
    assert code == 1 and rules.count(RULE) == 1 and set(rules) <= {RULE, "vllm-lora-architecture-unsupported"}, found


@pytest.mark.parametrize("argv,rule", [(["--gpu-memory-utilization", "0"], "vllm-config-bounds"),
                                      (["--max-num-seqs", "0"], "vllm-config-bounds")])
def test_a_typed_field_another_rule_judges_gets_one_finding(argv, rule):
    code, found = check_args("0.33.0", argv)
    assert RULE not in {f["rule"] for f in found} and rule in {f["rule"] for f in found}, found


def test_a_documents_extra_args_are_judged():
    """A K3Deployment's spec.extraArgs, which no parser reads: the scalar and the JSON option, each at its index."""
    d = preset_doc("vllm-seed", {"engine": {"version": "0.33.0"},
                                 "extraArgs": ["--max-num-queued-reqs", "-1", "--watchdog-config", '{"timeout":0}']})
    hits = [f for f in validate(d) if f.rule == RULE]
    assert [(f.field, f.severity) for f in hits] == [("spec.extraArgs[0]", "error"), ("spec.extraArgs[2]", "error")]
    assert "WatchdogConfig.timeout" in hits[1].message and "vllm/config/" in hits[1].message
    ok = preset_doc("vllm-seed", {"engine": {"version": "0.33.0"},
                                  "extraArgs": ["--max-num-queued-reqs", "0", "--watchdog-config", '{"timeout":1}']})
    assert RULE not in {f.rule for f in validate(ok)}


def test_the_dump_records_class_field_declaration_and_schema():
    v = load_catalog().version("vllm", "0.33.0")
    o = version_dump(v).flag("--max-num-queued-reqs")
    assert o.config["class"] == "vllm.config.scheduler.SchedulerConfig" and o.config["field"] == "max_num_queued_reqs"
    assert o.config["at"] == "vllm/config/scheduler.py:92@0.33.0"
    assert o.config["schema"] == {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}]}
    level = version_dump(v).flag("--optimization-level").config["schema"]
    assert level["ref"] == "OptimizationLevel" and level["enum"] == [0, 1, 2, 3]


def test_an_enum_class_takes_its_value_as_a_string_a_literal_does_not():
    """pydantic validates an IntEnum field's "2" as 2 (the engine's -O 2 is a string) and refuses it for a
    Literal[2]: the dump's ``ref`` keeps the difference."""
    from pydantic import TypeAdapter, ValidationError

    enum_ta = TypeAdapter(schema_annotation({"type": "integer", "enum": [0, 1, 2], "ref": "Level"}))
    assert enum_ta.validate_python("2").value == 2
    literal_ta = TypeAdapter(schema_annotation({"type": "integer", "enum": [0, 1, 2]}))
    with pytest.raises(ValidationError):
        literal_ta.validate_python("2")


def test_a_dump_without_schemas_is_still_read():
    """A dump made before the schemas were recorded (types only) reads as before: keys and value types."""
    parse = _vllm_parse_dataclass({"dataclass": "x.WatchdogConfig", "fields": ["timeout"], "extra": "forbid",
                                   "types": {"timeout": ["int"]}}, True)
    assert parse('{"timeout": 0}') == {"timeout": 0}
    with pytest.raises(argparse.ArgumentTypeError):
        parse('{"bogus": 0}')


@pytest.mark.parametrize("version", ["0.33.0", "0.34.0"])
@pytest.mark.parametrize("spec", ['{"linear": "fp8_per_tensor"}', '{"moe": "fp8_per_tensor"}'])
def test_a_field_with_a_before_validator_takes_the_engines_shorthand(version, spec):
    """QuantizationConfigArgs' linear/moe take an online shorthand string (the before-validator _coerce_spec,
    config/quantization.py:199-214@0.34.0): the dump marks them "validated" (tools/engine_parsers/describe.py
    field_types, whose JSON schema failed on the class's plain key validator before), so the product does not refuse
    what the release accepts (h-aimV3's false refusal)."""
    code, errors = check_args(version, ["--quantization-config", spec])
    assert not [f for f in errors if f["rule"] in ("argv-refused", RULE)], errors
    from gpustack_k3.catalog.loader import DATA

    dump = json.loads((DATA / "engines" / f"vllm-{version}-options.json").read_text())
    o = next(x for x in dump["parser"]["options"] if x["dest"] == "quantization_config")
    types = o["type"]["return_type"]["cls"]["types"]
    assert types["linear"] == types["moe"] == ["validated"]
