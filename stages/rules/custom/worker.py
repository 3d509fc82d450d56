"""A custom-code worker: runs rules' `func_str` for the process that started it (host.py).

Started as `python -m stages.rules.custom.worker IN_FD OUT_FD PARENT_PID DEATH_SIGNAL MEMORY
FILE_SIZE CPU_SECONDS`, in a session of its own, its environment and working folder made by
containment.py; it sets its resource limits (the last three arguments, `rules.limits`) before
anything else. Requests arrive on IN_FD, replies leave on OUT_FD (length-prefixed frames,
crossing.py). Standard output is standard error here, so a `print` in rule code cannot garble a
reply. Ctrl-C is left to the validating process, which ends its workers; a worker also ends,
with every process of its group, when that process does.

Requests and their answers (`body` below):
- `("index", view_key, index or None, root)`: the index behind `import res_store` / `res_filter`
  → `("ok", None)`;
- `("encoded", view_key, [(key, codec bytes)], root)`: the same index as its stored entries in
  key order, each as the build state keeps it (orchestrator.codec), decoded here → `("ok", None)`;
- `("patch", view_key, base_key, changed entries by key, removed keys)`: the index of `base_key`
  (one sent before, stored by entry: sources/base.py `index_entries`) with those entries changed
  and removed, held as `view_key` → `("ok", None)`;
- `("names", label, source)`: run a `func_str` in a fresh namespace without an index → `("ok",
  [names of its functions])`, or `("ok", None)` when its top level touched res_store or
  res_filter (which raise IndexNeeded then);
- `("define", code_key, view_key, label, source)`: run a `func_str` in a fresh namespace
  → `("ok", [names of its functions])`;
- `("call", code_key, view_key, name, role, kwargs)`: call one of them (role `filter` or
  `condition`) → `("ok", result as plain data, files read through res_filter's functions)`;
- `("error", exception type, message, limit or None)` when the rule code raised (SystemExit
  included; `limit` names the `rules.limits` key it reached: a MemoryError, a write too large),
  and `("misbehaved", message)` when a function returned what its role does not allow;
- `("internal", description, limit or None)` when this worker's own code failed: a bug, never
  a rule's result (or a `memory` limit too small to load the index).
Each reply is `(body, CPU seconds this worker has used)`, so the validating process can replace
a worker before it reaches `rules.limits.cpu_seconds`.

Each rule's namespace is its own, and its builtins' `__import__` knows the two index modules
without adding them to `sys.modules`, so rules cannot see each other's modules or functions.
"""

from __future__ import annotations

import builtins
import os
import re
import signal
import sys
import threading
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

from orchestrator import paused_gc

from ..functions import RuleModules
from .containment import WorkerLimits, apply_limits, limit_hit_by
from .crossing import dump_reply, load_request, to_plain

KEPT_INDEXES = 2  # a worker serves one build at a time; the previous index may still be asked for


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


def run_func_str(source: str, label: str, modules: RuleModules) -> dict:
    """Compile and run a rule's `func_str` in a fresh namespace; return the namespace."""
    code = compile(source, f"<func_str of {label}>", "exec")
    namespace = {
        "__builtins__": _rule_builtins(modules.res_store, modules.res_filter),
        "__name__": f"orchestrate_rule_{re.sub(r'[^0-9A-Za-z_]', '_', label)}",
    }
    exec(code, namespace)
    return namespace


