"""The build state of one scope: where it lives, the file table and its change log, stage
records, units and the reverse index of what they read."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cache import Cache
from orchestrator.cache.records import Fingerprint, StageRecord, UnitKeys, UnitRecord
from orchestrator.cache.state import BuildState, machine_id
from orchestrator.cache.stores import SINGLE_OUTPUT_LOOKUPS
from orchestrator.errors import CacheCorrupt
from orchestrator.files.changes import FileChanges
from orchestrator.files.scanning import scan
from orchestrator.typing import Unit

KEY, RESULT = "ab" * 32, "cd" * 32


def open_state(folder: Path, output: str = "out") -> BuildState:
    (folder / "project").mkdir(exist_ok=True)
    cache = folder / "cache"
    return BuildState(cache, str(folder / "project"), str(folder / output), Cache(cache))


def a_record(generation: int = 1) -> StageRecord:
    return StageRecord(Fingerprint(1, "l", "c", "s"), generation, None, {}, {}, {}, False, 0)


def a_unit(stage: str, unit_id: str, payload=None, reads=()) -> UnitRecord:
    unit = Unit(unit_id, payload, None)
    return UnitRecord(stage, unit, KEY, {}, result=RESULT, reads=dict.fromkeys(reads))


def test_a_scope_is_one_checkout_and_output_folder_on_one_machine(tmp_path):
    """The database is named by machine and by (project, output folder): another output folder
    of the same checkout starts from nothing."""
    first = open_state(tmp_path)
    first.records.put("collect", a_record())
    assert first.db.path.parent.name == machine_id()
    first.close()
    other = open_state(tmp_path, output="elsewhere")
    assert other.db.path != first.db.path and other.records.get("collect") is None
    other.close()
    again = open_state(tmp_path)
    assert again.records.get("collect") == a_record() and again.generation == 2
    again.close()


def test_the_file_table_and_its_change_log_survive_runs(tmp_path):
    """The stored table loads back equal; changes are logged under the run's generation and
    read back after a given one, oldest first."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    assert state.files.load() is None
    table = scan(str(project), set(), None).table
    state.files.save(table)
    state.files.log_changes(FileChanges(added=["a.txt"]))
    g1 = state.generation
    state.close()
    state = open_state(tmp_path)
    assert state.files.load().paths == ["a.txt"]
    state.files.save(table)
    state.files.log_changes(FileChanges(added=["b.txt"], modified=["a.txt"]))
    assert state.files.changes_since(0) == FileChanges(added=["a.txt", "b.txt"])  # net
    assert state.files.changes_since(g1) == FileChanges(added=["b.txt"], modified=["a.txt"])
    state.close()


