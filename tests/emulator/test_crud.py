"""The official kubernetes client (v37) against the emulator over HTTP: CRUD semantics."""
import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

G, V, P = "example.com", "v1", "widgets"   # schemaless (conftest)


def cr(name, **spec):
    return {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": name, "labels": {"tier": "a"}},
            "spec": spec or {"engine": "vllm"}}


def deployment(name, image="img:1", env=None, labels=None):
    c = {"name": "engine", "image": image}
    if env is not None:
        c["env"] = env
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [c]}}}}


def test_create_returns_201_with_server_metadata(api):
    co = client.CustomObjectsApi(api)
    r = co.create_namespaced_custom_object(G, V, "default", P, {**cr("a"), "status": {"phase": "Fake"}})
    m = r["metadata"]
    assert m["uid"] and m["generation"] == 1 and m["creationTimestamp"].endswith("Z")
    assert int(m["resourceVersion"]) > 0 and m["namespace"] == "default"
    assert "status" not in r  # status subresource: create ignores status
    raw = api.call_api(*api.param_serialize("POST", "/apis/example.com/v1/namespaces/default/widgets",
                                            body=cr("b"), header_params={"Content-Type": "application/json"}))
    assert raw.status == 201


def test_conflicts_and_not_found(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    assert e.value.status == 409 and "AlreadyExists" in e.value.body
    with pytest.raises(ApiException) as e:
        co.get_namespaced_custom_object(G, V, "default", P, "missing")
    assert e.value.status == 404
    with pytest.raises(ApiException) as e:
        co.create_namespaced_custom_object(G, V, "nowhere", P, cr("a"))
    assert e.value.status == 404 and "namespaces" in e.value.body


def test_generation_bumps_on_spec_only_and_status_isolated(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a", replicas=1))
    r = co.patch_namespaced_custom_object_status(G, V, "default", P, "a",
                                                 {"spec": {"replicas": 99}, "status": {"phase": "Ready"}})
    assert r["spec"]["replicas"] == 1 and r["status"]["phase"] == "Ready" and r["metadata"]["generation"] == 1
    r = co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {"replicas": 2}, "status": {"phase": "X"}})
    assert r["spec"]["replicas"] == 2 and r["status"]["phase"] == "Ready" and r["metadata"]["generation"] == 2
    r = co.patch_namespaced_custom_object(G, V, "default", P, "a", {"metadata": {"labels": {"x": "y"}}})
    assert r["metadata"]["generation"] == 2
    rv = r["metadata"]["resourceVersion"]
    r = co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {"replicas": 2}})
    assert r["metadata"]["resourceVersion"] == rv  # a no-op write does not bump the resourceVersion


def test_put_requires_and_checks_resource_version(api):
    co = client.CustomObjectsApi(api)
    obj = co.create_namespaced_custom_object(G, V, "default", P, cr("a", replicas=1))
    obj["spec"]["replicas"] = 3
    new = co.replace_namespaced_custom_object(G, V, "default", P, "a", obj)
    assert new["spec"]["replicas"] == 3 and new["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as e:
        co.replace_namespaced_custom_object(G, V, "default", P, "a", obj)  # stale resourceVersion
    assert e.value.status == 409
    obj["metadata"].pop("resourceVersion")
    with pytest.raises(ApiException) as e:
        co.replace_namespaced_custom_object(G, V, "default", P, "a", obj)
    assert e.value.status == 422


def test_merge_patch_precondition_and_json_patch(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a", replicas=1))
    with pytest.raises(ApiException) as e:
        co.patch_namespaced_custom_object(G, V, "default", P, "a",
                                          {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 5}})
    assert e.value.status == 409
    r = co.patch_namespaced_custom_object(G, V, "default", P, "a", [{"op": "replace", "path": "/spec/replicas", "value": 4}],
                                          _content_type="application/json-patch+json")
    assert r["spec"]["replicas"] == 4
    with pytest.raises(ApiException) as e:  # strategic merge is refused for custom resources, as by the API
        co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {}},
                                          _content_type="application/strategic-merge-patch+json")
    assert e.value.status == 415


def test_typed_deployment_strategic_merge_keeps_other_containers(api):
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment("default", deployment("d", env=[{"name": "A", "value": "1"}]))
    d = apps.patch_namespaced_deployment("d", "default", {"spec": {"template": {"spec": {"containers": [
        {"name": "engine", "env": [{"name": "B", "value": "2"}]}]}}}})
    c = d.spec.template.spec.containers[0]
    assert c.image == "img:1" and sorted(e.name for e in c.env) == ["A", "B"]
    assert isinstance(d, client.V1Deployment)
    status = apps.delete_namespaced_deployment("d", "default")
    assert status["status"] == "Success"  # deployments answer a Status, not the object


