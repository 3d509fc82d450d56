"""What of the project a build may read: the one check the scan, the stat pass and every reader
of project files share (`ProjectFiles`).

A file is read when it is a regular file no larger than `FilePolicy.max_size`. A symbolic link in
the project is followed while its real path stays inside the project's; one that leads out
(`texture.data -> /proc/self/environ`, `-> ~/.ssh/id_rsa`) is treated as missing, unless the build
file opts in (`FilePolicy.follow_outside`). FIFOs, sockets and devices are never opened for
reading, and a file over the size limit is never read (a 2 GB file costs several times its size in
memory and cache). A name holding a control character is left out. The scan keeps each file it
refuses, with why, in the file table (the `collect` stage reports them as problems); readers see
them as missing.

Paths that leave the project on purpose — `../` paths a source reads, the Cocos engine folder
the build file names — are the build file's, not links of the project: only the kind and size
of their files are checked.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from ..errors import ProjectError

LINK_OUTSIDE = "link_outside"
SPECIAL_FILE = "special_file"
TOO_LARGE = "too_large"
UNSAFE_NAME = "unsafe_name"
DEFAULT_MAX_FILE_SIZE = 1 << 30  # 1 GiB: far above any asset, far below what hurts a build
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class FilePolicy(NamedTuple):
    """What the build file allows of the project's files (the `collect` section sets it)."""

    follow_outside: bool = False  # follow links whose target is outside the project
    max_size: int = DEFAULT_MAX_FILE_SIZE  # bytes; a larger file is never read


class Refusal(NamedTuple):
    """Why a file of the project is not read."""

    kind: str  # LINK_OUTSIDE, SPECIAL_FILE, TOO_LARGE or UNSAFE_NAME
    detail: str  # where the link leads, the kind of file, its size in bytes, the character


def special_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, name in (
        (stat.S_ISFIFO, "FIFO"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def inside(relpath: str) -> bool:
    """Whether a project-relative path names a file of the project (not `../` or absolute)."""
    return not (relpath == ".." or relpath.startswith(("../", "/")) or "/../" in relpath)


class FileRead(NamedTuple):
    """A project file as read: its bytes and the `fstat` of the descriptor read (both None
    when it is absent or refused)."""

    data: bytes | None
    stat: os.stat_result | None


NOT_READ = FileRead(None, None)


class ProjectFiles:
    """The project's files as the build may read them under a policy (module docstring).

    Cheap to make (one per reader); what it learns of folders (whether a link on the way leads
    out) is kept for its life, and what the scan finds of them (`listed`) is learned too."""

    def __init__(self, root: str, policy: FilePolicy | None = None) -> None:
        self.root = root
        self.policy = policy or FilePolicy()
        self._real_root: str | None = None
        self._leaving: dict[str, bool] = {}  # folder → whether a link on its way leads out

    def leads_out(self, abspath: str) -> str | None:
        """Where `abspath` really is when that is outside the project; None when inside."""
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root)
        real = os.path.realpath(abspath)
        root = self._real_root
        return None if real == root or real.startswith(root.rstrip("/") + "/") else real

    def refusal(self, relpath: str, own: os.stat_result, st: os.stat_result) -> Refusal | None:
        """Why the entry `relpath` is not read (None: it is): `own` is its `lstat`, `st` its
        `stat` through links (a folder is the caller's business)."""
        if stat.S_ISLNK(own.st_mode) and not self.policy.follow_outside:
            where = self.leads_out(f"{self.root}/{relpath}")
            if where is not None:
                return Refusal(LINK_OUTSIDE, where)
        if not stat.S_ISREG(st.st_mode):
            return Refusal(SPECIAL_FILE, special_kind(st.st_mode))
        if st.st_size > self.policy.max_size:
            return Refusal(TOO_LARGE, str(st.st_size))
        return None

    def listed(self, folder: str, real: bool) -> None:
        """What a listing of its parent just found of `folder` (relative, no trailing slash):
        a `real` folder in a folder known to lead nowhere out leads nowhere out either, so
        reading its files needs no `lstat` of it (a fresh checkout's 100,000 folders cost 0.9 s
        of them); a link where a folder was, and everything under it, is checked again on the
        next read."""
        parent = folder.rpartition("/")[0]
        if real and (not parent or self._leaving.get(parent) is False):
            self._leaving[folder] = False
        elif folder in self._leaving:
            under = folder + "/"
            for known in [name for name in self._leaving if name.startswith(under)]:
                del self._leaving[known]
            del self._leaving[folder]

    def _folder_leads_out(self, folder: str) -> bool:
        """Whether reaching `folder` goes through a link that leads out of the project."""
        if not folder:
            return False
        known = self._leaving.get(folder)
        if known is None:
            known = self._folder_leads_out(folder.rpartition("/")[0])
            if not known:
                try:
                    own = os.lstat(f"{self.root}/{folder}")
                except OSError:  # missing: the open fails on its own
                    own = None
                known = (
                    own is not None
                    and stat.S_ISLNK(own.st_mode)
                    and self.leads_out(f"{self.root}/{folder}") is not None
                )
            self._leaving[folder] = known
        return known

    def read(self, relpath: str) -> FileRead:
        """A project file, NOT_READ when it is absent or refused (module docstring);
        ProjectError naming it when it exists but cannot be read."""
        abspath = f"{self.root}/{relpath}" if relpath else self.root
        guarded = not self.policy.follow_outside and inside(relpath)
        if guarded and self._folder_leads_out(relpath.rpartition("/")[0]):
            return NOT_READ
        fd = self._open(abspath, _READ | (_NOFOLLOW if guarded else 0))
        if fd == -errno.ELOOP and guarded:  # a link, or a loop: followed while it stays inside
            fd = -errno.ENOENT if self.leads_out(abspath) is not None else self._open(abspath)
        if fd < 0:
            return NOT_READ
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > self.policy.max_size:
                return NOT_READ
            data = _read_to_end(fd, st.st_size, self.policy.max_size)
            return FileRead(data, st) if data is not None else NOT_READ
        except OSError as exc:
            raise ProjectError(f"cannot read: {exc.strerror}", file=abspath) from None
        finally:
            os.close(fd)

    @staticmethod
    def _open(abspath: str, flags: int = _READ) -> int:
        """A descriptor, or minus the errno of a file that is not there (ENOENT) or is a link
        the flags refuse or a loop (ELOOP); ProjectError for any other failure."""
        try:
            return os.open(abspath, flags)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return -errno.ENOENT
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return -errno.ELOOP
            raise ProjectError(f"cannot read: {exc.strerror}", file=abspath) from None


def _read_to_end(fd: int, size: int, limit: int) -> bytes | None:
    """Everything left to read from `fd`: one read of the size `fstat` gave (plus one byte, to
    see a file that grew), then reads until the end; None past `limit` bytes (a file that grows
    while read). Half the cost of a file object's `read()` on the small files a project is made
    of (tens of thousands read per build)."""
    chunks = [os.read(fd, size + 1)]
    total = len(chunks[0])
    while chunks[-1]:
        if total > limit:
            return None
        chunks.append(os.read(fd, max(size, 1 << 16)))
        total += len(chunks[-1])
    return chunks[0] if len(chunks) == 2 else b"".join(chunks)
