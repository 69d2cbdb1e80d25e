"""The operator's decision: a ``K3Deployment`` and what the cluster shows → actions and status.

Pure: no I/O, no clock (``now`` is an argument), validation/rendering/planning are injected callables, so
every rule here is unit-tested without an API server. The reconciler (``gpustack_k3.operator.reconciler``)
performs the actions and writes the status only when ``Decision.status_changed`` (a comparison of status
models); a resync of an unchanged world therefore writes nothing.

``decide`` composes three seams: the desired children and whether each must be written
(``gpustack_k3.operator.desired``), conditions/phase/cold-start status (``gpustack_k3.operator.conditions``)
and the per-role status of topologies (``gpustack_k3.operator.roles``). Semantics follow the Kubernetes API
conventions: owned objects carry a controller ownerReference (garbage-collected with the resource) and are
server-side applied by field manager ``gpustack-k3``.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart, K3DeploymentStatus, PlanSummary
from gpustack_k3.operator import rollout as pd
from gpustack_k3.operator import status_table
from gpustack_k3.operator.conditions import (
    Conditions,
    finding_text,
    observation_from_status,
    plan_check_of,
    pod_conditions,
    rollout,
    set_ready,
    status_document,
    status_model,
)
from gpustack_k3.operator.kvcheck import transition_event
from gpustack_k3.operator.desired import apply_reason, document_of, endpoint, object_key, prepare, template_hashes
from gpustack_k3.operator.observation import ColdStartObservation, Observed
from gpustack_k3.operator.podstate import on_older_template, summarize_pods
from gpustack_k3.operator.roles import restart_loop, restart_loop_condition, role_statuses, short_roles

__all__ = ["Action", "Apply", "Decision", "Delete", "Emit", "Observed", "Plan", "Render", "Validate", "decide"]


@dataclasses.dataclass(frozen=True)
class Apply:
    obj: dict
    why: str  # create | update | drift


@dataclasses.dataclass(frozen=True)
class Delete:
    api_version: str
    kind: str
    name: str
    namespace: str


@dataclasses.dataclass(frozen=True)
class Emit:
    type: str  # Normal | Warning
    reason: str
    message: str


Action = Apply | Delete | Emit


@dataclasses.dataclass(frozen=True)
class Decision:
    """``model`` is the status to write (None: leave it as it is); ``status`` its document
    (``model_dump(by_alias=True, exclude_none=True, exclude_unset=True)``: what was set, as the API spells it);
    ``status_changed``: ``model`` differs from the status the
    resource carries (a model comparison)."""
    actions: tuple[Action, ...]
    model: K3DeploymentStatus | None
    status_changed: bool
    requeue_after: float | None = None    # reconcile again after this many seconds (a P/D drain ending)

    @property
    def status(self) -> dict:
        return status_document(self.model) if self.model is not None else {}

    @property
    def writes(self) -> tuple[Apply | Delete, ...]:
        return tuple(a for a in self.actions if isinstance(a, (Apply, Delete)))

    @property
    def events(self) -> tuple[Emit, ...]:
        return tuple(a for a in self.actions if isinstance(a, Emit))


Validate = Callable[[dict], Sequence[Any]]  # doc -> list[Finding]
Render = Callable[[dict], Sequence[dict]]   # doc -> Kubernetes objects
Plan = Callable[[dict], PlanSummary | Mapping[str, Any] | None]  # doc -> plan summary


def decide(cr: Mapping[str, Any], observed: Observed, *, validate: Validate, render: Render,
           now: dt.datetime, plan: Plan | None = None, rollout: pd.Policy = pd.Policy()) -> Decision:
    """validate → render → desired actions → facts → the status table (``status_table``) → the conditions
    beside Ready → status → Events."""
    meta = cr.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return Decision((), None, False)  # going away: garbage collection removes what we own
    prev = status_model(cr.get("status"))
    before = prev or K3DeploymentStatus()
    generation = int(meta.get("generation") or 1)
    doc = document_of(cr)
    conds = Conditions(before.conditions, now, generation)
    status = K3DeploymentStatus(observedGeneration=generation)
    cs = observed.coldstart
    if cs is not None and cs.syncing:
        # the tracker is still reading the log backlog (an operator restart): what we wrote last
        # stands until it has caught up, so a replay neither rewrites the status nor repeats Events
        cs = observation_from_status(before)
    findings = list(validate(doc))
    errors = [f for f in findings if getattr(f, "severity", "error") == "error"]
    warnings = [finding_text(f) for f in findings if getattr(f, "severity", "") == "warning"]
    facts = status_table.Facts(pods=summarize_pods(observed.pods, now=now.timestamp()), coldstart=cs)
    actions: list[Action] = []
    desired: list[dict] = []
    ro: pd.Plan | None = None
    if errors:
        facts = _invalid(conds, facts, errors, before, generation, actions)
    else:
        conds.set(api.CONDITION_VALID, True, api.REASON_VALIDATED, f"valid with {len(warnings)} warning(s)" if warnings else "valid")
        facts, desired, ro = _rendered(cr, observed, render, conds, facts, before, status, actions, warnings,
                                       now, rollout)
    facts = _kv_transfer(observed.kv_transfer, conds, facts, before, actions)
    outcome = status_table.decide(facts)
    set_ready(conds, outcome.ready)
    pod_conditions(conds, facts.pods, cs)
    status.phase = outcome.phase
    status.conditions = conds.as_list()
    if desired and (ep := endpoint(desired, meta.get("name"))):
        status.endpoint = ep
    elif errors and observed.owned and before.endpoint:
        status.endpoint = before.endpoint  # the last valid generation keeps serving there
    if plan is not None and not errors:
        _plan_summary(plan, doc, status, warnings)
    if warnings:
        status.warnings = warnings
    if cs is not None:
        _coldstart_status(cs, status, before, actions)
    if outcome.phase != before.phase:
        actions.append(Emit("Warning" if outcome.phase in api.WARNING_PHASES else "Normal", outcome.phase,
                            f"phase {before.phase or 'None'} -> {outcome.phase}: {outcome.reason}"[:1024]))
    return Decision(tuple(actions), status, status != prev, ro.requeue_after if ro is not None else None)


def _kv_transfer(kv: Any, conds: Conditions, facts: status_table.Facts, before: K3DeploymentStatus,
                 actions: list[Action]) -> status_table.Facts:
    """P/D: the KVTransfer condition, its Event on a change of status (read from the status written last, so an
    operator restart repeats none) and the fact the table's kv-transfer-failed row reads."""
    if kv is None:   # no check this time (not Ready, not yet decided): the condition written last stands
        last = next((c for c in before.conditions if c.type == api.CONDITION_KV_TRANSFER), None)
        if last is not None:
            conds.set(last.type, {"True": True, "False": False}.get(last.status), last.reason, last.message)
        return facts
    conds.set(api.CONDITION_KV_TRANSFER, {"True": True, "False": False}.get(kv.status), kv.reason, kv.message)
    was = next((c.status for c in before.conditions if c.type == api.CONDITION_KV_TRANSFER), None)
    if was != kv.status and (ev := transition_event(None, kv)) is not None:
        actions.append(Emit(ev[0], ev[1], ev[2][:1024]))
    return dataclasses.replace(facts, kv_transfer_failed=kv.message if kv.degraded else "")


