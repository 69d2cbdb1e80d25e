"""The rules of gpustack_k3/core/rules/sglang_checks_mfixS.py (helper mfixS): refusals keyed on the model's class
(config.json's architectures / model_type) for SGLang. The product's side (check-args as the differential runs it,
on a public config.json relabelled as the class); the release's own verdict on the same lines:
tests/engine_oracle/test_mfixS_rules_oracle.py. These lines were misses on r9base (the aimed lines of
tools/engine_oracle/aimed/aimS4.yaml)."""
from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES

BACKEND = "sglang-model-class-attention-backend"
PAR = "sglang-model-class-parallelism"
CP = "sglang-model-class-prefill-cp"
MIMO = "sglang-mimo-v2-fused-qkv-attn-tp"
LOADPUB = "sglang-load-publish-kv-events-endpoint"
WATERMARK = "sglang-watermark-not-with-dllm"
SM100 = "sglang-feature-needs-sm100-gpu"
QWEN3MOE = "Qwen--Qwen3-30B-A3B"

LLAMA = "meta-llama--Meta-Llama-3.1-8B"
DSV3 = "deepseek-ai--DeepSeek-V3"
NEMOH = "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
GEMMA4 = "google--gemma-4-26B-A4B"
MIMOF = "XiaomiMiMo--MiMo-V2-Flash"
BOTH = ("0.5.22", "0.5.23")

