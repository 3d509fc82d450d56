"""Executors: local and Ray give identical results; Ray batches and resends missing files."""

from __future__ import annotations

import pytest
from enginekit import build_toy, write_toy

from orchestrator.core.config import ExecutorConfig
from orchestrator.executors import WorkItem, Workplace
from orchestrator.executors.pool import ExecutorPool
from orchestrator.executors.ray import plan_batches


def test_batches_cover_every_item_once():
    """Batching keeps every unit exactly once, in order, within the size bounds."""
    items = [WorkItem(str(i), i) for i in range(1000)]
    batches = plan_batches(items, workers=2)
    assert [i.unit_id for b in batches for i in b] == [str(i) for i in range(1000)]
    assert all(16 <= len(b) <= 512 for b in batches[:-1])
    assert len(batches) >= 8


@pytest.mark.parametrize("asked, runs", [(None, "local"), ("auto", "auto"), ("ray", "ray")])
def test_a_run_uses_the_build_files_executor_unless_it_asks_for_one(tmp_path, asked, runs):
    """RunOptions(executor=None), as a run given no --executor has, means `executor.kind`."""
    settings = ExecutorConfig(kind="local", workers=2)
    place = Workplace(str(tmp_path), str(tmp_path / "cache"))
    pool = ExecutorPool(asked, place, settings, None, None)
    assert (pool.kind, pool.workers) == (runs, 2)
    if asked is None:
        executor, startup = pool.for_units(10_000)
        assert type(executor).__name__ == "LocalExecutor" and startup == 0.0
        executor.close()


@pytest.mark.ray
def test_local_and_ray_give_identical_outputs(tmp_path, ray_local):
    """The same project built on local and on Ray gives byte-identical published outputs."""
    files = {
        f"d{i}/f{i}.txt": "x\n" * (i % 5 + 1)
        + (f"include d{i + 1}/f{i + 1}.txt\n" if i % 3 == 0 else "")
        for i in range(60)
    }
    local = build_toy(write_toy(tmp_path / "local", files), executor="local")
    remote = build_toy(write_toy(tmp_path / "ray", files), executor="ray")
    assert local.outputs == remote.outputs
    assert (tmp_path / "local/out/total.txt").read_bytes() == (
        tmp_path / "ray/out/total.txt"
    ).read_bytes()
    assert any("driver" not in o.worker for r in remote.reports for o in r.outcomes)


def toy_files(count: int = 60) -> dict[str, str]:
    """Text files, a third of them including the next one (read through the file server)."""
    return {
        f"d{i}/f{i}.txt": "x\n" * (i % 5 + 1)
        + (f"include d{i + 1}/f{i + 1}.txt\n" if i % 3 == 0 else "")
        for i in range(count)
    }


@pytest.mark.ray
def test_the_run_after_a_ray_build_skips_every_stage(tmp_path, ray_local):
    """Files written just before a build are racily clean: the next scan sees them as moved and
    trusts only a digest the build learned. A worker that cannot see the project is sent the
    bytes, or fetches them; the driver must learn their digests as it does for files a local
    unit reads, or the next run logs every such file as modified and re-checks every unit."""
    build = write_toy(tmp_path, toy_files())
    first = build_toy(build, executor="ray")
    assert any("driver" not in o.worker for r in first.reports for o in r.outcomes)
    again = build_toy(build, executor="local", explain=True)
    assert [(r.name, r.skipped, r.why) for r in again.reports] == [
        (r.name, True, "") for r in again.reports
    ]
    assert again.file_changes is not None
    assert not again.explained


