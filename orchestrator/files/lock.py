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
from pathlib import Path

from ..errors import OutputLocked
from .atomic import TEMP_PREFIX
from .confined import ConfinedFolder
from .outputs import LOCK, OutputFolder

CACHE_LOCK = "lock"


class OutputLock:
    def __init__(self, output_dir: Path, keep: tuple[Path, ...] = ()) -> None:
        self.folder = OutputFolder(output_dir)
        self.path = self.folder.path(LOCK)
        self._keep = {os.path.realpath(p) for p in keep}  # e.g. a cache folder inside the output
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        fd = self.folder.open(LOCK, os.O_RDWR | os.O_CREAT)  # no link followed on the way
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "another run"
            os.close(fd)
            raise OutputLocked(
                f"the output folder is in use by {holder}; wait for it to finish",
                file=str(self.path.parent.parent),
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"process {os.getpid()}".encode("ascii"))
        self._fd = fd
        self._remove_partial_files()
        return self

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
