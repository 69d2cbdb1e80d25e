"""P/D rollouts that never mix revisions: the Surge strategy of docs/design/010-pd-rollouts.md §3 (pure).

A P/D deployment's engine objects belong to a **pair revision** (``revision_of``: a hash of every role's
LeaderWorkerSet template, so anything that shapes either engine: image, version, args, env, model, draft, parallel
shape; not ``instances``, which is the LWS's replica count). ``revisioned`` turns what the renderer made into that
revision's objects: each LWS ``<lws>-<R>``, each instance Service ``<lws>-<R>-<group>`` selecting only pods of
``R``, the router Deployment ``<name>-router-<R>`` whose arguments name only ``R``'s instance Services; the stable
Service ``<name>`` (the endpoint) and the per-role API Services select the **serving** revision by label
``LABEL_REVISION``. A request therefore reaches a router of one revision, which routes within it.

``plan`` decides the rollout from what is live: the serving revision is the one the stable Service selects (the
object that routes, not a status field that may lag it). While the spec's revision (the target) differs, both
revisions' objects are kept and the Service stays; once every role of the target has all groups ready and its
router is ready, the Service is switched (one object, one write); the previous revision is deleted after
``Policy.drain_s``. A target whose pods fail (pod failure, crash loop) or that is not ready within
``Policy.deadline_s`` fails: nothing of the serving revision is touched and the status says which revision failed
and why. A newer target replaces a failed or starting one (its objects are deleted). Recreate (§3 B) is not built:
the spec has no ``rollout.strategy`` field yet.

``LEGACY`` ("") is the revision of a P/D deployment's objects made before pair revisions (an operator upgrade): the
stable Service selects no revision and the LWSs carry no label. It is rolled like any serving revision: the first
revision comes up beside it and the Service switches once it is ready.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import RolloutStatus, RouteRole, RouterStatus
from gpustack_k3.operator.desired import stable_hash
from gpustack_k3.operator.kube import kube_time
from gpustack_k3.operator.podstate import parse_time, summarize_pods

LABEL_REVISION = api.PREFIX + "revision"          # the pair revision of an engine object (design 010 §2)
REASON_ROLLOUT_FAILED = "RolloutFailed"           # Event and phase reason: the target revision failed
EVENT_ROLLOUT_STARTED = "RolloutStarted"
EVENT_ROLLOUT_SWITCHED = "RolloutSwitched"
COMPONENT_ROUTER, COMPONENT_INSTANCE = "router", "instance"   # render/router.py's app.kubernetes.io/component
PD_KINDS = ("prefill", "decode")
LEGACY = ""     # the serving "revision" of objects made before pair revisions (see the module docstring)

Owned = Mapping[tuple[str, str, str], dict]


@dataclasses.dataclass(frozen=True)
class Policy:
    """``drain_s``: seconds the previous revision stays after the switch (requests in flight on its router
    finish); ``deadline_s``: seconds a target may take to become ready before the rollout fails."""
    drain_s: float = 60.0
    deadline_s: float = 3600.0


def _labels(obj: Mapping[str, Any]) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _component(obj: Mapping[str, Any]) -> str | None:
    return _labels(obj).get(api.LABEL_APP_COMPONENT)


def _is_router(obj: Mapping[str, Any]) -> bool:
    return obj.get("kind") == "Deployment" and _component(obj) == COMPONENT_ROUTER


def is_pd(rendered: Sequence[dict]) -> bool:
    """A prefill and a decode LeaderWorkerSet behind a router Deployment (the topologies this module rolls)."""
    kinds = {_labels(o).get(api.LABEL_ROLE_KIND) for o in rendered if o.get("kind") == api.LWS_KIND}
    return set(PD_KINDS) <= kinds and any(_is_router(o) for o in rendered)


def revision_of(rendered: Sequence[dict]) -> str:
    """The pair revision: 8 hex of every role's LWS template (its pods' image, command, env, size)."""
    parts = sorted([o["metadata"]["name"], (o.get("spec") or {}).get("leaderWorkerTemplate")]
                   for o in rendered if o.get("kind") == api.LWS_KIND)
    return stable_hash(parts)[:8]


def _with_revision(labels: Mapping[str, str] | None, rev: str) -> dict:
    return {**(labels or {}), LABEL_REVISION: rev}


def _rename_urls(args: Sequence[str], names: Mapping[str, str]) -> list[str]:
    """Router arguments with each instance URL ``http://<svc>.<ns>.svc:<port>`` pointing at the revision's Service."""
    out = []
    for a in args:
        if isinstance(a, str) and a.startswith("http://"):
            host, dot, rest = a[len("http://"):].partition(".")
            a = f"http://{names.get(host, host)}{dot}{rest}"
        out.append(a)
    return out


