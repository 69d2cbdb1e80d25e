"""The K3Deployment controller: informers → work queue → reconcile(key) → decide() → writes.

Level-triggered: events only say *which* resource to look at; ``reconcile(key)`` reads the current
resource, its owned objects and pods from the informer caches and lets the pure ``decide`` say
what to apply, delete, emit and which status to write. Nothing is written when desired equals
actual (status included), so periodic resyncs are free. Our own write results are recorded in the
caches at once (a reconcile that runs before the watch event arrives does not write twice).
A 409 (stale resourceVersion on the status write) re-reads the resource and decides again;
other failures requeue the key with jittered exponential backoff.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.api.v1alpha1.status import ColdStart
from gpustack_k3.metrics import ColdStartStatusFigures
from gpustack_k3.operator import decide as d
from gpustack_k3.operator import hooks
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from gpustack_k3.operator.health import (
    HealthServer,
    OperatorMetrics,
    ResourcesByPhase,
    coldstart_metrics,
)
from gpustack_k3.operator.informer import Informer, Store
from gpustack_k3.operator.kube import Kube, api_client_from, without_transport_retries
from gpustack_k3.operator.leader import LeaderElector
from gpustack_k3.operator.seams import ColdStartFactory, ColdStartObserver, NoColdStart
from gpustack_k3.operator.warmup import PodWarmup
from gpustack_k3.operator.workqueue import WorkQueue

log = logging.getLogger("gpustack_k3.operator")

CR_API_VERSION = api.API_VERSION
# Owned kinds watched through informers (changes and deletions by others are seen at once). Other
# kinds the render may emit are read with GET when first applied and again after every resync.
OWNED_KINDS: tuple[tuple[str, str], ...] = (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                                            ("v1", "Service"), ("v1", "ConfigMap"),
                                            ("networking.k8s.io/v1", "NetworkPolicy"),
                                            (api.LWS_API_VERSION, api.LWS_KIND), (api.DS_API_VERSION, api.DS_KIND))
# Owned kinds of CRDs a cluster may not have (LeaderWorkerSet, DisaggregatedSet for spec.roles): watched only when
# served, so an operator on a cluster without LWS still starts (a topology's apply then reports the 404).
OPTIONAL_KINDS = frozenset({(api.LWS_API_VERSION, api.LWS_KIND), (api.DS_API_VERSION, api.DS_KIND)})
LEASE_NAME = "gpustack-k3-operator"
Key = tuple[str, str]


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("gpustack-k3")
    except Exception:  # running from a source tree
        return "0+source"


def _owner_key(obj: dict) -> Key | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == api.KIND and ref.get("apiVersion", "").startswith(api.GROUP + "/"):
            return (meta.get("namespace") or "", ref.get("name") or "")
    return None


def _pod_key(obj: dict) -> Key | None:
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(api.LABEL_DEPLOYMENT)
    return (meta.get("namespace") or "", name) if name else None


def default_hooks() -> tuple[d.Validate, d.Render, d.Plan | None]:
    """The project's validation, rendering and plan summary (``gpustack_k3.operator.hooks``)."""
    return hooks.validate, hooks.render, hooks.plan


def memoized(fn: Callable[[dict], Any], size: int = 4096) -> Callable[[dict], Any]:
    """A pure hook cached by document (``functools.lru_cache`` on its canonical JSON): reconciles of an
    unchanged generation do not re-render."""
    cached = functools.lru_cache(maxsize=size)(lambda key: fn(json.loads(key)))
    return lambda doc: cached(json.dumps(doc, sort_keys=True, separators=(",", ":")))


