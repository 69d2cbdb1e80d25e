"""The status of a ``K3Deployment`` from what the cluster shows (pure): conditions, the phase and its reason,
the cold-start status and its Events, the plan check. Built as the models of
``gpustack_k3.api.v1alpha1.status`` (``status_document`` is what is written).

Conditions are metav1.Condition: the transition time only moves when ``status`` flips.
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import (
    MAX_CONDITION_MESSAGE,
    ColdStart,
    Condition,
    EngineMemory,
    K3DeploymentStatus,
    PlanCheck,
    PlanCheckFigure,
    PlanSummary,
)
from gpustack_k3.coldstart.plancheck import plan_check
from gpustack_k3.operator.podstate import PodSummary
from gpustack_k3.operator.seams import coldstart_of


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_document(model: K3DeploymentStatus) -> dict:
    """What the operator writes: the model under its API names, unknowns (None) and fields never set left out."""
    return model.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)


def status_model(status: Mapping[str, Any] | None) -> K3DeploymentStatus | None:
    """The status a resource carries as the model (None when it has none or one the model does not read)."""
    if not status:
        return None
    try:
        return K3DeploymentStatus.model_validate(
            {k: v for k, v in status.items() if k in K3DeploymentStatus.model_fields})
    except ValueError:
        return None


class Conditions:
    def __init__(self, previous: Sequence[Condition], now: dt.datetime, generation: int):
        self.prev = {c.type: c for c in previous}
        self.now, self.generation = _iso(now), generation
        self.items: dict[str, Condition] = {}

    def set(self, ctype: str, status: bool | None, reason: str, message: str) -> None:
        s = "Unknown" if status is None else ("True" if status else "False")
        before = self.prev.get(ctype)
        since = before.lastTransitionTime if before is not None and before.status == s else None
        self.items[ctype] = Condition(type=ctype, status=s, observedGeneration=self.generation,
                                      lastTransitionTime=since or self.now, reason=reason,
                                      message=message[:MAX_CONDITION_MESSAGE])

    def get(self, ctype: str) -> Condition | None:
        return self.items.get(ctype)

    def as_list(self) -> list[Condition]:
        return [self.items[t] for t in api.CONDITION_TYPES if t in self.items]


def finding_text(f: Any) -> str:
    fix = f" Fix: {f.fix}" if getattr(f, "fix", "") else ""
    return f"[{f.rule}] {f.field}: {f.message}{fix}"


def pod_conditions(conds: Conditions, pods: PodSummary, cs: Mapping[str, Any] | None) -> None:
    if pods.total == 0:
        conds.set(api.CONDITION_SCHEDULED, None, api.REASON_NO_PODS, "no pods observed yet")
    elif pods.unschedulable:
        conds.set(api.CONDITION_SCHEDULED, False, api.REASON_UNSCHEDULABLE, pods.unschedulable)
    elif pods.scheduled == pods.total:
        conds.set(api.CONDITION_SCHEDULED, True, api.REASON_SCHEDULED, f"{pods.scheduled}/{pods.total} pod(s) scheduled")
    else:
        conds.set(api.CONDITION_SCHEDULED, False, api.REASON_SCHEDULING, f"{pods.scheduled}/{pods.total} pod(s) scheduled")
    milestones = ((api.CONDITION_WEIGHTS_LOADED, "weightsLoaded", "weights_load", "weights loaded"),
                  (api.CONDITION_GRAPHS_CAPTURED, "graphsCaptured", "cuda_graphs", "CUDA graphs captured"))
    verdict = (cs or {}).get("verdict") or {}
    cold = coldstart_status(cs) if cs else ColdStart()
    for ctype, key, phase_name, what in milestones:
        attempt = cold.attempt or 1
        if not cs:
            conds.set(ctype, None, api.REASON_NO_COLDSTART_DATA, "no engine log observed yet")
        elif cs.get(key):
            secs = _phase_seconds(cold, phase_name)
            took = f" in {secs:g} s" if secs is not None else ""
            conds.set(ctype, True, api.REASON_DONE, f"{what}{took} (attempt {attempt})")
        elif ctype == api.CONDITION_GRAPHS_CAPTURED and cs.get("graphsSkipped"):
            conds.set(ctype, True, api.REASON_NOT_USED, f"the engine serves without CUDA graphs (attempt {attempt})")
        elif verdict and cold.failedPhase == phase_name:
            conds.set(ctype, False, verdict.get("reason") or api.REASON_FAILED, verdict.get("message") or "failed")
        else:
            conds.set(ctype, False, api.REASON_IN_PROGRESS, f"attempt {attempt}, current phase: {cold.current or 'unknown'}")
    if pods.total and pods.ready == pods.total:
        conds.set(api.CONDITION_READY, True, api.REASON_PODS_READY, f"{pods.ready}/{pods.total} pod(s) ready")
    elif pods.total and verdict and not pods.failed:
        conds.set(api.CONDITION_READY, False, verdict.get("reason") or api.REASON_COLDSTART_FAILED, verdict.get("message") or "")
    elif pods.total:
        conds.set(api.CONDITION_READY, False, pods.problem_reason or api.REASON_PODS_NOT_READY,
                  pods.problem or f"{pods.ready}/{pods.total} pod(s) ready")
    else:
        conds.set(api.CONDITION_READY, False, api.REASON_NO_PODS, "no pods observed yet")
    if cs and cs.get("warm"):
        conds.set(api.CONDITION_WARM, True, api.REASON_WARM, "the engine has served its first requests (JIT warm-up done)")
    elif cs and cold.warmup is not None and cold.warmup.ok is False:
        conds.set(api.CONDITION_WARM, False, api.REASON_WARMUP_FAILED,
                  f"the warm-up requests (spec.startup.warmup) failed: {cold.warmup.reason or 'see status.coldStart.warmup'}")
    elif cs:
        conds.set(api.CONDITION_WARM, False, api.REASON_NOT_WARM, "first requests not served yet: ready is not yet warm")
    else:
        conds.set(api.CONDITION_WARM, None, api.REASON_NO_COLDSTART_DATA, "no engine log observed yet")


def phase_of(pods: PodSummary, cs: Mapping[str, Any] | None) -> tuple[str, str]:
    """The phase and its reason. A crash loop is one Degraded phase: the kubelet's restarts come before the
    verdict of each attempt (which clears when the next attempt starts and fails again when it dies), so a
    looping engine does not flip Failed -> Degraded -> Failed with an Event each time."""
    verdict = (cs or {}).get("verdict") or None
    failed_attempt = verdict and verdict.get("phase") in (api.PHASE_FAILED, api.PHASE_DEGRADED)
    said = f"{verdict.get('reason', '')}: {verdict.get('message', '')}".strip(": ") if failed_attempt else ""
    if pods.failed:
        return api.PHASE_FAILED, pods.failed
    if pods.crashing:
        return api.PHASE_DEGRADED, f"{pods.crashing}; {said}" if said else pods.crashing
    if failed_attempt and pods.restarted_after_crash:
        # an attempt that failed after a restart that followed a crash: the loop has begun
        return api.PHASE_DEGRADED, f"{said} (again after a restart: {pods.restarted_after_crash})"
    if failed_attempt:
        return verdict["phase"], said
    if pods.total and pods.ready == pods.total:
        return (api.PHASE_WARM, api.PHASE_WARM) if cs and cs.get("warm") else (api.PHASE_READY, api.PHASE_READY)
    if pods.unschedulable:
        return api.PHASE_PENDING, f"{api.REASON_UNSCHEDULABLE}: {pods.unschedulable}"
    if pods.scheduled:
        current = coldstart_status(cs).current if cs else None
        return api.PHASE_STARTING, f"engine starting{f' ({current})' if current else ''}"
    return api.PHASE_DEPLOYING, "workload applied, waiting for pods"


def snapshot_from_status(status: K3DeploymentStatus) -> dict | None:
    """The cold-start snapshot a status was written from (inverse of what ``decide`` writes)."""
    if status.coldStart is None:
        return None
    cs: dict[str, Any] = status.coldStart.model_dump(by_alias=True, exclude_none=True)
    conds = {c.type: c for c in status.conditions}

    def true(ctype: str) -> bool:
        return ctype in conds and conds[ctype].status == "True"

    graphs_not_used = api.CONDITION_GRAPHS_CAPTURED in conds and conds[api.CONDITION_GRAPHS_CAPTURED].reason == api.REASON_NOT_USED
    cs.update(weightsLoaded=true(api.CONDITION_WEIGHTS_LOADED), warm=true(api.CONDITION_WARM),
              graphsCaptured=true(api.CONDITION_GRAPHS_CAPTURED) and not graphs_not_used,
              graphsSkipped=graphs_not_used, serving=status.coldStart.totalSeconds is not None)
    if status.coldStart.failedPhase:
        ready = conds.get(api.CONDITION_READY)
        cs["verdict"] = {"phase": status.phase if status.phase in (api.PHASE_FAILED, api.PHASE_DEGRADED) else api.PHASE_FAILED,
                         "reason": (ready.reason if ready else "") or api.REASON_COLDSTART_FAILED,
                         "message": ready.message if ready else ""}
    return cs


def _phase_seconds(cold: ColdStart, name: str) -> float | None:
    return next((p.seconds for p in cold.phases if p.name == name), None)




def rollout(owned: Mapping[tuple[str, str, str], dict]) -> str:
    """Why a workload we own is still rolling out ("" when it is not), from the status its controller
    writes (a workload without status, e.g. just created, says nothing). The API server leaves out counts
    that are 0 (``omitempty``): once the controller has written a status, a missing ``updatedReplicas``
    is 0 updated pods."""
    for (_av, kind, name), obj in sorted(owned.items()):
        if kind not in ("Deployment", "StatefulSet", api.LWS_KIND):
            continue
        st, gen = obj.get("status") or {}, (obj.get("metadata") or {}).get("generation")
        if not isinstance(st.get("observedGeneration"), int):
            continue
        if isinstance(gen, int) and st["observedGeneration"] < gen:
            return f"{kind}/{name}: generation {gen} not yet observed by its controller"
        want = (obj.get("spec") or {}).get("replicas", 1)
        updated = st.get("updatedReplicas", 0)
        if isinstance(updated, int) and isinstance(want, int) and updated < want:
            return f"{kind}/{name}: {updated}/{want} pod(s) on the new template"
    return ""


coldstart_status = coldstart_of   # status.coldStart from a tracker snapshot


def plan_check_of(plan: PlanSummary, memory: EngineMemory | None) -> PlanCheck | None:
    """``status.planCheck``: the plan summary next to the engine's own figures (``status.coldStart.memory``),
    drift in percent; None until the engine printed a figure the plan has."""
    if memory is None:
        return None
    check = plan_check(plan.planned().model_dump(exclude_none=True), memory.model_dump(exclude_none=True))
    if not check["figures"]:
        return None
    alias = {name: f.alias or name for name, f in EngineMemory.model_fields.items()}
    return PlanCheck(figures=[PlanCheckFigure(figure=alias[r["figure"]], planned=r["planned"], engine=r["engine"],
                                              driftPct=r["drift_pct"]) for r in check["figures"]],
                     maxAbsDriftPct=check["max_abs_drift_pct"], notPrinted=[alias[f] for f in check["not_printed"]])
