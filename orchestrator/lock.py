"""An exclusive lock on an output folder, so two runs never publish into it at once.

Holding the lock also means no other run is writing into the folder, so temporary files left
there by a run that was killed between a write and its rename are removed on entry.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from .cache import TEMP_PREFIX
from .errors import OutputLocked
from .outputs import LOCK, OutputFolder


class OutputLock:
    def __init__(self, output_dir: Path, keep: tuple[Path, ...] = ()) -> None:
        self.path = Path(output_dir) / LOCK
        self._keep = {str(Path(p)) for p in keep}  # e.g. a cache folder inside the output
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        OutputFolder(self.path.parent.parent).path(LOCK)  # not through a link out of the folder
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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
        for dirpath, dirnames, names in os.walk(self.path.parent.parent):
            dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in self._keep]
            for name in names:
                if name.startswith(TEMP_PREFIX):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(dirpath, name))

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
