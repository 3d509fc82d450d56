"""A shared cache's entries authenticated with the farm's key (orchestrator/cache/signing.py).

The attack: anyone who can write to a shared cache folder rewrites an action row and the blobs
it names consistently (content addressing and the row's plain check prove integrity, not the
writer), and a second checkout publishes the forged bytes. With `cache.key_env` / `key_file`
rows are signed; a reader with the key refuses the forged row once, recomputes, and publishes
the right bytes. Without a key the cache works as before (and the forgery goes through).
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from buildkit import cache_problems, cli_env, edit_build, make_project, published, run_cli
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.cache import Cache, EntryKey
from orchestrator.core.config import load_build
from orchestrator.core.stageentries import WHOLE
from orchestrator.errors import CacheCorrupt, ConfigError
from orchestrator.hashing import digest_bytes

KEY = b"0123456789abcdef0123456789abcdef"
KEY_ENV = "ORCHESTRATE_TEST_CACHE_KEY"
READS = {"a.xml": "11" * 32, "gone.xml": None}
RESULT = "22" * 32


# -- the signature ---------------------------------------------------------------------------------
def test_a_signature_covers_every_field_and_its_boundaries():
    key = EntryKey(KEY, "test")
    signature = key.sign(b"cook", b"ab", b"c")
    assert key.verify(signature, b"cook", b"ab", b"c")
    assert not key.verify(signature, b"cook", b"a", b"bc")  # lengths are part of what is signed
    assert not key.verify(signature, b"cook", b"ab", b"d")
    assert not EntryKey(KEY[::-1], "other").verify(signature, b"cook", b"ab", b"c")
    assert not key.verify(None, b"cook", b"ab", b"c")


def test_the_key_is_long_enough_and_never_leaves_the_process():
    with pytest.raises(ValueError, match="at least 16 random bytes"):
        EntryKey(b"short", "test")
    key = EntryKey(KEY, "cache.key_env X")
    assert KEY.decode() not in repr(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)


# -- the action cache --------------------------------------------------------------------------------
def _write(root: Path, key: EntryKey | None, stage: str = "cook", unit: str = "33" * 32) -> None:
    cache = Cache(root, key=key)
    cache.actions.put(stage, unit, READS, RESULT)
    cache.close()


def _read(root: Path, key: EntryKey | None, stage: str = "cook", unit: str = "33" * 32):
    cache = Cache(root, key=key)
    entries = cache.actions.get(stage, unit)
    cache.close()
    return entries, cache.refused_entries


def test_rows_signed_with_the_key_are_read_with_it_and_without_it(tmp_path):
    _write(tmp_path, EntryKey(KEY, "test"))
    for reader in (EntryKey(KEY, "test"), None):
        entries, refused = _read(tmp_path, reader)
        assert [e.result for e in entries] == [RESULT] and refused == 0


def test_a_reader_with_the_key_refuses_unsigned_and_foreign_rows_once(tmp_path):
    """Unsigned (a build without the key, or a forger), or signed with another key: refused,
    reported, deleted (a second reader finds nothing to report); without a key, read as before."""
    for writer in (None, EntryKey(KEY[::-1], "another farm")):
        root = tmp_path / repr(writer)
        _write(root, writer)
        assert _read(root, None)[0] != []  # today's behaviour without a key
        entries, refused = _read(root, EntryKey(KEY, "test"))
        assert entries == [] and refused == 1
        assert _read(root, EntryKey(KEY, "test")) == ([], 0)


def test_a_signed_row_moved_to_another_key_is_refused(tmp_path):
    """The signature binds the row to its stage and unit key: a genuine row replayed under
    another unit's key proves nothing."""
    key = EntryKey(KEY, "test")
    _write(tmp_path, key, unit="33" * 32)
    db = sqlite3.connect(tmp_path / "actions.sqlite")
    db.execute("UPDATE actions SET key = ?", (bytes.fromhex("44" * 32),))
    db.commit()
    db.close()
    assert _read(tmp_path, key, unit="44" * 32) == ([], 1)


# -- the build file ----------------------------------------------------------------------------------
def _build_file(tmp_path: Path, cache) -> Path:
    (tmp_path / "project").mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump({"project": "project", "cache": cache}), encoding="utf-8")
    return path


