"""A P/D topology through the operator on the API emulator, with the official client: the real validation and
rendering, one LeaderWorkerSet per role, the emulator's LWS controller making each group's pods (with the LWS
labels and env), the test playing the kubelet per pod; status per role, no-op resyncs, group recreations."""
from __future__ import annotations

import copy
import datetime as dt

import pytest
from operator_helpers import NS, G, P, V, router_ready, wait_for

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.catalog import load_catalog
from gpustack_k3.operator import hooks
from gpustack_k3.operator.rollout import LABEL_REVISION
from tests.support.documents import merge
from tests.support.waiting import consistently, reconciles, wait_idle

pytestmark = pytest.mark.operator
AGENT = "gpustack-k3-operator/"
NAME = "kimi"
# the kimi-k3-b300-1p1d preset with a two-pod decode instance (DP 2 over 2 pods, TP 8 each; headless worker)
PRESET = "kimi-k3-b300-1p1d"
DECODE = {"podsPerInstance": 2, "parallel": {"tp": 8, "dp": 2, "dpLocal": 1}}
PODS = {"prefill": ["kimi-prefill-0"], "decode": ["kimi-decode-0", "kimi-decode-0-1"]}
REV = {"": ""}     # the pair revision of the deployment under test (docs/design/010-pd-rollouts.md §2)


def pn(name: str) -> str:
    """A pod or LWS name of the revision under test: ``kimi-decode-0`` -> ``kimi-decode-<rev>-0``."""
    role, rest = name.split("-")[1], name.split("-", 2)[2:]
    return "-".join([NAME, role, REV[""], *rest])


def pd_resource() -> dict:
    doc = copy.deepcopy(load_catalog().presets[PRESET].document)
    doc["spec"]["roles"][1] = merge(doc["spec"]["roles"][1], DECODE)
    doc["metadata"] = {"name": NAME, "namespace": NS}
    return doc


def status_of(co) -> dict:
    return co.get_namespaced_custom_object(G, V, NS, P, NAME).get("status") or {}


def cond(status, ctype):
    return next((c for c in status.get("conditions") or [] if c["type"] == ctype), {})


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def kubelet(core, pod: str, *, ready: bool, started: dt.datetime, ready_at: dt.datetime | None = None,
            restarts: int = 0) -> None:
    """Report the pod as the kubelet would: Running, the engine container started at ``started``, Ready."""
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(started)},
             {"type": "Ready", "status": "True" if ready else "False",
              "lastTransitionTime": rfc3339(ready_at or started)}]
    cs = {"name": "engine", "image": "vllm", "imageID": "", "ready": ready, "restartCount": restarts,
          "state": {"waiting": None, "terminated": None, "running": {"startedAt": rfc3339(started)}}}
    core.patch_namespaced_pod_status(pod, NS, {"status": {"phase": "Running", "conditions": conds,
                                                          "containerStatuses": [cs]}})


def pod_uid(core, name):
    return core.read_namespaced_pod(name, NS).metadata.uid


@pytest.fixture
def topology(emu, kube, start_operator):
    co, apps, core = kube
    op = start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5)
    co.create_namespaced_custom_object(G, V, NS, P, pd_resource())
    sets = wait_for(lambda: co.list_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL)["items"],
                    what="the LeaderWorkerSets")
    REV[""] = sets[0]["metadata"]["labels"][LABEL_REVISION]
    router_ready(apps, f"{NAME}-router-{REV['']}")
    for pods in PODS.values():
        for pod in map(pn, pods):
            wait_for(lambda p=pod: core.read_namespaced_pod(p, NS), what=f"pod {pod} made by the LWS controller")
    return op, co, core


def test_roles_become_leaderworkersets_whose_groups_get_the_lws_env(emu, topology):
    _op, co, core = topology
    for role, size, replicas in (("prefill", 1, 1), ("decode", 2, 1)):
        lws = co.get_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL, pn(f"{NAME}-{role}"))
        assert (lws["spec"]["replicas"], lws["spec"]["leaderWorkerTemplate"]["size"]) == (replicas, size)
        assert lws["metadata"]["ownerReferences"][0]["kind"] == api.KIND
    worker = core.read_namespaced_pod(pn("kimi-decode-0-1"), NS)
    env = {e.name: e.value for e in worker.spec.containers[0].env if e.value is not None}
    assert env[api.LWS_ENV_LEADER_ADDRESS] == f"{pn('kimi-decode-0')}.{pn('kimi-decode')}.{NS}"
    assert (env[api.LWS_ENV_GROUP_SIZE], env[api.LWS_ENV_WORKER_INDEX]) == ("2", "1")
    labels = worker.metadata.labels
    assert labels[api.LABEL_ROLE] == "decode" and labels[api.LWS_LABEL_GROUP_INDEX] == "0"
    assert labels[api.LABEL_DEPLOYMENT] == NAME
    st = wait_for(lambda: (s := status_of(co)).get("roles") and s, what="role status")
    assert [r["name"] for r in st["roles"]] == ["decode", "prefill"]
    assert st["endpoint"] == f"http://{NAME}.{NS}.svc:8000"      # the router's Service


