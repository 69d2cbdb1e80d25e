"""Verdicts on the disagreements the held-out oracle differential (seed 7919, issue 31) found: each command line is
the one the differential judged, each test names the release's source line it follows."""
from __future__ import annotations

import json

import pytest

from tests.core.test_verdicts_fresh import check_args, model_dir, rules

# rules whose fire/quiet cases are the tests of this file
HELDOUT_DIRECT = {"sglang-eagle-draft-missing", "sglang-gpt-oss-attention-backend",
                  "sglang-trtllm-mla-kv-cache-dtype"}
# DeepSeek-V3's config.json (the oracle's shape-mla-moe: gpustack_k3/oracle/models.py), the fields the rules read
DSV3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 61,
        "num_attention_heads": 128, "num_key_value_heads": 128, "hidden_size": 7168, "intermediate_size": 18432,
        "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
        "first_k_dense_replace": 3, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "max_position_embeddings": 163840, "vocab_size": 129280,
        "torch_dtype": "bfloat16"}


# --------------------------------------------------------------------- vLLM EPLB window/interval bounds per release

@pytest.mark.parametrize("key", ["window_size", "step_interval"])
def test_vllm_eplb_window_and_interval_bounds_follow_the_release(tmp_path, key):
    """vLLM 0.11.0's EPLBConfig declares window_size/step_interval as plain ints (config/parallel.py:42-44@0.11.0,
    no validator reads them): 0 and negatives are accepted; from 0.28.0 Field(gt=0) refuses them at parse time
    (config/parallel.py:62-64@0.28.0, :67-69@0.33.0): on a command line the parser's own validation of the JSON
    refuses them (argv-refused, the class's schema from the parser dump), once; a document's
    spec.parallel.eplb is rule vllm-config-bounds's."""
    d = model_dir(tmp_path, DSV3, "DeepSeek-V3")
    for value in (0, -3):
        argv = [d, "-tp", "8", "--enable-expert-parallel", "--enable-eplb", "--eplb-config", json.dumps({key: value})]
        code, out = check_args(*argv, version="0.11.0", opts=("--model-config", f"{d}/config.json"))
        assert code == 0 and out["ok"] is True, (value, out)
        for version in ("0.28.0", "0.33.0"):
            code, out = check_args(*argv, version=version, opts=("--model-config", f"{d}/config.json"))
            found = rules(out)
            assert code == 1 and "argv-refused" in found and "vllm-config-bounds" not in found, (version, value, out)
            assert f"EPLBConfig.{key}" in found["argv-refused"][0]["message"], found
    ok = [d, "-tp", "8", "--enable-expert-parallel", "--enable-eplb", "--eplb-config", json.dumps({key: 1})]
    code, out = check_args(*ok, version="0.33.0", opts=("--model-config", f"{d}/config.json"))
    assert not {"vllm-config-bounds", "argv-refused"} & set(rules(out)), out


# --------------------------------------------------------------------- SGLang EAGLE3 without a draft path

# NVIDIA-Nemotron-3-Nano's config.json (the oracle's shape-hybrid), the fields the rules read
NEMOTRON_H = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "num_hidden_layers": 52,
              "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
              "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "hidden_size": 2688,
              "intermediate_size": 1856, "moe_intermediate_size": 1856, "n_routed_experts": 128,
              "n_shared_experts": 1, "num_experts_per_tok": 6, "mamba_num_heads": 64, "mamba_head_dim": 64,
              "ssm_state_size": 128, "n_groups": 8, "max_position_embeddings": 262144, "vocab_size": 131072,
              "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_sglang_eagle3_without_draft_path_is_not_a_config_refusal(tmp_path, version):
    """SGLang's EAGLE family hook never requires --speculative-draft-model-path (speculative_hook.py:984-1063@0.5.22,
    :1072-1154@0.5.23): for the architectures that carry their own draft layer (DeepseekV3ForCausalLM, ...) it
    defaults to the model path; for any other the configuration is accepted and the draft worker's ModelConfig is
    built from the unset path at start-up (managers/tp_worker.py:458-472@0.5.22): runtime-only, not refused by
    the oracle. Only DSPARK raises at config time without a draft (speculative_hook.py:659-680@0.5.22)."""
    hybrid = model_dir(tmp_path, NEMOTRON_H, "Nemotron-3-Nano")
    argv = ["--model-path", hybrid, "--tp-size", "8", "--speculative-algorithm", "EAGLE3"]
    code, out = check_args(*argv, engine="sglang", version=version, opts=("--model-config", f"{hybrid}/config.json"))
    assert "spec-draft-missing" not in rules(out), out
    assert "sglang-eagle-draft-missing" in rules(out), out          # the start-up failure, said (runtime-only)
    dsv3 = model_dir(tmp_path, DSV3, "DeepSeek-V3")                  # the draft defaults to the model path: quiet
    argv = ["--model-path", dsv3, "--tp-size", "8", "--speculative-algorithm", "EAGLE3"]
    code, out = check_args(*argv, engine="sglang", version=version, opts=("--model-config", f"{dsv3}/config.json"))
    assert not {"spec-draft-missing", "sglang-eagle-draft-missing"} & set(rules(out)), out
    argv = ["--model-path", hybrid, "--tp-size", "8", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "/models/draft"]
    code, out = check_args(*argv, engine="sglang", version=version, opts=("--model-config", f"{hybrid}/config.json"))
    assert not {"spec-draft-missing", "sglang-eagle-draft-missing"} & set(rules(out)), out


