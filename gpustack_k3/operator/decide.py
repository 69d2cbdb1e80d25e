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
from gpustack_k3.operator.conditions import (
    Conditions,
    coldstart_status,
    finding_text,
    phase_of,
    plan_check_of,
    pod_conditions,
    rollout,
    snapshot_from_status,
    status_document,
    status_model,
)
from gpustack_k3.operator.desired import apply_reason, document_of, endpoint, object_key, prepare, template_hashes
from gpustack_k3.operator.podstate import on_older_template, summarize_pods
from gpustack_k3.operator.roles import role_statuses, topology_phase


@dataclasses.dataclass(frozen=True)
class Observed:
    """What the cluster shows for one resource. ``owned`` maps (apiVersion, kind, name) to the live
    objects controlled by it; ``pods`` are the pods labelled ``api.LABEL_DEPLOYMENT=<name>``;
    ``coldstart`` is the snapshot of the log tracker (see ``gpustack_k3.operator.seams``) or None;
    ``apply_error`` is the API server's refusal of one of the desired objects in this reconcile (a 4xx that
    retrying cannot fix: invalid, forbidden, immutable field), or None."""
    owned: Mapping[tuple[str, str, str], dict] = dataclasses.field(default_factory=dict)
    pods: Sequence[dict] = ()
    coldstart: Mapping[str, Any] | None = None
    apply_error: str | None = None


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
           now: dt.datetime, plan: Plan | None = None) -> Decision:
    meta = cr.get("metadata") or {}
    prev = status_model(cr.get("status"))
    before = prev or K3DeploymentStatus()
    generation = int(meta.get("generation") or 1)
    if meta.get("deletionTimestamp"):
        return Decision((), None, False)  # going away: garbage collection removes what we own
    doc = document_of(cr)
    conds = Conditions(before.conditions, now, generation)
    actions: list[Action] = []
    status = K3DeploymentStatus(observedGeneration=generation)
    warnings: list[str] = []

    findings = list(validate(doc))
    errors = [f for f in findings if getattr(f, "severity", "error") == "error"]
    warnings += [finding_text(f) for f in findings if getattr(f, "severity", "") == "warning"]
    pods = summarize_pods(observed.pods, now=now.timestamp())
    cs = observed.coldstart
    if cs is not None and cs.get("syncing"):
        # the tracker is still reading the log backlog (an operator restart): what we wrote last
        # stands until it has caught up, so a replay neither rewrites the status nor repeats Events
        cs = snapshot_from_status(before)

    if errors:
        text = "; ".join(finding_text(f) for f in errors)
        conds.set(api.CONDITION_VALID, False, api.REASON_VALIDATION_FAILED, text)
        conds.set(api.CONDITION_RENDERED, False, api.REASON_INVALID_SPEC, "not rendered: the spec is invalid (see the Valid condition)")
        phase, reason = api.PHASE_INVALID, api.REASON_VALIDATION_FAILED
        if before.phase != api.PHASE_INVALID or before.observedGeneration != generation:
            actions.append(Emit("Warning", api.REASON_VALIDATION_FAILED,
                                f"{len(errors)} error(s) in generation {generation}: {text}"[:1024]))
        desired: list[dict] = []
        pod_conditions(conds, pods, cs)
    else:
        conds.set(api.CONDITION_VALID, True, api.REASON_VALIDATED, f"valid with {len(warnings)} warning(s)" if warnings else "valid")
        try:
            rendered = list(render(doc))
        except Exception as e:  # a valid spec that does not render is a bug to surface, not to crash on
            conds.set(api.CONDITION_RENDERED, False, api.REASON_RENDER_FAILED, f"{type(e).__name__}: {e}")
            pod_conditions(conds, pods, cs)
            phase, reason = api.PHASE_FAILED, api.REASON_RENDER_FAILED
            desired = []
        else:
            desired, prep_warnings = prepare(rendered, cr)
            warnings += prep_warnings
            kinds = ", ".join(sorted({f"{o['kind']}/{o['metadata']['name']}" for o in desired}))
            conds.set(api.CONDITION_RENDERED, True, api.REASON_RENDERED, f"{len(desired)} object(s): {kinds}")
            want = {object_key(o): o for o in desired}
            for key, obj in want.items():
                why = apply_reason(obj, observed.owned.get(key))
                if why:
                    actions.append(Apply(obj, why))
            for key in sorted(set(observed.owned) - set(want)):
                actions.append(Delete(key[0], key[1], key[2], meta.get("namespace", "")))
            pod_conditions(conds, pods, cs)
            phase, reason = phase_of(pods, cs)
            roles = role_statuses(observed.owned, observed.pods, before.roles, (cs or {}).get("roles"))
            if roles:
                status.roles = roles
                phase, reason = topology_phase(conds, roles, phase, reason, observed.pods,
                                               (cs or {}).get("roles"))
            hashes = template_hashes(desired)
            older = on_older_template(observed.pods, hashes) if hashes else []
            rolling = rollout(observed.owned) or (
                f"{len(older)}/{pods.total} pod(s) still on an older template: {', '.join(older[:3])}"
                if older else "") or next(
                (f"{a.obj['kind']}/{a.obj['metadata']['name']}: new template being applied" for a in actions
                 if isinstance(a, Apply) and a.why == "update" and a.obj.get("kind") in ("Deployment", "StatefulSet")),
                "")
            if rolling and phase in (api.PHASE_READY, api.PHASE_WARM):
                # ready pods, but not yet of this generation: the old spec is still what serves
                conds.set(api.CONDITION_READY, False, api.REASON_ROLLING_OUT, rolling)
                phase, reason = api.PHASE_DEPLOYING, f"{api.REASON_ROLLING_OUT}: {rolling}"
            if observed.apply_error:
                # the server refused an object: say so instead of retrying forever; a resync or a spec
                # change tries again
                actions = [a for a in actions if not isinstance(a, (Apply, Delete))]
                conds.set(api.CONDITION_RENDERED, False, api.REASON_APPLY_FAILED, observed.apply_error[:1024])
                phase, reason = api.PHASE_FAILED, f"{api.REASON_APPLY_FAILED}: {observed.apply_error}"

    status.phase = phase
    status.conditions = conds.as_list()
    if desired and (ep := endpoint(desired, meta.get("name"))):
        status.endpoint = ep
    elif errors and observed.owned and before.endpoint:
        status.endpoint = before.endpoint  # the last valid generation keeps serving there
    if plan is not None and not errors:
        try:
            summary = plan(doc)
        except Exception as e:
            warnings.append(f"plan unavailable: {type(e).__name__}: {e}")
        else:
            if summary:
                status.plan = PlanSummary.model_validate(summary)
    if warnings:
        status.warnings = warnings
    coldstart = coldstart_status(cs) if cs else None
    if coldstart is not None and status.plan is not None and (check := plan_check_of(status.plan, coldstart.memory)):
        status.planCheck = check
    if coldstart is not None:
        status.coldStart = coldstart
        actions += coldstart_events(before.coldStart, coldstart)
    if phase != before.phase:
        actions.append(Emit("Warning" if phase in api.WARNING_PHASES else "Normal", phase,
                            f"phase {before.phase or 'None'} -> {phase}: {reason}"[:1024]))
    return Decision(tuple(actions), status, status != prev)

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
