"""The vLLM rules of gpustack_k3/core/rules/vllm_checks.py that read model facts (dual batch overlap and the shm
object size with a multimodal model, routed experts on a dense model, 0.11.0's sliding window with RoPE scaling):
each refuses its line and passes the line flipped, only for the releases its sources name; how check-args reads a
vLLM --speculative-config the spec cannot hold (core/flags.py); the list values of vllm-config-field-bounds.
tests/engine_oracle/test_vllm_python_rules_oracle.py has each release judge the same lines."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_vllm_checks import product

K3 = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8"]            # KimiK3ForConditionalGeneration
DS = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "-tp", "8"]  # DeepseekV41ForCausalLM
SMOL = "/models/smollm2-hf"
DENSE = ["/models/shape-gqa-dense", "-tp", "8"]    # Llama 3.1 shape: no experts, rope_type llama3
YARN = ["/models/shape-gqa-yarn", "-tp", "8"]      # GPT-OSS shape: rope_type yarn
MOE = ["/models/shape-mla-moe", "-tp", "8"]        # DeepSeek-V3 shape: 256 routed experts
V2 = {"VLLM_USE_V2_MODEL_RUNNER": "1"}
SHM = "--mm-shm-cache-max-object-size-mb"

# (rule id, release, refused line, its env, the line flipped, its env, catalog model)
CASES = [
    ("vllm-dbo-multimodal-model", "0.34.0", K3 + ["--enable-dbo"], {}, K3, {}, None),
    ("vllm-dbo-multimodal-model", "0.34.0", DS + ["--ubatch-size", "2"], {}, DS, {}, None),
    ("vllm-dbo-multimodal-model", "0.33.0", K3 + ["--enable-dbo"], V2, K3, V2, None),
    ("vllm-routed-experts-dense-model", "0.33.0", DENSE + ["--enable-return-routed-experts"], {}, DENSE, {},
     "shape-gqa-dense"),
    ("vllm-routed-experts-dense-model", "0.34.0", DENSE + ["--enable-return-routed-experts"], {}, DENSE, {},
     "shape-gqa-dense"),
    ("vllm-disable-sliding-window-rope-scaling", "0.11.0", YARN + ["--disable-sliding-window"], {}, YARN, {},
     "shape-gqa-yarn"),
    ("vllm-mm-shm-object-size-needs-shm-cache", "0.34.0", DS + [SHM, "64"], {},
     DS + [SHM, "64", "--mm-processor-cache-type", "shm"], {}, None),
]
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    CASES.append(("vllm-mm-shm-object-size-needs-shm-cache", _rel, K3 + [SHM, "64"], {},
                  K3 + [SHM, "64", "--mm-processor-cache-type", "shm"], {}, "kimi-k3"))
# vfr6: --custom-histogram-buckets (ObservabilityConfig's validators), one line per refusal of the release
HIST = "--custom-histogram-buckets"
for _rel in ("0.33.0", "0.34.0"):
    for _bad in ('{"synth": [1.0]}', '{"request_latency": []}', '{"request_latency": [0, 1]}',
                 '{"request_latency": [1.0, 0.5]}', '{"iteration_tokens": [1, true]}'):
        CASES.append(("vllm-custom-histogram-buckets-invalid", _rel, [SMOL, HIST, _bad], {},
                      [SMOL, HIST, '{"request_latency": [0.5, 1.0], "iteration_tokens": [1, 8]}'], {}, None))
# vfr6: MultiModalConfig's FP8 scale paths (a multimodal model)
FP8_LOAD, FP8_SAVE = ["--mm-encoder-fp8-scale-path", "/tmp/vfr6-scales.json"], ["--mm-encoder-fp8-scale-save-path",
                                                                                 "/tmp/vfr6-scales-out.json"]
for _rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0"):
    CASES.append(("vllm-mm-encoder-fp8-scale-paths", _rel, K3 + FP8_LOAD, {}, K3, {}, "kimi-k3"))
    CASES.append(("vllm-mm-encoder-fp8-scale-paths", _rel, K3 + ["--mm-encoder-attn-dtype", "fp8"] + FP8_LOAD + FP8_SAVE,
                  {}, K3, {}, "kimi-k3"))
# vfr6: --reasoning-effort-map (validate_reasoning_effort_map)
for _rel in ("0.33.0", "0.34.0"):
    for _bad in ('{"bogus": 1}', '{"bogus": "x"}', '["high"]'):
        CASES.append(("vllm-reasoning-effort-map-invalid", _rel, [SMOL, "--reasoning-effort-map", _bad], {},
                      [SMOL, "--reasoning-effort-map", '{"high": "think hard", "none": "no"}'], {}, None))
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines a rule must not refuse (release, line, env, catalog model, the rule)
NOT_REFUSED = [
    # 0.33.0 without VLLM_USE_V2_MODEL_RUNNER=1 picks Model Runner V1 for DBO (config/vllm.py:3231-3232@0.33.0)
    ("0.33.0", K3 + ["--enable-dbo"], {}, None, "vllm-dbo-multimodal-model"),
    ("0.34.0", [SMOL, "--ubatch-size", "1"], {}, None, "vllm-dbo-multimodal-model"),
    # a text-only model never builds MultiModalConfig
    ("0.34.0", [SMOL, SHM, "64"], {}, None, "vllm-mm-shm-object-size-needs-shm-cache"),
    ("0.34.0", MOE + ["--enable-return-routed-experts", "--enable-prefix-caching"], {}, "shape-mla-moe",
     "vllm-routed-experts-dense-model"),
    # rope_type llama3 keeps the sliding window switch
    ("0.11.0", DENSE + ["--disable-sliding-window"], {}, "shape-gqa-dense", "vllm-disable-sliding-window-rope-scaling"),
    # the rules are switched on for the releases their sources name only
    ("0.29.0", DENSE + ["--enable-return-routed-experts"], {}, "shape-gqa-dense", "vllm-routed-experts-dense-model"),
    ("0.33.0", YARN + ["--disable-sliding-window"], {}, "shape-gqa-yarn", "vllm-disable-sliding-window-rope-scaling"),
    # a text-only model never builds MultiModalConfig
    ("0.34.0", [SMOL] + FP8_LOAD, {}, None, "vllm-mm-encoder-fp8-scale-paths"),
    # a bound pydantic must coerce (a string) is left to the release
    ("0.34.0", [SMOL, "--custom-histogram-buckets", '{"request_latency": ["0.5", "1"]}'], {}, None,
     "vllm-custom-histogram-buckets-invalid"),
]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_refuses_its_line_and_passes_the_flip(rid, release, bad, bad_env, good, good_env, model):
    refused = product(release, bad, bad_env, model)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    flipped = product(release, good, good_env, model)
    assert rid not in flipped["rules"], flipped


@pytest.mark.parametrize("release,line,env,model,rid", NOT_REFUSED)
def test_the_rule_leaves_these_lines(release, line, env, model, rid):
    assert rid not in product(release, line, env, model)["rules"]


def test_the_mtp_on_v41_rule_of_each_release():
    line = DS + ["--speculative-config", '{"method": "mtp", "num_speculative_tokens": 5}']
    assert product("0.33.0", line, {})["rules"] == ["vllm-spec-mtp-on-deepseek-v41"]
    assert product("0.34.0", line, {})["rules"] == ["vllm-spec-mtp-on-deepseek-v41"]   # one rule, both releases


def test_each_rule_cites_every_release_it_runs_on():
    for rid in VMISS5_DIRECT:
        releases = {c[1] for c in CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} >= releases, rid


# ---------------------------------------------------------------- check-args's reading of --speculative-config

@pytest.mark.parametrize("line,rid", [
    # neither method nor model: the release infers draft_model without a draft (not the MTP the spec would render)
    ([SMOL, "--speculative-config", '{"num_speculative_tokens": 2}'], "vllm-spec-tokens-without-model"),
    ([SMOL, "--spec-tokens", "2"], "vllm-spec-tokens-without-model"),
    # a --spec-* flag beside the JSON: the JSON is judged as written
    ([SMOL, "--spec-method", "ngram", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
     "vllm-spec-method-flag-and-json-key"),
])
def test_a_speculative_json_the_spec_cannot_hold_is_judged_as_written(line, rid):
    for release in ("0.33.0", "0.34.0"):
        out = product(release, line, {})
        assert out["verdict"] == "refuse" and rid in out["rules"], out


@pytest.mark.parametrize("line", [
    [SMOL, "--spec-method", "ngram", "--speculative-config", '{"num_speculative_tokens": 2}'],
    [SMOL, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
])
def test_the_merged_speculative_config_passes(line):
    for release in ("0.33.0", "0.34.0"):
        out = product(release, line, {})
        assert out["verdict"] == "pass", out


def test_parse_argv_keeps_a_method_less_json_and_folds_a_complete_one():
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.flags import parse_argv

    cat = load_catalog()
    engine = cat.engines["vllm"]
    version = engine.versions["0.34.0"]
    kept = parse_argv(engine, [SMOL, "--speculative-config", '{"num_speculative_tokens": 2}'], version=version)
    assert "speculative" not in kept.spec and "--speculative-config" in kept.extra_args, kept
    folded = parse_argv(engine, [SMOL, "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
                        version=version)
    assert folded.spec["speculative"]["method"] == "ngram" and "--speculative-config" not in folded.extra_args


# ---------------------------------------------------------------- vllm-config-field-bounds: a list's values

def test_a_list_value_keeps_its_own_spaces():
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.flags import read_extra

    version = load_catalog().engines["vllm"].versions["0.34.0"]
    flags, _ = read_extra(["--collect-detailed-traces", "model", "worker "], version)
    assert flags[0].items == ["model", "worker "] and flags[0].value == "model worker "
    inline, _ = read_extra(["--collect-detailed-traces=model"], version)
    assert inline[0].items == ["model"]
    plain, _ = read_extra(["--max-num-seqs", "8"], version)
    assert plain[0].items is None


def test_field_bounds_name_the_entry_as_the_parser_receives_it():
    # a document's extraArgs reach no parser: the rule judges each entry against the field's schema (Literal
    # model/worker/all), naming the entry that is outside it, not an empty one made by splitting at spaces
    from gpustack_k3.catalog.loader import load_catalog
    from gpustack_k3.core.argv import version_dump
    from gpustack_k3.core.rules.config_fields import config_field_refusal

    opt = version_dump(load_catalog().engines["vllm"].versions["0.34.0"]).flag("--collect-detailed-traces")
    msg = config_field_refusal(opt, "model worker ", ["model", "worker "])
    assert msg is not None and "key '1'" in msg, msg
    assert config_field_refusal(opt, "model worker", ["model", "worker"]) is None


# the rules of gpustack_k3/core/rules/vllm_checks_vmiss5.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case may count them)
VMISS5_DIRECT = {c[0] for c in CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_vmiss5"} \
        == VMISS5_DIRECT
