"""The rules of gpustack_k3/core/rules/sglang_checks_am11s.py (helper am11s): KV sharding's resolved page size, its
chunk rounding against the GPU's memory, a chunked-attention model, 0.5.23's DSA KV sharding; HiSparse with a draft
tree; an Elastic EP joiner past --max-ep-size; W4A16_NVFP4 Qwen3-MoE experts on SM100. The product's side (check-args as
the differential runs it); the release's own verdict on the same lines: tests/engine_oracle/test_am11s_rules_oracle.py.
These lines were misses on r11base (the aimed lines of tools/engine_oracle/aimed/aim9d.yaml, aimS3.yaml, aimS4.yaml)."""
from __future__ import annotations

from pathlib import Path

import pytest

from gpustack_k3.core.rules import RULES
from tests.core.test_am10s_rules import product
from tests.core.test_mfixS_rules import model_dir

PAGE = "sglang-kv-cache-sharding-page-size"
ROUND = "sglang-kv-cache-sharding-chunk-rounding-memory"
CHUNK = "sglang-kv-cache-sharding-chunked-attention-model"
DSA = "sglang-kv-cache-sharding-dsa-settings"
HISPARSE = "sglang-hisparse-linear-speculation-only"
ELASTIC = "sglang-elastic-ep-join-target-above-max-ep-size"
QWEN3 = "sglang-qwen3-moe-w4a16-nvfp4-runner"
MEGA = "sglang-megamoe-per-rank-chunk"
MUSE_SP = "sglang-muse-megamoe-breakable-prefill"
GEMMA4 = "sglang-gemma4-assistant-draft-not-eagle3"
BOTH = ("0.5.22", "0.5.23")

MLA = ["--model-path", "/models/shape-mla-moe"]
SHARD = ["--tp-size", "8", "--enable-kv-cache-sharding", "--disaggregation-mode", "prefill",
         "--disaggregation-transfer-backend", "nixl", "--disable-radix-cache"]
FA3 = ["--attention-backend", "fa3"]

# (rule, release, gpu, refused line, gpu, accepted line, env): the release refuses the first at the rule's cited
# source and accepts the second (tests/engine_oracle/test_am11s_rules_oracle.py)
CASES = [(PAGE, rel, "b300", MLA + SHARD + FA3 + bad, "b300", MLA + SHARD + FA3 + ["--page-size", "64"], {})
         for rel in BOTH for bad in (["--page-size", "1"], [])]
# rounding 8,000 up to a 131,072-token page needs 184,608 MB more: above an H200's memory, within a B300's fraction
CASES += [(ROUND, rel, gpu, MLA + SHARD + FA3 + ["--page-size", page, "--chunked-prefill-size", "8000"], good_gpu,
           MLA + SHARD + FA3 + ["--page-size", page, "--chunked-prefill-size", "8000"] + more, {})
          for rel in BOTH for gpu, page, good_gpu, more in (
              ("b300", "262144", "b300", ["--mem-fraction-static", "0.8"]),
              ("h200", "131072", "b300", []),
          )]
EP = ["--model-path", "/models/shape-mla-moe", "--tp-size", "8", "--attn-dp-size", "8", "--enable-dp-lm-head",
      "--moe-a2a-backend", "nixl", "--elastic-ep-backend", "mooncake", "--max-ep-size", "16", "--elastic-ep-join-mode",
      "scale", "--node-rank", "1", "--nnodes", "2", "--dist-init-addr", "10.0.0.1:5000", "--elastic-ep-initial-size",
      "8", "--load-balance-method", "round_robin", "--cuda-graph-backend-prefill", "disabled",
      "--elastic-ep-join-rank-offset"]
CASES += [(ELASTIC, rel, "b300", EP + ["16"], "b300", EP + ["8"], {}) for rel in BOTH]
IDS = [f"{c[0]}@{c[1]}-{k}" for k, c in enumerate(CASES)]

