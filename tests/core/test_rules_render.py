"""The render family: each rule fires on a launch spec whose volumes the target cannot use, and stays quiet on one
it can (and on the targets that mount nothing)."""
from __future__ import annotations

import pytest

from gpustack_k3.core.launch import build_launch
from gpustack_k3.core.rules import RULES, render_findings
from gpustack_k3.core.rules.registry import of_family

from .conftest import preset_doc

# rule -> (storage patch that fires it, storage patch that does not), on the vllm-fixed preset, target kubernetes
RENDER_CASES = {
    "render-volume-source": ({"model": {"kind": "hostPath", "source": None}}, {"model": {"kind": "hostPath", "source": "/data/m"}}),
    "render-model-emptydir": ({"model": {"kind": "emptyDir", "source": None}}, {}),
    "render-cache-claim-size": ({"cache": {"kind": "pvc", "source": None}},
                                {"cache": {"kind": "pvc", "source": None, "sizeGiB": 200}}),
    "render-cache-ephemeral": ({"cache": {"kind": "emptyDir", "source": None}}, {}),
    "render-hostpath-cache-owner": ({"cache": {"kind": "hostPath", "source": "/var/cache/k3"}}, {}),
}


def rules_for(storage: dict, target: str = "kubernetes") -> dict:
    launch, _, _ = build_launch(preset_doc("vllm-fixed", {"storage": storage}))
    return {f.rule: f for f in render_findings(launch, target)}


def test_every_render_rule_has_cases():
    assert set(RENDER_CASES) == {r.id for r in of_family("render")}


@pytest.mark.parametrize("rule_id", sorted(RENDER_CASES))
def test_render_rule_fires_and_stays_quiet(rule_id):
    fires, quiet = RENDER_CASES[rule_id]
    f = rules_for(fires)
    assert rule_id in f and f[rule_id].severity == RULES[rule_id].severity
    assert f[rule_id].field.startswith("spec.storage.") and f[rule_id].source == RULES[rule_id].source
    assert rule_id not in rules_for(quiet)
    assert rules_for(fires, "argv") == {} and rules_for(fires, "launch") == {}   # they mount nothing


def test_hostpath_owner_only_for_kubernetes():
    assert "render-hostpath-cache-owner" not in rules_for({"cache": {"kind": "hostPath", "source": "/c"}}, "docker")


def test_render_package_reexports_the_registry_function():
    from gpustack_k3.render import checks

    assert checks.render_findings is render_findings
