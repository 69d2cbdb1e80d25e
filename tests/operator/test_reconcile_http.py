"""The operator against the API emulator over HTTP with the official client: the tests create
resources and play the kubelet (pod status, logs); the operator reconciles."""
import threading
import urllib.request

import pytest
from kubernetes import client
from operator_helpers import NS, G, P, V, k3, pod_from_deployment, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart
from gpustack_k3.operator.controller import Options, run
from gpustack_k3.operator.observation import ColdStartObservation
from tests.support.waiting import consistently, reconciles, wait_idle

pytestmark = pytest.mark.operator
AGENT = "gpustack-k3-operator/"


def get_cr(co, name):
    return co.get_namespaced_custom_object(G, V, NS, P, name)


def status_of(co, name):
    return get_cr(co, name).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def events_for(core, name):
    return [e for e in core.list_namespaced_event(NS).items if e.involved_object.name == name]


def owned(emu, kind_res, name=None):
    objs = [o for o in emu.objects(kind_res, NS) if api.LABEL_DEPLOYMENT in (o["metadata"].get("labels") or {})]
    return [o for o in objs if name is None or o["metadata"]["name"] == name]


def test_create_makes_owned_workload_and_reports_status(emu, kube, start_operator):
    co, apps, core = kube
    op = start_operator(metrics_port=0, metrics_host="127.0.0.1")
    cr = co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Deploying" and s, what="Deploying")
    assert st["observedGeneration"] == 1 and cond(st, "Valid")["status"] == "True"
    assert st["endpoint"] == f"http://kimi.{NS}.svc:8000" and st["plan"]["kvTokens"] == 1_000_000
    dep = apps.read_namespaced_deployment("kimi", NS)
    ref = dep.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.controller) == ("K3Deployment", "kimi", cr["metadata"]["uid"], True)
    assert [m.manager for m in dep.metadata.managed_fields] == ["gpustack-k3"]
    assert core.read_namespaced_service("kimi", NS).metadata.owner_references[0].uid == cr["metadata"]["uid"]
    assert core.read_namespaced_config_map("kimi-config", NS).data == {"engine": "vllm"}
    assert [e.reason for e in events_for(core, "kimi")] == ["Deploying"]
    assert wait_idle(op, 10)
    assert emu.writes(agent=AGENT, verb="apply") == 4  # 3 objects + 1 status, nothing repeated
    port = op.health.port
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
    assert 'gpustack_k3_operator_reconcile_total{result="success"}' in body
    assert "gpustack_k3_operator_workqueue_depth 0.0" in body
    assert "gpustack_k3_operator_workqueue_delayed 0.0" in body and "gpustack_k3_operator_workqueue_idle 1.0" in body
    assert "# TYPE gpustack_k3_cold_start_phase_seconds histogram" in body  # from gpustack_k3.metrics
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").status == 200
    assert urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").read() == b"ok\n"


def test_invalid_resource_gets_invalid_status_event_and_no_workload(emu, kube, start_operator):
    co, apps, core = kube
    start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("bad", parallel={"tp": 3}))
    st = wait_for(lambda: (s := status_of(co, "bad")).get("phase") == "Invalid" and s, what="Invalid")
    valid = cond(st, "Valid")
    assert valid["status"] == "False" and "spec.parallel.tp" in valid["message"]
    evs = wait_for(lambda: len(ev := events_for(core, "bad")) == 2 and ev, what="2 events")
    assert sorted((e.type, e.reason) for e in evs) == [("Warning", "Invalid"), ("Warning", "ValidationFailed")]
    assert owned(emu, "apps/v1/deployments") == [] and owned(emu, "v1/services") == []
    # fixing the spec deploys it
    co.patch_namespaced_custom_object(G, V, NS, P, "bad", {"spec": {"parallel": {"tp": 8}}})
    wait_for(lambda: status_of(co, "bad").get("phase") == "Deploying", what="Deploying after fix")
    assert status_of(co, "bad")["observedGeneration"] == 2
    assert apps.read_namespaced_deployment("bad", NS)


def test_spec_change_rerenders_and_prunes_removed_fields(emu, kube, start_operator):
    co, apps, _ = kube
    op = start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi", env={"A": "1", "B": "2"}))
    wait_for(lambda: status_of(co, "kimi").get("observedGeneration") == 1, what="gen 1")
    c = apps.read_namespaced_deployment("kimi", NS).spec.template.spec.containers[0]
    assert [e.name for e in c.env] == ["A", "B"]
    co.patch_namespaced_custom_object(G, V, NS, P, "kimi", {"spec": {"env": {"B": None},
                                                                     "scheduling": {"maxModelLen": 131072}}})
    wait_for(lambda: status_of(co, "kimi").get("observedGeneration") == 2, what="gen 2")
    assert wait_idle(op, 10)
    c = apps.read_namespaced_deployment("kimi", NS).spec.template.spec.containers[0]
    assert [e.name for e in c.env] == ["A"] and "--max-model-len=131072" in c.args
    assert len(owned(emu, "apps/v1/deployments")) == 1


