"""Folders that writes never leave: the output folder and the cache folder.

Every path below such a folder is opened one component at a time from the folder's descriptor,
folders with O_DIRECTORY|O_NOFOLLOW and files with O_NOFOLLOW, so a symbolic link met at any
step (planted by a project that holds the output folder, or in a shared cache) is refused with an
error naming it, never followed: no write, read, rename or removal lands outside the folder. A
file that is not a regular file (a FIFO, a device) is refused too, and opened without blocking.

The folder itself is the configuration's (`output:`, `cache:`): its path is resolved once and the
links on it followed (a farm may mount its builds through one; `config.py` refuses an output or
cache folder reached through a link inside the project). Folder descriptors are kept (a publish
writes thousands of files into a few folders), which also makes the walk race-aware: a folder
swapped for a link after it was opened is not the folder written into.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from ..errors import ProjectError

OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OPEN_FILE = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
KEPT_FOLDERS = 64  # descriptors kept open per folder (the cache has 256 blob folders)


def _close_all(descriptors: dict[str, int]) -> None:
    for fd in descriptors.values():
        with contextlib.suppress(OSError):
            os.close(fd)
    descriptors.clear()


class ConfinedFolder:
    """A folder whose files are reached without following any link below it (module docstring).

    `relpath`s are `/`-separated and relative to the folder; an empty, `.` or `..` segment is
    refused (callers with stricter rules, `outputs.safe_parts`, check theirs first)."""

    def __init__(self, base: str | os.PathLike, label: str = "output folder") -> None:
        self.base = Path(os.path.realpath(base))
        self.given = Path(os.path.abspath(base))
        self.label = label
        self._folders: dict[str, int] = {}
        weakref.finalize(self, _close_all, self._folders)

    def __getstate__(self) -> tuple[Path, str]:  # descriptors do not cross processes
        return self.base, self.label

    def __setstate__(self, state: tuple[Path, str]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def path(self, relpath: str) -> Path:
        """The absolute path of `relpath`, to name it (opening it by path would follow links)."""
        return self.base.joinpath(*relpath.split("/")) if relpath else self.base

    def relative(self, path: str | os.PathLike) -> str | None:
        """The relpath of an absolute path under the folder (named by its real path or by the
        path it was given as; nothing is resolved), or None."""
        absolute = Path(os.path.abspath(path))
        for base in (self.base, self.given):
            if absolute.is_relative_to(base) and absolute != base:
                return absolute.relative_to(base).as_posix()
        return None

    # -- folders -------------------------------------------------------------------------------
    def folder(self, relfolder: str, create: bool = True) -> int:
        """The descriptor of a folder below this one ("" for this one), kept open; missing
        folders are made when `create`, else FileNotFoundError."""
        fd = self._folders.get(relfolder)
        if fd is not None:
            return fd
        if len(self._folders) >= KEPT_FOLDERS:
            self.forget()
        return self._open_folder(relfolder, create)

    def _open_folder(self, relfolder: str, create: bool) -> int:
        fd = self._folders.get(relfolder)
        if fd is not None:
            return fd
        if not relfolder:
            if create:
                os.makedirs(self.base, exist_ok=True)
            fd = os.open(self.base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        else:
            parent, _, name = relfolder.rpartition("/")
            _check_segment(name, relfolder)
            at = self._open_folder(parent, create)
            fd = self._open_child(at, name, relfolder, create)
        self._folders[relfolder] = fd
        return fd

    def _open_child(self, at: int, name: str, relfolder: str, create: bool) -> int:
        for attempt in (0, 1):
            try:
                return os.open(name, OPEN_FOLDER, dir_fd=at)
            except FileNotFoundError:
                if not create or attempt:
                    raise
            except OSError as exc:
                self._refuse(at, name, relfolder, exc)
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=at)
        raise AssertionError("unreachable")

    def forget(self) -> None:
        """Close the kept descriptors (a folder removed behind our back is opened again)."""
        _close_all(self._folders)

    def _forget_below(self, relfolder: str) -> None:
        prefix = relfolder + "/"
        for rel in [r for r in self._folders if r == relfolder or r.startswith(prefix)]:
            with contextlib.suppress(OSError):
                os.close(self._folders.pop(rel))

    # -- files ---------------------------------------------------------------------------------
    def check(self, relpath: str) -> None:
        """Refuse a path this folder does not take (here: an empty, `.` or `..` segment)."""
        for name in relpath.split("/"):
            _check_segment(name, relpath)

    def split(self, relpath: str, create: bool = False) -> tuple[int, str]:
        """(descriptor of the file's folder, its name); the path is checked first."""
        self.check(relpath)
        parent, _, name = relpath.rpartition("/")
        return self.folder(parent, create), name

    def open(self, relpath: str, flags: int, mode: int = 0o644) -> int:
        """A descriptor of a regular file, opened with `flags` (O_CREAT makes missing folders);
        a link or a file of another kind is refused (ProjectError)."""
        at, name = self.split(relpath, create=bool(flags & os.O_CREAT))
        try:
            fd = os.open(name, flags | OPEN_FILE, mode, dir_fd=at)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.EROFS, errno.ENOSPC):
                raise OSError(exc.errno, exc.strerror, str(self.path(relpath))) from None
            self._refuse(at, name, relpath, exc)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._refuse(at, name, relpath, None)
        return fd

    def read(self, relpath: str) -> bytes | None:
        """A file's bytes; None when it (or its folder) is missing."""
        try:
            fd = self.open(relpath, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def lstat(self, relpath: str) -> os.stat_result | None:
        """The file's own `stat` (a link is not followed); None when it is missing."""
        try:
            at, name = self.split(relpath)
            return os.stat(name, dir_fd=at, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def is_file(self, relpath: str) -> bool:
        """Whether `relpath` is a regular file (not a link to one)."""
        found = self.lstat(relpath)
        return found is not None and stat.S_ISREG(found.st_mode)

    def unlink(self, relpath: str) -> None:
        """Remove a file (a link itself, never its target); FileNotFoundError when missing."""
        at, name = self.split(relpath)
        os.unlink(name, dir_fd=at)

    def replace(self, source: str, target: str) -> None:
        """Rename `source` over `target` (a link at `target` is replaced, not followed)."""
        source_at, source_name = self.split(source, create=True)
        target_at, target_name = self.split(target, create=True)
        os.replace(source_name, target_name, src_dir_fd=source_at, dst_dir_fd=target_at)

    def remove_empty_folders(self, relfolder: str) -> None:
        """Remove `relfolder` and its parents while they are empty, never this folder."""
        while relfolder:
            parent, _, name = relfolder.rpartition("/")
            try:
                at = self.folder(parent, create=False)
                self._forget_below(relfolder)
                os.rmdir(name, dir_fd=at)
            except OSError:  # not empty, not a folder, or already gone: stop here
                return
            relfolder = parent

    def walk(self) -> Iterator[tuple[str, list[str], list[str], int]]:
        """`os.fwalk` of the folder: links are not followed, files are removed by descriptor."""
        try:
            base = self.folder("", create=False)
        except FileNotFoundError:
            return
        yield from os.fwalk(".", dir_fd=base, follow_symlinks=False)

    def exists(self) -> bool:
        return self.base.is_dir()

    def database(self, relpath: str) -> Path:
        """The path to open a SQLite database at, once its folders are opened without following
        a link and neither it nor its journals (`-wal`, `-shm`, `-journal`) is a link or a
        special file: SQLite opens by path, and would follow one."""
        at, name = self.split(relpath, create=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                found = os.stat(name + suffix, dir_fd=at, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if not stat.S_ISREG(found.st_mode):
                self._refuse(at, name + suffix, relpath + suffix, None)
        return self.path(relpath)

    # -- refusals ------------------------------------------------------------------------------
    def _refuse(self, at: int, name: str, relpath: str, exc: OSError | None) -> NoReturn:
        """Raise the error for `name` in the folder `at` that an open failed on (`exc`) or that
        is no regular file: a link, a file where a folder was expected or a special file is
        named; anything else is re-raised with its path."""
        shown = str(self.path(relpath))
        try:
            found = os.stat(name, dir_fd=at, follow_symlinks=False)
        except OSError as failed:
            exc = exc or failed
            raise OSError(exc.errno, exc.strerror, shown) from None
        if stat.S_ISLNK(found.st_mode):
            try:
                target = os.readlink(name, dir_fd=at)
            except OSError:
                target = "?"
            raise ProjectError(
                f"refusing to follow a symbolic link in the {self.label} (it points to "
                f"{target}); remove it",
                file=shown,
            )
        if exc is None or not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
            raise ProjectError(
                f"refusing a file of the {self.label} that is not a regular file", file=shown
            )
        if exc.errno == errno.ENOTDIR:
            raise ProjectError(f"expected a folder of the {self.label}, found a file", file=shown)
        raise OSError(exc.errno, exc.strerror, shown) from None


def _check_segment(name: str, relpath: str) -> None:
    if name in ("", ".", ".."):
        raise ProjectError(f"refusing an empty, . or .. segment in {relpath!r}")
