"""Shared helpers for the render tests: presets, edge-case documents, launch specs."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from gpustack_k3.api.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
PRESETS = list(load_catalog().presets)


def preset_data(name: str) -> dict:
    return copy.deepcopy(load_catalog().presets[name].document)


def doc_of(data: dict) -> DeploymentDocument:
    return DeploymentDocument.model_validate(data)


def launch_of(data: dict):
    from gpustack_k3.render.targets import prepare

    return prepare(doc_of(data))[0]


def edge_documents() -> dict[str, dict]:
    """Documents exercising what the presets do not: per-pod cache claim (StatefulSet), hostPath
    volumes, emptyDir cache, secret env, a namespace, custom placement."""
    out = {}
    d = preset_data("vllm-fixed")
    d["metadata"]["name"] = "k3-statefulset"
    d["spec"]["storage"] = {"model": {"kind": "pvc", "source": "weights"},
                            "cache": {"kind": "pvc", "sizeGiB": 200}, "shmSizeGiB": 32}
    d["spec"]["secretEnv"] = [{"name": "HF_TOKEN", "secretName": "hub-token", "key": "token"}]
    out["statefulset-secret"] = d
    d = preset_data("sglang-fixed")
    d["metadata"]["name"] = "k3-hostpath"
    d["metadata"]["namespace"] = "inference"
    d["spec"]["storage"] = {"model": {"kind": "hostPath", "source": "/data/models"},
                            "cache": {"kind": "hostPath", "source": "/data/k3-cache"}}
    d["spec"]["placement"] = {"nodeSelector": {"pool": "b300"},
                              "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "llm",
                                               "effect": "NoSchedule"}]}
    out["hostpath-placement"] = d
    d = preset_data("vllm-dcp-no-spec")
    d["metadata"]["name"] = "k3-ephemeral-cache"
    d["spec"]["storage"] = {"cache": {"kind": "emptyDir", "sizeGiB": 100}}
    out["emptydir-cache"] = d
    return out


EDGES = edge_documents()


@pytest.fixture(params=PRESETS)
def preset_name(request):
    return request.param
