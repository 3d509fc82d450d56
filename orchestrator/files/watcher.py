"""What moved under the project, as the operating system tells it: `watchfiles` (a binding of
the Rust `notify` crate: inotify, FSEvents, ReadDirectoryChangesW), for `orchestrate watch`.

Two watches: the project folder, recursively (the output and cache folders below it ignored),
and, one level deep, the folders holding the files outside it that the build depends on (the
build file, rule files: watching a folder, not a file, sees every way an editor saves, a
rename over the file included). Each runs in a thread of its own inside `notify`'s watch loop,
which wakes every `STEP_MS` without holding the interpreter and returns a batch once the paths
stopped moving for one step (so a save, however many writes and renames it takes, is one
batch); an idle watch costs next to nothing. Events that come while a build runs are kept for
the next batch: nothing that moves after a batch was taken is lost.

When a batch cannot be trusted to name everything that moved, it says why (`rescan`) and the
build looks at every file: the watch failed (`notify`'s error, an unreadable folder), the
project folder itself went or was replaced (its watch died with it), or a burst moved so many
paths at once that the kernel's event queue may have overflowed. watchfiles (1.3) drops the
notice `notify` gives of an overflow (an event without paths: watchfiles issue #348), so a
burst is the sign left to go by: an overflow needs more events than the kernel's queue holds
(16,384 by default on Linux) to arrive faster than they are read, and a batch of
`OVERFLOW_SUSPECT_PATHS` paths is taken as one. Saving the build file always looks at
everything too.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: A batch is over once its paths stopped moving for this long (notify's step). A save is
#: built on average 1.5 steps after its last write: 75 ms at 50 ms, a sixth of an attribute
#: edit's build at 100,000 resources. An editor's save (write, rename) takes well under a step.
STEP_MS = 25
#: Paths that keep moving are still handed over this often, so a long copy builds as it goes.
DEBOUNCE_MS = 2000
#: A batch of this many paths may have overflowed the kernel's event queue (see above): it is
#: not trusted to name them all. Stat'ing a few thousand paths costs no more than the stat pass.
OVERFLOW_SUSPECT_PATHS = 4096


@dataclass(frozen=True)
class Batch:
    """What moved since the last batch: project files and folders (relative to its root), files
    outside it that the build depends on (absolute), and why every file must be looked at
    (None: `changed` names all that moved). `lost`: the watch itself is gone (the project
    folder went or was replaced, or the watcher failed): it must be made again."""

    changed: frozenset[str] = frozenset()
    outside: frozenset[str] = frozenset()
    rescan: str | None = None
    lost: str | None = None

    def __bool__(self) -> bool:
        return bool(self.changed or self.outside or self.rescan or self.lost)


@dataclass
class _Lost:
    """A watch thread's last word: the error that ended its watch."""

    reason: str


class FileEvents:
    """The watches of one project (see the module's docstring). `skip`: folders (absolute)
    whose changes are none of the build's (the output and cache folders); `outside`: files
    (absolute) outside the project the build depends on. Made, every watch is in place: what
    changes after is seen."""

    def __init__(self, root: str, skip: Iterable[str] = (), outside: Iterable[str] = ()) -> None:
        self.root = os.path.abspath(root)
        self._identity = _identity(self.root)
        self._prefix = self.root + os.sep
        absolute = [os.path.abspath(path) for path in skip]
        self._skip = tuple(
            path[len(self._prefix) :] + os.sep for path in absolute if _below(path, self._prefix)
        )
        self.outside: frozenset[str] = frozenset()
        self._folders: set[str] = set()  # folders outside the project watched one level deep
        self._queue: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._watches: list[tuple[Any, threading.Thread]] = []
        try:
            self._start([self.root], recursive=True)
            self.watch_more(outside)
        except BaseException:
            self.close()
            raise

    def watch_more(self, outside: Iterable[str]) -> None:
        """Watch these files outside the project too. Watches are only ever added: stopping
        one drops what it saw and had not handed over yet."""
        files = frozenset(os.path.abspath(path) for path in outside) - self.outside
        self.outside |= files
        holders = {os.path.dirname(path) for path in files} - self._folders
        folders = sorted(f for f in holders if not _below(f, self._prefix) and os.path.isdir(f))
        if folders:
            self._start(folders, recursive=False)
            self._folders.update(folders)

    def _start(self, paths: list[str], recursive: bool) -> None:
        """A watch of `paths` in a thread of its own. It is made here, not in the thread: when
        this returns it is in place (a change made after is seen), and a folder that cannot be
        watched is an error here."""
        from watchfiles._rust_notify import RustNotify  # imported by the command that watches

        notify = RustNotify(paths, False, False, 300, recursive, False)
        thread = threading.Thread(
            target=self._pump, args=(notify,), name="orchestrate-watch", daemon=True
        )
        self._watches.append((notify, thread))
        thread.start()

    def _pump(self, notify: Any) -> None:
        """A watch thread: notify's batches into the queue, until stopped or failed."""
        try:
            while True:
                found = notify.watch(DEBOUNCE_MS, STEP_MS, 0, self._stop)
                if found == "stop":
                    return
                if isinstance(found, set):
                    self._queue.put(found)
        except Exception as exc:  # noqa: BLE001 - the watch is lost, whatever ended it
            self._queue.put(_Lost(f"{type(exc).__name__}: {exc}"))

    def next(self, timeout: float | None = None) -> Batch:
        """The next batch: waits for one (up to `timeout` seconds: then an empty batch), then
        takes whatever else is already queued with it."""
        try:
            found = [self._queue.get(timeout=timeout)]
        except queue.Empty:
            return Batch()
        while True:
            try:
                found.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return self._batch(found)

    def _batch(self, found: list) -> Batch:
        changed: set[str] = set()
        outside: set[str] = set()
        moved = 0
        lost = next((item.reason for item in found if isinstance(item, _Lost)), None)
        prefix = self._prefix
        for item in found:
            if isinstance(item, _Lost):
                continue
            moved += len(item)
            for _, path in item:
                if path in self.outside:
                    outside.add(path)
                if path == self.root:
                    lost = lost or self._root_gone()
                elif path.startswith(prefix):
                    relpath = path[len(prefix) :]
                    if not relpath.startswith(self._skip) and relpath + os.sep not in self._skip:
                        changed.add(relpath.replace(os.sep, "/"))
        rescan = None
        if lost:
            rescan = f"the watch was lost ({lost})"
        elif moved >= OVERFLOW_SUSPECT_PATHS:
            rescan = f"{moved} paths moved at once (more than a watch is trusted to name)"
        return Batch(frozenset(changed), frozenset(outside), rescan, lost)

    def _root_gone(self) -> str | None:
        """Why the project folder's watch is dead (None: the event was on the folder itself,
        which is still the one watched)."""
        now = _identity(self.root)
        if now is None:
            return f"the project folder {self.root} is gone"
        if now != self._identity:
            return f"the project folder {self.root} was replaced"
        return None

    def close(self) -> None:
        """Stop the watches (each thread leaves notify's loop within a step)."""
        self._stop.set()
        for notify, thread in self._watches:
            if thread.is_alive():
                thread.join()
            notify.close()
        self._watches.clear()


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _below(path: str, prefix: str) -> bool:
    """Whether `path` is at or below the folder `prefix` (which ends with a separator)."""
    return (path + os.sep).startswith(prefix)
