"""Root causes: the exception a Python traceback in an engine log ends with, per printing process.

Engines die with a chain of messages: a worker's exception (the cause: CUDA out of memory, an NCCL
error, a missing file, a bad argument), then the wrappers the layers above print about it
(vLLM "WorkerProc hit an exception.", "EngineCore failed to start.", "Engine core initialization
failed. See root cause above."; SGLang "Scheduler hit an exception: Traceback ...", "Received sigquit
from a child process"). A traceback opens at ``Traceback (most recent call last):`` and ends with its
exception line, the first line at column 0 that names an exception type; vLLM prefixes every line of
a multi-process log with the process tag, so tracebacks of several processes interleave and are
followed per process (``scanner.split_prefix``).

CPython prints the exception line as ``module.Type: message`` (Lib/traceback.py
``TracebackException.format_exception_only`` @ CPython 3.12).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .scanner import split_prefix

TRACEBACK = "Traceback (most recent call last):"
MAX_OPEN = 64            # processes with a traceback open at once
MAX_TRACEBACK_LINES = 2000   # a traceback with no exception line after this many lines is dropped
MAX_CAUSES = 16          # per attempt (the first one decides; the rest is context)
TEXT_CHARS = 240

# "torch.AcceleratorError: CUDA error: out of memory", "Exception: WorkerProc initialization failed ...",
# "KeyboardInterrupt"; the last name part must read as an exception type
EXCEPTION_RE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Za-z_]\w*)?(?:Error|Exception|Exit|Interrupt|Failure|Fault|Timeout)\w*)"
    r"(?::\s*(?P<message>.*))?$")


@dataclass
class Cause:
    """One failure message: an exception a traceback ended with, or a catalog ``fail`` line."""

    seq: int                    # line number in the stream (order of causes)
    at: float | None
    rank: str | None
    text: str                   # the message (the catalog's ``reason`` group, or the exception's message)
    error: str | None = None    # exception type, when the cause is a traceback's exception line
    wrapper: bool = False       # a message about another failure ("see root cause above")
    phase: str | None = None    # the catalog marker's phase, if any
    marker: str | None = None   # the catalog marker id, if any

    def to_dict(self) -> dict:
        return {"text": self.text, "error": self.error, "rank": self.rank, "marker": self.marker}


@dataclass
class ExceptionLine:
    process: str | None
    error: str
    message: str
    rank: str | None            # the rank of the line that opened the traceback


class Tracebacks:
    """Follows open tracebacks, one per printing process; ``line`` returns the exception that ends one."""

    def __init__(self) -> None:
        self._open: dict[str | None, list] = {}   # process -> [lines seen since "Traceback", its rank]

    @property
    def active(self) -> bool:
        return bool(self._open)

    def line(self, text: str, rank: str | None = None) -> ExceptionLine | None:
        """Read one line (``rank``: the rank its prefix names, when known)."""
        process, message = split_prefix(text)
        if TRACEBACK in message:
            if process in self._open or len(self._open) < MAX_OPEN:
                self._open[process] = [0, rank]
            return None
        state = self._open.get(process)
        if state is None:
            return None
        if state[0] >= MAX_TRACEBACK_LINES:
            del self._open[process]
            return None
        state[0] += 1
        if not message or message[0].isspace():
            return None   # a frame, its source line or its ^^^^ marker
        m = EXCEPTION_RE.match(message.rstrip())
        if m is None:
            return None   # another line at column 0 (a warning printed meanwhile): the traceback stays open
        del self._open[process]
        return ExceptionLine(process, m.group("type"), (m.group("message") or "").strip(), rank or state[1])
