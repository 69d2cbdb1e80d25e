#!/bin/sh
# one command per role and pod kind, each for its own pod (LWS sets the per-pod variables)

# role prefill (prefill) leader: 1 instance(s) x 1 pod(s) x 8 GPU(s)
# VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's status.podIP (downward API)
# kimi-k3-1p1d-prefill: vllm 0.33.0, image vllm/vllm-openai:v0.33.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENGINE_READY_TIMEOUT_S=1890 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve /models/Kimi-K3 \
  --trust-remote-code \
  --load-format fastsafetensors \
  --gpu-memory-utilization 0.92 \
  --tensor-parallel-size 8 \
  --decode-context-parallel-size 8 \
  --max-model-len 262144 \
  --kv-cache-dtype fp8 \
  --attention-backend FLASHINFER_MLA \
  --max-num-batched-tokens 32768 \
  --enable-prefix-caching \
  --enable-auto-tool-choice \
  --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3 \
  --max-num-seqs 32 \
  --speculative-config '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark","attention_backend":"FLASHINFER_MLA","draft_sample_method":"probabilistic","rejection_sample_method":"block"}' \
  --served-model-name kimi-k3-1p1d \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'

# role decode (decode) leader: 1 instance(s) x 1 pod(s) x 8 GPU(s)
# VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's status.podIP (downward API)
# kimi-k3-1p1d-decode: vllm 0.33.0, image vllm/vllm-openai:v0.33.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENGINE_READY_TIMEOUT_S=1890 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve /models/Kimi-K3 \
  --trust-remote-code \
  --load-format fastsafetensors \
  --gpu-memory-utilization 0.92 \
  --tensor-parallel-size 8 \
  --decode-context-parallel-size 8 \
  --max-model-len 262144 \
  --kv-cache-dtype fp8 \
  --attention-backend FLASHINFER_MLA \
  --max-num-batched-tokens 32768 \
  --enable-prefix-caching \
  --enable-auto-tool-choice \
  --tool-call-parser kimi_k3 \
  --reasoning-parser kimi_k3 \
  --max-num-seqs 32 \
  --speculative-config '{"model":"Inferact/Kimi-K3-DSpark","num_speculative_tokens":7,"method":"dspark","attention_backend":"FLASHINFER_MLA","draft_sample_method":"probabilistic","rejection_sample_method":"block"}' \
  --served-model-name kimi-k3-1p1d \
  --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}'
