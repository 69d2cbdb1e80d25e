"""The pure decision function, without any API: spec + observed objects → actions + status."""
import copy
import datetime as dt

import pytest
from operator_fakes import FAKE_PLAN, fake_plan, fake_render, fake_validate

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart
from gpustack_k3.operator import decide as d
from gpustack_k3.operator import desired
from gpustack_k3.operator.observation import ColdStartObservation as Cold
from gpustack_k3.operator.observation import Verdict, coldstart_model

pytestmark = pytest.mark.operator

T0 = dt.datetime(2026, 11, 29, 12, 0, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def make_cr(generation=1, status=None, **spec):
    cr = {"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment",
          "metadata": {"name": "kimi", "namespace": "llm", "uid": "uid-1", "generation": generation,
                       "resourceVersion": "7"},
          "spec": {"engine": {"name": "vllm"}, **spec}}
    if status is not None:
        cr["status"] = status
    return cr


def run(cr, observed=None, **kw):
    kw.setdefault("validate", fake_validate)
    kw.setdefault("render", fake_render)
    return d.decide(cr, observed or d.Observed(), now=kw.pop("now", T0), **kw)


def as_server_returns(obj, extra_uid="x"):
    """The object as the API server would hold it after apply: server fields and defaults added."""
    live = copy.deepcopy(obj)
    live["metadata"].update(uid=extra_uid, resourceVersion="11", creationTimestamp="2026-01-01T00:00:00Z")
    if live["kind"] == "Deployment":
        live["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "IfNotPresent"
        live["spec"]["strategy"] = {"type": "RollingUpdate"}
        live["status"] = {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}   # its pod was made
    return live


def observed_after(decision, pods=(), coldstart=None):
    """The world after ``decision`` was applied; the pods were made from the Deployment it applied."""
    owned = {desired.object_key(a.obj): as_server_returns(a.obj) for a in decision.actions if isinstance(a, d.Apply)}
    tpl = next((a.obj["spec"]["template"]["metadata"] for a in decision.actions
                if isinstance(a, d.Apply) and a.obj["kind"] == "Deployment"), None)
    return d.Observed(owned=owned, pods=[from_template(p, tpl) for p in pods], coldstart=coldstart)


def from_template(p, tpl):
    """The pod as its ReplicaSet creates it: with the template's labels and annotations."""
    if tpl is None:
        return p
    p = copy.deepcopy(p)
    m = p["metadata"]
    m["labels"] = {**(tpl.get("labels") or {}), **(m.get("labels") or {})}
    m["annotations"] = {**(tpl.get("annotations") or {}), **(m.get("annotations") or {})}
    return p


def pod(name="kimi-0", *, scheduled=True, ready=False, phase="Running", waiting=None, terminated=None,
        last_terminated=None, restarts=0, unschedulable=None):
    conds = []
    if unschedulable:
        conds.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": unschedulable})
        phase = "Pending"
    elif scheduled:
        conds.append({"type": "PodScheduled", "status": "True"})
    conds.append({"type": "Ready", "status": "True" if ready else "False"})
    state = {"running": {}} if not (waiting or terminated) else {}
    if waiting:
        state = {"waiting": waiting}
    if terminated:
        state = {"terminated": terminated}
    cs = {"name": "engine", "restartCount": restarts, "state": state, "ready": ready}
    if last_terminated:
        cs["lastState"] = {"terminated": last_terminated}
    return {"metadata": {"name": name, "labels": {api.LABEL_DEPLOYMENT: "kimi"}},
            "status": {"phase": phase, "conditions": conds, "containerStatuses": [cs]}}


def test_first_reconcile_applies_owned_labelled_objects_and_reports_deploying():
    dec = run(make_cr(), plan=fake_plan)
    applies = [a for a in dec.actions if isinstance(a, d.Apply)]
    assert sorted((a.obj["kind"], a.why) for a in applies) == [("ConfigMap", "create"), ("Deployment", "create"),
                                                               ("Service", "create")]
    for a in applies:
        m = a.obj["metadata"]
        assert m["namespace"] == "llm"
        assert m["ownerReferences"] == [{"apiVersion": "k3.gpustack.ai/v1alpha1", "kind": "K3Deployment",
                                         "name": "kimi", "uid": "uid-1", "controller": True,
                                         "blockOwnerDeletion": True}]
        assert m["labels"][api.LABEL_DEPLOYMENT] == "kimi" and m["labels"][api.LABEL_APP_MANAGED_BY] == "gpustack-k3"
        assert len(m["annotations"][api.ANNOTATION_APPLIED_HASH]) == 16
    dep = next(a.obj for a in applies if a.obj["kind"] == "Deployment")
    tpl = dep["spec"]["template"]["metadata"]
    assert tpl["labels"][api.LABEL_DEPLOYMENT] == "kimi" and api.ANNOTATION_CONFIG_HASH in tpl["annotations"]
    s = dec.status
    assert s["phase"] == "Deploying" and s["observedGeneration"] == 1
    conds = {c["type"]: c for c in s["conditions"]}
    # every condition but the topology's group restart loop (a single-engine resource has no LWS groups) and P/D's
    # KVTransfer (no prefill and decode roles)
    assert [c["type"] for c in s["conditions"]] == [t for t in api.CONDITION_TYPES
                                                     if t not in (api.CONDITION_GROUP_RESTART_LOOP,
                                                                  api.CONDITION_KV_TRANSFER)]
    assert conds["Valid"]["status"] == "True" and conds["Rendered"]["status"] == "True"
    assert conds["Ready"]["status"] == "False" and conds["WeightsLoaded"]["status"] == "Unknown"
    assert s["endpoint"] == "http://kimi.llm.svc:8000"
    assert s["plan"] == FAKE_PLAN
    assert dec.events == (d.Emit("Normal", "Deploying", "phase None -> Deploying: workload applied, waiting for pods"),)
    assert dec.status_changed


def test_unchanged_world_decides_nothing():
    first = run(make_cr(), plan=fake_plan)
    again = run(make_cr(status=first.status), observed_after(first), plan=fake_plan, now=T1)
    assert again.actions == () and not again.status_changed
    assert again.status == first.status  # transition times kept although "now" moved


def test_invalid_spec_reports_findings_emits_once_and_renders_nothing():
    dec = run(make_cr(parallel={"tp": 3}))
    assert not [a for a in dec.actions if isinstance(a, (d.Apply, d.Delete))]
    assert dec.status["phase"] == "Invalid"
    valid = next(c for c in dec.status["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False" and valid["reason"] == "ValidationFailed"
    assert "[parallel.tp-divides-gpus] spec.parallel.tp: tp=3 does not divide 8 GPUs" in valid["message"]
    assert "Fix: use tp 1, 2, 4 or 8" in valid["message"]
    assert [e.reason for e in dec.events] == ["ValidationFailed", "Invalid"]
    assert all(e.type == "Warning" for e in dec.events)
    assert "endpoint" not in dec.status
    again = run(make_cr(parallel={"tp": 3}, status=dec.status), now=T1)
    assert again.actions == () and not again.status_changed
    newer = run(make_cr(generation=2, parallel={"tp": 5}, status=dec.status), now=T1)
    assert [e.reason for e in newer.events] == ["ValidationFailed"]  # a new invalid generation is reported again


def test_warnings_are_listed_without_blocking():
    dec = run(make_cr(scheduling={"maxModelLen": 1_000_000}))
    assert dec.status["phase"] == "Deploying"
    assert dec.status["warnings"] == ["[context.long] spec.scheduling.maxModelLen: long context Fix: expect less KV room"]


def test_spec_change_reapplies_only_what_changed():
    first = run(make_cr())
    changed = run(make_cr(generation=2, status=first.status, env={"A": "1"}), observed_after(first), now=T1)
    applies = [(a.obj["kind"], a.why) for a in changed.actions if isinstance(a, d.Apply)]
    assert applies == [("Deployment", "update")]
    assert changed.status["observedGeneration"] == 2 and changed.status_changed
    assert all(c["observedGeneration"] == 2 for c in changed.status["conditions"])


def test_removing_a_field_is_an_update_even_though_actual_still_contains_desired():
    with_env = run(make_cr(env={"A": "1"}))
    without = run(make_cr(generation=2, status=with_env.status), observed_after(with_env))
    assert [(a.obj["kind"], a.why) for a in without.actions if isinstance(a, d.Apply)] == [("Deployment", "update")]


def test_drift_on_an_owned_field_is_repaired():
    first = run(make_cr())
    obs = observed_after(first)
    key = ("apps/v1", "Deployment", "kimi")
    obs.owned[key]["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else:1"
    dec = run(make_cr(status=first.status), obs)
    assert [(a.obj["kind"], a.why) for a in dec.actions] == [("Deployment", "drift")]


def test_objects_no_longer_rendered_are_deleted():
    first = run(make_cr())
    obs = observed_after(first)
    stale = as_server_returns({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "old"}, "spec": {}})
    obs.owned[("apps/v1", "StatefulSet", "old")] = stale
    dec = run(make_cr(status=first.status), obs)
    assert dec.actions == (d.Delete("apps/v1", "StatefulSet", "old", "llm"),)


def test_cluster_scoped_objects_are_not_owned():
    def render(doc):
        return fake_render(doc) + [{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                    "metadata": {"name": "r"}}]
    dec = run(make_cr(), render=render)
    assert "ClusterRole" not in [a.obj["kind"] for a in dec.actions if isinstance(a, d.Apply)]
    assert any("ClusterRole/r is cluster-scoped" in w for w in dec.status["warnings"])


def test_render_failure_is_failed_not_a_crash():
    def render(doc):
        raise KeyError("template missing")
    dec = run(make_cr(), render=render)
    assert dec.status["phase"] == "Failed"
    rendered = next(c for c in dec.status["conditions"] if c["type"] == "Rendered")
    assert rendered["status"] == "False" and rendered["reason"] == "RenderFailed" and "template missing" in rendered["message"]
    assert not [a for a in dec.actions if isinstance(a, d.Apply)]


@pytest.mark.parametrize("pods,coldstart,phase,reason_part", [
    ([pod(unschedulable="0/3 nodes: insufficient nvidia.com/gpu")], None, "Pending", "insufficient nvidia.com/gpu"),
    ([pod()], None, "Starting", "engine starting"),
    ([pod(ready=True)], None, "Ready", "Ready"),
    ([pod(ready=True)], Cold(ColdStart(attempt=1), warm=True, weights_loaded=True, graphs_captured=True), "Warm", "Warm"),
    ([pod(waiting={"reason": "CrashLoopBackOff"}, restarts=3,
          last_terminated={"reason": "OOMKilled", "exitCode": 137})], None, "Degraded", "OOMKilled"),
    ([pod(waiting={"reason": "ImagePullBackOff", "message": "pull access denied"})], None, "Failed", "ImagePullBackOff"),
    ([pod()], Cold(ColdStart(attempt=2, current="cuda_graphs"),
                   verdict=Verdict(phase="Failed", reason="PhaseBudgetExceeded", message="cuda_graphs over 900s")),
     "Failed", "cuda_graphs over 900s"),
    ([pod(phase="Failed")], None, "Failed", "PodFailed"),
])
def test_phase_from_pods_and_cold_start(pods, coldstart, phase, reason_part):
    first = run(make_cr())
    dec = run(make_cr(status=first.status), observed_after(first, pods, coldstart))
    assert dec.status["phase"] == phase
    ev = [e for e in dec.events if e.reason == phase]
    assert len(ev) == 1 and reason_part in ev[0].message
    assert ev[0].type == ("Warning" if phase in ("Degraded", "Failed") else "Normal")


def test_cold_start_snapshot_drives_conditions_and_status():
    phases = [{"name": "weights", "start": "2026-11-29T12:00:00Z", "end": "2026-11-29T12:02:43Z", "seconds": 163.8}]
    cs = Cold(ColdStart(attempt=2, compileCacheWarm=True, current="cuda_graphs", phases=phases), weights_loaded=True)
    first = run(make_cr())
    dec = run(make_cr(status=first.status), observed_after(first, [pod()], cs))
    conds = {c["type"]: c for c in dec.status["conditions"]}
    assert conds["WeightsLoaded"]["status"] == "True" and "attempt 2" in conds["WeightsLoaded"]["message"]
    assert conds["GraphsCaptured"]["status"] == "False" and "cuda_graphs" in conds["GraphsCaptured"]["message"]
    assert dec.status["coldStart"] == {"attempt": 2, "compileCacheWarm": True, "current": "cuda_graphs",
                                       "phases": phases}
    assert dec.status["phase"] == "Starting"


def test_cold_start_events_one_per_phase_transition_and_none_on_resync():
    p1 = {"name": "weights_load", "start": "2026-11-29T12:00:00Z", "end": None, "seconds": None}
    cs = Cold(ColdStart(attempt=1, current="weights_load", phases=[p1]))
    first = run(make_cr())
    a = run(make_cr(status=first.status), observed_after(first, [pod()], cs))
    done = {**p1, "end": "2026-11-29T12:02:43Z", "seconds": 163.8}
    kv = {"name": "kv_cache", "start": "2026-11-29T12:02:43Z", "end": "2026-11-29T12:03:00Z", "seconds": 17.0}
    cs2 = Cold(ColdStart(attempt=1, current="cuda_graphs", phases=[done, kv]), weights_loaded=True)
    b = run(make_cr(status=a.status), observed_after(first, [pod()], cs2))
    msgs = [e.message for e in b.events if e.reason == "ColdStartPhase"]
    assert msgs == ["attempt 1: weights_load done in 163.8 s", "attempt 1: kv_cache done in 17 s"]
    again = run(make_cr(status=b.status), observed_after(first, [pod()], cs2))
    assert again.events == () and not again.status_changed
    cs3 = Cold(ColdStart(attempt=2, current="process_start", phases=[]))
    c = run(make_cr(status=b.status), observed_after(first, [pod()], cs3))
    assert [e.reason for e in c.events] == ["ColdStartAttempt"] and c.status["coldStart"]["attempt"] == 2


@pytest.mark.parametrize("verdict,phase", [
    (Verdict(phase="Failed", reason="EngineCrashed", message="attempt 1: cold start failed in cuda_graphs: OOM"),
     "Failed"),
    (Verdict(phase="Degraded", reason="PhaseOverBudget", message="attempt 1: cold start failed in weights_load: "
                                                                  "stalled"), "Degraded")])
def test_cold_start_verdict_names_phase_and_reason(verdict, phase):
    failed_in = verdict.message.split(" in ")[1].split(":")[0]
    cs = Cold(ColdStart(attempt=1, failedPhase=failed_in, reason="x", phases=[]), verdict=verdict,
              weights_loaded=failed_in != "weights_load")
    first = run(make_cr())
    dec = run(make_cr(status=first.status), observed_after(first, [pod()], cs))
    assert dec.status["phase"] == phase and dec.status["coldStart"]["failedPhase"] == failed_in
    conds = {c["type"]: c for c in dec.status["conditions"]}
    assert conds["Ready"]["reason"] == verdict.reason and failed_in in conds["Ready"]["message"]
    ctype = "GraphsCaptured" if failed_in == "cuda_graphs" else "WeightsLoaded"
    assert conds[ctype]["status"] == "False" and conds[ctype]["reason"] == verdict.reason
    ev = [e for e in dec.events if e.reason == phase]
    assert len(ev) == 1 and failed_in in ev[0].message and verdict.reason in ev[0].message


def test_transition_time_moves_only_when_the_condition_flips():
    first = run(make_cr())
    obs = observed_after(first, [pod()])
    starting = run(make_cr(status=first.status), obs, now=T1)
    ready_at = T1 + dt.timedelta(minutes=10)
    ready = run(make_cr(status=starting.status), observed_after(first, [pod(ready=True)]), now=ready_at)
    conds = {c["type"]: c for c in ready.status["conditions"]}
    assert conds["Ready"]["lastTransitionTime"] == "2026-11-29T12:15:00Z"
    assert conds["Valid"]["lastTransitionTime"] == "2026-11-29T12:00:00Z"


def test_deleting_resource_is_left_to_garbage_collection():
    cr = make_cr(status={"phase": "Ready"})
    cr["metadata"]["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    dec = run(cr)
    assert dec.actions == () and not dec.status_changed


def test_contains_ignores_server_defaults_but_not_changed_values():
    assert desired.contains({"a": 1, "b": {"c": [1, {"x": 1, "y": 2}]}}, {"b": {"c": [1, {"x": 1}]}})
    assert not desired.contains({"a": 1}, {"a": 2})
    assert not desired.contains({"l": [1, 2]}, {"l": [1]})
    assert desired.contains({"n": 1.0}, {"n": 1}) and not desired.contains({"b": 1}, {"b": True})


def _openapi_to_jsonschema(node):
    """OpenAPI v3 (CRD flavour) → JSON Schema: ``nullable`` becomes a null type."""
    if isinstance(node, dict):
        out = {k: _openapi_to_jsonschema(v) for k, v in node.items() if not k.startswith("x-kubernetes")}
        if out.pop("nullable", False) and "type" in out:
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(node, list):
        return [_openapi_to_jsonschema(v) for v in node]
    return node


def test_status_fits_the_crd_status_schema():
    import jsonschema

    from gpustack_k3.api.v1alpha1.status import K3DeploymentStatus
    from gpustack_k3.crd.manifest import crd_manifest
    crd = crd_manifest()
    status_schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    schema = _openapi_to_jsonschema(status_schema)
    cs = Cold(coldstart_model({"attempt": 1, "compileCacheWarm": False, "current": "cuda_graphs", "totalSeconds": None,
                               "phases": [{"name": "weights", "start": "2026-11-29T12:00:00Z", "end": None,
                                           "seconds": None}]}), weights_loaded=True)
    first = run(make_cr(), plan=fake_plan)
    statuses = [first.status, run(make_cr(parallel={"tp": 3})).status,
                run(make_cr(status=first.status), observed_after(first, [pod()], cs), plan=fake_plan).status]
    for status in statuses:
        jsonschema.validate(status, schema)
        K3DeploymentStatus.model_validate(status)       # the model the CRD's status schema is generated from
        assert {c["reason"] for c in status["conditions"]} <= api.CONDITION_REASONS


def test_turning_invalid_keeps_the_running_workload():
    first = run(make_cr())
    dec = run(make_cr(generation=2, status=first.status, parallel={"tp": 3}), observed_after(first), now=T1)
    assert dec.writes == ()  # no apply, and no delete of what serves now
    assert dec.status["phase"] == "Invalid" and dec.status["observedGeneration"] == 2
    assert dec.status["endpoint"] == first.status["endpoint"]


def test_quantities_answered_as_strings_are_not_drift():
    assert desired.contains({"limits": {"nvidia.com/gpu": "8", "cpu": "500m", "memory": "16Gi"}},
                      {"limits": {"nvidia.com/gpu": 8, "cpu": 0.5, "memory": "16Gi"}})
    assert not desired.contains({"limits": {"nvidia.com/gpu": "4"}}, {"limits": {"nvidia.com/gpu": 8}})
    assert desired.quantity("1Ki") == 1024 and desired.quantity("x1") is None and desired.quantity(True) is None


def test_status_fields_of_others_do_not_cause_writes():
    first = run(make_cr(), plan=fake_plan)
    theirs = {**first.status, "gpustack": {"instanceId": 7}}
    again = run(make_cr(status=theirs), observed_after(first), plan=fake_plan, now=T1)
    assert not again.status_changed and again.actions == ()
    dropped = run(make_cr(status={**first.status, "warnings": ["old"]}), observed_after(first), plan=fake_plan)
    assert dropped.status_changed and "warnings" not in dropped.status


def test_canonicalised_quantities_are_not_drift():
    """The API server rewrites quantities to canonical form ("1024Gi" -> "1Ti"): the same value, no re-apply."""
    want = {"spec": {"volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1024Gi"}}}}],
                     "cpu": "0.5", "mem": "2048Mi", "image": "x:1.0", "env": "10"}}
    have = {"spec": {"volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": "1Ti"}}}}],
                     "cpu": "500m", "mem": "2Gi", "image": "x:1.0", "env": "10"}}
    assert desired.contains(have, want)
    for path, other in ((("cpu",), "600m"), (("mem",), "3Gi"), (("env",), "10.0"), (("image",), "x:1")):
        changed = copy.deepcopy(have)
        changed["spec"][path[0]] = other
        assert not desired.contains(changed, want), path