def test_deletion_garbage_collects_and_operator_does_not_recreate(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", what="Deploying")
    assert wait_idle(op, 10)
    co.delete_namespaced_custom_object(G, V, NS, P, "kimi")
    wait_for(lambda: not owned(emu, "apps/v1/deployments") and not owned(emu, "v1/configmaps"), what="GC")
    emu.reset_counters()
    assert wait_idle(op, 10)    # the deletion was processed and no retry is pending: nothing else can come
    consistently(lambda: emu.writes(agent=AGENT) == 0 and owned(emu, "v1/services") == [], for_s=0.5,
                 what="nothing re-created")


def test_noop_resync_writes_nothing(emu, kube, start_operator):
    co, _, _ = kube
    op = start_operator(resync_s=0.3)
    for n in range(3):
        co.create_namespaced_custom_object(G, V, NS, P, k3(f"m{n}"))
    wait_for(lambda: all(status_of(co, f"m{n}").get("phase") == "Deploying" for n in range(3)), what="all deploying")
    assert wait_idle(op, 10)
    emu.reset_counters()
    before = reconciles(op)
    consistently(lambda: emu.writes(agent=AGENT) == 0, until=lambda: reconciles(op) >= before + 6,
                 what="no writes over two resyncs of three resources")


def test_pods_drive_phases_and_events(emu, kube, start_operator):
    co, _, core = kube
    start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", what="Deploying")
    core.create_namespaced_pod(NS, pod_from_deployment(emu, "kimi", "kimi-0", [{"name": "engine", "image": "vllm"}]))

    def kubelet(phase, conditions, state, restarts=0, last=None):
        # like the kubelet's two-way merge patch: states not reported any more are set to null
        state = {"waiting": None, "running": None, "terminated": None, **state}
        cs = {"name": "engine", "image": "vllm", "imageID": "", "ready": any(
            c["type"] == "Ready" and c["status"] == "True" for c in conditions), "restartCount": restarts, "state": state}
        if last:
            cs["lastState"] = {"terminated": last}
        core.patch_namespaced_pod_status("kimi-0", NS, {"status": {"phase": phase, "conditions": conditions,
                                                                   "containerStatuses": [cs]}})

    sched = {"type": "PodScheduled", "status": "True"}
    kubelet("Pending", [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                         "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}], {"waiting": {}})
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Pending", what="Pending")
    kubelet("Running", [sched, {"type": "Ready", "status": "False"}], {"running": {"startedAt": "2026-11-29T00:00:00Z"}})
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Starting", what="Starting")
    kubelet("Running", [sched, {"type": "Ready", "status": "False"}],
            {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}}, restarts=1,
            last={"reason": "Error", "exitCode": 1, "startedAt": "2026-11-29T00:00:00Z",
                  "finishedAt": "2026-11-29T00:01:00Z"})
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Degraded" and s, what="Degraded")
    assert "CrashLoopBackOff" in cond(st, "Ready")["reason"]
    kubelet("Running", [sched, {"type": "Ready", "status": "True"}], {"running": {"startedAt": "2026-11-29T00:02:00Z"}},
            restarts=1)
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Ready" and s, what="Ready")
    assert cond(st, "Ready")["status"] == "True" and cond(st, "Scheduled")["status"] == "True"
    reasons = wait_for(lambda: len(r := [e.reason for e in sorted(events_for(core, "kimi"),
                                                                   key=lambda e: e.metadata.name)]) == 5 and r,
                       what="5 phase events")
    assert reasons == ["Deploying", "Pending", "Starting", "Degraded", "Ready"]


class RecordingColdStart:
    """A cold-start observer at the seam: the test sets the snapshot, as the log tracker would."""

    def __init__(self, api, enqueue, metrics=None):
        self.api, self.enqueue = api, enqueue
        self.snapshot = None
        self.seen_pods = {}
        self.forgotten = []

    def observe(self, key, pods):
        self.seen_pods[key] = sorted(p["metadata"]["name"] for p in pods)
        return self.snapshot

    def forget(self, key):
        self.forgotten.append(key)

    def close(self):
        pass


def test_cold_start_seam_feeds_conditions(emu, kube, start_operator):
    co, _, core = kube
    holder = {}

    def factory(api, enqueue, metrics):
        holder["obs"] = RecordingColdStart(api, enqueue, metrics)
        return holder["obs"]
    start_operator(coldstart=factory)
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    core.create_namespaced_pod(NS, pod_from_deployment(emu, "kimi", "kimi-0", [{"name": "engine", "image": "vllm"}]))
    obs = holder["obs"]
    wait_for(lambda: obs.seen_pods.get((NS, "kimi")) == ["kimi-0"], what="pods at the seam")
    obs.snapshot = ColdStartObservation(
        ColdStart(attempt=1, current="cuda_graphs",
                  phases=[{"name": "weights", "start": "2026-11-29T00:00:00Z", "end": "2026-11-29T00:02:44Z",
                           "seconds": 163.8}]), weights_loaded=True)
    obs.enqueue((NS, "kimi"))
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("coldStart") and s, what="coldStart in status")
    assert cond(st, "WeightsLoaded")["status"] == "True" and cond(st, "GraphsCaptured")["status"] == "False"
    assert st["coldStart"]["current"] == "cuda_graphs"
    co.delete_namespaced_custom_object(G, V, NS, P, "kimi")
    wait_for(lambda: (NS, "kimi") in obs.forgotten, what="forget on deletion")


def test_run_entry_point_with_kubeconfig(emu, kube, tmp_path):
    co, apps, _ = kube
    from operator_fakes import fake_render, fake_validate
    cfg = emu.write_kubeconfig(str(tmp_path / "kubeconfig"))
    stop = threading.Event()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", run(
        [NS], 0, 60, False, cfg, metrics_host="127.0.0.1", stop=stop,
        options=Options(validate=fake_validate, render=fake_render, plan=None),
        watch_timeout_s=5)))
    t.start()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    wait_for(lambda: apps.read_namespaced_deployment("kimi", NS), what="deployment via run()")
    stop.set()
    t.join(15)
    assert result == {"code": 0}