# (rule, public config.json, its top-level keys replaced, argv after --model-path DIR, the refused line's options,
#  the accepted twin's options): the release refuses the first at the rule's cited source and accepts the twin
_SPECS = [
    (BACKEND, LLAMA, {"architectures": ["Olmo2ForCausalLM"]}, ["--tp-size", "8"],
     ["--attention-backend", "flashinfer"], ["--attention-backend", "triton"]),
    (BACKEND, LLAMA, {"architectures": ["Lfm2ForCausalLM"]}, ["--tp-size", "8"],
     ["--attention-backend", "triton"], ["--attention-backend", "flashinfer"]),
    (BACKEND, GEMMA4, {}, ["--tp-size", "2"], ["--attention-backend", "flashinfer"], ["--attention-backend", "triton"]),
    (BACKEND, GEMMA4, {}, ["--tp-size", "2"], ["--prefill-attention-backend", "flashinfer"],
     ["--prefill-attention-backend", "fa4"]),
    (PAR, LLAMA, {"architectures": ["Ernie4_5_VLMoeForConditionalGeneration"]}, ["--tp-size", "8"],
     ["--attn-dp-size", "2"], []),
    (PAR, LLAMA, {"architectures": ["IQuestQ1ForCausalLM"]}, ["--tp-size", "8"], ["--attn-dp-size", "2"], []),
    (PAR, LLAMA, {"architectures": ["IQuestQ1ForCausalLM"]}, ["--tp-size", "8"],
     ["--attention-backend", "flashinfer"], ["--attention-backend", "fa3"]),
    (PAR, LLAMA, {"architectures": ["IQuestQ1ForCausalLM"]}, ["--tp-size", "4"], ["--pp-size", "2"], []),
    (CP, NEMOH, {}, ["--tp-size", "8"], ["--attn-cp-size", "2"], []),
    (CP, DSV3, {"architectures": ["LongcatFlashForCausalLM"], "model_type": "longcat_flash"}, ["--tp-size", "8"],
     ["--enable-prefill-cp", "--attn-cp-size", "2", "--cp-strategy", "interleave"], []),
    (CP, MIMOF, {}, ["--tp-size", "8"], ["--enable-prefill-cp", "--attn-cp-size", "8", "--cp-strategy", "interleave"],
     ["--enable-prefill-cp", "--attn-cp-size", "8", "--cp-strategy", "zigzag"]),
    (CP, MIMOF, {"architectures": ["MiMoV2ForCausalLM"], "vision_config": {}, "audio_config": {}}, ["--tp-size", "8"],
     ["--enable-prefill-cp", "--attn-cp-size", "8", "--cp-strategy", "zigzag"],
     ["--enable-prefill-cp", "--attn-cp-size", "8", "--cp-strategy", "zigzag", "--language-only"]),
    (MIMO, MIMOF, {"architectures": ["MiMoV2ForCausalLM"], "attention_projection_layout": "fused_qkv"}, [],
     ["--tp-size", "8"], ["--tp-size", "8", "--attn-dp-size", "2"]),
    (MIMO, MIMOF, {"architectures": ["MiMoV2ForCausalLM"], "attention_projection_layout": "fused_qkv"}, [],
     ["--tp-size", "8"], ["--tp-size", "2"]),
    (LOADPUB, LLAMA, {}, ["--tp-size", "8", "--load-publish-endpoint", "auto"], ["--kv-events-config", "not-json"],
     ["--kv-events-config", '{"publisher": "zmq"}']),
    (LOADPUB, LLAMA, {}, ["--tp-size", "8", "--load-publish-endpoint", "auto"],
     ["--kv-events-config", '{"publisher": "null", "endpoint": "tcp://*:5557"}'],
     ["--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://*:5557"}']),
    (LOADPUB, LLAMA, {}, ["--tp-size", "8", "--load-publish-endpoint", "auto"],
     ["--kv-events-config", '{"publisher": "zmq", "endpoint": "inproc://kv"}'],
     ["--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://0.0.0.0:6000"}']),
    (LOADPUB, LLAMA, {}, ["--tp-size", "8", "--load-publish-endpoint", "auto"],
     ["--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://127.0.0.1:5557"}'],
     ["--kv-events-config", '{"publisher": "zmq", "endpoint": "tcp://[::]:5557"}']),
    (LOADPUB, LLAMA, {}, ["--tp-size", "8", "--kv-events-config", "[1]"], ["--load-publish-endpoint", "auto"],
     ["--load-publish-endpoint", "off"]),
    (WATERMARK, LLAMA, {"architectures": ["SDARForCausalLM"]}, ["--tp-size", "8", "--dllm-algorithm", "LowConfidence"],
     ["--enable-watermark"], []),
    (WATERMARK, LLAMA, {}, ["--tp-size", "8", "--enable-watermark"], ["--dllm-algorithm", "LowConfidence"], []),
]
QWEN3 = "Qwen--Qwen3-8B"
SP = "sglang-layernorm-sp-config"
MUSE = {"architectures": ["MuseSparkForConditionalGeneration"]}
_SP_BASE = ["--tp-size", "8", "--enable-layernorm-sp"]
_MUSE_NVFP4 = [*_SP_BASE, "--ep-size", "8", "--quantization", "modelopt_fp4", "--moe-a2a-backend", "flashinfer",
               "--moe-runner-backend", "flashinfer_trtllm"]
_MUSE_MEGA = [*_SP_BASE, "--ep-size", "8", "--enable-megamoe-for-layernorm-sp", "--moe-runner-backend",
              "flashinfer_trtllm"]
_SPECS += [
    (SP, QWEN3, {}, _SP_BASE, ["--attn-dp-size", "2"], []),
    (SP, QWEN3, {}, _SP_BASE, ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "@MODEL"], []),
    (SP, QWEN3, {}, ["--enable-layernorm-sp"], ["--tp-size", "4", "--pp-size", "2"], ["--tp-size", "4"]),
]
KIMI = "/models/Kimi-K3"
CPTP = "sglang-cp-tp-group-sharing"
GLM5N = {"architectures": ["Glm5NextForConditionalGeneration"]}
QWEN4 = {"architectures": ["Qwen4ExpForConditionalGeneration"]}
_CP8 = ["--trust-remote-code", "--tp-size", "8", "--enable-prefill-cp", "--attn-cp-size", "8"]
_SPECS += [
    (CPTP, KIMI, GLM5N, [*_CP8, "--cp-strategy", "interleave"], ["--enable-mixed-chunk"], []),
    (CPTP, KIMI, GLM5N, _CP8, ["--cp-strategy", "zigzag"], ["--cp-strategy", "interleave"]),
    (CPTP, KIMI, GLM5N, [*_CP8, "--cp-strategy", "interleave"], ["--speculative-algorithm", "NGRAM"], []),
]
DSADCP = "sglang-dsa-dcp-unsupported"
DSA = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64}
_SPECS += [
    (DSADCP, DSV3, {**DSA, "index_kpool": 2}, ["--tp-size", "8"], ["--dcp-size", "2"], []),
    (DSADCP, DSV3, DSA, ["--tp-size", "8", "--dcp-size", "2"], ["--enable-hierarchical-cache"], []),
    (DSADCP, DSV3, DSA, ["--tp-size", "8", "--dcp-size", "2"], ["--speculative-eagle-topk", "2"], []),
]
TILE = "sglang-dsa-tilelang-fp8-kv"
_TILE = ["--tp-size", "8", "--kv-cache-dtype", "fp8_e4m3", "--dsa-prefill-backend", "tilelang",
         "--dsa-decode-backend", "tilelang"]
