"""A session (core/session.py): builds of one build file in one process, the file table kept in
memory between them, a build told which paths moved looking only at those; what a build that
fails leaves for the next (the table kept when it was saved, dropped when it may not match)."""

from __future__ import annotations

import shutil

import pytest
from enginekit import TOY_STAGES, write_toy
from test_scanning import age

from orchestrator.core.config import load_build
from orchestrator.core.options import RunOptions
from orchestrator.core.registry import load_stage
from orchestrator.core.scheduler import run_in_session
from orchestrator.core.session import Session
from orchestrator.shell.present import setup_logging


def open_session(build_file):
    stages = [load_stage(name) for name in TOY_STAGES]
    options = RunOptions(executor="local", progress=False)
    return Session(load_build(build_file), options, setup_logging("console"), stages)


def test_builds_in_a_session_look_only_at_the_paths_named(tmp_path):
    """The first build looks at everything; later ones at the paths a watcher named (an edit
    it did not name is not seen) or, told nothing, at everything again."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "d/b.txt": "2\n"})
    age(tmp_path / "p")
    with open_session(build) as session:
        assert run_in_session(session).outputs["total"] == 2
        assert session.holds_table
        (tmp_path / "p" / "a.txt").write_text("1\n1\n")
        (tmp_path / "p" / "d" / "b.txt").write_text("2\n2\n")
        age(tmp_path / "p", offset_s=5)
        result = run_in_session(session, ["a.txt"])
        assert result.outputs["total"] == 3
        assert result.file_changes.modified == ["a.txt"]
        (tmp_path / "p" / "c.txt").write_text("3\n")  # its folder is listed again, not d/
        assert run_in_session(session, ["c.txt"]).outputs["total"] == 4  # b.txt not named
        assert run_in_session(session, None).outputs["total"] == 5


def test_a_build_that_fails_mid_way_leaves_the_next_one_a_full_look(tmp_path, monkeypatch):
    """A bug mid-build: the table the scan patched may not be what the state holds, so the
    session lets go of it and the next build looks at every file (an edit made before the
    failed build, which that build's scan took in, is still seen)."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    age(tmp_path / "p")
    with open_session(build) as session:
        run_in_session(session)
        (tmp_path / "p" / "a.txt").write_text("1\n1\n")
        age(tmp_path / "p", offset_s=5)
        total = session.stages[-1].module
        monkeypatch.setattr(total, "finish", lambda *a: (_ for _ in ()).throw(RuntimeError("x")))
        with pytest.raises(RuntimeError):
            run_in_session(session, ["a.txt"])
        assert not session.holds_table
        monkeypatch.undo()
        assert run_in_session(session, []).outputs["total"] == 3
        assert session.holds_table


def test_a_resident_session_publishes_the_results_it_kept_as_a_fresh_build_does(
    tmp_path, monkeypatch
):
    """Large results a resident session stored or read (core/rebuild.py, KeptResults) are
    handed to the next build from memory: each build publishes what a build in a fresh process
    makes of the same files, and an unchanged page is not read from the store again."""
    from orchestrator.cache import Cache

    build = write_toy(tmp_path, {"a.txt": "one two\n", "d/b.txt": "three\n"})
    fresh = write_toy(tmp_path / "fresh", {})
    stages = [load_stage("toy_stages.pages")]
    options = RunOptions(executor="local", progress=False)
    log = setup_logging("console")
    reads: list[str] = []
    get_blob = Cache.get_blob
    monkeypatch.setattr(Cache, "get_blob", lambda self, d: reads.append(d) or get_blob(self, d))
    edits = [{}, {"a.txt": "one two four\n"}, {"d/b.txt": "five six\n", "c.txt": "seven\n"}]
    with Session(load_build(build), options, log, stages, resident=True) as session:
        for number, edit in enumerate(edits):
            for rel, text in edit.items():
                (tmp_path / "p" / rel).write_text(text, encoding="utf-8")
            age(tmp_path / "p", offset_s=5 * number)
            reads.clear()
            result = run_in_session(session, list(edit) if number else None)
            if number:  # the pages published were stored or read by this session: none read
                assert reads == []
            kept = {p: (tmp_path / "out" / p).read_bytes() for p in result.context.published}
            shutil.rmtree(tmp_path / "fresh" / "p", ignore_errors=True)
            shutil.copytree(tmp_path / "p", tmp_path / "fresh" / "p")
            with Session(load_build(fresh), options, log, stages) as other:
                clean = run_in_session(other)
                made = {
                    p: (tmp_path / "fresh" / "out" / p).read_bytes()
                    for p in clean.context.published
                }
            assert kept == made
