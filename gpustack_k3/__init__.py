"""gpustack-k3: validate, plan, render and launch Kimi-K3 on 8xB300 with vLLM or SGLang.

This module only re-exports the public API; names resolve lazily so `import gpustack_k3` stays cheap.
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "DeploymentDocument": "gpustack_k3.api.v1alpha1.spec",
    "DeploymentSpec": "gpustack_k3.api.v1alpha1.spec",
    "Finding": "gpustack_k3.core.findings",
    "load_catalog": "gpustack_k3.catalog",
    "validate": "gpustack_k3.core.rules",
    "plan": "gpustack_k3.core.plan",
    "resolve": "gpustack_k3.core.resolve",
    "build_launch": "gpustack_k3.core.launch",
    "Refused": "gpustack_k3.core.launch",
    "LaunchSpec": "gpustack_k3.core.launch_types",
    "advise": "gpustack_k3.core.advise",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'gpustack_k3' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)
