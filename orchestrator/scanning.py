"""Scanning the project into its file table, and what moved since the last scan.

A rescan is what ninja pays plus what git's untracked cache pays: every known file is `stat`ed
and compared with its stored signature (size, mtime, ctime, inode, device: an in-place rewrite
that keeps size and mtime still moves ctime), and a folder is listed again only when its own
mtime or inode moved (adding, removing or renaming an entry updates its folder's mtime). On a
machine with more than one core the stats are split between the driver and a forked child. A
file or folder modified within the clock's granularity of the scan is stored as unknown, so a
second change inside the same tick cannot hide behind an equal signature (git's "racily clean"
rule).
"""

from __future__ import annotations

import errno
import os
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

from .errors import ProjectError
from .filetable import COLUMNS, DIGEST_SIZE, NO_DIGEST, UNKNOWN, FileTable, Signature, signature_of
from .hashing import digest_bytes
from .reads import read_project_file
from .statpass import GONE, check_signatures

RACY_NS = 2_000_000_000


@dataclass
class FileChanges:
    """What a scan found moved since the last one."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)  # signature changed (content may not have)
    old_digests: dict[str, str] = field(default_factory=dict)  # modified path → digest before

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.modified)

    @property
    def listing_changed(self) -> bool:
        return bool(self.added or self.removed)


class ScanResult(NamedTuple):
    table: FileTable
    changes: FileChanges
    relisted: int  # folders listed again
    racy: int  # entries too fresh to trust next time


def scan(root: str, skip: set[str], previous: FileTable | None) -> ScanResult:
    """The table of the project under `root` now (links to folders not followed; folders in
    `skip`, absolute paths, left out), with what changed since `previous`."""
    if previous is None or not previous.folders:
        return _rescan_all(root, skip)
    fresh_after = time.time_ns() - RACY_NS
    moved, changed = check_signatures(root, previous)
    if not moved and not changed:
        return ScanResult(previous, FileChanges(), 0, 0)  # a no-op: the table as it was
    changes = FileChanges()
    racy = 0
    table = previous
    for row, sig in changed.items():
        if sig == GONE:  # removed (or no longer a file): its folder is listed again
            moved.add(bisect_right(table.folder_start, row) - 1)
            continue
        changes.modified.append(table.paths[row])
        old = table.digest(row)
        if old is not None:
            changes.old_digests[table.paths[row]] = old
        racy += _set_row(table, row, sig, fresh_after)
    if moved:
        patched = _patch_listings(root, skip, table, moved, changed, changes, fresh_after)
        if patched is not None:  # the same names: an edit saved through a rename, a touch
            racy += patched
            relisted = len(moved)
        else:
            table, listed, relisted = _relist(
                root, skip, table, moved, changed, changes, fresh_after
            )
            racy += listed
    else:
        relisted = 0
    changes.added.sort()
    changes.removed.sort()
    changes.modified.sort()
    return ScanResult(table, changes, relisted, racy)


def learn_unread_digests(root: str, table: FileTable, read: set[str]) -> int:
    """Hash the racily clean files no one read in this run (a file written just before the
    build that no unit opened: a payload nothing cooked). The next scan sees such a row as moved
    and can tell an edit from a touch only by its digest; without one it would log the file as
    modified and the stages reading the project would run again with nothing changed. Safe at
    the end of a run for a file still as the scan found it: no result depends on its bytes (a
    file units `read` keeps the digest they read, or none), and the next scan hashes it again.
    Returns how many it hashed."""
    mtimes, learned = table.columns["mtime"], 0
    for row in [row for row, mtime in enumerate(mtimes) if mtime == UNKNOWN]:
        if table.digest(row) is not None or table.paths[row] in read:
            continue
        data, st = read_project_file(f"{root}/{table.paths[row]}", with_stat=True)
        if data is not None and st is not None and table.describes(row, signature_of(st)):
            table.set_digest(row, digest_bytes(data))
            learned += 1
    return learned


def _rescan_all(root: str, skip: set[str]) -> ScanResult:
    """A first scan: list every folder."""
    fresh_after = time.time_ns() - RACY_NS
    table, racy, listed = FileTable(), 0, []
    stack = [""]
    while stack:
        rel = stack.pop()
        found = _list(root, rel, skip)
        if found is None:
            continue
        listed.append((rel, found))
        stack.extend(f"{rel}{name}/" for name in found[3])
    listed.sort(key=lambda item: item[0])
    for rel, (mtime, ino, files, names) in listed:
        racy += _append_folder(table, rel, mtime, ino, names, fresh_after)
        for name, sig in files:
            racy += _append_row(table, rel + name, sig, NO_DIGEST, fresh_after)
    table.folder_start.append(len(table.paths))
    return ScanResult(table, FileChanges(added=sorted(table.paths)), len(listed), racy)


def _set_row(table: FileTable, row: int, sig: Signature, fresh_after: int) -> int:
    """Patch one file's signature in place (its digest becomes unknown); 1 if it is racy."""
    racy = sig.mtime > fresh_after
    c = table.columns
    c["size"][row], c["ctime"][row], c["ino"][row], c["dev"][row] = (
        sig.size,
        sig.ctime,
        sig.ino,
        sig.dev,
    )
    c["mtime"][row] = UNKNOWN if racy else sig.mtime
    table.digests[row * DIGEST_SIZE : (row + 1) * DIGEST_SIZE] = NO_DIGEST
    return int(racy)


