"""A rate-limited, de-duplicating work queue with controller-runtime (client-go workqueue) semantics:

* a key is queued at most once (``dirty`` set); a key being processed is never handed to a second
  worker: if it is added meanwhile it is queued again when ``done`` is called;
* ``add_after`` delays an add; ``add_rate_limited`` delays it by a per-key exponential backoff with
  jitter (the one retry policy, ``gpustack_k3.core.retry``: base·2^failures, capped, × U[0.5, 1]);
  ``forget`` resets the key's failure count.
"""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Hashable

from gpustack_k3.core import retry


class WorkQueue:
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 60.0):
        self._cv = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._delayed: list[tuple[float, int, Hashable]] = []
        self._seq = itertools.count()
        self._failures: dict[Hashable, int] = {}
        self._shutdown = False
        self.base_delay, self.max_delay = base_delay, max_delay

    def add(self, key: Hashable) -> None:
        with self._cv:
            self._add_locked(key)

    def _add_locked(self, key: Hashable) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._cv.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cv:
            if self._shutdown:
                return
            heapq.heappush(self._delayed, (time.monotonic() + delay, next(self._seq), key))
            self._cv.notify()

    def backoff(self, key: Hashable) -> float:
        """The next delay for ``key`` (and count the failure)."""
        with self._cv:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        return retry.delay(n + 1, base_s=self.base_delay, max_s=self.max_delay)

    def add_rate_limited(self, key: Hashable) -> float:
        delay = self.backoff(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        with self._cv:
            self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        with self._cv:
            return self._failures.get(key, 0)

    def get(self, timeout: float | None = None) -> Hashable | None:
        """Block until a key is ready (None on shutdown or timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                self._promote_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                if self._shutdown:
                    return None
                now = time.monotonic()
                waits = [self._delayed[0][0] - now] if self._delayed else []
                if deadline is not None:
                    if now >= deadline:
                        return None
                    waits.append(deadline - now)
                self._cv.wait(max(0.0, min(waits)) if waits else None)

    def _promote_locked(self) -> None:
        now = time.monotonic()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            self._add_locked(key)

    def done(self, key: Hashable) -> None:
        with self._cv:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cv.notify()

    def __len__(self) -> int:
        with self._cv:
            return len(self._queue)

    @property
    def pending_delayed(self) -> int:
        with self._cv:
            return len(self._delayed)

    @property
    def idle(self) -> bool:
        """Nothing queued, nothing being processed (delayed retries may still be pending)."""
        with self._cv:
            self._promote_locked()
            return not self._queue and not self._processing

    def shutdown(self) -> None:
        with self._cv:
            self._shutdown = True
            self._cv.notify_all()
