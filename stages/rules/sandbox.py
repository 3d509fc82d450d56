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


class CustomCodeTimeout(BaseException):
    """Custom code ran longer than `rules.timeout`.

    A BaseException, so that custom code's own `except Exception` cannot swallow it.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"custom code timed out after {seconds:g} s (rules.timeout)")
        self.seconds = seconds


@contextmanager
def time_limit(seconds: float | None):
    """Stop the Python code run inside after `seconds` by raising CustomCodeTimeout in it.

    On the main thread a SIGALRM interval timer does it (any previous handler and timer are put
    back); elsewhere (executor threads) a trace function checks a deadline at every line. Code
    stuck inside one long C call is only stopped when that call returns.
    """
    if not seconds or seconds <= 0:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        with _alarm_limit(seconds):
            yield
    else:
        with _trace_limit(seconds):
            yield


# The C-level setter: `signal.signal` converts handlers to and from enums, which cost more than
# the check itself when it runs around every (rule, source) pair. Same semantics otherwise.
_set_handler = getattr(_signal, "signal", signal.signal)


@contextmanager
def _alarm_limit(seconds: float):
    def on_alarm(signum, frame):
        raise CustomCodeTimeout(seconds)

    started = time.monotonic()
    previous_handler = _set_handler(signal.SIGALRM, on_alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _set_handler(signal.SIGALRM, previous_handler)
        if previous_delay:
            remaining = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)


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