_SPECS += [
    (TILE, DSV3, DSA, _TILE, ["--dcp-size", "2"], []),
    (TILE, DSV3, DSA, [*_TILE, "--disable-radix-cache"], ["--enable-hisparse"], []),
]
NEMO = "sglang-nemotron-h-moe-settings"
W4A16 = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {
    "backbone.layers.1.mixer.experts.0.up_proj": {"quant_algo": "W4A16_NVFP4"}}}}
_SPECS += [
    (NEMO, NEMOH, W4A16, ["--tp-size", "8"], ["--moe-a2a-backend", "deepep"], []),
    (NEMO, NEMOH, W4A16, ["--tp-size", "8"], ["--moe-runner-backend", "triton"], ["--moe-runner-backend", "marlin"]),
]
SPLIT = "sglang-dsa-cache-layer-split-mooncake"
_SPECS += [
    (SPLIT, DSV3, DSA, ["--tp-size", "8", "--enable-prefill-cp", "--cp-strategy", "interleave",
                        "--enable-dsa-cache-layer-split", "--disaggregation-mode", "prefill"],
     ["--disaggregation-transfer-backend", "nixl"], ["--disaggregation-transfer-backend", "mooncake"]),
]
TREE = "sglang-eagle-tree-paged-backend"
_TREE = ["--tp-size", "8", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "4", "--page-size", "64"]
_SPECS += [
    (TREE, DSV3, {}, _TREE, ["--attention-backend", "flashmla"], ["--attention-backend", "triton"]),
    (TREE, DSV3, {}, _TREE, ["--attention-backend", "trtllm_mla"], ["--attention-backend", "flashinfer"]),
]
HIS = "sglang-hisparse-dsa-settings"
_HIS = ["--tp-size", "8", "--enable-hisparse", "--disable-radix-cache"]
_SPECS += [
    (HIS, DSV3, DSA, _HIS, ["--kv-cache-dtype", "fp8_e5m2"], ["--kv-cache-dtype", "bfloat16"]),
]
_PD = ["--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "nixl",
       "--disaggregation-bootstrap-port", "8998"]
# (rule, public config.json, keys replaced, base, refused options, twin options, environment[, the twin's]): 0.5.23
# only. Muse Spark without MegaMoE needs SGLANG_MOE_NVFP4_DISPATCH=0 (the MoE hook turns an unset one on)
_OFF = {"SGLANG_MOE_NVFP4_DISPATCH": "0"}
MINIMAX = "nvidia--MiniMax-M3-NVFP4"
MM3 = "sglang-minimax-m3-nvfp4-options"
_NVFP4_PACKED = {"quantization_config": {"quant_method": "mxfp8", "moe_quant_algo": "NVFP4",
                                         "moe_quant_format": "nvfp4-pack-quantized"}}
