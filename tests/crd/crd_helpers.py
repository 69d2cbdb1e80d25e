"""Helpers for tests/crd (document mutations of the presets)."""
from __future__ import annotations

import copy
from typing import Any

from gpustack_k3.catalog import load_catalog
from tests.support.documents import DELETE, merge  # noqa: F401 - DELETE is re-exported to the tests


def preset_doc(name: str, spec_patch: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(load_catalog().presets[name].document)
    if spec_patch:
        doc["spec"] = merge(doc["spec"], spec_patch)
    return doc
