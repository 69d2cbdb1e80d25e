"""Deployment-document mutations for tests: deep-merge a patch into a copy of a document."""
from __future__ import annotations

import copy
from typing import Any

DELETE = object()   # a patch value that removes the key


def merge(base: dict[str, Any], patch: dict[str, Any], *, delete: Any = DELETE) -> dict[str, Any]:
    """Deep-merge ``patch`` into a copy of ``base``; a value that *is* ``delete`` removes the key
    (pass ``delete=None`` to let ``None`` remove keys)."""
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is delete:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v, delete=delete)
        else:
            out[k] = copy.deepcopy(v)
    return out
