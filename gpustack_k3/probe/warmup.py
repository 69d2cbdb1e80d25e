"""Ready is not warm: the warm-up of ``spec.startup.warmup`` sent with the probe's own code (``run`` and the
operator call this after Ready). The requests are a probe run (stages, then streamed requests at the asked
lengths), so the first requests' TTFT, where runtime JIT shows (docs/sources.md#jit-after-ready: four operators compiled on
the first requests), is measured, not just waited for.

``on_phase(start, end, details)`` reports the ``warm`` phase to a cold-start tracker
(``ColdStartTracker.platform_event("warm", ...)``): once with the start when the requests go out, once with
the end when all were answered. A warm-up that fails (unusable endpoint, failed requests) reports no end:
the deployment is Ready but not warm, and the summary says why.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gpustack_k3.api.v1alpha1.status import Warmup
from gpustack_k3.probe.client import run_probe
from gpustack_k3.probe.core import ProbeConfig

PhaseReporter = Callable[[float | None, float | None, dict | None], None]
WARMUP_TIMEOUT_S = 900.0     # one warm-up request may take this long (JIT of large kernels on first use)


def warmup_config(warmup: Any, model: str | None = None) -> ProbeConfig:
    """``spec.startup.warmup`` (api.spec.Warmup) → the probe configuration of the warm-up run."""
    n = int(warmup.requests)
    return ProbeConfig(requests=n, concurrency=int(warmup.concurrency or n), input_len=int(warmup.inputLen),
                       output_len=int(warmup.outputLen), warmup=0, model=model, dataset="warm-up (synthetic)",
                       request_timeout_s=WARMUP_TIMEOUT_S).check()


def summary(report_dict: dict, seconds: float) -> dict:
    """The compact warm-up result ``run`` prints and the operator writes to status.coldStart.warmup: the
    ``Warmup`` status model, as its document."""
    d = report_dict
    if not d.get("usable"):
        return Warmup(ok=False, seconds=round(seconds, 3), reason=d.get("reason")).model_dump(exclude_unset=True)
    ttft, tpot = d.get("ttft_ms") or {}, d.get("tpot_ms") or {}
    out = Warmup(ok=d.get("errors") == 0 and d.get("completed", 0) > 0, seconds=round(seconds, 3),
                 requests=d.get("requests"), completed=d.get("completed"), errors=d.get("errors"),
                 ttftMsP50=ttft.get("p50"), ttftMsMax=ttft.get("max"), tpotMsP50=tpot.get("p50"), engine=d.get("engine"))
    if d.get("errors"):
        out.reason = "; ".join(d.get("error_examples") or [])[:500]
    return out.model_dump(exclude_unset=True)


def warm_up(url: str, warmup: Any, *, model: str | None = None, api_key: str | None = None,
            on_phase: PhaseReporter | None = None, clock: Callable[[], float] = time.time,
            transport=None) -> dict:
    """Send the warm-up requests to ``url`` (blocking) and return ``summary``; ``on_phase`` gets the
    ``warm`` phase on ``clock`` (wall time, as the runners report platform phases)."""
    cfg = warmup_config(warmup, model)
    start = clock()
    if on_phase is not None:
        on_phase(start, None, {"requests": cfg.requests, "input_len": cfg.input_len, "output_len": cfg.output_len})
    t0 = time.monotonic()
    rep = run_probe(url, cfg, api_key=api_key, transport=transport)
    seconds = time.monotonic() - t0
    out = summary(rep.to_dict(), seconds)
    w = Warmup.model_validate(out)
    if w.ok and on_phase is not None:
        on_phase(None, start + seconds, w.model_dump(exclude_none=True, exclude={"ok", "running"}))
    return out


def describe(s: dict, tracker: Any = None) -> str:
    """One line for a terminal; with the cold-start tracker, the ``warm`` phase as it timed it."""
    w = Warmup.model_validate(s)
    if not w.ok:
        return f"warm-up FAILED after {w.seconds or 0:.1f} s: {w.reason or 'requests failed'}"
    tpot = "-" if w.tpotMsP50 is None else f"{w.tpotMsP50:.1f}"
    line = (f"warm after {w.seconds or 0:.1f} s: {w.completed} warm-up requests, TTFT p50 {w.ttftMsP50 or 0:.0f} ms "
            f"(max {w.ttftMsMax or 0:.0f} ms), TPOT p50 {tpot} ms")
    p = tracker.report().phase("warm") if tracker is not None else None
    if p is not None and p.seconds is not None:
        line += f" (cold-start phase warm: {p.seconds:.1f} s)"
    return line