def _invalid(conds: Conditions, facts: status_table.Facts, errors: list, before: K3DeploymentStatus,
             generation: int, actions: list[Action]) -> status_table.Facts:
    text = "; ".join(finding_text(f) for f in errors)
    conds.set(api.CONDITION_VALID, False, api.REASON_VALIDATION_FAILED, text)
    conds.set(api.CONDITION_RENDERED, False, api.REASON_INVALID_SPEC, "not rendered: the spec is invalid (see the Valid condition)")
    if before.phase != api.PHASE_INVALID or before.observedGeneration != generation:
        actions.append(Emit("Warning", api.REASON_VALIDATION_FAILED,
                            f"{len(errors)} error(s) in generation {generation}: {text}"[:1024]))
    return dataclasses.replace(facts, invalid=text)


def _rendered(cr: Mapping[str, Any], observed: Observed, render: Render, conds: Conditions,
              facts: status_table.Facts, before: K3DeploymentStatus, status: K3DeploymentStatus,
              actions: list[Action], warnings: list[str], now: dt.datetime, policy: pd.Policy
              ) -> tuple[status_table.Facts, list[dict], pd.Plan | None]:
    """Render, say what to apply and delete, and the facts the rendered world adds (roles, rollout, refusal)."""
    try:
        rendered = list(render(document_of(cr)))
    except Exception as e:  # a valid spec that does not render is a bug to surface, not to crash on
        conds.set(api.CONDITION_RENDERED, False, api.REASON_RENDER_FAILED, f"{type(e).__name__}: {e}")
        return dataclasses.replace(facts, render_error=f"{type(e).__name__}: {e}"), [], None
    name = (cr.get("metadata") or {}).get("name", "")
    ro = pd.plan(rendered, observed.owned, observed.pods, before.rollout, name, now, policy)
    desired, prep_warnings = prepare(ro.desired if ro is not None else rendered, cr)
    warnings += prep_warnings
    kinds = ", ".join(sorted({f"{o['kind']}/{o['metadata']['name']}" for o in desired}))
    conds.set(api.CONDITION_RENDERED, True, api.REASON_RENDERED, f"{len(desired)} object(s): {kinds}")
    actions += _writes(desired, observed, (cr.get("metadata") or {}).get("namespace", ""),
                       ro.keep if ro is not None else frozenset())
    serving_desired = desired
    if ro is not None:
        observed, serving_desired, facts = _pair_view(ro, observed, desired, facts, status, before, actions, now)
    cs = facts.coldstart
    role_phases = cs.roles if cs is not None else None
    roles = role_statuses(observed.owned, observed.pods, before.roles, role_phases)
    if roles:
        status.roles = roles if ro is None or ro.serving == pd.LEGACY else [
            r.model_copy(update={"revision": ro.serving}) for r in roles]
        looping = restart_loop(roles)
        restart_loop_condition(conds, roles, looping)
        short = "" if looping else short_roles(roles, observed.pods, role_phases)
        if ro is not None and not looping and status.router is not None and not status.router.ready:
            # P/D: the router is what answers; Ready waits for it too (docs/design/010-pd-rollouts.md §5)
            short = "; ".join(s for s in (short, f"router {status.router.name}: no ready pod") if s)
        facts = dataclasses.replace(facts, restart_loop=looping, short_roles=short)
    facts = dataclasses.replace(facts, rolling=_rolling(observed, serving_desired, actions, facts.pods.total))
    if observed.apply_error:
        # the server refused an object: say so instead of retrying forever; a resync or a spec change tries again
        actions[:] = [a for a in actions if not isinstance(a, (Apply, Delete))]
        conds.set(api.CONDITION_RENDERED, False, api.REASON_APPLY_FAILED, observed.apply_error[:1024])
        facts = dataclasses.replace(facts, apply_error=observed.apply_error)
    return facts, desired, ro


