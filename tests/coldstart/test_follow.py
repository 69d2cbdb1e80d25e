"""The log-follow supervisor with scripted sources: reconnect with backoff, resume without duplicates,
backlog first, stop while a read blocks, listener errors, stalls on the log's clock. Its three users are
tested with real transports: tests/docker (Docker runner), tests/engine (local runner), tests/operator
(pod-log bridge against the API emulator)."""
from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

from gpustack_k3.coldstart import ColdStartTracker
from gpustack_k3.coldstart.follow import LineDedup, LogFollower

T0 = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC).timestamp()


def stamped(lines: list[str], t0: float = T0) -> list[bytes]:
    """docker/kubelet style: '<RFC 3339> <line>\\n', one stamp per line, 1 ms apart."""
    out = []
    for i, line in enumerate(lines):
        ts = datetime.fromtimestamp(t0 + i / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")
        out.append(f"{ts} {line}\n".encode())
    return out


LINES = [f"(Worker_TP0 pid=9) INFO 11-30 10:00:{i:02d} [x.py:1] line {i}" for i in range(40)]


class Source:
    """Serves LINES; the first stream breaks after ``break_after`` lines; resumes honour ``since``."""

    def __init__(self, stamped_: bool = True, break_after: int | None = 10, fail_opens: int = 0,
                 alive_after_end: int = 1) -> None:
        self.stamped = stamped_
        self.data = stamped(LINES) if stamped_ else [f"{x}\n".encode() for x in LINES]
        self.break_after, self.fail_opens = break_after, fail_opens
        self.opens: list[tuple[float | None, bool]] = []
        self.alive_calls = 0
        self.alive_after_end = alive_after_end

    def open(self, since, follow):
        self.opens.append((since, follow))
        if self.fail_opens:
            self.fail_opens -= 1
            raise ConnectionError("API server answered 500")
        start = 0
        if since is not None:   # the server resends from a whole second before (coarser than the stamps)
            start = max(0, int((since - T0) * 1000) - 3)
        return self._chunks(start)

    def _chunks(self, start):
        for i in range(start, len(self.data)):
            if self.break_after is not None and i == self.break_after:
                self.break_after = None
                raise ConnectionResetError("connection dropped")
            # split lines across chunks, as a socket does
            yield self.data[i][:7]
            yield self.data[i][7:]

    def interrupt(self):
        pass

    def alive(self):
        self.alive_calls += 1
        return self.alive_calls <= self.alive_after_end


def follow(source, **kw) -> tuple[LogFollower, list[bytes]]:
    got: list[bytes] = []
    f = LogFollower(source, kw.pop("tracker", None), on_text=[got.append], max_backoff_s=0.05, **kw)
    f.start()
    f.join(10)
    assert not f.is_alive()
    return f, got


def test_broken_stream_is_resumed_from_the_last_stamp_without_duplicates():
    src = Source(break_after=10, fail_opens=0)
    f, got = follow(src)
    assert b"".join(got).decode().splitlines() == LINES      # every line once, stamps stripped
    assert f.reconnects >= 1
    assert src.opens[0] == (None, True)
    since = src.opens[1][0]
    assert since is not None and since < T0 + 0.009          # resumed a margin before the last fed stamp


def test_failed_opens_back_off_then_follow():
    src = Source(break_after=None, fail_opens=2, alive_after_end=3)
    f, got = follow(src)
    assert b"".join(got).decode().splitlines() == LINES
    assert len(src.opens) >= 3


def test_a_source_that_is_gone_ends_the_follow():
    src = Source(break_after=5, alive_after_end=0)           # the container went away meanwhile
    f, got = follow(src)
    assert b"".join(got).decode().splitlines() == LINES[:5]
    assert f.ended.is_set() and f.reconnects == 0


def test_backlog_first_then_follow():
    src = Source(break_after=None, alive_after_end=1)
    got: list[bytes] = []
    f = LogFollower(src, None, on_text=[got.append], catch_up=True, max_backoff_s=0.05)
    assert not f.caught_up.is_set()
    f.start()
    f.join(10)
    assert f.caught_up.is_set()
    assert src.opens[0] == (None, False) and src.opens[1][1] is True
    assert b"".join(got).decode().splitlines() == LINES      # the follow after the backlog repeats nothing


def test_unstamped_source_passes_bytes_through():
    src = Source(stamped_=False, break_after=None, alive_after_end=0)
    _f, got = follow(src)
    assert b"".join(got) == b"".join(f"{x}\n".encode() for x in LINES)


def test_stop_breaks_a_blocked_read():
    release = threading.Event()

    class Blocking:
        stamped = False

        def open(self, since, follow):
            return self._chunks()

        def _chunks(self):
            yield b"first line\n"
            release.wait(30)          # a follow with nothing to say
            raise OSError("socket shut down")

        def interrupt(self):
            release.set()

        def alive(self):
            return True

    got: list[bytes] = []
    f = LogFollower(Blocking(), None, on_text=[got.append])
    f.start()
    assert f.wait_activity(5) is False and got == [b"first line\n"]
    t = time.monotonic()
    f.stop()
    f.join(5)
    assert not f.is_alive() and time.monotonic() - t < 5


def test_a_listener_that_raises_is_dropped_and_reading_goes_on():
    def bad(_chunk):
        raise RuntimeError("progress view broke")

    src = Source(stamped_=False, break_after=None, alive_after_end=0)
    got: list[bytes] = []
    f = LogFollower(src, None, on_text=[bad, got.append])
    f.start()
    f.join(10)
    assert [str(e) for e in f.errors] == ["progress view broke"]
    assert b"".join(got).decode().splitlines() == LINES


def test_tracker_fed_and_stall_checked_on_the_log_clock():
    """The log's clock is the engine's stamps; "now" is mapped through the arrival time of the latest line."""
    lines = ["(Worker_TP0 pid=9) INFO 11-30 10:00:00 [gpu_model_runner.py:4980] Starting to load model /m..."]

    class One:
        stamped = True

        def open(self, since, follow):
            return iter(stamped(lines, t0=T0 + 3600))     # the kubelet's clock runs an hour ahead

        def interrupt(self):
            pass

        def alive(self):
            return False

    tracker = ColdStartTracker(engine="vllm", year=2026, budgets={"weights_load": 60})
    f = LogFollower(One(), tracker)
    f.start()
    f.join(5)
    assert f.offset == -3600.0
    assert f.check_stall(T0 + 3600 + 30) is False            # 30 s into weights_load
    assert f.check_stall(T0 + 3600 + 61) is True             # over its 60 s budget
    assert tracker.report().last.reason.startswith("stalled in weights_load")


def test_line_dedup_drops_what_was_fed_before_a_reconnect():
    dd = LineDedup()
    a = b"2026-11-29T10:00:00.000000001Z one\n2026-11-29T10:00:01Z two\n2026-11-29T10:00:01Z three\n"
    assert dd.feed(a[:20]) == b"" and dd.feed(a[20:]) == b"one\ntwo\nthree\n"
    dd.reconnect()    # the server resends from a second earlier (sinceSeconds has 1 s resolution)
    assert dd.feed(a + b"2026-11-29T10:00:01Z four\n2026-11-29T10:00:02Z five\n") == b"four\nfive\n"
