#!/bin/sh
# smollm2-cpu: vllm 0.32.0-cpu, image local/vllm-cpu:0.32.0
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  DO_NOT_TRACK=1 \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  HF_HUB_OFFLINE=1 \
  PYTHONUNBUFFERED=1 \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRANSFORMERS_OFFLINE=1 \
  TRITON_CACHE_DIR=/cache/triton \
  VLLM_CACHE_ROOT=/cache/vllm \
  VLLM_CPU_KVCACHE_SPACE=1 \
  VLLM_ENGINE_READY_TIMEOUT_S=600 \
  VLLM_HOST_IP=127.0.0.1 \
  VLLM_NO_USAGE_STATS=1 \
  python -m vllm.entrypoints.launchers.api_server.entry \
  --model /models/smollm2-hf \
  --tensor-parallel-size 1 \
  --max-model-len 1024 \
  --enforce-eager \
  --dtype bfloat16 \
  --served-model-name smollm2 \
  --host 127.0.0.1
