"""The operator's manager (controller-runtime's split: a Manager runs Reconcilers).

The manager owns what every controller of the process shares: the API client, the informer caches (the
resources, their children of every kind in ``kinds.CHILD_KINDS`` that the cluster serves, their pods), the
work queue and its workers, the periodic resync, leader election (only the leader's workers reconcile) and the
health/metrics server; ``start`` and ``stop`` bring them up and down in order. Events only say *which* key
to look at: the informers enqueue the owning resource's key, a worker hands it to the reconciler
(``gpustack_k3.operator.reconciler``), and a failed reconcile is requeued with the one retry policy
(``gpustack_k3.core.retry``).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.metrics import ColdStartStatusFigures, KVTransferConditions
from gpustack_k3.operator.health import HealthServer, OperatorMetrics, ResourcesByPhase, coldstart_metrics
from gpustack_k3.operator.informer import Informer, Store
from gpustack_k3.operator.kinds import CHILD_KINDS
from gpustack_k3.operator.kube import Kube, without_transport_retries
from gpustack_k3.operator.leader import LeaderElector
from gpustack_k3.operator.reconciler import Caches, Reconciler
from gpustack_k3.operator.seams import Key
from gpustack_k3.operator.workqueue import WorkQueue

log = logging.getLogger("gpustack_k3.operator")

LEASE_NAME = "gpustack-k3-operator"
OPTIONAL_KINDS = frozenset(k.key for k in CHILD_KINDS if k.optional)


def _version() -> str:
    try:
        from importlib.metadata import version
        return version("gpustack-k3")
    except Exception:  # running from a source tree
        return "0+source"


def owner_key(obj: dict) -> Key | None:
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == api.KIND and ref.get("apiVersion", "").startswith(api.GROUP + "/"):
            return (meta.get("namespace") or "", ref.get("name") or "")
    return None


def pod_key(obj: dict) -> Key | None:
    meta = obj.get("metadata") or {}
    name = (meta.get("labels") or {}).get(api.LABEL_DEPLOYMENT)
    return (meta.get("namespace") or "", name) if name else None


class LeaderElection:
    """Lease-based leader election settings (client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry)."""

    def __init__(self, *, lease_name: str = LEASE_NAME, lease_namespace: str | None = None,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0) -> None:
        self.lease_name, self.lease_namespace = lease_name, lease_namespace
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period


class Manager:
    def __init__(self, api_client: Any, *, namespaces: Sequence[str] = (), resync_s: float = 300.0,
                 workers: int = 4, identity: str | None = None, metrics_port: int | None = None,
                 metrics_host: str = "0.0.0.0", watch_timeout_s: int = 300,
                 owned_kinds: Iterable[tuple[str, str]] = tuple(k.key for k in CHILD_KINDS),
                 request_timeout: tuple[float, float] = (10.0, 60.0),
                 leader_election: LeaderElection | None = None) -> None:
        self.identity = identity or f"{os.environ.get('POD_NAME') or socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self.api_client = api_client
        api_client.user_agent = f"gpustack-k3-operator/{_version()} ({self.identity})"
        self.request_timeout = request_timeout
        # every call has a time limit: a hung connection must not pin a worker (and its key) forever
        self.kube = Kube(without_transport_retries(api_client), user_agent=api_client.user_agent,
                         field_manager=api.FIELD_MANAGER, timeout=request_timeout)
        self.namespaces = list(dict.fromkeys(namespaces))
        self.resync_s, self.workers_n, self.watch_timeout_s = resync_s, workers, watch_timeout_s
        self.metrics = OperatorMetrics()
        self.queue = WorkQueue()
        self.owned_kinds = tuple(owned_kinds)
        self.caches = Caches(crs=Store(), owned={k: Store(index_fn=owner_key) for k in self.owned_kinds},
                             pods=Store(index_fn=pod_key))
        # cold-start histograms of the log tracker, on the operator's registry (served at /metrics)
        self.coldstart_metrics = coldstart_metrics(self.metrics.registry)
        self.metrics.registry.register(ResourcesByPhase(self.caches.crs))
        self.metrics.registry.register(ColdStartStatusFigures(self.caches.crs))
        self.metrics.registry.register(KVTransferConditions(self.caches.crs, api.CONDITION_KV_TRANSFER))
        self.reconciler: Reconciler | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._leading = threading.Event()
        self.informers: list[Informer] = []
        self.health: HealthServer | None = None
        self._metrics_port, self._metrics_host = metrics_port, metrics_host
        self.elector: LeaderElector | None = None
        if leader_election is not None:
            le = leader_election
            lease_ns = le.lease_namespace or os.environ.get("POD_NAMESPACE") or (self.namespaces or ["default"])[0]
            # Lease calls are never retried nor slow: a leader must notice a failed renewal within
            # renew_deadline, before the lease can expire and a standby take over (client-go does the same).
            lease_kube = Kube(without_transport_retries(api_client), user_agent=self.kube.api.user_agent,
                              field_manager=api.FIELD_MANAGER, attempts=1, timeout=(le.retry_period, le.retry_period))
            self.elector = LeaderElector(lease_kube, name=le.lease_name, namespace=lease_ns, identity=self.identity,
                                         lease_duration=le.lease_duration, renew_deadline=le.renew_deadline,
                                         retry_period=le.retry_period, on_started=self._start_leading,
                                         on_stopped=self._stop_leading)

    def add(self, reconciler: Reconciler) -> Manager:
        """Run ``reconciler`` for the keys the informers enqueue (one reconciler: the K3Deployment one)."""
        self.reconciler = reconciler
        return self

    def stopping(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Manager:
        if self.reconciler is None:
            raise RuntimeError("no reconciler added (Manager.add)")
        if self._metrics_port is not None:
            self.health = HealthServer(self.metrics, host=self._metrics_host, port=self._metrics_port,
                                       healthy=self.healthy, ready=self.ready).start()
        scopes: list[str | None] = list(self.namespaces) or [None]
        on_relist = lambda kind: self.metrics.relists.labels(kind=kind).inc()
        served = {k for k in self.owned_kinds if k in OPTIONAL_KINDS and self.kube.served(*k)}
        if OPTIONAL_KINDS - served:
            log.info("not watched (not served by this cluster): %s", ", ".join(sorted(k for _, k in OPTIONAL_KINDS - served)))
        for ns in scopes:
            self.informers.append(Informer(self.kube, api.API_VERSION, api.KIND, ns, self.caches.crs, self._on_cr,
                                           watch_timeout_s=self.watch_timeout_s, on_relist=on_relist))
            for av, kind in self.owned_kinds:
                if (av, kind) in OPTIONAL_KINDS and (av, kind) not in served:
                    continue
                self.informers.append(Informer(self.kube, av, kind, ns, self.caches.owned[(av, kind)], self._on_owned,
                                               label_selector=f"{api.LABEL_APP_MANAGED_BY}={api.FIELD_MANAGER}",
                                               watch_timeout_s=self.watch_timeout_s, on_relist=on_relist))
            self.informers.append(Informer(self.kube, "v1", "Pod", ns, self.caches.pods, self._on_pod,
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
        for key in self.caches.crs.list_keys():
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
        if self.reconciler is not None:
            self.reconciler.close()
        for client in {id(c): c for c in (self.kube.api, getattr(self.elector, "kube", None) and self.elector.kube.api)
                       if c is not None}.values():   # the pools this manager opened for itself
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

    # ------------------------------------------------------------------ events → keys
    def _enqueue(self, key: Key | None) -> None:
        if key is not None:
            self.queue.add(key)
            self._queue_metrics()

    def _queue_metrics(self) -> None:
        """The work queue as client-go's workqueue metrics show it: depth, delayed retries, idle."""
        self.metrics.queue_depth.set(len(self.queue))
        self.metrics.queue_delayed.set(self.queue.pending_delayed)
        self.metrics.queue_idle.set(1 if self.queue.idle else 0)

    def _on_cr(self, etype: str, obj: dict) -> None:
        m = obj.get("metadata") or {}
        self._enqueue((m.get("namespace") or "", m.get("name") or ""))

    def _on_owned(self, etype: str, obj: dict) -> None:
        self._enqueue(owner_key(obj))

    def _on_pod(self, etype: str, obj: dict) -> None:
        self._enqueue(pod_key(obj))

    def _resync_loop(self) -> None:
        while not self._stop.wait(self.resync_s):
            if self.reconciler is not None:
                self.reconciler.resynced()
            for key in self.caches.crs.list_keys():
                self.queue.add(key)

    def _worker(self) -> None:
        assert self.reconciler is not None
        while not self._stop.is_set():
            key = self.queue.get(timeout=0.5)
            if key is None:
                continue
            t0 = time.monotonic()
            try:
                self.reconciler.reconcile(key)
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
                self._queue_metrics()