def test_server_side_apply_create_update_prune_and_conflict(api):
    apps = client.AppsV1Api(api)
    ssa = dict(field_manager="gpustack-k3", force=True, _content_type="application/apply-patch+yaml")
    d = apps.patch_namespaced_deployment("d", "default", deployment("d", env=[{"name": "A", "value": "1"},
                                                                               {"name": "B", "value": "2"}]), **ssa)
    assert d.metadata.uid and d.metadata.managed_fields[0].manager == "gpustack-k3"
    raw = api.call_api(*api.param_serialize(
        "PATCH", "/apis/apps/v1/namespaces/default/deployments/e", query_params=[("fieldManager", "m")],
        body=deployment("e"), header_params={"Content-Type": "application/apply-patch+yaml"}))
    assert raw.status == 201
    # someone else adds a label; our next apply drops env B: B is removed, their label stays
    apps.patch_namespaced_deployment("d", "default", {"metadata": {"labels": {"team": "x"}}}, field_manager="kubectl")
    d = apps.patch_namespaced_deployment("d", "default", deployment("d", env=[{"name": "A", "value": "1"}]), **ssa)
    assert [e.name for e in d.spec.template.spec.containers[0].env] == ["A"]
    assert d.metadata.labels == {"app": "d", "team": "x"}
    gen = d.metadata.generation
    # applying the same configuration again changes nothing
    d2 = apps.patch_namespaced_deployment("d", "default", deployment("d", env=[{"name": "A", "value": "1"}]), **ssa)
    assert d2.metadata.resource_version == d.metadata.resource_version and d2.metadata.generation == gen
    # a second manager applying a different image conflicts unless forced
    with pytest.raises(ApiException) as e:
        apps.patch_namespaced_deployment("d", "default", deployment("d", image="other"), field_manager="rival",
                                         _content_type="application/apply-patch+yaml")
    assert e.value.status == 409 and "gpustack-k3" in e.value.body
    d3 = apps.patch_namespaced_deployment("d", "default", deployment("d", image="other"), field_manager="rival",
                                          force=True, _content_type="application/apply-patch+yaml")
    assert d3.spec.template.spec.containers[0].image == "other"


def test_apply_without_field_manager_is_rejected(api):
    raw = api.call_api(*api.param_serialize("PATCH", "/apis/apps/v1/namespaces/default/deployments/d",
                                            body=deployment("d"),
                                            header_params={"Content-Type": "application/apply-patch+yaml"}))
    assert raw.status == 400


