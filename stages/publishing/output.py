"""Putting the build into the output folder safely: bundles, then loose files, manifest last.

A reader of the output folder never sees a half-written file (temporary file, then rename) nor a
manifest naming a file that is not there yet (bundles go first, `manifest.json` last); files of
bundles that disappeared are removed only once the new manifest is in place. An unchanged file is
not rewritten, so it keeps its time stamp. Nothing is written or removed outside the folder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import NamedTuple

import orjson

from orchestrator import OutputFolder as SafeOutputFolder
from orchestrator import ProjectError, atomic_write, digest_bytes, digest_file, remove_published

from .manifests import LINK_XML, MANIFEST, STAGING, named_bundle_files


class OutputFolder(SafeOutputFolder):
    """The output folder of one publish: the engine's safe paths (each parent folder checked
    once), and whether a file already holds given bytes.

    A publish names thousands of bundle files in a few folders; resolving every file's path
    again cost more than the checks themselves.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike,
        digest_of: Callable[[str, os.stat_result], str] | None = None,
    ) -> None:
        super().__init__(output_dir)
        # The engine remembers the digests of published files by signature (ctx.output_digest),
        # so an unchanged bundle is not read again on every publish.
        self._digest_of = digest_of

    def matches(self, relpath: str, size: int, raw_hash: str) -> bool:
        """Whether the output file `relpath` already holds exactly these bytes (a regular
        file: a link in its place is not followed)."""
        try:
            st = self.lstat(relpath)
            if st is None or not stat.S_ISREG(st.st_mode) or st.st_size != size:
                return False
            if self._digest_of is not None:
                return self._digest_of(relpath, st) == raw_hash
            return digest_file(self.open(relpath, os.O_RDONLY)) == raw_hash
        except OSError:
            return False


def write_if_changed(output_dir: str | os.PathLike, relpath: str, data: bytes) -> bool:
    """Atomically write `data` unless the file already holds it; True if it was written.

    The engine's `ctx.publish_bytes` has this contract; this is the reference implementation.
    """
    folder = OutputFolder(output_dir)
    if folder.matches(relpath, len(data), digest_bytes(data)):
        return False
    atomic_write(folder, relpath, data)
    return True


def previous_bundle_files(output_dir: str | os.PathLike, ours: bool = False) -> list[str]:
    """The bundle files the manifest now in the folder names ([] if none or unreadable).

    `ours`: the manifest is bytes this engine published (its signature is the recorded one),
    so its files are found line by line instead of parsing the whole document.
    """
    try:
        data = SafeOutputFolder(output_dir).read(MANIFEST)  # no link followed
        if data is None:
            return []
        found = named_bundle_files(data) if ours else None
        if found is not None:
            return found
        document = orjson.loads(data)
        return sorted({b["file"] for b in document["bundles"].values()})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ProjectError):
        return []


def remove_stale(output_dir: str | os.PathLike, previous: list[str], keep: set[str]) -> list[str]:
    """Remove files the previous manifest named and the new one does not, and folders they
    leave empty; only ever inside the output folder. Returns what was removed."""
    folder = SafeOutputFolder(output_dir)
    stale = []
    for relpath in previous:
        if relpath in keep or relpath in (MANIFEST, STAGING, LINK_XML):
            continue
        try:
            folder.check(relpath)
        except ProjectError:
            continue  # a tampered manifest must not make us delete anything else
        stale.append(relpath)
    return remove_published(folder, stale)


class NamedFiles(NamedTuple):
    """The bundle files a manifest this process published names, by the manifest's digest."""

    manifest: str
    files: list[str]


class LastPublished:
    """The files the last manifest this process published names: a resident build (`orchestrate
    watch`) publishes again into the same folder, and finding them in the 24 MB manifest of
    100,000 assets cost it more than the rest of the check for stale files. Keyed by the
    manifest's digest as the engine remembers the file in the folder, so it answers only for
    those very bytes."""

    def __init__(self) -> None:
        self.kept: NamedFiles | None = None

    def files(self, ctx, folder: OutputFolder) -> list[str] | None:
        digest = _manifest_digest(ctx, folder)
        kept = self.kept
        return list(kept.files) if kept is not None and kept.manifest == digest else None

    def remember(self, ctx, folder: OutputFolder, files: list[str]) -> None:
        digest = _manifest_digest(ctx, folder)
        self.kept = None if digest is None else NamedFiles(digest, files)


def _manifest_digest(ctx, folder: OutputFolder) -> str | None:
    """The digest of the manifest in the folder as the engine remembers it by its signature."""
    digest_of = getattr(ctx, "output_digest", None)
    if digest_of is None:
        return None
    st = folder.lstat(MANIFEST)
    if st is None or not stat.S_ISREG(st.st_mode):
        return None
    return digest_of(MANIFEST, st)


LAST_PUBLISHED = LastPublished()


class Published(NamedTuple):
    """What `publish_build` changed in the output folder."""

    written: list[str]  # bundle files written (the others already held their bytes)
    removed: list[str]  # stale files removed


def publish_build(
    ctx, bundle_files, load: Callable[[str], bytes], loose: dict[str, bytes], manifest: bytes
) -> Published:
    """Publish in the safe order: bundles, loose files, manifest, then remove stale bundles.

    `bundle_files` are `hash.BundleFile` records; `load(bundle name)` fetches a bundle's bytes
    from the store, called only when its file is missing or differs. Uses `ctx.output_dir` and
    `ctx.publish_bytes(relpath, data)` (atomic, unchanged files left alone).
    """
    output_dir = ctx.output_dir
    folder = OutputFolder(output_dir, getattr(ctx, "output_digest", None))
    # The engine's context checks a file once (one stat, its digest remembered by signature)
    # and counts it as published, so a later skipped run still notices it deleted or changed.
    holds = getattr(ctx, "output_holds", None) or folder.matches
    mark = getattr(ctx, "mark_published", None)
    ours = mark is not None and mark(MANIFEST)
    previous = LAST_PUBLISHED.files(ctx, folder) if ours else None
    if previous is None:
        previous = previous_bundle_files(output_dir, ours=ours)
    written = []
    for record in sorted(bundle_files, key=lambda r: r.file):
        if holds(record.file, record.size, record.raw_hash):
            continue
        data = load(record.name)
        if digest_bytes(data) != record.raw_hash:
            raise ProjectError(f"stored bytes of bundle {record.name} do not match its hash")
        ctx.publish_bytes(record.file, data)
        written.append(record.file)
    for relpath in sorted(loose):
        folder.path(relpath)
        ctx.publish_bytes(relpath, loose[relpath])
    ctx.publish_bytes(MANIFEST, manifest)
    named = {r.file for r in bundle_files}
    if mark is not None:  # the engine's context: it remembers what it published
        LAST_PUBLISHED.remember(ctx, folder, sorted(named))
    removed = remove_stale(output_dir, previous, named)
    return Published(written, removed)
