"""Cold-start phase tracker: one streaming implementation for files and live logs.

Feed raw bytes as they arrive (``feed``), call ``finish`` at end of input, read ``report()``.
Three concerns, one module each: line framing and timestamps (``framing``), the attempt state
machine (``attempts``), the report and its timing rules (``report``). This module wires them:
each candidate line goes to the catalog's consumers (markers, doctor patterns), and every change
of an attempt becomes listener transitions.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from .attempts import (
    MAX_ATTEMPTS,
    MAX_HITS_PER_RULE,
    MAX_RANKS,
    Attempt,
    Attempts,
    PhaseTransition,
)
from .catalog import Catalog, load_catalog
from .causes import TRACEBACK, Tracebacks
from .doctor import diagnose
from .framing import MAX_LINE, CandidateLines, Clock, LineFramer, clean_text
from .phases import DEFAULT_BUDGETS, PHASE_INDEX, PHASES, PLATFORM_PHASES
from .report import (
    AttemptReport,
    ColdStartReport,
    PhaseReport,
    attempt_report,
    closed,
    timeline,
)
from .scanner import TimeLike, iso, to_epoch
from gpustack_k3.api.v1alpha1.constants import ENGINE_SGLANG, ENGINE_VLLM

__all__ = ["MAX_ATTEMPTS", "MAX_HITS_PER_RULE", "MAX_LINE", "MAX_RANKS", "AttemptReport", "ColdStartReport",
           "ColdStartTracker", "PhaseReport", "PhaseTransition", "iso"]

Listener = Callable[[PhaseTransition], None]


class ColdStartTracker:
    """Turn an engine log (bytes, in any chunking) into cold-start phases, failures and doctor hits.

    ``engine``: "vllm" | "sglang" | None (auto-detect). ``version``: the engine version if known
    (else read from the log or inferred from which marker forms appear). ``budgets``: seconds per
    phase for ``check_stall`` (defaults: ``DEFAULT_BUDGETS``; pass ``{}`` to disable). ``year``:
    reference year for vLLM timestamps, which print none (default: the current UTC year).
    """

    def __init__(self, engine: str | None = None, version: str | None = None,
                 budgets: dict[str, float] | None = None, year: int | None = None,
                 listeners: Iterable[Listener] = (), catalog: Catalog | None = None,
                 backend: str = "auto"):
        if engine not in (None, ENGINE_VLLM, ENGINE_SGLANG):
            raise ValueError(f"engine must be 'vllm', 'sglang' or None (auto), not {engine!r}")
        self.catalog = catalog or load_catalog()
        self.budgets = dict(DEFAULT_BUDGETS if budgets is None else budgets)
        for k in self.budgets:
            if k not in PHASE_INDEX:
                raise ValueError(f"budgets: unknown phase {k!r}; expected one of {', '.join(PHASES)}")
        self._listeners: list[Listener] = list(listeners)
        self._framer = LineFramer()
        self._clock = Clock(year)
        self._lines = CandidateLines(self.catalog.keys, self.catalog.request_keys, backend)
        self.scanner = self._lines.scanner
        self.state = Attempts(self.catalog, engine, version, changed=self._notify, emit=self._emit)
        self._tracebacks = Tracebacks()
        self._traceback_key = next(i for i, k in enumerate(self.catalog.keys) if k in TRACEBACK)
        self.finished = False

    # ------------------------------------------------------------------ what the doctor and callers read
    @property
    def engine(self) -> str | None:
        return self.state.engine

    @property
    def version(self) -> str | None:
        return self.state.version

    @property
    def attempts(self) -> list[Attempt]:
        return self.state.attempts

    @property
    def doctor_hits(self) -> dict[str, list[dict]]:
        return self.state.doctor_hits

    @property
    def doctor_counts(self) -> dict[str, int]:
        return self.state.doctor_counts

    @property
    def doctor_after_ready(self) -> dict[str, int]:
        return self.state.doctor_after_ready

    @property
    def bytes_seen(self) -> int:
        return self._framer.bytes_seen

    @property
    def last_line_ts(self) -> float | None:
        """Time (the log's clock, epoch seconds) of the latest stamped line read."""
        return self._clock.last_line_ts

    # ------------------------------------------------------------------ public API
    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def feed(self, chunk: bytes) -> None:
        """Feed the next piece of the log: any size, any split point, any bytes."""
        if not chunk:
            return
        complete = self._framer.feed(chunk)
        if complete:
            self._scan(complete)

    def finish(self) -> ColdStartReport:
        """End of input: the last unterminated line is parsed too. An attempt that printed an error
        since its last progress and nothing after it failed with that error."""
        tail = self._framer.flush()
        if tail:
            self._scan(tail)
        self.state.ended(self._clock.last_line_ts, None)
        self.finished = True
        self._notify(self.state.current)
        return self.report()

    def process_exited(self, exit_code: int | None, at: TimeLike = None) -> None:
        """The engine process (container) ended with ``exit_code``: an attempt that is neither ready
        nor failed failed, with the error it printed last, or with the exit code when it printed none."""
        self.state.ended(to_epoch(at), exit_code)

    def platform_event(self, phase: str, start: TimeLike, end: TimeLike = None,
                       details: dict | None = None) -> None:
        """Record a platform phase (scheduled, image_pull, container_start) seen by the operator
        or a runner. A platform phase reported after the engine already progressed means the
        container was restarted: a new attempt begins.

        ``warm`` is reported by whoever sends the warm-up requests after Ready (``run``, the operator:
        spec.startup.warmup), always for the current attempt: its start when the requests go out (the
        first request line of the log then no longer ends the phase), its end when they are answered."""
        if phase not in PLATFORM_PHASES and phase != "warm":
            raise ValueError(f"platform_event: phase must be one of {', '.join(PLATFORM_PHASES)} or warm, not {phase!r}")
        self.state.platform(phase, to_epoch(start), to_epoch(end), details, current=phase == "warm")

    def check_stall(self, now: TimeLike) -> bool:
        """Fail the current attempt if the phase in progress has run longer than its budget.
        ``now`` uses the log's clock (UTC). Returns True when a stall was declared."""
        t = to_epoch(now)
        att = self.state.current
        if t is None or att.failure is not None or att.ready:
            return False
        cur = att.current_phase()
        if cur is None:
            return False
        budget = self.budgets.get(cur)
        since = next((r.start for r in timeline(att) if r.name == cur and r.start is not None), att.last_ts)
        if budget is None or since is None or t - since <= budget:
            return False
        self.state.stall(att, t, cur, f"stalled in {cur}: no end after {t - since:.0f} s (budget {budget:.0f} s)")
        return True

    def report(self) -> ColdStartReport:
        atts = self.state.attempts
        reps = [attempt_report(a, self._clock.last_line_ts, a is atts[-1]) for a in atts]
        return ColdStartReport(self.engine, self.version, reps[-1], reps, self.state.dropped_attempts)

    def findings(self) -> list:
        return diagnose(self)

    # ------------------------------------------------------------------ scanning
    def _scan(self, data: bytes) -> None:
        clock = self._clock
        if clock.first_ts is None:
            ts = clock.head(data)
            if ts is not None:
                self.state.first_stamp(ts)
        tracebacks = self._tracebacks
        self._lines.scan(data, self.state.want_requests, lambda: tracebacks.active, self._line)
        clock.tail(data)

    def _line(self, raw: bytes, keys: list[int]) -> None:
        clock, state, tracebacks = self._clock, self.state, self._tracebacks
        state.seq += 1
        if not keys:   # a line inside an open traceback
            text = clean_text(raw)
            exc = tracebacks.line(text)
            if exc is not None:
                ts, _rank = clock.stamp(text, update=False)
                state.exception(exc, ts, exc.rank, clock.marker_ts)
            return
        text = clean_text(raw)
        ts, rank = clock.stamp(text, update=True)
        clock.parsed(ts)
        fallback = clock.marker_ts
        consumers = self.catalog.consumers
        rules_hit: set[tuple[str, str]] | None = None
        for idx in keys:
            for c in consumers[idx]:
                if c[0] == "marker":
                    state.marker(c[1], c[2], text, ts, rank, fallback)
                elif rules_hit is None or (c[1].id, c[2].role) not in rules_hit:
                    if state.doctor(c[1], c[2], c[3], c[4], text, ts, rank, fallback):
                        if rules_hit is None:
                            rules_hit = set()
                        rules_hit.add((c[1].id, c[2].role))
        if tracebacks.active or self._traceback_key in keys:
            exc = tracebacks.line(text, rank)
            if exc is not None:
                state.exception(exc, ts, exc.rank, fallback)

    # ------------------------------------------------------------------ listeners
    def _emit(self, ev: PhaseTransition) -> None:
        for fn in self._listeners:
            fn(ev)

    def _notify(self, att: Attempt) -> None:
        if not self._listeners:
            return
        rows = timeline(att)
        for r in rows:
            if r.start is not None and ("start", r.name) not in att.notified:
                att.notified.add(("start", r.name))
                self._emit(PhaseTransition(att.index, r.name, "start", r.start, engine=self.engine))
            p = att.phases.get(r.name)
            if p is not None and p.end is not None and ("end", r.name) not in att.notified \
                    and closed(att, p, rows, self.finished):
                att.notified.add(("end", r.name))
                self._emit(PhaseTransition(att.index, r.name, "end", p.end, r.seconds, engine=self.engine))
        if att.failure is not None and ("failed", "") not in att.notified:
            att.notified.add(("failed", ""))
            self._emit(PhaseTransition(att.index, att.failed_phase(), "failed", att.failure.at,
                                       reason=att.failure.reason, engine=self.engine))