def _revision_lws(o: dict, rev: str) -> dict:
    o["metadata"]["name"] = f"{o['metadata']['name']}-{rev}"
    o["metadata"]["labels"] = _with_revision(o["metadata"].get("labels"), rev)
    lwt = o["spec"]["leaderWorkerTemplate"]
    for t in ("leaderTemplate", "workerTemplate"):
        if isinstance(lwt.get(t), dict):
            tm = lwt[t].setdefault("metadata", {})
            tm["labels"] = _with_revision(tm.get("labels"), rev)
    return o


def _revision_router(o: dict, rev: str, names: Mapping[str, str]) -> dict:
    o["metadata"]["name"] = f"{o['metadata']['name']}-{rev}"
    o["metadata"]["labels"] = _with_revision(o["metadata"].get("labels"), rev)
    spec = o["spec"]
    spec["selector"]["matchLabels"] = _with_revision(spec["selector"].get("matchLabels"), rev)
    tm = spec["template"].setdefault("metadata", {})
    tm["labels"] = _with_revision(tm.get("labels"), rev)
    for c in spec["template"]["spec"].get("containers") or []:
        c["args"] = _rename_urls(c.get("args") or [], names)
    return o


def revisioned(rendered: Sequence[dict], rev: str, selects: str, name: str) -> list[dict]:
    """The rendered objects as revision ``rev``'s (see the module docstring); the shared Services select
    revision ``selects`` (the serving one; ``LEGACY``: as rendered, without a revision)."""
    import copy
    objs = [copy.deepcopy(o) for o in rendered]
    names: dict[str, str] = {}
    for o in objs:
        if o.get("kind") == "Service" and _component(o) == COMPONENT_INSTANCE:
            base, _, group = o["metadata"]["name"].rpartition("-")
            names[o["metadata"]["name"]] = new = f"{base}-{rev}-{group}"
            o["metadata"]["name"] = new
            o["metadata"]["labels"] = _with_revision(o["metadata"].get("labels"), rev)
            o["spec"]["selector"] = _with_revision(o["spec"].get("selector"), rev)
        elif o.get("kind") == "Service" and (o.get("spec") or {}).get("selector") and selects != LEGACY:
            o["spec"]["selector"] = _with_revision(o["spec"]["selector"], selects)   # the endpoint, the role APIs
    for o in objs:
        if o.get("kind") == api.LWS_KIND:
            _revision_lws(o, rev)
        elif _is_router(o):
            _revision_router(o, rev, names)
    return objs


def revision_label(obj: Mapping[str, Any]) -> str | None:
    return _labels(obj).get(LABEL_REVISION)


def _rev(obj: Mapping[str, Any]) -> str:
    return revision_label(obj) or LEGACY


def _engine_object(obj: Mapping[str, Any]) -> bool:
    """An object of one revision: an LWS, the router Deployment, an instance Service."""
    return obj.get("kind") == api.LWS_KIND or _is_router(obj) or (
        obj.get("kind") == "Service" and _component(obj) == COMPONENT_INSTANCE)