def test_a_damaged_file_table_is_dropped_not_trusted(tmp_path):
    """Columns that do not agree make the table unknown (the next scan lists everything)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    state.files.save(scan(str(project), set(), None).table)
    state.db.execute("UPDATE filetable SET data = x'00' WHERE name = 'size'")
    assert state.files.load() is None
    state.close()


def test_units_and_the_reverse_index_of_their_reads(tmp_path):
    """Stored units come back with their keys; `readers` finds the units of a stage that read
    (or looked for) a file; dropping units drops their reads."""
    state = open_state(tmp_path)
    units = state.units
    units.put(
        "validate",
        [a_unit("validate", "u1", 1, ["a.xml", "b.xml"]), a_unit("validate", "u2", 2, ["b.xml"])],
    )
    units.put("cook", [a_unit("cook", "u1", reads=["a.xml"])])
    assert units.keys("validate") == {"u1": UnitKeys(KEY, RESULT), "u2": UnitKeys(KEY, RESULT)}
    assert units.keys("validate", ["u2", "gone"]) == {"u2": UnitKeys(KEY, RESULT)}
    assert units.count("validate") == 2 and units.count("cook") == 1 and units.count("x") == 0
    stored = units.get("validate", ["u1"])["u1"]
    assert stored.planned.payload == 1 and stored.stored and stored.result == RESULT
    assert units.readers("validate", ["b.xml"]) == {"u1": ["b.xml"], "u2": ["b.xml"]}
    assert units.readers("validate", ["a.xml", "c.xml"]) == {"u1": ["a.xml"]}
    units.drop("validate", ["u1"])
    assert units.readers("validate", ["a.xml", "b.xml"]) == {"u2": ["b.xml"]}
    assert units.readers("cook", ["a.xml"]) == {"u1": ["a.xml"]}
    units.drop_stage("validate")
    assert units.keys("validate") == {} and units.readers("validate", ["b.xml"]) == {}
    state.close()


PATHS = [f"f{n}.xml" for n in range(6)] + ["\x1eindex/repo/g1", "\x1eindex/repo/g2", "\x1eindex"]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    runs=st.lists(
        st.dictionaries(st.sampled_from(["u1", "u2", "u3"]), st.sets(st.sampled_from(PATHS))),
        min_size=1,
        max_size=5,
    )
)
def test_a_unit_stored_again_keeps_exactly_its_new_reads(tmp_path_factory, runs):
    """Run after run, units stored again (as store_stage does: only the reads rows that differ
    are written) leave the reverse index what storing them afresh leaves: each unit's rows are
    exactly its latest reads, whatever it read before."""
    folder = tmp_path_factory.mktemp("state")
    latest: dict[str, set[str]] = {}
    for run in runs:
        state = open_state(folder)
        with state.transaction():
            state.units.put(
                "validate",
                [
                    dataclasses.replace(
                        a_unit("validate", uid, reads=sorted(reads)), stored=uid in latest
                    )
                    for uid, reads in run.items()
                ],
            )
        latest.update(run)
        expected: dict[str, list[str]] = {}
        for uid, reads in latest.items():
            for path in reads:
                expected.setdefault(uid, []).append(path)
        found = state.units.readers("validate", PATHS)
        assert {u: sorted(p) for u, p in found.items()} == {
            u: sorted(p) for u, p in expected.items()
        }
        state.close()


def test_a_unit_run_again_rewrites_only_the_reads_rows_that_differ(tmp_path):
    """A rule unit that ran again after a rename read what it read before but one entry: only
    that row is deleted and one inserted (at 100,000 resources rewriting all of its hundred
    thousand rows was seconds of every edit)."""
    state = open_state(tmp_path)
    reads = [f"\x1eindex/repo/g{n}" for n in range(500)]
    state.units.put("validate", [a_unit("validate", "u", reads=reads)])
    written: list[tuple] = []
    real = state.db.execute_many

    def noting(sql, rows):
        rows = list(rows)
        if "reads" in sql:
            written.extend((sql.split()[0], *row) for row in rows)
        return real(sql, rows)

    state.db.execute_many = noting  # type: ignore[method-assign]
    again = [*reads[1:], "\x1eindex/repo/new"]
    state.units.put(
        "validate", [dataclasses.replace(a_unit("validate", "u", reads=again), stored=True)]
    )
    assert written == [
        ("DELETE", reads[0], "validate", "u"),
        ("INSERT", "\x1eindex/repo/new", "validate", "u"),
    ]
    found = state.units.readers("validate", [*reads, "\x1eindex/repo/new"])
    assert sorted(found["u"]) == sorted(again)
    state.close()


def test_an_undecodable_record_is_absent_and_an_undecodable_unit_is_damage(tmp_path):
    """A record that does not decode is missing (its stage plans afresh); a unit that does not
    decode is damage (kept, its stage would trust an old result), so the run restarts."""
    state = open_state(tmp_path)
    state.units.put("s", [a_unit("s", "good"), a_unit("s", "bad")])
    state.records.put("s", a_record())
    state.db.execute("UPDATE units SET data = x'c1' WHERE id = 'bad'")  # 0xc1: never msgpack
    state.db.execute("UPDATE records SET data = x'c1'")
    assert set(state.units.get("s", ["good"])) == {"good"}
    with pytest.raises(CacheCorrupt, match=r"stored unit of s \(bad\)"):
        state.units.get("s")
    assert state.records.get("s") is None and state.records.all() == {}
    state.close()


def test_forgetting_the_stages_keeps_the_file_table(tmp_path):
    """After damage, the stages start afresh but the file table (and its digests) stays."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    state.files.save(scan(str(project), set(), None).table)
    state.records.put("s", a_record())
    state.units.put("s", [a_unit("s", "u", reads=["a.txt"])])
    state.values.put_entries("v", [("k", 1)])
    state.forget_stages()
    assert state.records.all() == {} and state.units.keys("s") == {}
    assert state.values.keys("v") == [] and state.units.readers("s", ["a.txt"]) == {}
    assert state.files.load().paths == ["a.txt"]
    state.close()


def test_a_published_files_digest_is_trusted_only_under_its_signature(tmp_path):
    """The digest of an output file is remembered with its stat signature, and forgotten as
    soon as the file is touched."""
    out = tmp_path / "out"
    out.mkdir()
    target = out / "f.bin"
    target.write_bytes(b"one")
    state = open_state(tmp_path)
    state.outputs.put("f.bin", target.stat(), "d1")
    assert state.outputs.digest("f.bin", target.stat()) == "d1"
    target.write_bytes(b"two")
    assert state.outputs.digest("f.bin", target.stat()) is None
    state.close()
    db = sqlite3.connect(state.db.path)
    assert db.execute("SELECT COUNT(*) FROM outputs").fetchone()[0] == 1
    db.close()


def test_published_files_read_whole_answer_as_single_lookups_do(tmp_path):
    """Past SINGLE_OUTPUT_LOOKUPS lookups the rows are read at once: the answers stay those of
    the table, rows put afterwards are seen, and a rollback forgets what it undid."""
    out = tmp_path / "out"
    out.mkdir()
    names = [f"f{i}.bin" for i in range(SINGLE_OUTPUT_LOOKUPS + 10)]
    state = open_state(tmp_path)
    for name in names:
        (out / name).write_bytes(name.encode())
        state.outputs.put(name, (out / name).stat(), f"d-{name}")
    (out / names[-1]).write_bytes(b"touched")
    answers = [state.outputs.digest(name, (out / name).stat()) for name in names]
    assert answers == [f"d-{name}" for name in names[:-1]] + [None]
    assert state.outputs.digest("absent.bin", (out / names[0]).stat()) is None
    state.outputs.put(names[-1], (out / names[-1]).stat(), "d-new")
    assert state.outputs.digest(names[-1], (out / names[-1]).stat()) == "d-new"
    state.begin()
    (out / "late.bin").write_bytes(b"late")
    state.outputs.put("late.bin", (out / "late.bin").stat(), "d-late")
    state.rollback()
    assert state.outputs.digest("late.bin", (out / "late.bin").stat()) is None
    state.close()