# (rule, release, refused line after --model-path DIR, env, model of the refused line, model of the twin: (public
# config or oracle model directory, keys replaced), the twin's line, gpu)
V32 = "deepseek-ai--DeepSeek-V3.2"
SCOUT = "meta-llama--Llama-4-Scout-17B-16E-Instruct"        # text_config.attention_chunk_size 8192
QWEN36 = "nvidia--Qwen3.6-35B-A3B-NVFP4"                     # ModelOpt MIXED_PRECISION, W4A16_NVFP4 experts
GQA = ("/models/shape-gqa-dense", {})
GQA_CP = SHARD + FA3 + ["--page-size", "64", "--enable-prefill-cp", "--attn-cp-size", "8", "--cp-strategy", "interleave"]
MODEL_CASES = [(CHUNK, rel, SHARD + ["--page-size", "64"], {}, (SCOUT, {}), GQA, GQA_CP, "b300") for rel in BOTH]
DSA_SHARD = ["--tp-size", "8", "--enable-kv-cache-sharding", "--disaggregation-mode", "prefill", "--enable-prefill-cp",
             "--attn-cp-size", "2", "--cp-strategy", "interleave", "--dsa-prefill-backend", "trtllm",
             "--dsa-decode-backend", "trtllm", "--kv-cache-dtype", "fp8_e4m3", "--page-size", "64",
             "--disaggregation-transfer-backend"]
MODEL_CASES += [(DSA, "0.5.23", DSA_SHARD + bad, {}, (V32, {}), (V32, {}), DSA_SHARD + good, "b300") for bad, good in (
    (["nixl"], ["mooncake"]),
    (["mooncake", "--enable-dsa-cache-layer-split"], ["mooncake"]),
    (["mooncake", "--enable-hierarchical-cache", "--hicache-io-backend", "direct"],
     ["mooncake", "--enable-hierarchical-cache"]),
)]
MODEL_CASES += [(DSA, "0.5.23", DSA_SHARD + ["mooncake"], {}, (V32, {"index_kpool": 2}), (V32, {}),
                 DSA_SHARD + ["mooncake"], "b300")]
HS = ["--tp-size", "8", "--enable-hisparse", "--disable-radix-cache", "--kv-cache-dtype", "fp8_e4m3",
      "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/models/shape-mla-moe",
      "--speculative-num-steps", "3"]
V32_NEXTN = (V32, {"architectures": ["DeepseekV3ForCausalLMNextN"]})
MODEL_CASES += [(HISPARSE, rel, HS + ["--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"], {},
                 V32_NEXTN, V32_NEXTN, HS + ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
                 "b300") for rel in BOTH]
MODEL_CASES += [(QWEN3, rel, ["--tp-size", "8", "--moe-runner-backend", "flashinfer_trtllm"], {}, (QWEN36, {}),
                 (QWEN36, {}), ["--tp-size", "8", "--moe-runner-backend", "marlin"], "b300") for rel in BOTH]
# MegaMoE on Qwen3-30B-A3B (Qwen3MoeForCausalLM): 8 tokens over attention DP 8 leave 1 per DP rank, 0 per partition
MEGA_LINE = ["--tp-size", "8", "--attn-dp-size", "8", "--moe-a2a-backend", "megamoe", "--page-size", "1",
             "--chunked-prefill-size"]
MODEL_CASES += [(MEGA, rel, MEGA_LINE + ["8"], {}, ("Qwen--Qwen3-30B-A3B", {}), ("Qwen--Qwen3-30B-A3B", {}),
                 MEGA_LINE + ["8192"], "b300") for rel in BOTH]
# Muse Spark (Llama-3.1-8B's config relabelled) MegaMoE LayerNorm SP with breakable prefill graphs
MUSE = ("meta-llama--Meta-Llama-3.1-8B", {"architectures": ["MuseSparkForConditionalGeneration"]})
SP = ["--tp-size", "8", "--ep-size", "8", "--enable-layernorm-sp", "--enable-megamoe-for-layernorm-sp",
      "--moe-runner-backend", "flashinfer_trtllm", "--cuda-graph-backend-prefill", "breakable"]
