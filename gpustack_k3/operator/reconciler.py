"""The K3Deployment reconciler: observe → decide → write, for one key at a time.

``reconcile(key)`` reads the resource, its children and its pods from the manager's caches (never from the API
server: level-triggered, every reconcile sees the whole current picture), asks the pure ``decide`` what to
apply, delete, emit and which status to write, and writes exactly that. Nothing is written when desired equals
actual (status included), so periodic resyncs are free. Our own write results go into the caches at once (a
reconcile that runs before the watch event arrives does not write twice). A 409 on the status write (a stale
resourceVersion) re-reads the resource and decides again; an object the API server refuses for good is
reported in the status (``Observed.apply_error``); other failures propagate to the manager, which requeues
the key with backoff. The caches, the queue, leader election and the workers are the manager's
(``gpustack_k3.operator.manager``).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart
from gpustack_k3.operator import decide as d
from gpustack_k3.operator import rollout as pd
from gpustack_k3.operator.desired import apply_reason, object_key
from gpustack_k3.operator.informer import Store
from gpustack_k3.operator.kube import kube_time
from gpustack_k3.operator.seams import ColdStartObserver, Key

log = logging.getLogger("gpustack_k3.operator")

# API answers to an object write that retrying cannot fix (bad request, forbidden, not found: a kind not
# served, method not allowed, unsupported media type, invalid / immutable field): reported in the status
PERMANENT_STATUSES = frozenset({400, 403, 404, 405, 415, 422})


@dataclasses.dataclass(frozen=True)
class Caches:
    """The manager's informer caches the reconciler reads: the resources, their children per kind, their pods."""
    crs: Store
    owned: Mapping[tuple[str, str], Store]
    pods: Store


@dataclasses.dataclass(frozen=True)
class Hooks:
    """The project's validation, rendering and plan summary (``gpustack_k3.operator.hooks``), or stand-ins."""
    validate: d.Validate
    render: d.Render
    plan: d.Plan | None = None

    def memoized(self) -> Hooks:
        return Hooks(memoized(self.validate), memoized(self.render), memoized(self.plan) if self.plan else None)


def memoized(fn: Callable[[dict], Any], size: int = 4096) -> Callable[[dict], Any]:
    """A pure hook cached by document (``functools.lru_cache`` on its canonical JSON): reconciles of an
    unchanged generation do not re-render."""
    cached = functools.lru_cache(maxsize=size)(lambda key: fn(json.loads(key)))
    return lambda doc: cached(json.dumps(doc, sort_keys=True, separators=(",", ":")))