class WorkerState:
    """The indexes and rule namespaces this worker holds."""

    def __init__(self) -> None:
        self.views: dict[str, RuleModules] = {}
        self.indexes: dict[str, Any] = {}  # the index behind each view, as it was sent
        self.roots: dict[str, str] = {}
        self.namespaces: dict[tuple[str, str], dict] = {}

    def handle(self, message: tuple) -> tuple:
        """The answer's body; raises only on this worker's own failures (rule code's are
        answers: `_raised`)."""
        kind = message[0]
        if kind == "index":
            self._index(*message[1:])
            return ("ok", None)
        if kind == "encoded":
            self._encoded(*message[1:])
            return ("ok", None)
        if kind == "patch":
            self._patch(*message[1:])
            return ("ok", None)
        if kind == "names":
            return self._names(*message[1:])
        if kind == "define":
            return self._define(*message[1:])
        if kind == "call":
            return self._call(*message[1:])
        raise ValueError(f"unknown request {kind!r}")

    def _index(self, view_key: str, index: Any, root: str) -> None:
        from ..functions import IndexView

        if len(self.views) >= KEPT_INDEXES:
            stale = next(iter(self.views))
            del self.views[stale]
            self.indexes.pop(stale, None)
            self.roots.pop(stale, None)
            for key in [key for key in self.namespaces if key[1] == stale]:
                del self.namespaces[key]
        self.views[view_key] = IndexView(index, root, view_key).namespaces()
        self.indexes[view_key] = index
        self.roots[view_key] = root

    def _encoded(self, view_key: str, entries: list, root: str) -> None:
        """The index whose entries (sources/base.py `index_entries`) these codec bytes are."""
        from ...sources.base import index_of_encoded

        self._index(view_key, index_of_encoded(entries), root)

    def _patch(self, view_key: str, base_key: str, changed: dict, removed: list) -> None:
        """The index of `base_key` with entries changed and removed, held as `view_key`."""
        from ...sources.base import patched_index

        index = patched_index(self.indexes[base_key], changed, removed)
        self._index(view_key, index, self.roots[base_key])

    def _names(self, label: str, source: str) -> tuple:
        """The names a `func_str` defines, learned without an index: None when its top level
        touched res_store or res_filter (it is then defined with the index)."""
        touched: list[str] = []
        absent = RuleModules(
            _AbsentIndex("res_store", touched), _AbsentIndex("res_filter", touched)
        )
        try:
            namespace = run_func_str(source, label, absent)
        except BaseException as exc:  # rule code's SystemExit and KeyboardInterrupt included
            return ("ok", None) if touched else _raised(exc)
        if touched:  # whatever it did with the error it was given, it needs the index
            return ("ok", None)
        return ("ok", _function_names(namespace))

    def _define(self, code_key: str, view_key: str, label: str, source: str) -> tuple:
        modules = self.views[view_key]
        try:
            namespace = run_func_str(source, label, modules)
            names = _function_names(namespace)
        except BaseException as exc:  # rule code's SystemExit and KeyboardInterrupt included
            return _raised(exc)
        self.namespaces[(code_key, view_key)] = namespace
        return ("ok", names)

    def _call(self, code_key: str, view_key: str, name: str, role: str, kwargs: dict) -> tuple:
        from orchestrator import Reader

        from ..functions import reading_for

        namespace = self.namespaces[(code_key, view_key)]
        # What res_filter's functions read for this call goes back with the reply: it belongs
        # to the trace of the unit that called.
        reader = Reader(self.roots.get(view_key, "/"))
        with reading_for(reader):
            try:
                result = namespace[name](**kwargs)
                if role == "filter" and not isinstance(result, (list, tuple)):
                    return ("misbehaved", f"returned {type(result).__name__}, not a list")
                if role == "condition" and not (
                    result is None or isinstance(result, (bool, str, list, tuple))
                ):
                    return (
                        "misbehaved",
                        f"returned {type(result).__name__}, not a list of failing values",
                    )
                plain = to_plain(result)  # runs rule code too: its objects' __str__
            except BaseException as exc:
                return _raised(exc)
        return ("ok", plain, dict(reader.reads))


def _function_names(namespace: dict) -> list[str]:
    return sorted(
        name for name, value in namespace.items() if callable(value) and not name.startswith("__")
    )


class IndexNeeded(BaseException):
    """Raised into a func_str's top level run without an index when it reads the index (not
    an Exception, so that `except Exception` in rule code does not take it)."""


