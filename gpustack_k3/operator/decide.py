"""The operator's decision: a ``K3Deployment`` and what the cluster shows → actions and status.

Pure: no I/O, no clock (``now`` is an argument), validation/rendering/planning are injected
callables, so every rule here is unit-tested without an API server. The controller
(``gpustack_k3.operator.controller``) performs the actions and writes the status only when
``Decision.status_changed``; a resync of an unchanged world therefore writes nothing.

Semantics follow the Kubernetes API conventions:
conditions are metav1.Condition (type, status, observedGeneration, lastTransitionTime, reason,
message; the transition time only moves when ``status`` flips), owned objects carry a controller
ownerReference (garbage-collected with the resource), and desired objects are server-side applied
by field manager ``gpustack-k3``. "Desired equals actual" is decided on the fields we own: an
object is re-applied when the hash of what we would apply differs from the hash we applied last
(annotation ``api.ANNOTATION_APPLIED_HASH``: catches fields we stopped setting) or when the live
object no longer carries a value we set (drift).
"""
from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import (
    MAX_CONDITION_MESSAGE,
    ColdStart,
    Condition,
    EngineMemory,
    GroupStatus,
    K3DeploymentStatus,
    PlanCheck,
    PlanCheckFigure,
    PlanSummary,
    RoleStatus,
)
from gpustack_k3.coldstart.plancheck import plan_check
from gpustack_k3.operator.seams import coldstart_of
from gpustack_k3.operator.podstate import PodSummary, on_older_template, summarize_pods

# A group recreated this many times and still not ready is a restart loop (LWS itself has no bound: lws#877)
RESTART_LOOP_RECREATIONS = 3

# Objects a namespaced resource cannot own (ownerReferences must stay in-namespace).
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                        "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass",
                        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}


# ----------------------------------------------------------------------------- inputs / outputs

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
    (``model_dump(by_alias=True, exclude_none=True)``); ``status_changed``: ``model`` differs from the status the
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


# ----------------------------------------------------------------------------- helpers

def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    return (obj.get("apiVersion", ""), obj.get("kind", ""), (obj.get("metadata") or {}).get("name", ""))


def document_of(cr: Mapping[str, Any]) -> dict:
    """The deployment document of a resource: what a user wrote, without server-set fields."""
    meta = cr.get("metadata") or {}
    doc_meta = {"name": meta.get("name"), "namespace": meta.get("namespace")}
    for k in ("labels", "annotations"):
        if meta.get(k):
            doc_meta[k] = copy.deepcopy(meta[k])
    return {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
            "metadata": doc_meta, "spec": copy.deepcopy(cr.get("spec") or {})}


