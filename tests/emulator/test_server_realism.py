"""The emulator stores objects as a real API server does, where the difference hid operator bugs: status counts of
0 left out, quantities in canonical form, defaults filled in, custom resources pruned and type-checked against
their CRD, and RBAC enforced for a ServiceAccount's token (the chart's rules from manifests/install.yaml)."""
import json
import pathlib

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support import k8s_semantics as sem

ROOT = pathlib.Path(__file__).resolve().parents[2]
G, V, P = "k3.gpustack.ai", "v1alpha1", "k3deployments"


def deployment(name, **spec):
    container = {"name": "engine", "image": "vllm/vllm-openai:v0.33.0", "ports": [{"containerPort": 8000}],
                 "readinessProbe": {"httpGet": {"path": "/health", "port": 8000}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
                     **spec}}


def raw_post(api, path, body):
    return api.call_api(*api.param_serialize("POST", path, body=body, header_params={"Content-Type": "application/json"}))


# ----------------------------------------------------------------------------- status counts

def test_zero_status_counts_are_left_out_as_the_go_types_say(api):
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("d"))
    apps.patch_namespaced_deployment_status("d", "default", {"status": {
        "observedGeneration": 2, "replicas": 1, "updatedReplicas": 0, "readyReplicas": 1, "availableReplicas": 0,
        "unavailableReplicas": 1}})
    raw = json.loads(api.call_api(*api.param_serialize("GET", "/apis/apps/v1/namespaces/default/deployments/d")).read())
    assert raw["status"] == {"observedGeneration": 2, "replicas": 1, "readyReplicas": 1, "unavailableReplicas": 1}
    sts = {**deployment("s", serviceName="s"), "kind": "StatefulSet"}
    apps.create_namespaced_stateful_set("default", sts)
    apps.patch_namespaced_stateful_set_status("s", "default", {"status": {"observedGeneration": 1,
                                                                          "updatedReplicas": 0}})
    raw = json.loads(api.call_api(*api.param_serialize("GET", "/apis/apps/v1/namespaces/default/statefulsets/s")).read())
    assert raw["status"] == {"observedGeneration": 1, "replicas": 0, "availableReplicas": 0}   # never omitted


# ----------------------------------------------------------------------------- quantities

@pytest.mark.parametrize("given,stored", [
    (8, "8"), (0.5, "500m"), ("1024Mi", "1Gi"), ("1536Mi", "1536Mi"), ("2000", "2k"), ("1000m", "1"),
    ("0.5Gi", "512Mi"), ("1e3", "1e3"), ("100Ki", "100Ki"), ("0.5Ki", "512"), ("1.5", "1500m"), ("0", "0"),
    ("1024Gi", "1Ti"), ("1500", "1500"), ("0.0000000001", "1n")])
def test_quantities_are_stored_in_canonical_form(given, stored):
    assert sem.canonical_quantity(given) == stored


