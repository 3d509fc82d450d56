"""The command line: exit codes and messages for bad input, no tracebacks for expected errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from orchestrator.cli import main


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
    from orchestrator.lock import OutputLock

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
        "import sys; from orchestrator.cli import main\ntry:\n main(['--help'])\n"
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
    assert validate["inputs"] == ["files", "source", "cooklist"] and validate["version"] >= 1


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