def test_vllm_eagle3_without_draft_stays_refused():
    """vLLM needs the draft model for EAGLE3 (config/speculative.py:1236-1244@0.33.0)."""
    code, out = check_args("/models/Kimi-K3", "-tp", "8", "--speculative-config", '{"method": "eagle3"}')
    assert code == 1 and "spec-draft-missing" in rules(out), out


# --------------------------------------------------------------------- SGLang gpt-oss attention backends

# gpt-oss-20b's config.json (the oracle's shape-gqa-yarn), the fields the rules read
GPT_OSS = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "num_hidden_layers": 24,
           "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "hidden_size": 2880,
           "intermediate_size": 2880, "num_local_experts": 32, "num_experts_per_tok": 4, "sliding_window": 128,
           "layer_types": ["sliding_attention", "full_attention"] * 12, "max_position_embeddings": 131072,
           "vocab_size": 201088, "torch_dtype": "bfloat16",
           "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0, "beta_slow": 1.0,
                            "original_max_position_embeddings": 4096, "truncate": False}}


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_sglang_gpt_oss_attention_backends(tmp_path, version):
    """SGLang's model hook asserts GptOssForCausalLM's prefill and decode attention backends (each falling back to
    --attention-backend) are triton, trtllm_mha, fa3, fa4, ascend, intel_amx, intel_xpu or aiter
    (arg_groups/model_hook.py:509-538@0.5.22, :515-544@0.5.23); the oracle refuses --attention-backend flashinfer."""
    d = model_dir(tmp_path, GPT_OSS, "gpt-oss-20b")
    base = ["--model-path", d, "--tp-size", "8"]
    opts = ("--model-config", f"{d}/config.json")
    for extra in (["--attention-backend", "flashinfer"], ["--decode-attention-backend", "flashinfer"],
                  ["--attention-backend", "triton", "--prefill-attention-backend", "flashinfer"]):
        code, out = check_args(*base, *extra, engine="sglang", version=version, opts=opts)
        assert code == 1 and "sglang-gpt-oss-attention-backend" in rules(out), (extra, out)
    for extra in ([], ["--attention-backend", "triton"], ["--attention-backend", "trtllm_mha"],
                  ["--attention-backend", "flashinfer", "--prefill-attention-backend", "fa3",
                   "--decode-attention-backend", "triton"]):
        code, out = check_args(*base, *extra, engine="sglang", version=version, opts=opts)
        assert "sglang-gpt-oss-attention-backend" not in rules(out), (extra, out)
    dsv3 = model_dir(tmp_path, DSV3, "DeepSeek-V3")       # another architecture: quiet
    code, out = check_args("--model-path", dsv3, "--tp-size", "8", "--attention-backend", "flashinfer",
                           engine="sglang", version=version, opts=("--model-config", f"{dsv3}/config.json"))
    assert "sglang-gpt-oss-attention-backend" not in rules(out), out


# --------------------------------------------------------------------- SGLang TRT-LLM MLA KV-cache dtypes

@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_sglang_deepseek_v3_trtllm_mla_kv_cache_dtype(tmp_path, version):
    """On SM100/SM103 SGLang gives DeepseekV3ForCausalLM the trtllm_mla backend when none is given
    (model_overrides/deepseek_v2.py:178-189@0.5.23, :179-190@0.5.22), and the TRT-LLM MLA post-process check takes
    the KV-cache dtypes fp8_e4m3, bf16 or auto only (arg_groups/overrides.py:1204-1218@0.5.23, :1154-1168@0.5.22):
    the oracle refuses --kv-cache-dtype fp8_e5m2 with and without --attention-backend trtllm_mla."""
    d = model_dir(tmp_path, DSV3, "DeepSeek-V3")
    base = ["--model-path", d, "--tp-size", "8"]
    opts = ("--model-config", f"{d}/config.json", "--gpu-type", "b300")
    for extra in (["--kv-cache-dtype", "fp8_e5m2"], ["--kv-cache-dtype", "fp8_e5m2", "--attention-backend", "trtllm_mla"]):
        code, out = check_args(*base, *extra, engine="sglang", version=version, opts=opts)
        assert code == 1 and "sglang-trtllm-mla-kv-cache-dtype" in rules(out), (extra, out)
    for extra in (["--kv-cache-dtype", "fp8_e4m3"], [],
                  ["--kv-cache-dtype", "fp8_e5m2", "--attention-backend", "flashinfer"]):
        code, out = check_args(*base, *extra, engine="sglang", version=version, opts=opts)
        assert "sglang-trtllm-mla-kv-cache-dtype" not in rules(out), (extra, out)


