#!/bin/sh
# one command per role and pod kind, each for its own pod (LWS sets the per-pod variables)

# role prefill (prefill) leader: 8 instance(s) x 1 pod(s) x 2 GPU(s)
# VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's status.podIP (downward API)
# dsv41-flash-8p1d-prefill: vllm 0.33.0, image vllm/vllm-openai:v0.33.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENGINE_READY_TIMEOUT_S=2700 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve /models/DeepSeek-V4.1-Flash \
  --trust-remote-code \
  --gpu-memory-utilization 0.95 \
  --tensor-parallel-size 1 \
  --data-parallel-size 2 \
  --enable-expert-parallel \
  --data-parallel-size-local 2 \
  --max-model-len 131072 \
  --kv-cache-dtype fp8 \
  --speculative-config '{"model":"/models/DeepSeek-V4.1-Flash-DSpark","num_speculative_tokens":5,"method":"dspark"}' \
  --enforce-eager \
  --served-model-name dsv41-flash-8p1d \
  --kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}' \
  --no-async-scheduling

# role decode (decode) leader: 1 instance(s) x 8 pod(s) x 4 GPU(s)
# VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's status.podIP (downward API)
# dsv41-flash-8p1d-decode: vllm 0.33.0, image vllm/vllm-openai:v0.33.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENGINE_READY_TIMEOUT_S=2700 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve /models/DeepSeek-V4.1-Flash \
  --trust-remote-code \
  --tensor-parallel-size 1 \
  --data-parallel-size 32 \
  --enable-expert-parallel \
  --data-parallel-size-local 4 \
  --enable-eplb \
  --eplb-config '{"window_size":1000,"step_interval":3000,"num_redundant_experts":0}' \
  --max-model-len 131072 \
  --kv-cache-dtype fp8 \
  --max-num-seqs 64 \
  --speculative-config '{"model":"/models/DeepSeek-V4.1-Flash-DSpark","num_speculative_tokens":5,"method":"dspark"}' \
  --served-model-name dsv41-flash-8p1d \
  --data-parallel-hybrid-lb \
  --data-parallel-rpc-port 29550 \
  --kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}' \
  --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}' \
  --data-parallel-address "$LWS_LEADER_ADDRESS" \
  --data-parallel-start-rank "$((LWS_WORKER_INDEX * 4))"

# role decode (decode) worker: 1 instance(s) x 8 pod(s) x 4 GPU(s)
# VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's status.podIP (downward API)
# dsv41-flash-8p1d-decode: vllm 0.33.0, image vllm/vllm-openai:v0.33.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_ENGINE_READY_TIMEOUT_S=2700 \
  VLLM_NIXL_SIDE_CHANNEL_PORT=5600 \
  vllm serve /models/DeepSeek-V4.1-Flash \
  --trust-remote-code \
  --tensor-parallel-size 1 \
  --data-parallel-size 32 \
  --enable-expert-parallel \
  --data-parallel-size-local 4 \
  --enable-eplb \
  --eplb-config '{"window_size":1000,"step_interval":3000,"num_redundant_experts":0}' \
  --max-model-len 131072 \
  --kv-cache-dtype fp8 \
  --max-num-seqs 64 \
  --speculative-config '{"model":"/models/DeepSeek-V4.1-Flash-DSpark","num_speculative_tokens":5,"method":"dspark"}' \
  --served-model-name dsv41-flash-8p1d \
  --data-parallel-hybrid-lb \
  --data-parallel-rpc-port 29550 \
  --kv-transfer-config '{"kv_connector":"NixlPushConnector","kv_role":"kv_consumer","kv_load_failure_policy":"fail"}' \
  --compilation-config '{"cudagraph_mode":"FULL_DECODE_ONLY"}' \
  --data-parallel-address "$LWS_LEADER_ADDRESS" \
  --data-parallel-start-rank "$((LWS_WORKER_INDEX * 4))"
