"""Watch streams, pod logs, fault injection and write counting over HTTP with the official client."""
import json
import threading
import time

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

G, V, P = "example.com", "v1", "widgets"   # schemaless (conftest)


def cr(name, **labels):
    return {"apiVersion": f"{G}/{V}", "kind": "Widget", "metadata": {"name": name, "labels": labels},
            "spec": {"engine": "vllm"}}


def pod(name, labels=None, containers=("engine",)):
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": c, "image": "i"} for c in containers]}}


def collect(stream_fn, n, **kw):
    out = []
    w = watch.Watch()
    for ev in w.stream(stream_fn, **kw):
        out.append(ev)
        if len(out) >= n:
            w.stop()
    return out, w


def test_watch_initial_then_live_events_and_server_timeout(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    events = []

    def watcher():
        w = watch.Watch()
        for ev in w.stream(co.list_namespaced_custom_object, G, V, "default", P, timeout_seconds=3):
            events.append((ev["type"], ev["object"]["metadata"]["name"]))
            if len(events) == 4:
                w.stop()
    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    co.create_namespaced_custom_object(G, V, "default", P, cr("b"))
    co.patch_namespaced_custom_object(G, V, "default", P, "b", {"spec": {"engine": "sglang"}})
    co.delete_namespaced_custom_object(G, V, "default", P, "b")
    t.join(10)
    assert events == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "b")]
    t0 = time.monotonic()
    assert len(list(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P,
                                         timeout_seconds=1, _request_timeout=10))) == 1
    assert time.monotonic() - t0 < 3  # the server closed the stream after timeoutSeconds


def test_watch_resumes_from_resource_version(api):
    co = client.CustomObjectsApi(api)
    rv = co.list_namespaced_custom_object(G, V, "default", P)["metadata"]["resourceVersion"]
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    co.create_namespaced_custom_object(G, V, "default", P, cr("b"))
    co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {"engine": "sglang"}})
    evs = list(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P,
                                    resource_version=rv, timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a")]


def test_watch_too_old_resource_version_gets_410(api, emu):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    rv = co.list_namespaced_custom_object(G, V, "default", P)["metadata"]["resourceVersion"]
    co.create_namespaced_custom_object(G, V, "default", P, cr("b"))
    emu.compact()
    with pytest.raises(ApiException) as e:
        list(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P, resource_version=rv,
                                  timeout_seconds=1))
    assert e.value.status == 410
    # the raw stream carries the ERROR event with the 410 Status, as the API server sends it
    resp = co.list_namespaced_custom_object(G, V, "default", P, watch=True, resource_version=rv,
                                            timeout_seconds=1, _preload_content=False)
    line = json.loads(resp.data.decode().splitlines()[0])
    assert line["type"] == "ERROR" and line["object"]["code"] == 410 and line["object"]["reason"] == "Expired"


def test_watch_label_selector_translates_transitions(api):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p1", {"app": "db"}))
    events = []

    def watcher():
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, "default", label_selector="app=web", timeout_seconds=3):
            events.append((ev["type"], ev["object"].metadata.name))
            if len(events) == 3:
                w.stop()
    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    core.create_namespaced_pod("default", pod("p2", {"app": "db"}))         # not seen
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"app": "web"}}})  # enters: ADDED
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"v": "2"}}})      # MODIFIED
    core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"app": "db"}}})   # leaves: DELETED
    t.join(10)
    assert events == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]


def test_bookmark_carries_current_resource_version(api):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    latest = co.list_namespaced_custom_object(G, V, "default", P)["metadata"]["resourceVersion"]
    resp = co.list_namespaced_custom_object(G, V, "default", P, watch=True, resource_version=latest,
                                            timeout_seconds=1, allow_watch_bookmarks=True, _preload_content=False)
    lines = [json.loads(x) for x in resp.data.decode().splitlines()]
    assert lines[-1]["type"] == "BOOKMARK" and lines[-1]["object"]["metadata"]["resourceVersion"] == latest