def _pair_view(ro: pd.Plan, observed: Observed, desired: list[dict], facts: status_table.Facts,
               status: K3DeploymentStatus, before: K3DeploymentStatus, actions: list[Action], now: dt.datetime
               ) -> tuple[Observed, list[dict], status_table.Facts]:
    """P/D (docs/design/010-pd-rollouts.md §5-6): the rows and the roles read the serving revision only; a target
    revision starting beside it, or failed, feeds ``status.rollout`` and the facts rollout_failed / surging; the
    router that serves goes into ``status.router``."""
    serving = dataclasses.replace(observed, owned=pd.of_revision(observed.owned, ro.serving),
                                  pods=pd.pods_of(observed.pods, ro.serving))
    target = ro.status.targetRevision
    serving_desired = desired if target == ro.serving else list(serving.owned.values())
    target_roles = role_statuses(pd.of_revision(observed.owned, target), pd.pods_of(observed.pods, target),
                                 before.rollout.roles if before.rollout is not None else []) \
        if target != ro.serving else []
    # written even when empty: an apply that left the list out would leave the entries of the last one behind
    rollout_status = ro.status.model_copy(update={"roles": [
        r.model_copy(update={"revision": target}) for r in target_roles]})
    status.rollout = rollout_status
    status.router = pd.router_status(pd.router_of(observed.owned, ro.serving), pd.router_of(desired, ro.serving))
    actions += [Emit(t, r, m[:1024]) for t, r, m in ro.events]
    facts = dataclasses.replace(facts, pods=summarize_pods(serving.pods, now=now.timestamp()),
                                rollout_failed=ro.failed, surging=ro.surging)
    return serving, serving_desired, facts