def test_pd_deployment_goes_ready_with_per_role_status_and_quiet_resyncs(emu, topology):
    op, co, core = topology
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=20)
    kubelet(core, pn("kimi-prefill-0"), ready=True, started=t0, ready_at=t0 + dt.timedelta(seconds=300))
    kubelet(core, pn("kimi-decode-0-1"), ready=True, started=t0)
    st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_STARTING and s, what="Starting")
    kubelet(core, pn("kimi-decode-0"), ready=True, started=t0, ready_at=t0 + dt.timedelta(seconds=640))
    st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_READY and s, what="Ready")
    roles = {r["name"]: r for r in st["roles"]}
    assert roles["decode"]["readyReplicas"] == roles["decode"]["instances"] == 1
    assert roles["decode"]["leaderColdStartSeconds"] == 640 and roles["prefill"]["leaderColdStartSeconds"] == 300
    assert roles["decode"]["groups"][0]["leader"] == pn("kimi-decode-0") and roles["decode"]["groupRecreations"] == 0
    assert cond(st, api.CONDITION_READY)["status"] == "True"
    assert cond(st, api.CONDITION_GROUP_RESTART_LOOP)["status"] == "False"
    assert wait_idle(op, 10)
    emu.reset_counters()
    before = reconciles(op)
    consistently(lambda: emu.writes(agent=AGENT) == 0, until=lambda: reconciles(op) >= before + 3,
                 what="no writes over resyncs of an unchanged world")


def test_pods_ready_but_lws_not_yet_counting_the_group_is_not_ready(emu, topology):
    """Readiness is re-read from the LWS every reconcile (kserve#6043): with the decode worker not ready the
    decode LWS counts 0 ready groups, and the resource is not Ready even though both leaders are."""
    _op, co, core = topology
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=5)
    for pod in (pn("kimi-prefill-0"), pn("kimi-decode-0")):
        kubelet(core, pod, ready=True, started=t0)
    kubelet(core, pn("kimi-decode-0-1"), ready=False, started=t0)
    st = wait_for(lambda: (s := status_of(co)).get("roles") and {r["name"]: r["readyReplicas"] for r in s["roles"]}
                  == {"prefill": 1, "decode": 0} and s, what="decode 0 ready groups")
    assert st["phase"] != api.PHASE_READY


def test_group_recreations_are_counted_and_a_loop_raises_the_condition(emu, topology):
    _op, co, core = topology
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=5)
    for n in range(1, 4):
        uid = pod_uid(core, pn("kimi-decode-0"))
        for pod in map(pn, PODS["decode"]):
            kubelet(core, pod, ready=False, started=t0)                       # started: not Pending any more
        wait_for(lambda: any(r["name"] == "decode" and r["groups"] and r["groups"][0]["leaderUid"] == uid
                             for r in status_of(co).get("roles") or []), what="the operator saw this group")
        kubelet(core, pn("kimi-decode-0-1"), ready=False, started=t0, restarts=1)   # a container restart
        wait_for(lambda u=uid: pod_uid(core, pn("kimi-decode-0")) != u, what="LWS recreated the group")
        wait_for(lambda n=n: next(r for r in status_of(co)["roles"] if r["name"] == "decode")["groupRecreations"]
                 == n, what=f"{n} recreation(s) counted")
    st = wait_for(lambda: (s := status_of(co)).get("phase") == api.PHASE_DEGRADED and s, what="Degraded")
    loop = cond(st, api.CONDITION_GROUP_RESTART_LOOP)
    assert loop["status"] == "True" and loop["reason"] == api.REASON_GROUPS_RECREATED
    assert "decode group 0 (3x)" in loop["message"]