def test_explain_says_why_every_stage_that_is_not_skipped_runs(tmp_path, capsys):
    """Every stage that is not skipped whole carries the reason, and --explain logs it (the
    reason of a stage none of whose units runs is no unit's: it must be the stage's)."""
    build = write_toy(tmp_path, toy_files(12))
    first = build_toy(build, explain=True)
    assert all(not r.skipped and r.why == "no record of an earlier run" for r in first.reports)
    touched = tmp_path / "p/d4/f4.txt"
    touched.write_text(touched.read_text() + "x\n")
    capsys.readouterr()
    second = build_toy(build, explain=True)
    logged = capsys.readouterr()
    lines = logged.out + logged.err
    by_name = {r.name: r for r in second.reports}
    assert by_name["lines"].why == "2 unit(s) read changed files: d4/f4.txt"  # f3 includes it
    assert by_name["total"].why == "inputs changed: counts"
    for report in second.reports:
        assert report.skipped or f"runs_because={report.why!r}" in lines.replace('"', "'")


def _read_all(payload, shared, reader):
    return [reader.read_bytes(path) if reader.exists(path) else None for path in payload]


def test_units_in_the_driver_read_through_the_sessions_reader(tmp_path, monkeypatch):
    """The local executor's units read through the project reader the scan taught: no folder
    the scan found real is checked again, and a file behind a folder link leading out is still
    missing to them."""
    import os

    from orchestrator.executors.local import LocalExecutor
    from orchestrator.files import projectfiles
    from orchestrator.files.projectfiles import ProjectFiles
    from orchestrator.files.scanning import scan

    root, outside = tmp_path / "p", tmp_path / "outside"
    for i in range(5):
        (root / f"d{i}" / "deep").mkdir(parents=True)
        (root / f"d{i}" / "deep" / "f.txt").write_bytes(b"f%d" % i)
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"secret")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    files = ProjectFiles(str(root))
    scan(str(root), set(), None, files)
    checked: list[str] = []
    real_lstat = os.lstat

    def counted(path, *args, **kwargs):
        checked.append(str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(projectfiles.os, "lstat", counted)
    paths = [f"d{i}/deep/f.txt" for i in range(5)] + ["linked/secret.txt"]
    executor = LocalExecutor(str(root), None, files)
    (done,) = list(executor.execute(_read_all, [WorkItem("u", paths)], None))
    assert done.error is None
    assert done.result == [b"f0", b"f1", b"f2", b"f3", b"f4", None]
    real_folders = {str(root / f"d{i}") for i in range(5)} | {
        str(root / f"d{i}" / "deep") for i in range(5)
    }
    assert not real_folders & set(checked)
    assert str(root / "linked") in checked


class _Ref:
    """What `ray.put` returns, as far as the Ray executor reads it."""

    def __init__(self, number: int) -> None:
        self.number = number

    def hex(self) -> str:
        return f"{self.number:040x}"


def test_a_shared_value_goes_to_the_workers_as_the_standard_pickle_of_it(monkeypatch):
    """A stage's shared value is pickled in the driver by the standard pickler (Ray's own
    calls into Python for every object) and unpickled once per worker and stage; one it
    cannot pickle (a function made at run time), or whose pickle names the driver's
    `__main__` (no worker has it: Ray's pickler sends that by value), is given to Ray as is."""
    import sys

    from orchestrator.executors import ray as ray_executor

    stored: list = []

    def put(value):
        stored.append(value)
        return _Ref(len(stored))

    monkeypatch.setattr(ray_executor.ray, "put", put)
    monkeypatch.setattr(ray_executor.ray, "get", lambda ref: stored[ref.number - 1])
    monkeypatch.setattr(ray_executor, "_shared_values", {})
    # A class as if the driver's script defined it.
    in_main = type("InMain", (), {"__module__": "__main__"})
    monkeypatch.setattr(sys.modules["__main__"], "InMain", in_main, raising=False)

    shared = {"index": {"a": (1, "x")}, "rules": [frozenset({"b"})]}
    ref = ray_executor.put_shared(shared)
    assert isinstance(stored[-1], ray_executor.Pickled)
    assert ray_executor._shared_value([ref]) == shared
    assert ray_executor._shared_value([ref]) is ray_executor._shared_value([ref])
    made = [lambda: 1]
    assert ray_executor._shared_value([ray_executor.put_shared(made)]) is made
    main = {"value": in_main()}
    assert ray_executor._shared_value([ray_executor.put_shared(main)]) is main