def test_status_apply_is_isolated(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a", replicas=1))
    r = co.patch_namespaced_custom_object_status(
        G, V, "default", P, "a", {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": "a"},
                                  "spec": {"replicas": 7}, "status": {"phase": "Deploying", "warnings": ["w"]}},
        field_manager="gpustack-k3", force=True, _content_type="application/apply-patch+yaml")
    assert r["spec"]["replicas"] == 1 and r["status"] == {"phase": "Deploying", "warnings": ["w"]}
    r = co.patch_namespaced_custom_object_status(
        G, V, "default", P, "a", {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": "a"},
                                  "status": {"phase": "Ready"}},
        field_manager="gpustack-k3", force=True, _content_type="application/apply-patch+yaml")
    assert r["status"] == {"phase": "Ready"}  # fields we stopped applying are gone


def test_label_and_field_selectors(api):
    core = client.CoreV1Api(api)
    for name, labels in [("p1", {"app": "web", "tier": "a"}), ("p2", {"app": "db"}), ("p3", {"app": "web"})]:
        core.create_namespaced_pod("default", {"metadata": {"name": name, "labels": labels},
                                               "spec": {"containers": [{"name": "c", "image": "i"}]}})
    names = lambda **kw: [p.metadata.name for p in core.list_namespaced_pod("default", **kw).items]
    assert names(label_selector="app=web") == ["p1", "p3"]
    assert names(label_selector="app in (db),!tier") == ["p2"]
    assert names(label_selector="app!=web") == ["p2"]
    assert names(label_selector="tier") == ["p1"]
    assert names(field_selector="metadata.name=p3") == ["p3"]
    lst = core.list_namespaced_pod("default", limit=2)
    assert len(lst.items) == 2 and lst.metadata._continue
    rest = core.list_namespaced_pod("default", limit=2, _continue=lst.metadata._continue)
    assert [p.metadata.name for p in rest.items] == ["p3"]
    assert int(lst.metadata.resource_version) >= 3
    with pytest.raises(ApiException) as e:
        core.list_namespaced_pod("default", label_selector="a=(b")
    assert e.value.status == 400


def test_delete_with_finalizers_and_cascading_gc(api):
    co, apps, core = client.CustomObjectsApi(api), client.AppsV1Api(api), client.CoreV1Api(api)
    owner = co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    ref = {"apiVersion": f"{G}/{V}", "kind": "Widget", "name": "a", "uid": owner["metadata"]["uid"],
           "controller": True, "blockOwnerDeletion": True}
    dep = deployment("d")
    dep["metadata"]["ownerReferences"] = [ref]
    apps.create_namespaced_deployment("default", dep)
    core.create_namespaced_config_map("default", {"metadata": {"name": "c", "ownerReferences": [ref]}, "data": {"k": "v"}})
    core.create_namespaced_config_map("default", {"metadata": {"name": "free"}, "data": {}})
    co.patch_namespaced_custom_object(G, V, "default", P, "a", {"metadata": {"finalizers": ["k3.gpustack.ai/x"]}})
    r = co.delete_namespaced_custom_object(G, V, "default", P, "a")
    assert r["metadata"]["deletionTimestamp"]
    assert apps.read_namespaced_deployment("d", "default")  # owner still exists: no GC
    co.patch_namespaced_custom_object(G, V, "default", P, "a", {"metadata": {"finalizers": None}})
    for fn in (lambda: co.get_namespaced_custom_object(G, V, "default", P, "a"),
               lambda: apps.read_namespaced_deployment("d", "default"),
               lambda: core.read_namespaced_config_map("c", "default")):
        with pytest.raises(ApiException) as e:
            fn()
        assert e.value.status == 404
    assert core.read_namespaced_config_map("free", "default").metadata.name == "free"


def test_orphan_propagation_keeps_dependents(api):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    owner = co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    ref = {"apiVersion": f"{G}/{V}", "kind": "Widget", "name": "a", "uid": owner["metadata"]["uid"]}
    core.create_namespaced_config_map("default", {"metadata": {"name": "c", "ownerReferences": [ref]}})
    co.delete_namespaced_custom_object(G, V, "default", P, "a", propagation_policy="Orphan")
    cm = core.read_namespaced_config_map("c", "default")
    assert not cm.metadata.owner_references


def test_namespaces_events_leases_and_discovery(api):
    core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
    core.create_namespace({"metadata": {"name": "team"}})
    assert "team" in [n.metadata.name for n in core.list_namespace().items]
    assert core.read_namespace("team").metadata.name == "team"
    ev = core.create_namespaced_event("team", {"metadata": {"generateName": "x."}, "reason": "Valid", "message": "m",
                                               "type": "Normal", "involvedObject": {"kind": "Widget", "name": "a"}})
    assert ev.metadata.name.startswith("x.")
    lease = coord.create_namespaced_lease("team", {"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}})
    lease.spec.holder_identity = "you"
    assert coord.replace_namespaced_lease("l", "team", lease).spec.holder_identity == "you"
    core.delete_namespace("team")
    assert core.list_namespaced_event("team").items == []
    dyn = dynamic.DynamicClient(api)
    k3 = dyn.resources.get(api_version="k3.gpustack.ai/v1alpha1", kind="K3Deployment")
    assert (k3.name, k3.namespaced, k3.short_names) == ("k3deployments", True, ["k3dep"]) and "status" in k3.subresources
    assert dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease").namespaced


def test_quantities_come_back_as_strings_for_builtin_types_only(api):
    apps, co = client.AppsV1Api(api), client.CustomObjectsApi(api)
    dep = deployment("q")
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8, "cpu": 0.5},
                                                                     "requests": {"memory": "16Gi"}}
    raw = api.call_api(*api.param_serialize("POST", "/apis/apps/v1/namespaces/default/deployments", body=dep,
                                            header_params={"Content-Type": "application/json"}))
    assert raw.status == 201  # (the typed client refuses numbers client-side; kubectl and SSA send them)
    d = apps.read_namespaced_deployment("q", "default")  # the typed (pydantic) model accepts the answer
    res = d.spec.template.spec.containers[0].resources
    assert res.limits == {"nvidia.com/gpu": "8", "cpu": "500m"} and res.requests == {"memory": "16Gi"}
    r = co.create_namespaced_custom_object(G, V, "default", P, cr("n", resources={"limits": {"gpu": 8}}))
    assert r["spec"]["resources"]["limits"]["gpu"] == 8
