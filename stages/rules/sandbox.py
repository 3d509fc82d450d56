"""Running rule-supplied Python: `func_str` namespaces, `满足表达式` expressions, time limits.

Each rule's `func_str` runs in its own namespace whose builtins resolve `import res_store` and
`import res_filter` to the index's namespaces (nothing is added to `sys.modules`, so rules cannot
see each other's modules or functions). Compiled rules carry only the source text: a worker
compiles and runs it on first use and keeps the namespace for the rest of the process.

This is isolation between rules, not a security boundary: a build that does not trust its rule
files sets `rules.allow_custom_code: false`.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import builtins
import re
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


# -- func_str ------------------------------------------------------------------------------------


def _rule_builtins(res_store: Any, res_filter: Any) -> dict:
    """A copy of the builtins whose `__import__` knows the two predefined modules."""
    real_import = builtins.__import__

    def rule_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0:
            if name == "res_store":
                return res_store
            if name == "res_filter":
                return res_filter
        return real_import(name, globals, locals, fromlist, level)

    table = dict(vars(builtins))
    table["__import__"] = rule_import
    return table


def run_func_str(
    source: str, label: str, namespaces: tuple[Any, Any], timeout: float | None = None
) -> dict:
    """Compile and run a rule's `func_str` in a fresh namespace; return the namespace.

    Raises SyntaxError (does not compile), CustomCodeTimeout, or whatever the code raises.
    """
    code = compile(source, f"<func_str of {label}>", "exec")
    res_store, res_filter = namespaces
    namespace = {
        "__builtins__": _rule_builtins(res_store, res_filter),
        "__name__": f"orchestrate_rule_{re.sub(r'[^0-9A-Za-z_]', '_', label)}",
    }
    with time_limit(timeout):
        exec(code, namespace)
    return namespace


_NAMESPACES: dict[tuple[str, str], dict] = {}
_KEPT_INDEXES = 4  # namespaces hold the index's 1.x views: keep those of the last few indexes


def custom_namespace(
    rule_digest: str,
    source: str,
    label: str,
    view_key: str,
    namespaces_factory,
    timeout: float | None,
) -> dict:
    """The namespace of a rule's func_str in this process (run once per process and index)."""
    key = (rule_digest, view_key)
    namespace = _NAMESPACES.get(key)
    if namespace is None:
        namespace = run_func_str(source, label, namespaces_factory(), timeout)
        remember_namespace(rule_digest, view_key, namespace)
    return namespace


def remember_namespace(rule_digest: str, view_key: str, namespace: dict) -> None:
    """Keep a namespace the loader already ran, so this process does not run the code again."""
    _NAMESPACES.pop((rule_digest, view_key), None)
    _NAMESPACES[(rule_digest, view_key)] = namespace
    views = list(dict.fromkeys(key[1] for key in _NAMESPACES))
    for stale in views[:-_KEPT_INDEXES]:
        for key in [key for key in _NAMESPACES if key[1] == stale]:
            del _NAMESPACES[key]


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


# -- 满足表达式 ------------------------------------------------------------------------------------

EXPRESSION_NAMES = {
    "re": re,
    "len": len,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
    "list": list,
    "tuple": tuple,
    "dict": dict,
    "set": set,
    "any": any,
    "all": all,
    "min": min,
    "max": max,
    "abs": abs,
    "sum": sum,
    "sorted": sorted,
}

_EXPRESSIONS: dict[str, Any] = {}


def compile_expression(source: str):
    """The code object of an expression (cached per process; code objects do not pickle)."""
    code = _EXPRESSIONS.get(source)
    if code is None:
        code = _EXPRESSIONS[source] = compile(source, "<满足表达式>", "eval")
    return code


def expression_globals(namespaces: tuple[Any, Any]) -> dict:
    """Globals for an expression: `d` (set per value), the predefined modules, the allowed names."""
    res_store, res_filter = namespaces
    return {
        "__builtins__": {},
        **EXPRESSION_NAMES,
        "res_store": res_store,
        "res_filter": res_filter,
        "d": None,
    }
