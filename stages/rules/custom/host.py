"""Custom code as the validating process sees it: a pool of worker processes, killed at the timeout.

Rule code (`func_str`) never runs in the driver or a Ray worker: it runs in worker processes
(worker.py) that this process starts on first need and keeps for its later calls, one per call in
flight (a process that validates with several threads gets several). A call waits `rules.timeout`
seconds for its reply; past that the worker is killed — whatever it was doing, a long C call
included — and the call fails with CustomCodeTimeout. A worker that dies, or sends back what is
not a reply, is dropped; the next call starts a fresh one, which is sent the index and the rule's
code again.

Each worker receives the project's index once (for `import res_store` / `import res_filter`) and
each rule's `func_str` once; arguments and results cross as described in crossing.py.
"""

from __future__ import annotations

import atexit
import os
import pickle
import subprocess
import sys
import threading
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.errors import StepFailed
from orchestrator.memory import paused_gc

from ..functions import record_reads
from ..sandbox import CustomCodeTimeout
from .crossing import MAX_REPLY_BYTES, PROTOCOL, dump_request, load_reply

#: Index messages kept ready to send (pickled once per process, sent to each new worker).
KEPT_INDEXES = 2


class CustomCodeError(Exception):
    """Custom code failed in its worker; the message reads after the function's name:
    `raised ValueError: …`, `returned int, not a list`, `ended its worker process (…)`."""


@dataclass(frozen=True)
class CustomCode:
    """A rule's `func_str`, as the workers know it."""

    key: str  # the rule's code key: the same source in the same rule is defined once per worker
    label: str
    source: str


