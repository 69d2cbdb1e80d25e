"""False refusals, third batch (issue 31): the spec schema's numeric bounds applied to values read from an engine
command line. The bounds guard the documents we write and render; a command line is judged by its release's own
rules (gpustack_k3/api/v1alpha1/spec.py ``_Strict._argv_numbers_are_the_releases``). Each accepted line below was
judged by the engine oracle (`python3 -m tools.engine_oracle <release>`, 2026-12-03: accepted at config time);
tests/engine_oracle/test_false_refusals_fr3_oracle.py re-judges a sample of them with the real releases.
"""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.cli.main import cli
from gpustack_k3.core.rules import RULES, validate

from .conftest import merge

SHAPE = ["/models/shape-gqa-yarn", "--tensor-parallel-size", "8"]          # a model 0.11.0 knows (oracle shape)
HYBRID = ["/models/shape-hybrid", "--tensor-parallel-size", "8"]
KIMI_SGL = ["--model-path", "/models/Kimi-K3", "--tp", "8", "--trust-remote-code"]
RUNTIME_ONLY = {k for k, r in RULES.items() if r.checked_by == "runtime-only"}


def preset_data(name: str, patch: dict) -> dict:
    return merge(load_catalog().presets[name].document, {"spec": patch})


def argv_document(name: str, patch: dict) -> DeploymentDocument:
    """A preset as check-args reads a command line (validation context engine_argv)."""
    return DeploymentDocument.model_validate(preset_data(name, patch), context={"engine_argv": True})


