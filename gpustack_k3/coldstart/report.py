"""The report: attempts (``attempts.Attempt``) → timelines, per-attempt outcomes and the JSON shape.

Timing rules:
* a phase ends when the **last rank** reports its end; per-rank figures go to ``details.ranks``;
* a phase starts at its own start marker, else where the previous observed phase ended, else at
  ``end - engine_seconds``; it never starts before the previous phase ended (no overlap);
* a phase that started but printed no end ends where the next observed phase starts;
* ``PhaseReport.seconds`` is the engine's own printed duration when there is one, else end − start (what the
  operator's status and metrics carry); the JSON of ``coldstart`` gives ``seconds`` = the engine's figure where it
  is finer than the whole-second stamps (within one stamp of the span), else end − start, with the engine's
  figure as ``details.reported_seconds`` and the span as ``details.elapsed_seconds``: the spans inside the
  attempt's span plus ``unaccounted_seconds`` (time no phase covers: the log says nothing about it) add up to
  ``total_seconds``;
* a phase printed inside the previous one's span (vLLM CPU: the profiling run inside "Warming up model") ends
  that one where it began, and the next phase begins at its end (the KV cache is sized after the profiling run).

Pure: reads attempt state, changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .attempts import STAMP_RESOLUTION_S, Attempt, Phase
from .phases import PHASE_INDEX, PHASES, PLATFORM_PHASES
from .scanner import iso


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


@dataclass
class PhaseReport:
    name: str
    start: float | None
    end: float | None
    seconds: float | None
    details: dict

    @property
    def wall_seconds(self) -> float | None:
        return (self.end - self.start) if self.start is not None and self.end is not None else None

    @property
    def shown_seconds(self) -> float | None:
        """What the JSON says the phase took: the engine's own figure when it is finer than the stamps (the span
        is within one stamp of it: "Loading weights took 0.44 seconds" stamped at both ends of one second), else
        the span; the span is always in ``details.elapsed_seconds``."""
        wall, eng = self.wall_seconds, self.details.get("reported_seconds")
        if wall is not None and eng is not None and abs(wall - eng) < STAMP_RESOLUTION_S:
            return eng
        return wall

    def to_dict(self) -> dict:
        shown = self.shown_seconds
        return {"name": self.name, "start": iso(self.start), "end": iso(self.end),
                "seconds": None if shown is None else round(shown, 3),
                "details": self.details}


@dataclass
class AttemptReport:
    index: int
    status: str
    failed_phase: str | None
    reason: str | None
    engine_init_seconds: float | None
    total_seconds: float | None
    start: float | None
    end: float | None
    phases: list[PhaseReport]
    current_phase: str | None
    failure: dict | None = None      # root cause: {reason, error, rank, at, context}
    memory: dict | None = None       # the engine's own memory figures (catalog FIGURES)
    compile_cache: dict | None = None   # {state: hit|miss|partial, hits, misses, compile_seconds, evidence}
    stalled: bool = False            # failed because a phase ran over its budget (not a crash)

    @property
    def unaccounted_seconds(self) -> float | None:
        """``total_seconds`` minus the wall-clock time the phases cover inside [start, end] (their union)."""
        if self.total_seconds is None or self.start is None or self.end is None:
            return None
        spans = sorted((max(p.start, self.start), min(p.end, self.end)) for p in self.phases
                       if p.start is not None and p.end is not None and p.end > self.start and p.start < self.end)
        covered, reach = 0.0, self.start
        for a, b in spans:
            a = max(a, reach)
            if b > a:
                covered += b - a
                reach = b
        return max(0.0, self.total_seconds - covered)

    def summary(self) -> dict:
        return {"attempt": self.index, "status": self.status, "failed_phase": self.failed_phase,
                "reason": self.reason, "start": iso(self.start), "end": iso(self.end),
                "total_seconds": _r(self.total_seconds),
                "engine_init_seconds": _r(self.engine_init_seconds),
                "unaccounted_seconds": _r(self.unaccounted_seconds),
                "compile_cache": self.compile_cache["state"] if self.compile_cache else None,
                "phases": [p.name for p in self.phases]}


@dataclass
class ColdStartReport:
    engine: str | None
    version: str | None
    last: AttemptReport
    attempts: list[AttemptReport]
    dropped_attempts: int = 0

    @property
    def status(self) -> str:
        return self.last.status

    @property
    def phases(self) -> list[PhaseReport]:
        return self.last.phases

    def phase(self, name: str) -> PhaseReport | None:
        return next((p for p in self.last.phases if p.name == name), None)

    def to_dict(self) -> dict:
        a = self.last
        return {
            "engine": self.engine,
            "version": self.version,
            "status": a.status,
            "failed_phase": a.failed_phase,
            "reason": a.reason,
            "engine_init_seconds": _r(a.engine_init_seconds),
            "total_seconds": _r(a.total_seconds),
            "unaccounted_seconds": _r(a.unaccounted_seconds),
            "failure": a.failure,
            "memory": a.memory,
            "compile_cache": a.compile_cache,
            "phases": [p.to_dict() for p in a.phases],
            "attempts": [x.summary() for x in self.attempts],
        }


def engine_seconds(p: Phase) -> float | None:
    vals = [r["seconds"] for r in p.ranks.values() if "seconds" in r]
    return max(vals) if vals else None


def _sizes(att: Attempt, p: Phase) -> int | None:
    bs = [r["bs_sizes"] for r in p.ranks.values() if "bs_sizes" in r]
    if bs:
        return max(bs)
    if att.bars:
        return sum(b[2] for b in att.bars)
    return None


def _rank_details(att: Attempt, p: Phase, details: dict) -> None:
    named = {r: d for r, d in p.ranks.items() if d and r != "main"}
    if len(named) > 1 or (att.tp and att.tp > 1 and len(named) >= 1 and p.name != "process_start"):
        ranks_out = {}
        for r, d in sorted(named.items()):
            ranks_out[r] = {k: (iso(v) if k == "end" else v) for k, v in d.items() if not k.startswith("_")}
        if ranks_out and len(ranks_out) > 1:
            details["ranks"] = ranks_out
            details["ranks_reported"] = len(ranks_out)
            if att.tp:
                details["ranks_expected"] = att.tp


def _within_second(t: float | None, floor: float) -> float | None:
    return floor if t is not None and floor - STAMP_RESOLUTION_S < t < floor else t


class _Spans:
    """Each observed phase's start and end, in phase order (the timing rules of the module docstring)."""

    def __init__(self, att: Attempt) -> None:
        self.att = att
        self.starts: dict[str, float | None] = {}
        self.ends: dict[str, float | None] = {}
        self.inferred_end: dict[str, bool] = {}
        self.prev_end: float | None = None
        self.prev_had_end = False
        # Engines stamp whole seconds (vLLM "HH:MM:SS" is the second the line was printed in, truncated);
        # the platform's container start is exact. A line stamped in the second the container was created
        # was printed after it: a log phase stamped less than a second before the container started starts
        # (or ends) when it started. (A larger gap is a clock difference, e.g. a container time zone: kept.)
        cs = att.phases.get("container_start")
        self.floor = cs.start if cs is not None and cs.seen else None

    def _own_start(self, n: str, p: Phase, eng: float | None) -> float | None:
        """Its start marker, else where the previous phase ended, else ``end - engine seconds``, else first line."""
        s = p.start
        if s is None and n == "process_start":
            s = self.att.first_ts if self.att.first_ts is not None else p.first
        if s is None and n not in PLATFORM_PHASES:
            if self.prev_had_end and self.prev_end is not None:
                s = self.prev_end
            elif p.end is not None and eng is not None:
                s = p.end - eng
            else:
                s = p.first
        return s

    def _after_previous(self, s: float, end: float | None, eng: float | None) -> float:
        """No overlap with the phase before; a phase printed inside the previous one's span (vLLM CPU: the
        profiling run inside "Warming up model") ran for its own figure up to its end line, and the phase before
        ended where it began."""
        prev_end = self.prev_end
        assert prev_end is not None
        if end is None or prev_end <= end:
            return max(s, prev_end)
        if eng is not None and s > end:
            s = end - eng
            for m in reversed(list(self.starts)):
                if m not in PLATFORM_PHASES and self.ends[m] is not None and self.ends[m] > s:
                    self.ends[m] = max(s, self.starts[m] if self.starts[m] is not None else s)
                break
            self.prev_end = s   # the phase before now ends here: the next one begins after this one's end
        return s

    def add(self, n: str) -> None:
        p = self.att.phases[n]
        eng = engine_seconds(p)
        s, end = self._own_start(n, p, eng), p.end
        if self.floor is not None and n not in PLATFORM_PHASES:
            s, end = _within_second(s, self.floor), _within_second(end, self.floor)
        if s is not None and self.prev_end is not None and n not in PLATFORM_PHASES:
            s = self._after_previous(s, end, eng)
        self.starts[n], self.ends[n] = s, end
        self.prev_had_end = end is not None
        if end is not None:
            self.prev_end = end if self.prev_end is None else max(self.prev_end, end)

    def close_open(self, seen: list[str], failed_phase: str | None) -> None:
        """A phase that never printed its end ends where the next one starts (or where it failed)."""
        fail = self.att.failure
        for i, n in enumerate(seen):
            if self.ends[n] is not None:
                continue
            if fail is not None and failed_phase == n and fail.at is not None:
                self.ends[n] = fail.at
                continue
            later = [self.starts[m] for m in seen[i + 1:] if self.starts[m] is not None]
            if later:
                self.ends[n] = min(later)
                self.inferred_end[n] = True


