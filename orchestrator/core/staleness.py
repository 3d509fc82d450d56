"""What moved for one stage since its record: the reasons it must run, or proof that it need not.

A stage's record holds its fingerprint (declaration, product code, libraries, the build-file
slice it reads), the generation at which it last ran, the outside files it tracked and the files
it published. Against that, this module finds the project files that changed since (the
state's change log), the units that read them (the reverse index), and the entries of each
input value that changed (their generations): everything `update` is told, and what decides a
skip.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..cache.state import ScopeState
from ..hashing import digest_value
from ..keyed import Changes
from ..typing import PROJECT, StageSpec
from .context import Context

ADDED, REMOVED, MODIFIED = "added", "removed", "modified"


def fingerprint(spec: StageSpec, libs: dict[str, str], slice_value: Any) -> dict[str, Any]:
    """What a stage's results depend on besides its inputs, by part (for --explain)."""
    others = dict(libs)
    code = others.pop("code")
    return {
        "version": spec.version,
        "libs": digest_value(others)[:16],
        "code": code[:16],
        "slice": digest_value(slice_value)[:16],
    }


def fingerprint_change(old: Any, new: dict) -> str:
    """Why a stage's record no longer applies, for --explain."""
    if not isinstance(old, dict):
        return "no entry"
    if old.get("version") != new["version"]:
        return f"stage version changed ({old.get('version')} → {new['version']})"
    if old.get("code") != new["code"]:
        return "the product's code changed"
    if old.get("libs") != new["libs"]:
        return "tool or library version changed"
    if old.get("slice") != new["slice"]:
        return "build-file slice changed"
    return "no entry"


@dataclass
class Staleness:
    """One stage's standing against its record."""

    record: dict | None  # the record, when it still applies (same fingerprint)
    why_all: str  # why every unit runs when there is no usable record
    since: int = 0  # the generation the record was made at
    file_changes: list[tuple[str, str]] = field(default_factory=list)  # (path, kind) since
    dirty: dict[str, list[str]] = field(default_factory=dict)  # unit → changed files it read
    inputs: dict[str, Changes] = field(default_factory=dict)  # input value → entries changed

    @property
    def usable(self) -> bool:
        return self.record is not None

    def modified_files(self) -> tuple[str, ...]:
        return tuple(path for path, kind in self.file_changes if kind == MODIFIED)


def assess(
    spec: StageSpec, record: dict | None, fingerprint_now: dict, state: ScopeState, ctx: Context
) -> Staleness:
    """What changed for the stage since `record` (None: it never ran, or --no-cache)."""
    if record is None:
        return Staleness(None, "no entry")
    if record.get("fingerprint") != fingerprint_now:
        return Staleness(None, fingerprint_change(record.get("fingerprint"), fingerprint_now))
    since = int(record["gen"])
    file_changes = net_file_changes(state.file_changes(since))
    changed_paths = sorted({path for path, _ in file_changes} | outside_changes(record, ctx))
    dirty = state.readers(spec.name, changed_paths) if changed_paths else {}
    return Staleness(
        record,
        "no entry",
        since,
        file_changes,
        dirty,
        input_changes(spec, state, since, file_changes),
    )


def net_file_changes(logged: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """What the changes logged by several runs (oldest first) amount to for a stage that last
    ran before all of them, one per path: a file added and then edited is added, one removed
    and added again modified, one added and removed again no change at all."""
    first: dict[str, str] = {}
    last: dict[str, str] = {}
    for path, kind in logged:
        first.setdefault(path, kind)
        last[path] = kind
    net = []
    for path, kind in first.items():
        existed, exists = kind != ADDED, last[path] != REMOVED
        if existed or exists:
            net.append((path, MODIFIED if existed and exists else ADDED if exists else REMOVED))
    return net


def must_run(staleness: Staleness, ctx: Context) -> str | None:
    """Why the stage cannot be skipped (for --explain), or None when nothing it depends on
    moved: no unit's file, no input entry, no listing it walked, no outside file it tracked,
    no file it published."""
    record = staleness.record
    if record is None:  # why_all: what voided the record ("no entry": there was none)
        return (
            "no record of an earlier run" if staleness.why_all == "no entry" else staleness.why_all
        )
    if staleness.dirty:
        read = sorted({path for paths in staleness.dirty.values() for path in paths})
        return f"{len(staleness.dirty)} unit(s) read changed files: {few(read)}"
    moved = {name: changes for name, changes in staleness.inputs.items() if changes}
    if moved:
        return "inputs changed: " + ", ".join(
            name if c.touched == {""} else f"{name} ({len(c.touched)} entries)"
            for name, c in moved.items()
        )
    if record.get("walked"):
        listed = sorted(path for path, kind in staleness.file_changes if kind != MODIFIED)
        if listed:
            return f"the project's listing changed: {few(listed)}"
    return moved_output(record, ctx)


def few(paths: list[str], shown: int = 3) -> str:
    """The first paths of a list, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def outside_changes(record: dict, ctx: Context) -> set[str]:
    """Files the stage's units read that the file table does not track (outside the project,
    behind a folder link) and that changed since."""
    return {
        path
        for path, digest in (record.get("outside") or {}).items()
        if ctx.digest_of(path) != digest
    }


def input_changes(
    spec: StageSpec, state: ScopeState, since: int, file_changes: list[tuple[str, str]]
) -> dict[str, Changes]:
    """Per input: the keys changed and removed since generation `since` (the project's files
    for PROJECT)."""
    found: dict[str, Changes] = {}
    for name in spec.inputs:
        if name == PROJECT:
            changed = frozenset(path for path, kind in file_changes if kind != REMOVED)
            removed = frozenset(path for path, kind in file_changes if kind == REMOVED)
            found[name] = Changes(changed, removed - changed)
        elif state.value_generation(name) > since:
            delta = state.changes(name, since)
            found[name] = Changes(frozenset(delta.changed), frozenset(delta.removed))
        else:
            found[name] = Changes(frozenset(), frozenset())
    return found


def moved_output(record: dict, ctx: Context) -> str | None:
    """What moved among the outside files the stage tracked and the files it published; None
    when they are as it left them (the published ones are then counted as published by this
    run too)."""
    for path, digest in (record.get("external") or {}).items():
        if ctx.track_file(path) != digest:
            return f"a file it read outside the project changed: {path}"
    for path, signature in (record.get("published") or {}).items():
        st = ctx.output_folder.lstat(path)  # a link put in its place is not the file published
        if st is None:
            return f"a file it published is gone: {path}"
        if output_signature(st) != list(signature):
            return f"a file it published was changed: {path}"
    ctx.stage_published.update(record.get("published") or {})
    ctx.published.update(record.get("published") or {})
    return None


def output_signature(st: os.stat_result) -> list[int]:
    """How a published file is recognised as untouched since (ctime: a rewrite that restores
    size and mtime still moves it)."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
