"""The rules of gpustack_k3/core/rules/vllm_checks_mfixV.py (helper mfixV): each refuses the release's refused line
and leaves its twin (one fact changed so the release accepts); tests/engine_oracle/test_mfixV_rules_oracle.py has
the releases judge the same kind of lines (the aimed lines of tools/engine_oracle/aimed/aimV1-3.yaml and twins)."""
from __future__ import annotations

import json

import pytest

from gpustack_k3.core.rules import RULES
from gpustack_k3.core.rules import vllm_checks_mfixV as M
from tests.core.test_vllm_checks import product, shape_config

SYNTH = "vllm-synthetic-acceptance-out-of-range"
OMNI = "vllm-qwen3-omni-dspark-self-draft"
KIND = "vllm-attention-backend-per-kind-unknown-kind"
SIZES = "vllm-compile-sizes-unknown-string"
NPRED = "vllm-mtp-tokens-not-multiple-of-mtp-layers"
DOTS3 = "vllm-dots3-mtp-layer-types-count"
REPLAY = "vllm-replayssm-kernel-config"
QUANT = "vllm-quantization-config-spec-invalid"
FP16 = "vllm-float16-unsupported-model-type"
EMBEDS = "vllm-prompt-embeds-encoder-decoder"
VMM = "vllm-kv-connector-expandable-segments"
DCPQ = "vllm-dcp-q-per-kv-divisible"
GRAPH = "vllm-cudagraph-max-capture-size-mismatch"
OFFDP = "vllm-offline-dp-dense-model"
NVFP4 = "vllm-nvfp4-kv-cache-on-mla"
INKLING = "vllm-inkling-lora-multimem-ar"

SMOL = ["/models/smollm2-hf"]
GQA = ["/models/shape-gqa-dense", "--tensor-parallel-size", "8"]
MLA = ["/models/shape-mla-moe", "--tensor-parallel-size", "8"]
HYB = ["/models/shape-hybrid", "--tensor-parallel-size", "8", "--use-replayssm"]
K3 = ["/models/Kimi-K3", "--trust-remote-code", "--tensor-parallel-size", "8", "--use-replayssm"]
DS = ["/models/DeepSeek-V4.1-Flash", "--trust-remote-code", "--tensor-parallel-size", "8"]
NIXL = ["--kv-transfer-config", json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})]
GEMMA2 = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2"}
SIX_TWO = {"num_attention_heads": 6, "num_key_value_heads": 2, "hidden_size": 768, "head_dim": 128}   # 3 q per KV
NGRAM3 = ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})]


def spec(**kw) -> list[str]:
    return ["--speculative-config", json.dumps(kw)]


def synth(**kw) -> list[str]:
    return SMOL + spec(method="ngram", num_speculative_tokens=3, prompt_lookup_max=3,
                       rejection_sample_method="synthetic", **kw)


# a valid Qwen3-Omni DSpark self-draft config (the shape gqa-dense's figures: hidden 4096, 32 layers, vocab 128256)
OMNI_OK = {"architectures": ["Qwen3OmniDSparkModel", "Qwen3OmniMoeForConditionalGeneration"], "block_size": 4,
           "target_hidden_size": 4096, "target_layer_ids": [1, 2], "use_aux_hidden_state": True, "markov_rank": 1,
           "markov_head_type": "vanilla", "mask_token_id": 5}
DSPARK4 = spec(method="dspark", num_speculative_tokens=4)


def with_config(tmp_path, shape: str, name: str, **fields) -> str:
    """A copy of a shape's config.json with ``fields`` set (None drops the key), in tmp_path/name."""
    cfg = json.loads(open(shape_config(shape)).read())
    for k, v in fields.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    return str(d / "config.json")


def on_config(release: str, argv: list[str], config: str, env: dict | None = None) -> dict:
    from tools.engine_oracle.product import check_args

    line = {"argv": [config.rsplit("/", 1)[0], *argv[1:]], "env": env or {}, "model": None, "gpu_type": "b300",
            "gpus": 8, "model_config": config}
    return check_args("vllm", release, line)


def refused_by(got: dict, rid: str) -> bool:
    return got["verdict"] == "refuse" and rid in got["rules"]


