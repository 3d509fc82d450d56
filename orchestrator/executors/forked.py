"""The local executor on more than one core: the driver runs units and so do forked helpers.

`auto` runs work too small for Ray in the driver (pool.py): on two cores that measured faster
than a local Ray at every size, because a Ray worker must be sent its inputs and must send back
what it made, where the driver already holds them. But it used one core: an index edit at
100,000 resources re-checks six parts of the repositories one after another. A helper forked
from the driver (a snapshot of it: the plan's shared inputs, the parsed rules, the index, all
shared copy-on-write) runs units too, stores what each makes in the cache folder as a Ray
worker does (cache/workers.py: its own pack, blobs checked by digest on every read), and sends
back each unit's `Finished` record with the digests. Units are claimed one at a time from a
shared counter, in the order given, so the helpers and the driver finish together.

A unit marked `pinned` runs in the driver: it uses what the plan prepared in this very process
(validate's custom-code worker already holding the index). A helper that dies leaves its units
to the driver: a unit it claimed and did not report runs again here, as units are pure.
Custom-code workers a helper started (stages/rules/custom) end with it: their requests end.

A helper is a copy of the process, so what the driver holds open must not be shared with it:
connections to the build state and the action cache are opened afresh in a helper (cache/db.py
forgets them at fork), and no helper is forked while the cache talks to a server (its pooled
connections), while a dry run's state is uncommitted (a helper would not see it) or while Ray
runs in this process (its threads do not survive a fork); nor while another thread runs that
is not marked `fork_safe` (a lock it holds, stderr's say, would stay held in the copy:
`orchestrate watch`, with its watcher thread, runs its units in the driver alone).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import queue
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..cache.db import fork_hazard
from ..errors import InternalError
from . import Finished, StoreTarget, WorkItem, run_item, store_results, worker_label
from .local import LocalExecutor

_LENGTH = struct.Struct("<q")  # a report's frame: its length, then (index, Finished) pickled


class ForkedExecutor(LocalExecutor):
    """Runs units in the driver and in `helpers` forked copies of it."""

    in_driver = False  # helpers store what they make (the driver: what it ran itself)

    def __init__(self, *args: Any, helpers: int = 1, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.helpers = helpers

    def execute(
        self,
        fn: Callable,
        items: list[WorkItem],
        shared: Any,
        store: StoreTarget | None = None,
    ) -> Iterator[Finished]:
        free = [item for item in items if not item.pinned]
        if self.helpers < 1 or len(free) < 2 or not can_fork():
            yield from super().execute(fn, items, shared, store)
            return
        yield from _Helpers(self, fn, free, shared, store).run([i for i in items if i.pinned])


def can_fork() -> bool:
    """Whether this process may fork a helper now (the module docstring says when not)."""
    if not hasattr(os, "fork") or fork_hazard() is not None:
        return False
    # A lock another thread holds would stay held in the copy; a thread marked `fork_safe`
    # takes none a helper needs (core/observe.py's sampler).
    me = threading.current_thread()
    if any(t is not me and not getattr(t, "fork_safe", False) for t in threading.enumerate()):
        return False
    ray = sys.modules.get("ray")
    return not (ray is not None and getattr(ray, "is_initialized", lambda: False)())


class _Helpers:
    """One stage's run over `free` items by the driver and its helpers."""

    def __init__(
        self,
        executor: ForkedExecutor,
        fn: Callable,
        free: list[WorkItem],
        shared: Any,
        store: StoreTarget | None,
    ) -> None:
        self.executor = executor
        self.store = store
        self.fn = fn
        self.free = free
        self.shared = shared
        self.claims = multiprocessing.get_context("fork").Array("q", 1)  # the next to claim
        self.reports: queue.Queue[tuple[int, Finished] | None] = queue.Queue()
        self.reported: set[int] = set()

    def claim(self) -> int | None:
        with self.claims.get_lock():
            index = self.claims[0]
            self.claims[0] = index + 1
        return index if index < len(self.free) else None

    def run_here(self, item: WorkItem, label: str | None = None) -> Finished:
        executor = self.executor
        return run_item(
            self.fn,
            item,
            self.shared,
            executor.root,
            True,
            label or executor.label,
            policy=executor.policy,
            files=executor.files,
        )

    def run(self, pinned: list[WorkItem]) -> Iterator[Finished]:
        # Every helper forked before any listener starts: a copy of a thread's lock is never
        # inherited held.
        helpers = min(self.executor.helpers, len(self.free) - 1)  # the driver runs units too
        forked = [self._fork() for _ in range(helpers)]
        children = []
        for pid, fd in forked:
            thread = threading.Thread(target=self._listen, args=(fd,), daemon=True)
            thread.start()
            children.append((pid, thread))
        try:
            for item in pinned:
                yield self.run_here(item)
                yield from self._drain()
            while (index := self.claim()) is not None:
                self.reported.add(index)
                yield self.run_here(self.free[index])
                yield from self._drain()
            done = 0  # every unit is claimed: the helpers' last reports, as they come
            while done < len(children):
                report = self.reports.get()
                if report is None:
                    done += 1
                elif report[0] not in self.reported:
                    self.reported.add(report[0])
                    yield report[1]
            for pid, _ in children:
                os.waitpid(pid, 0)
            children = []
            # What a helper claimed and never reported (it died, or its report was torn).
            for index in range(len(self.free)):
                if index not in self.reported:
                    self.reported.add(index)
                    yield self.run_here(self.free[index])
        finally:
            for pid, _ in children:  # the build stopped early: its helpers go with it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)

    def _drain(self) -> Iterator[Finished]:
        """The helpers' reports that came in meanwhile (their ends: counted by `run`)."""
        while True:
            try:
                report = self.reports.get_nowait()
            except queue.Empty:
                return
            if report is None:
                self.reports.put(None)  # seen again when `run` counts the helpers that ended
                return
            index, finished = report
            if index not in self.reported:
                self.reported.add(index)
                yield finished

    def _fork(self) -> tuple[int, int]:
        """A helper's pid, and the end of the pipe it reports through."""
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # a helper: run what it claims, report each, leave without any cleanup
            status = 1
            try:
                os.close(read_end)
                signal.signal(signal.SIGINT, signal.SIG_DFL)  # the driver handles Ctrl-C
                self._help(write_end)
                status = 0
            finally:
                os._exit(status)
        os.close(write_end)
        return pid, read_end

    def _help(self, out: int) -> None:
        label = f"helper ({worker_label()})"
        while (index := self.claim()) is not None:
            # Stored here, as a Ray worker stores what it makes (cache/workers.py): the
            # driver, which stores what it runs itself, would otherwise do all the storing.
            finished = store_results([self.run_here(self.free[index], label)], self.store)[0]
            try:
                data = pickle.dumps((index, finished), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # a result or error that cannot cross: said, not lost
                finished = Finished(
                    finished.unit_id,
                    error=InternalError(f"a unit's outcome cannot be sent to the driver: {exc}"),
                    worker=label,
                )
                data = pickle.dumps((index, finished), protocol=pickle.HIGHEST_PROTOCOL)
            view = memoryview(_LENGTH.pack(len(data)) + data)
            while view:
                view = view[os.write(out, view) :]

    def _listen(self, fd: int) -> None:
        """Read a helper's reports into the queue until it closes its end."""
        with os.fdopen(fd, "rb") as pipe:
            while head := pipe.read(_LENGTH.size):
                if len(head) < _LENGTH.size:
                    break
                data = pipe.read(_LENGTH.unpack(head)[0])
                try:
                    self.reports.put(pickle.loads(data))
                except Exception:  # a torn or unreadable report: its unit runs in the driver
                    break
        self.reports.put(None)
