"""The output folder: one safe path for every write into it, and the ledger of what was published.

`OutputFolder.path(relpath)` is the way every write (the engine's `ctx.publish_bytes`, a report,
a bundle) turns an output-relative path into a file: it refuses a path that could leave the
folder (absolute, `..`, a drive, a backslash, an empty segment) and one whose parent folder
resolves outside it (a symlinked folder inside the output), checking each parent folder once.

The ledger (`reports/.orchestrate.published`) lists the files builds published into the folder,
one path a line; a path is added before its file is written, so a killed run leaves no published
file unlisted. `orchestrate clean` removes exactly those files and the folders they leave empty:
what else the folder holds stays.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import NamedTuple

from .cache.atomic import naming
from .errors import ProjectError

LEDGER = "reports/.orchestrate.published"
LOCK = "reports/.orchestrate.lock"  # orchestrator/lock.py


def safe_parts(relpath: str) -> list[str]:
    """The segments of an output-relative path; ProjectError if it could leave the folder."""
    parts = relpath.split("/")
    if (
        not relpath
        or relpath.startswith("/")
        or "\\" in relpath
        or ":" in relpath
        or "\0" in relpath
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ProjectError(
            f"refusing to write outside the output folder: {relpath!r}", key="output"
        )
    return parts


class OutputFolder:
    """An output folder, resolved once; each parent folder is checked once."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        self.base = Path(output_dir).resolve()
        self._parents: dict[str, bool] = {}
        self._paths: dict[str, Path] = {}  # a publish names each of thousands of files twice

    def path(self, relpath: str) -> Path:
        """The absolute path of an output file; ProjectError if it would land outside."""
        known = self._paths.get(relpath)
        if known is not None:
            return known
        target = self.base.joinpath(*safe_parts(relpath))
        parent = relpath.rpartition("/")[0]
        inside = self._parents.get(parent)
        if inside is None:
            # A symlinked folder inside the output could point elsewhere: resolve what exists.
            inside = self._parents[parent] = target.parent.resolve().is_relative_to(self.base)
        if not inside:
            raise ProjectError(
                f"refusing to write through a link out of the output folder: {relpath!r}",
                key="output",
            )
        self._paths[relpath] = target
        return target


class Ledger:
    """The list of files builds published into an output folder (see the module docstring)."""

    def __init__(self, folder: OutputFolder) -> None:
        self.folder = folder
        self._known: set[str] | None = None

    @property
    def path(self) -> Path:
        return self.folder.path(LEDGER)  # reports/ could be a link out of the folder

    def entries(self) -> list[str]:
        """The listed paths, in the order they were first published (a torn last line ignored)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise ProjectError(
                f"cannot read the list of published files: {exc}", file=str(self.path)
            ) from None
        lines = text.split("\n")
        complete = lines[:-1]  # after the last newline: nothing, or a line a kill cut short
        return list(dict.fromkeys(line for line in complete if line))

    def record(self, relpath: str) -> None:
        """List a file about to be published (once)."""
        if self._known is None:
            self._known = set(self.entries())
        if relpath in self._known:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # A line a killed run tore: its file was never written (a path is listed
                # first), and ours must not join it. Only the lock holder writes here.
                os.ftruncate(fd, os.pread(fd, size, 0).rfind(b"\n") + 1)
            with naming(self.path):
                os.write(fd, (relpath + "\n").encode("utf-8"))
        finally:
            os.close(fd)
        self._known.add(relpath)


class Cleaned(NamedTuple):
    removed: list[str]  # files removed, output-relative
    kept: int  # files left in the folder (not published by a build)
    ledger_found: bool


def clean_output(output_dir: str | os.PathLike) -> Cleaned:
    """Remove the files builds published into `output_dir` and the folders they leave empty.

    Call it holding the folder's lock. Without a ledger nothing is removed."""
    folder = OutputFolder(output_dir)
    ledger = Ledger(folder)
    if not ledger.path.is_file():
        return Cleaned([], _count_files(folder.base), False)
    removed = []
    for relpath in ledger.entries():
        try:
            target = folder.path(relpath)
        except ProjectError:  # a tampered ledger must not make us delete anything else
            continue
        if target.is_file() and not target.is_symlink():
            target.unlink()
            removed.append(relpath)
            remove_empty_folders(folder.base, target.parent)
    ledger.path.unlink()
    lock = folder.path(LOCK)
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    remove_empty_folders(folder.base, lock.parent)
    kept = _count_files(folder.base)
    if kept == 0 and folder.base.is_dir() and not any(folder.base.iterdir()):
        folder.base.rmdir()
    return Cleaned(removed, kept, True)


def remove_empty_folders(base: Path, folder: Path) -> None:
    """Remove `folder` and its parents while they are empty, never `base` or above it."""
    while folder != base and folder.is_relative_to(base):
        try:
            folder.rmdir()
        except OSError:  # not empty (or already gone): stop here
            return
        folder = folder.parent


def _count_files(base: Path) -> int:
    if not base.is_dir():
        return 0
    return sum(len(files) for _, _, files in os.walk(base))