class _AbsentIndex:
    """res_store or res_filter while a func_str's names are learned without the index: any use
    of it is noted, and raises IndexNeeded."""

    def __init__(self, name: str, touched: list[str]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_touched", touched)

    def _touch(self, *_args: Any, **_kwargs: Any) -> Any:
        name = object.__getattribute__(self, "_name")
        object.__getattribute__(self, "_touched").append(name)
        raise IndexNeeded(name)

    def __getattribute__(self, attribute: str) -> Any:
        return object.__getattribute__(self, "_touch")()

    __setattr__ = __delattr__ = __iter__ = __len__ = __contains__ = __getitem__ = _touch
    __bool__ = __eq__ = __hash__ = __str__ = __repr__ = __dir__ = _touch  # not callable: no name


def _raised(exc: BaseException) -> tuple:
    """The answer when rule code raised `exc`."""
    return ("error", type(exc).__name__, _describe(exc), limit_hit_by(exc))


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"{exc.msg} (line {exc.lineno})"
    return str(exc)


def answer(state: WorkerState, data: bytes) -> bytes:
    """The reply to one request. Rule code's faults are answers (`_raised`); anything else that
    fails here is this worker's own code failing: an "internal" answer naming where, except that
    memory running out while a rule's code is defined or called is that rule's (its data and
    results take it)."""
    kind = None
    try:
        with paused_gc():  # an index message is a burst of acyclic containers
            received = load_request(data)  # its elements alive until the reply is made
        message = received.message
        kind = message[0] if isinstance(message, tuple) and message else None
        return dump_reply((state.handle(message), time.process_time()), received.given)
    except BaseException as exc:
        if isinstance(exc, MemoryError) and kind in ("define", "call"):
            body: tuple = ("error", "MemoryError", "out of memory", "memory")
        else:
            body = ("internal", _fault(exc), limit_hit_by(exc))
        return dump_reply((body, time.process_time()), {})


def _fault(exc: BaseException) -> str:
    """`OverflowError: … (stages/rules/custom/crossing.py:42, in element_from)`, then the trace."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        parts = last.filename.replace(os.sep, "/").split("/")
        short = "/".join(parts[parts.index("stages") :]) if "stages" in parts else last.filename
        where = f" ({short}:{last.lineno}, in {last.name})"
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return f"{type(exc).__name__}: {exc}{where}\n{trace.rstrip()}"


def serve(requests: Connection, replies: Connection) -> None:
    """Answer requests until the validating process closes its end."""
    state = WorkerState()
    while True:
        try:
            data = requests.recv_bytes()
        except (EOFError, OSError):
            return
        replies.send_bytes(answer(state, data))


def _end_group(*_signal: Any) -> None:
    """End this worker and every process of its group (what rule code started): the worker
    leads its own group (host.py starts it in a session of its own); otherwise only itself."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(0)


def _end_with_parent(parent: int, death_signal: bool) -> None:
    """End, with every process of the group, when the validating process does.

    Linux's parent-death signal (SIGTERM here, whose handler ends the group) is tied to the thread
    that started the worker, so it is asked for only when that was a main thread; a watchdog
    thread covers the rest. Rule code that holds the interpreter inside one C call delays both
    until the call returns (its CPU time is bounded by `rules.limits.cpu_seconds`)."""
    signal.signal(signal.SIGTERM, _end_group)
    if death_signal:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not Linux
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        _end_group()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        _end_group()

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv: list[str]) -> None:
    requests_fd, replies_fd, parent, death_signal = (int(arg) for arg in argv[:4])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent(parent, bool(death_signal))
    os.dup2(2, 1)  # rule code's prints go to standard error, never into a reply
    sys.stdout = sys.stderr
    # Once the worker has started (its watchdog thread included), before any rule code runs.
    apply_limits(WorkerLimits.from_arguments(argv[4:]))
    serve(Connection(requests_fd, writable=False), Connection(replies_fd, readable=False))
    # Nothing here needs tearing down (the index, rule state): ending at once spares the
    # validating process, which waits for its workers to end, the interpreter's teardown of a
    # large heap (0.12 s of `orchestrate validate` at 10,000 resources). What rule code started
    # is ended by that process, which kills the group once this worker has ended.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
