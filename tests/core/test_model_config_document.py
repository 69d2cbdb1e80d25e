"""A document's own model config (``spec.model.config`` / ``spec.model.configJSON``, issue 36, docs/design/011):
the schema admits and checks it, the operator builds with the architecture the resource carries (it cannot read a
path), and a preset carries one inline."""
from __future__ import annotations

import copy

import pytest
from pydantic import ValidationError

from gpustack_k3.api.v1alpha1.spec import DeploymentDocument
from gpustack_k3.catalog import load_catalog
from gpustack_k3.core.model_config import INLINE_SOURCE, document_arch
from gpustack_k3.operator import hooks
from tests.core.test_model_config_plan import QWEN3_1_7B, QWEN3_30B_A3B


def _doc(model: dict, *, tp: int = 1, gpus: int = 1, roles: list | None = None) -> dict:
    spec = {"engine": {"name": "vllm", "version": "0.33.0"},
            "model": {"name": "qwen3-1.7b", "path": "/models/Qwen3-1.7B", **model},
            "hardware": {"gpuType": "b300", "gpuCount": gpus}, "parallel": {"tp": tp}}
    if roles is not None:
        spec["roles"] = roles
    return {"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment",
            "metadata": {"name": "q", "namespace": "ns"}, "spec": spec}


# ------------------------------------------------------------------ schema

def test_the_schema_admits_a_path_or_an_inline_config():
    d = DeploymentDocument.model_validate(_doc({"config": "models/Qwen3-1.7B"}))
    assert d.spec.model.config == "models/Qwen3-1.7B" and d.spec.model.configJSON is None
    d = DeploymentDocument.model_validate(_doc({"configJSON": QWEN3_1_7B}))
    a = document_arch(d.spec.model)
    assert a.source == INLINE_SOURCE and a.layers == 28 and a.max_positions == 40960 and a.raw == QWEN3_1_7B


@pytest.mark.parametrize("bad, says", [
    ({"num_hidden_layers": -1, "hidden_size": 8}, "num_hidden_layers must be a non-negative whole number"),
    ({"model_type": "qwen3"}, "none of num_hidden_layers / hidden_size"),
    ({"num_hidden_layers": 2, "num_attention_heads": 0}, "num_attention_heads must be positive"),
])
def test_an_unusable_inline_config_is_refused_naming_the_field(bad, says):
    from gpustack_k3.core.model_config import document_arch
    from gpustack_k3.errors import InputError
    from gpustack_k3.operator import hooks

    doc = DeploymentDocument.model_validate(_doc({"configJSON": bad}))      # the schema holds any JSON object
    with pytest.raises(InputError) as e:                                    # the one reader refuses it
        document_arch(doc.spec.model)
    assert e.value.where == "spec.model.configJSON" and says in str(e.value)
    found = hooks.validate(_doc({"configJSON": bad}))                        # the operator: Invalid, naming it
    assert [(f.rule, f.severity, f.field) for f in found] == [("spec.schema", "error", "spec.model.configJSON")]
    assert says in found[0].message


def test_a_path_and_an_inline_config_together_are_refused_naming_both():
    with pytest.raises(ValidationError) as e:
        DeploymentDocument.model_validate(_doc({"config": "/tmp/c.json", "configJSON": QWEN3_1_7B}))
    assert "config and configJSON both given" in str(e.value)


def test_no_config_gives_no_document_architecture():
    assert document_arch(DeploymentDocument.model_validate(_doc({})).spec.model) is None


# ------------------------------------------------------------------ operator (operator/hooks.py)

def test_the_operator_builds_an_uncatalogued_model_from_the_config_the_resource_carries():
    bare = _doc({})
    assert [f.rule for f in hooks.validate(bare)] == ["unknown-catalog-entry"]    # today: nothing to plan from
    doc = _doc({"configJSON": QWEN3_1_7B})
    assert not [f for f in hooks.validate(doc) if f.severity == "error"]
    p = hooks.plan(doc)
    assert p.maxModelLen == 40960                   # the config's max_position_embeddings
    assert p.kvTokens > 0 and p.engine == "vllm"
    objs = hooks.render(doc)
    assert any(o["kind"] in ("Deployment", "StatefulSet") for o in objs)


def test_the_operator_follows_the_inline_config_over_the_catalog_entry_of_the_same_name():
    """A resource naming kimi-k3 whose configJSON is Qwen3-1.7B's: the plan is the config's, not Kimi-K3's
    calibrated 1,000,000-token figures (the same rule as the CLI's --model-config)."""
    doc = _doc({"name": "kimi-k3", "path": "/models/Kimi-K3", "configJSON": QWEN3_1_7B}, tp=8, gpus=8)
    doc["spec"]["engine"]["version"] = "kimi-k3"
    without = copy.deepcopy(doc)
    del without["spec"]["model"]["configJSON"]
    assert hooks.plan(without).maxModelLen != 40960
    assert hooks.plan(doc).maxModelLen == 40960


def test_the_operator_refuses_a_path_it_cannot_read_naming_the_way_out():
    found = hooks.validate(_doc({"config": "/home/me/Qwen3-1.7B"}))
    assert [(f.severity, f.field) for f in found] == [("error", "spec.model.config")]
    assert "spec.model.configJSON" in found[0].fix


def test_the_operator_renders_a_topology_with_the_inline_config():
    roles = [{"name": "serve", "role": "serve", "gpusPerPod": 8, "parallel": {"tp": 1, "dp": 8, "expertParallel": True}}]
    doc = _doc({"name": "qwen3-30b-a3b", "path": "/models/Qwen3-30B-A3B", "configJSON": QWEN3_30B_A3B},
               gpus=8, roles=roles)
    del doc["spec"]["parallel"]
    assert not [f for f in hooks.validate(doc) if f.severity == "error"]
    objs = hooks.render(doc)
    assert [o for o in objs if o["kind"] == "LeaderWorkerSet"]


# ------------------------------------------------------------------ presets

def _presets_with_config():
    cat = load_catalog()
    return [n for n, p in cat.presets.items() if (p.document["spec"].get("model") or {}).get("configJSON")]


def test_a_preset_carries_an_uncatalogued_model_config_inline():
    names = _presets_with_config()
    assert names, "no preset carries spec.model.configJSON"
    cat = load_catalog()
    for name in names:
        doc = copy.deepcopy(cat.presets[name].document)
        model = DeploymentDocument.model_validate(doc).spec.model
        assert model.name not in cat.models                     # a model the catalog does not know
        assert not [f for f in hooks.validate(doc) if f.severity == "error"], name
        arch = document_arch(model)
        assert hooks.plan(doc) is None or hooks.plan(doc).maxModelLen <= arch.max_positions


# ------------------------------------------------------------------ the CRD (generated from api/ by tools.generate)

def test_the_crd_admits_the_fields_and_a_model_its_inline_config_describes():
    from gpustack_k3.crd.manifest import crd_manifest
    from tests.support import celeval

    crd = crd_manifest()
    model = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["model"]
    assert model["properties"]["configJSON"]["x-kubernetes-preserve-unknown-fields"] is True
    assert model["properties"]["config"]["type"] == "string"
    refused = [r for r in celeval.evaluate(crd, _doc({})) if r.error is None]
    assert [r.field_path for r in refused] == [".model.name"]     # an uncatalogued name alone: refused, as by validate
    assert celeval.evaluate(crd, _doc({"configJSON": QWEN3_1_7B})) == []
    assert celeval.evaluate(crd, _doc({"configJSON": QWEN3_30B_A3B, "name": "qwen3-30b-a3b"}, tp=1)) == []
