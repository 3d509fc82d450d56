"""A file reader that records every read (and every miss) so a unit's cache key can include it.

Units never open project files directly: they call `reader.read_bytes(relpath)` and
`reader.exists(relpath)`. The recorded trace — relpath → content digest, or None for a file looked
for and not found — becomes part of the unit's constructive trace. A unit that looks up entries
of a keyed input (a GUID in the index) says so with `reader.entry(value, key, entries)`, or
`reader.whole(value)` when it iterates the value: such a read is recorded in the same trace
under a path no project file can have (`entry_path`), found or missing, and the driver fills in
the entry's digest as the build state holds it (`core/context.py`), so a change to one entry
re-runs only the units that read it. On a worker that does not share
the driver's file system, the reader serves preloaded bytes and raises `MissingInput` for anything
else, so the driver can resend the unit with that file. What it reads from disk goes through
`projectfiles.ProjectFiles`: a link leading out of the project, a special file or a file over the
size limit reads as missing, as the scan sees it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, TypeVar

from ..errors import MissingInput
from ..hashing import digest_bytes
from .projectfiles import FilePolicy, ProjectFiles

T = TypeVar("T")

#: What starts the path of an entry read in a unit's trace: a control character, which no
#: project file's name holds (the scan leaves such names out), so it is never a file's path.
ENTRY_MARK = "\x1e"
#: The digest an entry read carries until the driver fills in the stored entry's.
FOUND = "found"


class EntryRead(NamedTuple):
    """A read of a stage value recorded in a unit's trace: one entry, or the whole value."""

    value: str
    key: str | None  # None: the unit iterated the whole value

    def describe(self) -> str:
        """In words, for --explain: `index entry repo/1027c4d1-…`, `index (read whole)`."""
        return (
            f"{self.value} (read whole)" if self.key is None else f"{self.value} entry {self.key}"
        )


def entry_path(value: str, key: str) -> str:
    """The trace path of entry `key` of value `value`."""
    return f"{ENTRY_MARK}{value}/{key}"


def whole_path(value: str) -> str:
    """The trace path of a read of the whole of `value`."""
    return ENTRY_MARK + value


def entry_read(path: str) -> EntryRead | None:
    """The entry read a trace path names; None for a file's path."""
    if not path.startswith(ENTRY_MARK):
        return None
    value, found, key = path[1:].partition("/")
    return EntryRead(value, key if found else None)


def describe_read(path: str, notes: Mapping[tuple[str, str], str] | None = None) -> str:
    """A trace path in words: a file's path as it is, an entry read by value and key, and how
    the entry changed when `notes` (value, key → words: cache/entries.py) say."""
    read = entry_read(path)
    if read is None:
        return path
    note = notes.get((read.value, read.key)) if notes and read.key is not None else None
    return f"{read.describe()}: {note}" if note else read.describe()


def to_posix(path: str) -> str:
    return path.replace(os.sep, "/") if os.sep != "/" else path


class SentFiles(NamedTuple):
    """Project files read on the driver's machine for a worker that cannot see them: their
    bytes (None: absent) and the signature each was read under, so that the digest the worker
    reports is remembered as it is for a file a unit read from disk (without it, a file written
    just before the build stays racily clean, and the next run takes it for an edit)."""

    data: dict[str, bytes | None]
    signatures: dict[str, tuple]


def file_signature(st: os.stat_result) -> tuple:
    """The stat signature the file table compares (filetable.Signature's fields)."""
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def read_for_worker(files: ProjectFiles, relpaths: Iterable[str]) -> SentFiles:
    """Project files (read under the build's policy), with their signatures, for a worker."""
    sent = SentFiles({}, {})
    for relpath in relpaths:
        data, st = files.read(relpath)
        sent.data[relpath] = data
        if st is not None:
            sent.signatures[relpath] = file_signature(st)
    return sent


