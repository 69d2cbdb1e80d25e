"""Runtimes that start an engine and follow its cold start: Docker, local process.

Re-exports only, resolved lazily so that importing the package stays cheap (the docker SDK and
httpx are imported by the runtimes themselves, on first use).
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DockerRunner": ".docker",
    "DockerLaunch": ".docker",
    "DockerRuntimeError": ".docker",
    "StartResult": ".docker",
    "ContainerStatus": ".docker",
    "run_launch": ".docker",
    "local_ulimit_caps": ".docker",
    "ProgressView": ".progress",
    "LocalProcess": ".local",
    "LocalRuntimeError": ".local",
    "ReadyOutcome": ".local",
}

__all__ = ["ContainerStatus", "DockerLaunch", "DockerRunner", "DockerRuntimeError", "LocalProcess",
           "LocalRuntimeError", "ProgressView", "ReadyOutcome", "StartResult", "local_ulimit_caps", "run_launch"]


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(mod, __name__), name)
