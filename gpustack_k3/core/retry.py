"""The one retry policy: capped exponential backoff with jitter, as a tenacity wait.

Attempt ``n`` (1 = the first retry) waits ``min(max_s, base_s * 2**(n-1))`` times a factor drawn from
U[0.5, 1] (client-go's jittered backoff): half of the delay is fixed (``tenacity.wait_exponential``), the
other half random (``tenacity.wait_random_exponential``). Callers that retry a call hand ``wait`` to
``tenacity.Retrying``; loops that cannot be a tenacity call (an informer's watch, a log follower, a work
queue's requeue) ask ``delay`` for the same figure.
"""
from __future__ import annotations

from typing import Any


def wait(base_s: float, max_s: float) -> Any:
    """The policy as a tenacity wait (``tenacity.Retrying(wait=...)``)."""
    import tenacity
    return (tenacity.wait_exponential(multiplier=base_s / 2, max=max_s / 2)
            + tenacity.wait_random_exponential(multiplier=base_s / 2, max=max_s / 2))


def delay(attempt: int, *, base_s: float, max_s: float) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based) under ``wait(base_s, max_s)``."""
    import tenacity
    state = tenacity.RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    state.attempt_number = max(1, min(attempt, 64))
    return float(wait(base_s, max_s)(state))
