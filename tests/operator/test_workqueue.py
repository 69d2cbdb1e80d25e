import threading
import time

import pytest

from gpustack_k3.operator.workqueue import WorkQueue

pytestmark = pytest.mark.operator


def test_deduplicates_and_never_hands_a_key_to_two_workers():
    q = WorkQueue()
    for k in ["a", "b", "a", "a"]:
        q.add(k)
    assert len(q) == 2
    assert q.get(0) == "a"
    q.add("a")  # while processing: remembered, not queued
    assert q.get(0) == "b"
    assert q.get(0.01) is None
    q.done("a")
    assert q.get(0) == "a"


def test_rate_limited_backoff_grows_with_jitter_and_forget_resets():
    q = WorkQueue(base_delay=0.1, max_delay=1.0)
    delays = [q.backoff("k") for _ in range(6)]
    for n, delay in enumerate(delays):
        cap = min(1.0, 0.1 * 2 ** n)
        assert cap * 0.5 <= delay <= cap
    assert q.failures("k") == 6
    q.forget("k")
    assert q.failures("k") == 0 and q.backoff("k") <= 0.1


def test_add_after_orders_by_time():
    q = WorkQueue()
    q.add_after("late", 0.2)
    q.add_after("soon", 0.05)
    t0 = time.monotonic()
    assert q.get(1) == "soon"
    assert q.get(1) == "late"
    assert time.monotonic() - t0 >= 0.2


def test_shutdown_wakes_blocked_getters():
    q = WorkQueue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    time.sleep(0.05)
    q.shutdown()
    t.join(2)
    assert got == [None]
