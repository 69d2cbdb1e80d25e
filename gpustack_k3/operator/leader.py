"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics
(k8s.io/client-go/tools/leaderelection): a candidate takes the lease when it is free or when its
holder has not renewed it for ``lease_duration`` as observed *locally* (no clock comparison across
machines); every take or renewal is a PUT carrying the resourceVersion read, so two candidates can
never both succeed (the loser gets 409); a leader that cannot renew within ``renew_deadline``
steps down; a leader stopping cleanly releases the lease (holder cleared) so a standby takes over
at once.

(The official ``kubernetes.leaderelection`` is not used: it uses the process-wide default client,
``sys.exit``s on bad settings, requires periods above one second and cannot be stopped.)
"""
from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gpustack_k3.operator.kube import kube_time

log = logging.getLogger("gpustack_k3.operator")


class LeaderElector:
    def __init__(self, kube: Any, *, name: str, namespace: str, identity: str,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("leader election needs lease_duration > renew_deadline > retry_period > 0 "
                             f"(got {lease_duration}, {renew_deadline}, {retry_period})")
        self.kube, self.name, self.namespace, self.identity = kube, name, namespace, identity
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_started, self.on_stopped = on_started, on_stopped
        self._stop = threading.Event()
        self.leading = threading.Event()
        self.lost = threading.Event()
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._lease: dict | None = None
        self._acquired_at = 0.0
        self._step_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="leader-elector", daemon=True)

    def start(self) -> LeaderElector:
        self._thread.start()
        return self

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        self._thread.join(self.retry_period * 3 + 5)
        if release and self.leading.is_set():
            self._release()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            if self._try_acquire_or_renew(deadline=sent + self.renew_deadline):
                self._acquired_at = sent
                break
            self._stop.wait(self.retry_period)
        if self._stop.is_set():
            return
        log.info("%s acquired lease %s/%s", self.identity, self.namespace, self.name)
        self.leading.set()
        # on_started may take long (the controller waits for its caches): it runs beside the renewals,
        # which must go on meanwhile or a standby would take an expired lease while we start acting
        threading.Thread(target=self._started, name="leader-started", daemon=True).start()
        last_renew = self._acquired_at
        while not self._stop.wait(self.retry_period):
            deadline = last_renew + self.renew_deadline
            sent = time.monotonic()
            if self._try_acquire_or_renew(deadline=deadline):
                last_renew = sent   # the lease counts from when the renewal was sent, not answered
            elif time.monotonic() >= deadline:
                log.error("%s could not renew lease %s/%s within %.1fs: stepping down",
                          self.identity, self.namespace, self.name, self.renew_deadline)
                self._step_down()
                return
            if self.lost.is_set():   # on_started failed
                return

    def _started(self) -> None:
        try:
            self.on_started()
        except Exception:
            log.exception("on_started failed; stepping down")
            self._step_down()

    def _step_down(self) -> None:
        with self._step_lock:
            if self.lost.is_set():
                return
            self.leading.clear()
            self.lost.set()
        try:
            self.on_stopped()
        except Exception:
            log.exception("on_stopped failed")

    def _spec(self, holder: str, acquire: str | None, transitions: int, duration: float) -> dict:
        now = kube_time(dt.datetime.now(dt.UTC), micro=True)
        return {"holderIdentity": holder, "leaseDurationSeconds": max(1, int(round(duration))),
                "acquireTime": acquire or now, "renewTime": now, "leaseTransitions": transitions}

    def _call_timeout(self, deadline: float) -> float:
        """Each lease call waits at most a retry period and never past the renew deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("renew deadline reached")
        return min(self.retry_period, left)

    def _try_acquire_or_renew(self, deadline: float | None = None) -> bool:
        from kubernetes.client.rest import ApiException
        deadline = time.monotonic() + self.renew_deadline if deadline is None else deadline
        try:
            t = self._call_timeout(deadline)
            lease = self.kube.get("coordination.k8s.io/v1", "Lease", self.namespace, self.name, timeout=(t, t))
            if lease is None:
                body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(self.identity, None, 0, self.lease_duration)}
                t = self._call_timeout(deadline)
                self._lease = self.kube.create(body, timeout=(t, t))
                self._observe(self._lease)
                return True
            spec = lease.get("spec") or {}
            self._observe(lease)
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and time.monotonic() < self._observed_at + duration:
                return False
            mine = holder == self.identity
            transitions = int(spec.get("leaseTransitions") or 0) + (0 if mine else 1)
            new = {**lease, "spec": self._spec(self.identity, spec.get("acquireTime") if mine else None,
                                               transitions, self.lease_duration)}
            t = self._call_timeout(deadline)
            self._lease = self.kube.replace(new, timeout=(t, t))
            self._observe(self._lease)
            return True
        except ApiException as e:
            if e.status not in (409, 404):
                log.warning("lease %s/%s: %s", self.namespace, self.name, e.reason)
            return False
        except Exception as e:  # connection trouble: not leading this round
            log.warning("lease %s/%s: %s", self.namespace, self.name, e)
            return False

    def _observe(self, lease: dict) -> None:
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()

    def _release(self) -> None:
        try:
            lease = self.kube.get("coordination.k8s.io/v1", "Lease", self.namespace, self.name)
            if lease and (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                spec = dict(lease["spec"])
                spec.update(holderIdentity="", leaseDurationSeconds=1,
                            renewTime=kube_time(dt.datetime.now(dt.UTC), micro=True))
                self.kube.replace({**lease, "spec": spec})
                log.info("%s released lease %s/%s", self.identity, self.namespace, self.name)
        except Exception as e:
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, e)
        finally:
            self.leading.clear()
