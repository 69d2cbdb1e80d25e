"""status.roles from what the cluster shows (pure): an LWS's or a DisaggregatedSet's status, the leaders' pods,
recreations counted against the last status, a group between deletion and re-creation."""
from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import RoleStatus
from gpustack_k3.operator.roles import role_statuses


def leader(role, group, uid, *, ready=False, started="2026-12-01T00:00:00Z", ready_at="2026-12-01T00:10:00Z"):
    conds = [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_at}]
    return {"metadata": {"name": f"x-{role}-{group}", "uid": uid,
                         "labels": {api.LABEL_ROLE: role, api.LWS_LABEL_GROUP_INDEX: str(group),
                                    api.LWS_LABEL_WORKER_INDEX: "0"}},
            "status": {"conditions": conds, "containerStatuses": [{"state": {"running": {"startedAt": started}}}]}}


def lws(role, replicas=2, size=4, **status):
    return {"apiVersion": api.LWS_API_VERSION, "kind": api.LWS_KIND,
            "metadata": {"name": f"x-{role}", "labels": {api.LABEL_ROLE: role}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size}}, "status": status}


def owned(*objs):
    return {(o["apiVersion"], o["kind"], o["metadata"]["name"]): o for o in objs}


def test_lws_status_groups_and_leader_cold_start():
    (r,) = role_statuses(owned(lws("decode", replicas=2, readyReplicas=1)), [
        leader("decode", 0, "a", ready=True), leader("decode", 1, "b")], [])
    assert isinstance(r, RoleStatus)                  # the model the CRD's status schema is made from
    assert (r.name, r.kind, r.instances, r.podsPerInstance) == ("decode", api.LWS_KIND, 2, 4)
    assert (r.readyReplicas, r.replicas) == (1, 0)    # read from the LWS, 0 where it left the count out
    assert [(g.index, g.ready, g.recreations) for g in r.groups] == [(0, True, 0), (1, False, 0)]
    assert r.leaderColdStartSeconds == 600.0


def test_a_new_leader_uid_is_a_recreation_and_a_missing_leader_keeps_its_group():
    prev = role_statuses(owned(lws("decode")), [leader("decode", 0, "a"), leader("decode", 1, "b")], [])
    now = role_statuses(owned(lws("decode")), [leader("decode", 0, "a2")], prev)   # group 1 being recreated
    groups = {g.index: g for g in now[0].groups}
    assert groups[0].recreations == 1 and groups[0].leaderUid == "a2"
    assert groups[1] == prev[0].groups[1].model_copy(update={"ready": False})
    again = role_statuses(owned(lws("decode")), [leader("decode", 0, "a2"), leader("decode", 1, "b2")], now)
    assert [g.recreations for g in again[0].groups] == [1, 1] and again[0].groupRecreations == 2
    # an unchanged world gives the same status (no write on resync)
    assert role_statuses(owned(lws("decode")), [leader("decode", 0, "a2"), leader("decode", 1, "b2")], again) == again