class Operator:
    def __init__(self, api_client: Any, *, namespaces: Sequence[str] = (), resync_s: float = 300.0,
                 leader_elect: bool = False, metrics_port: int | None = None, metrics_host: str = "0.0.0.0",
                 validate: d.Validate | None = None, render: d.Render | None = None, plan: d.Plan | None = None,
                 coldstart_factory: ColdStartFactory | None | str = "pod-logs", workers: int = 4, identity: str | None = None,
                 lease_name: str = LEASE_NAME, lease_namespace: str | None = None, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0, watch_timeout_s: int = 300,
                 owned_kinds: Iterable[tuple[str, str]] = OWNED_KINDS,
                 request_timeout: tuple[float, float] = (10.0, 60.0),
                 clock: Callable[[], dt.datetime] | None = None,
                 warmup_fn: Callable[..., dict] | str | None = "probe") -> None:
        if validate is None or render is None:
            dv, dr, dp = default_hooks()
            validate, render, plan = validate or dv, render or dr, plan or dp
        self.validate, self.render = memoized(validate), memoized(render)
        self.plan = memoized(plan) if plan is not None else None
        self.identity = identity or f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        api_client.user_agent = f"gpustack-k3-operator/{_version()} ({self.identity})"
        own_api = without_transport_retries(api_client)
        self.request_timeout = request_timeout
        # every call has a time limit: a hung connection must not pin a worker (and its key) forever
        self.kube = Kube(own_api, user_agent=api_client.user_agent, field_manager=api.FIELD_MANAGER,
                         timeout=request_timeout)
        self.namespaces = list(dict.fromkeys(namespaces))
        self.resync_s, self.workers_n, self.watch_timeout_s = resync_s, workers, watch_timeout_s
        self.clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self.metrics = OperatorMetrics()
        self.queue = WorkQueue()
        self.crs = Store()
        self.owned_kinds = tuple(owned_kinds)
        self.owned = {k: Store(index_fn=_owner_key) for k in self.owned_kinds}
        self.pods = Store(index_fn=_pod_key)
        self._memo: dict[tuple[Key, str, str, str], dict] = {}  # applied objects of kinds without informer
        self._memo_lock = threading.Lock()
        # cold-start histograms of the log tracker, on the operator's registry (served at /metrics)
        self.coldstart_metrics = coldstart_metrics(self.metrics.registry)
        self.metrics.registry.register(ResourcesByPhase(self.crs))
        self.metrics.registry.register(ColdStartStatusFigures(self.crs))
        if coldstart_factory == "pod-logs":  # the default: follow engine pod logs
            coldstart_factory = pod_logs
        self.coldstart: ColdStartObserver = (coldstart_factory(api_client, self.queue.add, self.coldstart_metrics)
                                             if callable(coldstart_factory) else NoColdStart())
        # spec.startup.warmup after Ready, with the probe's code; its warm phase goes to the observer's trackers
        self.warmup: PodWarmup | None = None
        if warmup_fn is not None and hasattr(self.coldstart, "report_phase"):
            self.warmup = PodWarmup(self.coldstart, self.queue.add,
                                    warm_fn=None if warmup_fn == "probe" else warmup_fn)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._leading = threading.Event()
        self.informers: list[Informer] = []
        self.health: HealthServer | None = None
        self._metrics_port, self._metrics_host = metrics_port, metrics_host
        self.elector: LeaderElector | None = None
        if leader_elect:
            lease_ns = lease_namespace or os.environ.get("POD_NAMESPACE") or (self.namespaces or ["default"])[0]
            # Lease calls are never retried nor slow: a leader must notice a failed renewal within
            # renew_deadline, before the lease can expire and a standby take over (client-go does the same).
            lease_kube = Kube(without_transport_retries(api_client), user_agent=self.kube.api.user_agent,
                              field_manager=api.FIELD_MANAGER, attempts=1, timeout=(retry_period, retry_period))
            self.elector = LeaderElector(lease_kube, name=lease_name, namespace=lease_ns, identity=self.identity,
                                         lease_duration=lease_duration, renew_deadline=renew_deadline,
                                         retry_period=retry_period, on_started=self._start_leading,
                                         on_stopped=self._stop_leading)
        self.reconcile_count = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Operator:
        if self._metrics_port is not None:
            self.health = HealthServer(self.metrics, host=self._metrics_host, port=self._metrics_port,
                                       healthy=self.healthy, ready=self.ready).start()
        scopes: list[str | None] = list(self.namespaces) or [None]
        on_relist = lambda kind: self.metrics.relists.labels(kind=kind).inc()
        served = {k for k in self.owned_kinds if k in OPTIONAL_KINDS and self.kube.served(*k)}
        if OPTIONAL_KINDS - served:
            log.info("not watched (not served by this cluster): %s", ", ".join(sorted(k for _, k in OPTIONAL_KINDS - served)))
        for ns in scopes:
            self.informers.append(Informer(self.kube, CR_API_VERSION, api.KIND, ns, self.crs, self._on_cr,
                                           watch_timeout_s=self.watch_timeout_s, on_relist=on_relist))
            for av, kind in self.owned_kinds:
                if (av, kind) in OPTIONAL_KINDS and (av, kind) not in served:
                    continue
                self.informers.append(Informer(self.kube, av, kind, ns, self.owned[(av, kind)], self._on_owned,
                                               label_selector=f"{api.LABEL_APP_MANAGED_BY}={api.FIELD_MANAGER}",
                                               watch_timeout_s=self.watch_timeout_s, on_relist=on_relist))
            self.informers.append(Informer(self.kube, "v1", "Pod", ns, self.pods, self._on_pod,
                                           label_selector=api.LABEL_DEPLOYMENT, watch_timeout_s=self.watch_timeout_s,
                                           on_relist=on_relist))
        for inf in self.informers:
            inf.start()
        if self.elector is not None:
            self.elector.start()
        else:
            self._start_leading()
        return self

    def _start_leading(self) -> None:
        self.metrics.leader.set(1)
        self._leading.set()
        for inf in self.informers:  # decide only on a complete picture
            while not inf.synced.wait(0.1):
                if self._stop.is_set():
                    return
        if self._stop.is_set() or not self._leading.is_set():   # lost the lease while the caches synced
            return
        for i in range(self.workers_n):
            t = threading.Thread(target=self._worker, name=f"reconcile-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        t = threading.Thread(target=self._resync_loop, name="resync", daemon=True)
        t.start()
        self._threads.append(t)
        for key in self.crs.list_keys():
            self.queue.add(key)

    def _stop_leading(self) -> None:
        self.metrics.leader.set(0)
        self._leading.clear()
        self._stop.set()  # like controller-runtime: a replica that lost its lease stops acting
        self.queue.shutdown()

    def stop(self) -> None:
        self._stop.set()
        self.queue.shutdown()
        # finish in-flight reconciles before letting a standby take over: a call ends within its timeout
        wait = time.monotonic() + self.request_timeout[0] + self.request_timeout[1] + 5
        for t in self._threads:
            t.join(max(0.0, wait - time.monotonic()))
        busy = any(t.is_alive() for t in self._threads)
        self._leading.clear()
        if self.elector is not None:
            # a worker still inside a call might yet write: then the lease is left to expire, not handed over
            self.elector.stop(release=not busy)
        for inf in self.informers:
            inf.stop()
        for inf in self.informers:
            inf.join(10)
        self.coldstart.close()
        if self.warmup is not None:
            self.warmup.close()
        for client in {id(c): c for c in (self.kube.api, getattr(self.elector, "kube", None) and self.elector.kube.api)
                       if c is not None}.values():   # the pools this operator opened for itself
            try:
                client.close()
            except Exception:  # already closed
                pass
        if self.health is not None:
            self.health.stop()
        self.metrics.leader.set(0)

    @property
    def leading(self) -> bool:
        return self._leading.is_set()

    @property
    def lost_leadership(self) -> bool:
        return self.elector is not None and self.elector.lost.is_set()

    def healthy(self) -> tuple[bool, str]:
        dead = [inf.kind for inf in self.informers if not inf.alive]
        if dead and not self._stop.is_set():
            return False, f"informers stopped: {', '.join(dead)}"
        if self.lost_leadership:
            return False, "lost the leader lease"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        waiting = [inf.kind for inf in self.informers if not inf.synced.is_set()]
        if waiting:
            return False, f"caches not synced: {', '.join(sorted(set(waiting)))}"
        return True, "ok" if self.elector is None or self.leading else "ok (standby)"

    def wait_idle(self, timeout: float = 30.0, settle: float = 0.3) -> bool:
        """True once the queue stayed idle for ``settle`` seconds (tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        quiet_since = None
        while time.monotonic() < deadline:
            if self.queue.idle and self.queue.pending_delayed == 0:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle:
                    return True
            else:
                quiet_since = None
            time.sleep(0.02)
        return False

    # ------------------------------------------------------------------ events → keys
    def _enqueue(self, key: Key | None) -> None:
        if key is not None:
            self.queue.add(key)
            self.metrics.queue_depth.set(len(self.queue))

    def _on_cr(self, etype: str, obj: dict) -> None:
        m = obj.get("metadata") or {}
        self._enqueue((m.get("namespace") or "", m.get("name") or ""))

    def _on_owned(self, etype: str, obj: dict) -> None:
        self._enqueue(_owner_key(obj))

    def _on_pod(self, etype: str, obj: dict) -> None:
        self._enqueue(_pod_key(obj))

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_s):
            with self._memo_lock:  # objects without informer are re-read once per resync
                self._memo.clear()
            for key in self.crs.list_keys():
                self.queue.add(key)

    def _worker(self) -> None:
        while not self._stop.is_set():
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            t0 = time.monotonic()
            try:
                self.reconcile(key)
                self.queue.forget(key)
                self.metrics.reconciles.labels(result="success").inc()
            except Exception as e:
                from kubernetes.client.rest import ApiException
                cause = f"http_{e.status}" if isinstance(e, ApiException) else type(e).__name__
                self.metrics.errors.labels(cause=cause).inc()
                self.metrics.reconciles.labels(result="error").inc()
                delay = self.queue.add_rate_limited(key)
                log.warning("reconcile %s/%s failed (%s); retry in %.2fs", key[0], key[1],
                            str(e).splitlines()[0] if str(e) else cause, delay)
            finally:
                self.metrics.duration.observe(time.monotonic() - t0)
                self.queue.done(key)
                self.metrics.queue_depth.set(len(self.queue))

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: Key) -> d.Decision | None:
        from kubernetes.client.rest import ApiException
        self.reconcile_count += 1
        ns, name = key
        cr = self.crs.get(ns, name)
        for attempt in range(3):
            if cr is None:
                self.coldstart.forget(key)
                if self.warmup is not None:
                    self.warmup.forget(key)
                with self._memo_lock:
                    for k in [k for k in self._memo if k[0] == key]:
                        del self._memo[k]
                return None
            try:
                return self._reconcile_once(key, cr)
            except ApiException as e:
                if e.status != 409 or attempt == 2:
                    raise
                log.info("conflict on %s/%s: re-reading", ns, name)
                self.metrics.errors.labels(cause="conflict_reread").inc()
                cr = self.kube.get(CR_API_VERSION, api.KIND, ns, name)
                if cr is not None:
                    self.crs.upsert(cr)
        return None

    def observe(self, key: Key, cr: dict) -> d.Observed:
        uid = (cr.get("metadata") or {}).get("uid")
        owned: dict[tuple[str, str, str], dict] = {}
        for (av, kind), store in self.owned.items():
            for obj in store.by_index(key):
                refs = (obj.get("metadata") or {}).get("ownerReferences") or []
                if any(r.get("uid") == uid and r.get("controller") for r in refs):
                    owned[(obj.get("apiVersion") or av, obj.get("kind") or kind, obj["metadata"]["name"])] = obj
        pods = [p for p in self.pods.by_index(key)]
        coldstart = self.coldstart.observe(key, pods)
        if self.warmup is not None and coldstart is not None:
            warm = self.warmup.observe(key, cr, pods)
            if warm is not None:
                coldstart = {**coldstart, **ColdStart(warmup=warm).model_dump(exclude_unset=True)}
        return d.Observed(owned=owned, pods=pods, coldstart=coldstart)

    def _reconcile_once(self, key: Key, cr: dict) -> d.Decision:
        observed = self.observe(key, cr)
        decision = d.decide(cr, observed, validate=self.validate, render=self.render, now=self.clock(),
                            plan=self.plan)
        try:
            if not self._write_objects(key, cr, decision, observed):
                return decision
        except _Refused as r:
            e = r.error
            refusal = f"{r.what}: HTTP {e.status} {e.reason}: {_api_message(e)}"
            log.warning("%s/%s: the API server refused %s", key[0], key[1], refusal)
            self.metrics.errors.labels(cause="apply_refused").inc()
            decision = d.decide(cr, dataclasses.replace(observed, apply_error=refusal), validate=self.validate,
                                render=self.render, now=self.clock(), plan=self.plan)
        if decision.status_changed:
            meta = cr["metadata"]
            body = {"apiVersion": cr.get("apiVersion", CR_API_VERSION), "kind": cr.get("kind", api.KIND),
                    "metadata": {"name": meta["name"], "namespace": meta.get("namespace")},
                    "status": decision.status}
            result = self.kube.apply(body, subresource="status", resource_version=meta.get("resourceVersion"))
            self.metrics.writes.labels(verb="apply", kind=f"{api.KIND}/status").inc()
            self.crs.upsert(result, if_newer=True)
        for ev in decision.events:
            self._post_event(cr, ev)
        return decision

    def _write_objects(self, key: Key, cr: dict, decision: d.Decision, observed: d.Observed) -> bool:
        """Apply/delete what the decision says; False when the resource turned out to be going away."""
        from kubernetes.client.rest import ApiException
        informed = set(self.owned_kinds)
        meta = cr.get("metadata") or {}
        if (cr.get("status") or {}).get("observedGeneration") == meta.get("generation") and any(
                isinstance(a, d.Apply) and a.why == "create" for a in decision.writes):
            # an object we made before is gone: if the resource itself was deleted (garbage collection
            # took its objects and our cache has not seen the deletion yet), do not bring them back
            fresh = self.kube.get(CR_API_VERSION, api.KIND, key[0], key[1])
            if fresh is None or (fresh.get("metadata") or {}).get("uid") != meta.get("uid") or (
                    fresh.get("metadata") or {}).get("deletionTimestamp"):
                log.info("%s/%s is being deleted: not re-creating its objects", key[0], key[1])
                return False
        for action in decision.writes:
            if self._stop.is_set():   # stopping (or no longer leading): no further writes
                return False
            try:
                self._write_one(key, action, observed, informed)
            except ApiException as e:
                if e.status in PERMANENT_STATUSES:
                    what = (f"{action.obj.get('kind')}/{action.obj['metadata']['name']}" if isinstance(action, d.Apply)
                            else f"{action.kind}/{action.name}")
                    raise _Refused(what, e) from None
                raise
        return True

    def _write_one(self, key: Key, action: d.Apply | d.Delete, observed: d.Observed,
                   informed: set[tuple[str, str]]) -> None:
        if isinstance(action, d.Apply):
            av, kind, oname = d.object_key(action.obj)
            memo_key = (key, av, kind, oname)
            if (av, kind) not in informed:
                with self._memo_lock:
                    live = self._memo.get(memo_key)
                if live is None:
                    live = self.kube.get(av, kind, key[0], oname)
                if live is not None and d.apply_reason(action.obj, live) is None:
                    with self._memo_lock:
                        self._memo[memo_key] = live
                    return
            result = self.kube.apply(action.obj)
            self.metrics.writes.labels(verb="apply", kind=kind).inc()
            if (av, kind) in informed:
                self.owned[(av, kind)].upsert(result, if_newer=True)
            else:
                with self._memo_lock:
                    self._memo[memo_key] = result
        else:
            live = observed.owned.get((action.api_version, action.kind, action.name))
            uid = (live or {}).get("metadata", {}).get("uid")
            self.kube.delete(action.api_version, action.kind, action.namespace, action.name, uid=uid)
            self.metrics.writes.labels(verb="delete", kind=action.kind).inc()

    def _post_event(self, cr: dict, ev: d.Emit) -> None:
        meta = cr["metadata"]
        now = self.clock().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{time.time_ns():x}", "namespace": meta.get("namespace")},
                "involvedObject": {"apiVersion": cr.get("apiVersion", CR_API_VERSION), "kind": cr.get("kind", api.KIND),
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


# API answers to an object write that retrying cannot fix (bad request, forbidden, not found: a kind not
# served, method not allowed, unsupported media type, invalid / immutable field): reported in the status
PERMANENT_STATUSES = frozenset({400, 403, 404, 405, 415, 422})


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


def run(namespaces: Sequence[str], metrics_port: int | None, resync_s: float, leader_elect: bool,
        kubeconfig: str | None = None, *, metrics_host: str = "0.0.0.0", stop: threading.Event | None = None,
        **operator_kwargs: Any) -> int:
    """Run the operator until SIGTERM/SIGINT (or ``stop`` is set). In-cluster when ``kubeconfig`` is
    None and a service account is mounted, else ``kubeconfig`` or ~/.kube/config. Returns the exit
    code: 0 on a requested stop, 1 when the leader lease was lost (the pod restarts, as with
    controller-runtime)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    client = api_client_from(kubeconfig)
    op = Operator(client, namespaces=namespaces, resync_s=resync_s, leader_elect=leader_elect,
                  metrics_port=metrics_port, metrics_host=metrics_host, **operator_kwargs)
    op.start()
    log.info("operator %s started: namespaces=%s leader_elect=%s metrics=%s", op.identity,
             ",".join(namespaces) or "all", leader_elect, op.health.port if op.health else "off")
    try:
        while not stop.wait(0.5):
            if op.lost_leadership:
                return 1
    finally:
        op.stop()
        client.close()
    return 0