def _append_row(
    table: FileTable, path: str, sig: Signature, digest: bytes, fresh_after: int
) -> int:
    racy = sig.mtime > fresh_after
    c = table.columns
    table.paths.append(path)
    c["size"].append(sig.size)
    # A racy file is stored with an impossible mtime: the next scan sees it as moved.
    c["mtime"].append(UNKNOWN if racy else sig.mtime)
    c["ctime"].append(sig.ctime)
    c["ino"].append(sig.ino)
    c["dev"].append(sig.dev)
    table.digests += digest
    return int(racy)


def _append_folder(
    table: FileTable, rel: str, mtime: int, ino: int, names: tuple[str, ...], fresh_after: int
) -> int:
    racy = mtime > fresh_after
    table.folders.append(rel)
    table.folder_mtime.append(UNKNOWN if racy else mtime)  # a racy folder is listed again
    table.folder_ino.append(ino)
    table.folder_start.append(len(table.paths))
    table.subfolders.append(names)
    return int(racy)


def _patch_listings(
    root: str,
    skip: set[str],
    table: FileTable,
    moved: set[int],
    changed: dict[int, Signature],
    changes: FileChanges,
    fresh_after: int,
) -> int | None:
    """When every moved folder still holds the same names (an editor that saves through a
    temporary file and a rename moves its folder), patch the table in place instead of
    building a new one; None when a name came or went. Returns the racy entries."""
    listed = {}
    for i in moved:
        rel = table.folders[i]
        found = _list(root, rel, skip)
        if found is None or found[3] != table.subfolders[i]:
            return None
        start, end = table.folder_start[i], table.folder_start[i + 1]
        files = found[2]
        if len(files) != end - start or any(
            table.paths[start + k] != rel + name for k, (name, _) in enumerate(files)
        ):
            return None
        listed[i] = found
    racy = 0
    for i, (mtime, ino, files, _) in listed.items():
        folder_racy = mtime > fresh_after
        racy += int(folder_racy)
        table.folder_mtime[i] = UNKNOWN if folder_racy else mtime
        table.folder_ino[i] = ino
        start = table.folder_start[i]
        for k, (_, sig) in enumerate(files):
            row = start + k
            if row in changed or table.signature(row) == sig:
                continue
            path = table.paths[row]
            changes.modified.append(path)
            known = table.digest(row)
            if known is not None:
                changes.old_digests[path] = known
            racy += _set_row(table, row, sig, fresh_after)
    return racy


