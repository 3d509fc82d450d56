"""Custom code as the validating process sees it: a pool of worker processes, killed at the timeout.

Rule code (`func_str`) never runs in the driver or a Ray worker: it runs in worker processes
(worker.py) that this process starts on first need and keeps for its later calls, one per call in
flight (a process that validates with several threads gets several). A call waits `rules.timeout`
seconds for its reply; past that the worker is killed — whatever it was doing, a long C call
included — and the call fails with CustomCodeTimeout. A worker that dies, or sends back what is
not a reply, is dropped; the next call starts a fresh one, which is sent the index and the rule's
code again.

Each worker is contained (containment.py): a session of its own, whose whole process group is
killed when the worker is (at the timeout, when it dies, when the run ends); an environment and a
working folder of its own (the folder removed with the worker); the resource limits of
`rules.limits`. A worker that has used half its CPU time is replaced after its call.

Whose fault a failure is decides what it becomes. Rule code's own faults (it raised, it returned
what its role does not allow, it ended its process, it ran past the timeout or a limit) are the
rule's result for the source: CustomCodeError, CustomCodeTimeout. A failure of this product's code
— here, or in a worker (its "internal" answer), or a worker dying while it loads the index — is
an InternalError (exit 3): it ends the build, and no rule's result is stored for it.

Each worker receives the project's index once (for `import res_store` / `import res_filter`) and
each rule's `func_str` once; arguments and results cross as described in crossing.py.
"""

from __future__ import annotations

import atexit
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from orchestrator import (
    ConfigError,
    InternalError,
    OrchestrateError,
    StepFailed,
    __version__,
    paused_gc,
)

from ...sources.base import advanced_digests, differing_entries
from ..functions import StoredIndex, record_reads, view_key
from ..keyed_index import IndexEdit
from ..sandbox import CustomCodeTimeout
from .containment import (
    DEFAULT_LIMITS,
    WorkerLimits,
    make_working_folder,
    remove_working_folder,
    signal_described,
    worker_environment,
)
from .crossing import MAX_REPLY_BYTES, PROTOCOL, dump_request, load_reply
from .worker import KEPT_INDEXES as WORKER_KEPT_INDEXES

#: Index messages kept ready to send (pickled once per process, sent to each new worker).
KEPT_INDEXES = 2
#: A worker holding an earlier index is sent the entries that differ when they are at most this
#: many or a tenth of the index, whichever is more; more, and it is sent the index whole.
PATCHED_ENTRIES = 1000
#: Seconds a worker that closed its reply pipe, or was asked to end, has to end by itself (its
#: own exit status is then known) before its group is killed.
ENDING_SECONDS = 2.0


class CustomCodeError(Exception):
    """Custom code failed in its worker; the message reads after the function's name:
    `raised ValueError: …`, `returned int, not a list`, `ended its worker process (…)`."""


@dataclass(frozen=True)
class CustomCode:
    """A rule's `func_str`, as the workers know it."""

    key: str  # the rule's code key: the same source in the same rule is defined once per worker
    label: str
    source: str


def _start(command: list[str], fds: tuple[int, int], folder: str) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            command,
            pass_fds=fds,
            stdin=subprocess.DEVNULL,
            env=worker_environment(folder),
            cwd=folder,
            start_new_session=True,  # its group is what rule code starts: killed as one
        )
    except OSError as exc:  # no processes or memory left: the machine's problem (exit 4)
        raise StepFailed(f"cannot start a worker process for custom code: {exc}") from None


@contextmanager
def _own_code(doing: str) -> Iterator[None]:
    """This product's code failing while `doing`: an InternalError, never a rule's result."""
    try:
        yield
    except (OrchestrateError, CustomCodeError, CustomCodeTimeout):
        raise
    except Exception as exc:
        raise InternalError(
            f"internal error (a bug in orchestrate {__version__}, not in the rule) while "
            f"{doing}: {type(exc).__name__}: {exc}"
        ) from exc


