"""Writing cache and output files so that a reader never trusts a partial one.

Files are written to a temporary sibling and renamed into place; logs are appended to in whole
checksummed lines with one `write` on an O_APPEND file; sealed files carry their own digest. A
killed run, or two machines sharing a folder, can leave a torn line or a temporary file behind,
never a file that passes verification with the wrong content.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ..hashing import digest_bytes
from .confined import ConfinedFolder

TEMP_PREFIX = ".tmp-"  # atomic_write's temporary files; a killed run may leave some behind
TEMP_ABANDONED_SECONDS = 24 * 3600  # a temporary file this old belongs to no live run


_temp_counter = itertools.count()
# A killed run's leftover `.tmp-<host>-<pid>-<n>` must not collide with a later process that
# reuses its pid (containers restart at the same small pids): a random token per process too.
_TEMP_TOKEN = os.urandom(4).hex()
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def atomic_write(folder: ConfinedFolder, relpath: str, data: bytes) -> None:
    """Write `data` to `relpath` in `folder` through a temporary sibling and a rename, every
    step relative to the folder's descriptors (no link below `folder` is followed).

    The temporary name is unique per process and call (pid, counter), so concurrent writers —
    other threads, processes or machines sharing the folder — never share one; it is cheaper
    than `mkstemp`, which matters at one write per unit of work.
    """
    tmp = f"{TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-{_TEMP_TOKEN}-{next(_temp_counter)}"
    try:
        at, name, fd = _create(folder, relpath, tmp)
    except FileNotFoundError:  # the folder was removed behind our back (cache clear)
        folder.forget()
        at, name, fd = _create(folder, relpath, tmp)
    try:
        with naming(folder.path(relpath)), os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, name, src_dir_fd=at, dst_dir_fd=at)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=at)
        raise


def _create(folder: ConfinedFolder, relpath: str, tmp: str) -> tuple[int, str, int]:
    """(the folder's descriptor, the file's name, the temporary file's descriptor)."""
    at, name = folder.split(relpath, create=True)
    try:
        return at, name, os.open(tmp, _CREATE, 0o644, dir_fd=at)
    except OSError as exc:
        shown = folder.path(relpath).with_name(tmp)
        raise OSError(exc.errno, exc.strerror, str(shown)) from None


@contextlib.contextmanager
def naming(path: str | os.PathLike) -> Iterator[None]:
    """Name `path` in an OSError that names no file (a write to an open file, a full disk),
    so that the error the user sees says which file could not be written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def seal(payload: bytes) -> bytes:
    """Prefix a payload with its digest so truncation or bit rot is detected on read."""
    return digest_bytes(payload).encode("ascii") + b"\n" + payload


def unseal(data: bytes) -> bytes | None:
    """The payload of a sealed file, or None when it fails its seal."""
    head, sep, payload = data.partition(b"\n")
    if not sep or head != digest_bytes(payload).encode("ascii"):
        return None
    return payload


def line_checksum(data: bytes) -> bytes:
    """8 hex of CRC-32: enough to catch a torn or damaged log line, and a lookup verifies one per
    unit of a 100,000-unit stage (the results it points to are verified by their digest)."""
    return b"%08x" % zlib.crc32(data)


def append_lines(folder: ConfinedFolder, relpath: str, data: bytes) -> None:
    """Append whole lines with one `write` on an O_APPEND file, so concurrent writers interleave
    whole lines; a line torn by a killed run is ended first, or ours would join it."""
    fd = folder.open(relpath, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        with naming(folder.path(relpath)):
            os.write(fd, data)
    finally:
        os.close(fd)


class Owner(Protocol):
    """What a store reports damage to (the Cache: it counts and logs what is dropped)."""

    log: Any
    corrupt_dropped: int
    folder: ConfinedFolder

    def dropped(self, path: Path, why: str) -> None: ...
