"""P/D rollouts and the live KVTransfer check through the operator on the API emulator (LWS controller emulation,
the real validation and rendering): docs/design/010-pd-rollouts.md §3 (Surge) and §4 (KVTransfer).

The test plays the kubelet (every engine pod of a revision the test lets start becomes Ready, the others crash)
and the Deployment controller (a router Deployment reports its replicas ready). The routing invariant is checked
at EVERY state the emulator stores: a spy on the emulator's change feed resolves, after each write, the path a
request takes (the stable Service -> the router pods it selects -> the instance Services in the router's
arguments -> the ready engine pods they select) and records the engine images of the prefill and decode pods a
request could reach."""
from __future__ import annotations

import contextlib
import copy
import threading
import time

import pytest
from operator_helpers import NS, G, P, V, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.operator import hooks
from gpustack_k3.operator.rollout import LABEL_REVISION, REASON_ROLLOUT_FAILED
from tests.operator.test_kvcheck import Engines

pytestmark = pytest.mark.operator
NAME = "kimi"
PRESET = "kimi-k3-b300-1p1d"
OLD, NEW = "vllm/vllm-openai:v0.33.0", "registry.example/vllm-openai:v0.33.0-patched"


def pd_resource(image: str = OLD) -> dict:
    doc = copy.deepcopy(load_catalog().presets[PRESET].document)
    doc["metadata"] = {"name": NAME, "namespace": NS}
    doc["spec"]["engine"]["image"] = image
    return doc


def status_of(co) -> dict:
    return co.get_namespaced_custom_object(G, V, NS, P, NAME).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def route(store) -> dict[str, set[str]]:
    """What a request could reach now: per kind (prefill, decode) the engine images of the ready pods behind the
    instance Services of every router pod the stable Service selects. Runs on the emulator's loop (one state)."""
    services = {k[1]: o for k, o in store["v1/services"].items() if k[0] == NS}
    stable = services.get(NAME)
    out: dict[str, set[str]] = {"prefill": set(), "decode": set()}
    if stable is None:
        return out
    for (ns, _n), dep in store["apps/v1/deployments"].items():
        labels = ((dep["spec"]["template"].get("metadata") or {}).get("labels") or {})
        if ns != NS or not _matches(stable["spec"].get("selector") or {}, labels) or not (
                dep.get("status") or {}).get("readyReplicas"):
            continue
        args = dep["spec"]["template"]["spec"]["containers"][0].get("args") or []
        for flag, url in zip(args, args[1:]):
            if flag not in ("--prefill", "--decode"):
                continue
            svc = services.get(url.split("//", 1)[1].split(".", 1)[0])
            for (pns, _p), pod in store["v1/pods"].items():
                if svc is not None and pns == NS and _ready(pod) and _matches(
                        svc["spec"].get("selector") or {}, pod["metadata"].get("labels") or {}):
                    out[flag[2:]] |= {c["image"] for c in pod["spec"]["containers"]}
    return out


class Cluster:
    """The kubelet and the Deployment controller, played from a thread; engine images in ``crash`` cannot be pulled."""

    def __init__(self, emu, kube) -> None:
        self.emu, (_co, self.apps, self.core) = emu, kube
        self.crash: set[str] = set()
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Cluster:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            with contextlib.suppress(Exception):
                self._tick()

    def _tick(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for pod in self.emu.objects("v1/pods", NS):
            st, image = pod.get("status") or {}, pod["spec"]["containers"][0]["image"]
            if st.get("phase") == "Running" or st.get("containerStatuses"):
                continue
            crashing = image in self.crash
            # an image that cannot be pulled (no restart: the LWS controller does not recreate the group)
            cs = {"name": "engine", "image": image, "imageID": "", "ready": not crashing, "restartCount": 0,
                  "state": {"waiting": {"reason": "ImagePullBackOff", "message": f"Back-off pulling image {image}"}}
                  if crashing else {"running": {"startedAt": now}}}
            conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
                     {"type": "Ready", "status": "False" if crashing else "True", "lastTransitionTime": now}]
            self.core.patch_namespaced_pod_status(pod["metadata"]["name"], NS, {"status": {
                "phase": "Pending" if crashing else "Running", "conditions": conds, "containerStatuses": [cs]}})
        for dep in self.emu.objects("apps/v1/deployments", NS):
            n = dep["spec"].get("replicas", 1)
            if (dep.get("status") or {}).get("readyReplicas") != n:
                self.apps.patch_namespaced_deployment_status(dep["metadata"]["name"], NS, {"status": {
                    "replicas": n, "readyReplicas": n, "availableReplicas": n, "updatedReplicas": n,
                    "observedGeneration": dep["metadata"].get("generation", 1)}})


