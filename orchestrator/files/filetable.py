"""The project's files as one table of columns: path, stat signature, content digest.

It replaces a tree snapshot, a stat cache and a digest map with one structure: parallel arrays
(`array('q')` for numbers, one `bytearray` for digests), not a Python object per file, loaded
from and saved to the scope's database as a few blobs. `scanning.py` fills and patches it.
Digests are known for files some unit has read (the reader hashes what it reads) or that
changed signature since (hashed again only when someone asks).
"""

from __future__ import annotations

import os
from array import array
from typing import NamedTuple

import orjson

from ..typing import FileEntry
from .projectfiles import FilePolicy, Refusal

DIGEST_SIZE = 32
NO_DIGEST = bytes(DIGEST_SIZE)
UNKNOWN = -1

COLUMNS = ("size", "mtime", "ctime", "ino", "dev")


class Signature(NamedTuple):
    """What `stat` says of a file; equal signatures mean unchanged content (racy files aside)."""

    size: int
    mtime: int
    ctime: int
    ino: int
    dev: int


def signature_of(st: os.stat_result) -> Signature:
    return Signature(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


class FileTable:
    """Files sorted by (folder, name); each folder's files are one run of rows."""

    def __init__(
        self, policy: FilePolicy | None = None, stored: dict[str, str] | None = None
    ) -> None:
        self.paths: list[str] = []
        self.columns: dict[str, array] = {name: array("q") for name in COLUMNS}
        self.digests = bytearray()
        self.folders: list[str] = []  # "" for the root, else "a/b/"
        self.folder_mtime = array("q")
        self.folder_ino = array("q")
        self.folder_start = array("q")  # first file row of each folder; one more entry at the end
        self.subfolders: list[tuple[str, ...]] = []  # names of each folder's sub-folders
        self._row: dict[str, int] | None = None
        self.changed = False  # digests learned since it was loaded or scanned (worth saving)
        # digest of each stored part, as loaded or last saved (a rescan takes its table's: only
        # the parts that moved are written)
        self.stored: dict[str, str] = dict(stored or {})
        self._folders: set[str] | None = None
        # Entries the build does not read (rows all the same: their changes are listing
        # changes), and the policy that refused them (None: a table of an earlier release).
        self.refused: dict[str, Refusal] = {}
        self.policy = policy

    def mark_changed(self) -> None:
        """Worth saving: a scan moved it, or digests were learned."""
        self.changed = True

    def saved(self, parts: dict[str, str]) -> None:
        """These parts (name → digest) were just stored; nothing is left to save."""
        self.stored.update(parts)
        self.changed = False

    # -- lookups -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.paths)

    def row(self, relpath: str) -> int | None:
        if self._row is None:
            self._row = dict(zip(self.paths, range(len(self.paths))))
        return self._row.get(relpath)

    def signature(self, row: int) -> Signature:
        c = self.columns
        return Signature(
            c["size"][row], c["mtime"][row], c["ctime"][row], c["ino"][row], c["dev"][row]
        )

    def digest(self, row: int) -> str | None:
        raw = bytes(self.digests[row * DIGEST_SIZE : (row + 1) * DIGEST_SIZE])
        return None if raw == NO_DIGEST else raw.hex()

    def set_digest(self, row: int, digest: str | None) -> None:
        raw = bytes.fromhex(digest) if digest else NO_DIGEST
        span = slice(row * DIGEST_SIZE, (row + 1) * DIGEST_SIZE)
        if self.digests[span] != raw:
            self.digests[span] = raw
            self.changed = True

    def describes(self, row: int, signature: Signature | tuple) -> bool:
        """Whether bytes read under `signature` are the row's: the same signature, or the same
        but for the mtime of a racy row (its digest is checked again by the next scan, which
        sees the row as moved, so it cannot hide a change)."""
        known = self.signature(row)
        if tuple(signature) == tuple(known):
            return True
        return known.mtime == UNKNOWN and tuple(signature[:1]) + tuple(signature[2:]) == (
            known.size,
            known.ctime,
            known.ino,
            known.dev,
        )

    def tracks(self, root: str, relpath: str, digest: str | None) -> bool:
        """Whether a rescan would notice a change to this read: a file read is in the table; a
        file looked for and absent would appear in a folder the table lists (not behind a
        folder link, nor in a skipped folder, nor outside the project)."""
        if digest is not None:
            return self.row(relpath) is not None
        if relpath.startswith(("../", "/")) or "/../" in relpath:
            return False
        if self._folders is None:
            self._folders = set(self.folders)
        parent = relpath.rpartition("/")[0]
        if (parent + "/" if parent else "") in self._folders:
            return True
        while parent:  # the first missing folder must be missing from a listed one
            missing, parent = parent, parent.rpartition("/")[0]
            if (parent + "/" if parent else "") in self._folders:
                return not os.path.lexists(f"{root}/{missing}")
        return False

    def entries(self) -> list[FileEntry]:
        """Every file the build reads as a FileEntry, sorted by path (built on demand: the
        listing's view; refused entries left out)."""
        c = self.columns
        found = [
            FileEntry(p, s, m, i) for p, s, m, i in zip(self.paths, c["size"], c["mtime"], c["ino"])
        ]
        if self.refused:
            found = [entry for entry in found if entry.path not in self.refused]
        found.sort()
        return found

    def sorted_paths(self) -> list[str]:
        return sorted(self.paths)

    # -- storage ---------------------------------------------------------------------------------
    def to_blobs(self) -> dict[str, bytes]:
        blobs = {name: column.tobytes() for name, column in self.columns.items()}
        blobs["shape"] = array("q", [len(self.paths), len(self.folders)]).tobytes()
        blobs["paths"] = "\0".join(self.paths).encode("utf-8", "surrogateescape")
        blobs["digests"] = bytes(self.digests)
        blobs["folders"] = "\0".join(self.folders).encode("utf-8", "surrogateescape")
        blobs["folder_mtime"] = self.folder_mtime.tobytes()
        blobs["folder_ino"] = self.folder_ino.tobytes()
        blobs["folder_start"] = self.folder_start.tobytes()
        blobs["subfolders"] = "\0".join("/".join(names) for names in self.subfolders).encode(
            "utf-8", "surrogateescape"
        )
        blobs["refused"] = orjson.dumps({path: list(why) for path, why in self.refused.items()})
        blobs["policy"] = orjson.dumps(list(self.policy) if self.policy is not None else None)
        return blobs

    @classmethod
    def from_blobs(cls, blobs: dict[str, bytes], stored: dict[str, str] | None = None) -> FileTable:
        """The table stored by `to_blobs` (`stored`: the digests of those parts); ValueError when
        the blobs do not agree."""
        policy = orjson.loads(blobs.get("policy", b"null"))
        table = cls(FilePolicy(*policy) if policy is not None else None, stored)
        table._restore(blobs)
        return table

    def _restore(self, blobs: dict[str, bytes]) -> None:
        shape = array("q")
        shape.frombytes(blobs["shape"])
        n, f = shape
        text = blobs["paths"].decode("utf-8", "surrogateescape")
        self.paths = text.split("\0") if n else []
        for name in COLUMNS:
            self.columns[name].frombytes(blobs[name])
        self.digests = bytearray(blobs["digests"])
        text = blobs["folders"].decode("utf-8", "surrogateescape")
        self.folders = text.split("\0") if f else []
        self.folder_mtime.frombytes(blobs["folder_mtime"])
        self.folder_ino.frombytes(blobs["folder_ino"])
        self.folder_start.frombytes(blobs["folder_start"])
        text = blobs["subfolders"].decode("utf-8", "surrogateescape")
        parts = text.split("\0") if f else []
        self.subfolders = [tuple(p.split("/")) if p else () for p in parts]
        refused = orjson.loads(blobs.get("refused", b"{}"))
        self.refused = {path: Refusal(*why) for path, why in refused.items()}
        if (
            len(self.paths) != n
            or len(self.folders) != f
            or any(len(c) != n for c in self.columns.values())
            or len(self.digests) != n * DIGEST_SIZE
            or len(self.folder_mtime) != f
            or len(self.folder_ino) != f
            or len(self.subfolders) != f
            or len(self.folder_start) != f + 1
            or (f and self.folder_start[-1] != n)
        ):
            raise ValueError("file table columns disagree")
