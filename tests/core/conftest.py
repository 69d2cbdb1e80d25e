from __future__ import annotations

import copy

import pytest

from gpustack_k3.api.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog


def merge(base: dict, patch: dict) -> dict:
    """Deep merge; a value of None in the patch deletes the key."""
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def preset_doc(name: str, patch: dict | None = None) -> DeploymentDocument:
    data = load_catalog().presets[name].document
    return DeploymentDocument.model_validate(merge(data, {"spec": patch or {}}))


@pytest.fixture
def doc():
    return preset_doc
