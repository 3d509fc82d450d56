"""Dependencies on entries of a value, not on the value (issue 29): a unit that looks up entries
of a keyed input through `reader.entry` (or reads it whole through `reader.whole`) has them in
its trace, so a change to one entry re-runs only the units that read it, an entry looked for
and missing re-runs them when it appears, an edit undone is answered by the action cache, and
--explain names the entry.

Toy stages: `catalog` (a keyed value, one entry per `cat/<name>.txt`) and `lookups` (one unit
per `.ref` file, looking up the entries it names)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import pytest
import toy_stages.lookups as lookups
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.codec import digest
from orchestrator.core.config import load_build
from orchestrator.core.options import RunOptions
from orchestrator.core.registry import load_stage
from orchestrator.core.scheduler import run_build
from orchestrator.files.reads import FOUND, Reader, entry_path, entry_read, whole_path
from orchestrator.keyed import what_changed
from orchestrator.shell.present import setup_logging
from orchestrator.testing import run_stage

STAGES = ("toy_stages.catalog", "toy_stages.lookups")
REFS = {"r1.ref": "a", "r2.ref": "b c", "r3.ref": "*", "r4.ref": "z", "r5.ref": "c"}


def write(base: Path, catalog_entries: dict[str, str], refs: dict[str, str]) -> Path:
    project = base / "p"
    for name, text in catalog_entries.items():
        (project / "cat").mkdir(parents=True, exist_ok=True)
        (project / "cat" / f"{name}.txt").write_text(text, encoding="utf-8")
    for name, text in refs.items():
        (project / name).write_text(text, encoding="utf-8")
    build = base / "build.yaml"
    build.write_text("project: p\noutput: out\ncache: cache\n", encoding="utf-8")
    return build


def build(build_file: Path, output: str = "out", cache: str = "cache", **options):
    settings_ = load_build(build_file)
    base = build_file.parent
    settings_.output_dir, settings_.cache_dir = base / output, base / cache
    run = RunOptions(executor="local", progress=False, **options)
    return run_build(settings_, run, setup_logging("json"), [load_stage(s) for s in STAGES])


def ran(result, stage: str = "lookups") -> set[str]:
    return {record.id for record in result.explained if record.stage == stage and record.ran}


def report(result, stage: str = "lookups"):
    return next(r for r in result.reports if r.name == stage)


@pytest.fixture
def toy(tmp_path):
    build_file = write(tmp_path, {"a": "apple", "b": "banana", "c": "cherry"}, REFS)
    build(build_file)
    return tmp_path, build_file


def test_an_entry_edit_reruns_only_the_units_that_read_it(toy):
    base, build_file = toy
    (base / "p" / "cat" / "a.txt").write_text("avocado", encoding="utf-8")
    result = build(build_file, explain=True)
    assert ran(result) == {"r1.ref", "r3.ref"}
    reasons = {r.id: r.reason for r in result.explained if r.stage == "lookups"}
    assert reasons["r1.ref"] == "input changed: catalog entry a: changed"
    assert reasons["r3.ref"] == "input changed: catalog (read whole)"
    assert report(result).why.startswith("2 unit(s) read changed entries: ")
    assert (base / "out" / "joined.txt").read_text().splitlines()[0] == "r1.ref: a=avocado"


class Item(NamedTuple):
    guid: str
    name: str
    deps: tuple[str, ...]


def test_what_changed_names_the_fields_of_records():
    """--explain's words for an entry's change: the fields of its records that differ."""
    before = (Item("g", "rock", ()), Item("g", "rock", ("d",)))
    assert what_changed(before, (Item("g", "stone", ()), Item("g", "stone", ("d",)))) == (
        "name changed"
    )
    assert what_changed(before[0], Item("g", "stone", ("e",))) == "deps, name changed"
    assert what_changed(before, before[:1]) == "2 → 1 items"
    assert what_changed({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4}) == "b, c changed"
    assert what_changed("apple", "avocado") == "changed"


def test_an_entry_that_appears_reruns_the_unit_that_missed_it(toy):
    base, build_file = toy
    (base / "p" / "cat" / "z.txt").write_text("zucchini", encoding="utf-8")
    result = build(build_file, explain=True)
    assert ran(result) == {"r3.ref", "r4.ref"}
    reasons = {r.id: r.reason for r in result.explained if r.stage == "lookups"}
    assert reasons["r4.ref"] == "input changed: catalog entry z: added"
    assert "r4.ref: z=zucchini" in (base / "out" / "joined.txt").read_text()


def test_an_entry_that_goes_reruns_its_readers(toy):
    base, build_file = toy
    (base / "p" / "cat" / "c.txt").unlink()
    result = build(build_file, explain=True)
    assert ran(result) == {"r2.ref", "r3.ref", "r5.ref"}
    reasons = {r.id: r.reason for r in result.explained if r.stage == "lookups"}
    assert reasons["r5.ref"] == "input changed: catalog entry c: removed"
    assert "r5.ref: c=?" in (base / "out" / "joined.txt").read_text()


def test_an_edit_undone_is_found_in_the_action_cache(toy):
    """Undoing an entry's edit makes its readers due again; their traces match what the first
    build recorded, so they are found, not run."""
    base, build_file = toy
    path = base / "p" / "cat" / "b.txt"
    path.write_text("blueberry", encoding="utf-8")
    assert ran(build(build_file, explain=True)) == {"r2.ref", "r3.ref"}
    path.write_text("banana", encoding="utf-8")
    again = build(build_file, explain=True)
    assert ran(again) == set()
    assert report(again).cached == 5 and report(again).built == 0


def test_a_fresh_checkout_hits_only_where_the_entries_match(toy, tmp_path_factory):
    """Another checkout with one entry different shares the cache folder: units that read only
    entries both hold are found; the one reading the different entry runs."""
    base, _ = toy
    other = tmp_path_factory.mktemp("other")
    shutil.copytree(base / "p", other / "p")
    (other / "p" / "cat" / "c.txt").write_text("coconut", encoding="utf-8")
    build_file = other / "build.yaml"
    build_file.write_text("project: p\noutput: out\ncache: cache\n", "utf-8")
    result = build(build_file, cache=str(base / "cache"), explain=True)
    assert ran(result) == {"r2.ref", "r3.ref", "r5.ref"}


def test_a_stage_whose_units_read_no_changed_entry_runs_none(toy):
    """An entry nobody looks up changes: the stage runs (its input moved) and runs no unit."""
    base, build_file = toy
    (base / "p" / "cat" / "q.txt").write_text("quince", encoding="utf-8")
    (base / "p" / "r3.ref").write_text("a", encoding="utf-8")  # nobody reads it whole now
    build(build_file)
    (base / "p" / "cat" / "q.txt").write_text("quandong", encoding="utf-8")
    result = build(build_file, explain=True)
    assert ran(result) == set() and report(result).built == 0


def test_the_reader_records_entries_found_and_missing():
    reader = Reader("/nowhere")
    entries = {"a": 1}
    assert reader.entry("catalog", "a", entries) == 1
    assert reader.entry("catalog", "b", entries) is None
    reader.whole("catalog")
    assert reader.reads == {
        entry_path("catalog", "a"): FOUND,
        entry_path("catalog", "b"): None,
        whole_path("catalog"): FOUND,
    }
    assert entry_read(entry_path("index", "virt/UI/a b")) == ("index", "virt/UI/a b")
    assert entry_read(whole_path("index")) == ("index", None)
    assert entry_read("cat/a.txt") is None
    with pytest.raises(FileNotFoundError):  # no file has an entry read's path
        reader.read_bytes(entry_path("catalog", "a"))


def test_run_stage_gives_entry_reads_the_stored_digest():
    """What `run_stage` shows of a unit's reads is what the engine records: the entry's digest
    as the build state stores it (orchestrator.codec.digest)."""
    run = run_stage(lookups, files={"r.ref": "a z"}, inputs={"catalog": {"a": "apple"}})
    reads = run.reads["r.ref"]
    assert reads[entry_path("catalog", "a")] == digest("apple")
    assert reads[entry_path("catalog", "z")] is None
    assert run.outputs["joined"] == {"r.ref": "a=apple z=?"}


def test_a_unit_reading_entries_of_a_value_it_does_not_take_is_a_bug(toy, monkeypatch):
    base, build_file = toy

    def sneaky(payload, shared, reader):
        reader.entry("elsewhere", "x", {})
        return ""

    monkeypatch.setattr(lookups, "run", sneaky)
    (base / "p" / "r1.ref").write_text("b", encoding="utf-8")
    with pytest.raises(Exception, match="'elsewhere', which its stage does not take as input"):
        build(build_file)


# -- the law: incremental == clean, and only the readers of what changed re-run ----------------

NAMES = "abcdefz"
EDIT = st.one_of(
    st.tuples(st.just("entry"), st.sampled_from(NAMES), st.sampled_from(["", "x", "y", "-"])),
    st.tuples(
        st.just("ref"),
        st.sampled_from(["r1.ref", "r2.ref", "r6.ref"]),
        st.lists(st.sampled_from(NAMES + "*"), max_size=3).map(" ".join),
    ),
)


def expected_readers(refs: dict[str, str], moved: set[str]) -> set[str]:
    """The units that read an entry that moved (`*`: every entry), given the refs now."""
    return {
        path
        for path, text in refs.items()
        if moved and ("*" in text.split() or moved & set(text.split()))
    }


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(st.lists(EDIT, min_size=1, max_size=3), min_size=1, max_size=4))
def test_incremental_equals_clean_and_only_readers_rerun(tmp_path_factory, steps):
    base = tmp_path_factory.mktemp("entries")
    entries = {"a": "x", "b": "y", "c": "x"}
    refs = {"r1.ref": "a", "r2.ref": "b c", "r6.ref": "*"}
    build_file = write(base, entries, refs)
    build(build_file)
    for number, step in enumerate(steps):
        before_entries, before_refs = dict(entries), dict(refs)
        for kind, name, text in step:
            target = entries if kind == "entry" else refs
            if text == "-":
                target.pop(name, None)
                folder = "cat" if kind == "entry" else ""
                (base / "p" / folder / (f"{name}.txt" if kind == "entry" else name)).unlink(
                    missing_ok=True
                )
            else:
                target[name] = text
                write(
                    base,
                    {name: text} if kind == "entry" else {},
                    {name: text} if kind == "ref" else {},
                )
        result = build(build_file, explain=True)
        clean = build(build_file, f"clean{number}/out", f"clean{number}/cache")
        assert (base / "out" / "joined.txt").read_bytes() == (
            base / f"clean{number}" / "out" / "joined.txt"
        ).read_bytes()
        assert dict(result.outputs["joined"]) == dict(clean.outputs["joined"])
        moved = {
            name
            for name in set(before_entries) | set(entries)
            if before_entries.get(name) != entries.get(name)
        }
        edited = {
            name for name in set(before_refs) | set(refs) if before_refs.get(name) != refs.get(name)
        }
        reachable = expected_readers(refs, moved) | edited
        assert ran(result) <= reachable, (step, ran(result), reachable)
