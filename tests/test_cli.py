"""The command line: exit codes and messages for bad input, no tracebacks for expected errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.shell.cli import main


def run_cli(*args):
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return exit_info.value.code


def write_build(tmp_path, text):
    (tmp_path / "project").mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "text, key, expected",
    [
        ("project: project\ncook:\n  mpas: []\n", "cook.mpas", "did you mean 'maps'"),
        ("project: project\nexecutor:\n  workers: many\n", "executor.workers", "'many'"),
        ("project: missing-folder\n", "project", "does not exist"),
        (
            "project: project\nbundles:\n  shared_dependencies: share\n",
            "bundles.shared_dependencies",
            "'share'",
        ),
    ],
)
def test_bad_build_file_exits_2_naming_file_and_key(tmp_path, capsys, text, key, expected):
    """A bad build file exits 2 with the file, the key and what was wrong, without a traceback."""
    path = write_build(tmp_path, text)
    assert run_cli("run", str(path)) == 2
    err = capsys.readouterr().err
    assert str(path) in err and key in err and expected in err
    assert "Traceback" not in err


def test_missing_build_file_exits_2(tmp_path, capsys):
    """A build file that does not exist exits 2 naming it."""
    assert run_cli("cache", "stats", str(tmp_path / "none.yaml")) == 2
    assert "none.yaml" in capsys.readouterr().err


def test_locked_output_exits_4(tmp_path, capsys):
    """A second run on an output folder in use exits 4 with a clear message."""
    from orchestrator.files.lock import OutputLock

    path = write_build(tmp_path, "project: project\n")
    with OutputLock(tmp_path / "build" / "out"):
        assert run_cli("run", str(path)) == 4
    assert "in use" in capsys.readouterr().err


def test_cache_commands_work_on_an_empty_cache(tmp_path, capsys):
    """cache stats, gc and clear succeed on a cache that does not exist yet."""
    path = write_build(tmp_path, "project: project\n")
    for args in (
        ("cache", "stats", str(path)),
        ("cache", "gc", str(path), "--max-size", "1M"),
        ("cache", "clear", str(path)),
    ):
        assert run_cli(*args) == 0


def test_help_does_not_import_ray():
    """Starting the CLI (help) never imports Ray."""
    code = (
        "import sys; from orchestrator.shell.cli import main\ntry:\n main(['--help'])\n"
        "except SystemExit: pass\nprint('ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("False")


def test_stages_lists_the_registered_pipeline_in_graph_order(capsys):
    """`orchestrate stages --format json` names every stage with its declaration, in order."""
    import json

    assert run_cli("stages", "--format", "json") == 0
    listed = json.loads(capsys.readouterr().out)
    names = [stage["name"] for stage in listed]
    assert names[0] == "collect" and set(names) >= {
        "collect",
        "dependency",
        "validate",
        "cook",
        "pack",
        "write",
        "archive",
        "hash",
        "link_xml",
        "manifest",
    }
    assert (
        names.index("cook") < names.index("pack") < names.index("write") < names.index("manifest")
    )
    validate = next(stage for stage in listed if stage["name"] == "validate")
    assert validate["inputs"] == ["project", "assets", "index", "cooklist"]
    assert validate["version"] >= 1


def test_content_commands_come_from_the_registry(capsys):
    """Commands packages register (`orchestrate.commands`) appear in the help and run."""
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    for name in ("cooklist", "why", "graph", "inspect", "validate", "generate", "demo", "stages"):
        assert f"  {name}" in help_text


# -- faults outside the project's content --------------------------------------------------------

OVER_QUOTA_UNDER = """
import errno, os
_target = {target!r}
_fdopen, _write = os.fdopen, os.write

def _path(fd):
    try:
        path = os.readlink(f"/proc/self/fd/{{fd}}")
    except OSError:
        return ""
    return "" if os.path.basename(path).startswith(".orchestrate") else path  # the lock: not data

class _OverQuota:
    # a file whose writes fail as on a file system where the user's quota is used up
    def __init__(self, handle, path):
        self._handle, self._path = handle, path
    def write(self, data):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), self._path)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        self._handle.close()
    def __getattr__(self, name):
        return getattr(self._handle, name)

def _quota_fdopen(fd, *args, **kwargs):
    handle = _fdopen(fd, *args, **kwargs)
    path = _path(fd)
    return _OverQuota(handle, path) if path.startswith(_target) else handle