_MM3_BASE = ["--tp-size", "8", "--chunked-prefill-size", "4096"]
MEGA = "sglang-dsv4-flashmla-mega-needs-v41-sm100"
_SPECS_23 = [
    (MEGA, "deepseek-ai--DeepSeek-V4-Flash", {}, ["--tp-size", "4"], ["--dsv4-attn-backend", "flashmla_mega"], [], {}),
    (NEMO, NEMOH, {"architectures": ["NemotronHPuzzleForCausalLM"], "block_configs": [
        {"block_type": "moe", "n_routed_experts": 128}, {"block_type": "moe", "n_routed_experts": 64}]},
     ["--tp-size", "8"], ["--ep-num-redundant-experts", "8"], [], {}),
    (NEMO, NEMOH, {}, ["--tp-size", "8", "--ep-num-redundant-experts", "8"], ["--moe-runner-backend", "flashinfer_trtllm"],
     ["--moe-runner-backend", "flashinfer_trtllm_routed"], {}),
    (CPTP, KIMI, QWEN4, [*_CP8, "--cp-strategy", "zigzag"], ["--speculative-algorithm", "NEXTN"], [], {}),
    (CPTP, KIMI, QWEN4, [*_CP8, "--cp-strategy", "zigzag", *_PD], [], [], {"SGLANG_DISAGG_STAGING_BUFFER": "1"}, {}),
    (CPTP, KIMI, QWEN4, [*_CP8, "--cp-strategy", "zigzag"], ["--enable-waterfill"], [], {}),
    # (the chunk keeps MegaMoE's per-rank budget within its default capacity, mega_moe_hook.py:241@0.5.23)
    (MM3, MINIMAX, _NVFP4_PACKED, _MM3_BASE, ["--page-size", "64"], ["--page-size", "128"], {}),
    (MM3, MINIMAX, _NVFP4_PACKED, _MM3_BASE, ["--moe-a2a-backend", "deepep"], [], {}),
    (MM3, MINIMAX, _NVFP4_PACKED, [*_MM3_BASE, "--moe-runner-backend", "flashinfer_trtllm_routed"],
     ["--moe-a2a-backend", "deepep"], [], {}),
    (MM3, MINIMAX, _NVFP4_PACKED, _MM3_BASE, ["--kv-cache-dtype", "bf16"], ["--kv-cache-dtype", "fp8_e4m3"], {}),
    (MM3, MINIMAX, _NVFP4_PACKED, _MM3_BASE, ["--speculative-algorithm", "NGRAM"], [], {}),
    (SP, LLAMA, MUSE, [*_SP_BASE, "--ep-size", "8"], [],
     ["--enable-megamoe-for-layernorm-sp", "--moe-runner-backend", "flashinfer_trtllm"], {}),
    (SP, LLAMA, MUSE, [*_SP_BASE, "--ep-size", "8", "--quantization", "modelopt_fp4", "--moe-runner-backend",
                       "flashinfer_trtllm"], [], ["--moe-a2a-backend", "flashinfer"], _OFF),
    (SP, LLAMA, MUSE, [*_SP_BASE, "--ep-size", "8", "--quantization", "modelopt_fp4", "--moe-a2a-backend",
                       "flashinfer"], ["--moe-runner-backend", "flashinfer_cutlass"],
     ["--moe-runner-backend", "flashinfer_trtllm"], _OFF),
    (SP, LLAMA, MUSE, [*_SP_BASE, "--ep-size", "8", "--enable-megamoe-for-layernorm-sp"], [],
     ["--moe-runner-backend", "flashinfer_trtllm"], {}),
    (SP, LLAMA, MUSE, _MUSE_MEGA, ["--moe-a2a-backend", "mooncake"], ["--moe-a2a-backend", "flashinfer"], {}),
    (SP, LLAMA, MUSE, _MUSE_MEGA, ["--enable-mixed-chunk"], [], {}),
    (SP, LLAMA, MUSE, _MUSE_MEGA, ["--chunked-prefill-size", "8192"], ["--chunked-prefill-size", "128"],
     {"SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK": "16"}),
    # the twin: TP4 with --ep-size 8, which the release accepts (it resolves the EP size before its TP/EP check)
    (SP, LLAMA, MUSE, _MUSE_NVFP4, ["--tp-size", "4", "--pp-size", "2"], ["--tp-size", "4"], _OFF),
    (SP, LLAMA, MUSE, _MUSE_NVFP4, [], [], {"SGLANG_MOE_NVFP4_DISPATCH": "1"}, _OFF),
    (SP, LLAMA, MUSE, _MUSE_NVFP4, [], [], {}, _OFF),
]
CASES = [(rid, rel, stem, over, base, bad, good, ({}, {})) for rid, stem, over, base, bad, good in _SPECS
         for rel in BOTH] + [(rid, "0.5.23", stem, over, base, bad, good, (env[0], env[-1]))
                             for rid, stem, over, base, bad, good, *env in _SPECS_23]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]