def _writes(desired: list[dict], observed: Observed, namespace: str, keep: frozenset = frozenset()) -> list[Action]:
    want = {object_key(o): o for o in desired}
    out: list[Action] = [Apply(obj, why) for key, obj in want.items()
                         if (why := apply_reason(obj, observed.owned.get(key)))]
    out += [Delete(key[0], key[1], key[2], namespace) for key in sorted(set(observed.owned) - set(want) - keep)]
    return out


def _rolling(observed: Observed, desired: list[dict], actions: list[Action], total: int) -> str:
    """Why the workload is still rolling out ("" when it is not): its controller's status, pods on an older
    template, or a new template being applied now."""
    hashes = template_hashes(desired)
    older = on_older_template(observed.pods, hashes) if hashes else []
    return rollout(observed.owned) or (
        f"{len(older)}/{total} pod(s) still on an older template: {', '.join(older[:3])}" if older else "") or next(
        (f"{a.obj['kind']}/{a.obj['metadata']['name']}: new template being applied" for a in actions
         if isinstance(a, Apply) and a.why == "update" and a.obj.get("kind") in ("Deployment", "StatefulSet")), "")


def _plan_summary(plan: Plan, doc: dict, status: K3DeploymentStatus, warnings: list[str]) -> None:
    try:
        summary = plan(doc)
    except Exception as e:
        warnings.append(f"plan unavailable: {type(e).__name__}: {e}")
        return
    if summary:
        status.plan = PlanSummary.model_validate(summary)


def _coldstart_status(cs: ColdStartObservation, status: K3DeploymentStatus, before: K3DeploymentStatus,
                      actions: list[Action]) -> None:
    if status.plan is not None and (check := plan_check_of(status.plan, cs.status.memory)):
        status.planCheck = check
    status.coldStart = cs.status
    actions += coldstart_events(before.coldStart, cs.status)


def coldstart_events(prev: ColdStart | None, now: ColdStart) -> list[Emit]:
    """One Event per cold-start phase transition, found by comparing the status we wrote last with
    the new one (level-triggered: a resync of an unchanged tracker emits nothing; phases that ended
    between two reconciles each get their Event)."""
    out: list[Emit] = []
    attempt = now.attempt or 1
    same_attempt = prev is not None and (prev.attempt or 1) == attempt
    before = {p.name: p for p in prev.phases} if prev is not None and same_attempt else {}
    if prev is not None and not same_attempt:
        out.append(Emit("Warning", api.EVENT_COLDSTART_ATTEMPT,
                        f"container restarted: cold start attempt {attempt} begins"))
    for p in now.phases:
        old = before.get(p.name)
        if p.end and not (old and old.end) and p.name != (now.failedPhase or ""):
            secs = f" in {p.seconds:g} s" if p.seconds is not None else ""
            out.append(Emit("Normal", api.EVENT_COLDSTART_PHASE, f"attempt {attempt}: {p.name} done{secs}"))
    return out  # a failure is told by the phase Event (Starting -> Failed/Degraded: reason, phase)
