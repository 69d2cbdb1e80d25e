"""Issue 31, SGLang misses: command lines of the coverage corpora (bench raise-site reports, seeds 7919 and 3301) and
of the seed-5153 differential that SGLang 0.5.23 refuses in prepare_server_args / resolve_once and check-args passed
before the entries of gpustack_k3/catalog/data/checks/sglang.yaml added for them. Each case: the rule that now
refuses the line, and where the release raises (the engine's side: tests/engine_oracle/test_sglang_tail_oracle.py).
Lines are taken as the corpora wrote them (only those on catalog models or the oracle's shape models; synth variants
live in temporary directories). Tests: the product refuses each with its rule, and that rule cites the raise."""
from __future__ import annotations

import pytest

from gpustack_k3.core.rules import checks
from tests.engine_oracle.test_checks_sglang import cited_lines

RELEASE = "0.5.23"

# (rule, argv, env, catalog model or None, where the release raises)
TAIL_CASES = [
    ('sglang-unified-memory-pd-transfer-backend', ['--trust-remote-code', '--model-path', '/models/Kimi-K3', '--tp-size', '8', '--dcp-size', '8', '--mem-fraction-static', '0.88', '--mamba-full-memory-ratio', '0.86', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/sglang-Kimi-K3-DSpark', '--speculative-dspark-block-size', '7', '--chunked-prefill-size', '32768', '--max-prefill-tokens', '32768', '--context-length', '262144', '--served-model-name', 'kimi-k3-1p1d-sglang', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--disaggregation-mode', 'prefill', '--enable-unified-memory', '--kv-cache-dtype', 'bf16'],
     {'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'SGLANG_RAGGED_VERIFY_MODE': 'static'}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:537'),  # differential seed 5153
    ('sglang-dllm-algorithm-known', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--nnodes', '1', '--dllm-algorithm', 'none'],
     {}, None, 'sglang/srt/dllm/algorithm/__init__.py:35'),  # differential seed 5153
    ('sglang-flashinfer-cutlass-ep-size', ['--model-path', '/models/shape-hybrid', '--tp-size', '8', '--device', 'cpu', '--moe-runner-backend', 'flashinfer_cutlass', '--ep-size', '-1'],
     {}, None, 'sglang/srt/arg_groups/moe_hook.py:89'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-scale-node-rank', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--attn-dp-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--elastic-ep-join-rank-offset', '1', '--elastic-ep-join-mode', 'scale', '--elastic-ep-backend', 'mooncake'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/parallel_hook.py:551'),  # coverage seed 7919/3301
    ('sglang-lora-drain-wait-threshold-non-negative', ['--model-path', '/models/shape-gqa-yarn', '--tp-size', '8', '--enable-lora', '--lora-drain-wait-threshold', '-1.0', '--max-lora-rank', '3', '--lora-target-modules', 'kv_a_proj_with_mqa'],
     {}, None, 'sglang/srt/arg_groups/lora_hook.py:176'),  # coverage seed 7919/3301
    ('sglang-dsv4-trtllm-pd', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '32', '--ep-size', '32', '--attn-dp-size', '32', '--enable-dp-lm-head', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--max-running-requests', '2048', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-mode', 'decode', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--nnodes', '8', '--dsv4-attn-backend', 'trtllm'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/deepseek_v4_hook.py:123'),  # coverage seed 7919/3301
    ('sglang-unified-memory-lmcache', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--enable-lmcache', '--enable-unified-memory'],
     {}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:658'),  # coverage seed 7919/3301
    ('sglang-external-linker-storage-backend', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--kv-cache-dtype', 'fp8_e4m3', '--enable-unified-cache-external-linker', '--hicache-storage-backend', 'mori'],
     {}, None, 'sglang/srt/arg_groups/hicache_hook.py:56'),  # coverage seed 7919/3301
    ('sglang-flashinfer-a2a-needs-attn-dp', ['--model-path', '/models/shape-hybrid', '--tp-size', '8', '--moe-a2a-backend', 'flashinfer', '--shared-experts-tp-size', '2', '--chunked-prefill-size', '4'],
     {'SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK': '1'}, None, 'sglang/srt/arg_groups/moe_hook.py:475'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-scale-round-robin', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--attn-dp-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--max-ep-size', '65536', '--elastic-ep-backend', 'none'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/parallel_hook.py:671'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-scale-attn-tp-moe-dense', ['--model-path', '/models/shape-gqa-dense', '--elastic-ep-backend', 'mooncake', '--max-ep-size', '8', '--tp-size', '3', '--device', 'xpu'],
     {}, None, 'sglang/srt/arg_groups/parallel_hook.py:612'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-scale-ep-divisible', ['--model-path', '/models/shape-gqa-dense', '--elastic-ep-backend', 'mooncake', '--max-ep-size', '8', '--tp-size', '3', '--device', 'xpu'],
     {}, None, 'sglang/srt/arg_groups/parallel_hook.py:612'),  # coverage seed 7919/3301
    ('sglang-nvfp4-prefill-backend', ['--model-path', '/models/shape-hybrid', '--tp-size', '8', '--device', 'cpu', '--dsa-prefill-backend', 'aiter', '--dsa-decode-backend', 'intel_xpu', '--attention-backend', 'minicpm_flashinfer', '--kv-cache-dtype', 'nvfp4'],
     {}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:53'),  # coverage seed 7919/3301
    ('sglang-shared-experts-tp-size-kimi-k3-only', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--attn-dp-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--shared-experts-tp-size', '1'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/parallel_hook.py:226'),  # coverage seed 7919/3301
    ('sglang-watermark-speculative-algorithm', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--attn-dp-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--dsv4-attn-backend', 'trtllm', '--disaggregation-mode', 'null', '--enable-watermark'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/validation_hook.py:91'),  # coverage seed 7919/3301
    ('sglang-megamoe-layernorm-sp-needs-layernorm-sp', ['--trust-remote-code', '--model-path', '/models/Kimi-K3', '--tp-size', '8', '--disable-custom-all-reduce', '--enable-symm-mem', '--mem-fraction-static', '0.88', '--mamba-full-memory-ratio', '0.86', '--host', '0.0.0.0', '--port', '30000', '--speculative-draft-model-path', '/models/sglang-Kimi-K3-DSpark', '--speculative-dspark-block-size', '7', '--enable-linear-replayssm-spec', '--chunked-prefill-size', '32768', '--max-prefill-tokens', '32768', '--context-length', '1000000', '--kv-cache-dtype', 'fp8_e4m3', '--enable-aiter-allreduce-fusion', '--dcp-size', '1', '--strip-thinking-cache', '--speculative-algorithm', 'EAGLE3', '--enable-watermark', '--enable-megamoe-for-layernorm-sp'],
     {'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'SGLANG_RAGGED_VERIFY_MODE': 'static'}, 'kimi-k3', 'sglang/srt/arg_groups/layernorm_sp_hook.py:25'),  # coverage seed 7919/3301
    ('sglang-tp-lm-head-a2a-needs-attn-dp', ['--model-path', '/models/shape-gqa-yarn', '--tp-size', '8', '--disaggregation-mode', 'prefill', '--enable-tp-lm-head-all-to-all', '--attn-cp-size', '2'],
     {}, None, 'sglang/srt/arg_groups/overrides.py:1429'),  # coverage seed 7919/3301
    ('sglang-tp-lm-head-a2a-tp-equals-attn-dp', ['--model-path', '/models/shape-gqa-yarn', '--tp-size', '8', '--disaggregation-mode', 'prefill', '--enable-tp-lm-head-all-to-all', '--attn-cp-size', '2'],
     {}, None, 'sglang/srt/arg_groups/overrides.py:1429'),  # coverage seed 7919/3301
    ('sglang-dsv4-trtllm-cp', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--dsv4-attn-backend', 'trtllm', '--disaggregation-mode', 'null', '--attn-dp-size', '2', '--attn-cp-size', '2'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/deepseek_v4_hook.py:116'),  # coverage seed 7919/3301
    ('sglang-grpc-use-ray', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--enable-watermark', '--grpc-port', '30011', '--use-ray'],
     {}, None, 'sglang/srt/arg_groups/serving_hook.py:414'),  # coverage seed 7919/3301
    ('sglang-dsv41-unsupported-features', ['--trust-remote-code', '--model-path', '/models/DeepSeek-V4.1-Flash', '--tp-size', '2', '--ep-size', '2', '--attn-dp-size', '2', '--enable-dp-lm-head', '--mem-fraction-static', '0.95', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/DeepSeek-V4.1-Flash-DSpark', '--speculative-dspark-block-size', '5', '--context-length', '131072', '--kv-cache-dtype', 'fp8_e4m3', '--served-model-name', 'dsv41-flash-8p1d-sglang', '--disaggregation-transfer-backend', 'nixl', '--disaggregation-bootstrap-port', '8998', '--dsv4-attn-backend', 'trtllm', '--enable-encoder-swa-bounded-replay', '--disaggregation-mode', 'null', '--attn-cp-size', '1', '--dcp-size', '1'],
     {'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton'}, 'deepseek-v4.1-flash', 'sglang/srt/arg_groups/deepseek_v4_hook.py:350'),  # coverage seed 7919/3301
    ('sglang-unified-memory-external-linker', ['--model-path', '/models/shape-gqa-dense', '--tp-size', '8', '--enable-unified-cache-external-linker', '--enable-unified-memory'],
     {'SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16': '1', 'SGLANG_MOE_NVFP4_DISPATCH': '1'}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:663'),  # coverage seed 7919/3301
    ('sglang-tp-lm-head-a2a-dp-lm-head', ['--trust-remote-code', '--model-path', '/models/Kimi-K3', '--tp-size', '8', '--disable-custom-all-reduce', '--enable-symm-mem', '--mem-fraction-static', '0.88', '--mamba-full-memory-ratio', '0.86', '--host', '0.0.0.0', '--port', '30000', '--speculative-algorithm', 'DSPARK', '--speculative-draft-model-path', '/models/sglang-Kimi-K3-DSpark', '--speculative-dspark-block-size', '7', '--enable-linear-replayssm-spec', '--chunked-prefill-size', '32768', '--max-prefill-tokens', '32768', '--context-length', '1000000', '--kv-cache-dtype', 'fp8_e4m3', '--enable-aiter-allreduce-fusion', '--dcp-size', '1', '--strip-thinking-cache', '--enable-tp-lm-head-all-to-all', '--enable-dp-lm-head'],
     {'TORCHINDUCTOR_CACHE_DIR': '/cache/torchinductor', 'TRITON_CACHE_DIR': '/cache/triton', 'FLASHINFER_WORKSPACE_BASE': '/cache/flashinfer', 'SGLANG_DG_CACHE_DIR': '/cache/deepgemm', 'DG_JIT_CACHE_DIR': '/cache/deepgemm', 'SGLANG_RAGGED_VERIFY_MODE': 'static'}, 'kimi-k3', 'sglang/srt/arg_groups/overrides.py:1429'),  # coverage seed 7919/3301
    ('sglang-nvfp4-decode-backend', ['--model-path', '/models/shape-gqa-dense', '--tp-size', '8', '--decode-attention-backend', 'cutedsl_mla', '--kv-cache-dtype', 'nvfp4'],
     {'SGLANG_FLASHINFER_CUTEDSL_NVFP4_W4A16': '1', 'SGLANG_MOE_NVFP4_DISPATCH': '1'}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:80'),  # coverage seed 7919/3301
    ('sglang-fp4-kv-unified-memory', ['--model-path', '/models/shape-gqa-dense', '--tp-size', '8', '--enable-deepseek-v4-fp4-indexer', '--enable-unified-memory', '--kv-cache-dtype', 'fp4_mx_block16'],
     {}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:133'),  # coverage seed 7919/3301
    ('sglang-kv-cache-sharding-flexkv', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--enable-flexkv', '--enable-kv-cache-sharding', '--disaggregation-mode', 'prefill'],
     {}, None, 'sglang/srt/arg_groups/kv_shard_hook.py:161'),  # coverage seed 7919/3301
    ('sglang-kv-cache-sharding-tree-core-backend', ['--model-path', '/models/shape-mla-moe', '--tp-size', '8', '--mamba-backend', 'flashinfer', '--enable-kv-cache-sharding', '--disaggregation-mode', 'prefill'],
     {'SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND': '2'}, None, 'sglang/srt/arg_groups/kv_shard_hook.py:140'),  # coverage seed 7919/3301
    ('sglang-kv-cache-sharding-hicache-storage', ['--model-path', '/models/shape-gqa-dense', '--tp-size', '8', '--attention-backend', 'intel_xpu', '--enable-deterministic-inference', '--enable-hierarchical-cache', '--hicache-storage-backend', 'sim', '--enable-kv-cache-sharding', '--disaggregation-mode', 'prefill'],
     {}, None, 'sglang/srt/arg_groups/kv_shard_hook.py:177'),  # coverage seed 7919/3301
    ('sglang-kv-cache-sharding-radix-cache-backend', ['--model-path', '/models/shape-gqa-dense', '--tp-size', '8', '--enable-deepseek-v4-fp4-indexer', '--radix-cache-backend', '1', '--enable-kv-cache-sharding', '--disaggregation-mode', 'prefill'],
     {}, None, 'sglang/srt/arg_groups/kv_shard_hook.py:126'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-scale-join-rank-offset', ['--model-path', '/models/shape-hybrid', '--enable-lmcache', '--elastic-ep-backend', 'mooncake', '--max-ep-size', '1', '--tp-size', '-1', '--elastic-ep-join-mode', 'scale', '--node-rank', '1'],
     {}, None, 'sglang/srt/arg_groups/parallel_hook.py:555'),  # coverage seed 7919/3301
    ('sglang-unified-memory-pd-mooncake-speculative', ['--model-path', '/models/shape-gqa-yarn', '--tp-size', '8', '--disaggregation-mode', 'prefill', '--disaggregation-transfer-backend', 'mooncake', '--speculative-algorithm', 'NEXTN', '--enable-unified-memory'],
     {}, None, 'sglang/srt/arg_groups/kv_cache_hook.py:549'),  # coverage seed 7919/3301
    ('sglang-elastic-ep-pp-size', ['--model-path', '/models/shape-mla-moe', '--disaggregation-mode', 'null', '--pp-size', '2', '--elastic-ep-backend', 'mooncake', '--max-ep-size', '1', '--tp-size', '-1', '--device', 'hpu'],
     {}, None, 'sglang/srt/arg_groups/parallel_hook.py:538'),  # coverage seed 7919/3301
]
IDS = [f"{c[0]}" for c in TAIL_CASES]


def product(argv: list[str], env: dict, model: str | None) -> dict:
    from tools.engine_oracle.product import check_args
    return check_args("sglang", RELEASE, {"argv": argv, "env": env, "model": model, "gpu_type": "b300", "gpus": 8})


@pytest.mark.parametrize("rid,argv,env,model,where", TAIL_CASES, ids=IDS)
def test_the_corpus_line_is_refused_by_its_rule(rid, argv, env, model, where):
    ans = product(argv, env, model)
    assert ans["verdict"] == "refuse" and rid in ans["rules"], ans


@pytest.mark.parametrize("rid,argv,env,model,where", TAIL_CASES, ids=IDS)
def test_the_rule_cites_where_the_release_raises(rid, argv, env, model, where):
    cited = cited_lines(checks.TABLE[rid].releases[RELEASE])
    path, _, line = where.rpartition(":")
    assert path in cited and int(line) in cited[path], (where, checks.TABLE[rid].releases[RELEASE])
