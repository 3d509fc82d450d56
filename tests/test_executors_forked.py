"""The local executor's forked helpers (orchestrator/executors/forked.py): what they run equals
what the driver alone runs; pinned units stay in the driver; a helper that dies leaves its units
to the driver; no helper is forked when a copy of the process would not be sound."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from enginekit import build_toy, write_toy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_executors import toy_files

from orchestrator.cache.db import fork_hazard, note_hazard
from orchestrator.cache.state import SCHEMA, SCHEMA_VERSION
from orchestrator.cache.statedb import StateDatabase
from orchestrator.errors import ProjectError
from orchestrator.executors import WorkItem
from orchestrator.executors.forked import ForkedExecutor, can_fork
from orchestrator.executors.local import LocalExecutor

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="helpers are forked (POSIX)")
DRIVER = os.getpid()


def count_lines(payload, shared, reader):
    """A unit: the lines of its file, and the shared suffix."""
    path, fail = payload
    if fail == "error":
        raise ProjectError("refused on purpose", file=path)
    if fail == "die" and os.getpid() != DRIVER:
        os._exit(7)  # a helper dying mid-unit
    return f"{len(reader.read_bytes(path).splitlines())}{shared}"


def project(tmp_path: Path, count: int) -> list[str]:
    for i in range(count):
        (tmp_path / f"d{i % 4}").mkdir(exist_ok=True)
        (tmp_path / f"d{i % 4}/f{i}.txt").write_text("x\n" * (i % 7 + 1), encoding="utf-8")
    return [f"d{i % 4}/f{i}.txt" for i in range(count)]


def state_db(path: Path, scratch: bool = False) -> StateDatabase:
    return StateDatabase(path, SCHEMA, SCHEMA_VERSION, scratch=scratch)


def outcomes(executor, items) -> dict[str, tuple]:
    found = {}
    for finished in executor.execute(count_lines, items, "!"):
        assert finished.unit_id not in found  # each unit once
        found[finished.unit_id] = (
            finished.result,
            type(finished.error).__name__ if finished.error else None,
            finished.reads,
            finished.worker.split(" ")[0],
        )
    return found


def items_of(paths, fails=None, pinned=()) -> list[WorkItem]:
    fails = fails or {}
    return [
        WorkItem(path, (path, fails.get(path)), pinned=path in pinned, cost=i)
        for i, path in enumerate(paths)
    ]


@settings(max_examples=15, deadline=None)
@given(count=st.integers(0, 30), helpers=st.integers(1, 3), data=st.data())
def helpers_give_what_the_driver_alone_gives(count, helpers, data):
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        paths = project(root, count)
        pinned = set(data.draw(st.lists(st.sampled_from(paths), max_size=3))) if paths else set()
        errors = set(data.draw(st.lists(st.sampled_from(paths), max_size=2))) if paths else set()
        items = items_of(paths, dict.fromkeys(errors, "error"), pinned)
        alone = outcomes(LocalExecutor(str(root)), items)
        forked = outcomes(ForkedExecutor(str(root), helpers=helpers), items)
        assert {k: v[:3] for k, v in forked.items()} == {k: v[:3] for k, v in alone.items()}
        assert all(forked[path][3] == "driver" for path in pinned)


def in_a_fresh_process(check: str) -> None:
    """Run `check` (a function of this module, given a temporary folder) in a new interpreter:
    this one may hold Ray or threads an earlier test left, and then forks no helper."""
    code = (
        "import sys, tempfile, pathlib; sys.path[:0] = [sys.argv[1], sys.argv[2]];"
        "import test_executors_forked as t, orchestrator.executors.forked as f;"
        "assert f.can_fork(), 'a fresh process may fork';"
        "folder = tempfile.mkdtemp(); getattr(t, sys.argv[3])(pathlib.Path(folder))"
    )
    tests = str(Path(__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", code, tests, str(Path(tests).parent), check],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_helpers_give_what_the_driver_alone_gives():
    """Results, errors and reads of every unit, each reported once, whoever ran it; pinned
    units in the driver."""
    in_a_fresh_process("hypothesis_law")


def hypothesis_law(_folder: Path) -> None:
    helpers_give_what_the_driver_alone_gives()


def test_helpers_run_units_when_there_are_enough():
    in_a_fresh_process("helpers_run_units")


def helpers_run_units(tmp_path: Path) -> None:
    paths = project(tmp_path, 40)
    found = outcomes(ForkedExecutor(str(tmp_path), helpers=1), items_of(paths))
    assert len(found) == 40 and {v[3] for v in found.values()} == {"driver", "helper"}


def test_a_helper_that_dies_leaves_its_units_to_the_driver():
    """A helper killed mid-unit reports nothing more: what it claimed runs in the driver."""
    in_a_fresh_process("a_helper_dies")


def a_helper_dies(tmp_path: Path) -> None:
    paths = project(tmp_path, 12)
    fails = dict.fromkeys(paths[::2], "die")
    found = outcomes(ForkedExecutor(str(tmp_path), helpers=2), items_of(paths, fails))
    assert sorted(found) == sorted(paths)
    for path in paths[::2]:
        assert found[path][3] == "driver" and found[path][0] is not None


def test_no_helper_while_a_dry_runs_state_is_uncommitted(tmp_path):
    """A helper opens the build state again: it would not see what a dry run never commits."""
    db = state_db(tmp_path / "state.sqlite")
    assert StateDatabase._fork_hazard(db) is None
    scratch = state_db(tmp_path / "scratch.sqlite", scratch=True)
    assert StateDatabase._fork_hazard(scratch) == "a dry run's build state is never committed"
    assert fork_hazard() is not None and not can_fork()
    (tmp_path / "p").mkdir()
    paths = project(tmp_path / "p", 10)
    found = outcomes(ForkedExecutor(str(tmp_path / "p"), helpers=1), items_of(paths))
    assert {v[3] for v in found.values()} == {"driver"}
    scratch.close()
    db.close()


def test_no_helper_while_another_thread_runs(tmp_path):
    before = can_fork()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not can_fork()
        paths = project(tmp_path, 10)
        found = outcomes(ForkedExecutor(str(tmp_path), helpers=1), items_of(paths))
        assert {v[3] for v in found.values()} == {"driver"}
    finally:
        stop.set()
        thread.join()
    assert can_fork() == before


def test_a_hazard_lasts_as_long_as_its_owner():
    class Owner:
        def why(self):
            return "busy"

    before = fork_hazard()
    owner = Owner()
    note_hazard(owner, Owner.why)
    assert fork_hazard() is not None and not can_fork()
    del owner
    assert fork_hazard() == before


def test_a_helper_opens_the_build_state_again(tmp_path):
    """The connection the driver holds is not used in a copy of it (cache/db.py)."""
    db = state_db(tmp_path / "state.sqlite")
    db.execute("CREATE TABLE t (x)")
    db.execute("INSERT INTO t VALUES (1)")
    inherited = db._db
    pid = os.fork()
    if pid == 0:
        ok = db._db is None and db.execute("SELECT x FROM t") == [(1,)]
        ok = ok and db._db is not inherited
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert db._db is inherited and db.execute("SELECT x FROM t") == [(1,)]
    db.close()


def test_auto_builds_with_helpers_what_local_builds():
    """A whole build: `auto` (the driver and a helper on this machine) publishes the bytes the
    driver alone publishes."""
    in_a_fresh_process("auto_equals_local")


def auto_equals_local(tmp_path: Path) -> None:
    files = toy_files()
    local = build_toy(write_toy(tmp_path / "local", files), executor="local")
    auto = build_toy(write_toy(tmp_path / "auto", files), executor="auto")
    assert local.outputs == auto.outputs
    assert (tmp_path / "local/out/total.txt").read_bytes() == (
        tmp_path / "auto/out/total.txt"
    ).read_bytes()
    assert any(o.worker.startswith("helper") for r in auto.reports for o in r.outcomes)
