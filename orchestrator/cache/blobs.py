"""The content-addressed blob store: small blobs packed per run, large ones in files of their own."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

from ..errors import CacheCorrupt
from ..files.atomic import Owner, append_lines, atomic_write, line_checksum, naming
from ..hashing import digest_bytes

LARGE_BLOB_BYTES = 1 << 20


class Packed(NamedTuple):
    """Where a small blob was appended: its pack (a name in the packs folder), offset, length."""

    pack: str
    offset: int
    length: int


def blob_file(digest: str) -> str:
    """A large blob's file, relative to the cache folder."""
    return f"cas/{digest[:2]}/{digest}"


def keep_file(owner: Owner, relpath: str, data: bytes) -> None:
    """Write a large blob's file in `owner`'s folder through a temporary file and a rename,
    unless an intact copy is there (an existing one may be damaged: only a verified copy spares
    the write)."""
    folder = owner.folder
    found = folder.lstat(relpath)
    if found is None or found.st_size != len(data) or folder.read(relpath) != data:
        atomic_write(folder, relpath, data)


class BlobPacks:
    """Small blobs, appended to one pack file per run and found through an append-only index.

    Each run writes its own pack (`<host>-<pid>-<ns>.pack`), so concurrent runs never write to
    the same pack; the shared `index.log` gets whole checksummed lines (`digest pack offset
    length`) with O_APPEND, after the pack bytes they point to are flushed. Every read is verified
    against the digest: a damaged pack or index line only costs a recomputation. A pack that `gc`
    removed leaves index lines that point nowhere: those blobs are simply absent.
    """

    FLUSH_EVERY = 512

    def __init__(self, folder: Path, cache: Owner, indexed: bool = True) -> None:
        """`indexed`: blobs are found through the index; else (a worker's) only where it was
        told they are (`learn`)."""
        self.folder = folder
        self._cache = cache
        self._files = cache.folder  # every file opened through it: no link followed
        self._relfolder = folder.relative_to(cache.folder.base).as_posix()
        self._index: dict[str, Any] | None = None if indexed else {}
        self._bad: set[str] = set()
        self._present: dict[str, bool] = {}  # pack name → exists (gc may have removed it)
        self._writer: BinaryIO | None = None
        self._name = ""
        self._pending: list[bytes] = []
        self._readers: dict[str, int] = {}

    def close_readers(self) -> None:
        for fd in self._readers.values():
            os.close(fd)
        self._readers.clear()

    def _load(self) -> dict[str, Any]:
        """Digest → its index line (checked when first used) or (pack, offset, length)."""
        if self._index is None:
            index: dict[str, Any] = {}
            data = self._files.read(self._file("index.log")) or b""
            for line in data.split(b"\n"):
                fields = line.split(b" ", 2)
                if len(fields) == 3:
                    index[fields[1].decode("ascii", "replace")] = line
            self._index = index
        return self._index

    def _where(self, digest: str) -> tuple[str, int, int] | None:
        index = self._load()
        found = index.get(digest)
        if isinstance(found, bytes):  # checked only for the digests a run asks for
            check, _, body = found.partition(b" ")
            fields = body.split(b" ")
            try:
                if line_checksum(body) != check or len(fields) != 4:
                    raise ValueError("a torn or damaged line")
                found = (fields[1].decode("ascii"), int(fields[2]), int(fields[3]))
                if "/" in found[0]:
                    raise ValueError("a pack outside the packs folder")
            except (ValueError, UnicodeDecodeError):
                found = None
            if found is None:  # counted and logged: a recomputation the log explains
                del index[digest]
                self._cache.dropped(
                    self.folder / "index.log", f"the index line of blob {digest[:12]} is damaged"
                )
            else:
                index[digest] = found
        return found

    def has(self, digest: str) -> bool:
        if digest in self._bad:
            return False
        found = self._where(digest)
        if found is None:
            return False
        pack = found[0]
        if pack not in self._present:
            self._present[pack] = (
                pack == self._name or self._files.lstat(self._file(pack)) is not None
            )
        return self._present[pack]

    def where(self, digest: str) -> Packed | None:
        """Where a pack holds the blob (unchecked: every read checks it); None if none does."""
        found = self._where(digest) if self.has(digest) else None
        return None if found is None else Packed(*found)

    def holders(self, digest: str) -> tuple[str, ...]:
        """The files a packed blob is read from (its pack and the index), relative to the
        cache folder; none when no pack holds it."""
        found = self._where(digest) if self.has(digest) else None
        return () if found is None else (self._file(found[0]), self._file("index.log"))

    def get(self, digest: str) -> bytes | None:
        """The blob's bytes if a pack holds it; CacheCorrupt if the pack's copy is damaged."""
        found = None if digest in self._bad else self._where(digest)
        if found is None:
            return None
        pack, offset, length = found
        if pack == self._name and self._writer is not None:
            self._writer.flush()
        fd = self._readers.get(pack)
        if fd is None:  # one descriptor per pack for the run: finish reads 100,000 results
            if len(self._readers) >= 64:
                self.close_readers()
            try:
                fd = self._readers[pack] = self._files.open(self._file(pack), os.O_RDONLY)
            except FileNotFoundError:
                return None
        data = os.pread(fd, length, offset)
        if len(data) != length or digest_bytes(data) != digest:
            self._bad.add(digest)
            self._cache.dropped(self.folder / pack, f"blob {digest[:12]} does not match its digest")
            raise CacheCorrupt(f"blob {digest[:12]} was corrupt and has been dropped")
        return data

    def refuse(self, digest: str) -> None:
        """Never return this blob again in this run (it is not a value this build stores)."""
        self._bad.add(digest)

    def put(self, digest: str, data: bytes) -> None:
        self._load()  # what this run appends is found through the index
        if digest not in self._bad and self.has(digest):
            try:  # a copy that is there may be damaged: only a verified one spares the write
                if self.get(digest) == data:
                    return
            except CacheCorrupt:
                pass
        self.append(digest, data)

    def append(self, digest: str, data: bytes) -> Packed:
        """Append a blob to this process's pack without looking for a copy first (a worker
        storing what its units made: the driver learns where it went, `learn`)."""
        index = self._load() if self._index is not None else None
        writer = self._writer
        if writer is None:
            self._name = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}.pack"
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
            writer = self._writer = os.fdopen(self._files.open(self._file(self._name), flags), "ab")
        offset = writer.tell()
        with naming(self.folder / self._name):
            writer.write(data)
        where = Packed(self._name, offset, len(data))
        if index is not None:
            index[digest] = where
        self._bad.discard(digest)
        body = f"{digest} {self._name} {offset} {len(data)}"
        self._pending.append(line_checksum(body.encode("ascii")) + f" {body}\n".encode("ascii"))
        if len(self._pending) >= self.FLUSH_EVERY:
            self.flush()
        return where

    def learn(self, digest: str, where: Packed) -> None:
        """Where another process (a worker of this run) appended a blob and flushed its index
        line: read from there (and checked against the digest) like any packed blob."""
        self._load()[digest] = where
        self._bad.discard(digest)

    def close(self) -> None:
        """Flush, and close the pack written and those read."""
        self.flush()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self.close_readers()

    def flush(self) -> None:
        if self._writer is not None:
            with naming(self.folder / self._name):
                self._writer.flush()
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            append_lines(self._files, self._file("index.log"), data)

    def _file(self, name: str) -> str:
        """A file of the packs folder, relative to the cache folder."""
        return f"{self._relfolder}/{name}"
