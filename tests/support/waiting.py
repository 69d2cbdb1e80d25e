"""Waiting in tests, in one place: ``wait_for`` (until something holds), ``consistently`` (something keeps
holding while the world moves on), ``wait_idle`` (an operator's work queue went quiet) and ``ManualClock``
(a clock the test moves); ``reconciles`` counts an operator's finished reconciles (an event to wait for).

"Nothing happened" is asserted with ``consistently(pred, until=...)``: ``pred`` is checked at every poll until
an event the test names has happened (e.g. three more reconciles: three resyncs of an unchanged world), so the
assertion is as long as the events it is about, not a sleep guessed to cover them. ``for_s`` bounds it on a
clock (``clock``, ``time.monotonic`` unless the test passes its own)."""
from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any


def wait_for(fn: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = "condition") -> Any:
    """The first truthy value of ``fn()`` (exceptions count as not yet); AssertionError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # not there yet
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")


def consistently(pred: Callable[[], Any], *, until: Callable[[], Any] | None = None, for_s: float | None = None,
                 timeout: float = 30.0, interval: float = 0.02, clock: Callable[[], float] = time.monotonic,
                 what: str = "condition") -> None:
    """``pred()`` is truthy at every check until ``until()`` is (checked after ``pred``, so the last state is
    covered too) or ``for_s`` passed on ``clock``; AssertionError at the first falsy ``pred()``, or when
    ``until`` did not happen within ``timeout`` real seconds."""
    if until is None and for_s is None:
        raise ValueError("consistently() needs until= or for_s=")
    start, deadline = clock(), time.monotonic() + timeout
    while True:
        got = pred()
        if not got:
            raise AssertionError(f"{what} stopped holding: {got!r}")
        if until is not None and until():
            got = pred()
            if not got:
                raise AssertionError(f"{what} stopped holding: {got!r}")
            return
        if for_s is not None and clock() - start >= for_s:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: the awaited event did not happen within {timeout} s")
        time.sleep(interval)


def wait_idle(manager: Any, timeout: float = 30.0, settle: float = 0.3) -> bool:
    """True once the manager's work queue stayed idle (nothing queued, processed or waiting for a retry) for
    ``settle`` seconds."""
    deadline = time.monotonic() + timeout
    quiet_since = None
    while time.monotonic() < deadline:
        if manager.queue.idle and manager.queue.pending_delayed == 0:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return True
        else:
            quiet_since = None
        time.sleep(0.02)
    return False


def reconciles(manager: Any) -> int:
    """Reconciles the manager's workers finished (its ``gpustack_k3_operator_reconcile_total`` counter, both
    results): "three more reconciles" is the event that three resyncs of an unchanged world happened."""
    reg = manager.metrics.registry
    return int(sum(reg.get_sample_value("gpustack_k3_operator_reconcile_total", {"result": r}) or 0
                   for r in ("success", "error")))


class ManualClock:
    """A UTC clock that moves only when the test says (``advance``); callable, as the operator's ``clock``."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> dt.datetime:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)
            return self._now

    def monotonic(self) -> float:
        """The same clock as seconds, for ``consistently(clock=...)``."""
        return self().timestamp()
