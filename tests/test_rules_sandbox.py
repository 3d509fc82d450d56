"""Time limits for rule code run in the validating process (stages/rules/sandbox.py)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from stages.rules.sandbox import CustomCodeTimeout, time_limit, unit_time_limits


def _busy(seconds: float) -> None:
    """Run Python code (not one long C call) for about `seconds`."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_call_running_past_its_limit_is_stopped():
    """A call that runs longer than its limit raises CustomCodeTimeout inside it."""
    started = time.monotonic()
    with pytest.raises(CustomCodeTimeout, match="0.2 s"), time_limit(0.2):
        _busy(5)
    assert time.monotonic() - started < 2


def test_limits_in_a_unit_are_per_call_not_cumulative():
    """Within one unit each call gets its full time: calls that together exceed the limit pass."""
    with unit_time_limits():
        for _ in range(4):
            with time_limit(0.3):
                _busy(0.15)


def test_a_call_in_a_unit_is_stopped_at_its_own_deadline():
    """In a unit, the timer armed for an earlier call does not cut a later call short, and the
    later call is still stopped at its own deadline."""
    with unit_time_limits():
        with time_limit(0.4):
            _busy(0.3)
        started = time.monotonic()
        with pytest.raises(CustomCodeTimeout), time_limit(0.4):
            _busy(5)
        elapsed = time.monotonic() - started
    assert 0.35 < elapsed < 2


def test_a_shorter_limit_after_a_longer_one_is_kept():
    """A call with a shorter limit than the armed timer's is stopped at its own deadline."""
    with unit_time_limits():
        with time_limit(5):
            pass
        started = time.monotonic()
        with pytest.raises(CustomCodeTimeout), time_limit(0.2):
            _busy(5)
    assert time.monotonic() - started < 2


def test_no_alarm_between_calls_of_a_unit():
    """Time spent between limited calls of a unit counts against no call."""
    with unit_time_limits():
        with time_limit(0.2):
            pass
        _busy(0.4)  # the timer armed for the call above fires here, and is ignored
        with time_limit(0.2):
            pass


def test_previous_handler_and_timer_are_put_back():
    """After a unit, the SIGALRM handler and a pending timer set before it are in force again."""
    fired = []

    def previous(signum, frame):
        fired.append(signum)

    before = signal.signal(signal.SIGALRM, previous)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.6)
        with unit_time_limits(), time_limit(10):
            pass
        assert signal.getsignal(signal.SIGALRM) is previous
        delay, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < delay <= 0.6
        _busy(1.0)
        assert fired == [signal.SIGALRM]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_off_the_main_thread_a_trace_function_stops_the_call():
    """Executor threads cannot use SIGALRM: the deadline is checked line by line there."""
    out = {}
    handler = signal.getsignal(signal.SIGALRM)

    def work():
        with unit_time_limits():
            try:
                with time_limit(0.2):
                    _busy(5)
            except CustomCodeTimeout as exc:
                out["error"] = exc

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert isinstance(out.get("error"), CustomCodeTimeout)
    assert signal.getsignal(signal.SIGALRM) is handler
