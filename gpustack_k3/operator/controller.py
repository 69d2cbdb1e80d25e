"""The K3Deployment operator, assembled: a ``Manager`` (caches, queue, workers, leader election, health and
metrics: ``gpustack_k3.operator.manager``) running the K3Deployment ``Reconciler`` (observe → decide → write:
``gpustack_k3.operator.reconciler``), as controller-runtime's ``main.go`` wires a manager and its controllers.

``new_operator(api_client, ...)`` builds both; ``run(...)`` runs them until SIGTERM/SIGINT."""
from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any

from gpustack_k3.operator import hooks
from gpustack_k3.operator.coldstart_bridge import coldstart_factory as pod_logs
from gpustack_k3.operator.decide import Plan, Render, Validate
from gpustack_k3.operator.kube import api_client_from
from gpustack_k3.operator.kvcheck import Fetch, KVTransferCheck, http_fetch
from gpustack_k3.operator.manager import LeaderElection, Manager
from gpustack_k3.operator.reconciler import Hooks, Reconciler
from gpustack_k3.operator.rollout import Policy
from gpustack_k3.operator.seams import ColdStartFactory, ColdStartObserver, NoColdStart
from gpustack_k3.operator.warmup import PodWarmup, WarmFn
from gpustack_k3.probe.warmup import warm_up

log = logging.getLogger("gpustack_k3.operator")



@dataclasses.dataclass(frozen=True)
class Options:
    """The parts of the K3Deployment reconciler (controller-runtime's ``manager.Options`` is the model: named
    fields with the production defaults; None turns an optional part off).

    ``validate`` / ``render`` / ``plan``: the project's (``gpustack_k3.operator.hooks``) or stand-ins;
    ``coldstart``: the cold-start observer's factory (default: follow the engine pods' logs,
    ``coldstart_bridge.coldstart_factory``; None: no log tracking, WeightsLoaded/GraphsCaptured/Warm stay
    Unknown); ``warmup``: the post-Ready warm-up function (default: the probe's ``warm_up``; None: none; it
    reports its phase to the cold-start observer, so it needs one); ``clock``: now, as an aware datetime.

    P/D (docs/design/010-pd-rollouts.md): ``kv_fetch`` is the KVTransfer check's metric source, ``fetch(url) ->
    (text | None, why)`` for each instance URL the serving router names (default: GET ``<url>/metrics``,
    ``kvcheck.http_fetch``; the test seam: a function over fake engines; None: no check, no KVTransfer
    condition); the check runs every ``kv_interval_s`` after Ready (the reconciler requeues the resource for it);
    ``rollout_drain_s``: how long the previous pair revision stays after the switch; ``rollout_deadline_s``: how
    long a new revision may take to become ready before its rollout fails."""
    validate: Validate = hooks.validate
    render: Render = hooks.render
    plan: Plan | None = hooks.plan
    coldstart: ColdStartFactory | None = pod_logs
    warmup: WarmFn | None = warm_up
    clock: Callable[[], dt.datetime] | None = None
    kv_fetch: Fetch | None = http_fetch
    kv_interval_s: float = 300.0
    rollout_drain_s: float = 60.0
    rollout_deadline_s: float = 3600.0


def new_operator(api_client: Any, options: Options = Options(), **manager_options: Any) -> Manager:
    """A manager with the K3Deployment reconciler added, built from ``options``; ``manager_options`` are the
    manager's (``Manager``: namespaces, resync_s, workers, identity, metrics_port, leader_election, ...)."""
    mgr = Manager(api_client, **manager_options)
    coldstart: ColdStartObserver = (options.coldstart(api_client, mgr.queue.add, mgr.coldstart_metrics)
                                    if options.coldstart is not None else NoColdStart())
    # spec.startup.warmup after Ready, with the probe's code; its warm phase goes to the observer's trackers
    warmup = (PodWarmup(coldstart, mgr.queue.add, warm_fn=options.warmup)
              if options.warmup is not None and options.coldstart is not None else None)
    kv = (KVTransferCheck(options.kv_fetch, options.kv_interval_s,
                          on_check=lambda key, obs: mgr.metrics.kv_checks.labels(
                              namespace=key[0], name=key[1], reason=obs.reason).inc())
          if options.kv_fetch is not None else None)
    return mgr.add(Reconciler(mgr.kube, mgr.caches, Hooks(options.validate, options.render, options.plan),
                              metrics=mgr.metrics, identity=mgr.identity, coldstart=coldstart, warmup=warmup,
                              clock=options.clock, stopping=mgr.stopping, kvcheck=kv,
                              rollout=Policy(options.rollout_drain_s, options.rollout_deadline_s),
                              requeue=mgr.queue.add_after))


def run(namespaces: Sequence[str], metrics_port: int | None, resync_s: float, leader_elect: bool,
        kubeconfig: str | None = None, *, metrics_host: str = "0.0.0.0", stop: threading.Event | None = None,
        options: Options = Options(), **manager_options: Any) -> int:
    """Run the operator until SIGTERM/SIGINT (or ``stop`` is set). In-cluster when ``kubeconfig`` is
    None and a service account is mounted, else ``kubeconfig`` or ~/.kube/config. Returns the exit
    code: 0 on a requested stop, 1 when the leader lease was lost (the pod restarts, as with
    controller-runtime)."""
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    client = api_client_from(kubeconfig)
    op = new_operator(client, options, namespaces=namespaces, resync_s=resync_s,
                      leader_election=LeaderElection() if leader_elect else None,
                      metrics_port=metrics_port, metrics_host=metrics_host, **manager_options)
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
