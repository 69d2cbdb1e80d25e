"""Line framing and timestamps: raw log bytes in any split → complete lines, candidate lines and their clock.

* ``LineFramer`` carries the unfinished last line between chunks (bounded: a "line" longer than
  ``MAX_LINE`` without a separator is dropped as binary noise);
* ``Clock`` turns a line prefix into epoch seconds (UTC): vLLM prints no year (December → January
  rolls the year), SGLang 0.3.0-0.3.2 prints only the time of day;
* ``candidate_lines`` walks the lines of a run of complete lines that hold a catalog key, once each.

Nothing here knows about phases or attempts: that is ``attempts``; the report is ``report``.
"""
from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from .scanner import ANSI_RE, KeywordScanner, epoch, parse_prefix
from gpustack_k3.api.v1alpha1.constants import MIB

MAX_LINE = MIB          # a "line" longer than this without a separator is dropped (binary noise)
LINE_WINDOW = 65536         # a candidate line is cut to this many bytes either side of its key
HEAD_LINES = 50             # the first stamped line among these starts the stream's clock


def line_bounds(data: bytes, pos: int, window: int = LINE_WINDOW) -> tuple[int, int]:
    """Start and end of the line (segment between \n or \r) holding ``pos``. Searches stay
    within ``window`` bytes either side, so a huge line (a tqdm bar redrawn with \r for hours)
    costs no more than a normal one; longer lines are cut to the window."""
    lo = pos - window if pos > window else 0
    nl = data.rfind(b"\n", lo, pos)
    cr = data.rfind(b"\r", nl + 1 if nl >= lo else lo, pos)
    start = cr + 1 if cr >= 0 else (nl + 1 if nl >= 0 else lo)
    hi = pos + window
    ne = data.find(b"\n", pos, hi)
    if ne < 0:
        ne = min(len(data), hi)
    ce = data.find(b"\r", pos, ne)
    return start, (ce if ce >= 0 else ne)


def clean_text(raw: bytes) -> str:
    """A raw line as text: cut to the window, decoded (bad bytes replaced), ANSI colours removed."""
    if len(raw) > LINE_WINDOW:
        raw = raw[:LINE_WINDOW]
    text = raw.decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI_RE.sub("", text)
    return text


class LineFramer:
    """Bytes in any split → runs of complete lines (each run ends with ``\\n`` or ``\\r``)."""

    def __init__(self) -> None:
        self._buf = b""
        self._skip_long = False
        self.bytes_seen = 0

    def feed(self, chunk: bytes | str) -> bytes | None:
        """The complete lines this chunk finishes (with what was carried), or None."""
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8", "replace")
        self.bytes_seen += len(chunk)
        data = self._buf + chunk if self._buf else bytes(chunk)
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if cut < 0:
            self._buf = data
            if len(self._buf) > MAX_LINE:
                self._buf, self._skip_long = b"", True
            return None
        self._buf = data[cut + 1:]
        if len(self._buf) > MAX_LINE:
            self._buf, self._skip_long = b"", True
        complete = data[:cut + 1]
        if self._skip_long:  # drop the rest of an over-long line
            first = min(i for i in (complete.find(b"\n"), complete.find(b"\r")) if i >= 0)
            complete = complete[first + 1:]
            self._skip_long = False
        return complete

    def flush(self) -> bytes | None:
        """End of input: the unterminated last line, terminated (None when there is none)."""
        tail = self._buf + b"\n" if self._buf and not self._skip_long else None
        self._buf = b""
        return tail