# --------------------------------------------------------------------- vLLM DCP on a GQA model per release

# Llama-3.1-8B's config.json (the oracle's shape-gqa-dense), the fields the rules read
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "intermediate_size": 14336,
         "max_position_embeddings": 131072, "vocab_size": 128256, "torch_dtype": "bfloat16"}


def test_vllm_dcp_on_gqa_follows_the_release(tmp_path):
    """vLLM 0.11.0 has no GQA/MQA DCP check at config time (only TP % DCP, engine/arg_utils.py:1184-1187@0.11.0):
    DCP 4 with TP 8 on 8 KV heads is accepted (the held-out differential, seed 7919 --explore 0.5); 0.28.0+ refuse
    TP not above the KV heads (config/model.py:1386-1412@0.28.0, :1577-1597@0.33.0)."""
    d = model_dir(tmp_path, LLAMA, "Llama-3.1-8B")
    argv = [d, "-tp", "8", "--decode-context-parallel-size", "4"]
    code, out = check_args(*argv, version="0.11.0", opts=("--model-config", f"{d}/config.json"))
    assert "model-dcp-gqa" not in rules(out), out
    for version in ("0.28.0", "0.33.0"):
        code, out = check_args(*argv, version=version, opts=("--model-config", f"{d}/config.json"))
        assert code == 1 and "model-dcp-gqa" in rules(out), (version, out)


# --------------------------------------------------------------------- NIXL + DCP on a hybrid model from its config.json

def test_vllm_029_refuses_nixl_dcp_on_hybrid_from_config_json(tmp_path):
    """vLLM 0.29.0 asserts PD with DCP > 1 is not for hybrid Mamba/SSM models (config/vllm.py:1165-1168@0.29.0;
    0.33.0 dropped it, config/vllm.py:1572-1590@0.33.0). Where the model comes from a config.json (no catalog model)
    its architecture decides whether it is hybrid (Kimi-K3's KimiK3ForConditionalGeneration: the catalog's
    hybrid_mamba): the CI tier's miss (engine_oracle sample, vLLM 0.29.0)."""
    from gpustack_k3.oracle.models import MODELS

    # the engine oracle's Kimi-K3 config.json (the checkpoint's shape: text_config, model_type kimi_k3), which the
    # product reads as the model (no catalog model beside it)
    d = model_dir(tmp_path, MODELS["kimi-k3"][0], "k3-local")
    argv = ["/models/Kimi-K3", "--trust-remote-code", "-tp", "8", "-dcp", "8", "--kv-transfer-config",
            json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_producer"})]
    opts = ("--model", "kimi-k3", "--gpus", "8", "--model-config", f"{d}/config.json")
    code, out = check_args(*argv, version="0.29.0", opts=opts)
    assert code == 1 and "pd-dcp-nixl" in rules(out), out
    code, out = check_args(*argv, version="0.33.0", opts=opts)
    assert "pd-dcp-nixl" not in rules(out), out
# --------------------------------------------------------------------- vLLM 0.11.0 MXFP4 dtype

# gpt-oss-20b's checkpoint is MXFP4 (its config.json quantization_config)
GPT_OSS_MXFP4 = {**GPT_OSS, "quantization_config": {"quant_method": "mxfp4"}}


def test_vllm_011_refuses_half_on_mxfp4(tmp_path):
    """vLLM 0.11.0 checks the model dtype against the quantization method's activation dtypes when it builds the
    config (config/__init__.py:267-272@0.11.0; MXFP4: bfloat16 only, mxfp4.py:129-130@0.11.0): the held-out
    differential's miss (seed 7919, gpt-oss with --dtype half)."""
    d = model_dir(tmp_path, GPT_OSS_MXFP4, "gpt-oss-20b")
    code, out = check_args(d, "-tp", "8", "--dtype", "half", version="0.11.0",
                           opts=("--model-config", f"{d}/config.json"))
    assert code == 1 and "dtype-vs-quantization" in rules(out), out
    code, out = check_args(d, "-tp", "8", "--dtype", "bfloat16", version="0.11.0",
                           opts=("--model-config", f"{d}/config.json"))
    assert "dtype-vs-quantization" not in rules(out), out
