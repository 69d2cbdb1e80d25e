"""The attempt state machine: catalog events (markers, doctor patterns, platform phases) → attempts.

An attempt is one start of the engine: per phase its start, end, per-rank figures and details, plus
its failure. A process-start marker after progress, or a platform phase reported after progress,
opens a new attempt (engine or container restart in the same stream). Memory is bounded: a fixed
set of phases × ranks per attempt, at most ``MAX_ATTEMPTS`` attempts, ``MAX_HITS_PER_RULE`` doctor
examples per rule.

Times come in already parsed (``framing.Clock``); derived timings are the report's (``report``).
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from packaging.version import Version

from .causes import MAX_CAUSES, TEXT_CHARS, Cause, ExceptionLine
from .catalog import SPECIAL_GROUPS, Catalog, Marker
from .phases import LOG_PHASES, PHASE_INDEX, PHASES, PLATFORM_PHASES
from .scanner import iso

MAX_ATTEMPTS = 64           # older attempts are summarised away beyond this
MAX_HITS_PER_RULE = 32      # doctor keeps this many examples per rule (counts stay exact)
MAX_RANKS = 1024            # per phase; more distinct rank prefixes than this is noise
REASON_CHARS = 240
# groups kept per rank as well (memory figures of the phases that state them)
RANK_FIGURES = frozenset({"gib", "gb", "tokens", "concurrency", "k_gb", "v_gb"})
# a ``pool`` marker's groups whose first value stands (the first pool the engine allocates is the full-attention one)
POOL_FIRST = frozenset({"tokens", "gb", "dtype", "k_gb", "v_gb"})
MAX_CACHE_LINES = 4         # compile-cache lines kept as evidence per attempt
STAMP_RESOLUTION_S = 1.0    # engines stamp whole seconds


@lru_cache(maxsize=256)
def version_key(v: str) -> Version:
    return Version(v)


def number(v: str) -> Any:
    s = v.replace(",", "") if "," in v else v
    if not s or not (s[0].isdigit() or s[0] in "+-.") or not s[-1].isdigit() and s[-1] != ".":
        return v   # not a number (no exception raised for it: paths, names, dtypes)
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return v


@dataclass
class PhaseTransition:
    """Passed to listeners: a phase started or ended, the attempt failed, or a new attempt began."""

    attempt: int
    phase: str | None
    event: str                  # "start" | "end" | "failed" | "attempt"
    at: float | None         # epoch seconds (UTC)
    seconds: float | None = None
    reason: str | None = None
    engine: str | None = None

    def to_dict(self) -> dict:
        return {"attempt": self.attempt, "phase": self.phase, "event": self.event, "at": iso(self.at),
                "seconds": self.seconds, "reason": self.reason, "engine": self.engine}


@dataclass
class Phase:
    name: str
    start: float | None = None
    end: float | None = None
    ranks: dict[str, dict] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    seen: bool = False
    first: float | None = None   # earliest marker of this phase, any kind

    def rank(self, r: str) -> dict:
        d = self.ranks.get(r)
        if d is None:
            d = {} if len(self.ranks) >= MAX_RANKS else self.ranks.setdefault(r, {})
        return d


@dataclass
class Failure:
    at: float | None
    phase: str | None
    reason: str                  # what was printed when the attempt was declared failed
    stalled: bool = False        # declared by check_stall (no cause in the log)


class Attempt:
    def __init__(self, index: int):
        self.index = index
        self.phases: dict[str, Phase] = {}
        self.failure: Failure | None = None
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.engine_init: float | None = None
        self.tp: int | None = None
        self.bars: list[list] = []          # tqdm capture bars: [mode, done, total]
        self.late_compile_count = 0                 # compile markers after ready (jit-after-ready)
        self.late_compile_first: float | None = None
        self.notified: set[tuple[str, str]] = set()
        self.causes: list[Cause] = []               # failure messages, in stream order (bounded)
        self.progress_seq = -1                      # stream line of the last phase progress
        self.figures: dict[str, dict[str, float | int]] = {}   # engine figure -> rank -> value
        self.cache = {"hit": 0, "miss": 0}          # compile-cache lines seen
        self.cache_lines: list[str] = []            # the first few, as evidence

    def add_cause(self, cause: Cause) -> None:
        """Keep a cause. Two catalog lines reading the same log line make one cause: the wrapper
        view yields to the causal one, and of two causal readings the fuller text wins."""
        last = self.causes[-1] if self.causes else None
        if last is not None and last.seq == cause.seq:
            keep, other = last, cause
            if (last.wrapper and not cause.wrapper) or (
                    last.wrapper == cause.wrapper and len(cause.text) > len(last.text)):
                keep, other = cause, last
            keep.error = keep.error or other.error
            keep.phase = keep.phase or other.phase
            self.causes[-1] = keep
            return
        if len(self.causes) < MAX_CAUSES:
            self.causes.append(cause)

    def root_cause(self) -> tuple[Cause | None, list[Cause]]:
        """The first causal error of the attempt and the messages around it (wrappers). Only what
        came after the attempt's last progress counts (an earlier, survived traceback is no cause)."""
        late = [c for c in self.causes if c.seq > self.progress_seq]
        root = next((c for c in late if not c.wrapper), late[0] if late else None)
        context = [c for c in late if c is not root]
        return root, context

    def failed_phase(self) -> str | None:
        """The phase the attempt failed in: the root cause's own phase when its marker names one."""
        if self.failure is None:
            return None
        if not self.failure.stalled:
            root, _context = self.root_cause()
            if root is not None and root.phase:
                return root.phase
        return self.failure.phase

    def phase(self, name: str) -> Phase:
        p = self.phases.get(name)
        if p is None:
            p = self.phases[name] = Phase(name)
        return p

    @property
    def ready_at(self) -> float | None:
        p = self.phases.get("server_ready")
        return p.end if p is not None else None

    @property
    def ready(self) -> bool:
        p = self.phases.get("server_ready")
        return p is not None and p.end is not None

    def progressed(self) -> bool:
        return self.failure is not None or any(
            p.seen and n not in ("process_start",) + PLATFORM_PHASES for n, p in self.phases.items())

    def touch(self, ts: float) -> None:
        if self.last_ts is None or ts > self.last_ts:
            self.last_ts = ts

    def current_phase(self) -> str | None:
        """The phase in progress: the last phase with evidence if it has not ended, else the next."""
        last: str | None = None
        for name in PHASES:
            p = self.phases.get(name)
            if p is not None and p.seen:
                last = name
        if last is None:
            return "process_start"
        p = self.phases[last]
        if p.end is None:
            return last
        if last in ("server_ready", "warm"):
            return None
        if last in PLATFORM_PHASES:
            return PHASES[PHASE_INDEX[last] + 1]
        nxt = LOG_PHASES[LOG_PHASES.index(last) + 1]
        return "weights_load" if nxt == "weights_download" else nxt


