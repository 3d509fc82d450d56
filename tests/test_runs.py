"""Running a build as a command: the run's options travel as one value, from the command line
to the engine, and the executor is the build file's unless the run asks for another."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from orchestrator.core.options import RunOptions
from orchestrator.shell import runs
from orchestrator.shell.cli import main


def write_build(tmp_path, kind: str = "local"):
    (tmp_path / "项目").mkdir()
    path = tmp_path / "build.yaml"
    path.write_text(f"project: 项目\nexecutor:\n  kind: {kind}\n", encoding="utf-8")
    return path


def recorded_options(build_file) -> dict:
    record = build_file.parent / "build" / "out" / "reports" / "run.json"
    return json.loads(record.read_text(encoding="utf-8"))["options"]


def test_the_command_line_makes_one_run_options(tmp_path, monkeypatch):
    """Every flag of `orchestrate run` lands in the one RunOptions `run_command` is given."""
    given = []
    monkeypatch.setattr(runs, "run_command", lambda *args, wait: given.append(args) or 0)
    with pytest.raises(SystemExit):
        main(
            [
                "run",
                str(tmp_path / "build.yaml"),
                *("--executor", "ray", "--workers", "3", "--stages", "collect,cook"),
                *("--profile", "trace.json", "--log-format", "json"),
                *("--explain", "--no-cache", "--dry-run", "--keep-going", "-v"),
            ]
        )
    expected = RunOptions(
        executor="ray",
        workers=3,
        stages=["collect", "cook"],
        explain=True,
        no_cache=True,
        dry_run=True,
        keep_going=True,
        profile="trace.json",
        log_format="json",
        verbose=True,
    )
    assert given == [(str(tmp_path / "build.yaml"), expected)]
    given.clear()
    with pytest.raises(SystemExit):
        main(["run", str(tmp_path / "build.yaml")])
    assert given == [(str(tmp_path / "build.yaml"), RunOptions())]  # no flag: the build file's


def test_run_command_takes_the_options_whole(tmp_path, capsys):
    """The executor is the build file's unless the options name one; `quiet` prints nothing."""
    build_file = write_build(tmp_path, "local")
    assert runs.run_command(str(build_file), RunOptions(quiet=True)) == 0
    assert capsys.readouterr().out == ""
    assert recorded_options(build_file)["executor"] == "local"
    options = RunOptions(executor="auto", stages=["collect"], log_format="json")
    assert runs.run_command(str(build_file), options) == 0
    shown = capsys.readouterr()
    assert shown.out.startswith("stage ")  # the summary table, in plain text off a terminal
    assert recorded_options(build_file) == {
        "executor": "auto",
        "workers": None,
        "stages": ["collect"],
        "explain": False,
        "no_cache": False,
        "keep_going": False,
    }
    assert json.loads(shown.err.splitlines()[-1])["event"] == "build.done"


def test_run_stages_resolves_the_executor_and_runs_without_progress(tmp_path, monkeypatch):
    """What the engine is given: the build file's executor, the stages asked, no progress."""
    build_file = write_build(tmp_path, "local")
    seen = []

    def run_build(build, options, log, *rest, **keywords):
        seen.append(options)
        return "the run"

    monkeypatch.setattr("orchestrator.core.scheduler.run_build", run_build)
    asked = RunOptions(stages=["collect"], explain=True)
    build, run = runs.run_stages(str(build_file), asked)
    assert run == "the run" and build.project_root.name == "项目"
    assert seen == [replace(asked, executor="local", progress=False)]