def test_a_refused_apply_fails_the_resource_once():
    refusal = "Deployment/kimi: HTTP 422 Unprocessable Entity: spec.selector: field is immutable"
    dec = run(make_cr(), d.Observed(apply_error=refusal))
    assert not dec.writes                                   # the controller already tried; no loop from here
    assert dec.status["phase"] == "Failed"
    rendered = next(c for c in dec.status["conditions"] if c["type"] == "Rendered")
    assert (rendered["status"], rendered["reason"], rendered["message"]) == ("False", "ApplyFailed", refusal)
    assert [(e.type, e.reason) for e in dec.events] == [("Warning", "Failed")]
    again = run(make_cr(status=dec.status), d.Observed(apply_error=refusal))
    assert not again.status_changed and not again.events    # the same refusal again: nothing new to say


def test_a_crash_loop_is_one_degraded_phase_not_an_event_per_restart():
    first = run(make_cr())
    status, events = first.status, []
    loop = []
    for n in range(2, 6):   # CrashLoopBackOff, then running again after the restart, then crashing again
        err = {"reason": "Error", "exitCode": 1}
        loop += [pod(waiting={"reason": "CrashLoopBackOff"}, last_terminated=err, restarts=n),
                 pod(last_terminated=err, restarts=n + 1)]
    for p in loop:
        dec = run(make_cr(status=status), observed_after(first, pods=[p]))
        status = dec.status
        events += [(e.type, e.reason) for e in dec.events]
        assert status["phase"] == "Degraded", (p, status["phase"])
    assert events == [("Warning", "Degraded")]
    # the first restart is a new attempt, not a loop: Starting
    once = run(make_cr(status=first.status), observed_after(first, pods=[pod(last_terminated={"reason": "Error"},
                                                                              restarts=1)]))
    assert once.status["phase"] == "Starting"