# (rule, public config.json, keys replaced, the line's options, the refused line's GPU, the twin's GPU, the twin's
#  options): the release refuses the line on the first GPU at the cited source and accepts the twin on the second
_GPU_SPECS = [
    (SM100, DSV3, {}, ["--tp-size", "8", "--attention-backend", "trtllm_mla"], "h200", "b300", None),
    (SM100, DSV3, {}, ["--tp-size", "8", "--decode-attention-backend", "cutedsl_mla"], "h200", "b300", None),
    (SM100, LLAMA, {}, ["--tp-size", "8", "--quantization", "nvfp4_online"], "h200", "b300", None),
    (SM100, LLAMA, {}, ["--tp-size", "8", "--prefill-attention-backend", "trtllm_mha", "--attn-cp-size", "2"],
     "h200", "h200", ["--tp-size", "8", "--prefill-attention-backend", "trtllm_mha"]),
    (SM100, DSV3, {}, ["--tp-size", "8", "--enable-deterministic-inference", "--attention-backend", "fa4"],
     "h200", "b300", None),
    (SM100, NEMOH, {}, ["--tp-size", "8", "--enable-mamba-cache-stochastic-rounding", "--mamba-ssm-dtype", "float16",
                        "--mamba-backend", "triton"],
     "h200", "h200", ["--tp-size", "8", "--enable-mamba-cache-stochastic-rounding", "--mamba-ssm-dtype", "float16",
                      "--mamba-backend", "flashinfer"]),
    (SM100, QWEN3MOE, {}, ["--tp-size", "8", "--attn-dp-size", "8", "--quantization", "mxfp8", "--moe-a2a-backend",
                           "flashinfer_megamoe"], "h200", "b300", None),
]
GPU_CASES = [(rid, rel, stem, over, argv, gpu, twin_gpu, twin) for rid, stem, over, argv, gpu, twin_gpu, twin in
             _GPU_SPECS for rel in BOTH]
GPU_IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(GPU_CASES)]
# lines both the release and the rules pass: the class's own defaults, a class the rules do not name
ACCEPTED = [
    (rel, stem, over, argv) for rel in BOTH for stem, over, argv in (
        (LLAMA, {"architectures": ["Olmo2ForCausalLM"]}, ["--tp-size", "8"]),
        (GEMMA4, {}, ["--tp-size", "2"]),
        (LLAMA, {}, ["--tp-size", "8", "--attn-dp-size", "2"]),
        (MIMOF, {"architectures": ["MiMoV2ForCausalLM"]}, ["--tp-size", "8"]),
    )
]


def public() -> dict[str, dict]:
    from tools.engine_oracle.synth import public_configs

    return public_configs()


