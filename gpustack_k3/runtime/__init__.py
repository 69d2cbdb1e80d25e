"""Runtimes that start an engine and follow its cold start: Docker, local process.

Re-exports only, resolved lazily so that importing the package stays cheap (the docker SDK and
httpx are imported by the runtimes themselves, on first use).
"""
from __future__ import annotations

from gpustack_k3 import lazy_exports

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

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