def _row(att: Attempt, n: str, spans: _Spans, failed_phase: str | None) -> PhaseReport:
    p = att.phases[n]
    eng = engine_seconds(p)
    s, e = spans.starts[n], spans.ends[n]
    elapsed = (e - s) if (s is not None and e is not None) else None
    details: dict[str, Any] = {k: v for k, v in p.details.items() if not k.startswith("_")}
    if eng is not None:
        details["reported_seconds"] = round(eng, 3)
    if elapsed is not None:
        details["elapsed_seconds"] = round(elapsed, 3)
    if spans.inferred_end.get(n):
        details["end_inferred"] = True
    if att.failure is not None and failed_phase == n:
        details["failed"] = True
    _rank_details(att, p, details)
    if n == "cuda_graphs" and (sizes := _sizes(att, p)):
        details["sizes"] = sizes
    return PhaseReport(n, s, e, eng if eng is not None else elapsed, details)


def _open_row(att: Attempt, failed_phase: str | None, since: float | None) -> PhaseReport | None:
    """The phase in progress (or failed in) when it has no evidence of its own yet: shown open from ``since``."""
    cur = att.current_phase()
    if att.failure is None and cur is not None and cur not in att.phases:
        return PhaseReport(cur, since, None, None, {})
    if att.failure is not None and failed_phase and failed_phase not in att.phases:
        at = att.failure.at
        return PhaseReport(failed_phase, since, at, None if since is None or at is None else at - since,
                           {"failed": True})
    return None


