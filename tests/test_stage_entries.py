"""A fresh checkout builds from the cache (orchestrator/core/stageentries.py): another agent's
checkout of the same commit, at another path, with no build state of its own and the cache
folder another agent's build filled.

It finds every unit (the Messiah index, and so every rule unit's key, holds no absolute path)
and takes every stage whole, looking none of its units up; what it leaves equals a clean build.
A stage whose rule code sees where the checkout lies (custom code) is taken whole only at the
same path. After random changes a fresh checkout still equals a clean build, whatever entries
of older states the cache holds.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import lawkit
import pytest
import yaml
from buildkit import edit_build, make_project
from hypothesis import given
from hypothesis import strategies as st
from test_incremental_laws import STEP, MessiahChanges, age, aged_project, law_settings, settle

from orchestrator.cache import Cache
from orchestrator.cache import state as state_module
from orchestrator.codec import loads
from orchestrator.core.stageentries import WHOLE

EXPRESSION = ("满足表达式", "expr")


def fresh_checkout(checkout: Path, dest: Path, cache_of: Path | None = None) -> Path:
    """Another agent's checkout of `checkout`'s files at `dest`, with the cache folder it
    shares with the agent of `cache_of` (default: `checkout`), copied without the build
    states (so that the outcome's stored state is this checkout's own), and no output."""
    shutil.copytree(checkout, dest, ignore=shutil.ignore_patterns("build"))
    shutil.copytree(
        (cache_of or checkout) / "build" / "cache",
        dest / "build" / "cache",
        ignore=shutil.ignore_patterns("state"),
    )
    return dest / "build.yaml"


def whole_entries(cache: Path, drop: bool = False) -> set[str]:
    """The stages the cache holds whole-stage entries of (`drop`: and remove them)."""
    db = sqlite3.connect(cache / "actions.sqlite")
    try:
        stages = {row[0] for row in db.execute("SELECT DISTINCT stage FROM actions")}
        if drop:
            db.execute("DELETE FROM actions WHERE stage LIKE ?", (WHOLE + "%",))
            db.commit()
    finally:
        db.close()
    return {stage[len(WHOLE) :] for stage in stages if stage.startswith(WHOLE)}


def without_rule_code(rules_file: Path) -> None:
    """Drop the rules whose own code reads the index (custom code, expressions): the index's
    paths are absolute as rule code sees them, so their units key on where the checkout lies."""
    rules = yaml.safe_load(rules_file.read_text(encoding="utf-8"))
    kept = [
        rule
        for rule in rules
        if "func_str" not in rule and rule.get("condition", [None])[0] not in EXPRESSION
    ]
    assert 0 < len(kept) < len(rules)
    rules_file.write_text(yaml.safe_dump(kept, allow_unicode=True), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A generated project whose rules have no code of their own, built once."""
    base = tmp_path_factory.mktemp("first")
    build_file = make_project(base, 120, 11, executor={"kind": "local"})
    without_rule_code(base / "rules.yaml")
    age(base)
    first = lawkit.build(build_file)
    assert not first.error and first.outputs, first.error
    return base, first


