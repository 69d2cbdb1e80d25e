from __future__ import annotations

import re

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


class KubeLoader(yaml.SafeLoader):
    """YAML as the API server reads it (sigs.k8s.io/yaml on go-yaml): an exponent without a dot is a float. Helm
    prints float64 values that way (``1e-06``: a config.json's rms_norm_eps in spec.model.configJSON), which
    PyYAML's YAML 1.1 float pattern (a dot required) would read as a string."""


KubeLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9]+[eE][-+]?[0-9]+$"),
                                 list("-+0123456789"))


@pytest.fixture(scope="session")
def render(helm_bin):
    """``render(values_files=[...], set_values=[...]) -> list of manifests`` via ``helm template``, read as the API
    server reads them (KubeLoader)."""
    def _render(**kw) -> list[dict]:
        text = helm_template(CHART_DIR, **kw)
        return [d for d in yaml.load_all(text, Loader=KubeLoader) if d]
    return _render


@pytest.fixture(scope="session")
def helm_run(helm_bin):
    return helm


@pytest.fixture(scope="session")
def crd_manifest() -> dict:
    from gpustack_k3.crd.manifest import crd_manifest as make

    return make()