def test_the_cache_is_a_folder_or_a_folder_and_a_key(tmp_path, monkeypatch):
    assert load_build(_build_file(tmp_path, "c")).cache_dir == tmp_path / "c"
    plain = load_build(_build_file(tmp_path, {"path": "c"}))
    assert plain.cache_dir == tmp_path / "c" and plain.cache_key() is None
    (tmp_path / "farm.key").write_bytes(KEY + b"\n")
    from_file = load_build(_build_file(tmp_path, {"path": "c", "key_file": "farm.key"}))
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    from_env = load_build(_build_file(tmp_path, {"key_env": KEY_ENV}))
    assert from_env.cache_dir == tmp_path / "build" / "cache"
    signature = from_file.cache_key().sign(b"x")  # type: ignore[union-attr]
    assert from_env.cache_key().verify(signature, b"x")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ({"key_file": "missing.key"}, "cannot read the cache key"),
        ({"key_env": "ORCHESTRATE_TEST_UNSET_KEY"}, "ORCHESTRATE_TEST_UNSET_KEY is not set"),
        ({"key_file": "short.key"}, "the cache key has 5 bytes"),
    ],
)
def test_a_key_that_cannot_be_had_names_the_build_file_and_the_key(tmp_path, cache, message):
    (tmp_path / "short.key").write_bytes(b"short")
    build = load_build(_build_file(tmp_path, cache))
    with pytest.raises(ConfigError) as refused:
        build.cache_key()
    assert message in refused.value.message
    assert refused.value.file == str(tmp_path / "build.yaml") and refused.value.line == 2
    assert refused.value.key in ("cache.key_file", "cache.key_env")


def test_one_key_source_at_a_time(tmp_path):
    with pytest.raises(ConfigError, match="key_file or in key_env, not both"):
        load_build(_build_file(tmp_path, {"key_file": "a", "key_env": "B"}))


# -- the attack, end to end ------------------------------------------------------------------------
EVIL = b"EVIL-PAYLOAD: written by someone who can write to the cache, not by a build"


def forge_cooked_asset(cache_dir: Path) -> str:
    """What an attacker with write access to the cache folder does, without the key: rewrite
    one cooked asset inside a cook unit's result, store the new blobs under their digests, point
    the action row at them and recompute the row's plain check. Returns the forged asset."""
    from orchestrator.codec import allow_package, dumps, loads
    from orchestrator.typing import StoredParts

    allow_package("stages")
    cache = Cache(cache_dir)
    db = sqlite3.connect(cache_dir / "actions.sqlite")
    # A checkout takes a stage whole from its whole-stage entry (core/stageentries.py) without
    # looking its units up: the forger deletes those, so that the unit's entry is read.
    db.execute("DELETE FROM actions WHERE stage LIKE ?", (WHOLE + "%",))
    rows = db.execute(
        "SELECT stage, key, result, reads FROM actions WHERE stage = 'cook' ORDER BY key"
    ).fetchall()
    worlds = {  # the cook units holding a world (a root: always published)
        row: next((name for name in sorted(parts) if name.endswith(".iworld")), None)
        for row in rows
        for parts in [loads(cache.get_blob(bytes(row[2]).hex())).digests]
    }
    (stage, key, result, reads), asset = next(item for item in worlds.items() if item[1])
    parts = loads(cache.get_blob(bytes(result).hex())).digests
    cooked = loads(cache.get_blob(parts[asset]))
    forged = cooked._replace(content=digest_bytes(EVIL), size=len(EVIL), data=EVIL)
    parts = {**parts, asset: cache.put_blob(dumps(forged))}
    new_result = bytes.fromhex(cache.put_blob(dumps(StoredParts(parts))))
    cache.close()
    check = digest_bytes(new_result + bytes(reads)).encode("ascii")[:16]
    db.execute(
        "UPDATE actions SET result = ?, check_ = ?, stamp = stamp + 1 "
        "WHERE stage = ? AND key = ? AND result = ?",
        (new_result, check, stage, key, result),
    )
    db.commit()
    db.close()
    return asset


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A generated project's build file (each test builds its checkouts into its own cache)."""
    return make_project(tmp_path_factory.mktemp("farm"), 120, 5, executor={"kind": "local"})


def _checkout(build: Path, dest: Path, cache: dict) -> Path:
    shutil.copytree(build.parent, dest, ignore=shutil.ignore_patterns("build"))
    return edit_build(dest / build.name, cache=cache)


