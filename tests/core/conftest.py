from __future__ import annotations

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from tests.support.documents import merge as _merge


def merge(base: dict, patch: dict) -> dict:
    """Deep merge; a value of None in the patch deletes the key."""
    return _merge(base, patch, delete=None)


def preset_doc(name: str, patch: dict | None = None) -> DeploymentDocument:
    data = load_catalog().presets[name].document
    return DeploymentDocument.model_validate(merge(data, {"spec": patch or {}}))


@pytest.fixture
def doc():
    return preset_doc
