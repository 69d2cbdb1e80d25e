"""The K3Deployment operator (controller-runtime semantics on the official kubernetes client).

``run(namespaces, metrics_port, resync_s, leader_elect, kubeconfig=None)`` is the entry point;
``decide`` is the pure decision function; ``cli.operator`` is the click group."""
from __future__ import annotations

from typing import Any


def run(*args: Any, **kwargs: Any) -> int:
    from gpustack_k3.operator.controller import run as _run
    return _run(*args, **kwargs)


__all__ = ["run"]
