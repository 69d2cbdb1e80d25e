"""The rules of gpustack_k3/core/rules/sglang_checks_m10s.py (helper m10s): the SGLang misses of held-out seed 35791
that need computation. The product's side (check-args as the differential runs it, on the oracle's own model
directories or a public config.json with a quantization_config added); the release's own verdict on the same lines:
tests/engine_oracle/test_m10s_oracle.py. The checks-table entries of the h-m10s block are verified by
tests/core/test_checks_table.py and tests/engine_oracle/test_checks_sglang.py from their examples."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_mfixS_rules import lines, model_dir, product
from tests.core.test_miss9_rules import findings

QUANT = "sglang-quantization-mismatch"
LINKER = "sglang-unified-linker-deterministic-gpu-backend"
BOTH = ("0.5.22", "0.5.23")
K3 = "/models/Kimi-K3"
DSV41 = "/models/DeepSeek-V4.1-Flash"
LLAMA = "meta-llama--Meta-Llama-3.1-8B"
K3_BASE = ["--trust-remote-code", "--tp-size", "8"]
AWQ = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                               "version": "gemm"}}
GPTQ = {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}}
# compressed_tensors as written (SGLang compares it as written: not the compressed-tensors of --quantization)
CT_UNDERSCORE = {"quantization_config": {"quant_method": "compressed_tensors", "format": "float-quantized",
                                         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
                                             "num_bits": 8, "type": "float", "strategy": "channel"}}}}}

# (rule, model (an oracle directory or a public config.json), its top-level keys replaced, argv after --model-path
#  DIR, the refused line's options, the accepted twin's options): the release refuses the first at the rule's cited
#  source and accepts the twin
_SPECS = [
    # the held-out miss: Kimi-K3's compressed-tensors checkpoint with w4afp8; w8a8_int8 is a compatible pair
    (QUANT, K3, {}, K3_BASE, ["--quantization", "w4afp8"], ["--quantization", "w8a8_int8"]),
    # fp8 is not compatible; quark_mxfp4 requantizes online
    (QUANT, K3, {}, K3_BASE, ["--quantization", "fp8"], ["--quantization", "quark_mxfp4"]),
    # DeepSeek-V4.1's fp8 (text_config merged into the top level); modelopt_fp4 is compatible with fp8
    (QUANT, DSV41, {}, ["--trust-remote-code", "--tp-size", "4"], ["--quantization", "w4afp8"],
     ["--quantization", "modelopt_fp4"]),
    # an AWQ checkpoint: the AWQ Marlin and moe_wna16 overrides claim it
    (QUANT, LLAMA, AWQ, ["--tp-size", "8"], ["--quantization", "fp8"], ["--quantization", "awq_marlin"]),
    (QUANT, LLAMA, AWQ, ["--tp-size", "8"], ["--quantization", "fp8"], ["--quantization", "moe_wna16"]),
    # a GPTQ checkpoint: the GPTQ Marlin override claims it, not awq
    (QUANT, LLAMA, GPTQ, ["--tp-size", "8"], ["--quantization", "awq"], ["--quantization", "gptq_marlin"]),
    (QUANT, LLAMA, CT_UNDERSCORE, ["--tp-size", "8"], ["--quantization", "compressed-tensors"],
     ["--quantization", "w8a8_int8"]),
]
CASES = [(rid, rel, stem, over, base, bad, good, ({}, {})) for rid, stem, over, base, bad, good in _SPECS
         for rel in BOTH]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]

# lines the release accepts and the rule passes (release, model, replaced keys, argv after --model-path DIR)
ACCEPTED = [(rel, *a) for rel in BOTH for a in (
    (K3, {}, [*K3_BASE, "--quantization", "compressed-tensors"]),
    (K3, {}, [*K3_BASE, "--quantization", "unquant"]),
    (LLAMA, AWQ, ["--tp-size", "8", "--quantization", "humming"]),
    (LLAMA, AWQ, ["--tp-size", "8", "--quantization", "awq"]),
    (LLAMA, {}, ["--tp-size", "8", "--quantization", "fp8"]),      # no quantization_config: nothing to match
)]

# the external linker with deterministic inference and no --attention-backend: the release picks the backend per GPU
# (b300: flashinfer for a model outside the DeepSeek family, the radix cache off, refused; h200: fa3, accepted): the
# rule warns on the SM100 GPU and says nothing on the other (release, model, replaced keys, argv, gpu, warned)
LINKER_LINE = ["--tp-size", "8", "--enable-unified-cache-external-linker", "--enable-deterministic-inference"]
LINKER_CASES = [("0.5.23", LLAMA, {}, LINKER_LINE, "b300", True), ("0.5.23", LLAMA, {}, LINKER_LINE, "h200", False)]

# --enable-hierarchical-cache with deterministic inference and no --attention-backend: on b300 the release picks
# flashinfer (radix cache off: refused), on h200 fa3 (accepted); an explicit triton keeps it on both
# (release, model, replaced keys, argv after --model-path DIR, the refused line's GPU, the twin's GPU, the twin's argv
#  or None for the same line)
HICACHE = "sglang-hicache-deterministic-gpu-backend"
HICACHE_LINE = ["--tp-size", "8", "--enable-hierarchical-cache", "--enable-deterministic-inference"]
HICACHE_CASES = [(rel, *c) for rel in BOTH for c in (
    (LLAMA, {}, HICACHE_LINE, "b300", "h200", None),
    (LLAMA, {}, HICACHE_LINE, "b300", "b300", [*HICACHE_LINE, "--attention-backend", "triton"]),
    (K3, {}, [*K3_BASE, "--enable-hierarchical-cache", "--enable-deterministic-inference"], "b300", "b300",
     [*K3_BASE, "--enable-hierarchical-cache", "--enable-deterministic-inference", "--attention-backend", "triton"]),
    (LLAMA, {}, ["--tp-size", "8", "--enable-hierarchical-cache", "--rl-on-policy-target", "fsdp"], "b300", "b300",
     ["--tp-size", "8", "--enable-hierarchical-cache", "--rl-on-policy-target", "fsdp", "--attention-backend", "fa3"]),
)]

# the held-out seed 35791 misses (bench/results/oracle-differential-seed35791-2300c17.json, sglang-0.5.23) and the
# rule or entry that now refuses each
HELDOUT = [
    ("sglang-unified-linker-radix-cache-off",
     ["--trust-remote-code", "--model-path", "/models/Kimi-K3", "--tp-size", "8", "--dcp-size", "8",
      "--mem-fraction-static", "0.88", "--reasoning-parser", "kimi_k3", "--tool-call-parser", "kimi_k3",
      "--mamba-full-memory-ratio", "0.86", "--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
      "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7", "--enable-linear-replayssm-spec",
      "--chunked-prefill-size", "32768", "--max-prefill-tokens", "32768", "--context-length", "262144",
      "--kv-cache-dtype", "fp8_e4m3", "--served-model-name", "kimi-k3-1p1d-sglang", "--disaggregation-mode", "decode",
      "--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port", "8998",
      "--cuda-graph-backend-decode", "full", "--enable-unified-cache-external-linker"]),
    (QUANT,
     ["--trust-remote-code", "--model-path", "/models/Kimi-K3", "--tp-size", "8", "--dcp-size", "8",
      "--disable-custom-all-reduce", "--enable-symm-mem", "--mem-fraction-static", "0.85", "--mamba-full-memory-ratio",
      "0.86", "--host", "0.0.0.0", "--port", "30000", "--speculative-algorithm", "DSPARK",
      "--speculative-draft-model-path", "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7",
      "--enable-linear-replayssm-spec", "--chunked-prefill-size", "32768", "--max-prefill-tokens", "32768",
      "--context-length", "1000000", "--kv-cache-dtype", "fp8_e4m3", "--mamba-cache-philox-rounds", "3",
      "--quantization", "w4afp8", "--ep-size", "2"]),
    ("sglang-quantize-and-serve-needs-modelopt",
     ["--trust-remote-code", "--model-path", "/models/Kimi-K3", "--tp-size", "8", "--dcp-size", "8",
      "--mem-fraction-static", "0.88", "--reasoning-parser", "kimi_k3", "--tool-call-parser", "kimi_k3",
      "--mamba-full-memory-ratio", "0.86", "--speculative-algorithm", "DSPARK", "--speculative-draft-model-path",
      "/models/sglang-Kimi-K3-DSpark", "--speculative-dspark-block-size", "7", "--enable-linear-replayssm-spec",
      "--max-prefill-tokens", "32768", "--context-length", "262144", "--kv-cache-dtype", "fp8_e4m3",
      "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "nixl", "--disaggregation-bootstrap-port",
      "8998", "--chunked-prefill-size", "16384", "--offload-prefetch-step", "64", "--quantize-and-serve",
      "--experts-shared-outer-loras"]),
]
HELDOUT_ENV = {"SGLANG_DG_CACHE_DIR": "/cache/deepgemm", "SGLANG_RAGGED_VERIFY_MODE": "static"}

# the rules of gpustack_k3/core/rules/sglang_checks_m10s.py with a firing case here (tests/core/test_registry.py and
# tests/core/test_rules.py count them)
M10S_DIRECT = {c[0] for c in CASES} | {LINKER, HICACHE}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("m10s")


@pytest.mark.parametrize("rid,release,stem,over,base,bad,good,env", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_twin(root, rid, release, stem, over, base, bad, good, env):
    d = model_dir(root, stem, over)
    refuse, accept = lines(d, base, bad, good)
    refused = product(release, refuse, d, env=env[0])
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    assert "does not match the quantization method" in refused["message"], refused
    passed = product(release, accept, d, env=env[1])
    assert rid not in passed.get("rules", []), passed


@pytest.mark.parametrize("release,stem,over,argv", ACCEPTED)
def test_the_rule_passes_the_accepted_lines(root, release, stem, over, argv):
    d = model_dir(root, stem, over)
    out = product(release, ["--model-path", d, *argv], d)
    assert QUANT not in out.get("rules", []), out


@pytest.mark.parametrize("release,stem,over,argv,gpu,warned", LINKER_CASES)
def test_the_linker_warning_follows_the_gpu(root, release, stem, over, argv, gpu, warned):
    d = model_dir(root, stem, over)
    got = findings("sglang", release, ["--model-path", d, *argv], config=f"{d}/config.json", gpu_type=gpu)
    assert (got.get(LINKER) == "warning") is warned, got


@pytest.mark.parametrize("release,stem,over,argv,gpu,twin_gpu,twin", HICACHE_CASES)
def test_the_hicache_rule_refuses_on_the_sm100_gpu_and_passes_the_twin(root, release, stem, over, argv, gpu, twin_gpu,
                                                                      twin):
    d = model_dir(root, stem, over)
    refused = product(release, ["--model-path", d, *argv], d, gpu)
    assert refused["verdict"] == "refuse" and HICACHE in refused["rules"], refused
    passed = product(release, ["--model-path", d, *(twin or argv)], d, twin_gpu)
    assert HICACHE not in passed.get("rules", []), passed


def test_the_hicache_rule_leaves_the_deepseek_family_and_override_models(root):
    """DeepSeek V3 takes triton (the DeepSeek list) and its model override sets its own backend: not read here."""
    d = model_dir(root, "deepseek-ai--DeepSeek-V3", {})
    out = product("0.5.23", ["--model-path", d, *HICACHE_LINE], d, "b300")
    assert HICACHE not in out.get("rules", []), out


def test_the_linker_warning_leaves_an_explicit_backend_to_the_entry(root):
    d = model_dir(root, LLAMA, {})
    for backend, entry in (("flashinfer", True), ("triton", False)):
        got = findings("sglang", "0.5.23", ["--model-path", d, *LINKER_LINE, "--attention-backend", backend],
                       config=f"{d}/config.json")
        assert LINKER not in got, got
        assert ("sglang-unified-linker-radix-cache-off" in got) is entry, got


def test_the_linker_warning_is_not_on_0_5_22(root):
    d = model_dir(root, LLAMA, {})
    got = findings("sglang", "0.5.22", ["--model-path", d, *LINKER_LINE], config=f"{d}/config.json")
    assert LINKER not in got, got


@pytest.mark.parametrize("rid,argv", HELDOUT, ids=[h[0] for h in HELDOUT])
def test_the_heldout_misses_are_refused(rid, argv):
    from tools.engine_oracle.product import check_args

    out = check_args("sglang", "0.5.23", {"argv": argv, "env": HELDOUT_ENV, "model": None, "gpu_type": "b300",
                                          "gpus": 8})
    assert out["verdict"] == "refuse" and rid in out["rules"], out


def test_a_model_without_config_json_is_not_refused():
    """No config.json and no catalog entry: the checkpoint's quantization is not known, the rule does not refuse."""
    from tools.engine_oracle.product import check_args

    out = check_args("sglang", "0.5.23", {"argv": ["--model-path", "/models/no-such-model-m10s", "--tp-size", "8",
                                                   "--quantization", "w4afp8"],
                                          "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})
    assert QUANT not in out.get("rules", []), out


def test_a_quantization_config_only_in_an_unlifted_text_config_is_not_read():
    """SGLang reads hf_config.quantization_config; only Kimi-K3/K2.5 and DeepSeek-V4.1's config classes lift a
    text_config's to it. Elsewhere the rule does not read one there."""
    from gpustack_k3.core.model_config import arch_from_config
    from gpustack_k3.core.rules.sglang_checks_m10s import sglang_checkpoint_quant_config

    text = {"hidden_size": 8, "quantization_config": {"quant_method": "fp8"}}
    assert sglang_checkpoint_quant_config(arch_from_config(
        {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": text}, "t")) is None
    assert sglang_checkpoint_quant_config(arch_from_config(
        {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": text},
        "t")) == {"quant_method": "fp8"}
    assert sglang_checkpoint_quant_config(None) is None


def test_each_rule_cites_every_release_it_runs_on():
    assert {k.split()[1] for k in RULES[QUANT].sources} == set(BOTH)
    assert {k.split()[1] for k in RULES[LINKER].sources} == {"0.5.23"}
    assert {k.split()[1] for k in RULES[HICACHE].sources} == set(BOTH)


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_m10s"} \
        == M10S_DIRECT