@pytest.mark.parametrize("scope", [["llm", "team-b"], []], ids=["two-namespaces", "all-namespaces"])
def test_namespace_scopes(emu, kube, start_operator, scope):
    co, apps, _ = kube
    emu.create_namespace("team-b")
    emu.create_namespace("elsewhere")
    op = start_operator(namespaces=scope)
    for ns in ("llm", "team-b", "elsewhere"):
        body = k3("m")
        body["metadata"]["namespace"] = ns
        co.create_namespaced_custom_object(G, V, ns, P, body)
    wait_for(lambda: apps.read_namespaced_deployment("m", "team-b"), what="team-b reconciled")
    apps.read_namespaced_deployment("m", "llm")
    if scope:
        assert wait_idle(op, 10)    # everything the operator saw is done
        assert emu.get("apps/v1/deployments", "elsewhere", "m") is None  # not watched: left alone
    else:
        wait_for(lambda: apps.read_namespaced_deployment("m", "elsewhere"), what="all namespaces")


def test_kinds_without_informer_are_read_back_not_rewritten(emu, kube, start_operator):
    co, _, core = kube
    op = start_operator(owned_kinds=[("apps/v1", "Deployment"), ("v1", "Service")], resync_s=0.4)
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", what="Deploying")
    assert wait_idle(op, 10)
    emu.reset_counters()
    before = reconciles(op)
    consistently(lambda: emu.writes(agent=AGENT) == 0, until=lambda: reconciles(op) >= before + 2,
                 what="resyncs read the ConfigMap again (GET), not re-apply it")
    core.delete_namespaced_config_map("kimi-config", NS)  # nobody watches ConfigMaps here
    wait_for(lambda: core.read_namespaced_config_map("kimi-config", NS), what="re-created after a resync")


def test_a_refused_object_is_reported_not_retried_forever(emu, kube, start_operator):
    """A 422 from the API server (invalid or immutable field) is not transient: the status says which
    object was refused and why, one Warning Event, and no hot retry loop; once the server accepts (here:
    the fault is gone) a spec change deploys."""
    co, apps, core = kube
    emu.inject(422, times=None, verb="apply", path="/deployments/kimi$")
    op = start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Failed" and s, what="Failed")
    rendered = cond(st, "Rendered")
    assert rendered["status"] == "False" and rendered["reason"] == "ApplyFailed"
    assert rendered["message"].startswith("Deployment/kimi: HTTP 422"), rendered
    assert wait_idle(op, 10)    # idle with no retry pending: the refusal is not requeued
    tries = emu.writes(agent=AGENT, verb="apply", resource="deployments")
    consistently(lambda: emu.writes(agent=AGENT, verb="apply", resource="deployments") == tries, for_s=1.0,
                 what="no retry loop")
    failed = [e for e in events_for(core, "kimi") if e.reason == "Failed"]
    assert len(failed) == 1 and failed[0].type == "Warning" and "Deployment/kimi: HTTP 422" in failed[0].message
    emu.clear_faults()
    co.patch_namespaced_custom_object(G, V, NS, P, "kimi", {"spec": {"serving": {"port": 8001}}})
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", what="Deploying after the fix")
    assert apps.read_namespaced_deployment("kimi", NS) is not None
    assert cond(status_of(co, "kimi"), "Rendered")["status"] == "True"


