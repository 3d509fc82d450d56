"""The laws of the incremental engine, as helpers: build a checkout in-process, record which units
the engine ran, read back what a build left (units, the files each read, keyed values), and compare
an incremental build with a clean one.

Law 1: an incremental build publishes what a clean build (fresh cache) of the same files publishes,
byte for byte, with the same content reports and exit code, and leaves the same units and values.
Law 2 (Buck2's check of DICE): a unit the incremental build ran is one whose static key or read
digests differ between clean builds of the state before and after the change.
Law 3: a dry run names exactly the units the run after it runs, with the same reasons, and
leaves the cache, the build state and the output folder as they were.
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import msgpack
from buildkit import content_reports, published

from orchestrator.cache import Cache
from orchestrator.codec import loads
from orchestrator.core.options import RunOptions
from orchestrator.core.rebuild import Rebuilder
from orchestrator.core.scheduler import run_build
from orchestrator.errors import OrchestrateError
from orchestrator.shell.present import setup_logging
from orchestrator.shell.runs import judge, load

Reads = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class UnitTrace:
    """A unit as a build left it: its static key and the files it read with their digests."""

    key: str
    reads: Reads


@dataclass
class BuildOutcome:
    """What one build did and left behind."""

    exit_code: int
    error: str  # the error that stopped the build ("" when it finished)
    outputs: dict[str, bytes]  # published files, reports excluded
    reports: dict[str, bytes]  # the content reports (validate.json, junit.xml, …)
    planned: dict[str, dict[str, str]]  # stage → unit id → static key, of units due to run
    ran: dict[str, set[str]]  # stage → units executed (not found in the action cache)
    units: dict[str, dict[str, UnitTrace]] = field(default_factory=dict)  # as the state holds
    values: dict[tuple[str, str], str] = field(default_factory=dict)  # (value, key) → digest
    # (stage, unit, reason) of every unit the run named: a dry run's, or one with explain=True
    named: set[tuple[str, str, str]] = field(default_factory=set)

    def ran_anything(self) -> bool:
        return any(self.ran.values())


@contextmanager
def spying() -> object:
    """Record, per stage, the units the engine sends to the rebuilder and those it executes."""
    planned: dict[str, dict[str, str]] = {}
    ran: dict[str, set[str]] = {}
    original = Rebuilder.execute

    def execute(self, run, ctx, due_records):
        due = planned.setdefault(run.name, {})
        due.update((record.id, record.static) for record in due_records)
        try:
            original(self, run, ctx, due_records)
        finally:
            ran.setdefault(run.name, set()).update(r.id for r in due_records if r.ran)

    with mock.patch.object(Rebuilder, "execute", execute):
        yield planned, ran


def build(
    build_file: Path,
    output: str | None = None,
    cache: str | None = None,
    stages: list[str] | None = None,
    **options,
) -> BuildOutcome:
    """Build in this process with the local executor, as `orchestrate run` judges it (exit code
    1 when a stage's verdict fails the build, an error's own code when one stops it); `output`
    and `cache` (relative to the build file) redirect a clean build of the same checkout;
    `stages` runs only those and what they need (as `orchestrate validate` does); `options`
    are other RunOptions (no_cache, dry_run)."""
    log = setup_logging("json")
    named: set[tuple[str, str, str]] = set()
    with spying() as (planned, ran):
        settings = None
        try:
            settings = _with_paths(load(str(build_file), "local"), build_file, output, cache)
            run = RunOptions(executor="local", stages=stages, progress=False, **options)
            result = run_build(settings, run, log)
            named = {(o.stage, o.id, o.reason) for o in result.explained}
            exit_code, error = judge(settings, result.stages, result.outputs).exit_code, ""
        except OrchestrateError as exc:
            exit_code, error = exc.exit_code, exc.describe()
    if settings is None:  # the build file itself is bad: nothing was built
        return BuildOutcome(exit_code, error, {}, {}, planned, ran)
    out = settings.output_dir
    outcome = BuildOutcome(
        exit_code,
        error,
        published(out) if out.is_dir() else {},
        content_reports(out) if out.is_dir() else {},
        planned,
        ran,
    )
    outcome.units, outcome.values = stored_state(settings.cache_dir)
    outcome.named = named
    return outcome


def footprint(base: Path) -> dict[str, object]:
    """What a run could leave behind under a checkout's folder, other than the project: every
    file's bytes and time stamp, each SQLite database by its content (opening one may fold its
    write-ahead log into it, which changes its bytes but not what it holds)."""
    found: dict[str, object] = {}
    for dirpath, _dirnames, filenames in os.walk(base):
        for name in filenames:
            path = Path(dirpath, name)
            relpath = path.relative_to(base).as_posix()
            if relpath.startswith("project/") or name.endswith(("-wal", "-shm")):
                continue
            if name.endswith(".sqlite"):
                db = sqlite3.connect(path)
                try:
                    found[relpath] = list(db.iterdump())
                finally:
                    db.close()
            else:
                found[relpath] = (path.read_bytes(), path.stat().st_mtime_ns)
    return found


def _with_paths(settings, build_file: Path, output: str | None, cache: str | None):
    """The build with its output and cache folders moved (paths are no stage's input)."""
    base = Path(build_file).resolve().parent
    if output:
        settings.output_dir = base / output
    if cache:
        settings.cache_dir = base / cache
    return settings


def stored_state(
    cache_dir: Path,
) -> tuple[dict[str, dict[str, UnitTrace]], dict[tuple[str, str], str]]:
    """Per stage, every unit the build state holds with its key and the reads its action entry
    recorded; and every live value entry's digest. The cache must hold one build state."""
    states = sorted(Path(cache_dir).glob("state/*/*.sqlite"))
    if not states:
        return {}, {}
    assert len(states) == 1, f"expected one build state in {cache_dir}, found {states}"
    reads: dict[tuple[str, str], list[Reads]] = {}
    actions = Path(cache_dir) / "actions.sqlite"
    if actions.exists():
        db = sqlite3.connect(actions)
        try:
            for stage, key, packed in db.execute("SELECT stage, key, reads FROM actions"):
                entry = tuple((path, digest) for path, digest in msgpack.unpackb(bytes(packed)))
                reads.setdefault((stage, bytes(key).hex()), []).append(entry)
        finally:
            db.close()
    db = sqlite3.connect(states[0])
    try:
        units: dict[str, dict[str, UnitTrace]] = {}
        for stage, unit_id, key in db.execute("SELECT stage, id, key FROM units"):
            hexkey = bytes(key).hex()
            found = reads.get((stage, hexkey), [])
            # One entry per key in a cache only this build wrote; later builds may add more.
            traced = found[0] if len(found) == 1 else ()
            units.setdefault(stage, {})[unit_id] = UnitTrace(hexkey, traced)
        values = {
            (value, key): bytes(digest).hex()
            for value, key, digest in db.execute(
                "SELECT value, key, digest FROM entries WHERE data IS NOT NULL"
            )
        }
        taken = db.execute("SELECT kind, name, blob FROM taken").fetchall()
    finally:
        db.close()
    # What a fresh checkout took whole is held by reference (cache/taken.py): it is held all
    # the same, as the rows of its stage's blob say.
    blobs = Cache(Path(cache_dir))
    try:
        for kind, name, blob in taken:
            rows = loads(blobs.get_blob(blob))
            if kind == "units":
                for unit_id, key, *_ in rows.units:
                    hexkey = bytes(key).hex()
                    found = reads.get((name, hexkey), [])
                    traced = found[0] if len(found) == 1 else ()
                    units.setdefault(name, {})[unit_id] = UnitTrace(hexkey, traced)
            else:
                values.update(
                    ((name, key), bytes(digest).hex()) for key, digest, _ in rows.values[name]
                )
    finally:
        blobs.close()
    return units, values


def unreachable_runs(
    before: dict[str, dict[str, UnitTrace]],
    after: dict[str, dict[str, UnitTrace]],
    ran: dict[str, set[str]],
) -> list[str]:
    """Units that ran although clean builds of the states before and after agree on their key
    and on the digest of every file they read (law 2), or that a clean build has no unit of."""
    wrong = []
    for stage, unit_ids in sorted(ran.items()):
        for unit_id in sorted(unit_ids):
            now = after.get(stage, {}).get(unit_id)
            was = before.get(stage, {}).get(unit_id)
            if now is None:
                wrong.append(f"{stage}/{unit_id}: ran, but a clean build has no such unit")
            elif was is not None and was == now:
                wrong.append(f"{stage}/{unit_id}: ran, but its key and reads did not change")
    return wrong


def differences(incremental: BuildOutcome, clean: BuildOutcome) -> list[str]:
    """How an incremental build differs from a clean build of the same files (law 1)."""
    found = []
    if incremental.exit_code != clean.exit_code:
        found.append(
            f"exit code {incremental.exit_code} (incremental) != {clean.exit_code} (clean): "
            f"{incremental.error or clean.error}"
        )
    if incremental.error or clean.error:  # the output folder keeps what the last build made
        if incremental.error != clean.error:
            found.append(f"errors differ: {incremental.error!r} != {clean.error!r}")
        return found
    for what, mine, theirs in (
        ("published file", incremental.outputs, clean.outputs),
        ("report", incremental.reports, clean.reports),
    ):
        for name in sorted(set(mine) | set(theirs)):
            if mine.get(name) != theirs.get(name):
                state = (
                    "only incremental"
                    if name not in theirs
                    else "only clean"
                    if name not in mine
                    else "bytes differ"
                )
                found.append(f"{what} {name}: {state}")
    return found + _state_differences(incremental, clean)


def _state_differences(incremental: BuildOutcome, clean: BuildOutcome) -> list[str]:
    """The units (id and static key) and the value entries a build leaves must not depend on
    the road to them."""
    found = []
    for stage in sorted(set(incremental.units) | set(clean.units)):
        mine = {u: t.key for u, t in incremental.units.get(stage, {}).items()}
        theirs = {u: t.key for u, t in clean.units.get(stage, {}).items()}
        for unit_id in sorted(set(mine) | set(theirs)):
            if mine.get(unit_id) != theirs.get(unit_id):
                what = (
                    "only incremental"
                    if unit_id not in theirs
                    else "only clean"
                    if unit_id not in mine
                    else "static keys differ"
                )
                found.append(f"stored unit {stage}/{unit_id}: {what}")
    for entry in sorted(set(incremental.values) | set(clean.values)):
        if incremental.values.get(entry) != clean.values.get(entry):
            found.append(f"value entry {entry[0]}[{entry[1]!r}] differs")
    for stage, due in sorted(incremental.planned.items()):
        theirs = {u: t.key for u, t in clean.units.get(stage, {}).items()}
        for unit_id, static in sorted(due.items()):
            if unit_id in theirs and theirs[unit_id] != static:
                found.append(f"{stage}/{unit_id} ran under a static key a clean build does not use")
    return found