def test_quantities_over_http_and_a_non_quantity_is_422(api):
    apps = client.AppsV1Api(api)
    dep = deployment("q")
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": 0.5, "ephemeral-storage": "0.5Gi"}}
    assert raw_post(api, "/apis/apps/v1/namespaces/default/deployments", dep).status == 201
    res = apps.read_namespaced_deployment("q", "default").spec.template.spec.containers[0].resources
    assert res.limits == {"cpu": "1", "memory": "1Gi"} and res.requests == {"cpu": "500m", "ephemeral-storage": "512Mi"}
    bad = deployment("bad")
    bad["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"memory": "lots"}}
    resp = raw_post(api, "/apis/apps/v1/namespaces/default/deployments", bad)   # raw: no exception, the answer
    assert resp.status == 422 and "quantities must match the regular expression" in resp.read().decode()


# ----------------------------------------------------------------------------- defaults

def test_builtin_kinds_get_the_servers_defaults(api):
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    d = apps.create_namespaced_deployment("default", deployment("d"))
    assert d.spec.replicas == 1 and d.spec.revision_history_limit == 10 and d.spec.progress_deadline_seconds == 600
    assert d.spec.strategy.type == "RollingUpdate" and d.spec.strategy.rolling_update.max_surge == "25%"
    pod = d.spec.template.spec
    assert (pod.restart_policy, pod.dns_policy, pod.termination_grace_period_seconds, pod.scheduler_name) == \
        ("Always", "ClusterFirst", 30, "default-scheduler")
    c = pod.containers[0]
    assert (c.image_pull_policy, c.termination_message_path, c.ports[0].protocol) == \
        ("IfNotPresent", "/dev/termination-log", "TCP")
    assert (c.readiness_probe.period_seconds, c.readiness_probe.timeout_seconds, c.readiness_probe.http_get.scheme) == \
        (10, 1, "HTTP")
    recreate = apps.create_namespaced_deployment("default", deployment("r", strategy={"type": "Recreate"}))
    assert recreate.spec.strategy.rolling_update is None
    latest = deployment("l")
    latest["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox"
    assert apps.create_namespaced_deployment("default", latest).spec.template.spec.containers[0].image_pull_policy == \
        "Always"
    svc = core.create_namespaced_service("default", {"metadata": {"name": "s"}, "spec": {
        "selector": {"app": "d"}, "ports": [{"name": "http", "port": 8000}]}})
    assert svc.spec.type == "ClusterIP" and svc.spec.cluster_ip.startswith("10.96.") and svc.spec.session_affinity == "None"
    assert (svc.spec.ports[0].protocol, svc.spec.ports[0].target_port) == ("TCP", 8000)
    net = client.NetworkingV1Api(api).create_namespaced_network_policy("default", {"metadata": {"name": "n"}, "spec": {
        "podSelector": {}, "ingress": [{"ports": [{"port": 8000}]}]}})
    assert net.spec.policy_types == ["Ingress"] and net.spec.ingress[0].ports[0].protocol == "TCP"


# ----------------------------------------------------------------------------- the CRD's structural schema

def k3(name, **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "K3Deployment", "metadata": {"name": name},
            "spec": {"engine": {"name": "vllm"}, **spec}}


def test_unknown_fields_are_pruned_with_a_warning_and_refused_when_strict(api):
    co = client.CustomObjectsApi(api)
    body = k3("a", paralel={"tp": 8}, parallel={"tp": 8, "tpp": 1})
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(G, V, "default", P, body, field_validation="Strict")
    assert e.value.status == 400 and 'unknown field \\"spec.paralel\\"' in e.value.body
    resp = api.call_api(*api.param_serialize("POST", f"/apis/{G}/{V}/namespaces/default/{P}", body=body,
                                             header_params={"Content-Type": "application/json"}))
    assert resp.status == 201
    stored = json.loads(resp.read())
    assert stored["spec"] == {"engine": {"name": "vllm"}, "parallel": {"tp": 8}}
    warnings = resp.headers.getlist("Warning") if hasattr(resp.headers, "getlist") else [resp.headers["Warning"]]
    assert any('unknown field \\"spec.paralel\\"' in w for w in warnings), warnings
    # the status is pruned the same way: a field the status schema does not declare is gone
    r = co.patch_namespaced_custom_object_status(G, V, "default", P, "a", {"status": {"phase": "Ready", "extra": 1}})
    assert r["status"] == {"phase": "Ready"}


def test_wrong_types_are_422_naming_the_field_and_nulls_of_non_nullable_fields_are_dropped(api):
    co = client.CustomObjectsApi(api)
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(G, V, "default", P, k3("b", parallel={"tp": "8"}))
    assert e.value.status == 422
    body = json.loads(e.value.body)
    assert body["reason"] == "Invalid" and body["details"]["causes"][0]["field"] == "spec.parallel.tp"
    assert "spec.parallel.tp in body must be of type integer" in body["message"]
    r = co.create_namespaced_custom_object(G, V, "default", P, k3("c", env={"A": "1"}, parallel={"tp": None}))
    assert r["spec"]["parallel"] == {"tp": None}                     # tp is nullable: kept
    r = co.create_namespaced_custom_object(G, V, "default", P, {**k3("d"), "spec": {"engine": {"name": "vllm"},
                                                                                       "env": None}})
    assert "env" not in r["spec"]                                     # env is not: dropped


def test_schema_defaults_are_filled_in():
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": 1}, "mode": {"type": "string", "default": "fast"}}}}}
    stored, pruned = sem.structural(schema, {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"},
                                             "spec": {"mode": "slow", "other": 1}})
    assert stored["spec"] == {"mode": "slow", "replicas": 1} and pruned == ["spec.other"]


# ----------------------------------------------------------------------------- RBAC

@pytest.fixture
def installed(emu):
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests" / "install.yaml").read_text()) if d]
    emu.install(docs)
    emu.create_namespace("llm")
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
    token = emu.service_account_token(sa["namespace"], sa["name"])
    api = emu.api_client("operator/1", token=token)
    yield api, f"system:serviceaccount:{sa['namespace']}:{sa['name']}"
    api.close()


def test_rbac_of_install_yaml_is_enforced_for_the_operators_service_account(installed):
    api, user = installed
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    assert apps.list_namespaced_deployment("llm").items == []                       # granted
    assert core.list_pod_for_all_namespaces().items == []                          # cluster-wide: ClusterRoleBinding
    apps.create_namespaced_deployment("llm", deployment("d"))
    with pytest.raises(ApiException) as e:
        core.create_namespaced_secret("llm", {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    assert e.value.status == 403
    assert json.loads(e.value.body)["message"] == (
        f'secrets is forbidden: User "{user}" cannot create resource "secrets" in API group "" in the namespace "llm"')
    with pytest.raises(ApiException) as e:
        client.CoordinationV1Api(api).create_namespaced_lease("llm", {"metadata": {"name": "l"}, "spec": {}})
    assert e.value.status == 403 and "coordination.k8s.io" in e.value.body       # leases: only with leaderElect
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment_status("d", "llm", {"status": {"replicas": 1}})
    assert e.value.status == 403 and 'cannot patch resource \\"deployments/status\\"' in e.value.body


def test_role_bindings_grant_only_in_their_namespace_and_unknown_tokens_are_401(emu):
    emu.create_namespace("a")
    emu.create_namespace("b")
    admin = client.RbacAuthorizationV1Api(emu.api_client())
    admin.create_namespaced_role("a", {"metadata": {"name": "reader"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
    admin.create_namespaced_role_binding("a", {"metadata": {"name": "reader"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "app", "namespace": "a"}]})
    core = client.CoreV1Api(emu.api_client(token=emu.service_account_token("a", "app")))
    assert core.list_namespaced_config_map("a").items == []
    for call in (lambda: core.list_namespaced_config_map("b"), lambda: core.list_config_map_for_all_namespaces(),
                 lambda: core.create_namespaced_config_map("a", {"metadata": {"name": "x"}})):
        with pytest.raises(ApiException) as e:
            call()
        assert e.value.status == 403
    with pytest.raises(ApiException) as e:
        client.CoreV1Api(emu.api_client(token="nobody")).list_namespaced_config_map("a")
    assert e.value.status == 401


@pytest.mark.parametrize("rule,attrs,allowed", [
    ({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
     sem.Attributes("get", "", "pods", "log", "llm", "p"), True),
    ({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
     sem.Attributes("get", "", "pods", "log", "llm", "p"), False),
    ({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
     sem.Attributes("delete", "apps", "deployments", None, "llm", "d"), True),
    ({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"], "resourceNames": ["d"]},
     sem.Attributes("list", "apps", "deployments", None, "llm", None), False),
])
def test_policy_rules(rule, attrs, allowed):
    assert sem.rule_allows(rule, attrs) is allowed
