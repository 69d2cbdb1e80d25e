"""The operator follows the model's config.json the resource carries (spec.model.configJSON, issue 36): the CRD
admits it (fieldValidation=Strict, as kubectl sends), the plan in status is the config's, and a path the operator
cannot read (spec.model.config) is Invalid naming the field and the way out (docs/design/011-model-config.md)."""
import copy

import pytest
from operator_helpers import NS, G, P, V, preset_resource, status_of, wait_for


pytestmark = pytest.mark.operator
PRESET = "qwen3-30b-a3b-b300"


def preset(name):
    return preset_resource(PRESET, name)


def test_an_uncatalogued_model_deploys_from_the_config_the_resource_carries(emu, kube, project_operator):
    co, _, _ = kube
    project_operator()
    created = co.create_namespaced_custom_object(G, V, NS, P, preset("qwen"), field_validation="Strict")
    assert created["spec"]["model"]["configJSON"] == preset("x")["spec"]["model"]["configJSON"]   # nothing pruned
    st = wait_for(lambda: (s := status_of(co, "qwen")).get("phase") == "Deploying" and s, timeout=30,
                  what="Deploying")
    assert next(c for c in st["conditions"] if c["type"] == "Valid")["status"] == "True"
    assert st["plan"]["maxModelLen"] == 40960                  # the config's max_position_embeddings
    assert st["plan"]["kvTokens"] > 0


def test_a_config_path_in_a_resource_is_invalid_naming_the_way_out(emu, kube, project_operator):
    co, _, _ = kube
    project_operator()
    doc = preset("qwen-path")
    del doc["spec"]["model"]["configJSON"]
    doc["spec"]["model"]["config"] = "/home/me/Qwen3-30B-A3B"
    co.create_namespaced_custom_object(G, V, NS, P, copy.deepcopy(doc), field_validation="Strict")
    st = wait_for(lambda: (s := status_of(co, "qwen-path")).get("phase") == "Invalid" and s, timeout=30,
                  what="Invalid")
    valid = next(c for c in st["conditions"] if c["type"] == "Valid")
    assert "spec.model.config" in valid["message"]
    assert emu.objects("apps/v1/deployments", NS) == []
