"""Summarise pods as the kubelet reports them (phase, conditions, container states). Pure.

Waiting reasons and termination reasons are the kubelet's own strings
(kubernetes pkg/kubelet/images/types.go: ErrImagePull, ImagePullBackOff, InvalidImageName,
ErrImageNeverPull; pkg/kubelet/container/sync_result.go: CrashLoopBackOff,
CreateContainerConfigError, RunContainerError; OOMKilled from the container runtime)."""
from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gpustack_k3.api.v1alpha1.constants import (
    ANNOTATION_STARTUP_BUDGET,
    ANNOTATION_TEMPLATE_HASH,
    REASON_POD_FAILED,
)
from gpustack_k3.api.v1alpha1.constants import (
    KUBELET_CRASH_TERMINATED as CRASH_TERMINATED,
)
from gpustack_k3.api.v1alpha1.constants import (
    KUBELET_CRASH_WAITING as CRASH_WAITING,
)
from gpustack_k3.api.v1alpha1.constants import (
    KUBELET_FATAL_WAITING as FATAL_WAITING,
    KUBELET_OOM_KILLED,
)
from gpustack_k3.coldstart.scanner import rfc3339_epoch


@dataclasses.dataclass(frozen=True)
class PodSummary:
    total: int = 0
    scheduled: int = 0
    ready: int = 0
    running: int = 0
    restarts: int = 0
    unschedulable: str = ""   # message of the first Unschedulable PodScheduled condition
    failed: str = ""          # "Reason: message" making the workload Failed
    crashing: str = ""        # "Reason: message" making the workload Degraded
    restarted_after_crash: str = ""   # "pod/container" restarted after a crash during its cold start, if any

    @property
    def problem_reason(self) -> str:
        return (self.failed or self.crashing).split(":", 1)[0]

    @property
    def problem(self) -> str:
        return self.failed or self.crashing or self.unschedulable


def _container_statuses(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or [])


BUDGET_ANNOTATION = ANNOTATION_STARTUP_BUDGET   # on the pod template (render/kubernetes.py)
DEFAULT_BUDGET_S = 3600


parse_time = rfc3339_epoch   # Kubernetes RFC 3339 time → epoch seconds (one parser: log stamps use it too)


def _in_cold_start(pod: Mapping[str, Any], c: Mapping[str, Any], now: float | None) -> bool:
    """Whether the container's current run is still within its cold-start budget (unknown: yes). A crash
    long ago followed by days of serving is not a crash loop when readiness drops later."""
    started = ((c.get("state") or {}).get("running") or {}).get("startedAt")
    t0 = parse_time(started)
    if now is None or t0 is None:
        return True
    try:
        budget = float(((pod.get("metadata") or {}).get("annotations") or {}).get(BUDGET_ANNOTATION)
                       or DEFAULT_BUDGET_S)
    except ValueError:
        budget = DEFAULT_BUDGET_S
    return now - t0 <= budget


class _Tally:
    """What ``summarize_pods`` accumulates: PodSummary's fields (declared there, once), mutable while the pods are
    read; the first problem of each kind stands (pods in name order)."""

    def __init__(self) -> None:
        vars(self).update(dataclasses.asdict(PodSummary()))

    def pod(self, pod: Mapping[str, Any], now: float | None) -> None:
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        self.total += 1
        conds = {c.get("type"): c for c in status.get("conditions") or []}
        sched = conds.get("PodScheduled") or {}
        if sched.get("status") == "True" or status.get("phase") in ("Running", "Succeeded"):
            self.scheduled += 1
        elif sched.get("reason") == "Unschedulable" and not self.unschedulable:
            self.unschedulable = f"{meta.get('name')}: {sched.get('message') or 'no node fits'}"
        is_ready = (conds.get("Ready") or {}).get("status") == "True"
        self.ready += is_ready
        self.running += status.get("phase") == "Running"
        if status.get("phase") == "Failed" and not self.failed:
            self.failed = (f"{status.get('reason') or REASON_POD_FAILED}: {meta.get('name')}: "
                           f"{status.get('message') or 'pod failed'}")
        for c in _container_statuses(status):
            self.container(pod, c, is_ready, now)

    def container(self, pod: Mapping[str, Any], c: Mapping[str, Any], is_ready: bool, now: float | None) -> None:
        restarts = int(c.get("restartCount") or 0)
        self.restarts += restarts
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated") or {}
        last = (c.get("lastState") or {}).get("terminated") or {}
        who = f"{(pod.get('metadata') or {}).get('name')}/{c.get('name')}"
        if waiting.get("reason") in FATAL_WAITING and not self.failed:
            self.failed = f"{waiting['reason']}: {who}: {waiting.get('message') or ''}".rstrip(": ")
        elif not self.crashing:
            self.crashing = _crash(pod, c, who, waiting, terminated, last, restarts, is_ready, now)
        if (last.get("reason") in CRASH_TERMINATED and restarts >= 1 and not self.restarted_after_crash
                and _in_cold_start(pod, c, now)):
            self.restarted_after_crash = who


def _crash(pod: Mapping[str, Any], c: Mapping[str, Any], who: str, waiting: Mapping[str, Any],
           terminated: Mapping[str, Any], last: Mapping[str, Any], restarts: int, is_ready: bool,
           now: float | None) -> str:
    """The container's crash loop, as the kubelet shows it ("" when it is not looping)."""
    if waiting.get("reason") in CRASH_WAITING:
        cause = f" (last exit: {last.get('reason')}, code {last.get('exitCode')})" if last else ""
        return f"CrashLoopBackOff: {who}{cause}"
    if terminated.get("reason") in CRASH_TERMINATED and not is_ready and restarts >= 1:
        # terminated again after a restart: the loop; a first termination is a failed attempt (its
        # cold-start verdict says why) that the kubelet is about to restart
        return f"{terminated['reason']}: {who}: exit code {terminated.get('exitCode')}"
    if (last.get("reason") in CRASH_TERMINATED and not is_ready
            and (last.get("reason") == KUBELET_OOM_KILLED or restarts >= 2) and _in_cold_start(pod, c, now)):
        # a first restart is a new cold-start attempt (Starting); from the second on it is a crash
        # loop: Degraded between the restarts too, not a Degraded/Starting flip with Events each time
        return (f"{last['reason']}: {who}: restarted {c.get('restartCount', 0)} time(s), "
                f"last exit code {last.get('exitCode')}")
    return ""


def summarize_pods(pods: Sequence[Mapping[str, Any]], now: float | None = None) -> PodSummary:
    """``now`` (epoch seconds) lets an old crash (before a run longer than the startup budget) be told from
    a crash loop."""
    tally = _Tally()
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("name", "")):
        if not (pod.get("metadata") or {}).get("deletionTimestamp"):
            tally.pod(pod, now)
    return PodSummary(**vars(tally))


def on_older_template(pods: Sequence[Mapping[str, Any]], current: Collection[str]) -> list[str]:
    """Names of the pods (not terminating) whose template hash annotation is none of ``current``, the hashes
    of the templates the operator applies: they still run an older spec. A pod without the annotation was
    made from a template the operator did not stamp, so it is older too."""
    out = []
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        if (meta.get("annotations") or {}).get(ANNOTATION_TEMPLATE_HASH) not in current:
            out.append(meta.get("name", ""))
    return sorted(out)