class WorkerProcess:
    """One worker and the pipes to it; it knows which indexes and rules it was sent."""

    def __init__(self, limits: WorkerLimits) -> None:
        self.limits = limits
        self.folder = make_working_folder()
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
                    *limits.as_arguments(),
                ],
                (requests_read, replies_write),
                self.folder,
            )
        except BaseException:
            os.close(requests_write)
            os.close(replies_read)
            remove_working_folder(self.folder)
            raise
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self.requests = Connection(requests_write, readable=False)
        self.replies = Connection(replies_read, writable=False)
        # The indexes it holds, oldest first: it keeps as many as worker.KEPT_INDEXES says
        self.views: dict[str, None] = {}
        self.codes: set[tuple[str, str]] = set()
        self.alive = True
        self.worn_out = False  # has used half its CPU time: replaced after this call
        self.loading = False  # an index was sent ahead (`send`) and its reply not read yet

    def held(self, view_key: str) -> None:
        """The worker was sent index `view_key`: it forgets its oldest past what it keeps."""
        self.views[view_key] = None
        while len(self.views) > WORKER_KEPT_INDEXES:
            gone = next(iter(self.views))
            del self.views[gone]
            self.codes = {code for code in self.codes if code[1] != gone}  # its rules with it

    def request(self, message: Any, timeout: float | None, frame: bytes | None = None) -> Any:
        """Send a request and wait for its reply (at most `timeout` seconds when given)."""
        sent: list[Any] = []
        if frame is None:
            with _own_code("sending a request to a custom-code worker"):
                request = dump_request(message)
                frame, sent = request.frame, request.elements
        self.send(frame)
        return self.reply(timeout, sent)

    def send(self, frame: bytes) -> None:
        """Send a request's frame; its reply is read by `reply`."""
        try:
            self.requests.send_bytes(frame)
        except OSError:
            raise self._ended() from None

    def reply(self, timeout: float | None, sent: list[Any] | None = None) -> Any:
        """Wait for the reply to the request sent last (at most `timeout` seconds when given)."""
        try:
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
            body, cpu_used = load_reply(data, sent or [])
            if type(cpu_used) is not float:
                raise ValueError("no CPU time")
        except Exception as exc:  # anything a rogue worker could send: refuse it, drop the worker
            self.kill()
            raise CustomCodeError(f"sent back an unreadable reply ({exc})") from None
        self.worn_out = self.limits.worn_out(cpu_used)
        return _read_reply(body, self.limits)

    def _ended(self) -> CustomCodeError:
        status = self._end(ENDING_SECONDS)
        how = signal_described(-status, self.limits) if status < 0 else f"exit status {status}"
        return CustomCodeError(f"ended its worker process ({how})")

    def kill(self) -> None:
        """End the worker and its group now."""
        self._end(0.0)

    def close(self) -> None:
        """End the worker politely (it exits when its request pipe closes), then its group."""
        if self.alive:
            self.requests.close()
            self._end(ENDING_SECONDS)

    def _end(self, grace: float) -> int:
        """Give the worker `grace` seconds to end by itself, kill its group (the worker, if still
        there, and whatever rule code started), reap it and remove its folder; its exit status.

        The group is killed before the worker is reaped: until then no other process can be
        given its number, so the signal reaches this worker's group and no other."""
        if not self.alive:
            return self.process.returncode or 0
        self.alive = False
        pid = self.process.pid
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    break
            except ChildProcessError:  # reaped already (not by this code): nothing to wait for
                break
            time.sleep(0.01)
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        status = self.process.wait()
        self.requests.close()
        self.replies.close()
        remove_working_folder(self.folder)
        return status


def _encoded_entries(view: Any) -> list[tuple[str, bytes]] | None:
    """The stored index's entries as the build state holds them (codec bytes, checked
    against their digests) when it is stored by entry and this process has not decoded it: a
    worker decodes them in one pass, where decoding here and pickling the index would cost
    twice that (a one-off run at 100,000 resources). None: send the index itself."""
    stored = view.stored
    if not view.available or not isinstance(stored, StoredIndex) or stored.entries is None:
        return None
    return None if stored.loaded else stored.entries.encoded_items()


def _edit_of(view: Any) -> IndexEdit | None:
    """How `view`'s index differs from the one the stage last ran with, when it says so."""
    stored = view.stored
    if not view.available or not isinstance(stored, StoredIndex) or stored.entries is None:
        return None
    return stored.edit


def _entry_digests(view: Any) -> dict[str, str] | None:
    """The digests of the entries `view`'s index is stored as (None: it is not stored by entry,
    or not available to rule code)."""
    stored = view.stored
    if not view.available or not isinstance(stored, StoredIndex) or stored.entries is None:
        return None
    return stored.entries.digests()


_LIMITS = ("memory", "file_size")  # the limits a worker may name in an answer


