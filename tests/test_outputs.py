"""The output folder: one safe path for every write, the ledger of what was published, `clean`."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from buildkit import cli_env, edit_build, make_project, published, run_cli, run_inprocess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.core.config import load_build
from orchestrator.errors import ConfigError, ProjectError
from orchestrator.files.outputs import (
    LEDGER,
    LEDGER_HEADER,
    LOCK,
    Ledger,
    OutputFolder,
    clean_output,
)
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
        with pytest.raises(
            ProjectError, match="refusing to follow a symbolic link in the output folder"
        ):
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
    assert "refusing to follow a symbolic link in the output folder" in proc.stderr
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
    modified or deleted. (Custom-code workers work in folders of their own made in TMPDIR and
    removed with them: TMPDIR's own mtime may move, nothing in it may stay.)"""
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
    for holder in (str(out.parent), str(temp)):
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
            "from orchestrator.shell.cli import main; main()",
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


# -- links planted in the output and cache folders ----------------------------------------------

PRECIOUS = b"another program's file\n"


def _planted(tmp_path: Path, link: Path) -> Path:
    """A file outside the build (`victim.txt`) and `link` pointing to it."""
    victim = tmp_path / "victim.txt"
    victim.write_bytes(PRECIOUS)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(victim)
    return victim


@pytest.mark.parametrize("relpath", [LOCK, LEDGER])
def test_a_lock_or_ledger_the_project_links_elsewhere_is_refused(tmp_path, relpath):
    """`output: project/out` (accepted), and the project carries `out/reports/<file>` linked
    to a file elsewhere: the run stops (exit 2, naming the link) and the file is untouched
    (the lock was truncated and overwritten, the ledger appended to)."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"}, output="project/out")
    link = tmp_path / "project" / "out" / relpath
    victim = _planted(tmp_path, link)
    proc = run_cli("run", str(build))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "refusing to follow a symbolic link in the output folder" in proc.stderr
    assert str(link) in proc.stderr and "Traceback" not in proc.stderr
    assert victim.read_bytes() == PRECIOUS


@pytest.mark.parametrize(
    "relpath", ["manifest.json", "reports/run.json", "reports/index.html", "link.xml"]
)
def test_an_output_file_linked_elsewhere_is_replaced_never_written_through(tmp_path, relpath):
    """A file written whole (through a temporary file and a rename) replaces a link put in its
    place: the file it pointed to is untouched, the output holds a regular file."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    link = tmp_path / "build" / "out" / relpath
    victim = _planted(tmp_path, link)
    assert run_inprocess("run", str(build)) in (0, 1)
    assert victim.read_bytes() == PRECIOUS
    assert link.is_file() and not link.is_symlink()


def test_an_output_folder_reached_through_a_link_in_the_project_is_refused(tmp_path):
    """`output: project/out` where the project's `out` is a link elsewhere: a build-file error
    naming the link, before anything is written."""
    build = write_build(tmp_path, "project: project\noutput: project/out\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "project" / "out").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ConfigError, match="reached through a symbolic link inside the project"):
        load_build(build)


def _other_database(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE accounts (name TEXT)")
    db.commit()
    db.close()


@pytest.mark.parametrize(
    "relpath", ["actions.sqlite", "lock", "cas/packs/index.log", "state", "cas"]
)
def test_a_cache_path_linked_elsewhere_is_refused(tmp_path, relpath):
    """A link anywhere in the cache folder (a database, the lock, the blob index, a folder) is
    refused naming it (exit 2); what it points to is untouched (the action database linked to
    another program's database got its tables written into it)."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    cache = tmp_path / "build" / "cache"
    link = cache / relpath
    link.parent.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "elsewhere"
    if relpath in ("state", "cas"):
        target.mkdir()
        link.symlink_to(target, target_is_directory=True)
    else:
        if relpath.endswith(".sqlite"):
            _other_database(target)
        else:
            target.write_bytes(PRECIOUS)
        link.symlink_to(target)
    before = {p: p.read_bytes() for p in [target] if p.is_file()}
    proc = run_cli("run", str(build))
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "refusing to follow a symbolic link in the cache folder" in proc.stderr
    assert "Traceback" not in proc.stderr
    if target.is_dir():
        assert list(target.iterdir()) == []
    else:
        assert {p: p.read_bytes() for p in [target]} == before


# -- names with control characters, and the ledger's format -------------------------------------

INJECTED = "Characters/Hero_01&#10;touch /tmp/x #"


def _inject_package(tmp_path: Path) -> Path:
    repository = tmp_path / "project" / "Repository" / "resource.repository"
    text = repository.read_text(encoding="utf-8")
    assert "<Package>Characters/Hero_01</Package>" in text
    repository.write_text(
        text.replace("<Package>Characters/Hero_01</Package>", f"<Package>{INJECTED}</Package>"),
        encoding="utf-8",
    )
    return repository


def test_a_name_with_a_newline_stops_the_build_naming_the_file_and_the_name(tmp_path):
    """A Package holding a newline (`&#10;`) would put a shell line into the ledger: the build
    stops (exit 2) naming the repository, its line and the name, and publishes nothing."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"}, hash={"append_hash": False})
    _inject_package(tmp_path)
    proc = run_cli("run", str(build))
    assert proc.returncode == 2, proc.stderr[-2000:]
    said = proc.stderr
    assert "Repository/resource.repository:" in said
    assert "'Characters/Hero_01\\ntouch /tmp/x #'" in said and "U+000A" in said
    assert "Traceback" not in said
    out = tmp_path / "build" / "out"
    assert not (out / "manifest.json").exists()
    assert not any("touch" in p.name for p in out.rglob("*"))


