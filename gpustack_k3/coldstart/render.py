"""Text rendering for people: a timeline readable at a glance, and a findings list."""
from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from gpustack_k3.core.findings import Finding

from .report import AttemptReport, PhaseReport
from .tracker import ColdStartReport

_STATUS_COLOUR = {"ready": "green", "failed": "red", "in-progress": "yellow"}
_SEV_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}
_DETAIL_KEYS = ("gib", "gb", "tokens", "blocks", "shards_done", "concurrency", "sizes", "shards", "ranks_reported",
                "ranks_expected", "reported_seconds", "mode", "dtype", "max_total_num_tokens", "context_len")


def _hms(ts: float | None) -> str:
    if ts is None:
        return "--:--:--"
    return datetime.fromtimestamp(ts, UTC).strftime("%H:%M:%S")


def _dur(s: float | None) -> str:
    if s is None:
        return "…"
    if s >= 60:
        return f"{int(s // 60)}m{s % 60:04.1f}s"
    return f"{s:.1f}s"


def _details(d: dict[str, Any]) -> str:
    parts = []
    for k in _DETAIL_KEYS:
        if k in d:
            v = d[k]
            if k == "reported_seconds":
                parts.append(f"engine says {v}s")
            elif isinstance(v, int) and v >= 10000:
                parts.append(f"{k}={v:,}")
            else:
                parts.append(f"{k}={v}")
    if d.get("end_inferred"):
        parts.append("end inferred")
    return ", ".join(parts)


def render_report(rep: ColdStartReport, width: int = 30) -> str:
    a = rep.last
    lines = [_head(rep)]
    # the bars are wall-clock intervals: inside the attempt's span they and "unaccounted" add up to the total; the
    # figure beside each is the engine's own where it is finer than the stamps (``PhaseReport.shown_seconds``)
    longest = max((p.wall_seconds or 0.0 for p in a.phases), default=0.0) or 1.0
    lines += [_phase_line(a, p, width, longest) for p in a.phases]
    if a.unaccounted_seconds is not None:
        lines.append(f"  {'':8}  {'unaccounted':<16} {_dur(a.unaccounted_seconds):>9}  "
                     "(no phase covers it: the log says nothing about this time)")
    lines += _outcome_lines(a) + _figure_lines(a)
    for prev in rep.attempts[:-1]:
        lines.append(f"  earlier attempt {prev.index}: {prev.status}"
                     + (f" in {prev.failed_phase}: {prev.reason}" if prev.failed_phase else ""))
    return "\n".join(lines)


def _head(rep: ColdStartReport) -> str:
    a = rep.last
    head = f"{rep.engine or 'unknown engine'} {rep.version or ''}".strip()
    status = click.style(a.status.upper(), fg=_STATUS_COLOUR.get(a.status), bold=True)
    return (f"{head}: {status}  total {_dur(a.total_seconds)}"
            + (f"  engine init {_dur(a.engine_init_seconds)}" if a.engine_init_seconds is not None else "")
            + (f"  (attempt {a.index} of {len(rep.attempts)})" if len(rep.attempts) > 1 else ""))


def _phase_line(a: AttemptReport, p: PhaseReport, width: int, longest: float) -> str:
    secs = p.wall_seconds
    bar = "█" * (0 if secs is None else max(1, round(width * secs / longest)))
    colour = "red" if a.failed_phase == p.name else ("yellow" if p.end is None else "cyan")
    after = a.status == "ready" and a.end is not None and p.start is not None and p.start >= a.end \
        and p.name != "server_ready"
    return (f"  {_hms(p.start)}  {p.name:<16} {_dur(p.shown_seconds):>9}  "
            f"{click.style(bar.ljust(width), fg=colour)}  {_details(p.details)}"
            f"{'  (after ready: not in the total)' if after else ''}").rstrip()


def _outcome_lines(a: AttemptReport) -> list[str]:
    if a.status == "failed":
        f = a.failure or {}
        who = " ".join(x for x in (f.get("rank") and f"[{f['rank']}]", f.get("error")) if x)
        return [click.style(f"  failed in {a.failed_phase or 'an unknown phase'}: {who + ': ' if who else ''}"
                            f"{a.reason}", fg="red")] + [f"    after: {c}" for c in f.get("context") or []]
    if a.status == "in-progress" and a.current_phase:
        return [click.style(f"  in progress: {a.current_phase}", fg="yellow")]
    return []


def _figure_lines(a: AttemptReport) -> list[str]:
    lines = []
    if a.memory:
        lines.append("  engine memory: " + ", ".join(f"{k}={_fmt(v)}" for k, v in a.memory.items()))
    if a.compile_cache:
        c = a.compile_cache
        secs = f", compile {_dur(c['compile_seconds'])}" if c.get("compile_seconds") is not None else ""
        lines.append(f"  compile cache: {c['state']} ({c['hits']} hit, {c['misses']} miss line(s){secs})")
    return lines


def _fmt(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and v >= 10000 else str(v)


def render_plan_check(check: dict) -> str:
    """The plan check as lines: figure, planned, engine, drift."""
    lines = ["plan check (planned vs engine):"]
    for r in check["figures"]:
        drift = "n/a" if r["drift_pct"] is None else f"{r['drift_pct']:+.2f}%"
        lines.append(f"  {r['figure']:<22} planned {_fmt(r['planned']):>12}  engine {_fmt(r['engine']):>12}  drift {drift}")
    if check["not_printed"]:
        lines.append(f"  not printed by the engine: {', '.join(check['not_printed'])}")
    if check.get("note"):
        lines.append(f"  note: {check['note']}")
    return "\n".join(lines)


def render_findings(findings: list[Finding]) -> str:
    if not findings:
        return click.style("no findings", fg="green")
    lines = []
    for f in findings:
        sev = click.style(f"{f.severity:<7}", fg=_SEV_COLOUR.get(f.severity), bold=True)
        lines.append(f"{sev} {f.rule} [{f.field}]: {f.message}")
        lines.append(f"        fix: {f.fix}")
        lines.append(f"        source: {f.source}")
    return "\n".join(lines)