def live_serving(owned: Owned, name: str) -> str | None:
    """The revision the live stable Service selects, if that revision's LeaderWorkerSets exist (``LEGACY``: a
    Service without a revision in its selector in front of LWSs without the label); None: nothing serves."""
    svc = next((o for (_av, kind, n), o in owned.items() if kind == "Service" and n == name), None)
    if svc is None:
        return None
    rev = ((svc.get("spec") or {}).get("selector") or {}).get(LABEL_REVISION, LEGACY)
    if any(k[1] == api.LWS_KIND and _rev(o) == rev for k, o in owned.items()):
        return rev
    return None


def of_revision(owned: Owned, rev: str) -> dict[tuple[str, str, str], dict]:
    """The owned engine objects of revision ``rev`` and the shared objects (the endpoint, the role APIs, config)."""
    return {k: o for k, o in owned.items() if not _engine_object(o) or _rev(o) == rev}


def pods_of(pods: Sequence[dict], rev: str) -> list[dict]:
    """The pods of revision ``rev`` (``LEGACY``: the pods without the label, made before pair revisions)."""
    return [p for p in pods if _rev(p) == rev]


def routes(router: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """The instance URLs a router Deployment's arguments name, per kind (``--prefill URL``, ``--decode URL``)."""
    out: dict[str, list[str]] = {k: [] for k in PD_KINDS}
    containers = ((((router or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
    args = (containers or [{}])[0].get("args") or []
    for flag, url in zip(args, args[1:]):
        if flag in ("--prefill", "--decode"):
            out[flag[2:]].append(url)
    return out


def router_of(objs: Mapping[Any, dict] | Sequence[dict], rev: str) -> dict | None:
    values = objs.values() if isinstance(objs, Mapping) else objs
    return next((o for o in values if _is_router(o) and _rev(o) == rev), None)


def router_status(live: Mapping[str, Any] | None, desired: Mapping[str, Any] | None) -> RouterStatus | None:
    """The serving router as read now (its spec from the live object, else the one about to be applied)."""
    obj = live or desired
    if obj is None:
        return None
    st = (live or {}).get("status") or {}
    ready = int(st.get("readyReplicas") or 0)
    return RouterStatus(name=obj["metadata"]["name"], revision=revision_label(obj), replicas=int(st.get("replicas") or 0),
                        readyReplicas=ready, ready=ready > 0,
                        routes=[RouteRole(role=k, instances=v) for k, v in routes(obj).items()])


def _revision_ready(owned: Owned, rev: str) -> bool:
    """Every LWS of ``rev`` has all its groups ready and its router at least one ready pod."""
    sets = [o for k, o in owned.items() if k[1] == api.LWS_KIND and _rev(o) == rev]
    router = router_of(owned, rev)
    return bool(sets) and router is not None and int((router.get("status") or {}).get("readyReplicas") or 0) > 0 \
        and all(int((o.get("status") or {}).get("readyReplicas") or 0) >= int((o.get("spec") or {}).get("replicas", 1))
                for o in sets)


@dataclasses.dataclass(frozen=True)
class Plan:
    desired: list[dict]                 # what to apply (the target's objects, the shared Services)
    keep: frozenset                     # owned keys not desired that must not be deleted
    serving: str                        # the revision the status's rows and roles describe after this reconcile
    status: RolloutStatus
    failed: str = ""                    # Facts.rollout_failed
    surging: str = ""                   # Facts.surging: a target revision is starting beside the serving one
    events: tuple[tuple[str, str, str], ...] = ()
    requeue_after: float | None = None


def _failure(pods: Sequence[dict], started: float | None, now: dt.datetime, policy: Policy) -> str:
    p = summarize_pods(pods, now=now.timestamp())
    if p.failed or p.crashing:
        return p.failed or p.crashing
    if started is not None and now.timestamp() - started > policy.deadline_s:
        return f"not ready within {policy.deadline_s:g} s (Policy.deadline_s)"
    return ""


def plan(rendered: Sequence[dict], owned: Owned, pods: Sequence[dict], before: RolloutStatus | None, name: str,
         now: dt.datetime, policy: Policy) -> Plan | None:
    """The rollout step of this reconcile (None: not a P/D topology)."""
    if not is_pd(rendered):
        return None
    target = revision_of(rendered)
    serving = live_serving(owned, name)
    serving = target if serving is None else serving
    if serving == target:
        return _settled(rendered, owned, target, before, name, now, policy)
    return _surging(rendered, owned, pods, serving, target, before, name, now, policy)


def _settled(rendered: Sequence[dict], owned: Owned, rev: str, before: RolloutStatus | None, name: str,
             now: dt.datetime, policy: Policy) -> Plan:
    """One revision serves: the previous one (if any) is kept until the drain is over, then deleted."""
    desired = revisioned(rendered, rev, rev, name)
    old = frozenset(k for k, o in owned.items() if _engine_object(o) and _rev(o) != rev)
    known = before is not None and before.servingRevision == rev and before.switchedAt
    # the switch is known from the status written with it; if that write was lost, the drain starts now
    switched_at, previous = (before.switchedAt, before.previousRevision) if known else \
        (kube_time(now), sorted(_rev(owned[k]) for k in old)[0]) if old else (None, None)
    switched = parse_time(switched_at) if switched_at else None
    left = policy.drain_s - (now.timestamp() - switched) if switched is not None else 0.0
    if old and left > 0:
        status = RolloutStatus(phase="Draining", servingRevision=rev, targetRevision=rev, switchedAt=switched_at,
                               previousRevision=previous,
                               message=f"revision {rev} serves; the previous revision is deleted "
                                       f"{policy.drain_s:g} s after the switch")    # stable: no write per requeue
        return Plan(desired, old, rev, status, requeue_after=left)
    status = RolloutStatus(phase="Idle", servingRevision=rev, targetRevision=rev, switchedAt=switched_at,
                           previousRevision=previous)
    return Plan(desired, frozenset(), rev, status)


def _surging(rendered: Sequence[dict], owned: Owned, pods: Sequence[dict], serving: str, target: str,
             before: RolloutStatus | None, name: str, now: dt.datetime, policy: Policy) -> Plan:
    """A target revision beside the serving one: start it, fail it, or switch to it once it is ready."""
    same = before is not None and before.targetRevision == target and before.phase in ("Starting", "Failed")
    started_at = before.startedAt if same and before.startedAt else kube_time(now)
    keep = frozenset(k for k, o in owned.items() if _engine_object(o) and _rev(o) == serving)
    base = RolloutStatus(phase="Starting", servingRevision=serving, targetRevision=target, startedAt=started_at)
    failure = _failure([p for p in pods if revision_label(p) == target], parse_time(started_at), now, policy)
    if failure:
        message = f"revision {target} failed: {failure}; revision {serving} keeps serving"
        events = () if same and before.phase == "Failed" else (("Warning", REASON_ROLLOUT_FAILED, message),)
        return Plan(revisioned(rendered, target, serving, name), keep, serving,
                    base.model_copy(update={"phase": "Failed", "message": message}), failed=message, events=events)
    if _revision_ready(owned, target):
        message = f"switched from revision {serving} to {target}"
        status = RolloutStatus(phase="Draining", servingRevision=target, targetRevision=target,
                               previousRevision=serving, startedAt=started_at, switchedAt=kube_time(now),
                               message=message)
        return Plan(revisioned(rendered, target, target, name), keep, target, status,
                    events=(("Normal", EVENT_ROLLOUT_SWITCHED, message),), requeue_after=policy.drain_s)
    message = f"revision {target} starting beside revision {serving}, which serves"
    events = () if same else (("Normal", EVENT_ROLLOUT_STARTED, message),)
    return Plan(revisioned(rendered, target, serving, name), keep, serving,
                base.model_copy(update={"message": message}), surging=message, events=events)

