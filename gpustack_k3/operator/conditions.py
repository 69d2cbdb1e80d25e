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
from gpustack_k3.operator.kube import kube_time
from gpustack_k3.operator.observation import ColdStartObservation, Verdict, coldstart_model
from gpustack_k3.operator.status_table import Ready


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
        self.now, self.generation = kube_time(now), generation
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


def pod_conditions(conds: Conditions, pods: PodSummary, cs: ColdStartObservation | None) -> None:
    """The conditions beside Ready that the pods and the cold start decide: Scheduled, WeightsLoaded,
    GraphsCaptured, Warm (Ready is the status table's: ``gpustack_k3.operator.status_table``)."""
    if pods.total == 0:
        conds.set(api.CONDITION_SCHEDULED, None, api.REASON_NO_PODS, "no pods observed yet")
    elif pods.unschedulable:
        conds.set(api.CONDITION_SCHEDULED, False, api.REASON_UNSCHEDULABLE, pods.unschedulable)
    elif pods.scheduled == pods.total:
        conds.set(api.CONDITION_SCHEDULED, True, api.REASON_SCHEDULED, f"{pods.scheduled}/{pods.total} pod(s) scheduled")
    else:
        conds.set(api.CONDITION_SCHEDULED, False, api.REASON_SCHEDULING, f"{pods.scheduled}/{pods.total} pod(s) scheduled")
    if cs is None:
        for ctype in (api.CONDITION_WEIGHTS_LOADED, api.CONDITION_GRAPHS_CAPTURED, api.CONDITION_WARM):
            conds.set(ctype, None, api.REASON_NO_COLDSTART_DATA, "no engine log observed yet")
        return
    _milestone(conds, cs, api.CONDITION_WEIGHTS_LOADED, cs.weights_loaded, "weights_load", "weights loaded")
    if not cs.graphs_captured and cs.graphs_skipped:
        conds.set(api.CONDITION_GRAPHS_CAPTURED, True, api.REASON_NOT_USED,
                  f"the engine serves without CUDA graphs (attempt {cs.status.attempt or 1})")
    else:
        _milestone(conds, cs, api.CONDITION_GRAPHS_CAPTURED, cs.graphs_captured, "cuda_graphs", "CUDA graphs captured")
    if cs.warm:
        conds.set(api.CONDITION_WARM, True, api.REASON_WARM, "the engine has served its first requests (JIT warm-up done)")
    elif cs.status.warmup is not None and cs.status.warmup.ok is False:
        conds.set(api.CONDITION_WARM, False, api.REASON_WARMUP_FAILED,
                  f"the warm-up requests (spec.startup.warmup) failed: {cs.status.warmup.reason or 'see status.coldStart.warmup'}")
    else:
        conds.set(api.CONDITION_WARM, False, api.REASON_NOT_WARM, "first requests not served yet: ready is not yet warm")


def _milestone(conds: Conditions, cs: ColdStartObservation, ctype: str, done: bool, phase_name: str, what: str) -> None:
    cold, attempt = cs.status, cs.status.attempt or 1
    if done:
        secs = _phase_seconds(cold, phase_name)
        took = f" in {secs:g} s" if secs is not None else ""
        conds.set(ctype, True, api.REASON_DONE, f"{what}{took} (attempt {attempt})")
    elif cs.verdict is not None and cold.failedPhase == phase_name:
        conds.set(ctype, False, cs.verdict.reason or api.REASON_FAILED, cs.verdict.message or "failed")
    else:
        conds.set(ctype, False, api.REASON_IN_PROGRESS, f"attempt {attempt}, current phase: {cold.current or 'unknown'}")


def set_ready(conds: Conditions, ready: Ready) -> None:
    conds.set(api.CONDITION_READY, ready.status, ready.reason, ready.message)


def observation_from_status(status: K3DeploymentStatus) -> ColdStartObservation | None:
    """The cold-start observation a status was written from (inverse of what ``decide`` writes)."""
    if status.coldStart is None:
        return None
    conds = {c.type: c for c in status.conditions}

    def true(ctype: str) -> bool:
        return ctype in conds and conds[ctype].status == "True"

    graphs_not_used = api.CONDITION_GRAPHS_CAPTURED in conds and conds[api.CONDITION_GRAPHS_CAPTURED].reason == api.REASON_NOT_USED
    verdict = None
    if status.coldStart.failedPhase:
        ready = conds.get(api.CONDITION_READY)
        verdict = Verdict(phase=status.phase if status.phase in (api.PHASE_FAILED, api.PHASE_DEGRADED) else api.PHASE_FAILED,
                          reason=(ready.reason if ready else "") or api.REASON_COLDSTART_FAILED,
                          message=ready.message if ready else "")
    return ColdStartObservation(
        status=coldstart_model(status.coldStart.model_dump(by_alias=True, exclude_none=True)),
        weights_loaded=true(api.CONDITION_WEIGHTS_LOADED), warm=true(api.CONDITION_WARM),
        graphs_captured=true(api.CONDITION_GRAPHS_CAPTURED) and not graphs_not_used,
        graphs_skipped=graphs_not_used, serving=status.coldStart.totalSeconds is not None, verdict=verdict)


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