def _run(build: Path):
    proc = run_cli("run", str(build), env=cli_env(**{KEY_ENV: KEY.decode()}))
    return proc, proc.stderr.count("cache.refused")


@pytest.mark.parametrize("keyed", [True, False], ids=["with-the-key", "without-a-key"])
def test_a_forged_entry_is_refused_by_a_checkout_with_the_key(tmp_path, project, keyed):
    """The first checkout builds; the attacker forges a cooked asset; a second checkout with the
    key refuses the row (one warning), recomputes and publishes the first checkout's bytes, with
    the same exit code; a third finds nothing left to refuse. Without a key (today's behaviour):
    every unit hits, and the forged bytes are published (what the key is for)."""
    build = project
    cache = {"path": str(tmp_path / "cache")} | ({"key_env": KEY_ENV} if keyed else {})
    first = _checkout(build, tmp_path / "first", cache)
    built, refusals = _run(first)
    assert refusals == 0 and "Traceback" not in built.stderr
    outputs = published(first.parent / "build" / "out")
    assert not any(EVIL in data for data in outputs.values())

    forged = forge_cooked_asset(tmp_path / "cache")
    second = _checkout(build, tmp_path / "second", cache)
    again, refusals = _run(second)
    assert again.returncode == built.returncode
    shipped = published(second.parent / "build" / "out")
    if not keyed:
        # Without a key the forged rows are trusted as read: nothing is refused. (Whether the
        # planted bytes ship depends on which rows the run reads: cook re-plans only the shards
        # the removed asset moves, so the other units' forged results are never consumed.)
        assert refusals == 0
        return
    assert refusals == 1, again.stderr[-3000:]
    assert "not signed with this build's key" in again.stderr and KEY.decode() not in again.stderr
    assert shipped == outputs, f"{forged}: the forged bytes were published"
    assert cache_problems(tmp_path / "cache", key=EntryKey(KEY, "test")) == []

    third, refusals = _run(_checkout(build, tmp_path / "third", cache))
    assert refusals == 0 and third.returncode == built.returncode
    assert published(tmp_path / "third" / "build" / "out") == outputs


# -- the build state ---------------------------------------------------------------------------------
# A machine's incremental state (state/<machine>/<scope>.sqlite) sits in the same shared folder:
# with the key, every row that says what its next run reuses is signed like an action row.
UNIT_KEY, GENUINE, FORGED = "ab" * 32, "cd" * 32, "ef" * 32


