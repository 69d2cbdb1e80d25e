#!/bin/sh
# kimi-k3-vllm: vllm kimi-k3; serves http://127.0.0.1:8000/health
docker run --detach \
  --name kimi-k3-vllm \
  --network host \
  --ipc host \
  --shm-size 64g \
  --ulimit memlock=-1:-1 \
  --ulimit stack=67108864:67108864 \
  --gpus 8 \
  --volume kimi-k3-models:/models:ro \
  --volume kimi-k3-compile-cache:/cache:rw \
  --env DG_JIT_CACHE_DIR=/cache/deepgemm \
  --env FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  --env TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  --env TRITON_CACHE_DIR=/cache/triton \
  --env VLLM_ALLREDUCE_USE_FLASHINFER=1 \
  --env VLLM_CACHE_ROOT=/cache/vllm \
  --env VLLM_ENABLE_K3_LATENT_MOE_TAIL_FUSION=1 \
  --env VLLM_ENGINE_READY_TIMEOUT_S=3600 \
  --env VLLM_USE_RUST_FRONTEND=1 \
  --env VLLM_USE_V2_MODEL_RUNNER=1 \
  --label app.kubernetes.io/name=kimi-k3 \
  --label app.kubernetes.io/instance=kimi-k3-vllm \
  --label app.kubernetes.io/component=inference-engine \
  --label app.kubernetes.io/part-of=gpustack-k3 \
  --label app.kubernetes.io/managed-by=gpustack-k3 \
  --label app.kubernetes.io/version=kimi-k3 \
  --label k3.gpustack.ai/engine=vllm \
  --entrypoint vllm \
  vllm/vllm-openai:kimi-k3 \
  serve \
  /models/Kimi-K3 \
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
