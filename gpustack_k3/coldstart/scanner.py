"""Chunk scanning and line-prefix parsing: the only code that touches raw log bytes.

Non-marker lines are skipped at C speed: every marker key is looked up in one pass over the whole
chunk (Aho-Corasick via ``ahocorasick_rs`` when installed, otherwise one compiled alternation
regex built as a prefix trie). Only the few lines that contain a key are decoded and parsed.
"""
from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple, Union

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# One regex for every line prefix the engines (and the tools around them) print:
#  docker --timestamps / docker-compose "name  | " / vLLM "(Worker_TP3 pid=N)" or
#  "(VllmWorker rank=R pid=N)" / vLLM "LEVEL MM-DD HH:MM:SS" (no year) / SGLang
#  "[YYYY-MM-DD HH:MM:SS(.mmm) DPd TPn EPe]" or old "[HH:MM:SS TPn]" (sglang srt/utils/common.py:2629-2630@0.5.23 configure_logger: "[%(asctime)s{ms}{prefix}]").
PREFIX_RE = re.compile(
    r"""^\s*
    (?:(?P<d1>\d{4}-\d\d-\d\d)T(?P<t1>\d\d:\d\d:\d\d)(?:\.(?P<f1>\d+))?(?:Z|[+-]\d\d:?\d\d)?\s+)?
    (?:[\w.@/-]+\s*\|\s?)?
    (?:(?P<d2>\d{4}-\d\d-\d\d)T(?P<t2>\d\d:\d\d:\d\d)(?:\.(?P<f2>\d+))?(?:Z|[+-]\d\d:?\d\d)?\s+)?
    (?:\((?P<proc>[A-Za-z][\w-]*)(?:\s+rank=(?P<prank>\d+))?\s+pid=(?P<pid>\d+)\)\s*)?
    (?:
        (?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s+(?P<vmo>\d\d)-(?P<vd>\d\d)\s+
            (?P<vt>\d\d:\d\d:\d\d)(?:\.(?P<vf>\d+))?
      | \[(?:(?P<sdate>\d{4}-\d\d-\d\d)\s+)?(?P<st>\d\d:\d\d:\d\d)(?:[.,](?P<sf>\d+))?
            (?P<srank>(?:\s+[A-Z]{2,3}\d+)*)\s*\]
    )?
    """,
    re.VERBOSE,
)


class Prefix(NamedTuple):
    """What a line prefix says: a timestamp (possibly partial) and who printed the line."""

    rank: str | None
    date: tuple[int, int, int] | None       # full date when printed
    month_day: tuple[int, int] | None       # vLLM: month and day, no year
    hms: tuple[int, int, int, float] | None  # hour, minute, second, fraction


_NO_PREFIX = Prefix(None, None, None, None)


def _hms(t: str, frac: str | None) -> tuple[int, int, int, float] | None:
    h, m, s = int(t[0:2]), int(t[3:5]), int(t[6:8])
    if h > 23 or m > 59 or s > 60:
        return None
    return h, m, s, float("0." + frac) if frac else 0.0


def _date(d: str) -> tuple[int, int, int] | None:
    y, mo, dd = int(d[0:4]), int(d[5:7]), int(d[8:10])
    if not (1 <= mo <= 12 and 1 <= dd <= 31 and 1970 <= y <= 9999):
        return None
    return y, mo, dd


_GROUPS = ("proc", "prank", "pid", "srank", "vmo", "vd", "vt", "vf", "st", "sf", "sdate", "d2", "t2", "f2", "d1", "t1", "f1")