class Reader:
    """Reads project files by project-relative path, recording (relpath → digest | None)."""

    def __init__(
        self,
        root: str,
        preloaded: Mapping[str, bytes | None] | None = None,
        disk: bool = True,
        blobs: Mapping[str, object] | None = None,
        fetch: Callable[[list[str]], SentFiles] | None = None,
        signed: Mapping[str, tuple] | None = None,
        policy: FilePolicy | None = None,
        files: ProjectFiles | None = None,
    ) -> None:
        self.root = to_posix(os.path.abspath(root))
        # Links out, special and huge files read as missing. `files`: the driver's own, which
        # knows the folders its scan listed (a reader of its own checks each folder again).
        self._files = files if files is not None else ProjectFiles(self.root, policy)
        self._preloaded = dict(preloaded or {})
        self._signed = dict(signed or {})  # the signatures the preloaded bytes were read under
        self._disk = disk
        self._fetch = fetch  # asks the driver's machine for files this worker was not sent
        self._blobs = blobs or {}
        self.reads: dict[str, str | None] = {}
        # relpath → the stat signature of what was read (so the driver may remember the digest
        # under it), from disk here or on the driver's machine
        self.signatures: dict[str, tuple] = {}

    def blob(self, digest: str):
        """A stored result another stage produced, declared in the unit's `blobs`."""
        return self._blobs[digest]

    # -- entries of the stage's inputs ---------------------------------------------------------
    def entry(self, value: str, key: str, entries: Mapping[str, T]) -> T | None:
        """Entry `key` of the stage's keyed input `value`, as `entries` (that input, or what
        the plan sent of it) holds it; None when it has none. The read, or the miss, enters the
        unit's trace: the unit runs again when that entry changes, appears or goes."""
        path = ENTRY_MARK + value + "/" + key
        try:
            found = entries[key]
        except KeyError:
            self.reads[path] = None
            return None
        self.reads[path] = FOUND
        return found

    def whole(self, value: str) -> None:
        """Record that the unit read the whole of input `value` (it iterated it, or handed it
        to code that cannot say what it looks up): any change to the value runs it again."""
        self.reads[ENTRY_MARK + value] = FOUND

    # -- paths -------------------------------------------------------------------------------
    def abspath(self, relpath: str) -> str:
        """Absolute `/`-separated path of a project-relative path."""
        return f"{self.root}/{relpath}" if relpath else self.root

    def relpath(self, path: str) -> str | None:
        """Project-relative form of an absolute or relative path, or None if outside the root."""
        path = to_posix(path)
        if not path.startswith("/") and not (len(path) > 1 and path[1] == ":"):
            path = f"{self.root}/{path}"
        path = os.path.normpath(path).replace(os.sep, "/")
        if path == self.root:
            return ""
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix) :] if path.startswith(prefix) else None

    # -- reads -------------------------------------------------------------------------------
    def read_bytes(self, relpath: str) -> bytes:
        """The bytes of a project file; raises FileNotFoundError (recorded as a miss)."""
        if relpath.startswith(ENTRY_MARK):  # no file has such a name: its trace is an entry's
            raise FileNotFoundError(self.abspath(relpath))
        data = self._load(relpath)
        if data is None:
            self.reads[relpath] = None
            raise FileNotFoundError(self.abspath(relpath))
        self.reads[relpath] = digest_bytes(data)
        return data

    def prefetch(self, relpaths: list[str]) -> None:
        """Hint that these files will be read: a worker without the project asks for all of
        them in one round trip instead of one each (nothing is recorded until they are read)."""
        if not self._disk and self._fetch is not None:
            wanted = [p for p in relpaths if p not in self._preloaded]
            if wanted:
                self._receive(self._fetch(wanted))

    def exists(self, relpath: str) -> bool:
        """Whether a project file exists (records the file's digest, or the miss)."""
        if relpath in self.reads:
            return self.reads[relpath] is not None
        try:
            self.read_bytes(relpath)
        except FileNotFoundError:
            return False
        return True

    def _receive(self, sent: SentFiles) -> None:
        self._preloaded.update(sent.data)
        self._signed.update(sent.signatures)

    def _load(self, relpath: str) -> bytes | None:
        if relpath not in self._preloaded and not self._disk:
            if self._fetch is None:
                raise MissingInput(relpath)
            self._receive(self._fetch([relpath]))
        if relpath in self._preloaded:
            signature = self._signed.get(relpath)
            if signature is not None:
                self.signatures[relpath] = signature
            return self._preloaded[relpath]
        data, st = self._files.read(relpath)
        if st is not None:
            self.signatures[relpath] = file_signature(st)
        return data
