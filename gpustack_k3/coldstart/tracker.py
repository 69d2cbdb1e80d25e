"""Cold-start phase tracker: one streaming implementation for files and live logs.

Feed raw bytes as they arrive (``feed``), call ``finish`` at end of input, read ``report()``.
Memory stays bounded: only the unfinished last line is carried between chunks, and per-attempt
state is a fixed set of phases × ranks. A process-start marker after progress opens a new attempt
(engine restart in the same stream).

Timing rules (documented in ``report()``):
* a phase ends when the **last rank** reports its end; per-rank figures go to ``details.ranks``;
* a phase starts at its own start marker, else where the previous observed phase ended, else at
  ``end - engine_seconds``; it never starts before the previous phase ended (no overlap);
* a phase that started but printed no end ends where the next observed phase starts;
* ``seconds`` is the engine's own printed duration when there is one, else end − start.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, Union

from packaging.version import Version

from .catalog import SPECIAL_GROUPS, Catalog, Marker, load_catalog
from .phases import DEFAULT_BUDGETS, LOG_PHASES, PHASE_INDEX, PHASES, PLATFORM_PHASES
from .scanner import ANSI_RE, KeywordScanner, epoch, parse_prefix

TimeLike = Union[float, int, datetime, None]
MAX_LINE = 1 << 20          # a "line" longer than this without a separator is dropped (binary noise)
MAX_ATTEMPTS = 64           # older attempts are summarised away beyond this
MAX_HITS_PER_RULE = 32      # doctor keeps this many examples per rule (counts stay exact)
MAX_RANKS = 1024            # per phase; more distinct rank prefixes than this is noise
REASON_CHARS = 240


def to_epoch(t: TimeLike) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    return float(t)


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    dt = datetime.fromtimestamp(ts, UTC)
    spec = "seconds" if abs(ts - round(ts)) < 1e-6 else "milliseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec)


def _bounds(data: bytes, pos: int, window: int = 65536) -> tuple[int, int]:
    """Start and end of the line (segment between \\n or \\r) holding ``pos``. Searches stay
    within ``window`` bytes either side, so a huge line (a tqdm bar redrawn with \\r for hours)
    costs no more than a normal one; longer lines are cut to the window."""
    lo = max(0, pos - window)
    nl = data.rfind(b"\n", lo, pos)
    cr = data.rfind(b"\r", max(nl + 1, lo), pos)
    start = max(nl, cr) + 1 if max(nl, cr) >= 0 else lo
    hi = min(len(data), pos + window)
    ne = data.find(b"\n", pos, hi)
    if ne < 0:
        ne = hi
    ce = data.find(b"\r", pos, ne)
    return start, (ce if ce >= 0 else ne)


@lru_cache(maxsize=256)
def _V(v: str) -> Version:
    return Version(v)


def _num(v: str) -> Any:
    s = v.replace(",", "")
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
class _Phase:
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
class _Failure:
    at: float | None
    phase: str | None
    reason: str
    priority: int


class _Attempt:
    def __init__(self, index: int):
        self.index = index
        self.phases: dict[str, _Phase] = {}
        self.failure: _Failure | None = None
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.engine_init: float | None = None
        self.tp: int | None = None
        self.bars: list[list] = []          # tqdm capture bars: [mode, done, total]
        self.late_compile_count = 0                 # compile markers after ready (jit-after-ready)
        self.late_compile_first: float | None = None
        self.notified: set[tuple[str, str]] = set()

    def phase(self, name: str) -> _Phase:
        p = self.phases.get(name)
        if p is None:
            p = self.phases[name] = _Phase(name)
        return p

    @property
    def ready_at(self) -> float | None:
        p = self.phases.get("server_ready")
        return p.end if p is not None else None

    def progressed(self) -> bool:
        return self.failure is not None or any(
            p.seen and n not in ("process_start",) + PLATFORM_PHASES for n, p in self.phases.items())


@dataclass
class PhaseReport:
    name: str
    start: float | None
    end: float | None
    seconds: float | None
    details: dict

    def to_dict(self) -> dict:
        return {"name": self.name, "start": iso(self.start), "end": iso(self.end),
                "seconds": None if self.seconds is None else round(self.seconds, 3),
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

    def summary(self) -> dict:
        return {"attempt": self.index, "status": self.status, "failed_phase": self.failed_phase,
                "reason": self.reason, "start": iso(self.start), "end": iso(self.end),
                "total_seconds": _r(self.total_seconds),
                "engine_init_seconds": _r(self.engine_init_seconds),
                "phases": [p.name for p in self.phases]}


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 3)


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
            "phases": [p.to_dict() for p in a.phases],
            "attempts": [x.summary() for x in self.attempts],
        }


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
        if engine not in (None, "vllm", "sglang"):
            raise ValueError(f"engine must be 'vllm', 'sglang' or None (auto), not {engine!r}")
        self.catalog = catalog or load_catalog()
        self._bkeys = [k.encode("utf-8") for k in self.catalog.keys]
        self._keys_in = self._line_key_finder(self._bkeys, backend)
        self.scanner = KeywordScanner(self.catalog.keys, backend=backend)
        # the same keys minus access-log ones, which are read only while waiting for the first request
        self.scanner_quiet = KeywordScanner(self.catalog.keys, backend=backend,
                                            skip=set(self.catalog.request_keys))
        self.engine = engine
        self._version_given = version
        self._version_seen: str | None = None
        self.budgets = dict(DEFAULT_BUDGETS if budgets is None else budgets)
        for k in self.budgets:
            if k not in PHASE_INDEX:
                raise ValueError(f"budgets: unknown phase {k!r}; expected one of {', '.join(PHASES)}")
        self._year = year if year is not None else datetime.now(UTC).year
        self._listeners: list[Listener] = list(listeners)
        self._buf = b""
        self._skip_long = False
        self._last_ts: float | None = None      # latest timestamp seen anywhere (tails included)
        self._marker_ts: float | None = None    # latest timestamp of a parsed (marker) line
        self._last_vllm_ts: float | None = None
        self._first_ts: float | None = None
        self._head_lines = 0
        self._last_line_ts: float | None = None
        self._since: str | None = None   # newest "since" among the marker forms seen
        self._until: str | None = None   # oldest "until" among them
        self.attempts: list[_Attempt] = [_Attempt(1)]
        self.dropped_attempts = 0
        self.doctor_hits: dict[str, list[dict]] = {}
        self.doctor_counts: dict[str, int] = {}
        self.doctor_after_ready: dict[str, int] = {}
        self.bytes_seen = 0
        self.finished = False

    # ------------------------------------------------------------------ public API
    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    @property
    def version(self) -> str | None:
        if self._version_given:
            return self._version_given
        if self._version_seen:
            return self._version_seen
        return self._inferred_version()

    def feed(self, chunk: bytes) -> None:
        """Feed the next piece of the log: any size, any split point, any bytes."""
        if not chunk:
            return
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "replace")
        self.bytes_seen += len(chunk)
        data = self._buf + chunk if self._buf else bytes(chunk)
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut < 0:
            self._buf = data
            if len(self._buf) > MAX_LINE:
                self._buf, self._skip_long = b"", True
            return
        self._buf = data[cut + 1:]
        if len(self._buf) > MAX_LINE:
            self._buf, self._skip_long = b"", True
        complete = data[:cut + 1]
        if self._skip_long:  # drop the rest of an over-long line
            first = min(i for i in (complete.find(b"\n"), complete.find(b"\r")) if i >= 0)
            complete = complete[first + 1:]
            self._skip_long = False
        self._scan(complete)

    def finish(self) -> ColdStartReport:
        """End of input: the last unterminated line is parsed too."""
        if self._buf and not self._skip_long:
            self._scan(self._buf + b"\n")
        self._buf = b""
        self.finished = True
        self._notify(self.attempts[-1])
        return self.report()

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
        s, e = to_epoch(start), to_epoch(end)
        att = self.attempts[-1] if phase == "warm" else self._attempt_for_platform(phase, s if s is not None else e)
        p = att.phase(phase)
        p.seen = True
        if s is not None:
            p.start = s if p.start is None else min(p.start, s)
            self._touch(att, s)
        if e is not None:
            p.end = e if p.end is None else max(p.end, e)
            self._touch(att, e)
        if details:
            p.details.update(details)
        self._notify(att)

    def _attempt_for_platform(self, phase: str, t: float | None) -> _Attempt:
        """Events stamped before an attempt's first log line belong to it (reported late); a
        platform phase starting after the current attempt progressed is a container restart."""
        if t is not None:
            for a in self.attempts:
                if a.first_ts is not None and t <= a.first_ts:
                    return a
        cur = self.attempts[-1]
        if cur.progressed() and t is not None:
            return self._new_attempt(t)
        return cur

    def check_stall(self, now: TimeLike) -> bool:
        """Fail the current attempt if the phase in progress has run longer than its budget.
        ``now`` uses the log's clock (UTC). Returns True when a stall was declared."""
        t = to_epoch(now)
        att = self.attempts[-1]
        if t is None or att.failure is not None or self._ready(att):
            return False
        cur = self._current_phase(att)
        if cur is None:
            return False
        budget = self.budgets.get(cur)
        since = self._phase_start_for_stall(att, cur)
        if budget is None or since is None or t - since <= budget:
            return False
        att.failure = _Failure(t, cur, f"stalled in {cur}: no end after {t - since:.0f} s (budget {budget:.0f} s)", 0)
        self._notify(att)
        return True

    def report(self) -> ColdStartReport:
        reps = [self._attempt_report(a) for a in self.attempts]
        return ColdStartReport(self.engine, self.version, reps[-1], reps, self.dropped_attempts)

    def findings(self) -> list:
        from .doctor import diagnose
        return diagnose(self)

    # ------------------------------------------------------------------ scanning
    def _want_requests(self) -> bool:
        """Access-log lines are only read between "ready" and the first request (the warm phase);
        the rest of the time their key is left out of the scan (they are most of a serving log)."""
        att = self.attempts[-1]
        return att.ready_at is not None and "warm" not in att.phases

    def _scan(self, data: bytes) -> None:
        consumers = self.catalog.consumers
        if self._first_ts is None:
            self._first_timestamp(data)
        pos = 0
        while True:
            want = self._want_requests()
            scanner = self.scanner if want else self.scanner_quiet
            view = data if pos == 0 else data[pos:]
            switched = self._scan_part(view, scanner.find(view), consumers, want)
            if switched is None:
                break
            pos += switched
        self._tail_timestamp(data)

    @staticmethod
    def _line_key_finder(bkeys: list[bytes], backend: str):
        """raw line -> indexes of every key it contains, ascending. One overlapping Aho-Corasick pass
        (ahocorasick_rs) instead of a substring test per key; the same answer either way."""
        if backend in ("auto", "ahocorasick"):
            try:
                import ahocorasick_rs
            except ImportError:
                pass
            else:
                ac = ahocorasick_rs.BytesAhoCorasick(bkeys, matchkind=ahocorasick_rs.MatchKind.Standard)
                return lambda raw: sorted({i for i, _s, _e in ac.find_matches_as_indexes(raw, overlapping=True)})
        return lambda raw: [i for i, k in enumerate(bkeys) if k in raw]

    def _scan_part(self, data: bytes, positions: list[int], consumers, want: bool) -> int | None:
        """Process each candidate line once; return the offset to rescan from if the request
        window opened or closed in the middle of this piece, else None."""
        keys_in = self._keys_in
        line_end = -1
        for pos in positions:
            if pos < line_end:
                continue
            line_start, line_end = _bounds(data, pos)
            raw = data[line_start:line_end]
            keys = keys_in(raw)
            if not keys:
                continue
            self._line(raw, keys, consumers)
            if self._want_requests() != want and line_end + 1 < len(data):
                return line_end + 1
        return None

    def _first_timestamp(self, data: bytes) -> None:
        """The first stamped line among the first 50 lines of the stream starts process_start."""
        pos = 0
        while self._head_lines < 50 and pos < len(data):
            end = _bounds(data, pos)[1]
            self._head_lines += 1
            ts, _rank = self._stamp(data[pos:end][:4096].decode("utf-8", "replace"), update=False)
            if ts is not None:
                self._first_ts = ts
                att = self.attempts[-1]
                if att.first_ts is None:
                    att.first_ts = ts
                return
            pos = end + 1

    def _tail_timestamp(self, data: bytes) -> None:
        """Remember the stream's most recent stamped line (for in-progress totals and stalls)."""
        end = len(data) - 1
        floor = max(0, len(data) - 65536)
        while end > floor:
            nl = data.rfind(b"\n", floor, end)
            start = max(nl, data.rfind(b"\r", max(nl, floor), end)) + 1
            ts, _rank = self._stamp(data[start:end][:4096].decode("utf-8", "replace"), update=False)
            if ts is not None:
                self._last_line_ts = ts
                if self._last_ts is None or ts > self._last_ts:
                    self._last_ts = ts
                return
            end = start - 1

    def _stamp(self, text: str, update: bool) -> tuple[float | None, str | None]:
        if "\x1b" in text:
            text = ANSI_RE.sub("", text)
        p = parse_prefix(text)
        ts: float | None = None
        if p.hms is not None:
            if p.date is not None:
                ts = epoch(p.date[0], p.date[1], p.date[2], p.hms)
            elif p.month_day is not None:
                ts = epoch(self._year, p.month_day[0], p.month_day[1], p.hms)
                if ts is not None and self._last_vllm_ts is not None and ts < self._last_vllm_ts - 180 * 86400:
                    # December → January: vLLM prints no year
                    nxt = epoch(self._year + 1, p.month_day[0], p.month_day[1], p.hms)
                    if update:
                        self._year += 1
                    ts = nxt
                if ts is not None and update:
                    self._last_vllm_ts = ts if self._last_vllm_ts is None else max(self._last_vllm_ts, ts)
            else:  # SGLang 0.3.0-0.3.2: time of day only
                ref = self._marker_ts
                if ref is not None:
                    d = datetime.fromtimestamp(ref, UTC)
                    ts = epoch(d.year, d.month, d.day, p.hms)
                    if ts is not None and ts < ref - 12 * 3600:  # midnight passed
                        ts += 86400
                else:
                    ts = epoch(self._year, 1, 1, p.hms)
        return ts, p.rank

    def _line(self, raw: bytes, keys: list[int], consumers: list) -> None:
        if len(raw) > 65536:
            raw = raw[:65536]
        text = raw.decode("utf-8", "replace")
        if "\x1b" in text:
            text = ANSI_RE.sub("", text)
        ts, rank = self._stamp(text, update=True)
        if ts is not None and (self._marker_ts is None or ts > self._marker_ts):
            self._marker_ts = ts
        rules_hit: set[str] = set()
        for idx in keys:
            for c in consumers[idx]:
                if c[0] == "marker":
                    self._marker(c[1], c[2], text, ts, rank)
                elif (c[1].id, c[2].role) not in rules_hit:
                    if self._doctor(c[1], c[2], c[3], text, ts, rank):
                        rules_hit.add((c[1].id, c[2].role))

    # ------------------------------------------------------------------ events
    def _engine_ok(self, engine: str, detect: bool) -> bool:
        if engine == "any":
            return True
        if self.engine is None:
            if not detect:
                return False
            self.engine = engine
        return engine == self.engine

    def _marker(self, m: Marker, rx, text: str, ts: float | None, rank: str | None) -> None:
        match = None
        if rx is not None:
            match = rx.search(text)
            if match is None:
                return
        if not self._engine_ok(m.engine, m.detect):
            return
        if m.engine != "any":
            if m.since and (self._since is None or _V(m.since) > _V(self._since)):
                self._since = m.since
            if m.until and (self._until is None or _V(m.until) < _V(self._until)):
                self._until = m.until
        groups = {k: v for k, v in (match.groupdict() if match else {}).items() if v is not None}
        att = self.attempts[-1]
        if m.kind == "start" and m.phase == "process_start" and att.progressed():
            att = self._new_attempt(ts)
        if ts is None:
            ts = self._marker_ts
        else:
            self._touch(att, ts)
        if att.first_ts is None and ts is not None:
            att.first_ts = ts
        if "version" in groups and not self._version_given:
            self._version_seen = groups["version"]
        if "tp" in groups:
            try:
                att.tp = int(groups["tp"])
            except ValueError:
                pass
        if m.kind == "fail":
            reason = groups.get("reason") or text.strip()
            self._fail(att, ts, m.phase, reason, m.priority)
            return
        if m.kind == "request":
            ready = att.ready_at
            if ready is not None and ts is not None and ts >= ready:
                w = att.phase("warm")
                if not w.seen:
                    w.seen, w.start, w.end = True, ready, ts
                    w.details["first_request"] = text.strip()[-160:]
                    self._notify(att)
            return
        assert m.phase is not None
        if att.failure is not None:
            return
        p = att.phase(m.phase)
        ready = att.ready_at
        if (m.phase == "compile" and ready is not None and ts is not None and ts > ready):
            att.late_compile_count += 1
            if att.late_compile_first is None or ts < att.late_compile_first:
                att.late_compile_first = ts
            return
        p.seen = True
        if ts is not None and m.kind != "info" and (p.first is None or ts < p.first):
            p.first = ts
        r = rank or "main"
        rd = p.rank(r)
        if m.id == "vllm-drafter":
            # gpu_model_runner.py:5010@0.33.0: after this line the same loader lines describe the draft model;
            # they must not replace the main model's figures (its 163.8 s vs the draft's 6.4 s in seed §13).
            rd["_draft"] = True
        elif m.phase == "weights_load" and rd.get("_draft"):
            # only the loader's own duration is per model; "Model loading took" sums main + draft
            groups = {("draft_" + k if k == "seconds" else k): v for k, v in groups.items()}
        if m.kind == "start":
            if ts is not None and (p.start is None or ts < p.start):
                p.start = ts
        elif m.kind == "end":
            if ts is not None:
                p.end = ts if p.end is None else max(p.end, ts)
                rd["end"] = ts
        if "engine_init" in groups:
            try:
                att.engine_init = float(groups["engine_init"])
            except ValueError:
                pass
        if "seconds" in groups:
            try:
                sec = float(groups["seconds"])
            except ValueError:
                sec = None
            if sec is not None:
                if m.sum_per_rank:
                    rd["seconds"] = round(rd.get("seconds", 0.0) + sec, 3)
                    rd["captures"] = rd.get("captures", 0) + 1
                else:
                    rd["seconds"] = sec
        for k, v in groups.items():
            if k in SPECIAL_GROUPS or k == "reason":
                continue
            val: Any = _num(v)
            if k == "bs":
                sizes = [_num(x) for x in v.split(",") if x.strip()]
                rd["bs_sizes"] = rd.get("bs_sizes", 0) + len(sizes)
                continue
            if k in ("sizes", "done", "pct"):
                continue
            if k in ("gib", "gb", "tokens", "concurrency", "k_gb", "v_gb") and m.phase in ("kv_cache", "cuda_graphs", "weights_load"):
                rd[k] = val
            if m.id == "sglang-kv-allocated" and k in ("tokens", "gb", "dtype", "k_gb", "v_gb"):
                p.details.setdefault(k, val)   # the first pool is the full-attention pool
            else:
                p.details[k] = val
        if "sizes" in groups:
            self._bar(att, groups.get("mode") or groups.get("what") or "", groups.get("done"), groups["sizes"])
        if m.phase == "kv_cache" and m.id == "sglang-kv-allocated":
            pools = p.details.setdefault("pools", {})
            label = (groups.get("pool") or "kv").strip()
            if label in pools or len(pools) < 16:
                pools[label] = _num(groups["tokens"])
        self._notify(att)

    def _bar(self, att: _Attempt, mode: str, done: str | None, total: str) -> None:
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

    def _doctor(self, rule, pattern, rx, text: str, ts: float | None, rank: str | None) -> bool:
        groups: dict = {}
        if rx is not None:
            m = rx.search(text)
            if m is None:
                return False
            groups = {k: v for k, v in m.groupdict().items() if v is not None}
        if ts is None:
            ts = self._marker_ts
        att = self.attempts[-1]
        self.doctor_counts[rule.id] = self.doctor_counts.get(rule.id, 0) + 1
        after_ready = att.ready_at is not None and ts is not None and ts > att.ready_at
        if after_ready:
            self.doctor_after_ready[rule.id] = self.doctor_after_ready.get(rule.id, 0) + 1
        hits = self.doctor_hits.setdefault(rule.id, [])
        if len(hits) < MAX_HITS_PER_RULE:
            hits.append({"role": pattern.role, "ts": ts, "rank": rank, "groups": groups,
                         "phase": self._current_phase(att), "attempt": att.index,
                         "after_ready": after_ready,
                         "line": text.strip()[:300]})
        elif pattern.role not in ("hit",):
            # keep role-specific evidence (e.g. a second device name) even when examples are full
            if not any(h["role"] == pattern.role and h["groups"] == groups for h in hits):
                hits.append({"role": pattern.role, "ts": ts, "rank": rank, "groups": groups,
                             "phase": self._current_phase(att), "attempt": att.index,
                             "after_ready": False, "line": text.strip()[:300]})
                del hits[MAX_HITS_PER_RULE // 2: MAX_HITS_PER_RULE // 2 + 1]
        return True

    def _fail(self, att: _Attempt, ts: float | None, phase: str | None, reason: str, priority: int) -> None:
        reason = " ".join(reason.split())[:REASON_CHARS]
        if att.failure is None:
            att.failure = _Failure(ts, phase or self._current_phase(att), reason, priority)
            self._notify(att)
        elif priority > att.failure.priority:
            att.failure.reason = reason
            att.failure.priority = priority
            if phase is not None:
                att.failure.phase = phase

    def _new_attempt(self, ts: float | None) -> _Attempt:
        att = _Attempt(self.attempts[-1].index + 1)
        att.first_ts = ts
        self.attempts.append(att)
        if len(self.attempts) > MAX_ATTEMPTS:
            del self.attempts[0]
            self.dropped_attempts += 1
        self._emit(PhaseTransition(att.index, None, "attempt", ts, engine=self.engine))
        return att

    def _touch(self, att: _Attempt, ts: float) -> None:
        if self._last_ts is None or ts > self._last_ts:
            self._last_ts = ts
        if att.last_ts is None or ts > att.last_ts:
            att.last_ts = ts

    # ------------------------------------------------------------------ derived state
    @staticmethod
    def _ready(att: _Attempt) -> bool:
        p = att.phases.get("server_ready")
        return p is not None and p.end is not None

    def _current_phase(self, att: _Attempt) -> str | None:
        """The phase in progress: the last phase with evidence if it has not ended, else the next."""
        last: str | None = None
        for name in PHASES:
            p = att.phases.get(name)
            if p is not None and p.seen:
                last = name
        if last is None:
            return "process_start"
        p = att.phases[last]
        if p.end is None:
            return last
        if last in ("server_ready", "warm"):
            return None
        if last in PLATFORM_PHASES:
            i = PHASE_INDEX[last] + 1
            return PHASES[i]
        order = LOG_PHASES
        i = order.index(last)
        nxt = order[i + 1]
        if nxt == "weights_download":
            nxt = "weights_load"
        return nxt

    def _phase_start_for_stall(self, att: _Attempt, cur: str) -> float | None:
        rows = self._timeline(att)
        for r in rows:
            if r.name == cur and r.start is not None:
                return r.start
        return att.last_ts

    def _timeline(self, att: _Attempt) -> list[PhaseReport]:
        seen = [n for n in PHASES if n in att.phases and att.phases[n].seen]
        starts: dict[str, float | None] = {}
        ends: dict[str, float | None] = {}
        inferred_end: dict[str, bool] = {}
        prev_end: float | None = None
        prev_had_end = False
        for n in seen:
            p = att.phases[n]
            eng = self._engine_seconds(p)
            s = p.start
            if s is None and n == "process_start":
                s = att.first_ts if att.first_ts is not None else p.first
            if s is None and n not in PLATFORM_PHASES:
                if prev_had_end and prev_end is not None:
                    s = prev_end
                elif p.end is not None and eng is not None:
                    s = p.end - eng
                else:
                    s = p.first
            if s is not None and prev_end is not None and n not in PLATFORM_PHASES:
                if p.end is None or prev_end <= p.end:
                    s = max(s, prev_end)
            starts[n] = s
            ends[n] = p.end
            prev_had_end = p.end is not None
            if p.end is not None:
                prev_end = p.end if prev_end is None else max(prev_end, p.end)
        # a phase that never printed its end ends where the next one starts (or where it failed)
        fail = att.failure
        for i, n in enumerate(seen):
            if ends[n] is None and fail is not None and fail.phase == n and fail.at is not None:
                ends[n] = fail.at
                continue
            if ends[n] is None:
                later = [starts[m] for m in seen[i + 1:] if starts[m] is not None]
                if later:
                    ends[n] = min(later)
                    inferred_end[n] = True
        rows: list[PhaseReport] = []
        for n in seen:
            p = att.phases[n]
            eng = self._engine_seconds(p)
            s, e = starts[n], ends[n]
            elapsed = (e - s) if (s is not None and e is not None) else None
            details: dict[str, Any] = {k: v for k, v in p.details.items() if not k.startswith("_")}
            if eng is not None:
                details["reported_seconds"] = round(eng, 3)
            if elapsed is not None:
                details["elapsed_seconds"] = round(elapsed, 3)
            if inferred_end.get(n):
                details["end_inferred"] = True
            if fail is not None and fail.phase == n:
                details["failed"] = True
            self._rank_details(att, p, details)
            if n == "cuda_graphs":
                sizes = self._sizes(att, p)
                if sizes:
                    details["sizes"] = sizes
            rows.append(PhaseReport(n, s, e, eng if eng is not None else elapsed, details))
        # the phase in progress, if it has no evidence yet, is shown open
        cur = self._current_phase(att)
        if att.failure is None and cur is not None and cur not in att.phases and rows:
            rows.append(PhaseReport(cur, prev_end, None, None, {}))
        elif att.failure is not None and att.failure.phase and att.failure.phase not in att.phases:
            rows.append(PhaseReport(att.failure.phase, prev_end, att.failure.at,
                                    None if prev_end is None or att.failure.at is None else att.failure.at - prev_end,
                                    {"failed": True}))
        rows.sort(key=lambda r: PHASE_INDEX[r.name])
        return rows

    @staticmethod
    def _engine_seconds(p: _Phase) -> float | None:
        vals = [r["seconds"] for r in p.ranks.values() if "seconds" in r]
        return max(vals) if vals else None

    @staticmethod
    def _sizes(att: _Attempt, p: _Phase) -> int | None:
        bs = [r["bs_sizes"] for r in p.ranks.values() if "bs_sizes" in r]
        if bs:
            return max(bs)
        if att.bars:
            return sum(b[2] for b in att.bars)
        return None

    @staticmethod
    def _rank_details(att: _Attempt, p: _Phase, details: dict) -> None:
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

    def _attempt_report(self, att: _Attempt) -> AttemptReport:
        rows = self._timeline(att)
        starts = [r.start for r in rows if r.start is not None]
        start = min(starts) if starts else att.first_ts
        if att.failure is not None:
            status, end = "failed", att.failure.at
            failed_phase, reason = att.failure.phase, att.failure.reason
        elif self._ready(att):
            status, end = "ready", att.phases["server_ready"].end
            failed_phase, reason = None, None
        else:
            status = "in-progress"
            stamps = [x for x in (att.last_ts, att.first_ts) if x is not None]
            line_ts = self._last_line_ts   # the stream's latest stamped line belongs to the last attempt
            if att is self.attempts[-1] and line_ts is not None and (att.first_ts is None or line_ts >= att.first_ts):
                stamps.append(line_ts)
            end = max(stamps) if stamps else None
            failed_phase, reason = None, None
        total = (end - start) if (start is not None and end is not None) else None
        engine_init = att.engine_init
        if engine_init is None and status != "failed":
            # no printed figure (SGLang, old vLLM): weights loaded → KV allocated and graphs captured
            by = {r.name: r for r in rows}
            wl = by.get("weights_load")
            tail = [by[n].end for n in ("compile", "kv_cache", "cuda_graphs")
                    if n in by and by[n].end is not None and not by[n].details.get("failed")]
            if wl is not None and wl.end is not None and tail and max(tail) >= wl.end:
                engine_init = max(tail) - wl.end
        cur = None if status != "in-progress" else self._current_phase(att)
        return AttemptReport(att.index, status, failed_phase, reason, engine_init, total, start, end, rows, cur)

    def _inferred_version(self) -> str | None:
        lo, hi = self._since, self._until
        if lo and hi:
            return f"{lo}..{hi}" if _V(lo) <= _V(hi) else f">={lo}"
        if lo:
            return f">={lo}"
        if hi:
            return f"<={hi}"
        return None

    # ------------------------------------------------------------------ listeners
    def _emit(self, ev: PhaseTransition) -> None:
        for fn in self._listeners:
            fn(ev)

    def _closed(self, att: _Attempt, p: _Phase, rows: list[PhaseReport]) -> bool:
        """Has the last rank reported? Known when all expected ranks ended, when a later phase has
        begun, when the server is ready or the attempt failed, or at end of input."""
        if p.name in PLATFORM_PHASES or p.name in ("server_ready", "warm"):
            return True
        if self.finished or att.failure is not None or self._ready(att):
            return True
        ended = sum(1 for r, d in p.ranks.items() if r != "main" and "end" in d)
        if att.tp and ended >= att.tp:
            return True
        if not att.tp and "main" in p.ranks and len(p.ranks) == 1:
            return True  # single-process engine
        later = [r.name for r in rows if PHASE_INDEX[r.name] > PHASE_INDEX[p.name]]
        return bool(later) and any(att.phases.get(n) is not None and att.phases[n].seen for n in later)

    def _notify(self, att: _Attempt) -> None:
        if not self._listeners:
            return
        rows = self._timeline(att)
        for r in rows:
            if r.start is not None and ("start", r.name) not in att.notified:
                att.notified.add(("start", r.name))
                self._emit(PhaseTransition(att.index, r.name, "start", r.start, engine=self.engine))
            p = att.phases.get(r.name)
            if p is not None and p.end is not None and ("end", r.name) not in att.notified \
                    and self._closed(att, p, rows):
                att.notified.add(("end", r.name))
                self._emit(PhaseTransition(att.index, r.name, "end", p.end, r.seconds, engine=self.engine))
        if att.failure is not None and ("failed", "") not in att.notified:
            att.notified.add(("failed", ""))
            self._emit(PhaseTransition(att.index, att.failure.phase, "failed", att.failure.at,
                                       reason=att.failure.reason, engine=self.engine))
