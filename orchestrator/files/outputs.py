"""The output folder: one safe path for every write into it, and the ledger of what was published.

`OutputFolder` is how every write (the engine's `ctx.publish_bytes`, a report, a bundle, the
lock, the ledger) reaches a file of the folder: it refuses a path that could leave the folder
(absolute, `..`, a drive, a backslash, an empty segment, a control character), and opens every
step below the folder without following a symbolic link (`cache/confined.py`).

The ledger (`reports/.orchestrate.published`) lists the files builds published into the folder,
as JSON lines: a header line, then `{"path": …}` per file, so no name can make a line that says
something else. A path is added before its file is written, so a killed run leaves no published
file unlisted. `orchestrate clean` removes exactly the files of the entries it parses and the
folders they leave empty: what else the folder holds stays. A complete run removes what earlier
builds published and it did not (`prune_output`), and lists only what it published.

A ledger of an earlier release (one path a line, no header) is read strictly — a line that is
not a safe output path without control characters is no entry — and rewritten as JSON lines
by the next run that publishes.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from pathlib import Path
from typing import NamedTuple

import orjson

from ..errors import ProjectError
from .atomic import atomic_write, naming
from .confined import ConfinedFolder

LEDGER = "reports/.orchestrate.published"
LOCK = "reports/.orchestrate.lock"  # orchestrator/lock.py
LEDGER_HEADER = b'{"ledger": "files published into this folder by orchestrate", "version": 2}'
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def control_character(text: str) -> str | None:
    """The first control character (C0 or DEL) in `text`, as `U+000A`; None when it has none.
    Names that become files, ledger lines or log lines must hold none."""
    if text.isprintable():  # the usual case, without a regex
        return None
    found = _CONTROL.search(text)
    return f"U+{ord(found.group()):04X}" if found else None


def safe_parts(relpath: str) -> list[str]:
    """The segments of an output-relative path; ProjectError if it could leave the folder."""
    parts = relpath.split("/")
    if (
        not relpath
        or relpath.startswith("/")
        or "\\" in relpath
        or ":" in relpath
        or control_character(relpath) is not None
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise ProjectError(
            f"refusing to write outside the output folder: {relpath!r}", key="output"
        )
    return parts


class OutputFolder(ConfinedFolder):
    """An output folder, resolved once: output-relative paths checked, links never followed."""

    def __init__(self, output_dir: str | os.PathLike) -> None:
        super().__init__(output_dir, "output folder")
        self._checked: set[str] = set()  # a publish names each of thousands of files twice

    def check(self, relpath: str) -> None:
        if relpath not in self._checked:
            safe_parts(relpath)
            self._checked.add(relpath)

    def path(self, relpath: str) -> Path:
        """The absolute path of an output file (to name it); ProjectError if it would land
        outside."""
        self.check(relpath)
        return super().path(relpath)


class Ledger:
    """The list of files builds published into an output folder (see the module docstring)."""

    def __init__(self, folder: OutputFolder) -> None:
        self.folder = folder
        self._known: set[str] | None = None

    @property
    def path(self) -> Path:
        return self.folder.path(LEDGER)

    def exists(self) -> bool:
        return self.folder.is_file(LEDGER)

    def entries(self) -> list[str]:
        """The listed paths, in the order they were first published (a torn last line and
        lines that are no entry ignored)."""
        return self._read()[0]

    def _read(self) -> tuple[list[str], bool]:
        """(the entries, whether the file is of the current format or absent)."""
        try:
            data = self.folder.read(LEDGER)
        except OSError as exc:
            raise ProjectError(
                f"cannot read the list of published files: {exc.strerror}", file=str(self.path)
            ) from None
        if data is None:
            return [], True
        complete = data.split(b"\n")[:-1]  # after the last newline: nothing, or a torn line
        current = bool(complete) and complete[0] == LEDGER_HEADER
        parse = _json_entry if current else _old_entry
        found = (parse(line) for line in (complete[1:] if current else complete))
        return list(dict.fromkeys(path for path in found if path is not None)), current

    def record(self, relpath: str) -> None:
        """List a file about to be published (once)."""
        if self._known is None:
            entries, current = self._read()
            if not current:  # an earlier release's ledger: rewritten in this format first
                self.rewrite(entries)
            self._known = set(entries)
        if relpath in self._known:
            return
        line = orjson.dumps({"path": relpath}) + b"\n"
        fd = self.folder.open(LEDGER, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # A line a killed run tore: its file was never written (a path is listed
                # first), and ours must not join it. Only the lock holder writes here.
                size = os.pread(fd, size, 0).rfind(b"\n") + 1
                os.ftruncate(fd, size)
            with naming(self.path):
                os.write(fd, line if size else LEDGER_HEADER + b"\n" + line)
        finally:
            os.close(fd)
        self._known.add(relpath)

    def rewrite(self, entries: list[str]) -> None:
        """Make the ledger list exactly `entries` (atomically)."""
        lines = [LEDGER_HEADER, *(orjson.dumps({"path": path}) for path in entries)]
        atomic_write(self.folder, LEDGER, b"\n".join(lines) + b"\n")
        self._known = set(entries)


def _json_entry(line: bytes) -> str | None:
    try:
        entry = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    path = entry.get("path") if isinstance(entry, dict) else None
    return path if isinstance(path, str) and _is_output_path(path) else None


def _old_entry(line: bytes) -> str | None:
    try:
        path = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return path if _is_output_path(path) else None


def _is_output_path(path: str) -> bool:
    try:
        safe_parts(path)
    except ProjectError:  # a tampered ledger must not make us touch anything else
        return False
    return True


class Cleaned(NamedTuple):
    removed: list[str]  # files removed, output-relative
    kept: int  # files left in the folder (not published by a build)
    ledger_found: bool


def clean_output(output_dir: str | os.PathLike) -> Cleaned:
    """Remove the files builds published into `output_dir` and the folders they leave empty.

    Call it holding the folder's lock. Without a ledger nothing is removed."""
    folder = OutputFolder(output_dir)
    ledger = Ledger(folder)
    if not ledger.exists():
        return Cleaned([], _count_files(folder), False)
    removed = remove_published(folder, ledger.entries())
    for relpath in (LEDGER, LOCK):
        with contextlib.suppress(FileNotFoundError):
            folder.unlink(relpath)
    folder.remove_empty_folders(LOCK.rpartition("/")[0])
    kept = _count_files(folder)
    if kept == 0 and folder.exists() and not any(folder.base.iterdir()):
        folder.forget()
        folder.base.rmdir()
    return Cleaned(removed, kept, True)


def prune_output(folder: OutputFolder, published: set[str]) -> list[str]:
    """After a complete run: remove what earlier builds published into the folder and this run
    did not (a stale bundle a lost manifest no longer names among them), and list only what it
    published. Call it holding the folder's lock. Returns what was removed."""
    ledger = Ledger(folder)
    listed = ledger.entries()
    removed = remove_published(folder, [path for path in listed if path not in published])
    ledger.rewrite([path for path in listed if path in published])
    return removed


def remove_published(folder: OutputFolder, relpaths: list[str]) -> list[str]:
    """Remove these output files (regular files only: a link or a folder found under a listed
    name, or a file behind a linked folder, is left alone) and the folders they leave empty; returns those removed."""
    removed = []
    for relpath in relpaths:
        try:
            found = folder.lstat(relpath)
            if found is None or not stat.S_ISREG(found.st_mode):
                continue
            folder.unlink(relpath)
        except (FileNotFoundError, ProjectError):  # gone, or behind a link: not ours to touch
            continue
        removed.append(relpath)
        folder.remove_empty_folders(relpath.rpartition("/")[0])
    return removed


def _count_files(folder: ConfinedFolder) -> int:
    return sum(len(files) for _, _, files, _ in folder.walk())