def _clone(obj: Any) -> Any:
    """Deep copy of JSON data (a JSON round trip is several times faster than copy.deepcopy)."""
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError):
        return copy.deepcopy(obj)


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def quantity(v: Any) -> Decimal | None:
    """A Kubernetes resource quantity ("8", "500m", "16Gi", 8) as a number (``kubernetes.utils.parse_quantity``);
    None if it is not one."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        return parse_quantity(v.strip() if isinstance(v, str) else v)
    except (ValueError, ArithmeticError):
        return None


def _same_scalar(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, str) != isinstance(b, str) and (isinstance(a, (int, float)) or isinstance(b, (int, float))):
        # the API server answers quantities as strings (8 -> "8", 0.5 -> "500m")
        qa, qb = quantity(a), quantity(b)
        return qa is not None and qa == qb
    if isinstance(a, str) and isinstance(b, str) and a != b and (_has_suffix(a) or _has_suffix(b)):
        # the API server stores quantities in canonical form ("1024Gi" -> "1Ti", "0.5" -> "500m")
        qa, qb = quantity(a), quantity(b)
        return qa is not None and qa == qb
    return a == b


def _has_suffix(v: str) -> bool:
    """A quantity with a unit suffix ("16Gi", "500m"): a plain number string ("0.10") is not compared as one."""
    return v.strip()[-1:].isalpha() and quantity(v) is not None


def contains(actual: Any, desired: Any) -> bool:
    """True when every value set in ``desired`` is present and equal in ``actual`` (extra fields in
    ``actual``, e.g. server defaults or other managers' fields, are ignored)."""
    if isinstance(desired, dict):
        return isinstance(actual, dict) and all(k in actual and contains(actual[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(actual, list) and len(actual) == len(desired) and all(
            contains(a, d) for a, d in zip(actual, desired))
    return _same_scalar(actual, desired)


def _pod_templates(obj: dict) -> list[dict]:
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job") and isinstance(spec.get("template"), dict):
        return [spec["template"]]
    if kind == api.LWS_KIND:
        return _lws_templates(spec)
    if kind == api.DS_KIND:
        return [t for r in spec.get("roles") or [] if isinstance(r, dict) for t in _lws_templates(r.get("spec") or {})]
    if kind == "Pod":
        return [obj]
    return []


def _lws_templates(spec: Mapping[str, Any]) -> list[dict]:
    lwt = spec.get("leaderWorkerTemplate") or {}
    return [t for t in (lwt.get("leaderTemplate"), lwt.get("workerTemplate")) if isinstance(t, dict)]


def prepare(rendered: Sequence[dict], cr: Mapping[str, Any]) -> tuple[list[dict], list[str]]:
    """Desired objects: namespaced into the resource's namespace, labelled, owned by it, with the
    config hash on pod templates and the applied hash annotation. Returns (objects, warnings)."""
    meta = cr.get("metadata") or {}
    name, ns, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    owner = {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
             "name": name, "uid": uid, "controller": True, "blockOwnerDeletion": True}
    labels = {api.LABEL_APP_MANAGED_BY: api.FIELD_MANAGER, api.LABEL_DEPLOYMENT: name}
    out, warnings = [], []
    config = [o for o in rendered if o.get("kind") in ("ConfigMap", "Secret")]
    config_hash = stable_hash([[o.get("kind"), (o.get("metadata") or {}).get("name"), o.get("data"),
                                o.get("stringData"), o.get("binaryData")] for o in config]) if config else None
    for src in rendered:
        kind = src.get("kind", "")
        if kind in CLUSTER_SCOPED_KINDS:
            warnings.append(f"{kind}/{(src.get('metadata') or {}).get('name')} is cluster-scoped: "
                            "the operator does not manage it (install it with the chart)")
            continue
        obj = _clone(dict(src))
        m = obj.setdefault("metadata", {})
        m["namespace"] = ns
        m["labels"] = {**(m.get("labels") or {}), **labels}
        m["ownerReferences"] = [owner]
        for tpl in _pod_templates(obj):
            tm = tpl.setdefault("metadata", {})
            tm["labels"] = {**(tm.get("labels") or {}), **labels}
            if config_hash and tpl is not obj:
                tm["annotations"] = {**(tm.get("annotations") or {}), api.ANNOTATION_CONFIG_HASH: config_hash}
            if tpl is not obj:
                # the pods made from this template carry its hash: a pod with another one runs an older spec
                annotations = {k: v for k, v in (tm.get("annotations") or {}).items()
                               if k != api.ANNOTATION_TEMPLATE_HASH}
                tm["annotations"] = {**annotations, api.ANNOTATION_TEMPLATE_HASH: stable_hash(
                    {**tpl, "metadata": {**tm, "annotations": annotations}})}
        m.setdefault("annotations", {})
        m["annotations"].pop(api.ANNOTATION_APPLIED_HASH, None)
        m["annotations"][api.ANNOTATION_APPLIED_HASH] = stable_hash(obj)
        out.append(obj)
    return out, warnings


def template_hashes(desired: Sequence[dict]) -> set[str]:
    """The template hashes ``prepare`` stamped on the desired pod templates."""
    return {h for o in desired for tpl in _pod_templates(o) if tpl is not o
            if (h := ((tpl.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_TEMPLATE_HASH))}


def apply_reason(desired: dict, actual: dict | None) -> str | None:
    """Why ``desired`` must be applied over ``actual`` (None: nothing to write)."""
    if actual is None:
        return "create"
    have = ((actual.get("metadata") or {}).get("annotations") or {}).get(api.ANNOTATION_APPLIED_HASH)
    if have != desired["metadata"]["annotations"][api.ANNOTATION_APPLIED_HASH]:
        return "update"
    body = {k: v for k, v in desired.items() if k != "status"}
    if not contains(actual, body):
        return "drift"
    return None


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


class _Conditions:
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


def _endpoint(desired: Sequence[dict], name: str | None = None) -> str | None:
    """The URL of the Service named like the resource (a topology: the router or every role's API servers),
    else of the first Service."""
    services = [o for o in desired if o.get("kind") == "Service"]
    for o in sorted(services, key=lambda o: o["metadata"]["name"] != name):   # stable: the first otherwise
        ports = (o.get("spec") or {}).get("ports") or []
        if ports:
            m = o["metadata"]
            return f"http://{m['name']}.{m['namespace']}.svc:{ports[0].get('port')}"
    return None


# ----------------------------------------------------------------------------- the decision

def decide(cr: Mapping[str, Any], observed: Observed, *, validate: Validate, render: Render,
           now: dt.datetime, plan: Plan | None = None) -> Decision:
    meta = cr.get("metadata") or {}
    prev = status_model(cr.get("status"))
    before = prev or K3DeploymentStatus()
    generation = int(meta.get("generation") or 1)
    if meta.get("deletionTimestamp"):
        return Decision((), None, False)  # going away: garbage collection removes what we own
    doc = document_of(cr)
    conds = _Conditions(before.conditions, now, generation)
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
        _pod_conditions(conds, pods, cs)
    else:
        conds.set(api.CONDITION_VALID, True, api.REASON_VALIDATED, f"valid with {len(warnings)} warning(s)" if warnings else "valid")
        try:
            rendered = list(render(doc))
        except Exception as e:  # a valid spec that does not render is a bug to surface, not to crash on
            conds.set(api.CONDITION_RENDERED, False, api.REASON_RENDER_FAILED, f"{type(e).__name__}: {e}")
            _pod_conditions(conds, pods, cs)
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
            _pod_conditions(conds, pods, cs)
            phase, reason = _phase(pods, cs)
            roles = role_statuses(observed.owned, observed.pods, before.roles)
            if roles:
                status.roles = roles
                phase, reason = _topology_phase(conds, roles, phase, reason, observed.pods)
            hashes = template_hashes(desired)
            older = on_older_template(observed.pods, hashes) if hashes else []
            rolling = _rollout(observed.owned) or (
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
    if desired and (ep := _endpoint(desired, meta.get("name"))):
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
        actions += _coldstart_events(before.coldStart, coldstart)
    if phase != before.phase:
        actions.append(Emit("Warning" if phase in api.WARNING_PHASES else "Normal", phase,
                            f"phase {before.phase or 'None'} -> {phase}: {reason}"[:1024]))
    return Decision(tuple(actions), status, status != prev)


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


def _pod_conditions(conds: _Conditions, pods: PodSummary, cs: Mapping[str, Any] | None) -> None:
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


def _coldstart_events(prev: ColdStart | None, now: ColdStart) -> list[Emit]:
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


def _rollout(owned: Mapping[tuple[str, str, str], dict]) -> str:
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


# ----------------------------------------------------------------------------- topologies (LWS)

def _rfc3339(v: Any) -> float | None:
    if not isinstance(v, str):
        return None
    try:
        return dt.datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _pod_ready_at(pod: Mapping[str, Any]) -> float | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready" and c.get("status") == "True":
            return _rfc3339(c.get("lastTransitionTime"))
    return None


def _leader_cold_start(pod: Mapping[str, Any]) -> float | None:
    """Seconds from the leader's engine container start to its Ready condition (None while not ready)."""
    ready = _pod_ready_at(pod)
    started = [_rfc3339(((c.get("state") or {}).get("running") or {}).get("startedAt"))
               for c in (pod.get("status") or {}).get("containerStatuses") or []]
    started = [t for t in started if t is not None]
    if ready is None or not started:
        return None
    return round(max(0.0, ready - max(started)), 1)


def role_statuses(owned: Mapping[tuple[str, str, str], dict], pods: Sequence[Mapping[str, Any]],
                  previous: Sequence[RoleStatus]) -> list[RoleStatus]:
    """Per role: its LeaderWorkerSet's status as read now (never a copy kept from an earlier reconcile:
    kserve#6043), its groups from their leader pods, and group recreations counted against what the last
    status saw (a group's leader pod with a new uid was recreated by LWS). [] when nothing is an LWS."""
    sets: list[tuple[str, str, dict, dict]] = []   # (role, kind, lws spec, lws status)
    for (_av, kind, _name), obj in sorted(owned.items()):
        if kind == api.LWS_KIND:
            role = ((obj.get("metadata") or {}).get("labels") or {}).get(api.LABEL_ROLE)
            if role:
                sets.append((role, kind, obj.get("spec") or {}, obj.get("status") or {}))
        elif kind == api.DS_KIND:
            by_name = {r.get("name"): r for r in (obj.get("status") or {}).get("roleStatuses") or []}
            for r in (obj.get("spec") or {}).get("roles") or []:
                sets.append((r.get("name"), kind, r.get("spec") or {}, by_name.get(r.get("name")) or {}))
    before = {r.name: r for r in previous}
    out = []
    for role, kind, spec, st in sorted(sets, key=lambda s: s[0]):
        leaders = {}
        for p in pods:
            labels = (p.get("metadata") or {}).get("labels") or {}
            if labels.get(api.LABEL_ROLE) == role and labels.get(api.LWS_LABEL_WORKER_INDEX) == "0":
                try:
                    leaders[int(labels.get(api.LWS_LABEL_GROUP_INDEX, ""))] = p
                except ValueError:
                    continue
        prev_groups = {g.index: g for g in before[role].groups} if role in before else {}
        want = int(spec.get("replicas", 1) or 0)
        groups = []
        for idx in sorted(set(leaders) | {i for i in prev_groups if i < want}):
            pod, old = leaders.get(idx), prev_groups.get(idx)
            if pod is None:     # between LWS deleting a group's pods and creating them again
                groups.append(old.model_copy(update={"ready": False}))
                continue
            uid = (pod.get("metadata") or {}).get("uid") or ""
            recreated = old is not None and old.leaderUid != uid
            groups.append(GroupStatus(index=idx, leader=pod["metadata"]["name"], leaderUid=uid,
                                      ready=_pod_ready_at(pod) is not None,
                                      recreations=(old.recreations if old else 0) + (1 if recreated else 0)))
        entry = RoleStatus(
            name=role, kind=kind, instances=want,
            podsPerInstance=int((spec.get("leaderWorkerTemplate") or {}).get("size", 1) or 1),
            replicas=int(st.get("replicas", 0)), readyReplicas=int(st.get("readyReplicas", 0)),
            updatedReplicas=int(st.get("updatedReplicas", 0)),
            groupRecreations=sum(g.recreations for g in groups), groups=groups)
        colds = [c for p in leaders.values() if (c := _leader_cold_start(p)) is not None]
        if colds:
            entry.leaderColdStartSeconds = max(colds)
        out.append(entry)
    return out


def _ready_groups(role: RoleStatus, pods: Sequence[Mapping[str, Any]]) -> int:
    """Groups of ``role`` ready by both accounts: the LWS's count and the pods (every pod of the group ready).
    The smaller one: the two are written by different controllers at different moments, and a role is only as
    ready as the later of them says."""
    members: dict[str, list[bool]] = {}
    for p in pods:
        labels = (p.get("metadata") or {}).get("labels") or {}
        if labels.get(api.LABEL_ROLE) == role.name and labels.get(api.LWS_LABEL_GROUP_INDEX) is not None:
            members.setdefault(labels[api.LWS_LABEL_GROUP_INDEX], []).append(_pod_ready_at(p) is not None)
    by_pods = sum(1 for ready in members.values() if len(ready) >= role.podsPerInstance and all(ready))
    return min(role.readyReplicas, by_pods)


def _topology_phase(conds: _Conditions, roles: list[RoleStatus], phase: str, reason: str,
                    pods: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """A topology is Ready only when every role counts all its groups ready; a group recreated again and again
    raises the GroupRestartLoop condition and makes the resource Degraded. While a role is short, the Ready
    condition says which (reason GroupsNotReady), whatever the pod counts do meanwhile: one state, one reason."""
    looping = [f"{r.name} group {g.index} ({g.recreations}x)" for r in roles for g in r.groups
               if g.recreations >= RESTART_LOOP_RECREATIONS and not g.ready]
    total = sum(r.groupRecreations for r in roles)
    if looping:
        text = f"group(s) recreated {RESTART_LOOP_RECREATIONS}+ times and not ready: {', '.join(looping)}"
        conds.set(api.CONDITION_GROUP_RESTART_LOOP, True, api.REASON_GROUPS_RECREATED, text)
        if phase != api.PHASE_FAILED:
            return api.PHASE_DEGRADED, f"{api.REASON_GROUPS_RECREATED}: {text}"
        return phase, reason
    conds.set(api.CONDITION_GROUP_RESTART_LOOP, False, api.REASON_GROUPS_STABLE,
              f"{total} group recreation(s) observed, none looping")
    short = [f"{r.name} {ready}/{r.instances}" for r in roles if (ready := _ready_groups(r, pods)) < r.instances]
    if not short:
        return phase, reason
    text = f"ready groups per role: {', '.join(short)}"
    ready = conds.get(api.CONDITION_READY)
    if phase in (api.PHASE_READY, api.PHASE_WARM) or (ready is not None and ready.reason == api.REASON_PODS_NOT_READY):
        # the pods' count is replaced by the roles': it names the role, and it does not flip with the order in
        # which the kubelet and the LWS controller report
        conds.set(api.CONDITION_READY, False, api.REASON_GROUPS_NOT_READY, text)
    if phase in (api.PHASE_READY, api.PHASE_WARM):
        return api.PHASE_STARTING, f"{api.REASON_GROUPS_NOT_READY}: {text}"
    return phase, reason


def _phase(pods: PodSummary, cs: Mapping[str, Any] | None) -> tuple[str, str]:
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
