"""The output folder: one safe path for every write, the ledger of what was published, `clean`."""

from __future__ import annotations

from pathlib import Path

import pytest
from buildkit import make_project, run_cli, run_inprocess

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
