"""The operator with the project's own validation, rendering and plan (gpustack_k3.operator.hooks)
against the emulator: a preset deploys, a field the CRD does not declare is pruned by the API server, a rule
error is refused."""
import copy

import pytest
from kubernetes.client.rest import ApiException
from operator_helpers import NS, G, P, V, preset_resource, status_of, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.operator import hooks
from tests.support.waiting import wait_idle

pytestmark = pytest.mark.operator
PRESET = "vllm-fixed"


def preset(name):
    return preset_resource(PRESET, name)


def test_preset_deploys_every_rendered_object_owned(emu, kube, project_operator):
    co, _, _ = kube
    op = project_operator()
    cr = co.create_namespaced_custom_object(G, V, NS, P, preset("kimi"))
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Deploying" and s, timeout=30, what="Deploying")
    rendered = hooks.render(preset("kimi"))
    for obj in rendered:
        res = {"Deployment": "apps/v1/deployments", "StatefulSet": "apps/v1/statefulsets", "Service": "v1/services",
               "ConfigMap": "v1/configmaps", "NetworkPolicy": "networking.k8s.io/v1/networkpolicies"}[obj["kind"]]
        live = emu.get(res, NS, obj["metadata"]["name"])
        assert live is not None, obj["kind"]
        assert live["metadata"]["ownerReferences"][0]["uid"] == cr["metadata"]["uid"]
        assert live["metadata"]["labels"][api.LABEL_DEPLOYMENT] == "kimi"
    assert st["plan"]["kvTokens"] > 0 and st["plan"]["maxConcurrency"] > 0
    assert st["endpoint"].startswith(f"http://kimi.{NS}.svc:")
    assert any("fp8-kv-no-scales" in w for w in st.get("warnings", []))
    assert wait_idle(op, 15)
    emu.reset_counters()
    for key in op.caches.crs.list_keys():
        op.queue.add(key)
    assert wait_idle(op, 15)
    assert emu.writes(agent="gpustack-k3-operator/") == 0  # the project's objects compare equal after apply


def test_a_field_the_crd_does_not_declare_never_reaches_the_operator(emu, kube, project_operator):
    """The API server prunes what the CRD's schema does not declare (with a Warning; a request with
    fieldValidation=Strict, as kubectl sends, is refused), so a typo'd field never reaches the operator and the
    rest of the spec deploys. The operator's own schema findings (spec.schema) only see what the CRD admits."""
    co, _, _ = kube
    project_operator()
    doc = preset("typo")
    doc["spec"]["paralel"] = {"tp": 8}
    with pytest.raises(ApiException) as refused:
        co.create_namespaced_custom_object(G, V, NS, P, doc, field_validation="Strict")
    assert refused.value.status == 400 and 'unknown field \\"spec.paralel\\"' in refused.value.body
    created = co.create_namespaced_custom_object(G, V, NS, P, doc)
    assert "paralel" not in created["spec"] and created["spec"]["parallel"] == preset("x")["spec"]["parallel"]
    st = wait_for(lambda: (s := status_of(co, "typo")).get("phase") == "Deploying" and s, timeout=30,
                  what="Deploying")
    assert next(c for c in st["conditions"] if c["type"] == "Valid")["status"] == "True"


def test_rule_error_is_refused_with_its_rule(emu, kube, project_operator):
    co, _, _ = kube
    project_operator()
    doc = preset("tp3")
    doc["spec"]["parallel"]["tp"] = 3
    expected = [f for f in hooks.validate(copy.deepcopy(doc)) if f.severity == "error"]
    assert expected, "the rule catalog must refuse tp=3 on 8 GPUs for this test to mean anything"
    co.create_namespaced_custom_object(G, V, NS, P, doc)
    st = wait_for(lambda: (s := status_of(co, "tp3")).get("phase") == "Invalid" and s, timeout=30, what="Invalid")
    valid = next(c for c in st["conditions"] if c["type"] == "Valid")
    for f in expected:
        assert f"[{f.rule}] {f.field}" in valid["message"]
    assert emu.objects("apps/v1/deployments", NS) == []


def _operator_writes(emu) -> dict[str, int]:
    return {f"{r['verb']} {r['resource']}": r["count"] for r in emu.writes_table()
            if r["agent"].startswith("gpustack-k3-operator/")}


def test_a_create_costs_its_objects_one_status_and_one_event(emu, kube, project_operator):
    """The write budget of issue 6 (<= 4 per create): Service + Deployment + status + Event, nothing else."""
    co, _, _ = kube
    op = project_operator()
    co.create_namespaced_custom_object(G, V, NS, P, preset("kimi"))
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", timeout=30, what="Deploying")
    assert wait_idle(op, 15)
    assert _operator_writes(emu) == {"apply deployments": 1, "apply services": 1, "apply k3deployments/status": 1,
                                     "create events": 1}


def test_network_policy_is_opt_in_and_pruned_when_turned_off(emu, kube, project_operator):
    co, _, _ = kube
    op = project_operator()
    doc = preset("fenced")
    doc["spec"].setdefault("serving", {})["networkPolicy"] = True
    co.create_namespaced_custom_object(G, V, NS, P, doc)
    pol = wait_for(lambda: emu.get("networking.k8s.io/v1/networkpolicies", NS, "fenced"), timeout=30,
                   what="NetworkPolicy")
    assert pol["spec"]["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8000}]}]
    assert pol["metadata"]["ownerReferences"][0]["name"] == "fenced"
    co.patch_namespaced_custom_object(G, V, NS, P, "fenced", {"spec": {"serving": {"networkPolicy": False}}})
    wait_for(lambda: emu.get("networking.k8s.io/v1/networkpolicies", NS, "fenced") is None, timeout=30,
             what="NetworkPolicy pruned")
    assert wait_idle(op, 15)
    assert emu.get("apps/v1/deployments", NS, "fenced") is not None
