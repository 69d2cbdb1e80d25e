"""The K3Deployment operator, assembled: a ``Manager`` (caches, queue, workers, leader election, health and
metrics: ``gpustack_k3.operator.manager``) running the K3Deployment ``Reconciler`` (observe → decide → write:
``gpustack_k3.operator.reconciler``), as controller-runtime's ``main.go`` wires a manager and its controllers.

``new_operator(api_client, ...)`` builds both; ``run(...)`` runs them until SIGTERM/SIGINT."""
from __future__ import annotations

import datetime as dt
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpustack_k3.operator import hooks
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from gpustack_k3.operator.decide import Plan, Render, Validate
from gpustack_k3.operator.kinds import CHILD_KINDS
from gpustack_k3.operator.kube import api_client_from
from gpustack_k3.operator.manager import LEASE_NAME, LeaderElection, Manager
from gpustack_k3.operator.reconciler import Hooks, Reconciler
from gpustack_k3.operator.seams import ColdStartFactory, ColdStartObserver, NoColdStart
from gpustack_k3.operator.warmup import PodWarmup

log = logging.getLogger("gpustack_k3.operator")

# (apiVersion, kind) of every child kind (kinds.CHILD_KINDS), for readers that want the pairs (the chart's RBAC test)
OWNED_KINDS: tuple[tuple[str, str], ...] = tuple(k.key for k in CHILD_KINDS)


def new_operator(api_client: Any, *, validate: Validate | None = None, render: Render | None = None,
                 plan: Plan | None = None, coldstart_factory: ColdStartFactory | None | str = "pod-logs",
                 warmup_fn: Callable[..., dict] | str | None = "probe",
                 clock: Callable[[], dt.datetime] | None = None, leader_elect: bool = False,
                 lease_name: str = LEASE_NAME, lease_namespace: str | None = None, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0, **manager_options: Any) -> Manager:
    """A manager with the K3Deployment reconciler added. The reconciler's parts: ``validate``/``render``/``plan``
    (default: the project's, ``gpustack_k3.operator.hooks``), the cold-start observer (``"pod-logs"``: follow
    the engine pods' logs; None: no log tracking), the post-Ready warm-up (``"probe"``: the probe's code; None:
    none) and the clock. ``leader_elect`` and the lease settings become the manager's ``LeaderElection``; the
    other options are the manager's (``Manager``: namespaces, resync_s, workers, identity, metrics_port, ...)."""
    if validate is None or render is None:
        validate, render, plan = validate or hooks.validate, render or hooks.render, plan or hooks.plan
    election = LeaderElection(lease_name=lease_name, lease_namespace=lease_namespace, lease_duration=lease_duration,
                              renew_deadline=renew_deadline, retry_period=retry_period) if leader_elect else None
    mgr = Manager(api_client, leader_election=election, **manager_options)
    if coldstart_factory == "pod-logs":  # the default: follow engine pod logs
        coldstart_factory = pod_logs
    coldstart: ColdStartObserver = (coldstart_factory(api_client, mgr.queue.add, mgr.coldstart_metrics)
                                    if callable(coldstart_factory) else NoColdStart())
    # spec.startup.warmup after Ready, with the probe's code; its warm phase goes to the observer's trackers
    warmup = None
    if warmup_fn is not None and hasattr(coldstart, "report_phase"):
        warmup = PodWarmup(coldstart, mgr.queue.add, warm_fn=None if warmup_fn == "probe" else warmup_fn)
    return mgr.add(Reconciler(mgr.kube, mgr.caches, Hooks(validate, render, plan), metrics=mgr.metrics,
                              identity=mgr.identity, coldstart=coldstart, warmup=warmup, clock=clock,
                              stopping=mgr.stopping))


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
    op = new_operator(client, namespaces=namespaces, resync_s=resync_s, leader_elect=leader_elect,
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