def check_args(engine: str, version: str, argv: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(cli, ["check-args", "--engine", engine, "--engine-version", version, "-o", "json",
                                   "--", *argv], catch_exceptions=False)
    return res.exit_code, json.loads(res.stdout)


def findings(doc: dict, severity: str) -> list[dict]:
    return [f for f in doc.get("findings") or [] if f["severity"] == severity]


def assert_not_refused(code: int, doc: dict) -> None:
    """Not an input error, and no refusal but a runtime-only rule's (the differential judges those apart)."""
    assert code != 2, doc
    assert {f["rule"] for f in findings(doc, "error")} <= RUNTIME_ONLY, doc


# ------------------------------------------------------------------ the three of the held-out differential

# 0.11.0: CacheConfig.gpu_memory_utilization is a plain float refused only above 1.0 (config/cache.py:43,168-171
# @0.11.0); ParallelConfig.pipeline_parallel_size a plain int nothing checks (config/parallel.py:67,376@0.11.0)
@pytest.mark.parametrize("argv", [
    HYBRID + ["--gpu-memory-utilization", "-1"],
    SHAPE + ["--pipeline-parallel-size", "-1"],
])
def test_vllm_011_negative_fraction_and_pp_are_not_refused(argv):
    code, doc = check_args("vllm", "0.11.0", argv)
    assert_not_refused(code, doc)


# SGLang 0.5.23: mamba_full_memory_ratio is Optional[float] with no bound (arg_groups/fields/schedule.py:220-227)
@pytest.mark.parametrize("ratio", ["0", "-1"])
def test_sglang_mamba_ratio_zero_or_negative_is_not_refused(ratio):
    code, doc = check_args("sglang", "0.5.23", KIMI_SGL + ["--mamba-full-memory-ratio", ratio])
    assert_not_refused(code, doc)


# ------------------------------------------------------------------ the same class, found by the probe

# every line here: the oracle accepts it at config time on the release named (2026-12-03)
@pytest.mark.parametrize("version, argv", [
    ("0.11.0", SHAPE + ["--tensor-parallel-size", "-1"]),
    ("0.11.0", SHAPE + ["--pipeline-parallel-size", "0"]),
    ("0.11.0", SHAPE + ["--data-parallel-size", "-1"]),
    ("0.11.0", SHAPE + ["--decode-context-parallel-size", "-1"]),
    ("0.11.0", SHAPE + ["--data-parallel-size-local", "-1"]),
    ("0.11.0", SHAPE + ["--kv-cache-memory-bytes", "0"]),
    ("0.11.0", SHAPE + ["--kv-cache-memory-bytes", "-1"]),
    ("0.11.0", SHAPE + ["--max-num-batched-tokens", "-2"]),
    ("0.11.0", SHAPE + ["--long-prefill-token-threshold", "-1"]),
    ("0.11.0", SHAPE + ["--port", "0"]),
    ("0.11.0", SHAPE + ["--port", "70000"]),
])
def test_vllm_011_values_the_release_accepts_are_not_refused(version, argv):
    code, doc = check_args("vllm", version, argv)
    assert_not_refused(code, doc)


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
@pytest.mark.parametrize("flag, value", [
    ("--tp-size", "-1"), ("--tp-size", "0"), ("--pp-size", "-1"), ("--dp-size", "0"), ("--dp-size", "-1"),
    ("--ep-size", "0"), ("--ep-size", "-1"), ("--mem-fraction-static", "-0.5"), ("--max-prefill-tokens", "0"),
    ("--chunked-prefill-size", "-2"), ("--port", "0"), ("--port", "70000"),
])
def test_sglang_values_the_release_accepts_are_not_refused(version, flag, value):
    code, doc = check_args("sglang", version, KIMI_SGL + [flag, value])
    assert_not_refused(code, doc)


# ------------------------------------------------------------------ what the releases refuse stays refused

# from 0.28.0 ParallelConfig/CacheConfig declare the bounds (pydantic Field): rule vllm-config-field-bounds /
# vllm-config-bounds judge them from the parser dump's recorded schema
@pytest.mark.parametrize("argv, rule", [
    (SHAPE + ["--tensor-parallel-size", "-1"], "vllm-config-field-bounds"),
    (SHAPE + ["--pipeline-parallel-size", "0"], "vllm-config-field-bounds"),
    (HYBRID + ["--gpu-memory-utilization", "-1"], "vllm-config-bounds"),
])
def test_vllm_033_declared_bounds_still_refuse(argv, rule):
    code, doc = check_args("vllm", "0.33.0", argv)
    assert code == 1, doc
    assert rule in {f["rule"] for f in findings(doc, "error")}, doc


# ------------------------------------------------------------------ the documents we render keep the bounds

@pytest.mark.parametrize("patch", [
    {"parallel": {"pp": -1}}, {"parallel": {"tp": 0}}, {"memory": {"fraction": -1}},
    {"memory": {"mambaFullMemoryRatio": 0}}, {"serving": {"port": 70000}},
])
def test_a_document_keeps_the_schema_bounds(patch):
    data = preset_data("vllm-seed", patch)
    with pytest.raises(ValidationError):
        DeploymentDocument.model_validate(data)
    DeploymentDocument.model_validate(data, context={"engine_argv": True})   # a command line: the release judges


def test_the_argv_context_relaxes_bounds_only_not_types():
    with pytest.raises(ValidationError):
        argv_document("vllm-seed", {"parallel": {"pp": "many"}})
    with pytest.raises(ValidationError):
        argv_document("vllm-seed", {"parallel": {"dpBackend": "slurm"}})


# ------------------------------------------------------------------ what a config-time acceptance leads to: warned

@pytest.mark.parametrize("engine, version, argv, field", [
    # 0.11.0: requested memory = total x utilization (v1/worker/gpu_worker.py:183-184@0.11.0) is negative, so the
    # KV cache gets no memory ("No available memory for the cache blocks", v1/core/kv_cache_utils.py:697-701)
    ("vllm", "0.11.0", HYBRID + ["--gpu-memory-utilization", "-1"], "spec.memory.fraction"),
    # 0.11.0: world_size = pp x tp (config/parallel.py:376) below 1 picks no executor backend
    ("vllm", "0.11.0", SHAPE + ["--pipeline-parallel-size", "-1"], "spec.parallel.pp"),
    # 0.5.23: the Mamba budget rest x r/(1+r) is 0 (mem_cache/kv_cache_configurator.py:3350-3356)
    ("sglang", "0.5.23", KIMI_SGL + ["--mamba-full-memory-ratio", "0"], "spec.memory.mambaFullMemoryRatio"),
    ("sglang", "0.5.23", KIMI_SGL + ["--tp-size", "-1"], "spec.parallel.tp"),
])
def test_a_value_with_runtime_consequences_is_warned_naming_the_field(engine, version, argv, field):
    code, doc = check_args(engine, version, argv)
    assert_not_refused(code, doc)
    fields = {f["field"] for f in findings(doc, "warning") + findings(doc, "error")}
    assert field in fields, doc


def test_the_sglang_plan_reads_a_mamba_ratio_of_zero_as_zero():
    """core/plan.py read `or 0.9`: a ratio of 0 was planned as the default 0.9 (0.5.23 computes rest x 0/(1+0) = 0
    GiB for the Mamba states, mem_cache/kv_cache_configurator.py:3350-3356)."""
    from gpustack_k3.core.plan import plan
    from gpustack_k3.core.resolve import resolve

    zero = plan(resolve(argv_document("sglang-seed", {"memory": {"mambaFullMemoryRatio": 0}})))
    default = plan(resolve(argv_document("sglang-seed", {"memory": {"mambaFullMemoryRatio": 0.9}})))
    assert default.mamba_state_gib > 0 and default.max_running_requests > 0
    assert zero.mamba_state_gib == 0 and zero.max_running_requests == 0


@pytest.mark.parametrize("patch, field", [
    ({"parallel": {"tp": -1}}, "parallel.tp"), ({"parallel": {"tp": 0}}, "parallel.tp"),
    ({"parallel": {"pp": -1}}, "parallel.pp"), ({"parallel": {"dcp": 0}}, "parallel.dcp"),
])
def test_no_memory_plan_of_a_size_below_one(patch, field):
    """A parallel size below 1 (read from a command line) is no layout to plan: PlanUnavailable naming the field,
    not weights divided by -1 (nor 0 read as 1 by `or 1`)."""
    from gpustack_k3.core.plan import PlanUnavailable, plan
    from gpustack_k3.core.resolve import resolve

    with pytest.raises(PlanUnavailable, match=field):
        plan(resolve(argv_document("sglang-seed", patch)))


def test_rules_do_not_refuse_an_argv_document_of_negative_sizes():
    """validate() of a document read from a command line with negative sizes runs without a traceback."""
    doc = argv_document("sglang-seed", {"parallel": {"tp": -1, "pp": -1}})
    assert {f.rule for f in validate(doc) if f.severity == "error"} <= RUNTIME_ONLY


# ------------------------------------------------------------------ nan read from a command line

# vLLM 0.11.0 and SGLang 0.5.23 take nan (the engine oracle, 2026-12-03); 0.33.0 refuses it (CacheConfig le=1).
# core/flags.py reads it into the spec with /work/patches/fr-5.patch (tests/core/test_false_refusals_fr3_nan.py)
@pytest.mark.parametrize("preset, patch, rule, severity", [
    ("vllm-seed", {"engine": {"version": "0.11.0"}, "memory": {"fraction": float("nan")}},
     "argv-value-outside-document-range", "warning"),
    ("vllm-seed", {"engine": {"version": "0.33.0"}, "memory": {"fraction": float("nan")}}, "vllm-config-bounds", "error"),
    ("sglang-seed", {"memory": {"fraction": float("nan")}}, "argv-value-outside-document-range", "warning"),
    ("sglang-seed", {"memory": {"mambaFullMemoryRatio": float("nan")}}, "argv-value-outside-document-range",
     "warning"),
])
def test_nan_from_a_command_line_is_judged_by_the_release(preset, patch, rule, severity):
    from gpustack_k3.core.plan import PlanUnavailable, plan
    from gpustack_k3.core.resolve import resolve

    doc = argv_document(preset, patch)
    found = validate(doc)
    assert rule in {f.rule for f in found if f.severity == severity}, [(f.rule, f.severity) for f in found]
    assert not [f for f in found if f.severity == "error" and f.field and "memory" in f.field and f.rule != rule]
    with pytest.raises(PlanUnavailable, match="not a finite number"):
        plan(resolve(doc))
    with pytest.raises(ValidationError):      # a document keeps allow_inf_nan=False
        DeploymentDocument.model_validate(preset_data(preset, patch))


# ------------------------------------------------------------------ rule argv-value-outside-document-range

RANGE_RULE = "argv-value-outside-document-range"


@pytest.mark.parametrize("engine, version, argv", [
    ("vllm", "0.11.0", SHAPE + ["--data-parallel-size", "-1"]),
    ("vllm", "0.11.0", SHAPE + ["--port", "70000"]),
    ("sglang", "0.5.22", KIMI_SGL + ["--pp-size", "0"]),
    ("sglang", "0.5.23", KIMI_SGL + ["--port", "0"]),
])
def test_the_range_rule_fires_on_a_command_line(engine, version, argv):
    code, doc = check_args(engine, version, argv)
    assert RANGE_RULE in {f["rule"] for f in findings(doc, "warning")}, doc


@pytest.mark.parametrize("engine, version, argv", [
    ("vllm", "0.11.0", SHAPE + ["--pipeline-parallel-size", "2", "--port", "8000"]),
    # 0.33.0 declares the bounds: vllm-config-field-bounds refuses, this rule says nothing more
    ("vllm", "0.33.0", SHAPE + ["--pipeline-parallel-size", "0"]),
    ("sglang", "0.5.23", KIMI_SGL + ["--mamba-full-memory-ratio", "0.5"]),
])
def test_the_range_rule_is_quiet_inside_the_range_or_where_the_release_refuses(engine, version, argv):
    code, doc = check_args(engine, version, argv)
    assert RANGE_RULE not in {f["rule"] for f in doc.get("findings") or []}, doc


# ------------------------------------------------------------------ keys of JSON options: the release's bounds

KIMI = ["/models/Kimi-K3", "--tensor-parallel-size", "8", "--trust-remote-code"]
MLA = ["/models/shape-mla-moe", "--tensor-parallel-size", "8"]


def _ngram(n: int) -> list[str]:
    return ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": n, "prompt_lookup_max": 3})]


# the spec's numTokens le=64 and numRedundantExperts le=1024 refused these; the oracle accepts them (2026-12-03)
@pytest.mark.parametrize("version, argv", [
    ("0.33.0", KIMI + _ngram(65)), ("0.33.0", KIMI + _ngram(100)), ("0.11.0", MLA + _ngram(100)),
    ("0.33.0", KIMI + ["--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 2000}']),
    ("0.11.0", MLA + ["--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 2000}']),
])
def test_vllm_json_keys_above_the_document_range_are_not_refused(version, argv):
    code, doc = check_args("vllm", version, argv)
    assert_not_refused(code, doc)


# ... and refuses these: below the range the releases' own checks refuse (the oracle: refused, 2026-12-03)
@pytest.mark.parametrize("version, argv, rule", [
    ("0.33.0", KIMI + _ngram(0), "vllm-speculative-tokens-below-one"),
    ("0.11.0", MLA + _ngram(-1), "vllm-speculative-tokens-below-one"),
    ("0.11.0", MLA + ["--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": -1}'],
     "vllm-redundant-experts-negative"),
    ("0.11.0", MLA + ["--enable-expert-parallel", "--enable-eplb", "--num-redundant-experts", "-1"],
     "vllm-redundant-experts-negative"),
    ("0.33.0", KIMI + ["--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": -1}'],
     "argv-refused"),
])
def test_vllm_json_keys_below_the_releases_bound_are_refused(version, argv, rule):
    code, doc = check_args("vllm", version, argv)
    assert code == 1, doc
    assert rule in {f["rule"] for f in findings(doc, "error")}, doc


@pytest.mark.parametrize("version, argv", [
    ("0.33.0", KIMI + _ngram(1)),
    ("0.11.0", MLA + ["--enable-expert-parallel", "--enable-eplb", "--eplb-config", '{"num_redundant_experts": 0}']),
])
def test_vllm_json_key_rules_are_quiet_inside_the_range(version, argv):
    code, doc = check_args("vllm", version, argv)
    assert not {"vllm-speculative-tokens-below-one", "vllm-redundant-experts-negative"} & {
        f["rule"] for f in doc.get("findings") or []}, doc


# ------------------------------------------------------------------ silent drops (tests/contract/test_field_coverage.py)

def _rules(preset: str, patch: dict) -> set[str]:
    return {f.rule for f in validate(DeploymentDocument.model_validate(preset_data(preset, patch)))}


def _one_role(preset: str, patch: dict) -> dict:
    data = preset_data(preset, patch)
    data["spec"]["roles"] = [{"name": "serve", "role": "serve", "gpusPerPod": 8}]
    return data


# spec.placement.rack.topologyKey was dropped without a word where no rack policy or subgroup uses it (one-role
# and P/D documents on B300, which has no NVLink domain: policy none)
@pytest.mark.parametrize("preset", ["sglang-fixed", "vllm-fixed"])
def test_an_unused_rack_topology_key_is_warned(preset):
    key = {"placement": {"rack": {"topologyKey": "example.com/k3cov"}}}
    doc = DeploymentDocument.model_validate(_one_role(preset, key))
    assert "rack-topology-key-unused" in {f.rule for f in validate(doc) if f.severity == "warning"}
    used = {"placement": {"rack": {"topologyKey": "example.com/k3cov", "policy": "colocate"}}}
    assert "rack-topology-key-unused" not in {f.rule for f in validate(DeploymentDocument.model_validate(
        _one_role(preset, used)))}


def test_a_used_rack_topology_key_is_not_warned():
    # GB300 wide EP: colocate on the NVLink domain by default, the key is rendered
    assert "rack-topology-key-unused" not in _rules(
        "dsv41-flash-gb300-8p1d", {"placement": {"rack": {"topologyKey": "example.com/k3cov"}}})


# spec.startup.storageBandwidthGiBps was dropped without a word beside budgetSeconds (the wide-EP presets set it)
@pytest.mark.parametrize("preset", ["dsv41-flash-gb300-8p1d", "dsv41-flash-gb300-8p1d-sglang"])
def test_a_bandwidth_beside_a_fixed_budget_is_warned(preset):
    assert "startup-bandwidth-unused" in _rules(preset, {"startup": {"storageBandwidthGiBps": 2.0}})
    assert "startup-bandwidth-unused" not in _rules(preset, {})


def test_a_bandwidth_that_derives_the_budget_is_not_warned():
    assert "startup-bandwidth-unused" not in _rules("vllm-fixed", {"startup": {"storageBandwidthGiBps": 2.0}})


# the rules this file gives their firing and quiet cases (tests/core/test_rules.py, tests/core/test_registry.py)
FR3_DIRECT = {RANGE_RULE, "rack-topology-key-unused", "startup-bandwidth-unused", "vllm-speculative-tokens-below-one",
              "vllm-redundant-experts-negative"}