def _read_reply(body: Any, limits: WorkerLimits) -> Any:
    if isinstance(body, tuple) and body:
        if body[0] == "ok" and len(body) == 2:
            return body[1]
        if body[0] == "ok" and len(body) == 3 and isinstance(body[2], dict):
            record_reads(
                {
                    str(path): digest if isinstance(digest, str) else None
                    for path, digest in body[2].items()
                }
            )
            return body[1]
        if body[0] == "error" and len(body) == 4:
            _, kind, message, limit = body
            over = ""
            if limit in _LIMITS and getattr(limits, limit) is not None:
                over = f" (over {limits.named(limit)})"
            raise CustomCodeError(f"raised {kind}{f': {message}' if message else ''}{over}")
        if body[0] == "misbehaved" and len(body) == 2:
            raise CustomCodeError(str(body[1]))
        if body[0] == "internal" and len(body) == 3:
            raise _internal_error(str(body[1]), body[2], limits)
    raise CustomCodeError("sent back something that is not a reply")


def _internal_error(description: str, limit: Any, limits: WorkerLimits) -> OrchestrateError:
    """A worker's own code failed: a bug, or a memory limit too small for the index."""
    if limit == "memory" and limits.memory is not None:
        return ConfigError(
            f"{limits.named('memory')} is too small for a custom-code worker to hold the "
            f"project's index ({description.splitlines()[0]}): raise it",
            key="rules.limits.memory",
        )
    return InternalError(
        f"internal error (a bug in orchestrate {__version__}, not in the rule) in a "
        f"custom-code worker: {description}"
    )


