"""Time limits for rule code that runs in the validating process, and reading custom code.

`满足表达式` expressions (expressions.py) and registered checks run in the validating process,
under `time_limit`. Custom code (`func_str`) never does: it runs in worker processes that are
killed at the timeout (custom/host.py); here it is only parsed, to see which names it uses.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any


class CustomCodeTimeout(BaseException):
    """Custom code ran longer than `rules.timeout`.

    A BaseException, so that custom code's own `except Exception` cannot swallow it.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"custom code timed out after {seconds:g} s (rules.timeout)")
        self.seconds = seconds


class time_limit:
    """Stop the Python code run inside after `seconds` by raising CustomCodeTimeout in it.

    On the main thread a SIGALRM interval timer does it (any previous handler and timer are put
    back); elsewhere (executor threads) a trace function checks a deadline at every line. Code
    stuck inside one long C call is only stopped when that call returns.

    Within `unit_time_limits` the SIGALRM handler stays installed for the whole unit and a call
    only sets its deadline: the timer is re-armed when it fires early (for an earlier call's
    deadline), so each call still gets its full `seconds`, at a few attribute writes a call
    instead of four system calls (measured at a fifth of checking a small file).
    """

    __slots__ = ("seconds", "_saved", "_own", "_trace")

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        seconds = self.seconds
        self._trace = None
        if not seconds or seconds <= 0:
            return
        if threading.get_ident() != threading.main_thread().ident or not _HAS_ITIMER:
            self._trace = _trace_limit(seconds)
            self._trace.__enter__()
            return
        clock = _CLOCK
        self._own = not clock.installed
        if self._own:
            clock.install()
        self._saved = (clock.deadline, clock.seconds)
        clock.start(seconds)

    def __exit__(self, kind, value, traceback) -> None:
        seconds = self.seconds
        if not seconds or seconds <= 0:
            return
        if self._trace is not None:
            self._trace.__exit__(kind, value, traceback)
            return
        clock = _CLOCK
        clock.deadline, clock.seconds = self._saved
        if self._own and clock.depth == 0:
            clock.uninstall()


class unit_time_limits:
    """Keep the SIGALRM handler of `time_limit` installed from the first limited call to the
    end of the block (a unit), then put back any previous handler and timer. Nestable; a no-op
    off the main thread."""

    __slots__ = ("_active",)

    def __enter__(self) -> None:
        self._active = _HAS_ITIMER and threading.get_ident() == threading.main_thread().ident
        if self._active:
            _CLOCK.depth += 1

    def __exit__(self, kind, value, traceback) -> None:
        if self._active:
            _CLOCK.depth -= 1
            if _CLOCK.depth == 0 and _CLOCK.installed and _CLOCK.deadline is None:
                _CLOCK.uninstall()


# The C-level setter: `signal.signal` converts handlers to and from enums, which cost more than
# the check itself when it runs around every (rule, source) pair. Same semantics otherwise.
_set_handler = getattr(_signal, "signal", signal.signal)
_HAS_ITIMER = hasattr(signal, "setitimer")
_SMALLEST_DELAY = 1e-5  # setitimer(0) would disarm the timer


class _AlarmClock:
    """The main thread's SIGALRM state while limits are in force: the deadline of the call
    running (None between calls) and when the armed timer fires (None when it is not armed)."""

    def __init__(self) -> None:
        self.depth = 0  # open unit_time_limits blocks
        self.installed = False
        self.deadline: float | None = None
        self.seconds = 0.0
        self.fires_at: float | None = None
        self.previous_handler: Any = None
        self.previous_delay = 0.0
        self.previous_interval = 0.0
        self.installed_at = 0.0

    def install(self) -> None:
        self.installed_at = time.monotonic()
        self.previous_handler = _set_handler(signal.SIGALRM, self.on_alarm)
        self.previous_delay, self.previous_interval = signal.setitimer(signal.ITIMER_REAL, 0)
        self.fires_at = None
        self.installed = True

    def uninstall(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _set_handler(signal.SIGALRM, self.previous_handler)
        self.installed = False
        self.fires_at = None
        self.previous_handler = None
        if self.previous_delay:
            elapsed = time.monotonic() - self.installed_at
            remaining = max(self.previous_delay - elapsed, 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, self.previous_interval)

    def start(self, seconds: float) -> None:
        """A limited call begins: its deadline is `seconds` from now."""
        deadline = time.monotonic() + seconds
        self.deadline = deadline
        self.seconds = seconds
        fires_at = self.fires_at
        if fires_at is None or fires_at > deadline:
            self.arm(seconds, deadline)

    def arm(self, delay: float, fires_at: float) -> None:
        self.fires_at = fires_at
        signal.setitimer(signal.ITIMER_REAL, max(delay, _SMALLEST_DELAY))

    def on_alarm(self, signum, frame) -> None:
        self.fires_at = None
        deadline = self.deadline
        if deadline is None:  # between calls: the next call arms the timer again
            return
        now = time.monotonic()
        if now < deadline:  # armed for an earlier call: wait for this one's deadline
            self.arm(deadline - now, deadline)
            return
        raise CustomCodeTimeout(self.seconds)


_CLOCK = _AlarmClock()  # one SIGALRM per process: its state is the process's too


@contextmanager
def _trace_limit(seconds: float):
    deadline = time.monotonic() + seconds
    previous = sys.gettrace()

    def tracer(frame, event, arg):
        if time.monotonic() > deadline:
            raise CustomCodeTimeout(seconds)
        return tracer

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


def names_used(source: str) -> set[str]:
    """Every identifier, imported module and string constant in `source` (for key decisions)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.alias):
            found.add(node.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.add(node.value)
    return found