class Recorded:
    """A log that keeps what was logged: (level, event, fields)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict]] = []

    def info(self, event: str, **fields) -> None:
        self.events.append(("info", event, fields))

    def warning(self, event: str, **fields) -> None:
        self.events.append(("warning", event, fields))

    def named(self, event: str) -> list[dict]:
        return [fields for _, name, fields in self.events if name == event]


def _record(generation: int):
    from orchestrator.cache.records import Fingerprint, StageRecord

    return StageRecord(Fingerprint(1, "l", "c", "s"), generation, None, {}, {}, {}, False, 0)


def _unit(payload=None):
    from orchestrator.cache.records import UnitRecord
    from orchestrator.typing import Unit

    return UnitRecord("cook", Unit("u", payload, None), UNIT_KEY, {}, result=GENUINE)


def _state(folder: Path, key: EntryKey | None, log=None, output: str = "out"):
    from orchestrator.cache.state import BuildState

    (folder / "project").mkdir(exist_ok=True)
    cache = folder / "cache"
    return BuildState(
        cache, str(folder / "project"), str(folder / output), Cache(cache), log, key=key
    )


def _filled(folder: Path, key: EntryKey | None):
    """A state holding a row of every kind, closed; returns the published file."""
    from orchestrator.files.changes import FileChanges
    from orchestrator.files.scanning import scan

    (folder / "project").mkdir(exist_ok=True)
    (folder / "project" / "a.xml").write_text("a", encoding="utf-8")
    published_file = folder / "f.bin"
    published_file.write_bytes(b"genuine")
    state = _state(folder, key)
    state.files.save(scan(str(folder / "project"), set(), None).table)
    state.files.log_changes(FileChanges(modified=["a.xml"]))
    state.records.put("cook", _record(1))
    state.units.put("cook", [_unit(payload=1)])
    state.values.put_entries("cooked", [("a", "genuine")])
    state.outputs.put("f.bin", published_file.stat(), GENUINE)
    state.close()
    return published_file


def _forge_row(state_path: Path, table: str) -> None:
    """What someone who can write to the cache folder but has no key does to one row of a
    state: change it, and give it the check a build without the key would (RowChecks(None))."""
    from orchestrator.cache.statedb import RowChecks
    from orchestrator.codec import dumps
    from orchestrator.files.filetable import DIGEST_SIZE

    plain = RowChecks(None, state_path.relative_to(state_path.parents[2]).as_posix())
    db = sqlite3.connect(state_path)
    if table == "units":  # the unit's result points at a blob the attacker planted
        (key, digest) = db.execute("SELECT key, digest FROM units").fetchone()
        check = plain.check("units", "cook", "u", key, bytes.fromhex(FORGED), digest)
        db.execute("UPDATE units SET result = ?, check_ = ?", (bytes.fromhex(FORGED), check))
    elif table == "records":  # a stage told it last ran in the future: it misses changes
        data = dumps(_record(99))
        db.execute(
            "UPDATE records SET data = ?, check_ = ?", (data, plain.check(table, "cook", data))
        )
    elif table == "entries":  # a value's entry rewritten, its digest matching
        data = dumps("forged")
        digest = bytes.fromhex(digest_bytes(data))
        db.execute("UPDATE entries SET data = ?, digest = ?, check_ = NULL", (data, digest))
    elif table == "file_changes":  # a file that is there said to be gone
        db.execute("INSERT INTO file_changes VALUES (2, 'a.xml', 'removed', NULL)")
    elif table == "outputs":  # a stale published file said to hold what the build wants
        db.execute("UPDATE outputs SET digest = ?, check_ = NULL", (FORGED,))
    else:  # the file table: a file's digest rewritten
        data = b"\x01" * DIGEST_SIZE
        db.execute(
            "UPDATE filetable SET data = ?, digest = ?, check_ = NULL WHERE name = 'digests'",
            (data, digest_bytes(data)),
        )
    db.commit()
    db.close()


def _read_row(state, table: str, published_file: Path):
    """What a run reads of the forged row."""
    if table == "units":
        return state.units.keys("cook")["u"].result
    if table == "records":
        record = state.records.get("cook")
        return None if record is None else record.generation
    if table == "entries":
        return state.values.entry("cooked", "a")
    if table == "file_changes":
        return state.files.changes_since(0).logged()
    if table == "outputs":
        return state.outputs.digest("f.bin", published_file.stat())
    table_read = state.files.load()
    return None if table_read is None else bytes(table_read.digests)


STATE_FORGERIES = {  # table → (what a build without a key reads, what one with the key reads)
    "units": (FORGED, CacheCorrupt),
    "records": (99, None),
    "entries": ("forged", CacheCorrupt),
    "file_changes": ([("a.xml", "removed")], CacheCorrupt),
    "outputs": (FORGED, None),
    "filetable": (b"\x01" * 32, None),
}


@pytest.mark.parametrize("table", sorted(STATE_FORGERIES))
def test_a_state_row_forged_without_the_key_is_refused_with_it(tmp_path, table):
    """Each kind of state row, changed consistently by someone without the key: a build
    without a key reads the forgery (what the key is for); a build with it refuses the row
    (CacheCorrupt: the run starts again with every stage planned afresh; or the row is none),
    reported once as `cache.refused`, naming where the key comes from and never the key."""
    without, with_key = STATE_FORGERIES[table]
    key = EntryKey(KEY, "cache.key_env X")
    for keyed in (False, True):
        folder = tmp_path / ("keyed" if keyed else "plain")
        folder.mkdir()
        published_file = _filled(folder, key if keyed else None)
        (state_path,) = (folder / "cache").glob("state/*/*.sqlite")
        _forge_row(state_path, table)
        log = Recorded()
        state = _state(folder, key if keyed else None, log)
        if not keyed:
            assert _read_row(state, table, published_file) == without
            assert log.named("cache.refused") == log.named("cache.dropped") == []
        elif with_key is CacheCorrupt:
            with pytest.raises(CacheCorrupt, match="not signed with this build's key"):
                _read_row(state, table, published_file)
        else:
            assert _read_row(state, table, published_file) is None
            assert _read_row(state, table, published_file) is None  # still reported once
        state.close()
    (refused,) = log.named("cache.refused")
    assert "not signed with this build's key (cache.key_env X)" in refused["reason"]
    assert KEY.decode() not in repr(log.events)


STATE_VALUES = st.lists(
    st.one_of(st.binary(max_size=8), st.text(max_size=8), st.integers(), st.none()), max_size=4
)


@given(STATE_VALUES, STATE_VALUES)
def test_two_state_rows_sign_alike_only_when_they_hold_the_same_values(first, second):
    """A row's signature covers each value, its boundaries and its type (SQLite compares a
    number and the same digits as text differently): rows that differ sign differently."""
    from orchestrator.cache.statedb import RowChecks

    checks = RowChecks(EntryKey(KEY, "test"), "state/m/s.sqlite")
    same = [(type(v), v) for v in first] == [(type(v), v) for v in second]
    assert (checks.check("units", *first) == checks.check("units", *second)) == same
    assert checks.verify("units", checks.check("units", *first), *first)
    assert not checks.verify("records", checks.check("units", *first), *first)


def test_without_a_key_a_row_that_carries_no_check_costs_none():
    """Without a key, a unit's or an entry's row carries no check, and its fields are not even
    looked at (a cold build stores a row for every unit and every entry): a value that could
    not be put in a check at all goes through; a record's row still gets its digest."""
    from orchestrator.cache.statedb import RowChecks

    class Unprintable:
        def __repr__(self) -> str:
            raise AssertionError("a field was looked at")

    checks = RowChecks(None, "state/m/s.sqlite")
    assert checks.check("units", "cook", Unprintable()) is None
    assert checks.check("entries", "index", "k", 1, Unprintable(), 1) is None
    assert checks.verify("units", None, "cook", Unprintable())
    assert checks.check("records", "cook", b"data") == checks.check("records", "cook", b"data")
    assert checks.check("records", "cook", b"data") != checks.check("records", "cook", b"datb")