def timeline(att: Attempt) -> list[PhaseReport]:
    seen = [n for n in PHASES if n in att.phases and att.phases[n].seen]
    spans = _Spans(att)
    for n in seen:
        spans.add(n)
    failed_phase = att.failed_phase()
    spans.close_open(seen, failed_phase)
    rows = [_row(att, n, spans, failed_phase) for n in seen]
    extra = _open_row(att, failed_phase, spans.prev_end)
    if extra is not None and (rows or att.failure is not None):
        rows.append(extra)
    rows.sort(key=lambda r: PHASE_INDEX[r.name])
    return rows


def _outcome(att: Attempt, last_line_ts: float | None, is_last: bool
             ) -> tuple[str, float | None, str | None, str | None, dict | None]:
    """(status, end, failed phase, reason, root cause) of one attempt."""
    if att.failure is not None:
        failed_phase, reason, failure = att.failed_phase(), att.failure.reason, None
        if not att.failure.stalled:
            root, context = att.root_cause()
            if root is not None:
                reason = root.text
                failure = {"reason": root.text, "error": root.error, "rank": root.rank, "at": iso(root.at),
                           "context": _context(context, root)}
        return "failed", att.failure.at, failed_phase, reason, failure
    if att.ready:
        return "ready", att.phases["server_ready"].end, None, None, None
    stamps = [x for x in (att.last_ts, att.first_ts) if x is not None]
    if is_last and last_line_ts is not None and (att.first_ts is None or last_line_ts >= att.first_ts):
        stamps.append(last_line_ts)
    return "in-progress", max(stamps) if stamps else None, None, None, None


