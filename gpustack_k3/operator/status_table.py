"""Where the operator decides a ``K3Deployment``'s phase and its Ready condition: one ordered table.

``ROWS`` is read top to bottom; the first row whose ``when`` holds decides the phase, the phase's reason (the
text of its Event) and the Ready condition together, so each state has one Ready reason by construction.
``Facts`` is what the rows read, computed once per reconcile from the typed observation
(``gpustack_k3.operator.observation``). Design: docs/design/009-status-table.md (the P/D extension point, a
``KVTransfer`` row and condition, is named there). Pure.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gpustack_k3.api.v1alpha1 import constants as api
from gpustack_k3.operator.observation import ColdStartObservation, Verdict
from gpustack_k3.operator.podstate import PodSummary
from gpustack_k3.operator.rollout import REASON_ROLLOUT_FAILED


@dataclasses.dataclass(frozen=True)
class Facts:
    """What the table reads. ``invalid``: the validation errors' text; ``render_error``: why a valid spec did not
    render; ``apply_error``: the API server's refusal; ``restart_loop``: topology groups recreated again and
    again; ``short_roles``: roles short of ready groups ("" while a restart loop is reported); ``rolling``: why a
    workload still rolls out. "" = not the case."""
    pods: PodSummary = PodSummary()
    coldstart: ColdStartObservation | None = None
    invalid: str = ""
    render_error: str = ""
    apply_error: str = ""
    restart_loop: str = ""
    short_roles: str = ""
    rolling: str = ""
    kv_transfer_failed: str = ""     # P/D: KVTransfer False on consecutive checks (its message)
    rollout_failed: str = ""         # P/D: the target revision failed; the serving revision serves (its message)
    surging: str = ""                # P/D: a target revision is starting beside the serving one (its message)

    @property
    def verdict(self) -> Verdict | None:
        return self.coldstart.verdict if self.coldstart is not None else None

    @property
    def all_ready(self) -> bool:
        return bool(self.pods.total) and self.pods.ready == self.pods.total


@dataclasses.dataclass(frozen=True)
class Ready:
    status: bool
    reason: str
    message: str


@dataclasses.dataclass(frozen=True)
class Outcome:
    row: str
    phase: str
    reason: str     # the phase's reason: the text of its Event
    ready: Ready


def pods_say(f: Facts) -> Ready:
    """The Ready condition as the pods (and a cold-start verdict) say it, first match wins."""
    p, v = f.pods, f.verdict
    if f.all_ready:
        return Ready(True, api.REASON_PODS_READY, f"{p.ready}/{p.total} pod(s) ready")
    if p.total and v is not None and not p.failed:
        return Ready(False, v.reason or api.REASON_COLDSTART_FAILED, v.message)
    if p.total and (p.failed or p.crashing):
        return Ready(False, p.problem_reason, p.problem)
    if not p.total:
        return Ready(False, api.REASON_NO_PODS, "no pods observed yet")
    if f.short_roles:
        # the roles' count replaces the pods': it names the role and does not flip with the order in which
        # the kubelet and the LWS controller report
        return Ready(False, api.REASON_GROUPS_NOT_READY, f.short_roles)
    return Ready(False, api.REASON_PODS_NOT_READY, p.problem or f"{p.ready}/{p.total} pod(s) ready")


def _verdict_is(phase: str) -> Callable[[Facts], bool]:
    return lambda f: f.verdict is not None and f.verdict.phase == phase


def _crash_loop_reason(f: Facts) -> str:
    said = f.verdict.said if f.verdict is not None else ""
    return f"{f.pods.crashing}; {said}" if said else f.pods.crashing


def _starting_reason(f: Facts) -> str:
    current = f.coldstart.status.current if f.coldstart is not None else None
    return f"engine starting{f' ({current})' if current else ''}"


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    when: Callable[[Facts], bool]
    phase: str
    reason: Callable[[Facts], str]
    ready: Callable[[Facts], Ready] | None   # None: as the first row below it that holds (ApplyFailed)


ROWS: tuple[Row, ...] = (
    Row("invalid", lambda f: bool(f.invalid), api.PHASE_INVALID, lambda f: api.REASON_VALIDATION_FAILED, pods_say),
    Row("render-failed", lambda f: bool(f.render_error), api.PHASE_FAILED, lambda f: api.REASON_RENDER_FAILED,
        pods_say),
    # the server refused an object: said instead of retrying forever (a resync or a spec change tries again);
    # what the pods show meanwhile is what the rows below make of it
    Row("apply-failed", lambda f: bool(f.apply_error), api.PHASE_FAILED,
        lambda f: f"{api.REASON_APPLY_FAILED}: {f.apply_error}", None),
    Row("pod-failed", lambda f: bool(f.pods.failed), api.PHASE_FAILED, lambda f: f.pods.failed, pods_say),
    # a crashed attempt before any crash restart (a restart that follows makes it the loop below)
    Row("coldstart-failed", lambda f: _verdict_is(api.PHASE_FAILED)(f) and not f.pods.crashing
        and not f.pods.restarted_after_crash, api.PHASE_FAILED, lambda f: f.verdict.said, pods_say),
    Row("group-restart-loop", lambda f: bool(f.restart_loop), api.PHASE_DEGRADED,
        lambda f: f"{api.REASON_GROUPS_RECREATED}: {f.restart_loop}", pods_say),
    # a crash loop is one Degraded phase: the kubelet's restarts come before each attempt's verdict (which clears
    # when the next attempt starts), so a looping engine does not flip Failed -> Degraded with an Event each time
    Row("crash-loop", lambda f: bool(f.pods.crashing), api.PHASE_DEGRADED, _crash_loop_reason, pods_say),
    Row("crash-loop-after-restart", lambda f: f.verdict is not None and bool(f.pods.restarted_after_crash),
        api.PHASE_DEGRADED,
        lambda f: f"{f.verdict.said} (again after a restart: {f.pods.restarted_after_crash})", pods_say),
    # P/D whose KV does not move (docs/design/010-pd-rollouts.md §4): after the rows that say the engines do not
    # run at all (a crash explains missing transfers better than the counters), before Stalled
    Row("kv-transfer-failed", lambda f: bool(f.kv_transfer_failed), api.PHASE_DEGRADED,
        lambda f: f"{api.REASON_KV_TRANSFER_FAILED}: {f.kv_transfer_failed}",
        lambda f: Ready(False, api.REASON_KV_TRANSFER_FAILED, f.kv_transfer_failed)),
    Row("stalled", lambda f: f.verdict is not None, api.PHASE_DEGRADED, lambda f: f.verdict.said, pods_say),
    # P/D (docs/design/010-pd-rollouts.md §6): a failed target revision is never hidden behind the serving
    # revision's Ready; the serving pods still say Ready
    Row("rollout-failed", lambda f: bool(f.rollout_failed), api.PHASE_DEGRADED,
        lambda f: f"{REASON_ROLLOUT_FAILED}: {f.rollout_failed}", pods_say),
    Row("groups-not-ready", lambda f: f.all_ready and bool(f.short_roles), api.PHASE_STARTING,
        lambda f: f"{api.REASON_GROUPS_NOT_READY}: {f.short_roles}",
        lambda f: Ready(False, api.REASON_GROUPS_NOT_READY, f.short_roles)),
    # P/D Surge: the serving revision answers (Ready as its pods say) while the target starts beside it
    Row("surging", lambda f: f.all_ready and bool(f.surging), api.PHASE_DEPLOYING,
        lambda f: f"{api.REASON_ROLLING_OUT}: {f.surging}", pods_say),
    # ready pods, but not yet of this generation: the old spec is still what serves
    Row("rolling-out", lambda f: f.all_ready and bool(f.rolling), api.PHASE_DEPLOYING,
        lambda f: f"{api.REASON_ROLLING_OUT}: {f.rolling}", lambda f: Ready(False, api.REASON_ROLLING_OUT, f.rolling)),
    Row("warm", lambda f: f.all_ready and f.coldstart is not None and f.coldstart.warm, api.PHASE_WARM,
        lambda f: api.PHASE_WARM, pods_say),
    Row("ready", lambda f: f.all_ready, api.PHASE_READY, lambda f: api.PHASE_READY, pods_say),
    Row("pending", lambda f: bool(f.pods.unschedulable), api.PHASE_PENDING,
        lambda f: f"{api.REASON_UNSCHEDULABLE}: {f.pods.unschedulable}", pods_say),
    Row("starting", lambda f: bool(f.pods.scheduled), api.PHASE_STARTING, _starting_reason, pods_say),
    Row("deploying", lambda f: True, api.PHASE_DEPLOYING, lambda f: "workload applied, waiting for pods", pods_say),
)


def decide(facts: Facts, rows: tuple[Row, ...] = ROWS) -> Outcome:
    """The first row that holds: its phase, its reason and its Ready condition."""
    for i, row in enumerate(rows):
        if row.when(facts):
            ready = row.ready(facts) if row.ready is not None else decide(facts, rows[i + 1:]).ready
            return Outcome(row.name, row.phase, row.reason(facts), ready)
    raise AssertionError("the last row holds always")  # pragma: no cover - Deploying's when is True
