"""The output folder: one safe path for every write, the ledger of what was published, `clean`."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from buildkit import cli_env, make_project, published, run_cli, run_inprocess

from orchestrator.config import load_build
from orchestrator.errors import ConfigError, ProjectError
from orchestrator.outputs import LEDGER, Ledger, OutputFolder, clean_output
from orchestrator.testing import RecordingContext


def write_build(folder: Path, text: str) -> Path:
    (folder / "project").mkdir(parents=True, exist_ok=True)
    path = folder / "build.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "settings,holds",
    [
        ("output: .\n", "the project"),
        ("output: project\n", "the project"),
        ("output: project/..\n", "the project"),
        ("output: build\ncache: build/cache\n", "the cache"),
        ("output: build/same\ncache: build/same\n", "the cache"),
        ("output: ..\n", "the project"),
    ],
)
def test_an_output_folder_holding_what_it_must_not_is_refused(tmp_path, settings, holds):
    """`output:` may not hold the project, the build file or the cache: a build-file error."""
    build = write_build(tmp_path / "b", "project: project\n" + settings)
    with pytest.raises(ConfigError) as raised:
        load_build(build)
    message = str(raised.value)
    assert f"{build}:2: output:" in message and f"holds {holds}" in message


def test_an_output_folder_holding_the_build_file_is_refused(tmp_path):
    """A project elsewhere does not make `output: .` safe: the build file is there."""
    (tmp_path / "elsewhere").mkdir()
    build = write_build(tmp_path / "b", "project: ../elsewhere\noutput: .\n")
    with pytest.raises(ConfigError, match="holds the build file"):
        load_build(build)


def test_an_output_folder_that_links_to_the_project_is_refused(tmp_path):
    """Links are resolved first: an output folder that is a link to the project is refused."""
    build = write_build(tmp_path, "project: project\noutput: out\n")
    (tmp_path / "out").symlink_to(tmp_path / "project", target_is_directory=True)
    with pytest.raises(ConfigError, match="holds the project"):
        load_build(build)


@pytest.mark.parametrize(
    "settings",
    [
        "",  # build/out and build/cache: siblings
        "output: project/build/out\n",  # inside the project: the walk skips it
        "output: out\ncache: out-cache\n",
    ],
)
def test_usual_layouts_are_accepted(tmp_path, settings):
    """Outputs beside the cache, or inside the project, are fine."""
    load_build(write_build(tmp_path, "project: project\n" + settings))


@pytest.mark.parametrize(
    "bad", ["../x", "/etc/x", "a\\..\\b", "C:/x", "a//b", "./a", "a/./b", "", "a/..", "x\0y"]
)
def test_paths_that_could_leave_the_folder_are_refused(tmp_path, bad):
    """Absolute, parent, drive, backslash, empty or NUL-bearing paths never reach the disk."""
    with pytest.raises(ProjectError, match="refusing to write outside the output folder"):
        OutputFolder(tmp_path).path(bad)


def test_reports_are_not_written_through_a_link_out_of_the_folder(tmp_path):
    """ctx.publish_bytes (reports use it) refuses a parent folder that links elsewhere."""
    build = load_build(write_build(tmp_path, "project: project\noutput: out\n"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "reports").symlink_to(elsewhere, target_is_directory=True)
    ctx = RecordingContext(build, {})
    for relpath in ("reports/validate.json", LEDGER):
        with pytest.raises(ProjectError, match="through a link out of the output folder"):
            ctx.publish_bytes(relpath, b"{}")
    assert list(elsewhere.iterdir()) == []


def test_a_build_refuses_a_symlinked_reports_folder_and_writes_nothing_there(tmp_path):
    """A whole run with reports/ linked elsewhere: exit 2 naming it, nothing written there."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "build" / "out").mkdir(parents=True)
    (tmp_path / "build" / "out" / "reports").symlink_to(elsewhere, target_is_directory=True)
    proc = run_cli("run", str(build))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "through a link out of the output folder" in proc.stderr
    assert list(elsewhere.iterdir()) == []


