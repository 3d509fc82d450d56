"""A custom-code worker: runs rules' `func_str` for the process that started it (host.py).

Started as `python -m stages.rules.custom.worker IN_FD OUT_FD PARENT_PID DEATH_SIGNAL`; requests arrive on
IN_FD, replies leave on OUT_FD (length-prefixed frames, crossing.py). Standard output is standard
error here, so a `print` in rule code cannot garble a reply. Ctrl-C is left to the validating
process, which ends its workers; a worker also ends when that process does.

Requests and replies:
- `("index", view_key, index or None, root)`: the index behind `import res_store` / `res_filter`
  → `("ok", None)`;
- `("define", code_key, view_key, label, source)`: run a `func_str` in a fresh namespace
  → `("ok", [names of its functions])`;
- `("call", code_key, view_key, name, role, kwargs)`: call one of them (role `filter` or
  `condition`) → `("ok", result as plain data, files read through res_filter's functions)`;
- or `("error", exception type, message)` when the code raised (SystemExit included), and
  `("misbehaved", message)` when a function returned what its role does not allow.

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
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.memory import paused_gc

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


def run_func_str(source: str, label: str, namespaces: tuple[Any, Any]) -> dict:
    """Compile and run a rule's `func_str` in a fresh namespace; return the namespace."""
    code = compile(source, f"<func_str of {label}>", "exec")
    res_store, res_filter = namespaces
    namespace = {
        "__builtins__": _rule_builtins(res_store, res_filter),
        "__name__": f"orchestrate_rule_{re.sub(r'[^0-9A-Za-z_]', '_', label)}",
    }
    exec(code, namespace)
    return namespace


class WorkerState:
    """The indexes and rule namespaces this worker holds."""

    def __init__(self) -> None:
        self.views: dict[str, tuple[Any, Any]] = {}
        self.roots: dict[str, str] = {}
        self.namespaces: dict[tuple[str, str], dict] = {}

    def handle(self, message: tuple) -> tuple:
        kind = message[0]
        if kind == "index":
            self._index(*message[1:])
            return ("ok", None)
        if kind == "define":
            return ("ok", self._define(*message[1:]))
        if kind == "call":
            return self._call(*message[1:])
        return ("error", "ValueError", f"unknown request {kind!r}")

    def _index(self, view_key: str, index: Any, root: str) -> None:
        from ..functions import IndexView

        if len(self.views) >= KEPT_INDEXES:
            stale = next(iter(self.views))
            del self.views[stale]
            for key in [key for key in self.namespaces if key[1] == stale]:
                del self.namespaces[key]
        self.views[view_key] = IndexView(index, root, view_key).namespaces()
        self.roots[view_key] = root

    def _define(self, code_key: str, view_key: str, label: str, source: str) -> list[str]:
        namespace = run_func_str(source, label, self.views[view_key])
        self.namespaces[(code_key, view_key)] = namespace
        return sorted(
            name
            for name, value in namespace.items()
            if callable(value) and not name.startswith("__")
        )

    def _call(self, code_key: str, view_key: str, name: str, role: str, kwargs: dict) -> tuple:
        from orchestrator.reads import Reader

        from ..functions import reading_for

        # What res_filter's functions read for this call goes back with the reply: it belongs
        # to the trace of the unit that called.
        reader = Reader(self.roots.get(view_key, "/"))
        with reading_for(reader):
            result = self.namespaces[(code_key, view_key)][name](**kwargs)
        if role == "filter" and not isinstance(result, (list, tuple)):
            return ("misbehaved", f"returned {type(result).__name__}, not a list")
        if role == "condition" and not (
            result is None or isinstance(result, (bool, str, list, tuple))
        ):
            return (
                "misbehaved",
                f"returned {type(result).__name__}, not a list of failing values",
            )
        return ("ok", to_plain(result), dict(reader.reads))


def serve(requests: Connection, replies: Connection) -> None:
    """Answer requests until the validating process closes its end."""
    state = WorkerState()
    while True:
        try:
            data = requests.recv_bytes()
        except (EOFError, OSError):
            return
        with paused_gc():  # an index message is a burst of acyclic containers
            message, given, _alive = load_request(data)
        try:
            reply = state.handle(message)
        except BaseException as exc:  # rule code's SystemExit and KeyboardInterrupt included
            reply = ("error", type(exc).__name__, _describe(exc))
        try:
            frame = dump_reply(reply, given)
        except BaseException as exc:
            frame = dump_reply(
                ("error", type(exc).__name__, f"the result cannot be sent back: {exc}"), {}
            )
        replies.send_bytes(frame)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        return f"{exc.msg} (line {exc.lineno})"
    return str(exc)


def _end_with_parent(parent: int, death_signal: bool) -> None:
    """End when the validating process does, even in the middle of a long call.

    Linux's parent-death signal is tied to the thread that started the worker, so it is asked for
    only when that was a main thread; a watchdog thread covers the rest (rule code that holds the
    interpreter inside one C call is then ended when the call returns, by the closed pipe)."""
    if death_signal:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # not Linux
            pass
    if os.getppid() != parent:  # it died before the line above took effect
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv: list[str]) -> None:
    requests_fd, replies_fd, parent, death_signal = (int(arg) for arg in argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with_parent(parent, bool(death_signal))
    os.dup2(2, 1)  # rule code's prints go to standard error, never into a reply
    sys.stdout = sys.stderr
    serve(Connection(requests_fd, writable=False), Connection(replies_fd, readable=False))
    # Nothing here needs tearing down (the index, rule state): ending at once spares the
    # validating process, which waits for its workers to end, the interpreter's teardown of a
    # large heap (0.12 s of `orchestrate validate` at 10,000 resources).
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