def test_single_replica_recreate_rollout_reads_rolling_out_until_the_new_pod_is_ready(emu, kube, start_operator):
    """The test plays the Deployment controller and the kubelet as a real cluster does them for a Recreate
    Deployment of one replica; the emulator stores the status as the API server does (a count of 0 is left out).
    While the only running pod is of the old template, the resource is not Ready of the new generation."""
    co, apps, core = kube
    op = start_operator()
    co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Deploying", what="Deploying")

    def run_pod(name):
        core.create_namespaced_pod(NS, pod_from_deployment(emu, "kimi", name, [{"name": "engine", "image": "vllm"}]))
        core.patch_namespaced_pod_status(name, NS, {"status": {"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}], "containerStatuses": [
            {"name": "engine", "image": "vllm", "imageID": "", "ready": True, "restartCount": 0,
             "state": {"running": {"startedAt": "2026-11-29T00:00:00Z"}}}]}})

    def controller_status(updated):
        gen = apps.read_namespaced_deployment("kimi", NS).metadata.generation
        apps.patch_namespaced_deployment_status("kimi", NS, {"status": {
            "observedGeneration": gen, "replicas": 1, "updatedReplicas": updated, "readyReplicas": 1,
            "availableReplicas": 1}})
        return gen

    run_pod("kimi-a")
    controller_status(1)
    wait_for(lambda: status_of(co, "kimi").get("phase") == "Ready", what="Ready")
    co.patch_namespaced_custom_object(G, V, NS, P, "kimi", {"spec": {"parallel": {"tp": 4}}})
    wait_for(lambda: apps.read_namespaced_deployment("kimi", NS).metadata.generation == 2, what="new template")
    assert controller_status(0) == 2                                   # the old pod still runs
    assert "updatedReplicas" not in emu.get("apps/v1/deployments", NS, "kimi")["status"]
    assert wait_idle(op, 10)
    st = status_of(co, "kimi")
    assert st["observedGeneration"] == 2 and st["phase"] == "Deploying", st["phase"]
    assert cond(st, "Ready")["status"] == "False" and cond(st, "Ready")["reason"] == "RollingOut"
    core.delete_namespaced_pod("kimi-a", NS)                            # Recreate: the old pod goes first
    run_pod("kimi-b")
    controller_status(1)
    st = wait_for(lambda: (s := status_of(co, "kimi")).get("phase") == "Ready" and s, what="Ready again")
    assert cond(st, "Ready")["status"] == "True" and st["observedGeneration"] == 2


def test_a_rule_missing_from_the_install_rbac_fails_the_operator(emu, kube, operator_token):
    """The operator runs as the ServiceAccount of manifests/install.yaml with its RBAC enforced: drop the rule
    that lets it watch pods and it never gets a complete picture (not ready, nothing reconciled)."""
    from operator_fakes import fake_render, fake_validate

    from gpustack_k3.operator.controller import Options, new_operator

    co, _, _ = kube
    role = emu.get("rbac.authorization.k8s.io/v1/clusterroles", None, "gpustack-k3")
    rules = [r for r in role["rules"] if r["resources"] != ["pods"]]
    assert len(rules) == len(role["rules"]) - 1
    client.RbacAuthorizationV1Api(emu.api_client()).patch_cluster_role("gpustack-k3", {"rules": rules})
    op = new_operator(emu.api_client(token=operator_token),
                      Options(validate=fake_validate, render=fake_render, plan=None, coldstart=None),
                      namespaces=[NS], watch_timeout_s=5)
    starter = threading.Thread(target=op.start, daemon=True)   # start() waits for the caches to sync
    starter.start()
    try:
        co.create_namespaced_custom_object(G, V, NS, P, k3("kimi"))
        wait_for(lambda: any(inf.kind == "Pod" for inf in op.informers), what="the informers made")
        consistently(lambda: not op.ready()[0], what="not ready", timeout=30, until=lambda: sum(
            1 for r in emu.requests if r.method == "GET" and r.url.path.endswith("/pods")) >= 2)  # refused, retried
        ready, why = op.ready()
        assert not ready and "Pod" in why, why
        assert "status" not in co.get_namespaced_custom_object(G, V, NS, P, "kimi")
        assert any(r.method == "GET" and "/pods" in r.url.path for r in emu.requests)
    finally:
        op.stop()
        starter.join(10)