def test_disaggregatedset_roles_read_its_role_statuses():
    ds = {"apiVersion": api.DS_API_VERSION, "kind": api.DS_KIND, "metadata": {"name": "x"},
          "spec": {"roles": [{"name": "prefill", "spec": {"replicas": 8, "leaderWorkerTemplate": {"size": 1}}},
                             {"name": "decode", "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 8}}}]},
          "status": {"roleStatuses": [{"name": "prefill", "replicas": 8, "readyReplicas": 7}]}}
    out = {r.name: r for r in role_statuses(owned(ds), [], [])}
    assert (out["prefill"].readyReplicas, out["prefill"].instances) == (7, 8)
    assert (out["decode"].readyReplicas, out["decode"].podsPerInstance, out["decode"].kind) == (0, 8, api.DS_KIND)


def test_no_lws_no_roles():
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {}}
    assert role_statuses(owned(dep), [], []) == []


# ------------------------------------------------------------------------------ per-role cold start (engine logs)

def _snap(lines: list[str]):
    """The bridge's snapshot of one pod whose engine printed ``lines`` (the tracker reads them as in a pod)."""
    from gpustack_k3.coldstart import ColdStartTracker
    from gpustack_k3.operator.coldstart_bridge import snapshot_of

    t = ColdStartTracker(year=2026)
    t.feed("".join(f"[2026-12-02 05:00:{i:02d}] {m}\n" for i, m in enumerate(lines)).encode())
    return snapshot_of(t.report(), "pod")


# SGLang 0.5.23's own texts (coldstart/data/sglang.yaml names each file:line)
SG_ARGS = "server_args={'model_path': '/models/Kimi-K3', 'tp_size': 8, 'disaggregation_mode': '%s'}"
SG_PREFILL_SERVING = [SG_ARGS % "prefill", "CommonKVBootstrapServer started successfully on 0.0.0.0:8998",
                      "Load weight begin. avail mem=265.42 GB",
                      "Load weight end. elapsed=141.03 s, type=KimiK3ForConditionalGeneration, avail mem=69.56 GB",
                      "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 916672, KV size: 11.80 GB",
                      "Start of pd disaggregation warmup ...", "End of disaggregation warmup",
                      "The server is fired up and ready to roll!"]
SG_DECODE_LOADING = [SG_ARGS % "decode", "Radix cache is disabled for decode server",
                     "Load weight begin. avail mem=265.42 GB"]
SG_DECODE_FAILED = [*SG_DECODE_LOADING[:1], "Load weight begin. avail mem=265.42 GB",
                    "Load weight end. elapsed=141.03 s, type=KimiK3ForConditionalGeneration, avail mem=69.56 GB",
                    "KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 916672, KV size: 11.80 GB",
                    "Start of pd disaggregation warmup ...",
                    "Disaggregation warmup failed (mode=decode), status codes: [503]"]


def _pod(role, group=0, worker=0):
    return {"metadata": {"name": f"x-{role}-{group}-{worker}", "labels": {
        api.LABEL_ROLE: role, api.LWS_LABEL_GROUP_INDEX: str(group), api.LWS_LABEL_WORKER_INDEX: str(worker)}}}


def test_each_role_s_cold_start_is_read_from_its_own_pods_logs():
    from gpustack_k3.operator.coldstart_bridge import role_phases

    pods = [_pod("prefill"), _pod("decode"), _pod("decode", worker=1)]
    snaps = [_snap(SG_PREFILL_SERVING), _snap(SG_DECODE_LOADING), _snap(SG_DECODE_LOADING[:1])]
    # the decode is as far as its slowest pod: worker 1 has not begun loading
    assert role_phases(pods, snaps) == {"prefill": "serving", "decode": "process_start"}
    snaps[1] = snaps[2] = _snap(SG_DECODE_FAILED)
    assert role_phases(pods, snaps) == {"prefill": "serving", "decode": "failed in server_ready"}
    assert role_phases([{"metadata": {"name": "plain"}}], snaps[:1]) == {}   # a pod without a role


def test_the_ready_condition_names_each_short_role_with_its_cold_start_phase():
    from gpustack_k3.operator import status_table
    from gpustack_k3.operator.podstate import summarize_pods
    from gpustack_k3.operator.roles import short_roles

    pods = [leader("prefill", 0, "p", ready=True), leader("decode", 0, "d")]
    roles = role_statuses(owned(lws("prefill", replicas=1, size=1, readyReplicas=1),
                                lws("decode", replicas=1, size=1)), pods, [])
    short = short_roles(roles, pods, {"prefill": "serving", "decode": "weights_load"})
    assert short == "ready groups per role: decode 0/1 (weights_load)"
    # the pods all ready (the decode's pod counted ready by the kubelet), the role short: Starting, named
    facts = status_table.Facts(pods=summarize_pods([leader("prefill", 0, "p", ready=True),
                                                    leader("decode", 0, "d", ready=True)]), short_roles=short)
    out = status_table.decide(facts)
    assert out.phase == api.PHASE_STARTING
    assert out.reason.endswith("ready groups per role: decode 0/1 (weights_load)")
    assert out.ready.message == "ready groups per role: decode 0/1 (weights_load)"