class Reconciler:
    def __init__(self, kube: Any, caches: Caches, hooks: Hooks, *, metrics: Any, identity: str,
                 coldstart: ColdStartObserver, warmup: Any = None,
                 clock: Callable[[], dt.datetime] | None = None,
                 stopping: Callable[[], bool] = lambda: False, kvcheck: Any = None,
                 rollout: pd.Policy = pd.Policy(), requeue: Callable[[Key, float], None] | None = None) -> None:
        self.kube, self.caches, self.hooks = kube, caches, hooks.memoized()
        self.metrics, self.identity = metrics, identity
        self.coldstart, self.warmup = coldstart, warmup
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self.stopping = stopping
        # P/D: the KVTransfer check (operator/kvcheck.py), the rollout policy, and how to reconcile a key again
        # later (the manager's queue.add_after): the check's interval and a drain's end need no event to happen
        self.kvcheck, self.rollout, self.requeue = kvcheck, rollout, requeue
        self._read: dict[tuple[Key, str, str, str], dict] = {}  # applied children of kinds without informer
        self._read_lock = threading.Lock()

    def resynced(self) -> None:
        """A resync began: children of kinds without informer are read from the API server again."""
        with self._read_lock:
            self._read.clear()

    def close(self) -> None:
        self.coldstart.close()
        if self.warmup is not None:
            self.warmup.close()

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: Key) -> d.Decision | None:
        from kubernetes.client.rest import ApiException
        ns, name = key
        cr = self.caches.crs.get(ns, name)
        for attempt in range(3):
            if cr is None:
                self._forget(key)
                return None
            try:
                return self._reconcile_once(key, cr)
            except ApiException as e:
                if e.status != 409 or attempt == 2:
                    raise
                log.info("conflict on %s/%s: re-reading", ns, name)
                self.metrics.errors.labels(cause="conflict_reread").inc()
                cr = self.kube.get(api.API_VERSION, api.KIND, ns, name)
                if cr is not None:
                    self.caches.crs.upsert(cr)
        return None

    def _forget(self, key: Key) -> None:
        self.coldstart.forget(key)
        if self.kvcheck is not None:
            self.kvcheck.forget(key)
        if self.warmup is not None:
            self.warmup.forget(key)
        with self._read_lock:
            for k in [k for k in self._read if k[0] == key]:
                del self._read[k]

    def observe(self, key: Key, cr: dict) -> d.Observed:
        uid = (cr.get("metadata") or {}).get("uid")
        owned: dict[tuple[str, str, str], dict] = {}
        for (av, kind), store in self.caches.owned.items():
            for obj in store.by_index(key):
                refs = (obj.get("metadata") or {}).get("ownerReferences") or []
                if any(r.get("uid") == uid and r.get("controller") for r in refs):
                    owned[(obj.get("apiVersion") or av, obj.get("kind") or kind, obj["metadata"]["name"])] = obj
        pods = list(self.caches.pods.by_index(key))
        coldstart = self.coldstart.observe(key, pods)
        if self.warmup is not None and coldstart is not None:
            warm = self.warmup.observe(key, cr, pods)
            if warm is not None:
                coldstart = dataclasses.replace(coldstart, status=coldstart.status.model_copy(
                    update={"warmup": ColdStart(warmup=warm).warmup}))
        kv = self._kv_transfer(key, cr, owned) if self.kvcheck is not None else None
        return d.Observed(owned=owned, pods=pods, coldstart=coldstart, kv_transfer=kv)

    def _kv_transfer(self, key: Key, cr: dict, owned: Mapping[tuple[str, str, str], dict]) -> Any:
        """The KVTransfer check of a P/D resource (docs/design/010-pd-rollouts.md §4): once it is Ready (or not Ready
        only because KV did not move, so that recovery is seen), through the instances its serving router names.
        None: not a P/D resource, not Ready, or no check decided yet."""
        if not _kv_checked(d.status_model(cr.get("status"))):
            return None
        serving = pd.live_serving(owned, key[1])
        routes = pd.routes(pd.router_of(owned, serving)) if serving is not None else {}
        if not routes.get("prefill") or not routes.get("decode"):
            return None
        return self.kvcheck.observe(key, routes["prefill"], routes["decode"])

    def _decide(self, cr: dict, observed: d.Observed) -> d.Decision:
        return d.decide(cr, observed, validate=self.hooks.validate, render=self.hooks.render, now=self.clock(),
                        plan=self.hooks.plan, rollout=self.rollout)

    def _reconcile_once(self, key: Key, cr: dict) -> d.Decision:
        observed = self.observe(key, cr)
        decision = self._decide(cr, observed)
        try:
            if not self._write_objects(key, cr, decision, observed):
                return decision
        except _Refused as r:
            e = r.error
            refusal = f"{r.what}: HTTP {e.status} {e.reason}: {_api_message(e)}"
            log.warning("%s/%s: the API server refused %s", key[0], key[1], refusal)
            self.metrics.errors.labels(cause="apply_refused").inc()
            decision = self._decide(cr, dataclasses.replace(observed, apply_error=refusal))
        if decision.status_changed:
            meta = cr["metadata"]
            body = {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
                    "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
                    "status": decision.status}
            result = self.kube.apply(body, subresource="status", resource_version=meta.get("resourceVersion"))
            self.metrics.writes.labels(verb="apply", kind=f"{api.KIND}/status").inc()
            self.caches.crs.upsert(result, if_newer=True)
        for ev in decision.events:
            self._post_event(cr, ev)
        self._requeue(key, decision)
        return decision

    def _requeue(self, key: Key, decision: d.Decision) -> None:
        """Reconcile ``key`` again when nothing else would: a drain ends, or the next KVTransfer check is due (a
        P/D resource, Ready as this decision wrote it: the check's first scrape is taken at once)."""
        if self.requeue is None:
            return
        delays = [decision.requeue_after] if decision.requeue_after is not None else []
        model = decision.model
        if self.kvcheck is not None and model is not None and model.router is not None and _kv_checked(model):
            # never sooner than a second (or the interval): a check that cannot scrape yet must not spin
            delays.append(max(self.kvcheck.due_in(key), min(1.0, self.kvcheck.interval_s)))
        if delays:
            self.requeue(key, min(delays))

    def _write_objects(self, key: Key, cr: dict, decision: d.Decision, observed: d.Observed) -> bool:
        """Apply/delete what the decision says; False when the resource turned out to be going away."""
        from kubernetes.client.rest import ApiException
        meta = cr.get("metadata") or {}
        carried = d.status_model(cr.get("status"))
        if carried is not None and carried.observedGeneration == meta.get("generation") and any(
                isinstance(a, d.Apply) and a.why == "create" for a in decision.writes):
            # a child we made before is gone: if the resource itself was deleted (garbage collection
            # took its children and our cache has not seen the deletion yet), do not bring them back
            fresh = self.kube.get(api.API_VERSION, api.KIND, key[0], key[1])
            if fresh is None or (fresh.get("metadata") or {}).get("uid") != meta.get("uid") or (
                    fresh.get("metadata") or {}).get("deletionTimestamp"):
                log.info("%s/%s is being deleted: not re-creating its objects", key[0], key[1])
                return False
        for action in decision.writes:
            if self.stopping():   # stopping (or no longer leading): no further writes
                return False
            try:
                self._write_one(key, action, observed)
            except ApiException as e:
                if e.status in PERMANENT_STATUSES:
                    what = (f"{action.obj.get('kind')}/{action.obj['metadata']['name']}" if isinstance(action, d.Apply)
                            else f"{action.kind}/{action.name}")
                    raise _Refused(what, e) from None
                raise
        return True

    def _write_one(self, key: Key, action: d.Apply | d.Delete, observed: d.Observed) -> None:
        if isinstance(action, d.Apply):
            av, kind, oname = object_key(action.obj)
            read_key = (key, av, kind, oname)
            informed = (av, kind) in self.caches.owned
            if not informed:
                with self._read_lock:
                    live = self._read.get(read_key)
                if live is None:
                    live = self.kube.get(av, kind, key[0], oname)
                if live is not None and apply_reason(action.obj, live) is None:
                    with self._read_lock:
                        self._read[read_key] = live
                    return
            result = self.kube.apply(action.obj)
            self.metrics.writes.labels(verb="apply", kind=kind).inc()
            if informed:
                self.caches.owned[(av, kind)].upsert(result, if_newer=True)
            else:
                with self._read_lock:
                    self._read[read_key] = result
        else:
            live = observed.owned.get((action.api_version, action.kind, action.name))
            uid = (live or {}).get("metadata", {}).get("uid")
            self.kube.delete(action.api_version, action.kind, action.namespace, action.name, uid=uid)
            self.metrics.writes.labels(verb="delete", kind=action.kind).inc()

    def _post_event(self, cr: dict, ev: d.Emit) -> None:
        meta = cr["metadata"]
        now = kube_time(self.clock())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": meta.get("namespace")},
                "involvedObject": {"apiVersion": cr.get("apiVersion", api.API_VERSION), "kind": cr.get("kind", api.KIND),
                                   "name": meta["name"], "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                                   "resourceVersion": meta.get("resourceVersion")},
                "reason": ev.reason, "message": ev.message, "type": ev.type,
                "source": {"component": "gpustack-k3-operator"}, "reportingComponent": "gpustack-k3-operator",
                "reportingInstance": self.identity, "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.kube.create(body, retry=False)
            self.metrics.writes.labels(verb="create", kind="Event").inc()
        except Exception as e:  # events are best effort, as in client-go's recorder
            log.warning("could not record event %s for %s/%s: %s", ev.reason, meta.get("namespace"), meta["name"], e)


def _kv_checked(status: Any) -> bool:
    """Whether the KVTransfer check runs (docs/design/010-pd-rollouts.md §4): once Ready, and while not Ready only
    because KV did not move (so that its recovery is seen)."""
    ready = next((c for c in status.conditions if c.type == api.CONDITION_READY), None) if status else None
    return ready is not None and (ready.status == "True" or ready.reason == api.REASON_KV_TRANSFER_FAILED)


class _Refused(Exception):
    """The API server refused one object for good (a PERMANENT_STATUSES answer)."""

    def __init__(self, what: str, error: Any) -> None:
        super().__init__(what)
        self.what, self.error = what, error


def _api_message(e: Any) -> str:
    try:
        return str(json.loads(e.body).get("message") or e.body)[:600]
    except (TypeError, ValueError, AttributeError):
        return str(getattr(e, "body", "") or "")[:600]
