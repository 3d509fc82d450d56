"""Faults on the real pipeline: a kill at every write path, a damaged cache, full disks and
quotas, planted cache entries, housekeeping beside running builds, killed Ray workers,
unreadable project files.

After each fault a run must equal a clean build: the same exit code, the same published bytes,
the same content reports (`buildkit.CONTENT_REPORTS`: the run record and the HTML page hold
timings), and a cache whose entries all verify (`buildkit.cache_problems`). Each fault must also
be seen to have been noticed: which write a kill hit, what damage the run logged, set aside or
recomputed.
"""

from __future__ import annotations

import os
import pickle
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import faultkit
import msgpack
import pytest
import structlog
from buildkit import (
    cache_problems,
    cli_env,
    content_reports,
    edit_build,
    make_project,
    published,
    run_cli,
    run_inprocess,
)

from orchestrator.cache.statedb import RowChecks
from orchestrator.core.graph import select
from orchestrator.core.registry import registered_stages
from orchestrator.core.stageentries import WHOLE
from orchestrator.hashing import digest_bytes

PIPELINE = [stage.name for stage in select(list(registered_stages()), None)]


class CleanBuild(NamedTuple):
    """A generated project built once, cold, on the local executor, its writes counted."""

    build: Path
    outputs: dict[str, bytes]
    reports: dict[str, bytes]
    code: int
    writes: dict[str, int]  # per write path (faultkit.WRITE_PATHS)
    stage_commits: list[str]  # stages in the order their transactions committed


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory) -> CleanBuild:
    base = tmp_path_factory.mktemp("clean")
    build = make_project(base, 120, 5, executor={"kind": "local"})
    proc = run_cli("run", str(build), prelude=faultkit.prelude(None))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    counted = faultkit.counted(proc.stdout)
    out = base / "build" / "out"
    return CleanBuild(
        build,
        published(out),
        content_reports(out),
        proc.returncode,
        counted.writes,
        counted.stage_commits,
    )


def _fresh_copy(clean: CleanBuild, dest: Path, cache: Path | None = None) -> Path:
    """A copy of the clean project without its build folder (another checkout), optionally
    pointed at a cache folder it shares."""
    shutil.copytree(
        clean.build.parent, dest, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True
    )
    build = dest / clean.build.name
    return edit_build(build, cache=str(cache)) if cache is not None else build


def _assert_equals_clean(out: Path, clean: CleanBuild) -> None:
    """The output folder holds what a clean build publishes, and no leftover of a killed run."""
    from orchestrator.files.outputs import Ledger, OutputFolder
    from orchestrator.shell.runrecord import previous_record

    assert published(out) == clean.outputs
    assert content_reports(out) == clean.reports
    assert not list(out.rglob(".tmp-*"))
    listed = set(Ledger(OutputFolder(out)).entries())
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    unlisted = files - listed - {"reports/.orchestrate.published", "reports/.orchestrate.lock"}
    assert unlisted == set(), "published files `clean` would not remove"
    record = previous_record(out)
    assert record is not None and record["complete"] and (out / "reports" / "index.html").is_file()


# -- a kill at every write path ------------------------------------------------------------------

#: Stages whose transaction is killed before its COMMIT: the first and the last, and those that
#: publish inside theirs (a report, the bundles). The others commit through the same code.
STAGE_KILLS = ("collect", "dependency", "validate", "manifest")

KILLS = [
    ("pack-buffer", "first"),
    ("pack-buffer", "middle"),
    ("pack-buffer", "last"),
    ("pack-flush", "first"),
    ("pack-flush", "last"),
    ("pack-index-torn", "first"),
    ("pack-index-torn", "last"),
    ("blob-file", "first"),
    ("blob-file", "last"),
    ("actions-commit", "first"),
    ("actions-commit", "last"),
    ("actions-committed", "first"),
    ("actions-committed", "last"),
    ("state-file-table", "first"),
    ("state-file-table", "last"),
    *[("state-stage", name) for name in STAGE_KILLS],
    ("output", "first"),
    ("output", "middle"),
    ("output", "last"),
    ("output-renamed", "first"),
    ("output-renamed", "last"),
    ("ledger-torn", "first"),
    ("ledger-torn", "middle"),
    ("ledger-torn", "last"),
    ("run-record", "first"),
    ("report-page", "first"),
    ("report-page", "last"),
]