def test_ready_pods_of_the_old_template_are_a_rollout_not_ready():
    first = run(make_cr())
    obs = observed_after(first, pods=[pod(ready=True)])
    key = next(k for k in obs.owned if k[1] == "Deployment")
    dep = obs.owned[key]
    dep["metadata"]["generation"] = 2
    dep["status"] = {"observedGeneration": 1, "updatedReplicas": 1, "replicas": 1}
    dec = run(make_cr(status=first.status), obs)
    ready = next(c for c in dec.status["conditions"] if c["type"] == "Ready")
    assert dec.status["phase"] == "Deploying" and ready["reason"] == "RollingOut", dec.status
    dep["status"] = {"observedGeneration": 2, "updatedReplicas": 0, "replicas": 1}
    assert run(make_cr(status=first.status), obs).status["phase"] == "Deploying"
    dep["status"] = {"observedGeneration": 2, "updatedReplicas": 1, "replicas": 1}
    assert run(make_cr(status=first.status), obs).status["phase"] == "Ready"
    del dep["status"]                      # no status written yet (no controller): nothing to say
    assert run(make_cr(status=first.status), obs).status["phase"] == "Ready"


def test_the_reconcile_that_applies_a_new_template_does_not_report_ready():
    first = run(make_cr())
    ready = run(make_cr(status=first.status), observed_after(first, pods=[pod(ready=True)]))
    assert ready.status["phase"] == "Ready"
    changed = make_cr(generation=2, status=ready.status, parallel={"tp": 4})
    dec = run(changed, observed_after(first, pods=[pod(ready=True)]))
    assert any(isinstance(a, d.Apply) and a.obj["kind"] == "Deployment" and a.why == "update" for a in dec.actions)
    assert dec.status["phase"] == "Deploying", dec.status["phase"]