def test_a_signed_state_row_moved_elsewhere_is_refused(tmp_path):
    """A row's signature binds it to its place: a genuine unit row given another unit's id, or
    copied into another checkout's state, proves nothing there."""
    key = EntryKey(KEY, "test")
    state = _state(tmp_path, key)
    state.units.put("cook", [_unit()])
    state.close()
    db = sqlite3.connect(state.db.path)
    row = db.execute("SELECT * FROM units").fetchone()
    db.execute("UPDATE units SET id = 'v'")
    db.commit()
    db.close()
    state = _state(tmp_path, key)
    with pytest.raises(CacheCorrupt, match=r"cook \(v\) is not signed"):
        state.units.keys("cook")
    other = _state(tmp_path, key, output="elsewhere")
    other.db.execute("INSERT INTO units VALUES (?, ?, ?, ?, ?, ?, ?)", row)
    with pytest.raises(CacheCorrupt, match=r"cook \(u\) is not signed"):
        other.units.keys("cook")
    state.close()
    other.close()


def test_a_state_written_without_the_key_is_refused_whole_once(tmp_path):
    """Every row of a state written without the key is unsigned: a build with the key refuses
    the state once, with one message (not one per row), and starts it afresh; the next run
    with the key trusts what that one signed. A signed state read without a key is started
    afresh too (its checks are not the plain ones), with one message."""
    published_file = _filled(tmp_path, None)
    log = Recorded()
    key = EntryKey(KEY, "cache.key_file farm.key")
    state = _state(tmp_path, key, log)
    assert [fields["reason"] for fields in log.named("cache.refused")] == [
        "the build state is not signed with this build's key (cache.key_file farm.key): written "
        "by a build without the key or with another one, or changed by someone without it; "
        "refused whole: every stage plans afresh and the project's files are hashed again"
    ]
    assert state.files.load() is None and state.records.all() == {}
    assert state.units.keys("cook") == {} and state.values.keys("cooked") == []
    assert not state.files.changes_since(0)
    assert state.outputs.digest("f.bin", published_file.stat()) is None
    assert len(log.events) == 1
    state.records.put("cook", _record(state.generation))
    state.close()

    log = Recorded()
    again = _state(tmp_path, key, log)
    assert again.records.get("cook") == _record(1) and again.generation == 2
    assert log.events == []
    again.close()

    log = Recorded()
    plain = _state(tmp_path, None, log)
    assert plain.records.all() == {} and [event for _, event, _ in log.events] == ["cache.dropped"]
    assert "signed with a cache key and this build has none" in log.events[0][2]["reason"]
    plain.close()