def test_pod_log_plain_follow_previous(api, emu):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p"))
    emu.append_log("default", "p", "line 1\nline 2\n")
    assert core.read_namespaced_pod_log("p", "default") == "line 1\nline 2\n"
    assert core.read_namespaced_pod_log("p", "default", tail_lines=1) == "line 2\n"
    stamped = core.read_namespaced_pod_log("p", "default", timestamps=True)
    assert stamped.splitlines()[0].endswith("Z line 1")
    assert core.read_namespaced_pod_log("p", "default", limit_bytes=4) == "line"
    assert core.read_namespaced_pod_log("p", "default", since_seconds=60) == "line 1\nline 2\n"
    raw = api.call_api(*api.param_serialize("GET", "/api/v1/namespaces/default/pods/p/log",
                                            query_params=[("sinceTime", "2999-01-01T00:00:00Z")]))
    raw.read()
    assert raw.status == 200 and raw.data == b""
    resp = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    got = []

    def reader():
        for chunk in resp.stream(64, decode_content=False):
            got.append(chunk.decode())
    t = threading.Thread(target=reader)
    t.start()
    time.sleep(0.3)
    emu.append_log("default", "p", "line 3\n")
    time.sleep(0.3)
    emu.end_log("default", "p")
    t.join(5)
    assert "".join(got) == "line 1\nline 2\nline 3\n"
    emu.restart_container("default", "p")
    emu.append_log("default", "p", "fresh\n")
    assert core.read_namespaced_pod_log("p", "default") == "fresh\n"
    assert core.read_namespaced_pod_log("p", "default", previous=True) == "line 1\nline 2\nline 3\n"


def test_pod_log_container_required_when_many(api, emu):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p", containers=("a", "b")))
    with pytest.raises(ApiException) as e:
        core.read_namespaced_pod_log("p", "default")
    assert e.value.status == 400 and "choose one of" in e.value.body
    emu.append_log("default", "p", "from b\n", container="b")
    assert core.read_namespaced_pod_log("p", "default", container="b") == "from b\n"


def test_follow_ends_when_pod_deleted(api, emu):
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("p"))
    resp = core.read_namespaced_pod_log("p", "default", follow=True, _preload_content=False)
    done = threading.Event()
    threading.Thread(target=lambda: (resp.read(), done.set())).start()
    time.sleep(0.2)
    core.delete_namespaced_pod("p", "default")
    assert done.wait(5)


def test_fault_injection_status_times_and_delay(api, emu):
    co = client.CustomObjectsApi(api)
    co.create_namespaced_custom_object(G, V, "default", P, cr("a"))
    fault = emu.inject(500, times=2, verb="patch", path=r"/widgets/a$")
    for _ in range(2):
        with pytest.raises(ApiException) as e:
            co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {"x": 1}})
        assert e.value.status == 500
    assert co.patch_namespaced_custom_object(G, V, "default", P, "a", {"spec": {"x": 1}})["spec"]["x"] == 1
    assert fault.hits == 2
    emu.inject(409, method="GET", path="/widgets/a")
    with pytest.raises(ApiException) as e:
        co.get_namespaced_custom_object(G, V, "default", P, "a")
    assert e.value.status == 409
    emu.inject(None, delay=0.5, verb="get")
    t0 = time.monotonic()
    co.get_namespaced_custom_object(G, V, "default", P, "a")
    assert time.monotonic() - t0 >= 0.5
    emu.inject(410, verb="watch")
    with pytest.raises(ApiException) as e:
        list(watch.Watch().stream(co.list_namespaced_custom_object, G, V, "default", P, timeout_seconds=1))
    assert e.value.status == 410


def test_write_counter_per_agent_verb_resource(emu):
    a, b = emu.api_client("tester/1"), emu.api_client("other/1")
    client.CustomObjectsApi(a).create_namespaced_custom_object(G, V, "default", P, cr("x"))
    client.CustomObjectsApi(a).patch_namespaced_custom_object_status(G, V, "default", P, "x", {"status": {"phase": "P"}})
    client.CoreV1Api(b).create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    client.CustomObjectsApi(a).get_namespaced_custom_object(G, V, "default", P, "x")  # reads are not counted
    assert emu.writes(agent="tester") == 2
    assert emu.writes(agent="tester", resource="widgets/status", verb="patch") == 1
    assert emu.writes(resource="configmaps") == 1
    emu.reset_counters()
    assert emu.writes() == 0
