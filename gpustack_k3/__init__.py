"""gpustack-k3: validate, plan, render and launch Kimi-K3 on 8xB300 with vLLM or SGLang.

This module only re-exports the public API; names resolve lazily so `import gpustack_k3` stays cheap.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
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



def lazy_exports(package: str, exports: dict[str, str]) -> tuple[list[str], Callable[[str], Any]]:
    """``__all__`` and a module-level ``__getattr__`` (PEP 562) for a package that re-exports names lazily, so that
    importing it loads nothing more. ``exports`` maps each name to the module that defines it (absolute, or relative
    to ``package`` when it starts with a dot); a name is imported on first access and then kept in the package.
    The one re-export mechanism of the package (gpustack_k3, api/v1alpha1, core/argv, runtime)."""
    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)
        return value
    return sorted(exports), __getattr__


__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