def test_the_ledger_lists_each_file_once_and_ignores_a_torn_line(tmp_path):
    """Entries are appended once; a last line a kill cut short is not an entry."""
    ledger = Ledger(OutputFolder(tmp_path))
    ledger.record("a")
    ledger.record("b/c")
    ledger.record("a")
    assert ledger.entries() == ["a", "b/c"]
    with (tmp_path / LEDGER).open("a", encoding="utf-8") as handle:
        handle.write("b/partial-na")
    assert Ledger(OutputFolder(tmp_path)).entries() == ["a", "b/c"]


def test_clean_removes_what_builds_published_and_nothing_else(tmp_path, capsys):
    """`clean` removes the published files and the folders they leave empty; a user's files stay."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    out = tmp_path / "build" / "out"
    assert run_inprocess("run", str(build)) in (0, 1)
    published = Ledger(OutputFolder(out)).entries()
    assert "manifest.json" in published and "reports/validate.json" in published
    (out / "notes.txt").write_text("mine")
    (out / "reports" / "mine.txt").write_text("mine too")
    assert run_inprocess("clean", str(build)) == 0
    remaining = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    assert remaining == ["notes.txt", "reports", "reports/mine.txt"]
    said = capsys.readouterr().out
    assert f"removed {len(published)} published files" in said and "kept 2 files" in said
    assert (tmp_path / "build" / "cache").is_dir()


def test_clean_of_a_fully_published_folder_removes_the_folder(tmp_path):
    """With nothing else in it, the output folder goes too."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    assert run_inprocess("run", str(build)) in (0, 1)
    assert run_inprocess("clean", str(build)) == 0
    assert not (tmp_path / "build" / "out").exists()


def test_clean_without_a_ledger_removes_nothing(tmp_path, capsys):
    """An output folder no build recorded publishing into is left alone, with a message."""
    build = write_build(tmp_path, "project: project\noutput: dist\n")
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist" / "precious.txt").write_text("keep")
    assert run_inprocess("clean", str(build)) == 0
    assert (tmp_path / "dist" / "precious.txt").read_text() == "keep"
    assert "nothing removed" in capsys.readouterr().out


def test_a_tampered_ledger_cannot_make_clean_delete_elsewhere(tmp_path):
    """Entries that leave the folder, or files replaced by links, are skipped."""
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    victim.write_text("keep")
    (out / "reports").mkdir(parents=True)
    (out / "link").symlink_to(victim)
    (out / "real").write_text("published")
    (out / LEDGER).write_text(f"../victim.txt\n{victim}\nlink\nreal\n", encoding="utf-8")
    cleaned = clean_output(out)
    assert cleaned.removed == ["real"] and victim.read_text() == "keep"
    assert (out / "link").is_symlink()


# -- nothing is written outside `output:` and `cache:` ------------------------------------------


def _state(folders: list[Path], skip: tuple[Path, ...]) -> dict[str, tuple]:
    """Every entry under `folders` (files, folders, links) → (kind, size, mtime_ns, mode)."""
    found: dict[str, tuple] = {}
    skip_text = tuple(str(p) for p in skip)
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = [
                d for d in dirnames if not os.path.join(dirpath, d).startswith(skip_text)
            ]
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                kind = "dir" if stat.S_ISDIR(st.st_mode) else "file"
                # a folder's own mtime moves when an entry is added or removed: that is a write
                found[path] = (
                    kind,
                    st.st_size if kind == "file" else 0,
                    st.st_mtime_ns,
                    st.st_mode,
                )
    return found