# (rule, release, refused line, env, twin, env, catalog model or shape-X) for the lines the catalog models decide
CASES = [
    *((SYNTH, rel, synth(synthetic_acceptance_rates=[0.5]), {}, synth(synthetic_acceptance_rates=[0.8, 0.5, 0.5]),
       {}, None) for rel in ("0.28.0", "0.29.0", "0.32.0-cpu", "0.33.0", "0.34.0")),
    (SYNTH, "0.34.0", synth(synthetic_acceptance_rates=[1.5, 0.5, 0.2]), {},
     synth(synthetic_acceptance_rates=[1, 0.5, 0.2]), {}, None),
    (SYNTH, "0.33.0", synth(synthetic_acceptance_rates=[0.5, 0.8, 0.2]), {},
     synth(synthetic_acceptance_rates=[0.8, 0.5, 0.2]), {}, None),
    (SYNTH, "0.33.0", synth(synthetic_acceptance_length=9), {}, synth(synthetic_acceptance_length=4), {}, None),
    *((KIND, rel, GQA + ["--attention-config", json.dumps({"backend_per_kind": {"bogus_kind": "FLASH_ATTN"}})], {},
       GQA + ["--attention-config", json.dumps({"backend_per_kind": {"full_attention": "FLASH_ATTN"}})], {},
       "shape-gqa-dense") for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((SIZES, rel, GQA + ["--compilation-config", json.dumps({"compile_sizes": ["bogus"]})], {},
       GQA + ["--compilation-config", json.dumps({"compile_sizes": ["cudagraph_capture_sizes", 4]})], {},
       "shape-gqa-dense") for rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((REPLAY, "0.34.0", HYB + extra, env, HYB + twin, tenv, "shape-hybrid") for extra, env, twin, tenv in (
        (["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "17"], {},
         ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "16", "--no-enable-prefix-caching"], {}),
        (["--mamba-backend", "cpu"], {}, [], {}),
        (["--mamba-backend", "triton", "--no-enable-prefix-caching", *NGRAM3], {},
         ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "4", "--no-enable-prefix-caching", *NGRAM3], {}),
        (["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "2", "--no-enable-prefix-caching", *NGRAM3], {},
         ["--mamba-backend", "flashinfer", "--replayssm-buffer-len", "4", "--no-enable-prefix-caching", *NGRAM3], {}),
        (["--mamba-backend", "flashinfer", "--enable-prefix-caching", "--dtype", "float16"], {},
         ["--mamba-backend", "flashinfer", "--enable-prefix-caching", "--dtype", "bfloat16"], {}),
    )),
    (REPLAY, "0.34.0", K3[:3] + ["4", "--pipeline-parallel-size", "2", "--use-replayssm", "--mamba-backend", "triton",
                                 *NGRAM3], {}, K3 + ["--mamba-backend", "triton", *NGRAM3], {}, "kimi-k3"),
    (REPLAY, "0.33.0", K3 + ["--mamba-backend", "triton", "--enable-mamba-cache-stochastic-rounding",
                             "--mamba-ssm-cache-dtype", "float16", *NGRAM3], {},
     K3 + ["--mamba-backend", "triton", *NGRAM3], {}, "kimi-k3"),
    (REPLAY, "0.33.0", HYB + ["--mamba-backend", "cpu"], {},
     HYB + ["--mamba-backend", "flashinfer", "--no-enable-prefix-caching"], {}, "shape-hybrid"),
    (REPLAY, "0.33.0", HYB + ["--mamba-backend", "flashinfer", "--enable-prefix-caching", "--mamba-cache-mode",
                              "align"], {},
     HYB + ["--mamba-backend", "flashinfer", "--no-enable-prefix-caching"], {}, "shape-hybrid"),
    (REPLAY, "0.33.0", HYB + ["--mamba-backend", "triton", "--kv-transfer-config",
                              json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"})],
     {"VLLM_USE_V2_MODEL_RUNNER": "0"}, HYB + ["--mamba-backend", "flashinfer", "--no-enable-prefix-caching"], {},
     "shape-hybrid"),
    *((QUANT, rel, GQA + ["--quantization", "online", "--quantization-config", json.dumps(bad)], {},
       GQA + ["--quantization", "online", "--quantization-config", json.dumps(good)], {}, "shape-gqa-dense")
      for rel in ("0.33.0", "0.34.0") for bad, good in (
          ({"linear": {"weight": 5}}, {"linear": {"weight": "fp8_per_tensor_static"}}),
          ({"linear": "not_a_quant_name"}, {"linear": "fp8_per_tensor_static"}),
          ({"linear": "int8_per_channel_weight_only"}, {"moe": "int8_per_channel_weight_only"}),
          ({"targets": ["fp8_per_tensor"]}, {"targets": {"re:.*proj": "fp8_per_tensor"}}),
          ({"targets": {"re:.*proj": "fp8_per_tensor"}, "linear": "fp8_per_tensor"},
           {"targets": {"re:.*proj": "fp8_per_tensor"}}))),
    # 0.28.0 / 0.29.0 (helper am10v): the same linear/moe checks, no targets field
    *((QUANT, rel, GQA + ["--quantization", "online", "--quantization-config", json.dumps(bad)], {},
       GQA + ["--quantization", "online", "--quantization-config", json.dumps(good)], {}, "shape-gqa-dense")
      for rel in ("0.28.0", "0.29.0") for bad, good in (
          ({"linear": {"weight": 5}}, {"linear": {"weight": "fp8_per_tensor_static"}}),
          ({"linear": "not_a_quant_name"}, {"linear": "fp8_per_tensor_static"}),
          ({"linear": "nvfp4_per_token"}, {"moe": "nvfp4_per_token"}),
          ({"linear": "int8_per_channel_weight_only"}, {"moe": "int8_per_channel_weight_only"}))),
    (QUANT, "0.34.0", GQA + ["--quantization", "mxfp4_hadamard32", "--quantization-config",
                             json.dumps({"linear": {"weight": "mxfp8"}})], {},
     GQA + ["--quantization", "mxfp4_hadamard32", "--quantization-config", json.dumps({"linear": {"weight": "mxfp4"}})],
     {}, "shape-gqa-dense"),
    *((VMM, rel, DS + NIXL, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}, DS + NIXL,
       {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False"}, "deepseek-v4.1-flash")
      for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((GRAPH, rel, SMOL + ["--compilation-config", json.dumps({"cudagraph_capture_sizes": [1, 2, 4],
                                                                "max_cudagraph_capture_size": 8})], {},
       SMOL + ["--compilation-config", json.dumps({"cudagraph_capture_sizes": [1, 2, 4],
                                                   "max_cudagraph_capture_size": 4})], {}, None)
      for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    (GRAPH, "0.34.0", SMOL + ["--compilation-config", json.dumps({"cudagraph_capture_sizes": [1, 2, 4],
                                                                 "max_cudagraph_capture_size": 2})], {},
     SMOL + ["--enforce-eager", "--compilation-config", json.dumps({"cudagraph_capture_sizes": [1, 2, 4],
                                                                   "max_cudagraph_capture_size": 2})], {}, None),
    *((OFFDP, rel, GQA, {"VLLM_DP_SIZE": "2"}, GQA, {"VLLM_DP_SIZE": "1"}, "shape-gqa-dense")
      for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((NVFP4, rel, MLA + ["--kv-cache-dtype", "nvfp4"], {}, MLA + ["--kv-cache-dtype", "fp8"], {}, "shape-mla-moe")
      for rel in ("0.28.0", "0.29.0", "0.32.0-cpu", "0.33.0", "0.34.0")),
    (NVFP4, "0.34.0", MLA + ["--kv-cache-dtype", "nvfp4"], {}, MLA + ["--kv-cache-dtype", "nvfp4"],
     {"VLLM_MLA_DISABLE": "1"}, "shape-mla-moe"),
    (VMM, "0.34.0", DS + NIXL, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
     DS + NIXL + ["--enable-cumem-allocator"], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
     "deepseek-v4.1-flash"),
]
IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("rid,release,bad,bad_env,good,good_env,model", CASES, ids=IDS)
def test_the_rule_refuses_its_line_and_leaves_the_twin(rid, release, bad, bad_env, good, good_env, model):
    got = product(release, bad, bad_env, model)
    assert refused_by(got, rid), got
    assert rid not in product(release, good, good_env, model)["rules"]


# (rule, release, config.json fields over shape X, refused line, twin fields, twin line)
CONFIG_CASES = [
    *((OMNI, rel, "shape-gqa-dense", {**OMNI_OK, "architectures": ["LlamaForCausalLM", "Qwen3OmniMoeForConditionalGeneration"]},
       GQA + DSPARK4, OMNI_OK, GQA + DSPARK4) for rel in ("0.29.0", "0.33.0", "0.34.0")),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "block_size": 0}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", OMNI_OK, GQA + spec(method="dspark", num_speculative_tokens=3), OMNI_OK,
     GQA + DSPARK4),
    (OMNI, "0.33.0", "shape-gqa-dense", {**OMNI_OK, "target_hidden_size": 2048}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.33.0", "shape-gqa-dense", OMNI_OK, GQA + DSPARK4 + ["--hf-overrides", json.dumps({"head_dim": 0})], OMNI_OK,
     GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "target_layer_ids": [2, 1]}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "target_layer_ids": [1, 40]}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "markov_head_type": "gated"}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "draft_vocab_size": 200000}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "mask_token_id": 128256}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    (OMNI, "0.34.0", "shape-gqa-dense", {**OMNI_OK, "mrope_section": [16, 24, 24]}, GQA + DSPARK4, OMNI_OK, GQA + DSPARK4),
    *((NPRED, rel, "shape-mla-moe", {"num_nextn_predict_layers": 3}, MLA + spec(method="mtp", num_speculative_tokens=4),
       {"num_nextn_predict_layers": 3}, MLA + spec(method="mtp", num_speculative_tokens=6))
      for rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((FP16, rel, "shape-gqa-dense", GEMMA2, GQA + ["--dtype", "float16"], GEMMA2, GQA + ["--dtype", "bfloat16"])
      for rel in ("0.11.0", "0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    (FP16, "0.34.0", "shape-gqa-dense", GEMMA2, GQA + ["--dtype", "half"], {}, GQA + ["--dtype", "half"]),
    *((EMBEDS, rel, "shape-gqa-dense", {"is_encoder_decoder": True}, GQA + ["--enable-prompt-embeds"],
       {"is_encoder_decoder": False}, GQA + ["--enable-prompt-embeds"]) for rel in ("0.29.0", "0.33.0", "0.34.0")),
    *((DCPQ, rel, "shape-gqa-dense", SIX_TWO, ["/models/shape-gqa-dense", "--tensor-parallel-size", "6",
                                                "--decode-context-parallel-size", "2"],
       SIX_TWO, ["/models/shape-gqa-dense", "--tensor-parallel-size", "6", "--decode-context-parallel-size", "3"])
      for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((INKLING, rel, "shape-gqa-dense", {"architectures": ["InklingForCausalLM"]}, GQA + ["--enable-lora"],
       {"architectures": ["LlamaForCausalLM"]}, GQA + ["--enable-lora"])
      for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
    *((DOTS3, rel, "shape-gqa-dense", {"model_type": "dots3_note", "num_nextn_predict_layers": 2,
                                 "mtp_layer_types": ["sliding_attention"]},
       GQA + spec(method="mtp", num_speculative_tokens=2),
       {"model_type": "dots3_note", "num_nextn_predict_layers": 2,
        "mtp_layer_types": ["sliding_attention", "full_attention"]},
       GQA + spec(method="mtp", num_speculative_tokens=2)) for rel in ("0.28.0", "0.29.0", "0.33.0", "0.34.0")),
]
CONFIG_IDS = [f"{c[0]}@{c[1]}-{i}" for i, c in enumerate(CONFIG_CASES)]


@pytest.mark.parametrize("rid,release,shape,bad_cfg,bad,good_cfg,good", CONFIG_CASES, ids=CONFIG_IDS)
def test_the_config_rule_refuses_its_line_and_leaves_the_twin(tmp_path, rid, release, shape, bad_cfg, bad, good_cfg,
                                                               good):
    got = on_config(release, bad, with_config(tmp_path, shape, "bad", **bad_cfg))
    assert refused_by(got, rid), got
    assert rid not in on_config(release, good, with_config(tmp_path, shape, "good", **good_cfg))["rules"]


def test_every_rule_of_the_module_has_cases_for_each_release_it_names():
    named = {(rid, key.split(" ", 1)[1]) for rid in MFIXV_DIRECT for key in RULES[rid].sources}
    assert named == {(c[0], c[1]) for c in CASES + CONFIG_CASES}
    assert {r.id for r in RULES.values() if r.check.__module__ == "gpustack_k3.core.rules.vllm_checks_mfixV"} \
        == MFIXV_DIRECT


# ----------------------------------------------------------------------------- the deciding functions, term by term

def test_synthetic_figures():
    sc = {"rejection_sample_method": "synthetic", "num_speculative_tokens": 3}
    assert "length 3" in M.synthetic_problem({**sc, "synthetic_acceptance_rates": [0.5]})
    assert "[0, 1]" in M.synthetic_problem({**sc, "synthetic_acceptance_rates": [1.5, 0.5, 0.2]})
    assert "non-increasing" in M.synthetic_problem({**sc, "synthetic_acceptance_rates": [0.5, 0.8, 0.2]})
    assert "[1, 4]" in M.synthetic_problem({**sc, "synthetic_acceptance_length": 9})
    assert "[1, 4]" in M.synthetic_problem({**sc, "synthetic_acceptance_length": 0.5})
    for ok in ({"synthetic_acceptance_rates": [0.8, 0.5, 0.5]}, {"synthetic_acceptance_rates": [1, 0, 0]},
               {"synthetic_acceptance_length": 4}, {"synthetic_acceptance_length": 1}):
        assert M.synthetic_problem({**sc, **ok}) is None, ok
    # not this rule's: another method, both or neither figure, no explicit count, a non-number
    assert M.synthetic_problem({**sc, "rejection_sample_method": "standard", "synthetic_acceptance_length": 9}) is None
    assert M.synthetic_problem({**sc, "synthetic_acceptance_length": 9, "synthetic_acceptance_rates": [0.5]}) is None
    assert M.synthetic_problem({"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 9}) is None
    assert M.synthetic_problem({**sc, "synthetic_acceptance_rates": ["a", 0.5, 0.2]}) is None


def test_omni_only_for_a_qwen3_omni_target_and_only_on_what_the_file_decides():
    assert M.omni_dspark_problems(OMNI_OK, None, 4) == []
    assert M.omni_dspark_problems({**OMNI_OK, "architectures": ["LlamaForCausalLM"], "block_size": 0}, None, 4) == []
    assert M.omni_dspark_problems({**OMNI_OK, "model_type": "qwen3_omni_moe",
                                   "architectures": ["LlamaForCausalLM"]}, None, 4)[0][0] == M.ARCH
    # the DSpark architecture present but not first: 0.34.0's rewrite depends on the class; not decided here
    assert M.omni_dspark_problems({**OMNI_OK, "architectures": ["Qwen3OmniMoeForConditionalGeneration",
                                                                "Qwen3OmniDSparkModel"]}, None, 4) == []
    # the block size: from dflash_config too, and num_speculative_tokens from the top-level block_size when absent
    cfg = {**{k: v for k, v in OMNI_OK.items() if k != "block_size"}, "dflash_config": {"block_size": 4}}
    assert M.omni_dspark_problems(cfg, None, 4) == []
    assert M.omni_dspark_problems(OMNI_OK, None, None) == []
    assert [i for i, _ in M.omni_dspark_problems(OMNI_OK, None, 3)] == [M.BLOCK_TOKENS]
    # figures a config class fills in: absent -> undecided (no refusal), present -> compared
    thin = {k: v for k, v in OMNI_OK.items()}
    assert M.omni_dspark_problems(thin, None, 4) == []
    assert [i for i, _ in M.omni_dspark_problems({**OMNI_OK, "hidden_size": 4096, "target_hidden_size": 2048}, None,
                                                 4)] == [M.TARGET_HIDDEN]
    # --hf-overrides reach the target only
    over = M.omni_dspark_problems({**OMNI_OK, "num_attention_heads": 32, "num_key_value_heads": 8},
                                  {"num_key_value_heads": 4}, 4)
    assert [i for i, _ in over] == [M.ATT_DRAFT] and "(4); got 8" in over[0][1]
    assert [i for i, _ in M.omni_dspark_problems({**OMNI_OK, "head_dim": 128}, {"head_dim": 0}, 4)] == [M.ATT_TARGET]


def test_kinds_sizes_npredict_dots3():
    assert M.unknown_kind({"backend_per_kind": {"full_attention": "X", "bogus": "Y"}}) == "bogus"
    assert M.unknown_kind({"backend_per_kind": {k: "X" for k in M.KV_CACHE_KINDS}}) is None
    assert M.unknown_kind({"backend": "FLASH_ATTN"}) is None
    assert M.bad_compile_size({"compile_sizes": [1, "cudagraph_capture_sizes", "4"]}) == "4"
    assert M.bad_compile_size({"compile_sizes": [1, "cudagraph_capture_sizes"]}) is None
    types = M._NPREDICT_TYPES["0.34.0"]
    assert "divisible by n_predict=3" in M.npredict_problem({"model_type": "deepseek_v3",
                                                             "num_nextn_predict_layers": 3}, 4, types)
    for k in (1, 2, 3, 6, 9):
        assert M.npredict_problem({"model_type": "deepseek_v3", "num_nextn_predict_layers": 3}, k, types) is None
    assert M.npredict_problem({"model_type": "llama", "num_nextn_predict_layers": 3}, 4, types) is None
    assert M.npredict_problem({"model_type": "glm_moe_dsa", "num_nextn_predict_layers": 3}, 4,
                              M._NPREDICT_TYPES["0.11.0"]) is None
    assert "got 1 for 2 layers" in M.dots3_problem({"model_type": "dots3_note", "num_nextn_predict_layers": 2,
                                                    "mtp_layer_types": ["sliding_attention"]})
    assert M.dots3_problem({"model_type": "dots3_note", "num_nextn_predict_layers": 2}) is None


FACTS = {"backend": "triton", "buffer": 16, "pp": 1, "rounding": False, "align": False, "bf16": True, "v2": False,
         "kv": False, "ubatch": False}


@pytest.mark.parametrize("version,facts,kda,n,line", [
    ("0.34.0", {"backend": "flashinfer", "buffer": 17}, False, 0, 3627),
    ("0.34.0", {"backend": "cpu"}, None, None, 3674),        # every reading refuses (3669 or 3674)
    ("0.34.0", {"pp": 2}, True, 3, 3638),
    ("0.34.0", {}, False, 3, 3669),
    ("0.34.0", {"backend": "flashinfer", "align": True, "bf16": False}, False, 0, 3649),
    ("0.34.0", {"kv": True}, False, 0, 3685),
    ("0.33.0", {"rounding": True}, True, 3, 3489),
    ("0.33.0", {"backend": "flashinfer", "align": True}, False, 0, 3528),
    ("0.33.0", {"v2": True}, False, 0, 3537),
])
def test_replayssm_refusals(version, facts, kda, n, line):
    assert M.replayssm_refusal(version, {**FACTS, **facts}, kda, n)[0] == line


@pytest.mark.parametrize("version,facts,kda,n", [
    ("0.34.0", {}, False, 0),
    ("0.34.0", {}, True, 3),                                  # KDA RecoverSSM on triton
    ("0.34.0", {"backend": "flashinfer", "buffer": 4}, False, 3),
    ("0.34.0", {"kv": True}, True, 3),                        # KV connectors pass with RecoverSSM
    ("0.34.0", {}, False, None),                              # n undecided: 0 passes, n>0 refuses -> no verdict
    ("0.34.0", {"backend": "flashinfer", "align": None, "bf16": False}, False, 0),   # the cache mode undecided
    ("0.33.0", {"v2": None}, False, 0),
])
def test_replayssm_leaves(version, facts, kda, n):
    assert M.replayssm_refusal(version, {**FACTS, **facts}, kda, n) is None


def test_quantization_args():
    p = M.quant_args_problem
    assert "expected str or QuantKey, got int" in p({"linear": {"weight": 5}}, "0.34.0")
    assert "unknown quantization name 'x'" in p({"moe": "x"}, "0.33.0")
    assert "does not define a linear spec" in p({"linear": "int8_per_channel_weight_only"}, "0.34.0")
    assert "does not define a moe spec" in p({"moe": "mxfp4_hadamard32"}, "0.34.0")
    assert "targets must be a dict, got list" in p({"targets": ["fp8_per_tensor"]}, "0.33.0")
    assert "mutually exclusive" in p({"targets": {"a": "mxfp4"}, "moe": "mxfp4"}, "0.34.0")
    assert p({"linear": "lut_b"}, "0.34.0") is None and "unknown" in p({"linear": "lut_b"}, "0.33.0")
    for ok in ({"linear": "fp8_per_tensor", "moe": "mxfp4"}, {"linear": {"weight": "mxfp8", "activation": None}},
               {"targets": {"re:.*": "fp8_per_block"}}, {"ignore": ["lm_head"]}):
        assert p(ok, "0.34.0") is None, ok


# the rules of gpustack_k3/core/rules/vllm_checks_mfixV.py with a firing case above (tests/core/test_registry.py
# test_every_rule_has_a_firing_case counts them)
MFIXV_DIRECT = {c[0] for c in CASES + CONFIG_CASES}


def test_encoder_decoder_is_read_where_written():
    assert M.encoder_decoder_written({"is_encoder_decoder": True}, None)
    assert M.encoder_decoder_written({"text_config": {"is_encoder_decoder": True}}, None)
    assert M.encoder_decoder_written({}, {"is_encoder_decoder": True})
    assert not M.encoder_decoder_written({"is_encoder_decoder": True}, {"is_encoder_decoder": False})
    assert not M.encoder_decoder_written({"model_type": "t5"}, None)   # the class default: not decided here


def test_capture_sizes_against_their_maximum():
    assert "(=8)" in M.capture_size_problem([1, 2, 4], 8, None)
    assert M.capture_size_problem([1, 2, 4], 4, None) is None
    assert M.capture_size_problem([4, 2, 1], 4, None) is None
    # sizes above the smallest default token budget: the budget decides which count (not given: not decided)
    assert M.capture_size_problem([1, 2048], 8, None) is None
    assert "(=2048)" in M.capture_size_problem([1, 2048], 8, 4096)
    assert M.capture_size_problem([1, "a"], 8, None) is None


def test_offline_dp_passes_a_moe_model_and_online_dp():
    assert OFFDP not in product("0.34.0", MLA, {"VLLM_DP_SIZE": "2"}, "shape-mla-moe")["rules"]
    assert OFFDP not in product("0.34.0", GQA + ["--data-parallel-size", "2"], {"VLLM_DP_SIZE": "2"},
                                "shape-gqa-dense")["rules"]


def test_inkling_lora_passes_with_the_all_reduce_off(tmp_path):
    cfg = with_config(tmp_path, "shape-gqa-dense", "ink", architectures=["InklingForCausalLM"])
    assert INKLING not in on_config("0.34.0", GQA + ["--enable-lora"], cfg, {"INKLING_MULTIMEM_AR": "0"})["rules"]
    assert INKLING in on_config("0.34.0", GQA + ["--enable-lora"], cfg, {"INKLING_MULTIMEM_AR": "1"})["rules"]


def test_hadamard_weight():
    assert "mxfp4_hadamard32 -> mxfp8" in M.hadamard_weight_problem("mxfp4_hadamard32", {"linear": {"weight": "mxfp8"}})
    assert "-> fp8_per_tensor" in M.hadamard_weight_problem("mxfp4_hadamard32", {"linear": "fp8_per_tensor"})
    for ok in ({"linear": {"weight": "mxfp4"}}, {"linear": "mxfp4"}, {"linear": {"activation": None}},
               {"moe": {"weight": "mxfp8"}}):
        assert M.hadamard_weight_problem("mxfp4_hadamard32", ok) is None, ok
    assert M.hadamard_weight_problem("mxfp4", {"linear": {"weight": "mxfp8"}}) is None