def ready_writes(emu, since: int) -> list[tuple[str, str, str]]:
    """(status, reason, message) of the Ready condition in each status write the operator sent after request
    number ``since`` of the emulator's journal, in order."""
    out = []
    for req in emu.requests[since:]:
        if req.method == "PATCH" and str(req.url.path).endswith(f"/{P}/{NAME}/status") and \
                req.headers.get("User-Agent", "").startswith(AGENT):
            c = cond(req.data.get("status") or {}, api.CONDITION_READY)
            out.append((c.get("status"), c.get("reason"), c.get("message")))
    return out


def test_a_decode_group_outage_names_the_role_once_and_keeps_its_reason(emu, topology):
    """One state, one reason: when the decode group of a ready P/D deployment goes down (its leader first, then
    its worker) and comes back (the pods first, the LWS's count after), every status write in between says
    the same thing, GroupsNotReady for decode, from the first write that leaves Ready on; the pod counts and
    the order in which the kubelet and the LWS controller report do not make it flip."""
    _op, co, core = topology
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(minutes=20)
    for pods in PODS.values():
        for pod in map(pn, pods):
            kubelet(core, pod, ready=True, started=t0)
    wait_for(lambda: status_of(co).get("phase") == api.PHASE_READY, what="Ready")
    mark = len(emu.requests)
    kubelet(core, pn("kimi-decode-0"), ready=False, started=t0)             # the decode leader goes down ...
    wait_for(lambda: cond(status_of(co), api.CONDITION_READY).get("status") == "False", what="not Ready")
    kubelet(core, pn("kimi-decode-0-1"), ready=False, started=t0)           # ... then its worker
    wait_for(lambda: status_of(co).get("roles")[0]["readyReplicas"] == 0, what="decode 0 ready groups")
    kubelet(core, pn("kimi-decode-0-1"), ready=True, started=t0)            # back: the worker ...
    kubelet(core, pn("kimi-decode-0"), ready=True, started=t0)              # ... and the leader
    wait_for(lambda: status_of(co).get("phase") == api.PHASE_READY, what="Ready again")
    writes = ready_writes(emu, mark)
    outage = [w for w in writes if w[0] != "True"]
    assert outage, writes
    assert writes[-1][0] == "True" and writes.index(outage[0]) == 0, writes   # the first write left Ready
    assert set(outage) == {("False", api.REASON_GROUPS_NOT_READY, "ready groups per role: decode 0/1")}, writes


def test_rack_scale_children_are_owned_and_pruned_from_the_one_kind_list(emu, kube, start_operator):
    """The GB300 8P1D preset renders a ComputeDomain beside its LeaderWorkerSets (docs/design/004-rack-scale.md): the
    operator creates it owned by the K3Deployment, and prunes it when the document opts out of multi-node NVLink
    (``spec.placement.nvlink: none``) — the kinds come from ``api.CHILD_KINDS`` alone."""
    co, _apps, _core = kube
    start_operator(validate=hooks.validate, render=hooks.render, plan=hooks.plan, resync_s=0.5)
    doc = copy.deepcopy(load_catalog().presets["dsv41-flash-gb300-8p1d"].document)
    doc["metadata"] = {"name": "dsv", "namespace": NS}
    co.create_namespaced_custom_object(G, V, NS, P, doc)

    def domains():
        return co.list_namespaced_custom_object(api.COMPUTE_DOMAIN_GROUP, "v1beta1", NS,
                                                api.COMPUTE_DOMAIN_PLURAL)["items"]

    cds = wait_for(domains, what="the ComputeDomain of the rack-scale preset")
    assert len(cds) == 1 and cds[0]["metadata"]["ownerReferences"][0]["kind"] == api.KIND
    lws = wait_for(lambda: co.list_namespaced_custom_object(api.LWS_GROUP, "v1", NS, api.LWS_PLURAL)["items"],
                   what="the LeaderWorkerSets, applied after the ComputeDomain")
    claims = {c["name"] for o in lws for tpl in ("leaderTemplate", "workerTemplate")
              for c in o["spec"]["leaderWorkerTemplate"].get(tpl, {}).get("spec", {}).get("resourceClaims", [])}
    assert api.COMPUTE_DOMAIN_CLAIM in claims

    co.patch_namespaced_custom_object(G, V, NS, P, "dsv", {"spec": {"placement": {"nvlink": "none"}}})
    wait_for(lambda: not domains(), what="the ComputeDomain pruned after spec.placement.nvlink: none")