def test_an_old_crash_after_a_long_healthy_run_is_not_a_crash_loop():
    first = run(make_cr())
    err = {"reason": "Error", "exitCode": 1}
    long_ago = pod(last_terminated=err, restarts=2)
    long_ago["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": "2026-11-20T00:00:00Z"}}
    dec = run(make_cr(status=first.status), observed_after(first, pods=[long_ago]))
    assert dec.status["phase"] == "Starting", dec.status["phase"]
    recent = pod(last_terminated=err, restarts=2)
    recent["status"]["containerStatuses"][0]["state"] = {"running": {"startedAt": T0.strftime("%Y-%m-%dT%H:%M:%SZ")}}
    assert run(make_cr(status=first.status), observed_after(first, pods=[recent])).status["phase"] == "Degraded"


def test_a_crash_looping_engine_with_cold_start_verdicts_is_one_degraded_phase():
    """Each attempt's verdict clears when the next attempt starts and fails again when it dies; the restarts are
    the loop: Starting -> Failed (the first attempt) -> Starting (the restart) -> Degraded, and Degraded stays."""
    err = {"reason": "Error", "exitCode": 1}

    def attempt(n, failed):
        if not failed:
            return Cold(ColdStart(attempt=n, current="weights_load", phases=[]))
        return Cold(ColdStart(attempt=n, failedPhase="cuda_graphs", reason="CUDA out of memory", phases=[]),
                    verdict=Verdict(phase="Failed", reason="EngineCrashed",
                                    message=f"attempt {n}: cold start failed in cuda_graphs: CUDA out of memory"))
    steps = [(pod(), attempt(1, False)), (pod(), attempt(1, True)),
             (pod(terminated=err), attempt(1, True))]                      # the first attempt fails: Failed
    for n in range(1, 5):                                                    # then the kubelet restarts it
        steps += [(pod(last_terminated=err, restarts=n), attempt(n + 1, False)),
                  (pod(last_terminated=err, restarts=n), attempt(n + 1, True)),
                  (pod(terminated=err, last_terminated=err, restarts=n), attempt(n + 1, True)),
                  (pod(waiting={"reason": "CrashLoopBackOff"}, last_terminated=err, restarts=n), attempt(n + 1, True))]
    first = run(make_cr())
    status, phases, phase_events = first.status, [], []
    for p, cs in steps:
        dec = run(make_cr(status=status), observed_after(first, pods=[p], coldstart=cs))
        status = dec.status
        phases.append(status["phase"])
        phase_events += [e.reason for e in dec.events if e.reason in api.PHASES]
    assert phase_events == ["Starting", "Failed", "Starting", "Degraded"], phases
    assert set(phases[phases.index("Degraded"):]) == {"Degraded"}
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "EngineCrashed" and "cuda_graphs" in ready["message"]


