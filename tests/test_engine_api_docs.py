"""docs/engine-api.md runs as written: the stage it writes, its registration, its test."""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
from buildkit import cli_env, run_cli

DOC = Path(__file__).resolve().parents[1] / "docs" / "engine-api.md"


def blocks(section: str, language: str) -> list[str]:
    """The fenced `language` blocks under the `## section` heading of the guide."""
    text = DOC.read_text(encoding="utf-8")
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, re.S)


@pytest.fixture
def word_count(tmp_path, monkeypatch):
    """The guide's stage, saved as word_count.py where imports find it."""
    (stage,) = blocks("Writing a stage", "python")
    (tmp_path / "word_count.py").write_text(stage, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("word_count", None)
    yield tmp_path
    sys.modules.pop("word_count", None)


def test_the_testing_example_passes(word_count):
    """The "Testing a stage" example runs and its assertions hold."""
    (example,) = blocks("Testing a stage", "python")
    exec(compile(example, "engine-api.md", "exec"), {})


def test_the_registered_example_joins_the_pipeline_and_runs(word_count, tmp_path):
    """A package outside stages/ registered as the guide says is listed by `orchestrate stages`
    and runs with `orchestrate run --stages word_count`, publishing its report."""
    (toml,) = blocks("Registering a stage", "toml")
    stages = tomllib.loads(toml)["project"]["entry-points"]["orchestrate.stages"]
    dist = word_count / "word_count-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: word-count\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[orchestrate.stages]\n" + "".join(f"{k} = {v}\n" for k, v in stages.items())
    )
    project = tmp_path / "p"
    (project / "notes").mkdir(parents=True)
    (project / "a.txt").write_text("one two three", encoding="utf-8")
    (project / "notes" / "b.txt").write_text("four", encoding="utf-8")
    build = tmp_path / "build.yaml"
    build.write_text("project: p\noutput: out\ncache: cache\n", encoding="utf-8")
    env = cli_env()
    env["PYTHONPATH"] = f"{word_count}:{env['PYTHONPATH']}"

    listed = run_cli("stages", "--format", "json", env=env)
    assert listed.returncode == 0, listed.stderr
    names = [stage["name"] for stage in json.loads(listed.stdout)]
    assert "word_count" in names and "collect" in names

    ran = run_cli("run", str(build), "--stages", "word_count", "--executor", "local", env=env)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "out" / "reports" / "words.txt").read_text() == "4\n"
    assert "word_count" in ran.stdout and "collect" not in ran.stdout


def test_the_incremental_example_runs_one_unit_per_changed_file(tmp_path, monkeypatch):
    """The "Incremental stages" stage, built, edited, extended and pruned: each rerun runs only
    the units of the files that changed, and its output equals a clean build's."""
    from enginekit import write_toy

    from orchestrator.core.config import load_build
    from orchestrator.core.observe import setup_logging
    from orchestrator.core.registry import load_stage
    from orchestrator.core.scheduler import RunOptions, run_build

    (stage,) = blocks("Incremental stages", "python")
    (tmp_path / "word_count_incremental.py").write_text(stage, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    files = {f"t{i}.txt": "w " * i for i in range(1, 6)}
    build_file = write_toy(tmp_path / "inc", files)

    def build(where):
        stages = [load_stage("word_count_incremental")]
        options = RunOptions(executor="local", progress=False)
        result = run_build(load_build(where), options, setup_logging("console"), stages)
        (report,) = result.reports
        return dict(result.outputs["word_counts"]), report.built

    assert build(build_file) == ({f"t{i}.txt": i for i in range(1, 6)}, 5)
    project = tmp_path / "inc" / "p"
    (project / "t2.txt").write_text("a b c d e f g", encoding="utf-8")
    (project / "t9.txt").write_text("x", encoding="utf-8")
    (project / "t5.txt").unlink()
    counts, built = build(build_file)
    assert built == 2  # t2 edited, t9 added; t5's unit removed without running
    clean = write_toy(tmp_path / "clean", {p.name: p.read_text() for p in project.iterdir()})
    assert (
        counts
        == build(clean)[0]
        == {"t1.txt": 1, "t2.txt": 7, "t3.txt": 3, "t4.txt": 4, "t9.txt": 1}
    )
    assert build(build_file)[1] == 0  # nothing changed: nothing runs
