"""Helper mfixV's rules (gpustack_k3/core/rules/vllm_checks_mfixV.py and the checks entry
vllm-spec-max-model-len-above-target) judged by the releases: each REFUSE line (an aimed line of
tools/engine_oracle/aimed/aimV1-3.yaml, or one like it) is refused by the release and the product refuses it too; each
ACCEPT line (a twin: one fact changed) is accepted by the release and no rule of this helper refuses it. The lines
run through tools/engine_oracle/aimed.py (its seed lines and config.json copies), with the product's verdict."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.core.test_mfixV_rules import MFIXV_DIRECT
from tools.engine_oracle import aimed as A

pytestmark = pytest.mark.engine_oracle

MINE = MFIXV_DIRECT | {"vllm-spec-max-model-len-above-target"}
# a raise site of each release (the aimed format names one per entry; an ACCEPT line runs none of them)
SITE = {"vllm-0.11.0": "vllm/config/compilation.py:539", "vllm-0.28.0": "vllm/config/speculative.py:270",
        "vllm-0.29.0": "vllm/config/speculative.py:562", "vllm-0.33.0": "vllm/config/speculative.py:614",
        "vllm-0.34.0": "vllm/config/speculative.py:662"}
ALL = tuple(SITE)
R4 = ("vllm-0.28.0", "vllm-0.29.0", "vllm-0.33.0", "vllm-0.34.0")
R3 = ("vllm-0.29.0", "vllm-0.33.0", "vllm-0.34.0")
R2 = ("vllm-0.33.0", "vllm-0.34.0")

NG3 = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}
SYN = {**NG3, "rejection_sample_method": "synthetic"}
OMNI = {"architectures": ["Qwen3OmniDSparkModel", "Qwen3OmniMoeForConditionalGeneration"], "block_size": 4,
        "target_hidden_size": 4096, "target_layer_ids": [1, 2], "use_aux_hidden_state": True, "markov_rank": 1,
        "markov_head_type": "vanilla", "mask_token_id": 5}
DSPARK4 = {"--speculative-config": {"method": "dspark", "num_speculative_tokens": 4}}
DOTS3 = {"model_type": "dots3_note", "num_nextn_predict_layers": 2, "layer_types": ["full_attention"] * 32}
MTP2 = {"--speculative-config": {"method": "mtp", "num_speculative_tokens": 2}}
HYB = ["/models/shape-hybrid", "--tensor-parallel-size", "8", "--use-replayssm"]
K3 = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8", "--use-replayssm"]
NGRAM3 = ["--speculative-config", json.dumps(NG3)]
GEMMA2 = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2"}
SIX_TWO = {"num_attention_heads": 6, "num_key_value_heads": 2, "hidden_size": 768, "head_dim": 128}
SMOL_NIXL = ["/models/smollm2-hf", "--tensor-parallel-size", "1", "--kv-transfer-config",
             json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]


def e(kind: str, why: str, releases, **line) -> dict:
    return {"why": f"{kind} {why}", "releases": tuple(releases), **line}


LINES = [
    # synthetic acceptance figures (aimV1.yaml:37-40)
    e("REFUSE", "rates of length 1 for 3 tokens", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_rates": [0.5]}}),
    e("REFUSE", "rate 1.5", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_rates": [1.5, 0.5, 0.2]}}),
    e("REFUSE", "rates increase", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_rates": [0.5, 0.8, 0.2]}}),
    e("REFUSE", "length 9", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_length": 9}}),
    e("ACCEPT", "rates fit", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_rates": [1, 0.5, 0.5]}}),
    e("ACCEPT", "length 4 (the bound)", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**SYN, "synthetic_acceptance_length": 4}}),
    # Qwen3-Omni DSpark self-draft (aimV1.yaml:17-35)
    e("REFUSE", "omni: no Qwen3OmniDSparkModel", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "architectures": ["LlamaForCausalLM", "Qwen3OmniMoeForConditionalGeneration"]}),
    e("REFUSE", "omni: block_size 0", R3, seed="shape/gqa-dense", set=DSPARK4, config={**OMNI, "block_size": 0}),
    e("REFUSE", "omni: 3 tokens for block 4", R3, seed="shape/gqa-dense", config=OMNI,
      set={"--speculative-config": {"method": "dspark", "num_speculative_tokens": 3}}),
    e("REFUSE", "omni: target_hidden_size 2048", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "target_hidden_size": 2048}),
    e("REFUSE", "omni: head_dim 0 on the target", R3, seed="shape/gqa-dense", config=OMNI,
      set={**DSPARK4, "--hf-overrides": {"head_dim": 0}}),
    e("REFUSE", "omni: kv heads 4 on the target", R3, seed="shape/gqa-dense", config=OMNI,
      set={**DSPARK4, "--hf-overrides": {"num_key_value_heads": 4}}),
    e("REFUSE", "omni: layers [2, 1]", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "target_layer_ids": [2, 1]}),
    e("REFUSE", "omni: layer 40 of 32", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "target_layer_ids": [1, 40]}),
    e("REFUSE", "omni: markov gated", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "markov_head_type": "gated"}),
    e("REFUSE", "omni: draft vocab 200000", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "draft_vocab_size": 200000}),
    e("REFUSE", "omni: mask token outside", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "mask_token_id": 128256}),
    e("REFUSE", "omni: mrope_section", R3, seed="shape/gqa-dense", set=DSPARK4,
      config={**OMNI, "mrope_section": [16, 24, 24]}),
    e("ACCEPT", "omni: valid", R2, seed="shape/gqa-dense", set=DSPARK4, config=OMNI),
    e("ACCEPT", "omni: valid, block in dflash_config", R2, seed="shape/gqa-dense", set=DSPARK4,
      config={**{k: v for k, v in OMNI.items() if k != "block_size"}, "dflash_config": {"block_size": 4}}),
    e("ACCEPT", "no omni target: its DSpark fields unread", R2, seed="shape/gqa-dense", set=DSPARK4,
      config={"block_size": 0, "markov_head_type": "gated"}),
    # --attention-config backend_per_kind (aimV1.yaml:0)
    e("REFUSE", "bogus kind", R4, seed="shape/gqa-dense",
      set={"--attention-config": {"backend_per_kind": {"bogus_kind": "FLASH_ATTN"}}}),
    e("ACCEPT", "full_attention kind", R4, seed="shape/gqa-dense",
      set={"--attention-config": {"backend_per_kind": {"full_attention": "FLASH_ATTN"}}}),
    # compile_sizes (aimV3.yaml:2)
    e("REFUSE", "compile_sizes bogus", ALL, seed="shape/gqa-dense",
      set={"--compilation-config": {"compile_sizes": ["bogus"]}}),
    e("ACCEPT", "compile_sizes cudagraph_capture_sizes", ALL, seed="shape/gqa-dense",
      set={"--compilation-config": {"compile_sizes": ["cudagraph_capture_sizes", 4]}}),
    # MTP n_predict (aimV1.yaml:51)
    e("REFUSE", "mtp 4 tokens on 3 MTP layers", ALL, seed="shape/mla-moe", config={"num_nextn_predict_layers": 3},
      set={"--speculative-config": {"method": "mtp", "num_speculative_tokens": 4}}),
    e("ACCEPT", "mtp 6 tokens on 3 MTP layers", ALL, seed="shape/mla-moe", config={"num_nextn_predict_layers": 3},
      set={"--speculative-config": {"method": "mtp", "num_speculative_tokens": 6}}),
    e("ACCEPT", "mtp 2 tokens on 3 MTP layers", ALL, seed="shape/mla-moe", config={"num_nextn_predict_layers": 3},
      set={"--speculative-config": {"method": "mtp", "num_speculative_tokens": 2}}),
    # dots3_note mtp_layer_types (aimV1.yaml:55); 0.33.0 and 0.34.0 cannot inspect Dots3NoteMTPModel in the oracle
    # ("failed to be inspected"): no twin there
    e("REFUSE", "dots3 1 type for 2 layers", R4, seed="shape/gqa-dense", set=MTP2,
      config={**DOTS3, "mtp_layer_types": ["sliding_attention"]}),
    e("ACCEPT", "dots3 2 types for 2 layers", ("vllm-0.28.0", "vllm-0.29.0"), seed="shape/gqa-dense",
      set=MTP2, config={**DOTS3, "mtp_layer_types": ["sliding_attention", "full_attention"]}),
    # speculative max_model_len (aimV1.yaml:43; the checks entry)
    e("REFUSE", "spec max_model_len 2000 over 1024", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {"model": "/models/smollm2-hf", "num_speculative_tokens": 2,
                                    "max_model_len": 2000}}),
    e("ACCEPT", "spec max_model_len 1000", R4, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {"model": "/models/smollm2-hf", "num_speculative_tokens": 2,
                                    "max_model_len": 1000}}),
    e("ACCEPT", "ngram: no draft model, max_model_len unchecked", ALL, seed="vllm-cpu-smollm2@b300",
      set={"--speculative-config": {**NG3, "max_model_len": 2000}}),
    # --use-replayssm (aimV2.yaml:48-58)
    e("REFUSE", "flashinfer buffer 17", R2, argv=HYB + ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "17"]),
    e("REFUSE", "backend cpu", R2, argv=HYB + ["--mamba-backend", "cpu"]),
    e("REFUSE", "mamba2 spec on triton", R2,
      argv=HYB + ["--mamba-backend", "triton", "--no-enable-prefix-caching", *NGRAM3]),
    e("REFUSE", "flashinfer spec buffer 2", R2,
      argv=HYB + ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "2", "--no-enable-prefix-caching",
                  *NGRAM3]),
    e("REFUSE", "RecoverSSM on PP 2", ("vllm-0.34.0",),
      argv=K3[:3] + ["4", "--pipeline-parallel-size", "2", "--use-replayssm", "--mamba-backend", "triton", *NGRAM3]),
    e("REFUSE", "flashinfer align float16", ("vllm-0.34.0",),
      argv=HYB + ["--mamba-backend", "flashinfer", "--enable-prefix-caching", "--dtype", "float16"]),
    e("REFUSE", "RecoverSSM stochastic rounding", ("vllm-0.33.0",),
      argv=K3 + ["--mamba-backend", "triton", "--enable-mamba-cache-stochastic-rounding", "--mamba-ssm-cache-dtype",
                 "float16", *NGRAM3]),
    e("REFUSE", "flashinfer with prefix caching", ("vllm-0.33.0",),
      argv=HYB + ["--mamba-backend", "flashinfer", "--enable-prefix-caching", "--mamba-cache-mode", "align"]),
    e("REFUSE", "KV connector", ("vllm-0.33.0",), env={"VLLM_USE_V2_MODEL_RUNNER": "0"},
      argv=HYB + ["--mamba-backend", "triton", "--kv-transfer-config",
                  json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]),
    e("ACCEPT", "flashinfer buffer 16, no prefix caching", R2,
      argv=HYB + ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "16", "--no-enable-prefix-caching"]),
    e("ACCEPT", "flashinfer spec buffer 4", R2,
      argv=HYB + ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "4", "--no-enable-prefix-caching",
                  *NGRAM3]),
    e("ACCEPT", "RecoverSSM on triton", R2, argv=K3 + ["--mamba-backend", "triton", *NGRAM3]),
    e("ACCEPT", "RecoverSSM with a KV connector", ("vllm-0.34.0",),
      argv=K3 + ["--mamba-backend", "triton", "--kv-transfer-config",
                 json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}), *NGRAM3]),
    # float16 on Gemma 2 (aimV2.yaml:9)
    e("REFUSE", "gemma2 float16", ALL, seed="shape/gqa-dense", config=GEMMA2, set={"--dtype": "float16"}),
    e("ACCEPT", "gemma2 bfloat16", ALL, seed="shape/gqa-dense", config=GEMMA2, set={"--dtype": "bfloat16"}),
    e("ACCEPT", "llama float16", ALL, seed="shape/gqa-dense", set={"--dtype": "float16"}),
    # prompt embeds on an encoder-decoder config (aimV2.yaml:5)
    e("REFUSE", "prompt embeds, is_encoder_decoder", R3, seed="shape/gqa-dense", config={"is_encoder_decoder": True},
      set={"--enable-prompt-embeds": True}),
    e("ACCEPT", "prompt embeds, decoder-only", R3, seed="shape/gqa-dense", set={"--enable-prompt-embeds": True}),
    # a KV connector under expandable_segments (aimV2.yaml:25)
    e("REFUSE", "NixlConnector, expandable_segments", R4, argv=SMOL_NIXL,
      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    e("ACCEPT", "NixlConnector, expandable_segments, cumem allocator", R4, argv=SMOL_NIXL + ["--enable-cumem-allocator"],
      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    e("ACCEPT", "NixlConnector, expandable_segments off", R4, argv=SMOL_NIXL,
      env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}),
    # DCP on GQA: 3 query heads per KV head (aimV2.yaml:8)
    e("REFUSE", "6 heads on 2 KV heads, TP 6, DCP 2", R4, seed="shape/gqa-dense", config=SIX_TWO,
      set={"--tensor-parallel-size": "6", "--decode-context-parallel-size": "2"}),
    e("ACCEPT", "6 heads on 2 KV heads, TP 6, DCP 3", R4, seed="shape/gqa-dense", config=SIX_TWO,
      set={"--tensor-parallel-size": "6", "--decode-context-parallel-size": "3"}),
    # CUDA graph capture sizes against their maximum (aimV2.yaml:37)
    e("REFUSE", "capture sizes [1, 2, 4], maximum 8", R4, seed="shape/gqa-dense",
      set={"--compilation-config": {"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 8}}),
    e("ACCEPT", "capture sizes [1, 2, 4], maximum 4", R4, seed="shape/gqa-dense",
      set={"--compilation-config": {"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 4}}),
    e("ACCEPT", "capture sizes [1, 2, 4], maximum 8, eager", R4, seed="shape/gqa-dense",
      set={"--enforce-eager": True,
           "--compilation-config": {"cudagraph_capture_sizes": [1, 2, 4], "max_cudagraph_capture_size": 8}}),
    # offline data parallel on a dense model (aimV2.yaml:15)
    e("REFUSE", "VLLM_DP_SIZE=2, dense", R4, seed="shape/gqa-dense", env={"VLLM_DP_SIZE": "2"}),
    e("ACCEPT", "VLLM_DP_SIZE=1, dense", R4, seed="shape/gqa-dense", env={"VLLM_DP_SIZE": "1"}),
    e("ACCEPT", "VLLM_DP_SIZE=2, MoE", R4, seed="shape/mla-moe", env={"VLLM_DP_SIZE": "2"}),
    # plain nvfp4 KV cache on MLA (aimV2.yaml:47)
    e("REFUSE", "nvfp4 KV cache, MLA", R2, seed="shape/mla-moe", set={"--kv-cache-dtype": "nvfp4"}),
    e("ACCEPT", "nvfp4 KV cache, dense GQA", R2, seed="shape/gqa-dense", set={"--kv-cache-dtype": "nvfp4"}),
    e("ACCEPT", "nvfp4 KV cache, MLA disabled", R2, seed="shape/mla-moe", set={"--kv-cache-dtype": "nvfp4"},
      env={"VLLM_MLA_DISABLE": "1"}),
    # a Hadamard-rotated shorthand's weight (aimV3.yaml:28)
    e("REFUSE", "mxfp4_hadamard32, linear weight mxfp8", ("vllm-0.34.0",), seed="shape/gqa-dense",
      set={"--quantization": "mxfp4_hadamard32", "--quantization-config": {"linear": {"weight": "mxfp8"}}}),
    e("ACCEPT", "mxfp4_hadamard32, linear weight mxfp4", ("vllm-0.34.0",), seed="shape/gqa-dense",
      set={"--quantization": "mxfp4_hadamard32", "--quantization-config": {"linear": {"weight": "mxfp4"}}}),
    # Inkling LoRA (aimV1.yaml:16)
    e("REFUSE", "Inkling LoRA, INKLING_MULTIMEM_AR unset", R2, seed="shape/gqa-dense",
      config={"architectures": ["InklingForCausalLM"]}, set={"--enable-lora": True}),
    e("ACCEPT", "Inkling LoRA, INKLING_MULTIMEM_AR=0", R2, seed="shape/gqa-dense",
      config={"architectures": ["InklingForCausalLM"]}, set={"--enable-lora": True}, env={"INKLING_MULTIMEM_AR": "0"}),
    # --quantization-config (aimV3.yaml:19, 20, 22, 23, 27)
    *(e(kind, f"quantization_config {qc}", R2, seed="shape/gqa-dense",
        set={"--quantization": "online", "--quantization-config": qc}) for kind, qc in (
        ("REFUSE", {"linear": {"weight": 5}}), ("REFUSE", {"linear": "not_a_quant_name"}),
        ("REFUSE", {"linear": "int8_per_channel_weight_only"}), ("REFUSE", {"targets": ["fp8_per_tensor"]}),
        ("REFUSE", {"targets": {"re:.*proj": "fp8_per_tensor"}, "linear": "fp8_per_tensor"}),
        ("ACCEPT", {"linear": {"weight": "fp8_per_tensor_static"}}), ("ACCEPT", {"linear": "fp8_per_tensor_static"}),
        ("ACCEPT", {"moe": "int8_per_channel_weight_only"}), ("ACCEPT", {"targets": {"re:.*proj": "fp8_per_tensor"}}))),
]


@pytest.mark.parametrize("release", ALL)
def test_the_release_refuses_each_refuse_line_and_accepts_each_twin(oracles, tmp_path, release):
    mine = [x for x in LINES if release in x["releases"]]
    entries = [{"targets": {release: SITE[release]}, **{k: v for k, v in x.items() if k != "releases"}} for x in mine]
    path = tmp_path / "mfixV.yaml"
    path.write_text(yaml.safe_dump(entries, sort_keys=False))
    # the line mode on the session's worker: verdicts and the product's, without coverage.py (no site is asserted here)
    doc = A.run(release, files=[path], product=True, mode="line", oracle=oracles(release))
    verdicts = {x["why"]: x["verdict"] for x in doc["aimed"]}
    for x in mine:
        want = "refused" if x["why"].startswith("REFUSE") else "accepted"
        assert verdicts.get(x["why"]) == want, (release, x["why"], verdicts.get(x["why"]))
    p = doc["product"]
    whys = {f"aimed:mfixV.yaml:{i}": x["why"] for i, x in enumerate(mine)}
    missed = [whys.get(m["mutations"][0], m["mutations"]) for m in p["misses"]]
    assert not missed, (release, missed)
    # a false refusal by this helper's rules (another rule's, e.g. spec-draft-missing on a DSpark self-draft of
    # 0.29.0, is not theirs)
    ours = [(whys.get(m["mutations"][0]), m.get("product_rules")) for m in p["false_refusals"]
            if set(m.get("product_rules") or ()) & MINE]
    assert not ours, (release, ours)
