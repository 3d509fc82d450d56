"""One folder of the project as the scan lists it: its files with their signatures, each marked
with why the build does not read it (`projectfiles.py`), and its sub-folders (links to folders
are not followed)."""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from ..errors import ProjectError
from .filetable import Signature, signature_of
from .outputs import control_character
from .projectfiles import LINK_OUTSIDE, UNSAFE_NAME, ProjectFiles, Refusal


class Entry(NamedTuple):
    """A file of a folder listing: its name, signature, and why it is not read (or None)."""

    name: str
    signature: Signature
    refusal: Refusal | None


class Listing(NamedTuple):
    mtime: int
    ino: int
    files: list[Entry]  # sorted by name
    subfolders: tuple[str, ...]


def list_folder(root: str, rel: str, skip: set[str], files: ProjectFiles) -> Listing | None:
    """The folder's files (links followed while `files` allows), refused ones marked, and its
    sub-folder names."""
    folder = f"{root}/{rel}" if rel else root
    try:
        st = os.stat(folder) if not rel else os.lstat(folder)
        items = list(os.scandir(folder))
    except PermissionError as exc:
        raise ProjectError(f"cannot list folder: {exc.strerror}", file=folder) from None
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):  # a folder listed before, a link now: its files are
        files.listed(rel[:-1], real=False)  # checked again as they are read
    entries = []
    subfolders = []
    limit = files.policy.max_size
    for item in items:
        name = item.name
        if not name.isascii():
            _check_name(item.path)
        if not name.isprintable() and (found := control_character(name)) is not None:
            # Left out whatever it is: a newline in a path would start another line of
            # whatever names it (a log, a report, a ledger).
            own = item.stat(follow_symlinks=False)
            entries.append(Entry(name, signature_of(own), Refusal(UNSAFE_NAME, found)))
            continue
        if item.is_dir(follow_symlinks=False):
            if item.path not in skip:
                subfolders.append(name)
                files.listed(rel + name, real=True)
            continue
        try:
            target = item.stat(follow_symlinks=True)
            if stat.S_ISDIR(target.st_mode):
                files.listed(rel + name, real=False)
                continue  # a link to a folder: not followed
            linked = item.is_symlink()
            if not linked and stat.S_ISREG(target.st_mode) and target.st_size <= limit:
                entries.append(Entry(name, signature_of(target), None))  # the usual case
                continue
            own = item.stat(follow_symlinks=False) if linked else target
            refusal = files.refusal(rel + name, own, target)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOENT):  # a link loop; gone
                continue
            raise ProjectError(f"cannot read: {exc.strerror}", file=item.path) from None
        # A link refused for where it leads is known by its own signature (where it leads
        # changes only with it); any other entry by its target's.
        shown = own if refusal is not None and refusal.kind == LINK_OUTSIDE else target
        entries.append(Entry(name, signature_of(shown), refusal))
    entries.sort()
    return Listing(st.st_mtime_ns, st.st_ino, entries, tuple(sorted(subfolders)))


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