def _worker_environment() -> dict[str, str]:
    """This process's environment, with its import path: a worker imports the same code."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isabs(p) and os.path.exists(p)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _start(command: list[str], fds: tuple[int, int]) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            command, pass_fds=fds, stdin=subprocess.DEVNULL, env=_worker_environment()
        )
    except OSError as exc:  # no processes or memory left: the machine's problem (exit 4)
        raise StepFailed(f"cannot start a worker process for custom code: {exc}") from None


class WorkerProcess:
    """One worker and the pipes to it; it knows which indexes and rules it was sent."""

    def __init__(self) -> None:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        death_signal = threading.current_thread() is threading.main_thread()
        try:
            self.process = _start(
                [
                    sys.executable,
                    "-m",
                    "stages.rules.custom.worker",
                    str(requests_read),
                    str(replies_write),
                    str(os.getpid()),
                    str(int(death_signal)),
                ],
                (requests_read, replies_write),
            )
        except BaseException:
            os.close(requests_write)
            os.close(replies_read)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self.requests = Connection(requests_write, readable=False)
        self.replies = Connection(replies_read, writable=False)
        self.views: set[str] = set()
        self.codes: set[tuple[str, str]] = set()
        self.alive = True

    def request(self, message: Any, timeout: float | None, frame: bytes | None = None) -> Any:
        """Send a request and wait for its reply (at most `timeout` seconds when given)."""
        sent: list[Any] = []
        if frame is None:
            frame, sent = dump_request(message)
        try:
            self.requests.send_bytes(frame)
            ready = self.replies.poll(timeout if timeout and timeout > 0 else None)
        except OSError:
            raise self._ended() from None
        if not ready:
            self.kill()
            raise CustomCodeTimeout(timeout or 0.0)
        try:
            data = self.replies.recv_bytes(MAX_REPLY_BYTES)
        except (EOFError, OSError):
            raise self._ended() from None
        try:
            reply = load_reply(data, sent)
        except Exception as exc:  # anything a rogue worker could send: refuse it, drop the worker
            self.kill()
            raise CustomCodeError(f"sent back an unreadable reply ({exc})") from None
        return _read_reply(reply)

    def _ended(self) -> CustomCodeError:
        self.kill()
        status = self.process.returncode
        how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
        return CustomCodeError(f"ended its worker process ({how})")

    def kill(self) -> None:
        if not self.alive:
            return
        self.alive = False
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.requests.close()
        self.replies.close()

    def close(self) -> None:
        """End the worker politely: it exits when its request pipe closes."""
        if not self.alive:
            return
        self.alive = False
        self.requests.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:  # busy in rule code: no need to wait for it
            self.process.kill()
            self.process.wait()
        self.replies.close()


def _read_reply(reply: Any) -> Any:
    if isinstance(reply, tuple) and reply:
        if reply[0] == "ok" and len(reply) == 2:
            return reply[1]
        if reply[0] == "ok" and len(reply) == 3 and isinstance(reply[2], dict):
            record_reads(
                {
                    str(path): digest if isinstance(digest, str) else None
                    for path, digest in reply[2].items()
                }
            )
            return reply[1]
        if reply[0] == "error" and len(reply) == 3:
            raise CustomCodeError(f"raised {reply[1]}: {reply[2]}")
        if reply[0] == "misbehaved" and len(reply) == 2:
            raise CustomCodeError(str(reply[1]))
    raise CustomCodeError("sent back something that is not a reply")


class CustomCodeHost:
    """This process's custom-code workers: idle ones are reused, one per call in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._busy: list[WorkerProcess] = []
        self._index_frames: dict[str, bytes] = {}

    def define(self, code: CustomCode, view: Any, timeout: float | None) -> list[str]:
        """Run a `func_str` once (when rules are loaded); the names of its functions."""
        with self._worker() as worker:
            self._send_index(worker, view)
            names = worker.request(("define", code.key, view.key, code.label, code.source), timeout)
            worker.codes.add((code.key, view.key))
        return list(names)

    def call(
        self, code: CustomCode, view: Any, name: str, role: str, kwargs: dict, timeout: float | None
    ) -> Any:
        """Call function `name` of a rule's `func_str` as a `filter` or a `condition`."""
        with self._worker() as worker:
            self._send_index(worker, view)
            if (code.key, view.key) not in worker.codes:
                worker.request(("define", code.key, view.key, code.label, code.source), timeout)
                worker.codes.add((code.key, view.key))
            return worker.request(("call", code.key, view.key, name, role, kwargs), timeout)

    def _send_index(self, worker: WorkerProcess, view: Any) -> None:
        if view.key in worker.views:
            return
        frame = self._index_frames.get(view.key)
        if frame is None:
            index = view.index if view.available else None
            with paused_gc():
                frame = pickle.dumps(("index", view.key, index, view.root), protocol=PROTOCOL)
            with self._lock:
                while len(self._index_frames) >= KEPT_INDEXES:
                    self._index_frames.pop(next(iter(self._index_frames)))
                self._index_frames[view.key] = frame
        worker.request(None, None, frame)
        worker.views.add(view.key)

    def _worker(self) -> _Lease:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = WorkerProcess()
        with self._lock:
            self._busy.append(worker)
        return _Lease(self, worker)

    def _give_back(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._busy.remove(worker)
            if worker.alive:
                self._idle.append(worker)

    def close(self) -> None:
        """End every worker (idle ones politely, busy ones at once)."""
        with self._lock:
            idle, busy = self._idle, self._busy
            self._idle, self._busy = [], []
        for worker in busy:
            worker.kill()
        for worker in idle:
            worker.close()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._idle + self._busy if w.alive]


class _Lease:
    def __init__(self, host: CustomCodeHost, worker: WorkerProcess) -> None:
        self.host = host
        self.worker = worker

    def __enter__(self) -> WorkerProcess:
        return self.worker

    def __exit__(self, kind, exc, trace) -> None:
        if kind is not None and not issubclass(kind, (CustomCodeError, CustomCodeTimeout)):
            # interrupted mid-request (Ctrl-C, a bug): the reply may still come; start afresh
            self.worker.kill()
        self.host._give_back(self.worker)


_HOST: CustomCodeHost | None = None
_HOST_LOCK = threading.Lock()


def custom_code_host() -> CustomCodeHost:
    """This process's host (started on first use, its workers ended at exit)."""
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = CustomCodeHost()
        return _HOST


def close_workers() -> None:
    """End this process's custom-code workers (a later call starts new ones)."""
    global _HOST
    with _HOST_LOCK:
        host, _HOST = _HOST, None
    if host is not None:
        host.close()


def _forget_after_fork() -> None:
    """A forked child does not own its parent's workers."""
    global _HOST
    _HOST = None


atexit.register(close_workers)
os.register_at_fork(after_in_child=_forget_after_fork)
