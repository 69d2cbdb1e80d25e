"""Live progress view of an engine cold start: phase, elapsed time, last engine line.

On a terminal it redraws one status line in place (throttled); anywhere else (CI logs, pipes) it
prints a plain line when the phase changes and a heartbeat line every ``heartbeat_s`` seconds,
so a log stays readable and still shows that the engine is alive.
"""
from __future__ import annotations

import re
import shutil
import sys
import time
from typing import TextIO

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SPINNER = "|/-\\"


def format_elapsed(seconds: float) -> str:
    """``75.4`` → ``01:15``; an hour or more → ``1:02:03``."""
    s = max(0, int(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m:02d}:{sec:02d}"


def clean_line(line: str) -> str:
    """An engine line fit for one status row: no ANSI colours, no control characters, trimmed."""
    line = _ANSI.sub("", line)
    return "".join(ch if ch.isprintable() else " " for ch in line).strip()


class ProgressView:
    """Shows ``phase``, elapsed time and the last engine line while a runner waits for Ready.

    ``update`` is cheap to call often; the view decides what to draw. ``finish`` ends the view with
    one final line (e.g. ``Ready`` or the failure). ``tty`` defaults to ``stream.isatty()``.
    """

    def __init__(self, stream: TextIO | None = None, *, tty: bool | None = None, label: str = "",
                 min_redraw_s: float = 0.1, heartbeat_s: float = 30.0, width: int | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self.label = label
        self.min_redraw_s = min_redraw_s
        self.heartbeat_s = heartbeat_s
        self._width = width
        self._phase: str | None = None
        self._line = ""
        self._last_draw = float("-inf")
        self._last_plain = float("-inf")
        self._spin = 0
        self._drawn = False

    def _cols(self) -> int:
        return self._width or shutil.get_terminal_size((100, 24)).columns

    def _status(self, phase: str | None, line: str) -> str:
        head = f"{self.label + ' ' if self.label else ''}{phase or 'starting'}"
        return f"{head}  | {line}" if line else head

    def update(self, elapsed_s: float, phase: str | None = None, line: str | None = None) -> None:
        phase_changed = phase is not None and phase != self._phase
        if phase is not None:
            self._phase = phase
        if line:
            cleaned = clean_line(line)
            if cleaned:
                self._line = cleaned
        now = time.monotonic()
        if self.tty:
            if not phase_changed and now - self._last_draw < self.min_redraw_s:
                return
            self._last_draw = now
            self._spin = (self._spin + 1) % len(_SPINNER)
            text = f"{_SPINNER[self._spin]} {format_elapsed(elapsed_s)}  {self._status(self._phase, self._line)}"
            cols = self._cols()
            if len(text) > cols - 1:
                text = text[: max(0, cols - 2)] + "…"
            self.stream.write("\r\x1b[2K" + text)
            self.stream.flush()
            self._drawn = True
        elif phase_changed or now - self._last_plain >= self.heartbeat_s:
            self._last_plain = now
            self.stream.write(f"[{format_elapsed(elapsed_s)}] {self._status(self._phase, self._line)}\n")
            self.stream.flush()

    def note(self, message: str) -> None:
        """A message that must stay visible (e.g. a dropped GPU request): printed on its own line."""
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False
        self.stream.write(message + "\n")
        self.stream.flush()

    def finish(self, message: str) -> None:
        self._last_draw = float("-inf")
        self.note(message)