class CustomCodeHost:
    """This process's custom-code workers: idle ones are reused, one per call in flight; each
    started under the limits in force when it started (`limits`, set by `use_limits`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[WorkerProcess] = []
        self._busy: list[WorkerProcess] = []
        self._index_frames: dict[str, bytes] = {}
        # view key → its index's entry digests: what a worker holding it is sent a patch against
        self._index_digests: dict[str, dict[str, str]] = {}
        self._patching = False  # the builds are resident: keep what patches are made against
        self.limits = DEFAULT_LIMITS

    def define(self, code: CustomCode, view: Any, timeout: float | None) -> list[str]:
        """Run a `func_str` once (when rules are loaded); the names of its functions.

        It is run first without the index (a worker need not be sent one for rules whose units
        all come from the cache); only if its top level touched res_store or res_filter is it
        run again with the index, as it will be when called."""
        with self._worker() as worker:
            names = worker.request(("names", code.label, code.source), timeout)
            if names is None:
                self._send_index(worker, view)
                names = worker.request(
                    ("define", code.key, view.key, code.label, code.source), timeout
                )
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

    def preload(self, view: Any) -> None:
        """Send a worker `view`'s index now without waiting for it to load: a build that will
        call custom code reading the index (an index edit re-runs it) goes on while the worker
        decodes it, on another core. The call that comes later leases that worker (the last
        given back) and finds the index loaded. A worker that fails here is dropped: the call
        starts another and says what went wrong."""
        with self._lock:
            if any(view.key in worker.views for worker in self._idle):
                return
        with self._worker() as worker:
            frame = self._patch_frame(worker, view) or self._index_frame(view)
            try:
                worker.send(frame)
            except CustomCodeError:
                worker.kill()
                return
            worker.loading = True
            worker.held(view.key)

    def _send_index(self, worker: WorkerProcess, view: Any) -> None:
        if view.key in worker.views:
            return
        frame = self._patch_frame(worker, view) or self._index_frame(view)
        try:
            worker.send(frame)
        except CustomCodeError as exc:
            raise _load_failed(exc) from None
        worker.loading = True
        self._loaded(worker)
        worker.held(view.key)

    @staticmethod
    def _loaded(worker: WorkerProcess) -> None:
        """Wait until the index sent to the worker (now, or ahead by `preload`) is loaded."""
        if not worker.loading:
            return
        try:
            worker.reply(None)
        except CustomCodeError as exc:
            raise _load_failed(exc) from None
        finally:
            worker.loading = False

    def _index_frame(self, view: Any) -> bytes:
        """The index whole, pickled once per process for every worker that needs it."""
        frame = self._index_frames.get(view.key)
        if frame is None:
            with paused_gc(), _own_code("preparing the index for custom-code workers"):
                encoded = _encoded_entries(view)
                if encoded is not None:  # decoded by the worker alone, not here first
                    message: tuple = ("encoded", view.key, encoded, view.root)
                else:
                    index = view.stored if view.available else None  # the worker roots it
                    message = ("index", view.key, index, view.root)
                frame = pickle.dumps(message, protocol=PROTOCOL)
                digests = _entry_digests(view) if self._patching else None
            with self._lock:
                while len(self._index_frames) >= KEPT_INDEXES:
                    self._index_frames.pop(next(iter(self._index_frames)))
                self._index_frames[view.key] = frame
            if digests is not None:
                self._remember_digests(view.key, digests)
        return frame

    def _patch_frame(self, worker: WorkerProcess, view: Any) -> bytes | None:
        """The entries by which `view`'s index differs from one the worker holds, when it holds
        one whose entries this process knows and few differ (a resident build after an edit:
        the index is sent whole once, then patched); None: send it whole."""
        with self._lock:
            bases = [key for key in worker.views if key in self._index_digests]
        if not bases or not self._patching:
            return None
        with paused_gc(), _own_code("preparing an index patch for custom-code workers"):
            edit = _edit_of(view)
            base = view_key(edit.base, view.root) if edit is not None else None
            if edit is not None and base in bases:  # the stage names the entries changed since
                digests, changed, removed = advanced_digests(
                    self._index_digests[base], view.stored.entries, edit.keys
                )
                differing: tuple[list[str], list[str]] | None = (changed, removed)
            else:
                found = _entry_digests(view)
                if found is None:
                    return None
                digests, base = found, bases[-1]
                differing = differing_entries(self._index_digests[base], digests, math.inf)
            most = max(PATCHED_ENTRIES, len(digests) // 10)
            if differing is None or sum(map(len, differing)) > most:
                return None
            changed, removed = differing
            entries = view.stored.entries
            frame = pickle.dumps(
                ("patch", view.key, base, {key: entries[key] for key in changed}, removed),
                protocol=PROTOCOL,
            )
        self._remember_digests(view.key, digests)
        return frame

    def _remember_digests(self, view_key: str, digests: dict[str, str]) -> None:
        """What a worker holding `view_key` is sent a patch against (the latest few)."""
        with self._lock:
            self._index_digests[view_key] = digests
            while len(self._index_digests) > KEPT_INDEXES + 1:
                self._index_digests.pop(next(iter(self._index_digests)))

    def patch_indexes(self, resident: bool) -> None:
        """Whether the builds are resident (orchestrate watch): the entry digests of each index
        sent are kept, so that a worker holding it is later sent a patch (reading them costs a
        pass over the index's rows, which a one-off build would pay for nothing)."""
        self._patching = resident

    def use_limits(self, limits: WorkerLimits) -> None:
        """Start workers under `limits` from now on; idle ones started under others end."""
        with self._lock:
            self.limits = limits
            stale = [worker for worker in self._idle if worker.limits != limits]
            self._idle = [worker for worker in self._idle if worker.limits == limits]
        for worker in stale:
            worker.close()

    def _worker(self) -> _Lease:
        with self._lock:
            limits = self.limits
            worker = self._idle.pop() if self._idle else None
        if worker is None:
            worker = WorkerProcess(limits)
        with self._lock:
            self._busy.append(worker)
        return _Lease(self, worker)

    def _give_back(self, worker: WorkerProcess) -> None:
        with self._lock:
            self._busy.remove(worker)
            keep = worker.alive and not worker.worn_out and worker.limits == self.limits
            if keep:
                self._idle.append(worker)
        if not keep:
            worker.close()

    def close(self) -> None:
        """End every worker (idle ones politely, busy ones at once), each with its group."""
        with self._lock:
            idle, busy = self._idle, self._busy
            self._idle, self._busy = [], []
        for worker in busy:
            worker.kill()
        for worker in idle:  # one still loading an index sent ahead is not waited for
            worker.kill() if worker.loading else worker.close()

    def worker_pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._idle + self._busy if w.alive]


def _load_failed(exc: CustomCodeError) -> InternalError:
    """No rule code runs while a worker loads the index: its failure is this product's."""
    return InternalError(
        f"internal error (a bug in orchestrate {__version__}, not in a rule): while a "
        f"custom-code worker loaded the project's index, it {exc}"
    )


class _Lease:
    def __init__(self, host: CustomCodeHost, worker: WorkerProcess) -> None:
        self.host = host
        self.worker = worker

    def __enter__(self) -> WorkerProcess:
        try:
            self.host._loaded(self.worker)  # an index sent ahead: its reply comes first
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
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


def use_limits(limits: WorkerLimits) -> None:
    """`rules.limits` for this process's custom-code workers from now on (until close_workers)."""
    custom_code_host().use_limits(limits)


def patch_indexes(resident: bool) -> None:
    """Whether this process's builds are resident (CustomCodeHost.patch_indexes)."""
    custom_code_host().patch_indexes(resident)


def preload_index(view: Any) -> None:
    """Send this process's next custom-code call's worker `view`'s index ahead
    (CustomCodeHost.preload)."""
    custom_code_host().preload(view)


def close_workers() -> None:
    """End this process's custom-code workers, each with its group (a later call starts new
    ones, under the default limits until `use_limits`)."""
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
