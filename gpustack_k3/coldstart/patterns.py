"""Catalog regexes applied to one log line, in time linear in the line's length.

Python's ``re`` backtracks: a pattern such as ``compil\\w*.*?\\bjit\\b`` costs milliseconds on a
3 KiB engine-config line that holds "compil" several times and no "jit" word (measured: 6.4 ms for
one such line of the CPU preset's start-up log, more than the rest of the log together). RE2
(``google-re2``) guarantees linear time but costs ~4 µs per call for the conversion to UTF-8, ten
times ``re`` on an ordinary short line. So a line up to ``LONG`` characters goes to ``re`` (its worst
case is bounded by the short length); a longer one to RE2 when the pattern is RE2 syntax (no
look-around, no back-reference), else to ``re``.

RE2's ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are ASCII classes where ``re``'s are Unicode; the parts of
engine lines these patterns read are ASCII. ``tests/coldstart/test_patterns.py`` checks that both
engines give the same groups for every pattern on every line of the log fixtures.
"""
from __future__ import annotations

import re
from typing import Any

try:  # an accelerator with identical results; without it every line goes to ``re``
    import re2 as _re2
except ImportError:  # pragma: no cover - google-re2 is a runtime dependency
    _re2 = None

LONG = 512


def _re2_compile(pattern: str | bytes) -> Any:
    if _re2 is None:
        return None
    opts = _re2.Options()
    opts.log_errors = False     # an unsupported pattern is expected (look-around): no stderr noise
    try:
        return _re2.compile(pattern, opts)
    except _re2.error:
        return None


_encoded: tuple[str, bytes] = ("", b"")   # the last long line and its UTF-8 (one line, several patterns)


def _utf8(text: str) -> bytes:
    global _encoded
    last = _encoded
    if last[0] is text:
        return last[1]
    b = text.encode("utf-8", "surrogatepass")
    _encoded = (text, b)
    return b


class _Utf8Match:
    """An RE2 match on the line's UTF-8 bytes, read back as text."""

    __slots__ = ("_m",)

    def __init__(self, m: Any) -> None:
        self._m = m

    def groupdict(self) -> dict[str, str | None]:
        return {(k.decode() if isinstance(k, bytes) else k): None if v is None else v.decode("utf-8", "replace")
                for k, v in self._m.groupdict().items()}


class LinePattern:
    """``search(text)`` → a match with ``groupdict()``, or None; ``re`` or RE2 by the line's length.

    RE2 searches the line's UTF-8 bytes with the pattern compiled as bytes (RE2's UTF-8 mode): the str
    interface converts the line and maps every offset back on each call, ~1.5-3x slower on a 3 KiB line."""

    __slots__ = ("pattern", "_re", "_re2")

    def __init__(self, pattern: str, linear: bool = True) -> None:
        self.pattern = pattern
        self._re = re.compile(pattern)
        self._re2 = _re2_compile(pattern.encode("utf-8")) if linear else None

    @property
    def linear(self) -> bool:
        """True when long lines are searched by RE2."""
        return self._re2 is not None

    def search(self, text: str) -> Any:
        if self._re2 is not None and len(text) > LONG:
            return self.search_re2(text)
        return self._re.search(text)

    def search_re(self, text: str) -> re.Match[str] | None:
        return self._re.search(text)

    def search_re2(self, text: str) -> Any:
        if self._re2 is None:
            return self._re.search(text)
        m = self._re2.search(_utf8(text))
        return None if m is None else _Utf8Match(m)
