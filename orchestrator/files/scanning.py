"""Scanning the project into its file table, and what moved since the last scan.

A rescan is what ninja pays plus what git's untracked cache pays: every known file is `stat`ed
and compared with its stored signature (size, mtime, ctime, inode, device: an in-place rewrite
that keeps size and mtime still moves ctime), and a folder is listed again only when its own
mtime or inode moved (adding, removing or renaming an entry updates its folder's mtime). On a
machine with more than one core the stats are split between the driver and a forked child. A
file or folder modified within the clock's granularity of the scan is stored as unknown, so a
second change inside the same tick cannot hide behind an equal signature (git's "racily clean"
rule). A resident process told by a file watcher what moved (`orchestrate watch`) rescans only
those entries and their folders, by the same rules.

Entries the build does not read (`projectfiles.py`: a link leading out, a special file, a file
over the size limit, a name with a control character) are rows too, marked in `table.refused`
and left out of the listing stages see: one that appears or goes is a listing change like a
file added or removed, and a file that becomes refused (or readable again) counts as removed (or
added), so the stages that list the project (collect, which reports them) plan again.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Iterable
from typing import NamedTuple

from ..hashing import digest_bytes
from .changes import FileChanges
from .filetable import COLUMNS, DIGEST_SIZE, NO_DIGEST, UNKNOWN, FileTable, Signature, signature_of
from .listing import Entry, Listing, list_folder
from .projectfiles import ProjectFiles, Refusal
from .statpass import GONE, check_paths, check_signatures

RACY_NS = 2_000_000_000


class ScanResult(NamedTuple):
    table: FileTable
    changes: FileChanges
    relisted: int  # folders listed again
    racy: int  # entries too fresh to trust next time


def scan(
    root: str,
    skip: set[str],
    previous: FileTable | None,
    files: ProjectFiles | None = None,
    paths: Iterable[str] | None = None,
) -> ScanResult:
    """The table of the project under `root` now (links to folders not followed; folders in
    `skip`, absolute paths, left out; entries `files` refuses marked), with what changed since
    `previous` (scanned under the same policy: the caller drops a table of another). `paths`
    (relative to the root): only these entries can have moved since `previous` (a file
    watcher's word), so only they and their folders are looked at; None: every entry."""
    files = files or ProjectFiles(root)
    if previous is None or not previous.folders:
        return _rescan_all(root, skip, files)
    fresh_after = time.time_ns() - RACY_NS
    if paths is None:
        moved, changed = check_signatures(files, previous)
    else:
        moved, changed = check_paths(files, previous, paths)
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
        patched = _patch_listings(root, skip, files, table, moved, changed, changes, fresh_after)
        if patched is not None:  # the same names: an edit saved through a rename, a touch
            racy += patched
            relisted = len(moved)
        else:
            table, listed, relisted = _relist(
                root, skip, files, table, moved, changed, changes, fresh_after
            )
            racy += listed
    else:
        relisted = 0
    changes.added.sort()
    changes.removed.sort()
    changes.modified.sort()
    return ScanResult(table, changes, relisted, racy)


def learn_unread_digests(files: ProjectFiles, table: FileTable, read: set[str]) -> int:
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
        data, st = files.read(table.paths[row])
        if data is not None and st is not None and table.describes(row, signature_of(st)):
            table.set_digest(row, digest_bytes(data))
            learned += 1
    return learned


def _rescan_all(root: str, skip: set[str], files: ProjectFiles) -> ScanResult:
    """A first scan: list every folder."""
    fresh_after = time.time_ns() - RACY_NS
    table, racy, listed = FileTable(files.policy), 0, []
    stack = [""]
    while stack:
        rel = stack.pop()
        found = list_folder(root, rel, skip, files)
        if found is None:
            continue
        listed.append((rel, found))
        stack.extend(f"{rel}{name}/" for name in found.subfolders)
    listed.sort(key=lambda item: item[0])
    for rel, (mtime, ino, entries, names) in listed:
        racy += _append_folder(table, rel, mtime, ino, names, fresh_after)
        for entry in entries:
            racy += _append_row(table, rel + entry.name, entry, NO_DIGEST, fresh_after)
    table.folder_start.append(len(table.paths))
    return ScanResult(table, FileChanges(added=sorted(table.paths)), len(listed), racy)


def _set_row(table: FileTable, row: int, sig: Signature, fresh_after: int) -> int:
    """Patch one file's signature in place (its digest becomes unknown); 1 if it is racy. A
    refused entry that moved is listed again instead (statpass.py): this one stays readable."""
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
    table: FileTable, path: str, entry: Entry | Signature, digest: bytes, fresh_after: int
) -> int:
    if isinstance(entry, Entry):
        sig = entry.signature
        if entry.refusal is not None:
            table.refused[path] = entry.refusal
    else:
        sig = entry
    racy = sig.mtime > fresh_after
    c = table.columns
    table.paths.append(path)
    c["size"].append(sig.size)
    # A racy file is stored with an impossible mtime: the next scan sees it as moved.
    c["mtime"].append(UNKNOWN if racy else sig.mtime)
    c["ctime"].append(sig.ctime)
    c["ino"].append(sig.ino)
    c["dev"].append(sig.dev)
    table.digests.extend(digest)
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
    files: ProjectFiles,
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
        found = list_folder(root, rel, skip, files)
        if found is None or found.subfolders != table.subfolders[i]:
            return None
        start, end = table.folder_start[i], table.folder_start[i + 1]
        entries = found.files
        if len(entries) != end - start or any(
            table.paths[start + k] != rel + entry.name for k, entry in enumerate(entries)
        ):
            return None
        listed[i] = found
    racy = 0
    for i, (mtime, ino, entries, _) in listed.items():
        folder_racy = mtime > fresh_after
        racy += int(folder_racy)
        table.folder_mtime[i] = UNKNOWN if folder_racy else mtime
        table.folder_ino[i] = ino
        start = table.folder_start[i]
        for k, entry in enumerate(entries):
            row = start + k
            path = table.paths[row]
            refused = table.refused.get(path)
            if refused == entry.refusal and (
                row in changed or table.signature(row) == entry.signature
            ):
                continue
            _note_change(changes, path, refused, entry.refusal, table.digest(row))
            if entry.refusal is None:
                table.refused.pop(path, None)
            else:
                table.refused[path] = entry.refusal
            racy += _set_row(table, row, entry.signature, fresh_after)
    return racy


