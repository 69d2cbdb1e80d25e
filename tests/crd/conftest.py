from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def crd() -> dict[str, Any]:
    from gpustack_k3.crd.manifest import crd_manifest

    return crd_manifest()


@pytest.fixture(scope="session")
def root_schema(crd) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
