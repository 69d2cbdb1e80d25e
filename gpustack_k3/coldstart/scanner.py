"""Chunk scanning and line-prefix parsing: the only code that touches raw log bytes.

Non-marker lines are skipped at C speed: every marker key is looked up in one pass over the whole
chunk (Aho-Corasick via ``ahocorasick_rs`` when installed, otherwise one compiled alternation
regex built as a prefix trie). Only the few lines that contain a key are decoded and parsed.
"""
from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

# One regex for every line prefix the engines (and the tools around them) print:
#  docker --timestamps / docker-compose "name  | " / vLLM "(Worker_TP3 pid=N)" or
#  "(VllmWorker rank=R pid=N)" / vLLM "LEVEL MM-DD HH:MM:SS" (no year) / SGLang
#  "[YYYY-MM-DD HH:MM:SS(.mmm) DPd TPn EPe]" or old "[HH:MM:SS TPn]" (engines.md Part 2, line prefixes).
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


@dataclass(frozen=True)
class Prefix:
    """What a line prefix says: a timestamp (possibly partial) and who printed the line."""

    rank: str | None
    date: tuple[int, int, int] | None       # full date when printed
    month_day: tuple[int, int] | None       # vLLM: month and day, no year
    hms: tuple[int, int, int, float] | None  # hour, minute, second, fraction


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


def parse_prefix(line: str) -> Prefix:
    m = PREFIX_RE.match(line)
    if m is None:  # the regex is all-optional, so this cannot happen; kept for type checkers
        return Prefix(None, None, None, None)
    g = m.groupdict()
    rank: str | None = None
    if g["proc"]:
        proc = g["proc"]
        if g["prank"]:
            rank = f"rank{g['prank']}"
        elif proc == "VllmWorkerProcess":
            rank = f"pid{g['pid']}"
        elif not proc.startswith(("APIServer", "EngineCore")):
            rank = proc  # Worker_TP3, Worker_TP0_EP0, ...; API server and engine core are not ranks
    elif g["srank"] and g["srank"].strip():
        rank = " ".join(g["srank"].split())
    if g["vt"]:
        mo, dd = int(g["vmo"]), int(g["vd"])
        hms = _hms(g["vt"], g["vf"])
        if 1 <= mo <= 12 and 1 <= dd <= 31 and hms:
            return Prefix(rank, None, (mo, dd), hms)
    if g["st"]:
        hms = _hms(g["st"], g["sf"])
        if hms:
            return Prefix(rank, _date(g["sdate"]) if g["sdate"] else None, None, hms)
    for d, t, f in (("d2", "t2", "f2"), ("d1", "t1", "f1")):
        if g[d]:
            date, hms = _date(g[d]), _hms(g[t], g[f])
            if date and hms:
                return Prefix(rank, date, None, hms)
    return Prefix(rank, None, None, None)


def epoch(y: int, mo: int, d: int, hms: tuple[int, int, int, float]) -> float | None:
    try:
        return calendar.timegm((y, mo, d, hms[0], hms[1], hms[2], 0, 0, 0)) + hms[3]
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


class KeywordScanner:
    """Find every occurrence of a fixed set of literal keys in a bytes chunk, in one pass."""

    def __init__(self, keys: list[str], backend: str = "auto", skip: set[str] | None = None):
        # indexes always refer to ``keys``; keys in ``skip`` are not searched for
        pairs = [(i, k.encode("utf-8")) for i, k in enumerate(keys) if not skip or k not in skip]
        orig = [i for i, _k in pairs]
        bkeys = [k for _i, k in pairs]
        self.backend = backend
        self.find: Callable[[bytes], list[tuple[int, int, int]]]
        if backend in ("auto", "ahocorasick"):
            try:
                import ahocorasick_rs  # optional accelerator, same results as the regex below
            except ImportError:
                if backend == "ahocorasick":
                    raise
            else:
                ac = ahocorasick_rs.BytesAhoCorasick(bkeys)
                self.backend = "ahocorasick"
                if len(orig) == len(keys):
                    self.find = lambda data: ac.find_matches_as_indexes(data, overlapping=True)
                else:
                    self.find = lambda data: [(orig[i], s, e) for i, s, e in
                                              ac.find_matches_as_indexes(data, overlapping=True)]
                return
        rx = re.compile(_trie_regex(bkeys))
        index = {k: orig[i] for i, k in enumerate(bkeys)}
        self.backend = "regex"
        self.find = lambda data: [(index[m.group()], m.start(), m.end()) for m in rx.finditer(data)]