def _quota_write(fd, data):
    path = _path(fd)
    if path.startswith(_target):
        raise OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), path)
    return _write(fd, data)

os.fdopen, os.write = _quota_fdopen, _quota_write
"""


@pytest.mark.parametrize("where", ["output", "cache"])
def test_a_full_quota_exits_4_like_a_full_disk(tmp_path, where):
    """EDQUOT while writing outputs or the cache: exit 4, a message naming the file, no traceback,
    no half-written file."""
    from buildkit import make_project, published
    from buildkit import run_cli as run_in_child

    build = make_project(tmp_path, 100, 3, executor={"kind": "local"})
    target = tmp_path / "build" / ("out" if where == "output" else "cache")
    proc = run_in_child("run", str(build), prelude=OVER_QUOTA_UNDER.format(target=str(target)))
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert f"error: the disk quota is exceeded: {target}/" in proc.stderr
    assert "Traceback" not in proc.stderr
    out = tmp_path / "build" / "out"
    assert list(out.rglob(".tmp-*")) == [] if out.exists() else True
    assert "manifest.json" not in (published(out) if out.exists() else {})


# -- Ctrl-C in the middle of a build -------------------------------------------------------------

ANNOUNCE_UNITS = """
import sys, time
import orchestrator.executors.local as _local
_real_run_item, _announced = _local.run_item, set()

def _announcing_run_item(fn, item, *args, **kwargs):
    stage = fn.__module__.rpartition(".")[2]
    if stage not in _announced:
        _announced.add(stage)
        print(f"UNITS-STARTED {stage}", file=sys.stderr, flush=True)
    time.sleep(0.004)  # a wider window to interrupt in
    return _real_run_item(fn, item, *args, **kwargs)

_local.run_item = _announcing_run_item
"""


@pytest.fixture(scope="module")
def clean_reference(tmp_path_factory):
    """A generated project built once, cleanly: (build file, exit code, outputs, reports)."""
    from buildkit import make_project
    from buildkit import run_cli as run_in_child

    base = tmp_path_factory.mktemp("reference")
    build = make_project(base, 400, 9, executor={"kind": "local"})
    proc = run_in_child("run", str(build))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return build, proc.returncode, *_results(base / "build" / "out")


def _results(out) -> tuple[dict, dict]:
    from buildkit import content_reports, published

    return published(out), content_reports(out)


def _workers_of(pid: int) -> list[int]:
    import psutil

    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "stages.rules.custom.worker" in cmdline and cmdline[-2:-1] == [str(pid)]:
            found.append(process.pid)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("stage", ["collect", "validate", "cook", "write", "archive"])
def test_ctrl_c_mid_build_exits_130_and_a_rerun_equals_a_clean_build(
    tmp_path, clean_reference, stage
):
    """SIGINT to the whole process group (as a terminal sends it) once a stage's units run: exit
    130 with a message and no traceback, no custom-code worker left; then a rerun gives exactly a
    clean build's exit code, outputs and reports."""
    import os
    import shutil
    import signal
    import time

    from buildkit import cache_problems, cli_env
    from buildkit import run_cli as run_in_child

    build, code, outputs, reports = clean_reference
    shutil.copytree(
        build.parent, tmp_path, ignore=shutil.ignore_patterns("build"), dirs_exist_ok=True
    )
    copy = tmp_path / build.name
    script = ANNOUNCE_UNITS + "\nfrom orchestrator.shell.cli import main\nmain()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script, "run", str(copy)],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
        start_new_session=True,
    )
    lines = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # type: ignore[union-attr]
        lines.append(line)
        if line.strip() == f"UNITS-STARTED {stage}":
            time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGINT)
            break
        assert time.monotonic() < deadline, "the stage never started"
    else:
        pytest.fail(f"the build ended before {stage} ran:\n{''.join(lines)[-2000:]}")
    rest = proc.stderr.read()  # type: ignore[union-attr]
    assert proc.wait(timeout=60) == 130, rest[-3000:]
    assert "interrupted" in rest and "Traceback" not in rest
    time.sleep(0.2)
    assert _workers_of(proc.pid) == []
    assert cache_problems(tmp_path / "build" / "cache", torn_ok=True) == []
    rerun = run_in_child("run", str(copy))
    assert rerun.returncode == code, rerun.stderr[-3000:]
    assert _results(tmp_path / "build" / "out") == (outputs, reports)
