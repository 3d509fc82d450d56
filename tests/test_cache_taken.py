"""Stages a build state holds by reference (orchestrator/cache/taken.py): a state that took a
stage's rows answers every question about its values and units as a state that stored those
rows does, before and after something changes them (which writes them in: "settles" them),
and a taken part's row that fails its check, or a blob that is gone, is found out."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cache import Cache
from orchestrator.cache import state as state_module
from orchestrator.cache.housekeeping import taken_blobs
from orchestrator.cache.records import Fingerprint, StageRecord, StageRows
from orchestrator.cache.state import BuildState
from orchestrator.codec import dumps
from orchestrator.errors import CacheCorrupt
from orchestrator.hashing import digest_bytes

VALUE = "index"
STAGE = "collect"


def open_state(folder: Path, name: str) -> BuildState:
    cache = folder / "cache"
    return BuildState(cache, str(folder / name), str(folder / name / "out"), Cache(cache))


def stage_rows(entries: dict[str, bytes], units: int) -> StageRows:
    """A stage's rows: its value `entries` (key → stored data) and `units` units, each having
    read a file of its own."""
    record = StageRecord(Fingerprint(1, "", "", ""), 0, None, {}, {}, {}, False, units)
    rows = [[key, bytes.fromhex(digest_bytes(data)), data] for key, data in sorted(entries.items())]
    unit_rows = [
        [f"u{i}", b"k%d" % i, b"r%d" % i, bytes.fromhex(digest_bytes(b"d")), b"d"]
        for i in range(units)
    ]
    reads = [[f"file{i}", f"u{i}"] for i in range(units)]
    return StageRows(record, unit_rows, reads, {VALUE: rows})


def stored_blob(folder: Path, rows: StageRows) -> str:
    """The blob of a stage's rows in the cache folder, as another build filed it."""
    cache = Cache(folder / "cache")
    blob = cache.put_blob(dumps(rows))
    cache.close()
    return blob


def answers(state: BuildState, keys: list[str], since: int) -> dict:
    """What the stores answer about the value and the stage's units."""
    values, units = state.values, state.units
    return {
        "has": values.has(VALUE),
        "generation": values.generation(VALUE),
        "keys": values.keys(VALUE),
        "digests": values.digests(VALUE),
        "digests_of": values.digests_of(VALUE, keys),
        "entry_digest": [values.entry_digest(VALUE, key) for key in keys],
        "fingerprint": values.fingerprint(VALUE),
        "encoded": values.encoded_items(VALUE),
        "rows": values.rows(VALUE),
        "changes": values.changes(VALUE, since),
        "since now": values.changes(VALUE, state.generation),
        "unit keys": units.keys(STAGE),
        "readers": units.readers(STAGE, ["file0", "file1", "nothing"]),
        "holds": units.holds(STAGE),
    }


#: Inline data (what starts with entries.STORED_PREFIX names a blob instead).
ENTRIES = st.dictionaries(
    st.text(min_size=1, max_size=6), st.binary(max_size=16).map(b"v".__add__), max_size=12
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=ENTRIES,
    units=st.integers(0, 3),
    asked=st.lists(st.text(min_size=1, max_size=6), max_size=4),
    patch=ENTRIES,
)
def test_a_taken_stage_reads_as_a_stored_one(
    tmp_path_factory, monkeypatch, entries, units, asked, patch
):
    """Taken or stored, the state answers alike; a patch after it (which settles the value)
    changes the same keys and leaves the same entries, with the generation they were taken at
    for those it did not touch."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 0)  # every value held by reference
    folder = tmp_path_factory.mktemp("taken")
    rows = stage_rows(entries, units)
    blob = stored_blob(folder, rows)
    stored, taken = open_state(folder, "stored"), open_state(folder, "taken")
    for state in (stored, taken):
        with state.transaction():
            state.take(STAGE, blob, rows) if state is taken else _store(state, rows)
    assert taken.db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 0
    keys = asked + list(entries)[:2]
    assert answers(taken, keys, 0) == answers(stored, keys, 0)
    for state in (stored, taken):
        with state.transaction():
            state.values.put_entries(VALUE, patch.items())
    assert answers(taken, keys, 0) == answers(stored, keys, 0)
    assert taken.db.execute("SELECT 1 FROM taken WHERE kind = 'value'").fetchall() == []
    for state in (stored, taken):
        state.close()


def _store(state: BuildState, rows: StageRows) -> None:
    """What a state that holds the stage already does: write its rows in."""
    state.units.put_rows(STAGE, rows.units, rows.reads)
    for name, entries in rows.values.items():
        state.values.put_rows(name, entries)


def test_a_fresh_state_takes_by_reference_and_a_holding_one_writes(tmp_path, monkeypatch):
    """Nothing of the stage in the state: one row per part names the blob, no entry and no
    unit is written. Something of it there already: the rows are written, diffed."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 2)
    rows = stage_rows({"a": b"1", "b": b"2"}, 2)
    blob = stored_blob(tmp_path, rows)
    state = open_state(tmp_path, "fresh")
    with state.transaction():
        state.take(STAGE, blob, rows)
    count = state.db.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    assert count == 0
    assert state.db.execute("SELECT kind, name FROM taken ORDER BY kind").fetchall() == [
        ("units", STAGE),
        ("value", VALUE),
    ]
    state.close()
    assert taken_blobs([Path(state.db.path)]) == {blob}
    again = open_state(tmp_path, "fresh")  # the next run: a fingerprint moved, taken again
    with again.transaction():
        again.take(STAGE, blob, stage_rows({"a": b"1", "c": b"3"}, 1))
    assert again.db.execute("SELECT COUNT(*) FROM taken").fetchone()[0] == 0
    assert again.values.keys(VALUE) == ["a", "c"]
    assert again.values.changes(VALUE, again.generation - 1).removed == {"b"}
    assert again.values.changes(VALUE, again.generation - 1).changed == {"c"}
    again.close()