def _note_change(
    changes: FileChanges,
    path: str,
    before: Refusal | None,
    after: Refusal | None,
    digest: str | None,
) -> None:
    """Note an entry whose signature or refusal moved: modified; removed when it became
    refused, added when it became readable (the listing stages see changed)."""
    if before is None and after is not None:
        changes.removed.append(path)
    elif before is not None and after is None:
        changes.added.append(path)
    elif before is None:
        changes.modified.append(path)
        if digest is not None:
            changes.old_digests[path] = digest
    elif before != after:  # refused still, for another reason: the problem said changes
        changes.removed.append(path)
        changes.added.append(path)


def _gone_folders(
    listings: dict[str, Listing | None], old: FileTable, index: dict[str, int]
) -> tuple[str, ...]:
    """The old folders the listings show gone: each listed and missing, and each sub-folder a
    listed folder had and has no longer (everything below them went with them)."""
    gone = []
    for rel, found in listings.items():
        if found is None:
            gone.append(rel)
            continue
        i = index.get(rel)
        if i is not None:
            now = set(found.subfolders)
            gone.extend(f"{rel}{name}/" for name in old.subfolders[i] if name not in now)
    return tuple(gone)


def _relist(
    root: str,
    skip: set[str],
    files: ProjectFiles,
    old: FileTable,
    moved: set[int],
    changed: dict[int, Signature],
    changes: FileChanges,
    fresh_after: int,
) -> tuple[FileTable, int, int]:
    """A new table: folders that moved listed again (and new folders below them), the others'
    rows copied as they are. Returns (table, racy entries, folders listed)."""
    index = {rel: i for i, rel in enumerate(old.folders)}
    listings: dict[str, Listing | None] = {}
    stack = [old.folders[i] for i in moved]
    while stack:
        rel = stack.pop()
        if rel in listings:
            continue
        found = list_folder(root, rel, skip, files)
        listings[rel] = found
        if found is None:
            continue
        for name in found.subfolders:
            child = f"{rel}{name}/"
            i = index.get(child)
            if i is None or i in moved:
                stack.append(child)
    # The folders now: the old ones not removed, and the new ones listed. An old folder is
    # gone when it, or a folder above it, was listed and missing, or is no longer among the
    # sub-folders its listed parent has: one prefix test a folder (100,000 of them), not a
    # walk up its parents.
    gone = _gone_folders(listings, old, index)

    def exists(rel: str) -> bool:
        """Whether an old folder is still reachable: no folder above it, nor it, went."""
        return not rel.startswith(gone)

    names = sorted(
        {rel for rel in old.folders if exists(rel)}
        | {rel for rel, found in listings.items() if found is not None}
    )
    table = FileTable(old.policy, old.stored)  # only the parts that moved are written again
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
            table.digests.extend(old.digests[start * DIGEST_SIZE : end * DIGEST_SIZE])
            continue
        mtime, ino, entries, subfolders = found
        racy += _append_folder(table, rel, mtime, ino, subfolders, fresh_after)
        known = (
            {old.paths[r]: r for r in range(old.folder_start[i], old.folder_start[i + 1])}
            if i is not None
            else {}
        )
        for entry in entries:
            path = rel + entry.name
            r = known.pop(path, None)
            refused = old.refused.get(path)
            if r is None:
                changes.added.append(path)
                digest = NO_DIGEST
            elif old.signature(r) != entry.signature or refused != entry.refusal:
                if r not in changed or refused != entry.refusal:  # not counted by the stat pass
                    _note_change(changes, path, refused, entry.refusal, old.digest(r))
                digest = NO_DIGEST
            else:
                digest = bytes(old.digests[r * DIGEST_SIZE : (r + 1) * DIGEST_SIZE])
            racy += _append_row(table, path, entry, digest, fresh_after)
        changes.removed.extend(known)
    table.folder_start.append(len(table.paths))
    for path, refusal in old.refused.items():  # those of the folders copied as they were
        folder = path[: path.rfind("/") + 1]
        if folder not in listings and folder in index and exists(folder):
            table.refused[path] = refusal
    kept = set(names)
    for j, rel in enumerate(old.folders):  # folders gone with everything in them
        if rel not in kept:
            changes.removed.extend(old.paths[old.folder_start[j] : old.folder_start[j + 1]])
    return table, racy, len(listings)