def _nth(clean: CleanBuild, point: str, at: str) -> int:
    """Which write on `point` to kill at: the first, middle or last, or a stage's commit."""
    if point == "state-stage":
        assert at in clean.stage_commits, f"stage {at} committed nothing in a cold build"
        return clean.stage_commits.index(at) + 1
    count = clean.writes[point]
    assert count >= 1, f"a cold build makes no write on {point}"
    return {"first": 1, "middle": (count + 1) // 2, "last": count}[at]


@pytest.mark.parametrize(("point", "at"), KILLS, ids=[f"{p}-{a}" for p, a in KILLS])
def test_a_kill_at_any_write_then_a_rerun_equals_a_clean_build(tmp_path, clean_build, point, at):
    """kill -9 at one write of one write path (the child names the write it died at): the cache
    holds nothing that fails verification, and a rerun equals a clean build."""
    build = _fresh_copy(clean_build, tmp_path)
    cache, out = tmp_path / "build" / "cache", tmp_path / "build" / "out"
    n = _nth(clean_build, point, at)
    killed = run_cli("run", str(build), prelude=faultkit.prelude(point, n))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    where = faultkit.killed_at(killed.stderr)
    assert where.startswith(f"KILLED {point} #{n}: "), where or killed.stderr[-3000:]
    if point == "state-stage":
        assert f"state-stage {at} in " in where
    assert cache_problems(cache, torn_ok=True) == []  # a torn index line is skipped by design
    assert run_inprocess("run", str(build)) == clean_build.code
    _assert_equals_clean(out, clean_build)
    assert cache_problems(cache, torn_ok=point == "pack-index-torn") == []


def test_every_write_path_is_killed_somewhere(clean_build):
    """The kill cases cover every write path a cold build makes writes on."""
    killed = {point for point, _ in KILLS}
    assert killed == set(faultkit.WRITE_PATHS)
    assert {p for p, n in clean_build.writes.items() if n} == killed
    assert clean_build.stage_commits == PIPELINE and set(STAGE_KILLS) <= set(PIPELINE)


# -- the cache damaged ---------------------------------------------------------------------------

HOWS = ("truncate", "empty", "flip", "garbage")
SHARED_PARTS = ("blob", "pack", "index", "actions", "actions-wal")
STATE_PARTS = ("state", "state-wal", "all")
DAMAGE = [(part, how) for part in SHARED_PARTS + STATE_PARTS for how in HOWS] + [
    ("actions", "rot"),
    ("state", "rot"),
]

#: Keeps the SQLite databases' write-ahead logs as a process that died right after its last
#: commit leaves them (a clean exit checkpoints and removes them).
DIE_AFTER_LAST_COMMIT = """
import os, sys
from orchestrator.cache.actions import ActionCache
from orchestrator.cache.statedb import StateDatabase
ActionCache.close = StateDatabase.close = lambda self: None
def _die(code=0):
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)
sys.exit = _die
"""


class Rerun(NamedTuple):
    code: int
    result: Any  # orchestrator.core.scheduler.RunResult
    events: list[dict]  # what the run logged (structlog's captured events)


def _run_logged(build: Path) -> Rerun:
    """Run a build in this process, keeping what it logged."""
    from orchestrator.core.options import RunOptions
    from orchestrator.core.scheduler import run_build
    from orchestrator.shell.runs import conclude, load

    log = structlog.get_logger("orchestrate")
    with structlog.testing.capture_logs() as events:
        loaded = load(str(build))
        options = RunOptions(executor="local", progress=False)
        result = run_build(loaded, options, log, conclude=lambda run: conclude(loaded, run))
    result.context.state.close()  # as the end of its process would: the files are ours again
    return Rerun(result.concluded.verdict.exit_code, result, events)


def _part_files(cache: Path, part: str) -> list[Path]:
    patterns = {
        "blob": ["cas/??/*"],
        "pack": ["cas/packs/*.pack"],
        "index": ["cas/packs/index.log"],
        "actions": ["actions.sqlite"],
        "actions-wal": ["actions.sqlite-wal"],
        "state": ["state/*/*.sqlite"],
        "state-wal": ["state/*/*.sqlite-wal"],
    }
    parts = ["blob", "pack", "index", "actions", "state"] if part == "all" else [part]
    return sorted(p for name in parts for pattern in patterns[name] for p in cache.glob(pattern))


def _packed(cache: Path) -> dict[str, tuple[str, int, int]]:
    """digest → (pack, offset, length), from the pack index."""
    found = {}
    for line in (cache / "cas" / "packs" / "index.log").read_text("ascii").splitlines():
        _, digest, pack, offset, length = line.split(" ")
        found[digest] = (pack, int(offset), int(length))
    return found


def _damage(path: Path, how: str, packed: dict[str, tuple[str, int, int]]) -> set[str]:
    """Damage a cache file; returns the blobs (digests) whose stored bytes it damaged.

    A flip damages one byte in the middle of every entry of a file that holds many (each blob
    of a pack, each line of the pack index), so that every run that reads the file meets it;
    in a database, the kind of its second page (the root of the table created first, which
    every run reads); elsewhere (a blob file, a write-ahead log) the middle of the file. Rot
    flips a bit inside every row of a database, leaving the file itself sound.
    """
    if how == "rot":
        _rot_rows(path)
        return set()
    data = bytearray(path.read_bytes())
    packed = {d: w for d, w in packed.items() if w[0] == path.name}
    if how == "truncate":
        cut = len(data) // 2
        damaged = {d for d, (_, offset, length) in packed.items() if offset + length > cut}
        del data[cut:]
    elif how == "empty":
        damaged = set(packed)
        data = bytearray()
    elif how == "garbage":
        damaged = set(packed)
        data = bytearray(random.Random(path.name).randbytes(len(data)))
    else:
        damaged = set(packed)
        if packed:
            middles = [offset + length // 2 for _, offset, length in packed.values()]
        elif path.suffix == ".sqlite":
            page_size = int.from_bytes(data[16:18], "big")
            middles = [65536 if page_size == 1 else page_size]
        elif path.name == "index.log":
            ends = [i for i, byte in enumerate(data) if byte == ord("\n")]
            middles = [(start + end) // 2 for start, end in zip([-1, *ends], ends, strict=False)]
        else:
            middles = [len(data) // 2]
        for at in middles:
            data[at] ^= 0x55
    if path.parent.parent.name == "cas" and len(path.parent.name) == 2:
        damaged.add(path.name)
    path.write_bytes(bytes(data))
    return damaged


def _rot_rows(path: Path) -> None:
    """Flip a bit in the middle of a stored field of every row (bit rot SQLite cannot see: it
    keeps no checksums of what its pages hold)."""
    tables = {
        "actions": ("reads", ("stage", "key", "result")),
        "entries": ("data", ("value", "key")),
        "units": ("data", ("stage", "id")),
        "records": ("data", ("stage",)),
        "filetable": ("data", ("name",)),
    }
    db = sqlite3.connect(path)
    names = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    for table, (field, keys) in tables.items():
        if table not in names:
            continue
        where = " AND ".join(f"{key} = ?" for key in keys)
        rows = db.execute(
            f"SELECT {field}, {', '.join(keys)} FROM {table} WHERE {field} IS NOT NULL"
        ).fetchall()
        for value, *key in rows:
            rotten = bytearray(value)
            rotten[len(rotten) // 2] ^= 0x01
            db.execute(f"UPDATE {table} SET {field} = ? WHERE {where}", (bytes(rotten), *key))
    db.commit()
    db.close()


def _signals(events: list[dict], cache: Path) -> list[str]:
    """What shows the run noticed damage: logged drops and recomputations, files set aside."""
    found = [
        f"{e['event']}: {e.get('file') or e.get('digest') or ''} {e.get('reason') or ''}"
        for e in events
        if e["event"] in ("cache.dropped", "cache.corrupt", "cache.recompute")
    ]
    return found + [f"set aside: {p.name}" for p in cache.rglob("*.damaged-*")]


def _stage_table(result) -> list[tuple[str, int, int, int, bool]]:
    """Per stage: units, found in the cache (or skipped whole), run, and whether its record
    let it be skipped (a stage taken whole from the cache is found, not skipped)."""
    return [(r.name, r.units, r.cached, r.built, r.skipped) for r in result.reports]


#: Rule units that run custom code key on the checkout's absolute path: another checkout
#: always runs those again.
_UNSHARED = ("validate",)


def _built(result, skip=_UNSHARED) -> dict[str, int]:
    """Units run (not found in the cache) per stage, but for those of `skip`."""
    return {r.name: r.built for r in result.reports if r.built and r.name not in skip}


#: Damage that no check can see, because the damaged file is still a sound file of its kind.
HARMLESS = {
    ("state", "empty"): "a zero-length file is a valid, empty SQLite database: the build state is "
    "gone, as for a new checkout, and the run plans every stage from the action cache",
}


class Crashed(NamedTuple):
    """A checkout (`a`) and its cache (`cache`) under `work`, as a run that died right after
    its last commit left them (the databases' logs not checkpointed), restored from `template`
    for each test at the same path (the build state is keyed by the checkout's path)."""

    work: Path
    template: Path
    baseline: list[tuple[str, int, int, int, bool]]  # a rerun of the intact state, per stage


def _restore(crashed: Crashed) -> Path:
    shutil.rmtree(crashed.work, ignore_errors=True)
    shutil.copytree(crashed.template, crashed.work, symlinks=True)
    return crashed.work / "a" / "build.yaml"


@pytest.fixture(scope="module")
def crashed(tmp_path_factory, clean_build) -> Crashed:
    base = tmp_path_factory.mktemp("crashed")
    build = _fresh_copy(clean_build, base / "work" / "a", base / "work" / "cache")
    # In one process, which writes its logs the same way every time: the truncation below
    # must find the run's last commits in their second half (with forked helpers reading the
    # state too, a run failed that once, in 1 of 3 runs of the module after others).
    proc = run_cli("run", str(build), "--executor", "local", prelude=DIE_AFTER_LAST_COMMIT)
    assert proc.returncode == clean_build.code, proc.stderr[-3000:]
    logs = sorted(p.name for p in (base / "work" / "cache").rglob("*.sqlite-wal"))
    assert len(logs) == 2 and "actions.sqlite-wal" in logs
    # Without the dead process's shared-memory index: the next opener rebuilds it from the log.
    shutil.copytree(base / "work", base / "template", ignore=shutil.ignore_patterns("*-shm"))
    crashed = Crashed(base / "work", base / "template", [])
    build = _restore(crashed)
    shutil.rmtree(build.parent / "build" / "out")
    return crashed._replace(baseline=_stage_table(_run_logged(build).result))


@pytest.mark.parametrize(("part", "how"), DAMAGE, ids=[f"{p}-{h}" for p, h in DAMAGE])
def test_a_damaged_cache_is_detected_and_recomputed(
    tmp_path, clean_build, crashed, monkeypatch, part, how
):
    """Damage to one part of the cache (or all): the next run notices it, drops or sets aside
    what is damaged, recomputes, and equals a clean build; what it leaves verifies."""
    monkeypatch.setattr("orchestrator.cache.LARGE_BLOB_BYTES", faultkit.LARGE_BLOB_BYTES)
    if part.endswith("-wal"):
        first = _restore(crashed)
        cache = crashed.work / "cache"
    else:
        cache = tmp_path / "cache"
        first = _fresh_copy(clean_build, tmp_path / "a", cache)
        assert _run_logged(first).code == clean_build.code
    files = _part_files(cache, part)
    assert files, f"nothing to damage in {part}"
    damaged: set[str] = set()
    packed = _packed(cache)
    for path in files:
        damaged |= _damage(path, how, packed)
    if part in SHARED_PARTS:  # another checkout: every unit is looked up in the shared cache
        again = _fresh_copy(clean_build, tmp_path / "b", cache)
    else:  # the same checkout, everything to publish again from its state
        again = first
        shutil.rmtree(again.parent / "build" / "out")
    rerun = _run_logged(again)
    assert rerun.code == clean_build.code
    out = again.parent / "build" / "out"
    assert published(out) == clean_build.outputs
    assert content_reports(out) == clean_build.reports
    signals, built = _signals(rerun.events, cache), _built(rerun.result)
    if (part, how) in HARMLESS:
        assert rerun.result.file_changes.added and not signals  # a first scan, nothing damaged
    elif part == "state-wal":  # SQLite's frame checksums drop the log from the damage on
        assert _stage_table(rerun.result) != crashed.baseline, "the damaged log was trusted"
    elif part in ("index", "actions-wal") or (how == "empty" and part in ("actions", "all")):
        assert built, "entries lost with the damage were not recomputed"  # they are absent
    else:
        assert signals, "the damage went unnoticed"
    problems = cache_problems(cache, torn_ok=part in ("index", "all"))
    # Entries are verified when read: damage in one this run did not need (a blob, an action
    # entry of a rule unit keyed on the other checkout's path) stays until a run needs it.
    unread = [
        f"an action row of {kind}{stage} fails its check"
        for stage in _UNSHARED
        for kind in ("", WHOLE)  # its units' entries and its whole-stage entry
    ]
    left = [p for p in problems if p not in unread and not any(d[:12] in p for d in damaged)]
    assert left == []


def test_a_torn_pack_index_line_costs_one_recomputation_only(tmp_path, clean_build):
    """A pack index cut mid-line (a run killed while appending): the next checkout recomputes
    that one blob (a unit's result; or, when the blob is a whole-stage entry's rows, it plans
    that stage afresh, its units found one by one), and the line it appends after the torn one
    is intact."""
    cache = tmp_path / "cache"
    assert _run_logged(_fresh_copy(clean_build, tmp_path / "a", cache)).code == clean_build.code
    index = cache / "cas" / "packs" / "index.log"
    data = index.read_bytes()
    lost = data.rstrip(b"\n").rsplit(b"\n", 1)[1].split(b" ")[1].decode("ascii")
    index.write_bytes(data[: len(data) - 40])  # the last line loses its end and its newline
    second = _run_logged(_fresh_copy(clean_build, tmp_path / "b", cache))
    assert sum(_built(second.result).values()) <= 1
    assert any(lost[:12] in signal for signal in _signals(second.events, cache))
    third = _run_logged(_fresh_copy(clean_build, tmp_path / "c", cache))
    assert _built(third.result) == {}  # the recomputed entry was not swallowed by the torn line
    assert published(tmp_path / "c" / "build" / "out") == clean_build.outputs
    assert cache_problems(cache, torn_ok=True) == []


# -- entries planted in a shared cache -----------------------------------------------------------


class _Planted:
    """Unpickling it creates a marker file: proof that a reader executed what it read."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _payload(kind: str, marker: Path) -> bytes:
    """Bytes that run code when read by a reader that trusts them: a pickle, or a msgpack
    record naming a function to call (orchestrator/codec.py decodes declared records only)."""
    if kind == "pickle":
        return pickle.dumps(_Planted(marker))
    named = msgpack.packb(["os:system", f"touch {marker}"])
    return msgpack.packb(msgpack.ExtType(1, named))


def _plant(cache: Path, where: str, payload: bytes) -> int:
    """Put `payload` where a build reads cache entries; returns how many entries were planted.

    Everything written is what anyone with write access to a shared cache can write: content
    addressing and the row checks prove integrity, not who wrote an entry."""
    digest = digest_bytes(payload)
    if where in ("actions", "entry-blobs", "units"):  # what they plant names a blob
        blob = cache / "cas" / digest[:2] / digest
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(payload)  # well named: content addressing proves nothing of the writer
    if where == "actions":  # a newer result for every action key
        db = sqlite3.connect(cache / "actions.sqlite")
        rows = db.execute("SELECT stage, key, reads, stamp FROM actions").fetchall()
        raw = bytes.fromhex(digest)
        planted = [
            (stage, key, raw, reads, stamp + 10**12, digest_bytes(raw + reads)[:16].encode("ascii"))
            for stage, key, reads, stamp in rows
        ]
        db.executemany(
            "INSERT INTO actions (stage, key, result, reads, stamp, check_) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            planted,
        )
    else:
        (state,) = cache.glob("state/*/*.sqlite")
        db = sqlite3.connect(state)
        # What a build without a key writes (the state of a cache used without one)
        checks = RowChecks(None, state.relative_to(cache).as_posix())
        raw = bytes.fromhex(digest)
        if where in ("entries", "entry-blobs"):  # every stored value, its digest matching
            data = b"blob:" + digest.encode("ascii") if where == "entry-blobs" else payload
            sql = "UPDATE entries SET digest = ?, data = ? WHERE data IS NOT NULL"
            planted = db.execute(sql, (raw, data))
        elif where == "units":  # every unit's stored data and result, their checks matching
            rows = db.execute("SELECT stage, id, key FROM units").fetchall()
            planted = [
                (
                    raw,
                    raw,
                    payload,
                    checks.check("units", stage, unit_id, key, raw, raw),
                    stage,
                    unit_id,
                )
                for stage, unit_id, key in rows
            ]
            db.executemany(
                "UPDATE units SET result = ?, digest = ?, data = ?, check_ = ? "
                "WHERE stage = ? AND id = ?",
                planted,
            )
        else:  # every stage's record, its check matching
            rows = db.execute("SELECT stage FROM records").fetchall()
            planted = [
                (payload, checks.check("records", stage, payload), stage) for (stage,) in rows
            ]
            db.executemany("UPDATE records SET data = ?, check_ = ? WHERE stage = ?", planted)
    count = len(planted) if isinstance(planted, list) else planted.rowcount
    db.commit()
    db.close()
    return count


def _planted_left(cache: Path, payload: bytes) -> list[str]:
    """Where the planted payload is still found: blob files, action entries, state rows."""
    digest = digest_bytes(payload)
    found = [str(p) for p in cache.glob(f"cas/??/{digest}")]
    db = sqlite3.connect(cache / "actions.sqlite")
    (rows,) = db.execute(
        "SELECT COUNT(*) FROM actions WHERE result = ?", (bytes.fromhex(digest),)
    ).fetchone()
    db.close()
    found += [f"{rows} action entries"] if rows else []
    for state in cache.glob("state/*/*.sqlite"):
        db = sqlite3.connect(state)
        for table in ("entries", "units", "records"):
            (rows,) = db.execute(
                f"SELECT COUNT(*) FROM {table} WHERE data = ? OR data = ?",
                (payload, b"blob:" + digest.encode("ascii")),
            ).fetchone()
            found += [f"{rows} {table} in {state.name}"] if rows else []
        db.close()
    return found


PLANTED = ("actions", "entries", "entry-blobs", "units", "records")


@pytest.mark.parametrize("kind", ["pickle", "record"])
@pytest.mark.parametrize("where", PLANTED)
def test_a_planted_cache_entry_is_refused_and_recomputed(tmp_path, clean_build, where, kind):
    """Entries that would run code when loaded, planted in the action cache or the build state:
    nothing runs, the run recomputes, equals a clean build, and drops what it refused."""
    marker = tmp_path / "planted-code-ran"
    cache = tmp_path / "cache"
    first = _fresh_copy(clean_build, tmp_path / "a", cache)
    assert _run_logged(first).code == clean_build.code
    assert _plant(cache, where, _payload(kind, marker)) > 0
    if where == "actions":  # another checkout looks every unit up in the shared cache
        again = _fresh_copy(clean_build, tmp_path / "b", cache)
    else:
        again = first
        shutil.rmtree(again.parent / "build" / "out")
    rerun = _run_logged(again)
    assert not marker.exists()
    assert rerun.code == clean_build.code
    out = again.parent / "build" / "out"
    assert published(out) == clean_build.outputs
    assert content_reports(out) == clean_build.reports
    assert _signals(rerun.events, cache) or _built(rerun.result, skip=())
    assert cache_problems(cache) == []
    assert _planted_left(cache, _payload(kind, marker)) == []
    assert _run_logged(again).code == clean_build.code and not marker.exists()


def test_the_planted_payloads_would_run_if_trusted(tmp_path):
    """The planted bytes are live: unpickling runs their code; the codec refuses both kinds."""
    from orchestrator.codec import loads
    from orchestrator.errors import CodecError

    marker = tmp_path / "ran"
    pickle.loads(_payload("pickle", marker))  # what any pickle-based cache would do
    assert marker.exists()
    marker.unlink()
    for kind in ("pickle", "record"):
        with pytest.raises(CodecError):
            loads(_payload(kind, marker))
    assert not marker.exists()


# -- a full disk, a full quota ---------------------------------------------------------------------


@pytest.fixture
def small_tmpfs():
    """Mount a tmpfs of a given size (root only); resized with `grow`, unmounted after."""
    mounts = []

    def mount(size: str) -> Path:
        target = Path(tempfile.mkdtemp(prefix="orch-tmpfs-"))
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounts.append(target)
        return target

    yield mount
    for target in mounts:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)
        shutil.rmtree(target, ignore_errors=True)


def _grow(disk: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)


OVER_QUOTA_UNDER = """
import errno, os, sqlite3
_target = {target!r}
_fdopen, _write, _open = os.fdopen, os.write, open

def _over(path):
    return str(path).startswith(_target) and ".orchestrate" not in os.path.basename(str(path))

def _refuse(path):
    raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(path))

class _OverQuota:
    # a file whose writes fail as on a file system where the user's quota is used up
    def __init__(self, handle, path):
        self._handle, self._path = handle, path
    def write(self, data):
        _refuse(self._path)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self._handle.close()
    def __getattr__(self, name):
        return getattr(self._handle, name)

def _fd_path(fd):
    try:
        return os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        return ""

def _quota_fdopen(fd, *args, **kwargs):
    handle = _fdopen(fd, *args, **kwargs)
    return _OverQuota(handle, _fd_path(fd)) if _over(_fd_path(fd)) else handle

def _quota_write(fd, data):
    if _over(_fd_path(fd)):
        _refuse(_fd_path(fd))
    return _write(fd, data)

def _quota_open(file, mode="r", *args, **kwargs):
    handle = _open(file, mode, *args, **kwargs)
    return _OverQuota(handle, file) if _over(file) and set(mode) & set("wax+") else handle

class _QuotaConnection(sqlite3.Connection):
    # what SQLite reports when a write fails with any errno but ENOSPC (EDQUOT among them)
    def __init__(self, database, *args, **kwargs):
        super().__init__(database, *args, **kwargs)
        self._file = str(database)
    def execute(self, sql, *args):
        if _over(self._file) and sql.split()[0].upper() in ("INSERT", "COMMIT", "UPDATE"):
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = sqlite3.SQLITE_IOERR_WRITE
            raise error
        return super().execute(sql, *args)

import builtins, functools
os.fdopen, os.write, builtins.open = _quota_fdopen, _quota_write, _quota_open
sqlite3.connect = functools.partial(sqlite3.connect, factory=_QuotaConnection)
"""


@pytest.mark.parametrize("where", ["output", "cache"])
@pytest.mark.parametrize("full", ["disk", "quota"])
def test_a_full_disk_or_quota_exits_4_and_poisons_nothing(
    tmp_path, clean_build, small_tmpfs, where, full
):
    """ENOSPC (a small tmpfs) or EDQUOT (every write under the folder refused) while writing
    the outputs or the cache: exit 4 naming the trouble, no traceback, nothing half-written
    published; with room again, the next run equals a clean build."""
    build = _fresh_copy(clean_build, tmp_path)
    if full == "disk":
        disk = small_tmpfs("480k")
        edit_build(build, **{where: str(disk / where)})
        target, prelude = disk / where, ""
    else:
        target = tmp_path / "build" / ("out" if where == "output" else "cache")
        prelude = OVER_QUOTA_UNDER.format(target=str(target))
    proc = run_cli("run", str(build), prelude=prelude)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    said = "the disk is full" if full == "disk" else "disk quota is exceeded"
    refused = "the file system refused the cache database"
    assert said in proc.stderr or (full == "quota" and refused in proc.stderr), proc.stderr[-2000:]
    assert str(target) in proc.stderr
    out = target if where == "output" else tmp_path / "build" / "out"
    found = published(out) if out.exists() else {}
    assert not list(out.rglob(".tmp-*")) if out.exists() else True
    assert {rel: data for rel, data in found.items() if clean_build.outputs.get(rel) != data} == {}
    assert "manifest.json" not in found
    cache = target if where == "cache" else tmp_path / "build" / "cache"
    assert cache_problems(cache, torn_ok=True) == []
    assert not list(cache.rglob("*.damaged-*"))  # a refused write is no damage
    if full == "disk":
        _grow(disk)
    rerun = run_cli("run", str(build))
    assert rerun.returncode == clean_build.code, rerun.stderr[-3000:]
    assert published(out) == clean_build.outputs and content_reports(out) == clean_build.reports
    assert cache_problems(cache) == []


def test_a_database_write_the_file_system_refuses_is_not_damage(tmp_path):
    """A SQLite write refused by the file system (EFBIG under `ulimit -f`, as SQLite reports a
    full quota): a failed step naming the database, exit 4; the database is not set aside."""
    script = f"""
import resource, signal, sys
from pathlib import Path
from orchestrator.cache import Cache
from orchestrator.errors import StepFailed
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
cache = Cache(Path({str(tmp_path)!r}))
cache.actions.put("stage", "ab" * 32, {{}}, "cd" * 32)
cache.flush()
resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
for i in range(2000):
    cache.actions.put("stage", f"{{i:064x}}", {{"a" * 200: "e" * 64}}, "cd" * 32)
try:
    cache.flush()
except StepFailed as exc:
    print("REFUSED", exc.exit_code, exc.describe())
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=cli_env()
    )
    assert "REFUSED 4 " in proc.stdout, proc.stdout + proc.stderr
    assert str(tmp_path / "actions.sqlite") in proc.stdout
    assert "refused the cache database" in proc.stdout
    assert not list(tmp_path.glob("*.damaged-*"))
    from orchestrator.cache import Cache

    assert [e.result for e in Cache(tmp_path).actions.get("stage", "ab" * 32)] == ["cd" * 32]


# -- housekeeping beside running builds ------------------------------------------------------------

#: Holds the build (or the housekeeping) in the middle until a file appears, and says so.
PAUSE_UNTIL = """
import os, sys, time
def _pause(*args, **kwargs):
    print("PAUSED", file=sys.stderr, flush=True)
    while not os.path.exists({go!r}):
        time.sleep(0.05)
    return _real(*args, **kwargs)
"""
PAUSE_BUILD = (
    PAUSE_UNTIL
    + """
import stages.link_xml as _stage
_real = _stage.finish
_stage.finish = _pause
"""
)
PAUSE_GC = (
    PAUSE_UNTIL
    + """
import orchestrator.cache as _cache
_real = _cache.collect_garbage
_cache.collect_garbage = _pause
"""
)


#: Touches `asking` when the process asks for the cache's lock and `holding` once it has it.
ANNOUNCE_CACHE_LOCK = """
import pathlib
import orchestrator.files.lock as _lock
_enter = _lock.CacheLock.__enter__
def _announced(self):
    pathlib.Path({asking!r}).touch()
    held = _enter(self)
    pathlib.Path({holding!r}).touch()
    return held
_lock.CacheLock.__enter__ = _announced
"""


def _announcing(folder: Path, prelude: str = "") -> tuple[str, Path, Path]:
    """A prelude announcing the cache lock through files in `folder`: (prelude, asking,
    holding)."""
    asking, holding = folder / "asking", folder / "holding"
    folder.mkdir()
    lock = ANNOUNCE_CACHE_LOCK.format(asking=str(asking), holding=str(holding))
    return prelude + lock, asking, holding


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the child ended ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.02)


def _start(args: list[str], prelude: str = "") -> subprocess.Popen:
    script = prelude + "\nfrom orchestrator.shell.cli import main\nmain()\n"
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_paused(proc: subprocess.Popen) -> None:
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("PAUSED"):
            return
    raise AssertionError(f"the child never paused (exit {proc.wait()})")


def test_cache_housekeeping_refuses_while_a_build_holds_the_cache(tmp_path, clean_build):
    """`cache gc` and `cache clear` during a build: exit 4 naming the cache folder, no
    traceback, nothing removed; with `--wait` they wait for the build, then run."""
    build = _fresh_copy(clean_build, tmp_path)
    cache, go = tmp_path / "build" / "cache", tmp_path / "go"
    running = _start(["run", str(build)], PAUSE_BUILD.format(go=str(go)))
    try:
        _wait_paused(running)
        before = sorted(p for p in cache.rglob("*") if p.is_file())
        for command in (["gc", "--max-size", "1"], ["clear"]):
            proc = run_cli("cache", command[0], str(build), *command[1:])
            assert proc.returncode == 4, proc.stderr
            assert f"error: {cache}: the cache is in use by a running build" in proc.stderr
            assert "Traceback" not in proc.stderr
        assert sorted(p for p in cache.rglob("*") if p.is_file()) == before
        prelude, asking, holding = _announcing(tmp_path / "clear")
        waiting = _start(["cache", "clear", str(build), "--wait", "60"], prelude)
        _wait_for(asking, waiting)
        time.sleep(0.5)
        assert waiting.poll() is None and not holding.exists()  # waiting for the build
        go.touch()
        _, err = running.communicate(timeout=120)
        assert running.returncode == clean_build.code, err[-3000:]
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 0, err
        assert f"cleared {cache}" in out
    finally:
        go.touch()
        running.kill()
    assert published(tmp_path / "build" / "out") == clean_build.outputs
    assert sorted(p.name for p in cache.iterdir()) == ["lock"]  # cleared after the build


def test_a_build_started_during_cache_gc_waits_for_it_then_succeeds(tmp_path, clean_build):
    """A build started while `cache gc` holds the cache waits (no output yet) until gc is
    done, then equals a clean build."""
    build = _fresh_copy(clean_build, tmp_path)
    assert run_inprocess("run", str(build)) == clean_build.code
    out, go = tmp_path / "build" / "out", tmp_path / "go"
    shutil.rmtree(out)
    gc = _start(["cache", "gc", str(build), "--max-size", "1"], PAUSE_GC.format(go=str(go)))
    try:
        _wait_paused(gc)
        prelude, asking, holding = _announcing(tmp_path / "build-lock")
        building = _start(["run", str(build)], prelude)
        _wait_for(asking, building)
        time.sleep(0.5)
        assert building.poll() is None and not holding.exists()  # waiting for gc
        assert not (out / "manifest.json").exists()
        go.touch()
        _, err = gc.communicate(timeout=60)
        assert gc.returncode == 0, err
        _, err = building.communicate(timeout=120)
        assert building.returncode == clean_build.code, err[-3000:]
    finally:
        go.touch()
        gc.kill()
    assert published(out) == clean_build.outputs
    assert content_reports(out) == clean_build.reports
    assert cache_problems(tmp_path / "build" / "cache") == []


# -- Ray: damaged blobs, a killed worker, a looping rule -----------------------------------------


@pytest.mark.ray
def test_corrupt_cache_under_ray_gives_the_clean_outputs(tmp_path, clean_build, ray_local):
    """With every blob damaged, a Ray build of another checkout drops and recomputes them and
    publishes the clean outputs."""
    cache = tmp_path / "cache"
    first = _fresh_copy(clean_build, tmp_path / "a", cache)
    assert run_inprocess("run", str(first), "--executor", "ray") == clean_build.code
    packed = _packed(cache)
    for path in _part_files(cache, "pack") + _part_files(cache, "blob"):
        _damage(path, "flip", packed)
    again = _fresh_copy(clean_build, tmp_path / "b", cache)
    assert run_inprocess("run", str(again), "--executor", "ray") == clean_build.code
    assert published(tmp_path / "b" / "build" / "out") == clean_build.outputs
    assert content_reports(tmp_path / "b" / "build" / "out") == clean_build.reports


def _running_batches() -> list:
    """Ray workers of this test session (descendants of this process) running a batch now."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].startswith("ray::_run_batch"):
            found.append(proc)
    return found


@pytest.mark.ray
@pytest.mark.slow
def test_ray_worker_killed_mid_task_is_retried(tmp_path, clean_build, ray_local):
    """kill -9 of a Ray worker running a batch: the task is retried and the outputs are the
    clean ones."""
    build = _fresh_copy(clean_build, tmp_path)
    slow = {
        "command": 'sh -c \'sleep 0.2; find "$0" -type f | sort | xargs cat > "$1"\' '
        "{input} {output}",
        "version": "1",
    }
    # The slow cooker changes payloads' keys, not bytes: compare against a local build of it.
    edit_build(build, cook={"cookers": {"Texture": slow}})
    reference = tmp_path / "reference"
    shutil.copytree(tmp_path, reference, ignore=shutil.ignore_patterns("build", "reference"))
    code = clean_build.code
    assert run_inprocess("run", str(reference / build.name), "--executor", "local") == code
    expected = published(reference / "build" / "out")
    killed: list[int] = []

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            for proc in _running_batches():
                try:
                    proc.send_signal(signal.SIGKILL)
                    killed.append(proc.pid)
                    break
                except Exception:
                    continue
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_inprocess("run", str(build), "--executor", "ray") == code
    thread.join(timeout=5)
    assert killed, "no Ray worker was running a batch to kill"
    assert published(tmp_path / "build" / "out") == expected
    assert cache_problems(tmp_path / "build" / "cache") == []


@pytest.mark.ray
def test_a_looping_rule_function_on_ray_is_stopped_by_rules_timeout(tmp_path, ray_local):
    """A custom rule function that never returns, run on Ray workers, is stopped by
    `rules.timeout`."""
    from buildkit import TESTS

    shutil.copytree(TESTS / "data" / "bad" / "_base", tmp_path / "case")
    shutil.copytree(
        TESTS / "data" / "bad" / "rules-func-loops", tmp_path / "case", dirs_exist_ok=True
    )
    build = edit_build(tmp_path / "case" / "build.yaml", rules={"timeout": 1})
    started = time.perf_counter()
    assert run_inprocess("run", str(build), "--executor", "ray") == 1
    assert time.perf_counter() - started < 60
    report = (tmp_path / "case" / "build" / "out" / "reports" / "validate.json").read_text()
    assert "timed out after 1 s (rules.timeout)" in report and "texture.xml" in report


# -- an unreadable project file ------------------------------------------------------------------


def _without_root_file_access():
    """In the child: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so root obeys mode bits."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _can_drop_capabilities() -> bool:
    probe = Path(tempfile.mkstemp(prefix="orch-probe-")[1])
    try:
        probe.chmod(0)
        proc = subprocess.run(
            [sys.executable, "-c", f"open({str(probe)!r}).read()"],
            preexec_fn=_without_root_file_access,
            capture_output=True,
        )
        return proc.returncode != 0
    except OSError:
        return False
    finally:
        probe.unlink()


@pytest.mark.skipif(
    not _can_drop_capabilities(),
    reason="cannot make a file unreadable to this user (root without CAP_SETPCAP?)",
)
@pytest.mark.parametrize("victim", ["resource.repository", "texture.xml", "Town.iworld", "Worlds"])
def test_unreadable_project_file_exits_2_naming_it(tmp_path, clean_build, victim):
    """A project file or folder the build cannot read (mode 000, no root override): exit 2
    naming it."""
    build = _fresh_copy(clean_build, tmp_path)
    project = build.parent / "project"
    target = project / "Worlds" if victim == "Worlds" else sorted(project.rglob(victim))[0]
    os.chmod(target, 0o000)
    try:
        proc = run_cli("run", str(build), preexec_fn=_without_root_file_access)
    finally:
        os.chmod(target, 0o755)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert str(target) in proc.stderr
    assert "Permission denied" in proc.stderr and "Traceback" not in proc.stderr


def test_a_killed_runs_temp_files_never_block_a_later_run_with_its_pid(tmp_path):
    """Leftover temp files named after this host and pid (pid reuse) never make a write fail."""
    import socket

    from orchestrator.files import atomic as cache_module

    folder = tmp_path / "cas" / "ab"
    folder.mkdir(parents=True)
    upcoming = int(repr(cache_module._temp_counter)[len("count(") : -1])  # the next call's number
    for n in range(upcoming, upcoming + 50):  # what a dead process with our pid would have left
        (folder / f".tmp-{socket.gethostname()}-{os.getpid()}-{n}").write_bytes(b"partial")
    confined = cache_module.ConfinedFolder(tmp_path, "cache folder")
    for i in range(20):
        cache_module.atomic_write(confined, f"cas/ab/entry-{i}", b"complete")
    assert all((folder / f"entry-{i}").read_bytes() == b"complete" for i in range(20))