def test_a_checkout_at_another_path_takes_every_stage_whole(built, tmp_path, monkeypatch):
    """No unit is looked up, none runs, and the checkout publishes the same bytes and keeps
    the same units and values as a clean build of it (held by reference, cache/taken.py)."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 1)
    base, first = built
    assert whole_entries(base / "build" / "cache") >= {"collect", "validate", "cook"}
    build_file = fresh_checkout(base, tmp_path / "elsewhere")
    fresh = lawkit.build(build_file)
    assert fresh.planned == {} and not fresh.ran_anything(), fresh.ran
    clean = lawkit.build(build_file, "clean/out", "clean/cache")
    assert clean.ran_anything()  # the clean build did the work
    assert lawkit.differences(fresh, clean) == []
    assert fresh.outputs == first.outputs


def test_a_whole_stage_entry_holds_the_rows_its_build_state_holds(built):
    """A stage planned afresh is filed whole from the rows storing it wrote, not read back
    (core/storing.py, FreshRows): the entry holds exactly what the build state does, in the
    order the state gives it (units by id, reads by path and unit, entries by key)."""
    base, _ = built
    cache_dir = base / "build" / "cache"
    db = sqlite3.connect(cache_dir / "actions.sqlite")
    try:
        found = db.execute("SELECT stage, result FROM actions WHERE stage LIKE ?", (WHOLE + "%",))
        entries = {stage[len(WHOLE) :]: bytes(result).hex() for stage, result in found}
    finally:
        db.close()
    assert {"collect", "validate", "cook"} <= set(entries)
    cache = Cache(cache_dir)
    (state_file,) = (cache_dir / "state").glob("*/*.sqlite")
    state = sqlite3.connect(state_file)
    try:
        for stage, blob in entries.items():
            rows = loads(cache.get_blob(blob))
            units = state.execute(
                "SELECT id, key, result, digest, data FROM units WHERE stage = ? ORDER BY id",
                (stage,),
            )
            assert rows.units == [list(row) for row in units], stage
            reads = state.execute(
                "SELECT path, unit FROM reads WHERE stage = ? ORDER BY path, unit", (stage,)
            )
            assert rows.reads == [list(row) for row in reads], stage
            for output, held in rows.values.items():
                live = state.execute(
                    "SELECT key, digest, data FROM entries WHERE value = ? AND data IS NOT NULL "
                    "ORDER BY key",
                    (output,),
                )
                assert held == [list(row) for row in live], (stage, output)
    finally:
        state.close()


def test_a_cold_build_reads_each_value_whole_once(tmp_path, monkeypatch):
    """The fingerprint of an input value (every entry's key and digest, read from the build
    state) is read once per run and content: keying a stage for its whole-stage entry and
    tracing its units that read the whole value share it."""
    from orchestrator.cache.entries import ValueStore

    read: list[tuple[str, int]] = []
    original = ValueStore.fingerprint

    def fingerprint(self, value: str) -> str:
        read.append((value, self.generation(value)))
        return original(self, value)

    monkeypatch.setattr(ValueStore, "fingerprint", fingerprint)
    build_file = make_project(tmp_path, 100, 3, executor={"kind": "local"})
    outcome = lawkit.build(build_file)
    assert not outcome.error, outcome.error
    assert read and len(read) == len(set(read)), sorted(read)


def test_a_checkout_at_another_path_finds_every_unit(built, tmp_path):
    """Without whole-stage entries (another agent's cache from before them), each unit is
    found by its key: the index's paths are project-relative, so no rule unit keys on where
    the checkout lies."""
    base, first = built
    build_file = fresh_checkout(base, tmp_path / "elsewhere")
    assert whole_entries(tmp_path / "elsewhere" / "build" / "cache", drop=True)
    fresh = lawkit.build(build_file)
    assert fresh.planned.get("validate") and not fresh.ran_anything(), fresh.ran
    assert fresh.outputs == first.outputs


def test_rule_code_takes_a_stage_whole_only_at_the_same_path(tmp_path):
    """Rule code (custom code, expressions over the index) sees absolute paths (spec): its
    units key on the checkout's root, and so does the validate stage's whole-stage entry. A
    checkout at another path runs those units; one at the same path (a
    new agent's, with no build state) takes the stage whole."""
    first_base = tmp_path / "workspace"
    build_file = make_project(first_base, 120, 11, executor={"kind": "local"})
    first = lawkit.build(build_file)
    assert not first.error
    elsewhere = lawkit.build(fresh_checkout(first_base, tmp_path / "elsewhere"))
    assert set(elsewhere.planned) == {"validate"}, "only validate's entry keys on the root"
    assert elsewhere.ran.get("validate"), "the units of rule code key on the other root"
    assert elsewhere.outputs == first.outputs
    shutil.move(first_base, tmp_path / "first")  # the next agent checks out at the same path
    again = lawkit.build(fresh_checkout(tmp_path / "first", first_base))
    assert again.planned == {} and again.outputs == first.outputs


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("template"))


@law_settings(6)
@given(steps=st.lists(STEP, min_size=1, max_size=3), custom=st.booleans())
def test_fresh_checkouts_equal_clean_builds(template, tmp_path_factory, steps, custom):
    """After each random change in one checkout (built incrementally), a fresh checkout of its
    files at another path with the shared cache (which holds whole-stage entries of older
    states) and a second one at yet another path (which finds the first one's) equal a clean
    build of the same files."""
    base = tmp_path_factory.mktemp("laws")
    shutil.copytree(template, base, dirs_exist_ok=True)
    edit_build(base / "build.yaml", rules={"allow_custom_code": custom})
    changes = MessiahChanges(base)
    first = lawkit.build(base / "build.yaml")
    assert not first.error and first.outputs, first.error
    done: list[str] = []
    for number, step in enumerate(steps, 1):
        done.extend(changes.apply(kind, a, b) for kind, a, b in step)
        settle(base / "project", number)
        story = "; ".join(done)
        lawkit.build(base / "build.yaml")
        agents = tmp_path_factory.mktemp("agents")
        outcomes = []
        for name in ("one", "two"):  # the second agent shares what the first one filed
            cache_of = agents / "one" if name == "two" else base
            build_file = fresh_checkout(base, agents / name, cache_of)
            outcomes.append(lawkit.build(build_file))
            clean = lawkit.build(build_file, "clean/out", "clean/cache")  # the same checkout's
            problems = lawkit.differences(outcomes[-1], clean)
            assert not problems, f"agent {name} != clean after: {story}\n" + "\n".join(problems)
        if not clean.error:  # only rule code over the index keys on where the checkout lies
            assert outcomes[1].planned.keys() <= {"validate"}, outcomes[1].planned
        shutil.rmtree(agents)


def taken_parts(build_file: Path) -> int:
    """How many parts of taken stages the checkout's build state holds by reference
    (cache/taken.py)."""
    (state,) = (build_file.parent / "build" / "cache" / "state").glob("*/*.sqlite")
    db = sqlite3.connect(state)
    try:
        return db.execute("SELECT COUNT(*) FROM taken").fetchone()[0]
    finally:
        db.close()


@law_settings(6)
@given(steps=st.lists(STEP, min_size=1, max_size=3), collect=st.booleans())
def test_edits_after_a_fresh_checkout_equal_clean_builds(
    template, tmp_path_factory, monkeypatch, steps, collect
):
    """A fresh checkout holds the stages it took by reference; each random change after it
    (built incrementally: what a change reaches is written in first) equals a clean build of
    the same files, with `cache gc` run on the shared folder between (`collect`): it keeps the
    blobs the state holds the stages in."""
    monkeypatch.setattr(state_module, "HELD_ENTRIES", 1)  # every value held (a small project)
    base = tmp_path_factory.mktemp("first")
    shutil.copytree(template, base, dirs_exist_ok=True)
    assert not lawkit.build(base / "build.yaml").error
    agent = tmp_path_factory.mktemp("agents") / "one"
    build_file = fresh_checkout(base, agent)
    fresh = lawkit.build(build_file)
    assert not fresh.error and taken_parts(build_file) > 0, fresh.error
    changes = MessiahChanges(agent)
    done: list[str] = []
    for number, step in enumerate(steps, 1):
        done.extend(changes.apply(kind, a, b) for kind, a, b in step)
        settle(agent / "project", number)
        if collect:
            Cache(agent / "build" / "cache").gc(max_bytes=0)
        incremental = lawkit.build(build_file)
        clean = lawkit.build(build_file, f"clean{number}/out", f"clean{number}/cache")
        problems = lawkit.differences(incremental, clean)
        story = "; ".join(done)
        assert not problems, f"!= clean after: {story}\n" + "\n".join(problems)
