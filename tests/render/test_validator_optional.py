"""issue 23 item 8: kubernetes-validate is an optional extra (`gpustack-k3[validate]`); without it a single-node and a
topology document behave alike: the CLI notes it and renders, the operator's render (render.lws.render_document, what
it reconciles a K3Deployment with spec.roles into) returns the objects instead of failing."""
from __future__ import annotations

import sys

import pytest
import yaml
from click.testing import CliRunner

from gpustack_k3.cli.render_cmd import render
from tests.render.conftest import doc_of, preset_data


@pytest.fixture
def no_validator(monkeypatch):
    # a None entry makes `import kubernetes_validate` raise ImportError and find_spec answer None
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)


@pytest.mark.parametrize("preset", ["vllm-fixed", "kimi-k3-b300-1p1d", "dsv41-flash-gb300-8p1d"])
def test_render_without_the_validator_notes_it_for_every_document(no_validator, preset):
    res = CliRunner().invoke(render, ["--preset", preset, "--target", "kubernetes"])
    assert res.exit_code == 0, res.output
    assert "kubernetes-validate is not installed" in res.stderr and "gpustack-k3[validate]" in res.stderr
    assert [d for d in yaml.safe_load_all(res.stdout) if d]


def test_the_output_is_the_same_with_and_without_the_validator(monkeypatch):
    pytest.importorskip("kubernetes_validate")
    with_it = CliRunner().invoke(render, ["--preset", "kimi-k3-b300-1p1d", "--target", "kubernetes"])
    monkeypatch.setitem(sys.modules, "kubernetes_validate", None)
    without = CliRunner().invoke(render, ["--preset", "kimi-k3-b300-1p1d", "--target", "kubernetes"])
    assert with_it.exit_code == without.exit_code == 0 and with_it.stdout == without.stdout


def test_operator_render_of_a_topology_without_the_validator(no_validator):
    from gpustack_k3.render.lws import render_document

    objs = render_document(doc_of(preset_data("dsv41-flash-gb300-8p1d")), namespace="ns")
    assert {"LeaderWorkerSet", "Service"} <= {o["kind"] for o in objs}


def test_required_validation_still_refuses_without_the_validator(no_validator):
    from gpustack_k3.render.kubernetes import validate_objects
    from gpustack_k3.render.templates import RenderError

    assert validate_objects([{"kind": "Service"}]) == []
    with pytest.raises(RenderError, match="kubernetes-validate is not installed"):
        validate_objects([{"kind": "Service"}], required=True)
