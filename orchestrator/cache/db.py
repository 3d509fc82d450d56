"""Opening the cache's SQLite databases: WAL, a schema version, and damage handled by dropping.

SQLite (standard library) was picked over LMDB by measurement at 100,000 resources (bulk-writing
650,000 reverse-index rows and 230,000 unit rows, then point lookups): LMDB wrote about twice
as fast (0.41 s and 0.15 s against 0.55 s and 0.53 s with sorted batches), but SQLite's
indexed queries serve the reverse lookups an incremental run needs, WAL lets concurrent runs
share the action cache, and it needs no map size and no extra package. A database that fails
to open, has another schema version or turns out damaged is moved aside and started again: it
only ever holds what a build can recompute.

WAL keeps its index in shared memory, which machines sharing a network file system do not
share: on such a file system (NFS, SMB, 9p, FUSE, cluster file systems; found in the mount
table) the databases use SQLite's rollback journal and POSIX locks instead.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CacheCorrupt, StepFailed
from ..files.confined import ConfinedFolder

BUSY_TIMEOUT_MS = 60_000
#: What SQLite reports when the file system refuses a read, or a write for any reason but a
#: full disk (a full quota among them): the database is not damaged, the machine is in trouble.
IO_REFUSED = {
    sqlite3.SQLITE_IOERR_READ,
    sqlite3.SQLITE_IOERR_WRITE,
    sqlite3.SQLITE_IOERR_FSYNC,
    sqlite3.SQLITE_IOERR_DIR_FSYNC,
    sqlite3.SQLITE_IOERR_TRUNCATE,
    sqlite3.SQLITE_IOERR_SHMSIZE,
}
#: What SQLite reports for a file that is not (or no longer) a sound database.
DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_IOERR_SHORT_READ}


def open_db(
    path: Path, schema: str, version: int, log=None, folder: ConfinedFolder | None = None
) -> sqlite3.Connection:
    """A connection to the database at `path` with `schema` applied; a database of another
    version is replaced, one that cannot be read is set aside first. `folder` is the cache
    folder that holds it (else its own folder): no link below it is followed."""
    if folder is None:
        folder, relpath = ConfinedFolder(path.parent, "cache folder"), path.name
    else:
        relpath = Path(path).relative_to(folder.base).as_posix()
    for attempt in range(3):
        try:
            db = _connect(folder.database(relpath))
            found = db.execute("PRAGMA user_version").fetchone()[0]
            if found not in (0, version):
                db.close()
                # Nothing in it is worth a post-mortem: another release's layout, recomputable.
                discard(path, f"schema version {found}, this release uses {version}", log)
                continue
            if found == 0:
                db.executescript(schema)
                db.execute(f"PRAGMA user_version = {version}")
            return db
        except sqlite3.DatabaseError as exc:
            raise_if_outside(exc, path)
            if attempt == 2 or not is_damage(exc):
                raise CacheCorrupt(f"cannot open {path}: {exc}") from None
            set_aside(path, str(exc), log)
    raise AssertionError("unreachable")


NETWORK_FILE_SYSTEMS = (
    "nfs",
    "nfs4",
    "cifs",
    "smb",
    "smb3",
    "smbfs",
    "9p",
    "fuse",
    "ceph",
    "glusterfs",
    "lustre",
    "gpfs",
    "beegfs",
    "afs",
    "davfs",
    "sshfs",
)


def file_system_type(path: Path, mounts: str | None = None) -> str:
    """The type of the file system `path` is on, from the mount table ("" when unknown)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
    target = os.path.realpath(path)
    best, found = -1, ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, found = len(point), fields[2]
    return found


def journal_mode(path: Path, mounts: str | None = None) -> str:
    """WAL, or the rollback journal for a database on a network file system."""
    kind = file_system_type(path.parent, mounts)
    shared = any(kind == name or kind.startswith(name + ".") for name in NETWORK_FILE_SYSTEMS)
    return "DELETE" if shared else "WAL"


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(
        path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
    )
    db.execute(f"PRAGMA journal_mode = {journal_mode(path)}")
    db.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; WAL keeps it consistent
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA cache_size = -65536")
    return db


def discard(path: Path, why: str, log=None) -> None:
    """Delete a database of another release (and its WAL): it is started again empty."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    if log is not None:
        log.info("cache.replaced", file=str(path), reason=why)


def set_aside(path: Path, why: str, log=None) -> None:
    """Move a damaged database (and its WAL) out of the way, for a post-mortem."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for suffix in ("", "-wal", "-shm"):
        source = Path(f"{path}{suffix}")
        if source.exists():
            os.replace(source, Path(f"{path}.damaged-{stamp}{suffix}"))
    if log is not None:
        log.warning("cache.dropped", file=str(path), reason=why)


def is_damage(exc: BaseException) -> bool:
    """Whether a database error means the file is damaged (as opposed to busy or full)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code in DAMAGED or (code & 0xFF) == sqlite3.SQLITE_CORRUPT
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def raise_if_outside(exc: BaseException, path: Path) -> None:
    """A database write the machine refused fails the build as any other write would: a full
    disk as ENOSPC (exit 4, "the disk is full"), another refused read or write (a full quota, a
    failing disk) as a failed step (exit 4) naming the file. Neither is damage: nothing is set
    aside."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from None
    if code in IO_REFUSED:
        raise StepFailed(
            f"the file system refused the cache database: {exc} (a full quota or a failing disk)",
            file=str(path),
        ) from None


# -- a forked copy of this process (executors/forked.py) ---------------------------------------
#: What to do in a forked child, by the object it is about; and what keeps a fork from being
#: safe now, by the object that makes it so. Both functions of a class (never bound methods:
#: they would hold the object alive for ever), called with the object.
_IN_CHILD: weakref.WeakKeyDictionary[Any, Callable[[Any], None]] = weakref.WeakKeyDictionary()
_HAZARDS: weakref.WeakKeyDictionary[Any, Callable[[Any], str | None]] = weakref.WeakKeyDictionary()
#: The connections a forked child inherited: kept open and never used. Closing one in the child
#: could checkpoint or unlock a database its parent is using.
_INHERITED: list[sqlite3.Connection] = []


def in_forked_child(owner: Any, forget: Callable[[Any], None]) -> None:
    """Call `forget(owner)` in a forked copy of this process (an object holding a connection
    lets go of it there, to open its own on demand: `inherited` keeps it)."""
    _IN_CHILD[owner] = forget


def inherited(connection: sqlite3.Connection | None) -> None:
    """Keep a connection a forked child must not use, nor close."""
    if connection is not None:
        _INHERITED.append(connection)


def note_hazard(owner: Any, why: Callable[[Any], str | None]) -> None:
    """While `owner` lives, `why(owner)` says what makes forking this process unsafe now
    (None: nothing)."""
    _HAZARDS[owner] = why


def fork_hazard() -> str | None:
    """What keeps this process from forking a helper now, or None."""
    for owner, why in list(_HAZARDS.items()):
        found = why(owner)
        if found is not None:
            return found
    return None


def _after_fork_in_child() -> None:
    for owner, forget in list(_IN_CHILD.items()):
        forget(owner)


os.register_at_fork(after_in_child=_after_fork_in_child)
