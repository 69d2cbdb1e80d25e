"""The waiting helpers of tests/support (they decide what the operator tests can prove, so they are tested)."""
import pytest

from tests.support.waiting import ManualClock, consistently, wait_for


def test_consistently_checks_on_the_clock_it_is_given_and_fails_at_the_first_miss():
    clock, seen = ManualClock(), []

    def holds():
        seen.append(clock.advance(1))
        return True
    consistently(holds, for_s=5, clock=clock.monotonic, interval=0)
    assert len(seen) == 5                       # five checks, one clock second each: no real time spent
    with pytest.raises(AssertionError, match="stopped holding"):
        consistently(lambda: len(seen) < 7 and seen.append(0) is None, for_s=60, clock=clock.monotonic, interval=0)


def test_consistently_until_an_event_checks_the_state_after_it_too():
    events, state = [], {"ok": True}

    def until():
        events.append(1)
        if len(events) == 3:
            state["ok"] = False                 # the event happened, and broke the condition on its way
        return len(events) >= 3
    with pytest.raises(AssertionError):
        consistently(lambda: state["ok"], until=until, interval=0)
    with pytest.raises(AssertionError, match="did not happen"):
        consistently(lambda: True, until=lambda: False, timeout=0.05, interval=0.01)
    with pytest.raises(ValueError):
        consistently(lambda: True)


def test_wait_for_returns_the_value_and_names_what_it_waited_for():
    assert wait_for(lambda: 7, timeout=1) == 7
    with pytest.raises(AssertionError, match="the answer"):
        wait_for(lambda: 0, timeout=0.05, interval=0.01, what="the answer")
