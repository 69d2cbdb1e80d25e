"""Helpers for tests/crd (document mutations of the presets)."""
from __future__ import annotations

import copy
from typing import Any

from gpustack_k3.catalog import load_catalog

DELETE = object()


def merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``patch`` into a copy of ``base``; a ``DELETE`` value removes the key."""
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is DELETE:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def preset_doc(name: str, spec_patch: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = copy.deepcopy(load_catalog().presets[name].document)
    if spec_patch:
        doc["spec"] = merge(doc["spec"], spec_patch)
    return doc
