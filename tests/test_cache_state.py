"""The build state of one scope: where it lives, the file table and its change log, stage
records, units and the reverse index of what they read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from orchestrator.cache import Cache
from orchestrator.cache.state import SINGLE_OUTPUT_LOOKUPS, ScopeState, machine_id
from orchestrator.errors import CacheCorrupt
from orchestrator.files.scanning import scan

KEY, RESULT = "ab" * 32, "cd" * 32


def open_state(folder: Path, output: str = "out") -> ScopeState:
    (folder / "project").mkdir(exist_ok=True)
    cache = folder / "cache"
    return ScopeState(cache, str(folder / "project"), str(folder / output), Cache(cache))


def test_a_scope_is_one_checkout_and_output_folder_on_one_machine(tmp_path):
    """The database is named by machine and by (project, output folder): another output folder
    of the same checkout starts from nothing."""
    first = open_state(tmp_path)
    first.put_record("collect", {"gen": 1})
    assert first.path.parent.name == machine_id()
    first.close()
    other = open_state(tmp_path, output="elsewhere")
    assert other.path != first.path and other.record("collect") is None
    other.close()
    again = open_state(tmp_path)
    assert again.record("collect") == {"gen": 1} and again.generation == 2
    again.close()


def test_the_file_table_and_its_change_log_survive_runs(tmp_path):
    """The stored table loads back equal; changes are logged under the run's generation and
    read back after a given one, oldest first."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    assert state.file_table() is None
    table = scan(str(project), set(), None).table
    state.save_file_table(table)
    state.log_file_changes([("a.txt", "added")])
    g1 = state.generation
    state.close()
    state = open_state(tmp_path)
    assert state.file_table().paths == ["a.txt"]
    state.save_file_table(table)
    state.log_file_changes([("a.txt", "modified"), ("b.txt", "added")])
    assert state.file_changes(0) == [("a.txt", "added"), ("a.txt", "modified"), ("b.txt", "added")]
    assert sorted(state.file_changes(g1)) == [("a.txt", "modified"), ("b.txt", "added")]
    state.close()


def test_a_damaged_file_table_is_dropped_not_trusted(tmp_path):
    """Columns that do not agree make the table unknown (the next scan lists everything)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    state.save_file_table(scan(str(project), set(), None).table)
    state.execute("UPDATE filetable SET data = x'00' WHERE name = 'size'")
    assert state.file_table() is None
    state.close()


def test_units_and_the_reverse_index_of_their_reads(tmp_path):
    """Stored units come back with their keys; `readers` finds the units of a stage that read
    (or looked for) a file; dropping units drops their reads."""
    state = open_state(tmp_path)
    state.put_units("validate", [("u1", KEY, RESULT, {"payload": 1}), ("u2", KEY, RESULT, {})])
    state.put_units("cook", [("u1", KEY, RESULT, {})])
    state.put_reads("validate", [("u1", "a.xml"), ("u1", "b.xml"), ("u2", "b.xml")])
    state.put_reads("cook", [("u1", "a.xml")])
    assert state.unit_keys("validate") == {"u1": (KEY, RESULT), "u2": (KEY, RESULT)}
    assert state.units("validate", ["u1"])["u1"].data == {"payload": 1}
    assert state.readers("validate", ["b.xml"]) == {"u1": ["b.xml"], "u2": ["b.xml"]}
    assert state.readers("validate", ["a.xml", "c.xml"]) == {"u1": ["a.xml"]}
    assert state.stages_reading(["a.xml"]) == {"validate", "cook"}
    state.drop_units("validate", ["u1"])
    assert state.readers("validate", ["a.xml", "b.xml"]) == {"u2": ["b.xml"]}
    assert state.readers("cook", ["a.xml"]) == {"u1": ["a.xml"]}
    state.drop_stage_units("validate")
    assert state.unit_keys("validate") == {} and state.readers("validate", ["b.xml"]) == {}
    state.close()


def test_an_undecodable_record_is_absent_and_an_undecodable_unit_is_damage(tmp_path):
    """A record that does not decode is missing (its stage plans afresh); a unit that does not
    decode is damage (kept, its stage would trust an old result), so the run restarts."""
    state = open_state(tmp_path)
    state.put_units("s", [("good", KEY, RESULT, {}), ("bad", KEY, RESULT, {})])
    state.put_record("s", {"gen": 1})
    state.execute("UPDATE units SET data = x'c1' WHERE id = 'bad'")  # 0xc1: never msgpack
    state.execute("UPDATE records SET data = x'c1'")
    assert set(state.units("s", ["good"])) == {"good"}
    with pytest.raises(CacheCorrupt, match=r"stored unit of s \(bad\)"):
        state.units("s")
    assert state.record("s") is None and state.records() == {}
    state.close()


def test_forgetting_the_stages_keeps_the_file_table(tmp_path):
    """After damage, the stages start afresh but the file table (and its digests) stays."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("a")
    state = open_state(tmp_path)
    state.save_file_table(scan(str(project), set(), None).table)
    state.put_record("s", {"gen": 1})
    state.put_units("s", [("u", KEY, RESULT, {})])
    state.put_reads("s", [("u", "a.txt")])
    state.put_entries("v", [("k", 1)])
    state.forget_stages()
    assert state.records() == {} and state.unit_keys("s") == {} and state.keys("v") == []
    assert state.file_table().paths == ["a.txt"]
    state.close()


def test_a_published_files_digest_is_trusted_only_under_its_signature(tmp_path):
    """The digest of an output file is remembered with its stat signature, and forgotten as
    soon as the file is touched."""
    out = tmp_path / "out"
    out.mkdir()
    target = out / "f.bin"
    target.write_bytes(b"one")
    state = open_state(tmp_path)
    state.put_output("f.bin", target.stat(), "d1")
    assert state.output_digest("f.bin", target.stat()) == "d1"
    target.write_bytes(b"two")
    assert state.output_digest("f.bin", target.stat()) is None
    state.close()
    db = sqlite3.connect(state.path)
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
        state.put_output(name, (out / name).stat(), f"d-{name}")
    (out / names[-1]).write_bytes(b"touched")
    answers = [state.output_digest(name, (out / name).stat()) for name in names]
    assert answers == [f"d-{name}" for name in names[:-1]] + [None]
    assert state.output_digest("absent.bin", (out / names[0]).stat()) is None
    state.put_output(names[-1], (out / names[-1]).stat(), "d-new")
    assert state.output_digest(names[-1], (out / names[-1]).stat()) == "d-new"
    state.begin()
    (out / "late.bin").write_bytes(b"late")
    state.put_output("late.bin", (out / "late.bin").stat(), "d-late")
    state.rollback()
    assert state.output_digest("late.bin", (out / "late.bin").stat()) is None
    state.close()