class Clock:
    """Line prefixes → epoch seconds (UTC), and the stream's first and latest stamped lines.

    ``year`` is the reference year for vLLM stamps, which print none. ``marker_ts`` is the latest
    stamp of a line the tracker parsed (the reference for lines printed without a stamp)."""

    def __init__(self, year: int | None = None) -> None:
        self.year = year if year is not None else datetime.now(UTC).year
        self.marker_ts: float | None = None
        self.first_ts: float | None = None      # first stamped line among the first HEAD_LINES
        self.last_line_ts: float | None = None  # latest stamped line of the stream (tails included)
        self._last_vllm_ts: float | None = None
        self._head_lines = 0

    def stamp(self, text: str, update: bool) -> tuple[float | None, str | None]:
        """The line's time and rank. ``update``: the line is parsed (advances the year logic)."""
        if "\x1b" in text:
            text = ANSI_RE.sub("", text)
        p = parse_prefix(text)
        ts: float | None = None
        if p.hms is not None:
            if p.date is not None:
                ts = epoch(p.date[0], p.date[1], p.date[2], p.hms)
            elif p.month_day is not None:
                ts = epoch(self.year, p.month_day[0], p.month_day[1], p.hms)
                if ts is not None and self._last_vllm_ts is not None and ts < self._last_vllm_ts - 180 * 86400:
                    # December → January: vLLM prints no year
                    nxt = epoch(self.year + 1, p.month_day[0], p.month_day[1], p.hms)
                    if update:
                        self.year += 1
                    ts = nxt
                if ts is not None and update:
                    self._last_vllm_ts = ts if self._last_vllm_ts is None else max(self._last_vllm_ts, ts)
            else:  # SGLang 0.3.0-0.3.2: time of day only
                ref = self.marker_ts
                if ref is not None:
                    d = datetime.fromtimestamp(ref, UTC)
                    ts = epoch(d.year, d.month, d.day, p.hms)
                    if ts is not None and ts < ref - 12 * 3600:  # midnight passed
                        ts += 86400
                else:
                    ts = epoch(self.year, 1, 1, p.hms)
        return ts, p.rank

    def parsed(self, ts: float | None) -> None:
        """A parsed line carried ``ts``: it becomes the reference for unstamped lines."""
        if ts is not None and (self.marker_ts is None or ts > self.marker_ts):
            self.marker_ts = ts

    def head(self, data: bytes) -> float | None:
        """Look for the stream's first stamped line among its first HEAD_LINES lines; its time once found."""
        pos = 0
        while self._head_lines < HEAD_LINES and pos < len(data):
            end = line_bounds(data, pos)[1]
            self._head_lines += 1
            ts, _rank = self.stamp(data[pos:end][:4096].decode("utf-8", "replace"), update=False)
            if ts is not None:
                self.first_ts = ts
                return ts
            pos = end + 1
        return None

    def tail(self, data: bytes) -> None:
        """Remember the stream's most recent stamped line (for in-progress totals and stalls)."""
        end = len(data) - 1
        floor = max(0, len(data) - LINE_WINDOW)
        while end > floor:
            nl = data.rfind(b"\n", floor, end)
            start = max(nl, data.rfind(b"\r", max(nl, floor), end)) + 1
            ts, _rank = self.stamp(data[start:end][:4096].decode("utf-8", "replace"), update=False)
            if ts is not None:
                self.last_line_ts = ts
                return
            end = start - 1


def key_finder(bkeys: list[bytes], backend: str) -> Callable[[bytes], list[int]]:
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


class CandidateLines:
    """The lines of a run of complete lines that hold a catalog key, each visited once, in order.

    One C-speed pass finds every key except the access-log ones (most of a serving log). Those are
    looked for only while ``want_requests()`` says so (between "ready" and the first request): from
    the current line on, with ``bytes.find``, merged in order with the other candidates."""

    def __init__(self, keys: list[str], request_keys: list[str], backend: str = "auto") -> None:
        self.scanner = KeywordScanner(keys, backend=backend, skip=set(request_keys))
        self._request_keys = [k.encode("utf-8") for k in request_keys]
        self._keys_in = key_finder([k.encode("utf-8") for k in keys], backend)

    def _next_request(self, data: bytes, start: int) -> int:
        found = [i for i in (data.find(k, start) for k in self._request_keys) if i >= 0]
        return min(found) if found else -1

    def scan(self, data: bytes, want_requests: Callable[[], bool], every_line: Callable[[], bool],
             on_line: Callable[[bytes, list[int]], None]) -> None:
        """``on_line(raw, keys)`` for each candidate line, in order; while ``every_line()`` holds (a
        traceback is open), for every line, keys or not."""
        keys_in = self._keys_in
        positions = self.scanner.find(data)
        n, i = len(positions), 0
        line_end = -1
        want = bool(self._request_keys) and want_requests()
        req = -2                  # next request-key offset at or after line_end (-1: none left, -2: not looked)
        while True:
            pos = positions[i] if i < n else -1
            if want:
                if req == -2 or 0 <= req < line_end:
                    req = self._next_request(data, max(0, line_end))
                if req >= 0 and (pos < 0 or req < pos):
                    pos = req
            if pos < 0:
                return
            if pos < line_end:    # another key on a line already visited
                i += 1
                continue
            line_start, line_end = line_bounds(data, pos)
            raw = data[line_start:line_end]
            keys = keys_in(raw)
            if keys:
                on_line(raw, keys)
                while every_line() and line_end + 1 < len(data):   # rare: only inside a traceback
                    line_start, line_end = line_bounds(data, line_end + 1)
                    raw = data[line_start:line_end]
                    on_line(raw, keys_in(raw))
                want = bool(self._request_keys) and want_requests()