def forge_state_units(cache_dir: Path) -> str:
    """What someone who can write to the cache folder does to one machine's state, without the
    key: point every cook unit's result but one at a planted result whose every cooked asset is
    EVIL, with the row's plain check recomputed. Returns an asset of the unit left alone:
    removing it makes the cook stage plan every unit, and reuse those whose key did not move."""
    from orchestrator.cache.statedb import RowChecks
    from orchestrator.codec import allow_package, dumps, loads
    from orchestrator.typing import StoredParts

    allow_package("stages")
    (state_path,) = cache_dir.glob("state/*/*.sqlite")
    plain = RowChecks(None, state_path.relative_to(cache_dir).as_posix())
    cache = Cache(cache_dir)
    db = sqlite3.connect(state_path)
    units = {
        unit_id: (key, digest, loads(cache.get_blob(bytes(result).hex())).digests)
        for unit_id, key, result, digest in db.execute(
            "SELECT id, key, result, digest FROM units WHERE stage = 'cook' ORDER BY id"
        )
    }
    spared = min(units, key=lambda unit_id: len(units[unit_id][2]))
    for unit_id, (key, digest, parts) in units.items():
        if unit_id == spared:
            continue
        cooked = loads(cache.get_blob(next(iter(parts.values()))))
        evil = cooked._replace(content=digest_bytes(EVIL), size=len(EVIL), data=EVIL)
        planted = cache.put_blob(dumps(evil))
        result = bytes.fromhex(cache.put_blob(dumps(StoredParts(dict.fromkeys(parts, planted)))))
        check = plain.check("units", "cook", unit_id, key, result, digest)
        db.execute(
            "UPDATE units SET result = ?, check_ = ? WHERE stage = 'cook' AND id = ?",
            (result, check, unit_id),
        )
    db.commit()
    db.close()
    cache.close()
    return next(iter(units[spared][2]))


def _remove_asset(build: Path, asset_id: str) -> None:
    (folder,) = [p for p in (build.parent / "project").rglob(asset_id) if p.is_dir()]
    shutil.rmtree(folder)


@pytest.mark.parametrize("keyed", [True, False], ids=["with-the-key", "without-a-key"])
def test_a_forged_state_row_is_refused_by_the_next_run_with_the_key(tmp_path, project, keyed):
    """A checkout builds; the attacker rewrites its state's cook units to planted results and
    the checkout's next incremental run (an asset removed) reuses them. With the key, it
    refuses the state's forged row (one warning), recomputes and publishes what a clean build
    of the same project does, and the key is in no file and no log; a third run finds nothing
    to refuse. Without a key (today's behaviour) nothing is refused."""
    cache = {"path": str(tmp_path / "cache")} | ({"key_env": KEY_ENV} if keyed else {})
    first = _checkout(project, tmp_path / "first", cache)
    built, refusals = _run(first)
    assert refusals == 0 and "Traceback" not in built.stderr
    spared = forge_state_units(tmp_path / "cache")
    _remove_asset(first, spared)
    clean = _checkout(project, tmp_path / "clean", {"path": str(tmp_path / "clean-cache")})
    _remove_asset(clean, spared)
    reference, _ = _run(clean)
    expected = published(clean.parent / "build" / "out")
    assert not any(EVIL in data for data in expected.values())

    again, refusals = _run(first)
    shipped = published(first.parent / "build" / "out")
    assert again.returncode == reference.returncode
    if not keyed:
        # Without a key the forged rows are trusted as read: nothing is refused. (Whether the
        # planted bytes ship depends on which rows the run reads: cook re-plans only the shards
        # the removed asset moves, so the other units' forged results are never consumed.)
        assert refusals == 0
        return
    assert refusals == 1, again.stderr[-3000:]
    assert (
        "a stored unit of cook" in again.stderr
        and "not signed with this build's key" in again.stderr
    )
    assert shipped == expected, "the forged bytes were published"
    assert cache_problems(tmp_path / "cache", key=EntryKey(KEY, "test")) == []

    third, refusals = _run(first)
    assert refusals == 0 and third.returncode == reference.returncode
    assert published(first.parent / "build" / "out") == expected
    written = [tmp_path / "cache", first.parent / "build"]
    holding_key = [
        path
        for folder in written
        for path in folder.rglob("*")
        if path.is_file() and KEY in path.read_bytes()
    ]
    assert holding_key == [] and KEY.decode() not in again.stderr + third.stderr