def test_a_build_writes_nothing_outside_output_and_cache(tmp_path):
    """Cold build, warm rerun, validate and clean, with HOME and TMPDIR fresh: nothing under
    them, the project, the build file's folder or anywhere else in the test folder is created,
    modified or deleted."""
    home, temp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    temp.mkdir()
    build = make_project(tmp_path / "work", 150, 4, executor={"kind": "local"})
    out, cache = build.parent / "build" / "out", build.parent / "build" / "cache"
    out.mkdir(parents=True)
    cache.mkdir(parents=True)
    env = cli_env(HOME=str(home), TMPDIR=str(temp), PYTHONDONTWRITEBYTECODE="1")
    watched = [tmp_path]
    before = _state(watched, skip=(out, cache))
    for args in (["run"], ["run"], ["validate", "--format", "json"]):
        proc = run_cli(*args[:1], str(build), *args[1:], env=env)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
    proc = run_cli("clean", str(build), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "published files from" in proc.stdout
    # every file in the output folder was published, so `clean` removes the folder itself (and
    # thereby moves the mtime of the folder holding it: that entry alone may change, by mtime)
    assert not out.exists() and cache.is_dir()
    after = _state(watched, skip=(out, cache))
    holder = str(out.parent)
    after[holder] = after[holder][:2] + before[holder][2:3] + after[holder][3:]
    created = sorted(set(after) - set(before))
    deleted = sorted(set(before) - set(after))
    modified = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    assert (created, deleted, modified) == ([], [], []), (created[:5], deleted[:5], modified[:5])


PSEUDO_FILE_SYSTEMS = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "devpts",
        "mqueue",
        "securityfs",
        "debugfs",
        "tracefs",
        "bpf",
        "pstore",
        "configfs",
        "fusectl",
        "binfmt_misc",
        "autofs",
        "hugetlbfs",
        "nsfs",
    }
)


def _writable_mounts() -> list[str]:
    """Mount points of this machine that can hold files and are mounted read-write."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" ")
        separator = fields.index("-")
        point, options, fstype = fields[4], fields[5].split(","), fields[separator + 1]
        if "rw" in options and fstype not in PSEUDO_FILE_SYSTEMS:
            found.append(point.encode("ascii").decode("unicode_escape"))
    return found


def _can_confine() -> str | None:
    """Why a read-only mount namespace cannot be made here (None when it can)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "a read-only mount namespace needs root and unshare"
    probe = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "--",
            "mount",
            "-o",
            "remount,bind,ro",
            "/",
        ],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return f"cannot make a read-only mount namespace here: {probe.stderr.strip()}"
    return None


def run_confined(build: Path, writable: list[Path], *args: str) -> subprocess.CompletedProcess:
    """`orchestrate ARGS BUILD` in a mount namespace where every file system is read-only except
    the `writable` folders (bind-mounted over themselves first, so they stay writable)."""
    binds = " && ".join(
        f"mount --bind {shlex.quote(str(p))} {shlex.quote(str(p))}" for p in writable
    )
    remounts = " && ".join(
        f"mount -o remount,bind,ro {shlex.quote(point)}" for point in _writable_mounts()
    )
    command = " ".join(
        shlex.quote(part)
        for part in [
            sys.executable,
            "-c",
            "from orchestrator.cli import main; main()",
            args[0],
            str(build),
            *args[1:],
        ]
    )
    script = f"{binds} && {remounts} && exec {command}"
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )


@pytest.mark.skipif(_can_confine() is not None, reason=str(_can_confine()))
def test_a_build_runs_with_every_file_system_read_only_but_output_and_cache(tmp_path):
    """With the whole file system read-only except `output:` and `cache:` (a mount namespace),
    a cold build, a rerun and validate give the exit code and outputs of an unconfined build:
    any other write would have failed."""
    reference = make_project(tmp_path / "reference", 150, 4, executor={"kind": "local"})
    expected = run_cli("run", str(reference))
    build = make_project(tmp_path / "confined", 150, 4, executor={"kind": "local"})
    out, cache = build.parent / "build" / "out", build.parent / "build" / "cache"
    out.mkdir(parents=True)
    cache.mkdir(parents=True)
    for args in (["run"], ["run"], ["validate"]):
        proc = run_confined(build, [out, cache], *args)
        assert proc.returncode == expected.returncode, proc.stderr[-3000:]
        assert "Read-only file system" not in proc.stderr and "Traceback" not in proc.stderr
    assert published(out) == published(reference.parent / "build" / "out")