def parse_prefix(line: str) -> Prefix:
    m = PREFIX_RE.match(line)
    if m is None:  # the regex is all-optional, so this cannot happen; kept for type checkers
        return _NO_PREFIX
    proc, prank, pid, srank, vmo, vd, vt, vf, st, sf, sdate, d2, t2, f2, d1, t1, f1 = m.group(*_GROUPS)
    rank: str | None = None
    if proc:
        if prank:
            rank = f"rank{prank}"
        elif proc == "VllmWorkerProcess":
            rank = f"pid{pid}"
        elif not proc.startswith(("APIServer", "EngineCore")):
            rank = proc  # Worker_TP3, Worker_TP0_EP0, ...; API server and engine core are not ranks
    elif srank and srank.strip():
        rank = " ".join(srank.split())
    if vt:
        mo, dd = int(vmo), int(vd)
        hms = _hms(vt, vf)
        if 1 <= mo <= 12 and 1 <= dd <= 31 and hms:
            return Prefix(rank, None, (mo, dd), hms)
    if st:
        hms = _hms(st, sf)
        if hms:
            return Prefix(rank, _date(sdate) if sdate else None, None, hms)
    for dv, tv, fv in ((d2, t2, f2), (d1, t1, f1)):
        if dv:
            date, hms = _date(dv), _hms(tv, fv)
            if date and hms:
                return Prefix(rank, date, None, hms)
    return Prefix(rank, None, None, None) if rank else _NO_PREFIX


# vLLM's logger puts "[file.py:NNN] " (0.7.3+) or "file.py:NNN] " (0.6.x) between the time and the message
_FILELINE_RE = re.compile(r"\s+(?:\[[^\]\s]+:\d+\]|[\w./<>-]+:\d+\]) ?")


def split_prefix(line: str) -> tuple[str | None, str]:
    """``(process, message)`` of a line. ``process`` is vLLM's process tag (``Worker_TP1 pid=91``), the
    same on every line that process prints, or None; ``message`` is the text after every recognised
    prefix and its one separating space, its indentation kept (a traceback frame stays indented)."""
    m = PREFIX_RE.match(line)
    if m is None or m.end() <= len(line) - len(line.lstrip()):
        return None, line   # no prefix: only leading whitespace matched
    proc = f"{m.group('proc')} pid={m.group('pid')}" if m.group("proc") else None
    if m.group("vt"):
        f = _FILELINE_RE.match(line, m.end())
        return proc, line[f.end():] if f is not None else line[m.end():].lstrip()
    if m.group("st"):
        end = m.end()                          # "[... TP0] message"
    elif proc:
        end = m.end("pid") + 1                 # "(Worker_TP1 pid=91) message"
    elif m.group("t2") or m.group("t1"):
        end = line.find(" ", m.start("t2") if m.group("t2") else m.start("t1"))   # "<RFC 3339> message"
    else:
        return proc, line[m.end():]            # "name  | message" (the separator space is consumed)
    return proc, line[end + 1:] if line.startswith(" ", end) else line[end:]


@lru_cache(maxsize=64)
def _day_start(y: int, mo: int, d: int) -> int:
    return calendar.timegm((y, mo, d, 0, 0, 0, 0, 0, 0))


def epoch(y: int, mo: int, d: int, hms: tuple[int, int, int, float]) -> float | None:
    try:
        return _day_start(y, mo, d) + hms[0] * 3600 + hms[1] * 60 + hms[2] + hms[3]
    except (ValueError, OverflowError):
        return None


def _trie_regex(keys: list[bytes]) -> bytes:
    trie: dict = {}
    for k in keys:
        node = trie
        for c in k:
            node = node.setdefault(c, {})
        node[None] = True

    def build(node: dict) -> bytes:
        alts = [re.escape(bytes([c])) + build(node[c]) for c in sorted(k for k in node if k is not None)]
        if not alts:
            return b""
        body = alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"
        if None in node:
            return (b"(?:" + body + b")?") if len(alts) == 1 else body + b"?"
        return body

    return build(trie)


