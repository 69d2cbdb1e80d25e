#!/bin/sh
# kimi-k3-sglang-nodcp: sglang kimi-k3, image lmsysorg/sglang:kimi-k3
env \
  DG_JIT_CACHE_DIR=/cache/deepgemm \
  FLASHINFER_WORKSPACE_BASE=/cache/flashinfer \
  SGLANG_DG_CACHE_DIR=/cache/deepgemm \
  TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
  TRITON_CACHE_DIR=/cache/triton \
  python3 -m sglang.launch_server \
  --trust-remote-code \
  --model-path /models/Kimi-K3 \
  --tp-size 8 \
  --disable-custom-all-reduce \
  --enable-symm-mem \
  --mem-fraction-static 0.85 \
  --reasoning-parser kimi_k3 \
  --tool-call-parser kimi_k3 \
  --mamba-full-memory-ratio 0.86 \
  --host 0.0.0.0 \
  --port 30000 \
  --speculative-algorithm DSPARK \
  --speculative-draft-model-path /models/sglang-Kimi-K3-DSpark \
  --speculative-dspark-block-size 7 \
  --enable-linear-replayssm-spec \
  --chunked-prefill-size 32768 \
  --max-prefill-tokens 32768 \
  --context-length 1000000 \
  --kv-cache-dtype fp8_e4m3
