"""A shared cache: concurrent builds of two checkouts into one cache, concurrent writers, hits across checkouts, gc."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from buildkit import (
    cache_problems,
    cli_env,
    edit_build,
    make_project,
    published,
    run_cli,
    run_inprocess,
)


def _checkout(source_build: Path, dest: Path, cache: Path) -> Path:
    """Another checkout of the same content, pointed at the shared cache."""
    shutil.copytree(
        source_build.parent, dest, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True
    )
    return edit_build(dest / source_build.name, cache=str(cache), executor={"kind": "local"})


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A generated project and its clean build's outputs and exit code (a private cache)."""
    base = tmp_path_factory.mktemp("source")
    build = make_project(base, 150, 21, executor={"kind": "local"})
    code = run_inprocess("run", str(build))
    return build, published(base / "build" / "out"), code


def _start(build: Path) -> subprocess.Popen:
    script = "from orchestrator.shell.cli import main\nmain()\n"
    return subprocess.Popen(
        [sys.executable, "-c", script, "run", str(build)],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_two_checkouts_built_at_once_into_one_cache(tmp_path, source):
    """Concurrent builds of two checkouts share one cache: both right, cache consistent; a third hits."""
    build, outputs, code = source
    cache = tmp_path / "shared-cache"
    checkouts = [_checkout(build, tmp_path / f"checkout-{i}", cache) for i in range(3)]
    for _ in range(2):  # twice: the second round races on a warm cache
        procs = [_start(b) for b in checkouts[:2]]
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == code, err[-3000:]
        for b in checkouts[:2]:
            assert published(b.parent / "build" / "out") == outputs
        assert cache_problems(cache) == []
        for b in checkouts[:2]:
            shutil.rmtree(b.parent / "build" / "out")

    from orchestrator.core.config import load_build
    from orchestrator.core.observe import setup_logging
    from orchestrator.core.scheduler import RunOptions, run_build

    result = run_build(
        load_build(checkouts[2]),
        RunOptions(executor="local", progress=False),
        setup_logging("console"),
    )
    built = {r.name: r.built for r in result.reports}
    # Only rule units that run custom code key on the checkout's absolute path (spec).
    assert {name: n for name, n in built.items() if n and name != "validate"} == {}
    assert result.file_changes is not None and result.file_changes.added  # a first scan
    assert published(checkouts[2].parent / "build" / "out") == outputs


def _hammer(cache_root: str, seed: int, rounds: int, queue) -> None:
    """Write the same blobs and action keys as the other processes while reading them back."""
    from orchestrator.cache import Cache
    from orchestrator.errors import CacheCorrupt

    cache = Cache(Path(cache_root))
    blobs = [bytes([i]) * (3 << 20) + b"tail" for i in range(3)]  # big: a torn write would show
    problems = []
    for r in range(rounds):
        for i, data in enumerate(blobs):
            digest = cache.put_blob(data)
            key = f"{i:02x}" + "ab" * 31
            cache.actions.put("stage", key, {f"file-{seed}-{r}": "d" * 64}, digest)
            cache.flush()
            try:
                if cache.get_blob(digest) != data:
                    problems.append("wrong blob bytes")
            except CacheCorrupt as exc:
                problems.append(str(exc))
            entries = cache.actions.get("stage", key)
            if not entries or entries[0].result != digest:
                problems.append(f"action entry missing or wrong: {entries!r}")
    queue.put((problems, cache.corrupt_dropped))


def test_concurrent_writers_of_one_key_never_corrupt_it(tmp_path):
    """Processes writing and reading the same blobs and action keys never see a partial entry."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_hammer, args=(str(tmp_path), seed, 12, queue)) for seed in range(4)
    ]
    for proc in procs:
        proc.start()
    outcomes = [queue.get(timeout=240) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert outcomes == [([], 0)] * len(procs)
    assert cache_problems(tmp_path) == []
    assert not list(tmp_path.rglob(".tmp-*"))


def _age(path: Path, days: float) -> None:
    when = time.time() - days * 86400
    os.utime(path, (when, when))


def test_gc_bounds_the_cache_by_size_and_keeps_it_usable(tmp_path, source):
    """`cache gc --max-size` leaves at most that much; the next build is still right."""
    build, outputs, code = source
    checkout = _checkout(build, tmp_path / "c", tmp_path / "cache")
    assert run_inprocess("run", str(checkout)) == code
    from orchestrator.cache import Cache

    def size() -> int:
        stats = Cache(tmp_path / "cache").stats()
        return stats["cas"]["bytes"] + stats["actions"]["bytes"]

    before = size()
    limit = before // 3
    proc = run_cli("cache", "gc", str(checkout), "--max-size", str(limit), "--max-age", "365")
    assert proc.returncode == 0, proc.stderr
    assert "removed" in proc.stdout
    assert size() <= limit
    shutil.rmtree(tmp_path / "c" / "build" / "out")
    assert run_inprocess("run", str(checkout)) == code
    assert published(tmp_path / "c" / "build" / "out") == outputs


def test_gc_drops_entries_older_than_max_age(tmp_path, source):
    """`cache gc --max-age` drops what was unused for longer, keeps the rest, and spares live temp files."""
    build, outputs, code = source
    checkout = _checkout(build, tmp_path / "c", tmp_path / "cache")
    assert run_inprocess("run", str(checkout)) == code
    files = sorted(p for p in (tmp_path / "cache" / "cas").rglob("*") if p.is_file())
    old, recent = files[::2], files[1::2]
    for path in old:
        _age(path, 40)
    in_flight = tmp_path / "cache" / "cas" / "00" / ".tmp-writer-in-flight"
    in_flight.parent.mkdir(parents=True, exist_ok=True)
    in_flight.write_bytes(b"a concurrent run is writing this")
    abandoned = tmp_path / "cache" / "cas" / "00" / ".tmp-abandoned"
    abandoned.write_bytes(b"a killed run left this")
    _age(abandoned, 2)
    proc = run_cli("cache", "gc", str(checkout), "--max-size", "100G", "--max-age", "30")
    assert proc.returncode == 0, proc.stderr
    assert not any(p.exists() for p in old)
    assert all(p.exists() for p in recent)
    assert in_flight.exists() and not abandoned.exists()
    # a tiny size bound still spares a temporary file another run is about to rename
    assert run_cli("cache", "gc", str(checkout), "--max-size", "1").returncode == 0
    assert in_flight.exists()
    shutil.rmtree(tmp_path / "c" / "build" / "out")
    assert run_inprocess("run", str(checkout)) == code
    assert published(tmp_path / "c" / "build" / "out") == outputs