def model_dir(root: Path, stem: str, over: dict) -> str:
    """A model directory holding the public ``stem``'s config.json with ``over``'s top-level keys replaced."""
    if stem.startswith("/models/"):   # a model directory the oracle writes (gpustack_k3/oracle/models.py)
        from gpustack_k3.oracle.models import write_models

        src = write_models().get(stem)
        if src is None:
            pytest.skip(f"{stem}: the oracle's model directory is not available")
        cfg = json.loads((Path(src) / "config.json").read_text())
    else:
        cfgs = public()
        if stem not in cfgs:
            pytest.skip("aiconfigurator-core (the public config.json files) is not installed")
        cfg = copy.deepcopy(cfgs[stem])
    cfg.update(copy.deepcopy(over))
    key = hashlib.sha256(json.dumps(over, sort_keys=True).encode()).hexdigest()[:12]
    name = f"{stem.strip('/').replace('/', '_')}-{key}"   # one directory per (model, replaced keys)
    d = root / name.replace("/", "_")
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d)


def product(release: str, argv: list[str], model: str, gpu: str = "b300", env: dict | None = None) -> dict:
    from tools.engine_oracle.product import check_args

    line = {"argv": argv, "env": dict(env or {}), "model": None, "gpu_type": gpu, "gpus": 8,
            "model_config": f"{model}/config.json"}
    return check_args("sglang", release, line)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mfixS")


def lines(d: str, base: list[str], bad: list[str], good: list[str]) -> tuple[list[str], list[str]]:
    """The refused line and its twin on model directory ``d`` (``@MODEL`` in an option: ``d`` itself); a later
    option repeats an earlier one (argparse: the last wins)."""
    def line(opts):
        return ["--model-path", d, *[d if t == "@MODEL" else t for t in (*base, *opts)]]
    return line(bad), line(good)


@pytest.mark.parametrize("rid,release,stem,over,base,bad,good,env", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_twin(root, rid, release, stem, over, base, bad, good, env):
    d = model_dir(root, stem, over)
    refuse, accept = lines(d, base, bad, good)
    refused = product(release, refuse, d, env=env[0])
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, accept, d, env=env[1])
    assert rid not in passed.get("rules", []), passed


@pytest.mark.parametrize("rid,release,stem,over,argv,gpu,twin_gpu,twin", GPU_CASES, ids=GPU_IDS)
def test_the_gpu_rule_refuses_the_line_and_passes_its_twin(root, rid, release, stem, over, argv, gpu, twin_gpu, twin):
    d = model_dir(root, stem, over)
    refused = product(release, ["--model-path", d, *argv], d, gpu)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, ["--model-path", d, *(twin or argv)], d, twin_gpu)
    assert rid not in passed.get("rules", []), passed


@pytest.mark.parametrize("release,stem,over,argv", ACCEPTED)
def test_the_rules_pass_the_accepted_lines(root, release, stem, over, argv):
    d = model_dir(root, stem, over)
    rules = product(release, ["--model-path", d, *argv], d).get("rules", [])
    assert not set(rules) & MFIXS_DIRECT, rules


def test_each_rule_cites_every_release_it_runs_on():
    for rid in MFIXS_DIRECT:
        releases = {c[1] for c in CASES + GPU_CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid


# the rules of gpustack_k3/core/rules/sglang_checks_mfixS.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
MFIXS_DIRECT = {c[0] for c in CASES} | {c[0] for c in GPU_CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_mfixS"} \
        == MFIXS_DIRECT


# DeepSeek-V4.1 itself (model_type deepseek_v41) with flashmla_mega on B300 (SM103): the release accepts it
# (tests/engine_oracle/test_mfixS_rules_oracle.py), the rule passes it
DSV41_MEGA = ["--trust-remote-code", "--model-path", "/models/DeepSeek-V4.1-Flash", "--tp-size", "4",
              "--dsv4-attn-backend", "flashmla_mega"]


def test_flashmla_mega_on_dsv41_b300_passes():
    from tools.engine_oracle.product import check_args

    out = check_args("sglang", "0.5.23", {"argv": DSV41_MEGA, "env": {}, "model": None, "gpu_type": "b300", "gpus": 8})
    assert MEGA not in out.get("rules", []), out
