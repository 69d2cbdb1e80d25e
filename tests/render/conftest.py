"""Shared helpers for the render tests: presets, edge-case documents, launch specs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.topology import multi_pod

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
# single-launch presets; the multi-pod/P-D presets render through the topology path (tests/core/test_topology_render.py)
PRESETS = [n for n, p in load_catalog().presets.items()
           if not multi_pod(DeploymentDocument.model_validate(p.document))]


def run(*args):
    """``gpustack-k3 render ARGS`` through click's runner."""
    from click.testing import CliRunner

    from gpustack_k3.cli.render_cmd import render

    return CliRunner().invoke(render, list(args))


def write_spec(tmp_path: Path, data: dict, name: str = "spec.yaml") -> Path:
    import yaml

    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def preset_data(name: str) -> dict:
    return copy.deepcopy(load_catalog().presets[name].document)


def doc_of(data: dict) -> DeploymentDocument:
    return DeploymentDocument.model_validate(data)


def launch_of(data: dict):
    from gpustack_k3.render.targets import prepare

    return prepare(doc_of(data))[0]


SPECS = FIXTURES / "specs"


def edge_documents() -> dict[str, dict]:
    """Spec files exercising what the presets do not (tests/render/fixtures/specs/*.yaml): per-pod
    cache claim (StatefulSet) + secret env, hostPath volumes + namespace + placement, emptyDir cache."""
    import yaml

    return {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SPECS.glob("*.yaml"))}


EDGES = edge_documents()


@pytest.fixture(params=PRESETS)
def preset_name(request):
    return request.param
