"""What a stage sees of the run on the driver: the build file, the project's files, the output
folder, and what the stage itself stored last time."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..cache.state import BuildState
from ..files.atomic import atomic_write
from ..files.filetable import FileTable, signature_of
from ..files.outputs import Ledger, OutputFolder
from ..files.projectfiles import ProjectFiles, Refusal
from ..files.reads import ENTRY_MARK, entry_read
from ..hashing import digest_bytes, digest_file
from ..typing import BuildSettings, FileEntry
from .outcomes import StageReport
from .values import EntryDigests


class Context:
    """Driver-side services for stages: config sections, the file table, digests, publishing."""

    def __init__(
        self,
        build: BuildSettings,
        project: ProjectFiles,
        state: BuildState,
        files: FileTable,
        log,
        load_result: Callable[[str], Any],
        resident: bool = False,
    ) -> None:
        self.build = build
        self.resident = resident  # a resident session's build (StageContext.resident)
        self.project = project  # the project's root and what of it the build reads
        self.root = project.root
        self.build_dir = build.dir
        self.output_dir = build.output_dir
        self.output_folder = OutputFolder(build.output_dir)
        self.ledger = Ledger(self.output_folder)
        self.log = log
        self.state = state
        self.files = files
        self.published: set[str] = set()
        self.rewritten: list[str] = []
        self.reports: list[StageReport] = []
        self.load_result = load_result  # digest of a stored unit result → the result
        self.entries = EntryDigests(state.values)  # what units' entry reads are checked against
        self._walk: list[FileEntry] | None = None
        self._listing: str | None = None  # digest of the listing (listing_digest)
        # Files units read whose digest the table could not take (moved since the scan): no
        # digest may be learned for them later in the run (scanning.learn_unread_digests).
        self.unsettled: set[str] = set()
        self.begin_stage(previous=None)

    def begin_stage(self, previous: Any) -> None:
        """Start recording what the next stage's driver code depends on; `previous` is the
        stage's outputs as the last run stored them (`ctx.previous[name]`), None when it has no
        record it may use."""
        self.previous = previous
        self.stage_reads: dict[str, str | None] = {}
        self.stage_walked = False  # the stage listed the project: files added or removed reach it
        self.stage_external: dict[str, str | None] = {}
        self.stage_published: set[str] = set()
        # What each file the stage published was found or left as (one `stat`): its record
        # keeps these signatures without asking the folder again for thousands of bundles.
        self.stage_signatures: dict[str, os.stat_result] = {}

    def section(self, name: str) -> Any:
        return self.build.section(name)

    # -- the project's files -------------------------------------------------------------------
    def walk(self) -> list[FileEntry]:
        """Every file under the project root the build reads, sorted by path (links to folders
        not followed; what `refused_files` lists left out).

        The output and cache folders are skipped when they sit inside the project.
        """
        self.stage_walked = True
        return self._entries()

    def _entries(self) -> list[FileEntry]:
        if self._walk is None:
            self._walk = self.files.entries()
        return self._walk

    def listing_digest(self) -> str:
        """A digest of the project's listing as `walk` and `refused_files` give it (the paths,
        and why an entry is refused), recording nothing: what a stage that listed the project
        depends on besides the files it read (its whole-stage entry: core/stageentries.py)."""
        if self._listing is None:
            lines = [entry.path for entry in self._entries()]
            lines += [
                f"{path}\0{kind}\0{why}" for path, (kind, why) in sorted(self.files.refused.items())
            ]
            self._listing = digest_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
        return self._listing

    def refused_files(self) -> dict[str, Refusal]:
        """The project's entries the build does not read, by path, with why (a link leading
        out, a special file, a file over the size limit, a name with a control character:
        projectfiles.py). Part of the listing: a stage that asks depends on it as on `walk`."""
        self.stage_walked = True
        return dict(self.files.refused)

    def file_digest(self, relpath: str) -> str | None:
        """Content digest of a project file (None if absent), recorded as a read of the stage."""
        digest = self.digest_of(relpath)
        self.stage_reads[relpath] = digest
        return digest

    def digest_of(self, relpath: str) -> str | None:
        """Content digest of a project file now (None if absent): the table's when known, else
        hashed (and remembered under the signature of what was read). For the trace path of an
        entry read (files/reads.py), the entry's digest as the build state holds it."""
        read = entry_read(relpath)
        if read is not None:
            return self.entries.digest(read)
        row = self.files.row(relpath)
        if row is not None:
            known = self.files.digest(row)
            if known is not None:
                return known
        data, st = self.project.read(relpath)
        if data is None:
            return None
        digest = digest_bytes(data)
        if row is not None and st is not None and self.files.describes(row, signature_of(st)):
            self.files.set_digest(row, digest)
        return digest

    def note_reads(self, reads: dict[str, str | None], signatures: dict[str, tuple]) -> None:
        """Remember the digests units computed, under the signatures of the files they read."""
        files = self.files
        for path, digest in reads.items():
            if digest is None or path.startswith(ENTRY_MARK):  # an entry read: not a file's
                continue
            row = files.row(path)
            if row is None or files.digest(row) == digest:
                continue
            signature = signatures.get(path)
            if signature is not None and files.describes(row, signature):
                files.set_digest(row, digest)
            else:
                self.unsettled.add(path)

    def track_file(self, path: str | os.PathLike) -> str | None:
        """Digest of a file outside the project that driver code reads (a rule file), recorded
        as the stage's: when it changes, the stage runs again."""
        key = str(Path(path).resolve())
        digest = self.digest_outside(key)
        self.stage_external[key] = digest
        return digest

    @staticmethod
    def digest_outside(path: str) -> str | None:
        """Digest of a file outside the project now (None if absent), recording nothing."""
        try:
            return digest_file(path)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def adopt_published(self, published: Iterable[str]) -> None:
        """Count files a skipped stage's last run published as published by this run too (so
        its record keeps them, and `clean` and the prune after a run keep them)."""
        self.stage_published.update(published)
        self.published.update(published)

    # -- the output folder -------------------------------------------------------------------
    def output_path(self, relpath: str) -> Path:
        """The absolute path of an output file; refuses anything that would land outside
        (orchestrator/outputs.py)."""
        return self.output_folder.path(relpath)

    def mark_published(self, relpath: str) -> bool:
        """Note an output file the stage found already right (so a later skip checks it too);
        False, noting nothing, when it is not as the folder's last publication of it left it
        (deleted, edited, replaced): the stage must publish it again."""
        st = self.output_folder.lstat(relpath)
        if st is None or not stat.S_ISREG(st.st_mode):
            return False
        if self.state.outputs.digest(relpath, st) is None:
            return False
        self._published(relpath, st)
        return True

    def output_holds(self, relpath: str, size: int, digest: str) -> bool:
        """Whether an output file already holds the bytes of this size and digest (their digest
        remembered by signature, or read); if so it counts as published by the stage."""
        st = self.output_folder.lstat(relpath)
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != size:
            return False
        if self.output_digest(relpath, st) != digest:
            return False
        self._published(relpath, st)
        return True

    def _published(self, relpath: str, st: os.stat_result) -> None:
        """A file found right, as `st` says it is: published by the stage."""
        self.ledger.record(relpath)
        self.published.add(relpath)
        self.stage_published.add(relpath)
        self.stage_signatures[relpath] = st

    def output_digest(self, relpath: str, st: os.stat_result) -> str:
        """The digest of an output file as it is (remembered by signature across runs)."""
        known = self.state.outputs.digest(relpath, st)
        if known is not None:
            return known
        digest = digest_file(self.output_folder.open(relpath, os.O_RDONLY))
        self.state.outputs.put(relpath, st, digest)
        return digest

    def publish_bytes(self, relpath: str, data: bytes) -> bool:
        """Write an output file atomically; an unchanged file is left alone (keeps its mtime)."""
        folder = self.output_folder
        self.ledger.record(relpath)  # listed before it exists: `clean` finds every file
        self.published.add(relpath)
        self.stage_published.add(relpath)
        self.stage_signatures.pop(relpath, None)
        st = folder.lstat(relpath)
        digest = digest_bytes(data)
        if (
            st is not None
            and stat.S_ISREG(st.st_mode)
            and st.st_size == len(data)
            and self.output_digest(relpath, st) == digest
        ):
            self.stage_signatures[relpath] = st
            return False
        atomic_write(folder, relpath, data)
        written = folder.lstat(relpath)
        assert written is not None  # just renamed into place, the folder locked
        self.state.outputs.put(relpath, written, digest)
        self.stage_signatures[relpath] = written
        self.rewritten.append(relpath)
        return True
