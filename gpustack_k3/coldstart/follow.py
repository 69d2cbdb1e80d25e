"""The log-follow supervisor: one thread that reads an engine's log from a source and feeds a tracker.

Used by the Docker runner (container log stream), the local runner (the child's stdout pipe) and the
operator's pod-log bridge (the pod log API). What it does for all three:

* **reconnect with backoff** when a stream breaks or ends while the source says it is still alive
  (``LogSource.alive``); a source that cannot be reopened (a pipe) simply ends;
* **resume without duplicates**: a *stamped* source (``kubectl logs --timestamps`` / docker
  ``timestamps=True``: ``<RFC 3339> <text>``) is reopened from the last stamp it fed (``since``),
  and ``LineDedup`` drops what was already fed; the stamps are stripped before the tracker sees a line;
* **catch up first** (``catch_up``): read the backlog once without following, then follow; until then
  ``caught_up`` is clear (the operator keeps its last status while a restarted operator re-reads a log);
* **stop** from any thread, breaking a blocked read (``LogSource.interrupt``);
* **stall checks** on the log's clock: ``check_stall()`` maps "now" onto the engine's timestamps
  (the engine stamp of the latest line minus the time it arrived: kubelet stamp, else receive time);
* **feeding** the tracker under ``lock`` and **notifying** listeners (``on_text(bytes)`` per chunk as
  fed, ``on_fed(follower)`` after each chunk, ``on_end(follower)`` once the follow is over). A listener
  that raises is dropped and its first exception kept in ``errors`` (reading goes on: a child process
  never blocks on a full pipe).
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..core import retry
from .framing import MAX_LINE
from .scanner import rfc3339_epoch

log = logging.getLogger("gpustack_k3.coldstart.follow")

RESUME_MARGIN_S = 5         # extra seconds asked for on reconnect (clock skew); duplicates are dropped


class LogSource(Protocol):
    """Where a log comes from. ``open`` connects (it may block; raise on failure) and returns an
    iterable of raw chunks. ``since`` (epoch seconds) asks for the log from then on, ``follow`` for a
    stream that ends only with the log; ``interrupt`` breaks a read blocked in another thread (the
    supervisor calls it again after ``open`` returns if it was stopped meanwhile); ``alive`` says, after
    a stream ended or broke, whether following again can bring more."""

    stamped: bool

    def open(self, since: float | None, follow: bool) -> Iterable[bytes]: ...

    def interrupt(self) -> None: ...

    def alive(self) -> bool: ...


class LineDedup:
    """Split a stamped stream (``<RFC 3339> <text>\\n``) into text, dropping lines already fed before a
    reconnect: everything stamped before the last fed stamp, and as many lines stamped exactly at it as
    were fed. Pure and bounded (one partial line)."""

    def __init__(self) -> None:
        self.last_stamp: str | None = None
        self.last_ts: float | None = None
        self.at_last = 0           # lines fed with stamp == last_stamp
        self._skip_same = 0        # after a reconnect: lines at last_stamp still to drop
        self._partial = b""

    def reconnect(self) -> None:
        self._partial = b""
        self._skip_same = self.at_last

    def feed(self, chunk: bytes) -> bytes:
        data = self._partial + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) > MAX_LINE:  # an endless line: pass it on without its stamp logic
                self._partial = b""
                return data
            self._partial = data
            return b""
        self._partial = data[cut + 1:]
        out = []
        for line in data[:cut + 1].splitlines(keepends=True):
            stamp, sep, text = line.partition(b" ")
            s = stamp.decode("ascii", "replace")
            ts = rfc3339_epoch(s) if sep else None
            if ts is None:  # not stamped: keep it
                out.append(line)
                continue
            if self.last_ts is not None:
                if ts < self.last_ts:
                    continue
                if s == self.last_stamp and self._skip_same > 0:
                    self._skip_same -= 1
                    continue
            if s == self.last_stamp:
                self.at_last += 1
            else:
                self.last_stamp, self.last_ts, self.at_last, self._skip_same = s, ts, 1, 0
            out.append(text)
        return b"".join(out)


TextListener = Callable[[bytes], None]
FollowerListener = Callable[["LogFollower"], None]


class LogFollower(threading.Thread):
    """Follow ``source`` into ``tracker`` (may be None: listeners only) until the log ends or ``stop()``."""

    def __init__(self, source: LogSource, tracker: Any = None, *, name: str = "log-follower",
                 on_text: Sequence[TextListener] = (), on_fed: Sequence[FollowerListener] = (),
                 on_end: Sequence[FollowerListener] = (), catch_up: bool = False,
                 clock: Callable[[], float] = time.time, max_backoff_s: float = 10.0,
                 lock: Any = None) -> None:
        super().__init__(name=name, daemon=True)
        self.source, self.tracker = source, tracker
        # held while the tracker is fed; hold it to read the tracker (an owner may share its own)
        self.lock = lock if lock is not None else threading.RLock()
        self._on_text, self._on_fed, self._on_end = list(on_text), list(on_fed), list(on_end)
        self.clock = clock
        self.max_backoff_s = max_backoff_s
        self.dedup = LineDedup() if source.stamped else None
        self.stop_event = threading.Event()
        self.ended = threading.Event()
        self.caught_up = threading.Event()
        if not catch_up:
            self.caught_up.set()
        self.reconnects = 0
        self.activity = threading.Event()       # set when a chunk was fed (cleared by wait_activity)
        self.chunks = 0                         # chunks fed so far (to wait for a quiet stream)
        self.offset: float | None = None        # engine stamp - arrival time of the latest stamped line
        self.errors: list[BaseException] = []

    # ------------------------------------------------------------------ control
    def stop(self) -> None:
        """Stop following (from any thread): breaks a blocked read."""
        self.stop_event.set()
        try:
            self.source.interrupt()
        except Exception as e:  # noqa: BLE001 - already closed
            log.debug("interrupting a log stream: %s", e)

    def wait_activity(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for a fed chunk or the end of the follow; True when the follow ended."""
        self.activity.wait(timeout)
        self.activity.clear()
        return self.ended.is_set()

    def wait_quiet(self, quiet_s: float = 0.3, max_s: float = 2.0) -> None:
        """Return once no chunk arrived for ``quiet_s`` (a log's lag behind the engine), at most ``max_s``."""
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline and not self.ended.is_set():
            seen = self.chunks
            self.ended.wait(quiet_s)
            if self.chunks == seen:
                return

    def check_stall(self, now: float | None = None) -> bool:
        """``tracker.check_stall`` at ``now`` (default: the clock) mapped onto the log's clock."""
        if self.tracker is None or self.offset is None or not self.tracker.budgets:
            return False
        t = self.clock() if now is None else now
        with self.lock:
            return bool(self.tracker.check_stall(t + self.offset))

    # ------------------------------------------------------------------ the thread
    def run(self) -> None:
        try:
            self._run()
        except Exception:  # a follower never takes its owner down
            log.exception("%s failed", self.name)
        finally:
            self.caught_up.set()
            self.ended.set()
            self.activity.set()
            for fn in self._on_end:
                self._call(fn, self)

    def _run(self) -> None:
        failures = 0
        while not self.caught_up.is_set() and not self.stop_event.is_set():
            try:   # the backlog first: until it is read, the owner keeps what it knew
                self._stream(follow=False)
                self.caught_up.set()
                self._fed()
            except Exception as e:  # noqa: BLE001 - any failure: back off and retry while the source lives
                if self.stop_event.is_set() or not self.source.alive():
                    return
                failures += 1
                log.debug("%s: backlog read failed: %s", self.name, e)
                self._backoff(failures)
        failures = 0
        while not self.stop_event.is_set():
            try:
                self._stream(follow=True)
                failures = 0
            except Exception as e:  # noqa: BLE001 - connection dropped, read timeout, API error
                if self.stop_event.is_set():
                    return
                log.debug("%s: log stream broke: %s", self.name, e)
                failures += 1
            if self.stop_event.is_set() or not self.source.alive():
                return
            self.reconnects += 1
            self._backoff(failures)

    def _backoff(self, failures: int) -> None:
        self.stop_event.wait(retry.delay(failures + 1, base_s=0.2, max_s=self.max_backoff_s))

    def _stream(self, follow: bool) -> None:
        since = None
        if self.dedup is not None and self.dedup.last_ts is not None:
            # resume from the last fed stamp (the source may round it down: duplicates are dropped)
            since = self.dedup.last_ts - RESUME_MARGIN_S
            self.dedup.reconnect()
        chunks = self.source.open(since, follow)
        if self.stop_event.is_set():   # stopped while it opened: its interrupt found nothing to break
            self.source.interrupt()
            return
        for chunk in chunks:
            if self.stop_event.is_set():
                return
            text = self.dedup.feed(chunk) if self.dedup is not None else chunk
            if text:
                self._feed(text)

    def _feed(self, text: bytes) -> None:
        if self.tracker is not None:
            with self.lock:
                try:
                    self.tracker.feed(text)
                except Exception as e:  # noqa: BLE001 - a tracker bug: keep reading, report it
                    self.errors.append(e)
                    self.tracker = None
                else:
                    line_ts = self.tracker.last_line_ts
                    if line_ts is not None:
                        arrived = self.dedup.last_ts if self.dedup is not None and self.dedup.last_ts else self.clock()
                        self.offset = line_ts - arrived
        self.chunks += 1
        self.activity.set()
        for fn in list(self._on_text):
            if not self._call(fn, text):
                self._on_text.remove(fn)
        self._fed()

    def _fed(self) -> None:
        for fn in list(self._on_fed):
            if not self._call(fn, self):
                self._on_fed.remove(fn)

    def _call(self, fn: Callable, arg: Any) -> bool:
        try:
            fn(arg)
            return True
        except BaseException as e:  # noqa: BLE001 - kept for the owner (LocalProcess.stop re-raises it)
            self.errors.append(e)
            return False


def ceil_seconds_since(ts: float, clock: Callable[[], float] = time.time) -> int:
    """``sinceSeconds`` for a source that only takes whole seconds back from now (at least 1)."""
    return max(1, math.ceil(clock() - ts))