class Attempts:
    """What the log and the platform said, attempt by attempt: the tracker's state.

    ``changed(attempt)`` is called whenever an attempt's phases or failure changed (the tracker
    turns that into listener transitions); ``emit`` receives the "attempt" transitions."""

    def __init__(self, catalog: Catalog, engine: str | None, version: str | None,
                 changed: Callable[[Attempt], None], emit: Callable[[PhaseTransition], None]) -> None:
        self.catalog = catalog
        self.engine = engine
        self.version_given = version
        self.version_seen: str | None = None
        self.since: str | None = None   # newest "since" among the marker forms seen
        self.until: str | None = None   # oldest "until" among them
        self.attempts: list[Attempt] = [Attempt(1)]
        self.dropped_attempts = 0
        self.doctor_hits: dict[str, list[dict]] = {}
        self.doctor_counts: dict[str, int] = {}
        self.doctor_after_ready: dict[str, int] = {}
        self._changed = changed
        self._emit = emit
        self.seq = 0                    # stream line being read (set by the tracker)
        self._forms_seen: set[str] = set()
        self.engine_lines = 0           # lines of the (given or detected) engine's own forms
        self.other_engine_lines: dict[str, int] = {}   # identifying lines of another engine (--engine contradicts)

    @property
    def current(self) -> Attempt:
        return self.attempts[-1]

    # ------------------------------------------------------------------ version and engine
    @property
    def version(self) -> str | None:
        if self.version_given:
            return self.version_given
        if self.version_seen:
            return self.version_seen
        lo, hi = self.since, self.until
        if lo and hi:
            return f"{lo}..{hi}" if version_key(lo) <= version_key(hi) else f">={lo}"
        if lo:
            return f">={lo}"
        if hi:
            return f"<={hi}"
        return None

    def engine_ok(self, engine: str, detect: bool) -> bool:
        if engine == "any":
            return True
        if self.engine is None:
            if not detect:
                return False
            self.engine = engine
        return engine == self.engine

    def want_requests(self) -> bool:
        """Access-log lines are only read between "ready" and the first request (the warm phase);
        the rest of the time their key is left out of the scan (they are most of a serving log)."""
        att = self.attempts[-1]
        return att.ready_at is not None and "warm" not in att.phases

    # ------------------------------------------------------------------ events
    def first_stamp(self, ts: float) -> None:
        att = self.attempts[-1]
        if att.first_ts is None:
            att.first_ts = ts

    def marker(self, m: Marker, rx, text: str, ts: float | None, rank: str | None,
               fallback_ts: float | None) -> None:
        """One catalog marker's line: read it (engine, regex), find its attempt, then what its kind says."""
        groups = self._read(m, rx, text)
        if groups is None:
            return
        att, ts = self._attempt_at(m, ts, fallback_ts)
        self._identity(att, groups)
        if m.kind in ("fail", "cause"):
            self._cause(m, att, text, ts, rank, groups)
        elif m.kind == "request":
            self._request(att, text, ts)
        elif m.kind != "traceback":   # a traceback: the tracker follows it (causes.Tracebacks), calls exception()
            self._progress(m, att, text, ts, rank, groups)

    def _read(self, m: Marker, rx, text: str) -> dict[str, str] | None:
        """The line's regex groups, or None when it is not this marker's line (another engine's, no match)."""
        engine = m.engine
        if engine != "any" and self.engine is not None and engine != self.engine:
            if m.detect and (rx is None or rx.search(text)):   # a line that names the other engine: counted
                self.other_engine_lines[engine] = self.other_engine_lines.get(engine, 0) + 1
            return None   # the other engine's line: no need to read it further
        groups: dict[str, str] = {}
        if rx is not None:
            match = rx.search(text)
            if match is None:
                return None
            groups = {k: v for k, v in match.groupdict().items() if v is not None}
        if engine != "any":
            if engine != self.engine and not self.engine_ok(engine, m.detect):
                return None
            self.engine_lines += 1
            self._form_seen(m)
        return groups

    def _form_seen(self, m: Marker) -> None:
        """The version range a marker's form implies, once per marker."""
        if m.id in self._forms_seen:
            return
        self._forms_seen.add(m.id)
        if m.since and (self.since is None or version_key(m.since) > version_key(self.since)):
            self.since = m.since
        if m.until and (self.until is None or version_key(m.until) < version_key(self.until)):
            self.until = m.until

    def _attempt_at(self, m: Marker, ts: float | None, fallback_ts: float | None) -> tuple[Attempt, float | None]:
        """The attempt the line belongs to (a process start after progress begins a new one) and its time."""
        att = self.attempts[-1]
        if m.kind == "start" and m.phase == "process_start" and att.progressed():
            att = self.new_attempt(ts)
        if ts is None:
            ts = fallback_ts
        else:
            att.touch(ts)
        if att.first_ts is None and ts is not None:
            att.first_ts = ts
        return att, ts

    def _identity(self, att: Attempt, groups: dict[str, str]) -> None:
        if "version" in groups and not self.version_given:
            self.version_seen = groups["version"]
        if "tp" in groups:
            with contextlib.suppress(ValueError):
                att.tp = int(groups["tp"])

    def _cause(self, m: Marker, att: Attempt, text: str, ts: float | None, rank: str | None,
               groups: dict[str, str]) -> None:
        """"fail": the engine gave up (the first one declares the attempt failed); "cause": an error message that
        names why, should the attempt fail (the process ending says so)."""
        reason = groups.get("reason") or text.strip()
        att.add_cause(Cause(self.seq, ts, rank, " ".join(reason.split())[:TEXT_CHARS], error=groups.get("error"),
                            wrapper=m.wrapper, phase=m.phase, marker=m.id))
        if m.kind == "fail":
            self.fail(att, ts, m.phase, reason)

    def _request(self, att: Attempt, text: str, ts: float | None) -> None:
        """A served request: the first one after Ready ends the warm phase."""
        ready = att.ready_at
        if ready is not None and ts is not None and ts >= ready:
            w = att.phase("warm")
            if not w.seen:
                w.seen, w.start, w.end = True, ready, ts
                w.details["first_request"] = text.strip()[-160:]
                self._changed(att)

    def _progress(self, m: Marker, att: Attempt, text: str, ts: float | None, rank: str | None,
                  groups: dict[str, str]) -> None:
        """A phase line (start, progress, end, info): the phase, its rank's figures and details."""
        assert m.phase is not None
        if att.failure is not None:
            return
        p = att.phase(m.phase)
        if self._late_compile(att, m, ts):
            return
        p.seen = True
        att.progress_seq = self.seq
        if m.figures:
            self._figures(att, m, {k: number(groups[k]) for k in m.figures if k in groups}, groups, rank or "main")
        if m.cache is not None:
            att.cache[m.cache] += 1
            if len(att.cache_lines) < MAX_CACHE_LINES:
                att.cache_lines.append(f"{m.id}: {text.strip()[:200]}")
        if ts is not None and m.kind != "info" and (p.first is None or ts < p.first):
            p.first = ts
        rd = p.rank(rank or "main")
        groups = self._model_of(m, rd, groups)
        self._times(m, p, rd, ts)
        self._seconds(att, m, rd, groups)
        self._details(m, p, rd, groups)
        if "sizes" in groups:
            self._bar(att, groups.get("mode") or groups.get("what") or "", groups.get("done"), groups["sizes"])
        if m.pool:
            pools = p.details.setdefault("pools", {})
            label = (groups.get("pool") or "kv").strip()
            if label in pools or len(pools) < 16:
                pools[label] = number(groups["tokens"])
        self._changed(att)

    @staticmethod
    def _late_compile(att: Attempt, m: Marker, ts: float | None) -> bool:
        """A compile line after Ready (JIT after ready): counted, not a phase."""
        ready = att.ready_at
        if m.phase == "compile" and ready is not None and ts is not None and ts > ready:
            att.late_compile_count += 1
            if att.late_compile_first is None or ts < att.late_compile_first:
                att.late_compile_first = ts
            return True
        return False

    @staticmethod
    def _model_of(m: Marker, rd: dict, groups: dict[str, str]) -> dict[str, str]:
        """After a ``draft`` marker the loader lines describe the draft model: their own duration is the draft's
        (they must not replace the main model's figures; "Model loading took" sums main + draft)."""
        if m.draft:
            rd["_draft"] = True
        elif m.phase == "weights_load" and rd.get("_draft"):
            return {("draft_" + k if k == "seconds" else k): v for k, v in groups.items()}
        return groups

    @staticmethod
    def _times(m: Marker, p: Phase, rd: dict, ts: float | None) -> None:
        if ts is None:
            return
        if m.kind == "start" and (p.start is None or ts < p.start):
            p.start = ts
        elif m.kind == "end":
            p.end = ts if p.end is None else max(p.end, ts)
            rd["end"] = ts

    @staticmethod
    def _seconds(att: Attempt, m: Marker, rd: dict, groups: dict[str, str]) -> None:
        """The engine's own durations: its init figure, and the phase's seconds per rank (summed per rank for
        markers printed once per capture)."""
        if "engine_init" in groups:
            with contextlib.suppress(ValueError):
                att.engine_init = float(groups["engine_init"])
        try:
            sec = float(groups["seconds"]) if "seconds" in groups else None
        except ValueError:
            sec = None
        if sec is None:
            return
        if m.sum_per_rank:
            rd["seconds"] = round(rd.get("seconds", 0.0) + sec, 3)
            rd["captures"] = rd.get("captures", 0) + 1
        else:
            rd["seconds"] = sec

    @staticmethod
    def _details(m: Marker, p: Phase, rd: dict, groups: dict[str, str]) -> None:
        """The line's other groups: per-rank memory figures and the phase's details (a ``pool`` marker keeps the
        first pool's, the full-attention pool; DP ranks accumulate; batch sizes count)."""
        for k, val in ((k, number(v)) for k, v in groups.items() if k not in SPECIAL_GROUPS):
            if k == "bs":
                rd["bs_sizes"] = rd.get("bs_sizes", 0) + len([x for x in groups[k].split(",") if x.strip()])
            elif k == "dp_rank":   # one "Launch DP<n>" line per DP rank a node launches: the ranks seen
                ranks = p.details.setdefault("dp_ranks", [])
                if isinstance(val, int) and val not in ranks and len(ranks) < 1024:
                    ranks.append(val)
                    ranks.sort()
            elif k not in ("sizes", "done", "pct"):
                if k in RANK_FIGURES and m.phase in ("kv_cache", "cuda_graphs", "weights_load"):
                    rd[k] = val
                if m.pool and k in POOL_FIRST:
                    p.details.setdefault(k, val)   # the first pool is the full-attention pool
                else:
                    p.details[k] = val

    @staticmethod
    def _figures(att: Attempt, m: Marker, vals: dict[str, Any], groups: dict[str, str], rank: str) -> None:
        if m.pool and groups.get("pool"):
            return   # a labelled pool (draft, hybrid) is not the KV pool: it stays in details.pools
        found: dict[str, float | int] = {}
        for group, figure in m.figures.items():
            val = vals.get(group)
            if not isinstance(val, (int, float)):
                continue
            if figure.endswith("+"):
                figure = figure[:-1]
                found[figure] = round(found.get(figure, 0) + val, 6)
            else:
                found[figure] = val
        for figure, val in found.items():
            ranks = att.figures.setdefault(figure, {})
            if rank in ranks or len(ranks) < MAX_RANKS:
                ranks[rank] = val

    @staticmethod
    def _bar(att: Attempt, mode: str, done: str | None, total: str) -> None:
        try:
            d = int(done) if done is not None else 0
            t = int(total)
        except ValueError:
            return
        if att.bars and att.bars[-1][0] == mode and d >= att.bars[-1][1] and t == att.bars[-1][2]:
            att.bars[-1][1] = d
        else:
            att.bars.append([mode, d, t])
        if len(att.bars) > 256:
            del att.bars[:-256]

    def doctor(self, rule, pattern, rx, engines: tuple[str, ...], text: str, ts: float | None, rank: str | None,
               fallback_ts: float | None) -> bool:
        if self.engine is not None and self.engine not in engines:
            return False   # the doctor reports only rules of the engine that wrote the log
        groups: dict = {}
        if rx is not None:
            m = rx.search(text)
            if m is None:
                return False
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
        if ts is None:
            ts = fallback_ts
        att = self.attempts[-1]
        self.doctor_counts[rule.id] = self.doctor_counts.get(rule.id, 0) + 1
        after_ready = att.ready_at is not None and ts is not None and ts > att.ready_at
        if after_ready:
            self.doctor_after_ready[rule.id] = self.doctor_after_ready.get(rule.id, 0) + 1
        hits = self.doctor_hits.setdefault(rule.id, [])
        if len(hits) < MAX_HITS_PER_RULE:
            hits.append({"role": pattern.role, "ts": ts, "rank": rank, "groups": groups,
                         "phase": att.current_phase(), "attempt": att.index,
                         "after_ready": after_ready,
                         "line": text.strip()[:300]})
        elif pattern.role not in ("hit",):
            # keep role-specific evidence (e.g. a second device name) even when examples are full
            if not any(h["role"] == pattern.role and h["groups"] == groups for h in hits):
                hits.append({"role": pattern.role, "ts": ts, "rank": rank, "groups": groups,
                             "phase": att.current_phase(), "attempt": att.index,
                             "after_ready": False, "line": text.strip()[:300]})
                del hits[MAX_HITS_PER_RULE // 2: MAX_HITS_PER_RULE // 2 + 1]
        return True

    def platform(self, phase: str, s: float | None, e: float | None, details: dict | None, *,
                 current: bool = False) -> None:
        """``current``: the event belongs to the current attempt whatever its time (the warm-up after Ready)."""
        att = self.attempts[-1] if current else self._attempt_for_platform(s if s is not None else e)
        p = att.phase(phase)
        p.seen = True
        if s is not None:
            p.start = s if p.start is None else min(p.start, s)
            att.touch(s)
        if e is not None:
            p.end = e if p.end is None else max(p.end, e)
            att.touch(e)
        if details:
            p.details.update(details)
        self._changed(att)

    def _attempt_for_platform(self, t: float | None) -> Attempt:
        """Events stamped before an attempt's first log line belong to it (reported late), as do events
        within that line's second (engines stamp whole seconds); a platform phase starting after the
        current attempt progressed is a container restart."""
        if t is not None:
            for a in self.attempts:
                if a.first_ts is not None and t < a.first_ts + STAMP_RESOLUTION_S:
                    return a
        cur = self.attempts[-1]
        if cur.progressed() and t is not None:
            return self.new_attempt(t)
        return cur

    def fail(self, att: Attempt, ts: float | None, phase: str | None, reason: str) -> None:
        """Declare the attempt failed (the first declaration stands; the report names the root cause)."""
        if att.failure is None:
            att.failure = Failure(ts, phase or att.current_phase(), " ".join(reason.split())[:REASON_CHARS])
            self._changed(att)

    def exception(self, exc: ExceptionLine, ts: float | None, rank: str | None, fallback_ts: float | None) -> None:
        """A traceback ended with ``exc``. When a catalog fail marker already read the same line, that
        cause only learns the exception type; otherwise the exception is a cause of its own."""
        att = self.attempts[-1]
        for c in att.causes:
            if c.seq == self.seq:
                c.error = c.error or exc.error
                c.rank = c.rank or rank
                return
        text = " ".join((exc.message or exc.error).split())[:TEXT_CHARS]
        att.add_cause(Cause(self.seq, ts if ts is not None else fallback_ts, rank, text, error=exc.error))

    def ended(self, at: float | None, exit_code: int | None) -> bool:
        """The engine process ended (end of input, or its exit was seen). An attempt neither ready nor
        failed failed if it printed a cause since its last progress, or exited non-zero. Returns True
        when that declared a failure."""
        att = self.attempts[-1]
        if att.failure is not None or att.ready:
            return False
        root, _context = att.root_cause()
        if root is None and (exit_code is None or exit_code == 0):
            return False
        reason = root.text if root is not None else f"the engine process exited with code {exit_code} and printed no error"
        when = root.at if root is not None and root.at is not None else at
        att.failure = Failure(when, att.current_phase(), reason)
        self._changed(att)
        return True

    def stall(self, att: Attempt, at: float, phase: str, reason: str) -> None:
        att.failure = Failure(at, phase, reason, stalled=True)
        self._changed(att)

    def new_attempt(self, ts: float | None) -> Attempt:
        att = Attempt(self.attempts[-1].index + 1)
        att.first_ts = ts
        self.attempts.append(att)
        if len(self.attempts) > MAX_ATTEMPTS:
            del self.attempts[0]
            self.dropped_attempts += 1
        self._emit(PhaseTransition(att.index, None, "attempt", ts, engine=self.engine))
        return att