MODEL_CASES += [(MUSE_SP, "0.5.23", SP + bad, {}, MUSE, MUSE, SP + good, "b300") for bad, good in (
    (["--chunked-prefill-size", "-1"], ["--cuda-graph-max-bs-prefill", "256", "--chunked-prefill-size", "256"]),
    (["--cuda-graph-max-bs-prefill", "256", "--chunked-prefill-size", "8192"],
     ["--cuda-graph-max-bs-prefill", "256", "--chunked-prefill-size", "256"]),
    (["--cuda-graph-bs-prefill", "64", "128", "--chunked-prefill-size", "8192"],
     ["--cuda-graph-bs-prefill", "64", "128", "--chunked-prefill-size", "128"]),
)]
# a Gemma4 assistant draft (Llama-3.1-8B's config relabelled) drafting for itself: the draft path is the model path,
# put after it by model_dir's caller below (SELF_DRAFT)
GEMMA4_DRAFT = ("meta-llama--Meta-Llama-3.1-8B", {"architectures": ["Gemma4AssistantForCausalLM"]})
SELF_DRAFT = "--speculative-draft-model-path=SELF"
MODEL_CASES += [(GEMMA4, rel, ["--tp-size", "8", "--speculative-algorithm", "EAGLE3", SELF_DRAFT], {}, GEMMA4_DRAFT,
                 GEMMA4_DRAFT, ["--tp-size", "8", "--speculative-algorithm", "EAGLE", SELF_DRAFT], "b300")
                for rel in BOTH]
MODEL_IDS = [f"{c[0]}@{c[1]}-{k}" for k, c in enumerate(MODEL_CASES)]


def with_model(d: str, argv: list[str]) -> list[str]:
    """``--model-path d`` and ``argv``, its SELF_DRAFT naming ``d`` as the draft too."""
    return ["--model-path", d] + [t for a in argv
                                  for t in (["--speculative-draft-model-path", d] if a == SELF_DRAFT else [a])]


# the same Qwen3.6 line off SM100: no finding, and the release accepts it on H200 (release, line, gpu)
QWEN3_OFF_SM100 = [(rel, ["--tp-size", "8", "--moe-runner-backend", "flashinfer_trtllm"], "h200") for rel in BOTH]


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("am11s")


@pytest.mark.parametrize("rid,release,gpu,bad,good_gpu,good,env", CASES, ids=IDS)
def test_the_rule_refuses_the_line_and_passes_its_flip(rid, release, gpu, bad, good_gpu, good, env):
    refused = product(release, bad, gpu, env)
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    passed = product(release, good, good_gpu, env)
    assert rid not in passed.get("rules", []) and passed["verdict"] != "refuse", passed


@pytest.mark.parametrize("rid,release,argv,env,bad_model,good_model,good,gpu", MODEL_CASES, ids=MODEL_IDS)
def test_the_model_rule_refuses_the_line_and_passes_its_flip(root, rid, release, argv, env, bad_model, good_model,
                                                             good, gpu):
    d = model_dir(root, *bad_model)
    refused = product(release, with_model(d, argv), gpu, env, f"{d}/config.json")
    assert refused["verdict"] == "refuse" and rid in refused["rules"], refused
    d = model_dir(root, *good_model)
    passed = product(release, with_model(d, good), gpu, env, f"{d}/config.json")
    assert rid not in passed.get("rules", []), passed


@pytest.mark.parametrize("release,argv,gpu", QWEN3_OFF_SM100)
def test_w4a16_experts_off_sm100_are_not_refused(root, release, argv, gpu):
    d = model_dir(root, QWEN36, {})
    assert QWEN3 not in product(release, ["--model-path", d, *argv], gpu, None, f"{d}/config.json").get("rules", [])


def test_the_page_size_is_left_where_a_backend_or_the_model_sets_it():
    """trtllm_mla (and no backend on the line: SGLang's pick) raises the page size; the rule does not guess."""
    for extra in (["--attention-backend", "trtllm_mla", "--page-size", "1"], ["--page-size", "1"],
                  FA3 + ["--decode-attention-backend", "trtllm_mla", "--page-size", "1"]):
        for rel in BOTH:
            assert PAGE not in product(rel, MLA + SHARD + extra, "b300").get("rules", []), extra


def test_each_rule_cites_every_release_it_runs_on():
    for rid in AM11S_DIRECT:
        releases = {c[1] for c in CASES + MODEL_CASES if c[0] == rid}
        assert {k.split()[1] for k in RULES[rid].sources} == releases, rid


AM11S_DIRECT = {c[0] for c in CASES} | {c[0] for c in MODEL_CASES}


def test_every_rule_of_the_module_has_a_case():
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.sglang_checks_am11s"} \
        == AM11S_DIRECT
