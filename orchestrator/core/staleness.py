"""What moved for one stage since its record: the reasons it must run, or proof that it need not.

A stage's record (cache/records.py) holds its fingerprint (declaration, product code, libraries,
the build-file slice it reads), the generation at which it last ran, the outside files it
tracked and the files it published. Against that, this module finds the project files that
changed since (the state's change log), the entries of each input value that changed (their
generations), and the units that read either (the reverse index: a unit's trace holds the
entries it looked up as it holds the files it read): everything `update` is told, and what
decides a skip. It only asks: nothing here changes the state or the context.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cache.entries import FEW_KEYS
from ..cache.records import NO_RECORD, Fingerprint, StageRecord, output_signature
from ..cache.state import BuildState
from ..files.changes import FileChanges
from ..files.reads import describe_read, entry_path, entry_read, whole_path
from ..keyed import Changes
from ..typing import PROJECT, StageSpec
from .context import Context


@dataclass(frozen=True)
class Staleness:
    """One stage's standing against its record."""

    record: StageRecord | None  # the record, when it still applies (same fingerprint)
    why_all: str  # why every unit runs when there is no usable record
    file_changes: FileChanges = field(default_factory=FileChanges)  # since the record
    dirty: dict[str, list[str]] = field(default_factory=dict)  # unit → changed files it read
    inputs: dict[str, Changes] = field(default_factory=dict)  # input value → entries changed

    @property
    def usable(self) -> bool:
        return self.record is not None

    def modified_files(self) -> tuple[str, ...]:
        return tuple(self.file_changes.modified)


def assess(
    spec: StageSpec,
    record: StageRecord | None,
    now: Fingerprint,
    state: BuildState,
    ctx: Context,
    voided: str | None = None,
) -> Staleness:
    """What changed for the stage since `record` (None: it never ran). `voided` says why the
    record may not be used although it exists (--no-cache, a restart after damage)."""
    if voided is not None:
        return Staleness(None, voided)
    if record is None or record.fingerprint != now:
        return Staleness(None, change_from(now, record.fingerprint if record else None))
    since = record.generation
    file_changes = state.files.changes_since(since)
    inputs = input_changes(spec, state, since, file_changes)
    paths = set(file_changes.paths()) | outside_changes(record, ctx)
    paths |= entry_changes(spec.name, inputs, state)
    dirty = state.units.readers(spec.name, sorted(paths)) if paths else {}
    return Staleness(record, NO_RECORD, file_changes, dirty, inputs)


def change_from(now: Fingerprint, old: Fingerprint | None) -> str:
    """Why a record made under fingerprint `old` no longer applies to a stage now at `now`."""
    if old is None:
        return NO_RECORD
    if old.version != now.version:
        return f"stage version changed ({old.version} → {now.version})"
    if old.code != now.code:
        return "the product's code changed"
    if old.libs != now.libs:
        return "tool or library version changed"
    if old.slice != now.slice:
        return "build-file slice changed"
    return NO_RECORD


def must_run(staleness: Staleness, ctx: Context) -> str | None:
    """Why the stage cannot be skipped (for --explain), or None when nothing it depends on
    moved: no unit's file, no input entry, no listing it walked, no outside file it tracked,
    no file it published."""
    record = staleness.record
    if record is None:  # why_all: what voided the record (NO_RECORD: there was none)
        return (
            "no record of an earlier run" if staleness.why_all == NO_RECORD else staleness.why_all
        )
    if staleness.dirty:
        read = sorted({path for paths in staleness.dirty.values() for path in paths})
        entries = sum(1 for path in read if entry_read(path) is not None)
        what = "files" if not entries else "entries" if entries == len(read) else "inputs"
        shown = [describe_read(path, ctx.entries.notes) for path in read]
        return f"{len(staleness.dirty)} unit(s) read changed {what}: {few(shown)}"
    moved = {name: changes for name, changes in staleness.inputs.items() if changes}
    if moved:
        return "inputs changed: " + ", ".join(
            name if c.touched == {""} else f"{name} ({len(c.touched)} entries)"
            for name, c in moved.items()
        )
    if record.walked:
        listed = sorted(staleness.file_changes.added + staleness.file_changes.removed)
        if listed:
            return f"the project's listing changed: {few(listed)}"
    return moved_output(record, ctx)


def few(paths: list[str], shown: int = 3) -> str:
    """The first paths of a list, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def outside_changes(record: StageRecord, ctx: Context) -> set[str]:
    """Files the stage's units read that the file table does not track (outside the project,
    behind a folder link) and that changed since."""
    return {path for path, digest in record.outside.items() if ctx.digest_of(path) != digest}


def entry_changes(stage: str, inputs: dict[str, Changes], state: BuildState) -> set[str]:
    """The trace paths of the entry reads the changes of the stage's inputs reach: each entry
    changed, added or removed, and the whole of every value that moved (files/reads.py). A
    value none of the stage's units read entries of is passed over without a path per key."""
    paths: set[str] = set()
    for name, changes in inputs.items():
        if name == PROJECT or not changes:
            continue
        paths.add(whole_path(name))
        if len(changes.touched) > FEW_KEYS and not state.units.reads_entries(stage, name):
            continue
        paths.update(entry_path(name, key) for key in changes.touched)
    return paths


def input_changes(
    spec: StageSpec, state: BuildState, since: int, file_changes: FileChanges
) -> dict[str, Changes]:
    """Per input: the keys changed and removed since generation `since` (the project's files
    for PROJECT)."""
    found: dict[str, Changes] = {}
    for name in spec.inputs:
        if name == PROJECT:
            changed = frozenset(file_changes.added + file_changes.modified)
            found[name] = Changes(changed, frozenset(file_changes.removed) - changed)
        elif state.values.generation(name) > since:
            found[name] = state.values.changes(name, since)
        else:
            found[name] = Changes(frozenset(), frozenset())
    return found


def moved_output(record: StageRecord, ctx: Context) -> str | None:
    """What moved among the outside files the stage tracked and the files it published; None
    when they are as it left them."""
    for path, digest in record.external.items():
        if ctx.digest_outside(path) != digest:
            return f"a file it read outside the project changed: {path}"
    for path, signature in record.published.items():
        st = ctx.output_folder.lstat(path)  # a link put in its place is not the file published
        if st is None:
            return f"a file it published is gone: {path}"
        if output_signature(st) != tuple(signature):
            return f"a file it published was changed: {path}"
    return None
