"""Reading an engine command line exactly as the engine's own parser does (per catalog engine version).

- dumps.py: the parser dumps (catalog data) as Option/ParserDump; loaded lazily.
- parser.py + engine_types.py: an argparse parser rebuilt from a dump, with the engine's own type functions and
  custom actions re-implemented (pinned by source hash).
- vllm.py / sglang.py: what each engine does to the command line before argparse (underscores, dotted JSON keys,
  -O, --config files).
- read.py: ``read_argv`` (the reading) and ``render_given`` (a setting in canonical spelling).

The names below are loaded on first use: importing this package costs nothing at CLI start-up.
"""
from __future__ import annotations

from gpustack_k3 import lazy_exports

_EXPORTS = {
    "Option": ".dumps", "ParserDump": ".dumps", "load_dump": ".dumps", "version_dump": ".dumps",
    "Given": ".read", "Reading": ".read", "Refusal": ".read", "read_argv": ".read", "render_given": ".read",
    "strip_command": ".read",
}
__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