def _relist(
    root: str,
    skip: set[str],
    old: FileTable,
    moved: set[int],
    changed: dict[int, Signature],
    changes: FileChanges,
    fresh_after: int,
) -> tuple[FileTable, int, int]:
    """A new table: folders that moved listed again (and new folders below them), the others'
    rows copied as they are. Returns (table, racy entries, folders listed)."""
    index = {rel: i for i, rel in enumerate(old.folders)}
    listings: dict[str, tuple[int, int, list, tuple[str, ...]] | None] = {}
    stack = [old.folders[i] for i in moved]
    while stack:
        rel = stack.pop()
        if rel in listings:
            continue
        found = _list(root, rel, skip)
        listings[rel] = found
        if found is None:
            continue
        for name in found[3]:
            child = f"{rel}{name}/"
            i = index.get(child)
            if i is None or i in moved:
                stack.append(child)
    # The folders now: the old ones not removed, and the new ones listed.
    alive: dict[str, bool] = {}

    def exists(rel: str) -> bool:
        """Whether an old folder is still reachable: its parent still lists it."""
        if rel == "":
            return listings.get("", True) is not None
        known = alive.get(rel)
        if known is None:
            parent, _, name = rel[:-1].rpartition("/")
            parent = f"{parent}/" if parent else ""
            listing = listings.get(parent)
            if listing is not None:
                known = name in listing[3] and listings.get(rel, True) is not None
            elif parent in listings:  # the parent itself vanished
                known = False
            else:
                known = exists(parent) and name in old.subfolders[index[parent]]
            alive[rel] = known
        return known

    names = sorted(
        {rel for rel in old.folders if exists(rel)}
        | {rel for rel, found in listings.items() if found is not None}
    )
    table = FileTable()
    table.stored = old.stored  # what is saved already: only the parts that moved are written
    racy = 0
    c, oc = table.columns, old.columns
    for rel in names:
        found = listings.get(rel)
        i = index.get(rel)
        if found is None:  # an old folder, unmoved: copy its rows
            assert i is not None  # a folder neither listed nor known is not in `names`
            start, end = old.folder_start[i], old.folder_start[i + 1]
            racy += _append_folder(
                table, rel, old.folder_mtime[i], old.folder_ino[i], old.subfolders[i], fresh_after
            )
            table.paths.extend(old.paths[start:end])
            for column in COLUMNS:
                c[column].extend(oc[column][start:end])
            table.digests += old.digests[start * DIGEST_SIZE : end * DIGEST_SIZE]
            continue
        mtime, ino, files, subfolders = found
        racy += _append_folder(table, rel, mtime, ino, subfolders, fresh_after)
        known = (
            {old.paths[r]: r for r in range(old.folder_start[i], old.folder_start[i + 1])}
            if i is not None
            else {}
        )
        for name, sig in files:
            path = rel + name
            r = known.pop(path, None)
            if r is None:
                changes.added.append(path)
                digest = NO_DIGEST
            elif old.signature(r) != sig:
                if r not in changed:  # not already counted by the stat pass
                    changes.modified.append(path)
                    known_digest = old.digest(r)
                    if known_digest is not None:
                        changes.old_digests[path] = known_digest
                digest = NO_DIGEST
            else:
                digest = bytes(old.digests[r * DIGEST_SIZE : (r + 1) * DIGEST_SIZE])
            racy += _append_row(table, path, sig, digest, fresh_after)
        changes.removed.extend(known)
    table.folder_start.append(len(table.paths))
    kept = set(names)
    for j, rel in enumerate(old.folders):  # folders gone with everything in them
        if rel not in kept:
            changes.removed.extend(old.paths[old.folder_start[j] : old.folder_start[j + 1]])
    return table, racy, len(listings)


def _list(root: str, rel: str, skip: set[str]) -> tuple[int, int, list, tuple[str, ...]] | None:
    """(mtime, inode, [(name, signature)] of regular files (links followed), sub-folder names)."""
    folder = f"{root}/{rel}" if rel else root
    try:
        st = os.stat(folder) if not rel else os.lstat(folder)
        entries = list(os.scandir(folder))
    except PermissionError as exc:
        raise ProjectError(f"cannot list folder: {exc.strerror}", file=folder) from None
    except (FileNotFoundError, NotADirectoryError):
        return None
    files = []
    subfolders = []
    for item in entries:
        if not item.name.isascii():
            _check_name(item.path)
        if item.is_dir(follow_symlinks=False):
            if item.path not in skip:
                subfolders.append(item.name)
            continue
        try:
            if not item.is_file(follow_symlinks=True):
                continue
            files.append((item.name, signature_of(item.stat(follow_symlinks=True))))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT):  # a link loop; gone
                continue
            raise ProjectError(f"cannot read: {exc.strerror}", file=item.path) from None
    files.sort()
    return st.st_mtime_ns, st.st_ino, files, tuple(sorted(subfolders))


def _check_name(path: str) -> None:
    """Refuse a name that is not UTF-8 (the file table, the build state and every stored value
    hold paths as UTF-8 text), naming it as well as it can be printed."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise ProjectError(
            "file name is not valid UTF-8; rename it (paths are stored as UTF-8 text)",
            file=shown,
        ) from None
