"""Rule model-name-contradicts-source (gpustack_k3/core/rules/model_identity.py): spec.model.name is a label; the
engine serves spec.model.source and drafts with spec.speculative.draftModel. A source or draft that is another
catalog model's is refused naming both fields, by validate and by the CRD's CEL alike."""
from __future__ import annotations

import copy

import pytest

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.rules import validate
from gpustack_k3.crd.manifest import crd_manifest
from tests.support import celeval

RULE = "model-name-contradicts-source"


def preset(name: str) -> dict:
    return copy.deepcopy(load_catalog().presets[name].document)


def found(doc: dict):
    return [f for f in validate(DeploymentDocument.model_validate(doc)) if f.rule == RULE]


@pytest.fixture(scope="module")
def crd():
    return crd_manifest()


def cel_refuses(crd, doc) -> bool:
    return any(RULE in r.message for r in celeval.evaluate(crd, doc) if r.error is None)


def test_a_source_of_another_catalog_model_is_refused_naming_both_fields(crd):
    doc = preset("vllm-fixed")
    assert not found(doc) and not cel_refuses(crd, doc)
    doc["spec"]["model"]["source"] = "deepseek-ai/DeepSeek-V4.1-Flash"
    (f,) = found(doc)
    assert f.severity == "error" and f.field == "spec.model.name"
    assert "spec.model.source" in f.message and "'deepseek-v4.1-flash'" in f.message
    assert "deepseek-v4.1-flash" in f.fix
    assert cel_refuses(crd, doc)


def test_a_draft_of_another_catalog_model_is_a_warning_not_a_refusal(crd):
    """The engines accept any draft at start-up (the engine oracle accepts Kimi-K3's DSpark draft on a
    DeepSeek-V4.1-Flash line on vLLM 0.33.0): a warning, never a refusal, and the CRD admits it."""
    doc = preset("vllm-fixed")
    doc["spec"]["model"] = {"name": "smollm2-135m", "path": "/models/SmolLM2-135M-Instruct"}
    doc["spec"]["engine"]["version"] = "0.33.0"
    assert not found(preset("vllm-fixed"))
    assert not found(doc)
    (f,) = [f for f in validate(DeploymentDocument.model_validate(doc)) if f.rule == "model-draft-of-another-model"]
    assert f.severity == "warning" and f.field == "spec.speculative.draftModel"
    assert "'kimi-k3'" in f.message and "smollm2-135m" in f.message
    assert not cel_refuses(crd, doc)


@pytest.mark.parametrize("model", [
    {"name": "kimi-k3", "source": "moonshotai/Kimi-K3"},                  # its own source
    {"name": "kimi-k3", "source": "myorg/Kimi-K3-finetune"},              # a source the catalog does not know
    {"name": "kimi-k3"},                                                  # no source
])
def test_no_contradiction_no_finding(crd, model):
    doc = preset("vllm-fixed")
    doc["spec"]["model"] = {**doc["spec"]["model"], **model}
    if "source" not in model:
        doc["spec"]["model"].pop("source", None)
    assert not found(doc) and not cel_refuses(crd, doc)