def triggers(keys: list[str], min_prefix: int = 12) -> list[str]:
    """A smaller set of literals such that every key contains one: keys that contain another key
    are dropped and keys sharing a long prefix are merged into it. A line holding a trigger is a
    candidate line; which keys it really holds is checked on that line only."""
    base = sorted({k for k in keys if not any(o != k and o in k for o in keys)})
    out: list[str] = []
    for k in base:
        if out:
            common = _common_prefix(out[-1], k)
            if len(common) >= min_prefix:
                out[-1] = common
                continue
        out.append(k)
    return sorted({k for k in out if not any(o != k and o in k for o in out)})


def _common_prefix(a: str, b: str) -> str:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return a[:n]


class KeywordScanner:
    """Find the lines of a bytes chunk that may hold a key, in one C-speed pass per group.

    ``find(data)`` returns the sorted start offsets of trigger matches. With ``ahocorasick_rs``
    the triggers are split into groups of at most 32 literals, each searched leftmost-first
    (the library then uses its SIMD "Teddy" prefilter, several times faster than a plain
    automaton on ~90 literals). Without it, one compiled alternation regex (a prefix trie) is used.
    """

    GROUP = 32

    def __init__(self, keys: list[str], backend: str = "auto", skip: set[str] | None = None):
        wanted = [k for k in keys if not skip or k not in skip]
        self.triggers = triggers(wanted)
        bkeys = [k.encode("utf-8") for k in self.triggers]
        self.backend = backend
        self.find: Callable[[bytes], list[int]]
        if backend in ("auto", "ahocorasick"):
            try:
                import ahocorasick_rs  # optional accelerator; results are identical to the regex
            except ImportError:
                if backend == "ahocorasick":
                    raise
            else:
                groups = [ahocorasick_rs.BytesAhoCorasick(bkeys[i:i + self.GROUP],
                                                          matchkind=ahocorasick_rs.MatchKind.LeftmostFirst)
                          for i in range(0, len(bkeys), self.GROUP)]
                self.backend = "ahocorasick"

                def find(data: bytes) -> list[int]:
                    if len(groups) == 1:
                        return [s for _i, s, _e in groups[0].find_matches_as_indexes(data)]
                    out = [s for g in groups for _i, s, _e in g.find_matches_as_indexes(data)]
                    out.sort()
                    return out

                self.find = find
                return
        rx = re.compile(_trie_regex(bkeys))
        self.backend = "regex"
        self.find = lambda data: [m.start() for m in rx.finditer(data)]


TimeLike = Union[float, int, datetime, None]


def to_epoch(t: TimeLike) -> float | None:
    if t is None:
        return None
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=UTC)
        return t.timestamp()
    return float(t)


def rfc3339_epoch(v: object) -> float | None:
    """RFC 3339 time (Kubernetes, kubelet and docker log stamps: ``2026-11-29T19:05:58Z``, up to nine
    fraction digits) or a datetime → epoch seconds; None when it is not one."""
    if not v:
        return None
    if isinstance(v, datetime):
        return (v if v.tzinfo else v.replace(tzinfo=UTC)).timestamp()
    s = str(v).strip().replace("Z", "+00:00")
    if "." in s:  # Python 3.11 accepts at most 6 fraction digits; the kubelet prints 9
        head, _, rest = s.partition(".")
        digits = "".join(ch for ch in rest if ch.isdigit())
        tz = rest[len(digits):]
        s = f"{head}.{digits[:6].ljust(6, '0')}{tz}"
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        return None
    return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()


def iso(ts: float | None, *, z: bool = False) -> str | None:
    """Epoch seconds → ISO 8601 in UTC, whole seconds unless finer (milliseconds); ``z``: with the ``Z`` of
    RFC 3339 (the operator's status), else without a zone (the report's JSON)."""
    if ts is None:
        return None
    dt = datetime.fromtimestamp(ts, UTC)
    spec = "seconds" if abs(ts - round(ts)) < 1e-6 else "milliseconds"
    return dt.replace(tzinfo=None).isoformat(timespec=spec) + ("Z" if z else "")