@pytest.fixture
def states(emu):
    """Every state the emulator stores, as ``route`` resolves it (a spy on its change feed)."""
    seen: list[dict[str, set[str]]] = []
    handler = emu.handler
    orig = handler._emit

    def spy(res, etype, obj, old):
        orig(res, etype, obj, old)
        if res.kind in ("Service", "Deployment", "Pod", api.LWS_KIND):
            seen.append(route(handler.store))
    emu.call(setattr, handler, "_emit", spy)
    yield seen
    emu.call(setattr, handler, "_emit", orig)


def routable(r: dict[str, set[str]]) -> bool:
    return bool(r["prefill"]) and bool(r["decode"])


def test_engine_change_mid_traffic_never_routes_a_mixed_pair_and_never_stops_serving(emu, kube, start_operator,
                                                                                    states):
    co, _apps, _core = kube
    start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5, kv_fetch=None,
                   rollout_drain_s=1.0)
    with Cluster(emu, kube):
        co.create_namespaced_custom_object(G, V, NS, P, pd_resource(OLD))
        first = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_READY and s, what="Ready")
        old_rev = first["rollout"]["servingRevision"]
        assert first["router"]["ready"] and first["router"]["revision"] == old_rev
        assert {r["role"] for r in first["router"]["routes"]} == {"prefill", "decode"}
        start = len(states)
        co.patch_namespaced_custom_object(G, V, NS, P, NAME, {"spec": {"engine": {"image": NEW}}})
        done = wait_for(lambda: (s := status_of(co)).get("rollout", {}).get("servingRevision") not in (None, old_rev)
                        and s["rollout"]["phase"] == "Idle" and s, what="the new revision serving, the old drained", timeout=60)
    new_rev = done["rollout"]["servingRevision"]
    observed = states[start:]
    assert observed, "the spy saw no state"
    mixed = [r for r in observed if len(r["prefill"] | r["decode"]) > 1]
    assert not mixed, mixed[:3]
    assert all(routable(r) for r in observed), "a state in which no P/D pair was routable (downtime)"
    images = [next(iter(r["prefill"])) for r in observed]
    assert images[0] == OLD and images[-1] == NEW and images == sorted(images, key=[OLD, NEW].index)
    assert {r["revision"] for r in done["roles"]} == {new_rev} and done["router"]["revision"] == new_rev
    lws = co.list_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL)["items"]
    assert {o["metadata"]["labels"][LABEL_REVISION] for o in lws} == {new_rev}    # the old revision is gone


def test_a_failing_new_revision_leaves_the_old_serving_and_says_so(emu, kube, start_operator, states):
    co, _apps, _core = kube
    start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5, kv_fetch=None,
                   rollout_drain_s=1.0)
    with Cluster(emu, kube) as cluster:
        cluster.crash.add(NEW)
        co.create_namespaced_custom_object(G, V, NS, P, pd_resource(OLD))
        first = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_READY and s, what="Ready")
        old_rev = first["rollout"]["servingRevision"]
        start = len(states)
        co.patch_namespaced_custom_object(G, V, NS, P, NAME, {"spec": {"engine": {"image": NEW}}})
        st = wait_for(lambda: (s := status_of(co)).get("rollout", {}).get("phase") == "Failed" and s,
                      what="the rollout Failed", timeout=20)
        time.sleep(1.5)     # longer than the drain: nothing of the serving revision may go
        assert all(routable(r) and r["prefill"] | r["decode"] == {OLD} for r in states[start:])
    ro = st["rollout"]
    assert ro["servingRevision"] == old_rev and ro["targetRevision"] != old_rev
    assert "ImagePullBackOff" in ro["message"]
    assert st["phase"] == api.PHASE_DEGRADED and cond(st, api.CONDITION_READY)["status"] == "True"
    assert {r["revision"] for r in st["roles"]} == {old_rev} and st["router"]["revision"] == old_rev
    events = wait_for(lambda: [e for e in emu.objects("v1/events", NS) if e["reason"] == REASON_ROLLOUT_FAILED],
                      what="the RolloutFailed Event")
    assert len(events) == 1 and ro["targetRevision"] in events[0]["message"]


