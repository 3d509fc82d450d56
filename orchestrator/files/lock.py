"""Locks: an output folder (one run publishes into it at a time) and a cache folder (builds
share it; housekeeping has it alone).

Holding an output folder's lock also means no other run is writing into the folder, so
temporary files left there by a run that was killed between a write and its rename are removed
on entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import OutputLocked
from .atomic import TEMP_PREFIX
from .confined import ConfinedFolder
from .outputs import LOCK, OutputFolder

CACHE_LOCK = "lock"


class OutputLock:
    """One command at a time publishes into an output folder. The lock file says who holds it
    and how that holder is stopped (`orchestrate watch` holds it until Ctrl-C), so a command
    refused names both; with `wait` (seconds, `inf` for as long as it takes) it waits instead,
    telling `waiting` once who it waits for."""

    POLL_SECONDS = 0.2

    def __init__(
        self,
        output_dir: Path,
        keep: tuple[Path, ...] = (),
        holder: str = "orchestrate",
        stop_hint: str = "wait for it to finish",
        wait: float = 0.0,
        waiting: Callable[[str], None] | None = None,
        wait_option: str | None = None,
    ) -> None:
        self.folder = OutputFolder(output_dir)
        self.path = self.folder.path(LOCK)
        self._keep = {os.path.realpath(p) for p in keep}  # e.g. a cache folder inside the output
        self._fd: int | None = None
        self._says = f"{holder} (process {os.getpid()})\n{stop_hint}\n"
        self.wait = wait
        self.waiting = waiting
        self.wait_option = wait_option

    def __enter__(self) -> OutputLock:
        fd = self.folder.open(LOCK, os.O_RDWR | os.O_CREAT)  # no link followed on the way
        deadline = time.monotonic() + self.wait
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder, hint = self._holder(fd)
                if time.monotonic() >= deadline:
                    os.close(fd)
                    if self.wait_option:
                        hint = f"{hint}, or give {self.wait_option} to wait for it"
                    where = str(self.path.parent.parent)
                    raise OutputLocked(
                        f"the output folder is in use by {holder}; {hint}", file=where
                    ) from None
                if not told and self.waiting is not None:
                    self.waiting(holder)
                    told = True
                time.sleep(self.POLL_SECONDS)
        os.ftruncate(fd, 0)
        os.pwrite(fd, self._says.encode("utf-8"), 0)
        self._fd = fd
        self._remove_partial_files()
        return self

    @staticmethod
    def _holder(fd: int) -> tuple[str, str]:
        """Who holds the lock and how it is stopped, as its holder wrote them (an earlier
        release wrote only `process N`)."""
        text = os.pread(fd, 1024, 0).decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        holder = lines[0] if lines else "another run"
        return holder, lines[1] if len(lines) > 1 else "wait for it to finish"

    def _remove_partial_files(self) -> None:
        """Delete the temporary files (`atomic_write`'s `.tmp-*`) of runs that died mid-write."""
        base = str(self.folder.base)
        for dirpath, dirnames, names, at in self.folder.walk():
            dirnames[:] = [
                d for d in dirnames if os.path.normpath(f"{base}/{dirpath}/{d}") not in self._keep
            ]
            for name in names:
                if name.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=at)

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class CacheLock:
    """A lock on a cache folder: builds hold it shared, `cache gc` and `cache clear` alone.

    So housekeeping never deletes a blob a running build has just found, and never removes the
    folder under it. A build that finds housekeeping under way waits for it; housekeeping that
    finds builds running waits up to `wait` seconds and then gives up with a clear error.
    """

    POLL_SECONDS = 0.2

    def __init__(self, cache_dir: Path, exclusive: bool = False, wait: float = 0.0) -> None:
        self.folder = ConfinedFolder(cache_dir, "cache folder")
        self.path = self.folder.path(CACHE_LOCK)
        self.exclusive = exclusive
        self.wait = wait
        self._fd: int | None = None

    def __enter__(self) -> CacheLock:
        fd = self.folder.open(CACHE_LOCK, os.O_RDWR | os.O_CREAT)
        if not self.exclusive:
            fcntl.flock(fd, fcntl.LOCK_SH)  # blocks only while housekeeping runs
            self._fd = fd
            return self
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise OutputLocked(
                        "the cache is in use by a running build; run housekeeping when no "
                        "build uses it, or give --wait",
                        file=str(self.path.parent),
                    ) from None
                time.sleep(self.POLL_SECONDS)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