def test_single_replica_rollout_without_updated_replicas_is_rolling_out():
    """Recreate with one replica: the API server omits updatedReplicas while it is 0, and the only pod running
    is the old one (ready). That is RollingOut, not Ready of the new generation."""
    first = run(make_cr())
    old_pod = pod(ready=True)
    ready = run(make_cr(status=first.status), observed_after(first, pods=[old_pod]))
    assert ready.status["phase"] == "Ready"
    changed = make_cr(generation=2, status=ready.status, parallel={"tp": 4})
    applying = run(changed, observed_after(first, pods=[old_pod]))
    assert applying.status["phase"] == "Deploying"
    after = observed_after(applying)                  # the new template is applied ...
    dep = next(o for k, o in after.owned.items() if k[1] == "Deployment")
    dep["metadata"]["generation"] = 2
    dep["status"] = {"observedGeneration": 2, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
    old_tpl = next(a.obj for a in first.actions if isinstance(a, d.Apply) and a.obj["kind"] == "Deployment")
    world = d.Observed(owned=after.owned, pods=[from_template(old_pod, old_tpl["spec"]["template"]["metadata"])])
    dec = run(make_cr(generation=2, status=applying.status, parallel={"tp": 4}), world)   # ... the old pod serves
    ready_cond = next(c for c in dec.status["conditions"] if c["type"] == "Ready")
    assert dec.status["phase"] == "Deploying" and dec.status["observedGeneration"] == 2
    assert ready_cond["status"] == "False" and ready_cond["reason"] == "RollingOut", ready_cond
    assert "0/1 pod(s) on the new template" in ready_cond["message"]
    # the controller's count alone can lag: the pods' template hash says it too
    dep["status"]["updatedReplicas"] = 1
    dec = run(make_cr(generation=2, status=applying.status, parallel={"tp": 4}), world)
    ready_cond = next(c for c in dec.status["conditions"] if c["type"] == "Ready")
    assert ready_cond["reason"] == "RollingOut" and "1/1 pod(s) still on an older template: kimi-0" in \
        ready_cond["message"]
    # the new pod (from the new template) is ready: Ready
    new_pod = from_template(pod("kimi-1", ready=True), dep["spec"]["template"]["metadata"])
    dec = run(make_cr(generation=2, status=applying.status, parallel={"tp": 4}),
              d.Observed(owned=after.owned, pods=[new_pod]))
    assert dec.status["phase"] == "Ready", dec.status


def test_prepare_stamps_each_pod_template_with_its_hash():
    first = run(make_cr())
    dep = next(a.obj for a in first.actions if isinstance(a, d.Apply) and a.obj["kind"] == "Deployment")
    tpl = dep["spec"]["template"]
    h = tpl["metadata"]["annotations"][api.ANNOTATION_TEMPLATE_HASH]
    assert desired.template_hashes([dep]) == {h} and len(h) == 16
    again = run(make_cr())
    assert desired.template_hashes([next(a.obj for a in again.actions if isinstance(a, d.Apply)
                                   and a.obj["kind"] == "Deployment")]) == {h}          # stable
    changed = run(make_cr(parallel={"tp": 4}))
    assert desired.template_hashes([next(a.obj for a in changed.actions if isinstance(a, d.Apply)
                                   and a.obj["kind"] == "Deployment")]) != {h}
