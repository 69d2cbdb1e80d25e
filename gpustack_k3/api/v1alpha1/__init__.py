"""``k3.gpustack.ai/v1alpha1``: the deployment document (spec), its status and every name of the API.

``constants`` (names), ``spec`` (the document: CLI files and the custom resource alike), ``status`` (what the
operator writes). The CRD (spec, status, printer columns) is generated from these modules by
``gpustack_k3.crd.manifest``. Re-exports resolve lazily, so importing ``constants`` does not load pydantic.
"""
from __future__ import annotations

from gpustack_k3 import lazy_exports

_EXPORTS = {
    "DeploymentDocument": "gpustack_k3.api.v1alpha1.spec",
    "DeploymentSpec": "gpustack_k3.api.v1alpha1.spec",
    "Metadata": "gpustack_k3.api.v1alpha1.spec",
    "K3DeploymentStatus": "gpustack_k3.api.v1alpha1.status",
}

__all__, __getattr__ = lazy_exports(__name__, _EXPORTS)
