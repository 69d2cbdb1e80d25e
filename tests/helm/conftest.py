from __future__ import annotations

import pytest
import yaml

from tests.support import tiers
from tools.chart import CHART_DIR, HelmError, find_helm, helm, helm_template


@pytest.fixture(scope="session")
def helm_bin() -> str:
    """The real helm (``.ci/setup_helm.sh``). Absent: skip locally, fail in CI (CI=true)."""
    try:
        return find_helm()
    except HelmError as exc:
        tiers.unavailable(f"{exc} (the helm tier needs the real binary; CI extracts it)")


@pytest.fixture(scope="session")
def render(helm_bin):
    """``render(values_files=[...], set_values=[...]) -> list of manifests`` via ``helm template``."""
    def _render(**kw) -> list[dict]:
        text = helm_template(CHART_DIR, **kw)
        return [d for d in yaml.safe_load_all(text) if d]
    return _render


@pytest.fixture(scope="session")
def helm_run(helm_bin):
    return helm


@pytest.fixture(scope="session")
def crd_manifest() -> dict:
    from gpustack_k3.crd.manifest import crd_manifest as make

    return make()
