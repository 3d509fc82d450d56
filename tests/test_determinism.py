"""Determinism: byte-identical outputs across executors, worker counts, batchings and directory listing orders."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from buildkit import make_project, published, run_cli, run_inprocess


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A generated project and the outputs of a plain local build of it."""
    base = tmp_path_factory.mktemp("reference")
    build = make_project(base, 200, 13, executor={"kind": "local"})
    code = run_inprocess("run", str(build))
    return build, published(base / "build" / "out"), code


def _copy(reference, dest: Path) -> Path:
    build = reference[0]
    shutil.copytree(build.parent, dest, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True)
    return dest / build.name


class _ShuffledScandir:
    """`os.scandir` whose entries come back in a random order (usable as a context manager)."""

    def __init__(self, real, rng: random.Random) -> None:
        self.real, self.rng = real, rng
        self.calls = 0

    def __call__(self, path="."):
        self.calls += 1
        with self.real(path) as it:
            entries = list(it)
        self.rng.shuffle(entries)
        return _Listing(entries)


class _Listing:
    """An iterator over entries that is also a context manager, like `os.scandir`'s."""

    def __init__(self, entries) -> None:
        self._it = iter(entries)

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shuffled_directory_listings_give_identical_outputs(tmp_path, reference, monkeypatch, seed):
    """os.scandir and os.listdir return entries in a random order: the outputs do not change."""
    build = _copy(reference, tmp_path)
    rng = random.Random(seed)
    scandir = _ShuffledScandir(os.scandir, rng)
    real_listdir = os.listdir

    def listdir(path="."):
        names = real_listdir(path)
        rng.shuffle(names)
        return names

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(os, "listdir", listdir)
    assert run_inprocess("run", str(build), "--executor", "local") == reference[2]
    assert scandir.calls > 0  # the walk really went through the shuffled listing
    monkeypatch.undo()
    assert published(tmp_path / "build" / "out") == reference[1]


def test_shuffled_listing_in_a_fresh_process_and_another_location(tmp_path, reference):
    """A separate interpreter, a shuffled walk, a checkout at another path: identical outputs."""
    build = _copy(reference, tmp_path / "elsewhere" / "deeper")
    prelude = """
import os, random
_rng = random.Random(99)
_real = os.scandir
class _L:
    def __init__(self, entries): self._it = iter(entries)
    def __iter__(self): return self
    def __next__(self): return next(self._it)
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def close(self): pass
def _shuffled(path="."):
    with _real(path) as it:
        entries = list(it)
    _rng.shuffle(entries)
    return _L(entries)
os.scandir = _shuffled
"""
    proc = run_cli("run", str(build), "--executor", "local", prelude=prelude)
    assert proc.returncode == reference[2], proc.stderr[-3000:]
    assert published(build.parent / "build" / "out") == reference[1]


@pytest.mark.ray
@pytest.mark.parametrize("batching", ["default", "one-unit-batches"])
def test_ray_gives_the_local_outputs_whatever_the_batching(
    tmp_path, reference, ray_local, monkeypatch, batching
):
    """The Ray executor, with default or one-unit batches (other completion orders), gives the local outputs."""
    import orchestrator.executors.ray as ray_executor

    if batching == "one-unit-batches":
        monkeypatch.setattr(ray_executor, "MIN_BATCH_UNITS", 1)
        monkeypatch.setattr(ray_executor, "BATCHES_PER_WORKER", 1000)
        monkeypatch.setattr(ray_executor, "IN_FLIGHT_PER_WORKER", 8)
    build = _copy(reference, tmp_path)
    assert run_inprocess("run", str(build), "--executor", "ray") == reference[2]
    assert published(tmp_path / "build" / "out") == reference[1]


@pytest.mark.ray
@pytest.mark.slow
def test_a_one_worker_local_ray_gives_the_same_outputs(tmp_path, reference):
    """A local Ray started by the build with one worker gives the local outputs."""
    build = _copy(reference, tmp_path)
    env_proc = run_cli("run", str(build), "--executor", "ray", "--workers", "1", timeout=300)
    assert env_proc.returncode == reference[2], env_proc.stderr[-3000:]
    assert published(tmp_path / "build" / "out") == reference[1]


def test_the_demo_is_identical_under_a_shuffled_walk(tmp_path, shared_dir, monkeypatch):
    """The shared demo project: a shuffled walk gives the plain build's outputs."""
    plain, shuffled = tmp_path / "plain", tmp_path / "shuffled"
    for dest in (plain, shuffled):
        shutil.copytree(
            shared_dir / "examples" / "demo", dest, ignore=shutil.ignore_patterns("build")
        )
    code = run_inprocess("run", str(plain / "build.yaml"), "--executor", "local")
    monkeypatch.setattr(os, "scandir", _ShuffledScandir(os.scandir, random.Random(5)))
    assert run_inprocess("run", str(shuffled / "build.yaml"), "--executor", "local") == code
    monkeypatch.undo()
    assert published(shuffled / "build" / "out") == published(plain / "build" / "out")