def test_with_skip_broken_the_item_is_left_out_and_every_output_name_is_clean(tmp_path):
    """With `collect.skip_broken`, the item is left out and the build goes on: no published
    path, and no ledger line, holds a control character."""
    build = make_project(
        tmp_path,
        100,
        2,
        executor={"kind": "local"},
        hash={"append_hash": False},
        collect={"skip_broken": True},
    )
    _inject_package(tmp_path)
    assert run_inprocess("run", str(build)) in (0, 1)
    out = tmp_path / "build" / "out"
    entries = Ledger(OutputFolder(out)).entries()
    assert "manifest.json" in entries
    for path in [*entries, *(p.relative_to(out).as_posix() for p in out.rglob("*"))]:
        assert path.isprintable(), path
    lines = (out / LEDGER).read_bytes().split(b"\n")
    assert lines[0] == LEDGER_HEADER and lines[-1] == b""
    assert all(json.loads(line)["path"] in entries for line in lines[1:-1])


@pytest.mark.parametrize("name", ["a\nb", "tab\there", "del\x7f", "cr\r", "esc\x1b[31m"])
def test_bundle_names_and_output_paths_refuse_control_characters(tmp_path, name):
    """The last guards: a bundle name and an output path holding a control character."""
    from stages.layout.packing import check_bundle_name

    with pytest.raises(ConfigError, match="control character"):
        check_bundle_name(f"chars/{name}")
    with pytest.raises(ProjectError, match="refusing to write outside the output folder"):
        OutputFolder(tmp_path).path(f"bundles/{name}")


SAFE_SEGMENT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\:"),
    min_size=1,
    max_size=12,
).filter(lambda s: s not in (".", ".."))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(st.lists(SAFE_SEGMENT, min_size=1, max_size=3).map("/".join), max_size=8))
def test_the_ledger_gives_back_every_name_it_was_given(tmp_path_factory, names):
    """Whatever the (safe) names — spaces, `#`, quotes, Chinese, JSON-looking text — the
    ledger lists each once, in order, and nothing else."""
    out = tmp_path_factory.mktemp("out")
    ledger = Ledger(OutputFolder(out))
    for name in names:
        ledger.record(name)
    assert Ledger(OutputFolder(out)).entries() == list(dict.fromkeys(names))


def test_clean_removes_only_the_entries_it_parses(tmp_path):
    """A ledger line that is no JSON entry (written by hand, or by a name that broke a line in
    an earlier release) never makes `clean` remove a file."""
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    for name in ("published.bin", "notes.txt", "mine.txt"):
        (out / name).write_text(name)
    (out / LEDGER).write_bytes(
        LEDGER_HEADER
        + b'\n{"path": "published.bin"}\nnotes.txt\n{"path": 7}\n"mine.txt"\n{"path": "../x"}\n'
    )
    cleaned = clean_output(out)
    assert cleaned.removed == ["published.bin"]
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt", "notes.txt"]


def test_a_ledger_of_an_earlier_release_is_read_strictly_and_rewritten(tmp_path):
    """An old ledger (a path a line): lines with a control character or that could leave the
    folder are no entries; the next publication rewrites it as JSON lines."""
    out = tmp_path / "out"
    (out / "reports").mkdir(parents=True)
    (out / "a.bin").write_text("a")
    (out / "keep\r").write_text("k")
    (out / LEDGER).write_bytes(b"a.bin\nkeep\r\n../outside\nb/c.bin\n")
    ledger = Ledger(OutputFolder(out))
    assert ledger.entries() == ["a.bin", "b/c.bin"]
    ledger.record("d.bin")
    assert (out / LEDGER).read_bytes().split(b"\n")[0] == LEDGER_HEADER
    assert Ledger(OutputFolder(out)).entries() == ["a.bin", "b/c.bin", "d.bin"]
    assert clean_output(out).removed == ["a.bin"]
    assert (out / "keep\r").exists()


# -- a rerun removes what earlier builds published and it does not ------------------------------


@pytest.mark.parametrize("damage", ["deleted", "truncated"])
def test_a_rerun_after_a_lost_manifest_removes_stale_bundles(tmp_path, damage):
    """A power loss leaves `manifest.json` deleted or cut short; the project then changes so a
    bundle goes away: the rerun removes that bundle (found in the ledger, as the manifest no
    longer names it), keeps a file the user put there, and lists only what it published."""
    build = make_project(tmp_path, 100, 2, executor={"kind": "local"})
    assert run_inprocess("run", str(build)) in (0, 1)
    out = tmp_path / "build" / "out"
    manifest = out / "manifest.json"
    stale = sorted(p for p in out.glob("ui*") if p.is_file())
    assert stale
    if damage == "deleted":
        manifest.unlink()
    else:
        manifest.write_bytes(manifest.read_bytes()[:100])
    (out / "notes.txt").write_text("mine")
    edit_build(
        build,
        bundles={
            "layout": [
                {"name": "maps/{stem}", "maps": "all"},
                {"name": "interface", "include": ["UI/**"]},
                {"name": "chars/{package}", "include": ["Characters/**"]},
            ]
        },
    )
    assert run_inprocess("run", str(build)) in (0, 1)
    assert not [p for p in stale if p.exists()]
    assert any(out.glob("interface*")) and (out / "notes.txt").read_text() == "mine"
    entries = set(Ledger(OutputFolder(out)).entries())
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert entries == files - {"notes.txt", LEDGER, LOCK}