def test_small_values_are_written_at_once(tmp_path, monkeypatch):
    """A value of fewer than HELD_ENTRIES entries is written in when taken: what reads it
    (a no-op's verdict) does not read its stage's blob."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 3)
    rows = stage_rows({"a": b"1", "b": b"2"}, 1)
    rows.values["summary"] = rows.values[VALUE][:1]
    rows.values[VALUE].append(["c", bytes.fromhex(digest_bytes(b"3")), b"3"])
    blob = stored_blob(tmp_path, rows)
    state = open_state(tmp_path, "fresh")
    with state.transaction():
        state.take(STAGE, blob, rows)
    assert state.db.execute("SELECT value, key FROM entries").fetchall() == [("summary", "a")]
    assert state.db.execute("SELECT kind, name FROM taken ORDER BY kind").fetchall() == [
        ("units", STAGE),
        ("value", VALUE),
    ]
    assert state.values.generation("summary") == state.values.generation(VALUE)
    state.close()


def test_a_rolled_back_take_leaves_nothing_taken(tmp_path, monkeypatch):
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 0)
    rows = stage_rows({"a": b"1"}, 1)
    blob = stored_blob(tmp_path, rows)
    state = open_state(tmp_path, "fresh")
    with pytest.raises(KeyboardInterrupt), state.transaction():
        state.take(STAGE, blob, rows)
        raise KeyboardInterrupt
    assert not state.values.has(VALUE) and not state.units.holds(STAGE)
    state.close()


def test_a_taken_part_that_fails_its_check_or_lost_its_blob_is_found_out(tmp_path, monkeypatch):
    """A changed generation (its row's check no longer holds), or a blob gone: CacheCorrupt,
    which starts the run again with every stage planned afresh."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 0)
    rows = stage_rows({"a": b"1"}, 1)
    cache = Cache(tmp_path / "cache")
    blob = cache.put_blob(dumps(rows))
    state = open_state(tmp_path, "fresh")
    with state.transaction():
        state.take(STAGE, blob, rows)
    path = Path(state.db.path)
    state.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE taken SET gen = gen + 1 WHERE kind = 'value'")
    db.commit()
    db.close()
    changed = open_state(tmp_path, "fresh")
    with pytest.raises(CacheCorrupt):
        changed.values.generation(VALUE)
    changed.close()
    db = sqlite3.connect(path)
    db.execute("UPDATE taken SET gen = gen - 1 WHERE kind = 'value'")
    db.commit()
    db.close()
    cache.flush()
    for held in (tmp_path / "cache" / "cas").rglob("*"):
        if held.is_file() and held.name != "index.log":
            held.unlink()
    lost = open_state(tmp_path, "fresh")
    assert lost.values.generation(VALUE) > 0  # the row alone answers this
    with pytest.raises(CacheCorrupt):
        lost.values.keys(VALUE)
    lost.close()


def test_gc_keeps_the_blobs_states_hold_taken_stages_in(tmp_path, monkeypatch):
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 0)
    rows = stage_rows({f"k{i}": bytes(2000) + b"%d" % i for i in range(600)}, 2)
    cache = Cache(tmp_path / "cache")
    blob = cache.put_blob(dumps(rows))  # over a megabyte: a file of its own
    other = cache.put_blob(dumps(dataclasses.replace(rows.record, units=3)) + bytes(2 << 20))
    cache.flush()
    state = open_state(tmp_path, "fresh")
    with state.transaction():
        state.take(STAGE, blob, rows)
    state.close()
    cache.gc(max_bytes=0)
    assert cache.has_blob(blob) and not cache.has_blob(other)
    small = stage_rows({"a": b"1"}, 1)  # packed with other small blobs: its pack is kept
    packed = cache.put_blob(dumps(small))
    cache.flush()
    state = open_state(tmp_path, "other")
    with state.transaction():
        state.take(STAGE, packed, small)
    state.close()
    Cache(tmp_path / "cache").gc(max_bytes=0)
    assert Cache(tmp_path / "cache").has_blob(packed)
