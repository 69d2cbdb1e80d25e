#!/bin/sh
# kimi-k3-vllm: vllm kimi-k3, image vllm/vllm-openai:kimi-k3
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_ALLREDUCE_USE_FLASHINFER=1 \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION=1 \
  VLLM_ENGINE_READY_TIMEOUT_S=3600 \
  VLLM_USE_RUST_FRONTEND=1 \
  VLLM_USE_V2_MODEL_RUNNER=1 \
  vllm serve /models/Kimi-K3 \
  --trust-remote-code \
  --load-format fastsafetensors \
  --moe-backend auto \
  --gpu-memory-utilization 0.92 \
  --tensor-parallel-size 8 \
  --max-model-len 262144 \
  --kv-cache-dtype fp8 \
  --attention-config '{"mla_prefill_backend":"TRTLLM_RAGGED","use_prefill_query_quantization":true}' \
  --max-num-batched-tokens 32768 \
  --long-prefill-token-threshold 4096 \
  --enable-prefix-caching \
  --enable-auto-tool-choice \
  --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3 \
  --max-num-seqs 32 \
  --speculative-config '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark","attention_backend":"FLASHINFER_MLA","draft_sample_method":"probabilistic","rejection_sample_method":"block"}'
