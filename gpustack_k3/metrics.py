"""Prometheus metrics for cold start, shared by the CLI runners and the operator.

``ColdStartMetrics(registry=CollectorRegistry())`` keeps tests isolated; the operator passes
nothing and gets the process-wide default registry. ``metrics.listener`` plugs into
``ColdStartTracker(listeners=[...])`` so every phase transition updates the metrics live.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from gpustack_k3.coldstart.phases import PHASES

if TYPE_CHECKING:
    from gpustack_k3.coldstart.tracker import ColdStartReport, PhaseTransition

# Cold-start phases run from seconds (server_ready) to an hour (weights_download).
PHASE_BUCKETS = (1, 5, 10, 30, 60, 120, 180, 300, 450, 600, 900, 1200, 1800, 3600, 7200)


class ColdStartMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        reg = REGISTRY if registry is None else registry
        self.registry = reg
        self.phase_seconds = Histogram(
            "gpustack_k3_cold_start_phase_seconds", "Duration of one cold-start phase",
            ["engine", "phase"], buckets=PHASE_BUCKETS, registry=reg)
        self.current_phase = Gauge(
            "gpustack_k3_cold_start_current_phase",
            "1 for the cold-start phase in progress, 0 for the others", ["engine", "phase"], registry=reg)
        self.failures = Counter(
            "gpustack_k3_cold_start_failures", "Cold starts that failed, by the phase they failed in",
            ["engine", "phase"], registry=reg)

    def _set_current(self, engine: str, phase: str | None) -> None:
        for p in PHASES:
            self.current_phase.labels(engine=engine, phase=p).set(1 if p == phase else 0)

    def listener(self, ev: PhaseTransition) -> None:
        """Feed tracker transitions: start → current phase, end → histogram, failed → counter."""
        engine = ev.engine or "unknown"
        if ev.event == "start" and ev.phase:
            self._set_current(engine, ev.phase)
        elif ev.event == "end" and ev.phase:
            if ev.seconds is not None and ev.seconds >= 0:
                self.phase_seconds.labels(engine=engine, phase=ev.phase).observe(ev.seconds)
            if ev.phase in ("server_ready", "warm"):
                self._set_current(engine, None)
        elif ev.event == "failed":
            self.failures.labels(engine=engine, phase=ev.phase or "unknown").inc()
            self._set_current(engine, None)

    def observe_report(self, rep: ColdStartReport) -> None:
        """Record a finished report in one go (for runners that parse a whole log afterwards)."""
        engine = rep.engine or "unknown"
        for p in rep.phases:
            if p.end is not None and p.seconds is not None and p.seconds >= 0:
                self.phase_seconds.labels(engine=engine, phase=p.name).observe(p.seconds)
        if rep.status == "failed":
            self.failures.labels(engine=engine, phase=rep.last.failed_phase or "unknown").inc()
        self._set_current(engine, rep.last.current_phase if rep.status == "in-progress" else None)
