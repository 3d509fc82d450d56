"""Faults on the real pipeline: killed workers and drivers, corrupt caches, full disks, unreadable files."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from buildkit import cache_problems, edit_build, make_project, published, run_cli, run_inprocess

COUNT_WRITES = """
import atexit, os
_count = [0]
_replace, _write = os.replace, os.write
def _counting_replace(src, dst, **kw):
    _count[0] += 1
    return _replace(src, dst, **kw)
def _counting_write(fd, data):
    _count[0] += 1
    return _write(fd, data)
os.replace, os.write = _counting_replace, _counting_write
atexit.register(lambda: print("WRITES", _count[0]))
"""

KILL_AT = """
import os, signal
_count = [0]
_replace, _write = os.replace, os.write
def _tick():
    _count[0] += 1
    return _count[0] >= {n}
def _killing_replace(src, dst, **kw):
    if _tick():
        os.kill(os.getpid(), signal.SIGKILL)   # kill -9 between a write and its rename
    return _replace(src, dst, **kw)
def _killing_write(fd, data):
    if _tick():
        _write(fd, bytes(data)[: len(data) // 2])   # kill -9 in the middle of an append
        os.kill(os.getpid(), signal.SIGKILL)
    return _write(fd, data)
os.replace, os.write = _killing_replace, _killing_write
"""


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory):
    """A generated project built once on the local executor: (build file, outputs, exit code, writes)."""
    base = tmp_path_factory.mktemp("clean")
    build = make_project(base, 120, 5, executor={"kind": "local"})
    proc = run_cli("run", str(build), prelude=COUNT_WRITES)
    assert proc.returncode in (0, 1), proc.stderr
    writes = int(proc.stdout.rsplit("WRITES", 1)[1].split()[0])
    return build, published(base / "build" / "out"), proc.returncode, writes


def _fresh_copy(clean_build, dest: Path) -> Path:
    """A copy of the clean project without its build folder."""
    build = clean_build[0]
    shutil.copytree(build.parent, dest, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True)
    return dest / build.name


# -- the driver killed ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fraction", [0.0, 0.15, 0.5, 0.9, 0.97, 0.995])
def test_driver_killed_after_n_writes_then_rerun_equals_clean(tmp_path, clean_build, fraction):
    """kill -9 of the driver at its Nth write (mid-append or before a rename), then a rerun: same
    outputs, consistent cache."""
    _, outputs, code, writes = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    n = max(1, int(writes * fraction))
    killed = run_cli("run", str(build), prelude=KILL_AT.format(n=n))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert cache_problems(tmp_path / "build" / "cache", torn_ok=True) == []
    rerun = run_cli("run", str(build))
    assert rerun.returncode == code, rerun.stderr[-2000:]
    assert published(tmp_path / "build" / "out") == outputs
    assert not list((tmp_path / "build" / "out").rglob(".tmp-*"))
    assert cache_problems(tmp_path / "build" / "cache", torn_ok=True) == []
    again = run_cli("run", str(build))  # and the run after that trusts what the rerun left
    assert again.returncode == code and published(tmp_path / "build" / "out") == outputs


# -- the cache damaged ---------------------------------------------------------------------------


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "flip":
        at = len(data) // 2
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x55]) + data[at + 1 :] if data else b"x")
    elif how == "garbage":
        path.write_bytes(b"\x00garbage" + data)


@pytest.mark.parametrize("area", ["cas", "ac", "stat", "stages", "tree", "all"])
@pytest.mark.parametrize("how", ["truncate", "empty", "flip", "garbage"])
def test_corrupt_cache_files_are_dropped_and_recomputed(tmp_path, clean_build, area, how):
    """Damaged blobs, action entries, explain records or stat caches never give a wrong output."""
    _, outputs, code, _ = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    cache = tmp_path / "build" / "cache"
    assert run_inprocess("run", str(build)) == code
    areas = ["cas", "ac", "stat", "stages", "tree"] if area == "all" else [area]
    files = sorted(p for a in areas for p in (cache / a).rglob("*") if p.is_file())
    rng = random.Random(f"{area}-{how}")
    assert files, f"nothing to damage in {areas}"
    chosen = (
        files
        if area in ("stat", "stages", "tree", "all")
        else rng.sample(files, max(1, len(files) // 3))
    )
    for path in chosen:
        _damage(path, how)
    shutil.rmtree(tmp_path / "build" / "out")
    assert run_inprocess("run", str(build)) == code
    assert published(tmp_path / "build" / "out") == outputs
    # Blobs are verified when read (damage in one nobody reads stays until it is needed) and a
    # damaged action line is skipped where it lies: only whole-file entries must be clean now.
    assert cache_problems(cache, areas=("stat", "stages", "tree")) == []
    # and the run after that is a clean no-op-or-less with the same outputs
    assert run_inprocess("run", str(build)) == code
    assert published(tmp_path / "build" / "out") == outputs


def test_corrupt_cache_under_ray_gives_the_clean_outputs(tmp_path, clean_build, ray_local):
    """With every blob damaged, a Ray build drops and recomputes them and publishes the clean outputs."""
    _, outputs, code, _ = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    assert run_inprocess("run", str(build), "--executor", "ray") == code
    for path in (tmp_path / "build" / "cache" / "cas").rglob("*"):
        if path.is_file():
            _damage(path, "flip")
    shutil.rmtree(tmp_path / "build" / "out")
    assert run_inprocess("run", str(build), "--executor", "ray") == code
    assert published(tmp_path / "build" / "out") == outputs


# -- a Ray worker killed -------------------------------------------------------------------------


def _running_batches() -> list:
    """Ray workers of this test session (descendants of this process) running a batch now."""
    import psutil

    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmdline = proc.cmdline()
        except psutil.Error:
            continue
        if cmdline and cmdline[0].startswith("ray::_run_batch"):
            found.append(proc)
    return found


@pytest.mark.ray
@pytest.mark.slow
def test_ray_worker_killed_mid_task_is_retried(tmp_path, clean_build, ray_local):
    """kill -9 of a Ray worker running a batch: the task is retried and the outputs are the clean ones."""
    _, outputs, code, _ = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    slow = {
        "command": 'sh -c \'sleep 0.2; find "$0" -type f | sort | xargs cat > "$1"\' '
        "{input} {output}",
        "version": "1",
    }
    # The slow cooker changes payloads' keys, not bytes: compare against a local build of it.
    edit_build(build, cook={"cookers": {"Texture": slow}})
    reference = tmp_path / "reference"
    shutil.copytree(tmp_path, reference, ignore=shutil.ignore_patterns("build", "reference"))
    assert run_inprocess("run", str(reference / build.name), "--executor", "local") == code
    expected = published(reference / "build" / "out")
    killed: list[int] = []

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            for proc in _running_batches():
                try:
                    proc.send_signal(signal.SIGKILL)
                    killed.append(proc.pid)
                    break
                except Exception:
                    continue
            time.sleep(0.02)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    assert run_inprocess("run", str(build), "--executor", "ray") == code
    thread.join(timeout=5)
    assert killed, "no Ray worker was running a batch to kill"
    assert published(tmp_path / "build" / "out") == expected
    assert cache_problems(tmp_path / "build" / "cache") == []


# -- a full disk ---------------------------------------------------------------------------------


@pytest.fixture
def small_tmpfs():
    """Mount a tmpfs of a given size (root only); unmounted after the test."""
    mounts = []

    def mount(size: str) -> Path:
        target = Path(tempfile.mkdtemp(prefix="orch-tmpfs-"))
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(target)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
        mounts.append(target)
        return target

    yield mount
    for target in mounts:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)
        shutil.rmtree(target, ignore_errors=True)


@pytest.mark.parametrize("where", ["output", "cache"])
def test_full_disk_exits_4_and_publishes_nothing_half_written(
    tmp_path, clean_build, small_tmpfs, where
):
    """A disk that fills up while writing outputs or cache: exit 4, a clear message, no partial file."""
    _, outputs, code, _ = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    disk = small_tmpfs("160k")
    edit_build(build, **{where: str(disk / where)})
    proc = run_cli("run", str(build))
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert "disk is full" in proc.stderr and "Traceback" not in proc.stderr
    out = disk / "output" if where == "output" else tmp_path / "build" / "out"
    leftovers = list(out.rglob(".tmp-*")) if out.exists() else []
    assert leftovers == []
    for rel, data in (published(out) if out.exists() else {}).items():
        assert outputs.get(rel) == data, f"{rel} is half-published or wrong"
    assert "manifest.json" not in (published(out) if out.exists() else {})
    if where == "cache":
        assert cache_problems(disk / "cache") == []


# -- an unreadable project file ------------------------------------------------------------------


def _without_root_file_access():
    """In the child: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, so root obeys mode bits."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _can_drop_capabilities() -> bool:
    probe = Path(tempfile.mkstemp(prefix="orch-probe-")[1])
    try:
        probe.chmod(0)
        proc = subprocess.run(
            [sys.executable, "-c", f"open({str(probe)!r}).read()"],
            preexec_fn=_without_root_file_access,
            capture_output=True,
        )
        return proc.returncode != 0
    except OSError:
        return False
    finally:
        probe.unlink()


@pytest.mark.skipif(
    not _can_drop_capabilities(),
    reason="cannot make a file unreadable to this user (root without CAP_SETPCAP?)",
)
@pytest.mark.parametrize("victim", ["resource.repository", "texture.xml", "Town.iworld", "Worlds"])
def test_unreadable_project_file_exits_2_naming_it(tmp_path, clean_build, victim):
    """A project file or folder the build cannot read (mode 000, no root override): exit 2 naming it."""
    build = _fresh_copy(clean_build, tmp_path)
    project = build.parent / "project"
    target = project / "Worlds" if victim == "Worlds" else sorted(project.rglob(victim))[0]
    os.chmod(target, 0o000)
    try:
        proc = run_cli("run", str(build), preexec_fn=_without_root_file_access)
    finally:
        os.chmod(target, 0o755)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert str(target) in proc.stderr
    assert "Permission denied" in proc.stderr and "Traceback" not in proc.stderr


# -- runaway custom code on Ray workers ----------------------------------------------------------


@pytest.mark.ray
def test_a_looping_rule_function_on_ray_is_stopped_by_rules_timeout(tmp_path, ray_local):
    """A custom rule function that never returns, run on Ray workers, is stopped by `rules.timeout`."""
    from buildkit import TESTS

    shutil.copytree(TESTS / "data" / "bad" / "_base", tmp_path / "case")
    shutil.copytree(
        TESTS / "data" / "bad" / "rules-func-loops", tmp_path / "case", dirs_exist_ok=True
    )
    build = edit_build(tmp_path / "case" / "build.yaml", rules={"timeout": 1})
    started = time.perf_counter()
    assert run_inprocess("run", str(build), "--executor", "ray") == 1
    assert time.perf_counter() - started < 60
    report = (tmp_path / "case" / "build" / "out" / "reports" / "validate.json").read_text()
    assert "timed out after 1 s (rules.timeout)" in report and "texture.xml" in report


def test_a_torn_action_log_line_costs_one_recomputation_only(tmp_path, clean_build):
    """An action log cut mid-line (a run killed while appending): the next run's entries stay intact."""
    from orchestrator.config import load_build
    from orchestrator.observe import setup_logging
    from orchestrator.scheduler import RunOptions, run_build

    _, outputs, code, _ = clean_build
    build = _fresh_copy(clean_build, tmp_path)
    cache = tmp_path / "build" / "cache"
    assert run_inprocess("run", str(build)) == code
    log = cache / "ac" / "cook.log"
    data = log.read_bytes()
    log.write_bytes(data[: len(data) - 40])  # the last line loses its end and its newline

    def cook_built() -> int:
        shutil.rmtree(cache / "stages", ignore_errors=True)  # per-unit lookups, not whole stages
        result = run_build(
            load_build(build),
            RunOptions(executor="local", progress=False),
            setup_logging("console"),
        )
        return next(r.built for r in result.reports if r.name == "cook")

    assert cook_built() == 1
    assert cook_built() == 0  # the entry appended after the torn line was not swallowed by it
    assert published(tmp_path / "build" / "out") == outputs


def test_a_killed_runs_temp_files_never_block_a_later_run_with_its_pid(tmp_path):
    """Leftover temp files named after this host and pid (pid reuse) never make a write fail."""
    import socket

    from orchestrator.cache import atomic as cache_module

    folder = tmp_path / "cas" / "ab"
    folder.mkdir(parents=True)
    upcoming = int(repr(cache_module._temp_counter)[len("count(") : -1])  # the next call's number
    for n in range(upcoming, upcoming + 50):  # what a dead process with our pid would have left
        (folder / f".tmp-{socket.gethostname()}-{os.getpid()}-{n}").write_bytes(b"partial")
    for i in range(20):
        cache_module.atomic_write(folder / f"entry-{i}", b"complete")
    assert all((folder / f"entry-{i}").read_bytes() == b"complete" for i in range(20))