def _engine_init(att: Attempt, rows: list[PhaseReport], status: str) -> float | None:
    """The engine's own init figure; without one (SGLang, old vLLM): weights loaded → KV allocated and graphs
    captured."""
    if att.engine_init is not None or status == "failed":
        return att.engine_init
    by = {r.name: r for r in rows}
    wl = by.get("weights_load")
    tail = [by[n].end for n in ("compile", "kv_cache", "cuda_graphs")
            if n in by and by[n].end is not None and not by[n].details.get("failed")]
    if wl is not None and wl.end is not None and tail and max(tail) >= wl.end:
        return max(tail) - wl.end
    return None


def attempt_report(att: Attempt, last_line_ts: float | None, is_last: bool) -> AttemptReport:
    """``last_line_ts``: the stream's latest stamped line, which belongs to the last attempt."""
    rows = timeline(att)
    starts = [r.start for r in rows if r.start is not None]
    start = min(starts) if starts else att.first_ts
    status, end, failed_phase, reason, failure = _outcome(att, last_line_ts, is_last)
    total = (end - start) if (start is not None and end is not None) else None
    cur = None if status != "in-progress" else att.current_phase()
    return AttemptReport(att.index, status, failed_phase, reason, _engine_init(att, rows, status), total, start, end,
                         rows, cur, failure, memory(att), compile_cache(att, rows),
                         stalled=att.failure is not None and att.failure.stalled)


def memory(att: Attempt) -> dict | None:
    """The engine's own memory figures: per figure, the smallest value over the ranks that printed it."""
    if not att.figures:
        return None
    return {name: min(ranks.values()) for name, ranks in sorted(att.figures.items()) if ranks}


def compile_cache(att: Attempt, rows: list[PhaseReport]) -> dict | None:
    """Were compiled graphs loaded from the cache (hit), compiled (miss), or both (partial)?"""
    hits, misses = att.cache["hit"], att.cache["miss"]
    if not hits and not misses:
        return None
    state = "partial" if hits and misses else ("hit" if hits else "miss")
    compile_row = next((r for r in rows if r.name == "compile"), None)
    return {"state": state, "hits": hits, "misses": misses,
            "compile_seconds": None if compile_row is None or compile_row.seconds is None else round(compile_row.seconds, 3),
            "evidence": list(att.cache_lines)}


def _context(context: list, root) -> list[str]:
    """The other failure messages (wrappers), each once, as ``[rank] text``, at most 6."""
    out: list[str] = []
    for c in context:
        line = f"[{c.rank}] {c.text}" if c.rank else c.text
        if c.text != root.text and line not in out:
            out.append(line)
    return out[:6]


def closed(att: Attempt, p: Phase, rows: list[PhaseReport], finished: bool) -> bool:
    """Has the last rank reported? Known when all expected ranks ended, when a later phase has
    begun, when the server is ready or the attempt failed, or at end of input."""
    if p.name in PLATFORM_PHASES or p.name in ("server_ready", "warm"):
        return True
    if finished or att.failure is not None or att.ready:
        return True
    ended = sum(1 for r, d in p.ranks.items() if r != "main" and "end" in d)
    if att.tp and ended >= att.tp:
        return True
    if not att.tp and "main" in p.ranks and len(p.ranks) == 1:
        return True  # single-process engine
    later = [r.name for r in rows if PHASE_INDEX[r.name] > PHASE_INDEX[p.name]]
    return bool(later) and any(att.phases.get(n) is not None and att.phases[n].seen for n in later)