def _metric(op, status: str) -> float | None:
    return op.metrics.registry.get_sample_value(
        "gpustack_k3_kv_transfer", {"namespace": NS, "name": NAME, "status": status})


def test_kv_not_moving_is_kvtransfer_false_and_degraded_then_recovers(emu, kube, start_operator):
    co, _apps, _core = kube
    eng = Engines()
    moving = threading.Event()

    def fetch(url):
        eng.serve(2, moving=moving.is_set())     # traffic between two scrapes of one check
        return eng.fetch(url)

    op = start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=60, kv_fetch=fetch,
                        kv_interval_s=0.3)
    with Cluster(emu, kube):
        co.create_namespaced_custom_object(G, V, NS, P, pd_resource(OLD))
        st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_DEGRADED and s,
                      what="Degraded by KV not moving (the check repeats without a resync)", timeout=30)
        kv = cond(st, api.CONDITION_KV_TRANSFER)
        assert (kv["status"], kv["reason"]) == ("False", "DecodeRecomputedPrompts")
        ready = cond(st, api.CONDITION_READY)
        assert (ready["status"], ready["reason"]) == ("False", api.REASON_KV_TRANSFER_FAILED)
        assert _metric(op, "False") == 1.0 and _metric(op, "True") == 0.0
        assert op.metrics.registry.get_sample_value("gpustack_k3_kv_transfer_checks_total", {
            "namespace": NS, "name": NAME, "reason": "DecodeRecomputedPrompts"}) >= 2
        warnings = wait_for(lambda: [e for e in emu.objects("v1/events", NS)
                                     if e["reason"] == api.REASON_KV_TRANSFER_FAILED], what="the Warning Event")
        assert len(warnings) == 1
        moving.set()
        st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_READY and s, what="recovered",
                      timeout=30)
    assert cond(st, api.CONDITION_KV_TRANSFER)["status"] == "True"
    assert _metric(op, "True") == 1.0 and _metric(op, "False") == 0.0
    # the Event is posted after the status write that the wait above saw
    wait_for(lambda: [e for e in emu.objects("v1/events", NS) if e["reason"] == api.EVENT_KV_TRANSFER_VERIFIED],
             what="the KVTransferVerified Event")


def test_ready_waits_for_the_router_and_the_status_names_its_routes(emu, kube, start_operator):
    """Item 4 of issue 34: the router's own readiness is part of Ready, and status.router shows the instances it
    routes to per role (the URLs of its arguments, the instance Services of the serving revision)."""
    co, apps, core = kube
    start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5)
    co.create_namespaced_custom_object(G, V, NS, P, pd_resource(OLD))
    router = wait_for(lambda: (s := status_of(co)).get("router") and s["router"], what="status.router")
    rev = router["revision"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for role in ("prefill", "decode"):
        pod = wait_for(lambda r=role: core.read_namespaced_pod(f"{NAME}-{r}-{rev}-0", NS), what=f"the {role} pod")
        core.patch_namespaced_pod_status(pod.metadata.name, NS, {"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "lastTransitionTime": now}]}})
    st = wait_for(lambda: "router" in cond(s := status_of(co), api.CONDITION_READY).get("message", "") and s,
                  what="not Ready while the router has no ready pod")
    assert st["phase"] != api.PHASE_READY and st["router"]["ready"] is False
    assert cond(st, api.CONDITION_READY)["reason"] == api.REASON_GROUPS_NOT_READY
    assert {r["role"]: r["instances"] for r in st["router"]["routes"]} == {
        k: [f"http://{NAME}-{k}-{rev}-0.{NS}.svc:8000"] for k in ("prefill", "decode")}
    apps.patch_namespaced_deployment_status(router["name"], NS, {"status": {"replicas": 1, "readyReplicas": 1}})
    st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_READY and s, what="Ready with the router")
    assert st["router"] | {"routes": None} == {"name": f"{NAME}-router-{rev}", "revision": rev, "replicas": 1,
                                               "readyReplicas": 1, "ready": True, "routes": None}
