"""The benchmark suite's own pieces (benchmarks/): edits, floors, the ninja file, targets, runner.

Fast: a 100-resource project, no Ray. The suite itself is `python benchmarks/run_all.py`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import common  # noqa: E402
import report  # noqa: E402


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> common.Project:
    from stages.sources.messiah.generator import generate_project

    dest = tmp_path_factory.mktemp("bench") / "messiah-100-seed3"
    generate_project(dest, 100, 3)
    return common.Project(100, 3, dest)


def test_edits_change_what_they_say_and_are_undone(project):
    targets = common.pick_edit_targets(project)
    original = targets.texture_xml.read_bytes()
    mtime = targets.texture_xml.stat().st_mtime_ns
    width = common.change_width(1)(original)
    assert (
        width != original
        and b"<Width>" in width
        and len(width) in (len(original), len(original) + 1)
    )
    assert common.reindent(2)(original).replace(b" ", b"").replace(b"\n", b"") == original.replace(
        b" ", b""
    ).replace(b"\n", b"")
    repo = targets.repository.read_bytes()
    renamed = common.change_item_name(targets.guid, 3)(repo)
    assert len(renamed) == len(repo) + 3 and b"_b3</Name>" in renamed
    with common.edited(project, targets.texture_xml, common.change_width(1)):
        assert targets.texture_xml.read_bytes() == width
        assert (project.dir / common.BACKUP_DIR / "edit.json").is_file()
    assert targets.texture_xml.read_bytes() == original
    assert targets.texture_xml.stat().st_mtime_ns == mtime
    assert not (project.dir / common.BACKUP_DIR / "edit.json").exists()


def test_an_interrupted_edit_is_restored(project):
    targets = common.pick_edit_targets(project)
    original = targets.texture_xml.read_bytes()
    edit = common.edited(project, targets.texture_xml, common.change_width(5))
    edit.__enter__()  # never left: as if the process had been killed
    assert targets.texture_xml.read_bytes() != original
    common.restore_leftover_edits(project)
    assert targets.texture_xml.read_bytes() == original


def test_floors_count_every_file(project):
    seconds, files = common.stat_floor(project.root)
    assert files == len(common.walk_files(project.root)) > 100 and seconds > 0
    one = common.read_parse_floor(project.root, 1)
    two = common.read_parse_floor(project.root, 2)
    assert one["files"] == two["files"] == files
    assert one["bytes"] == two["bytes"] and one["xml_parsed"] == two["xml_parsed"] > 100
    assert common.read_parse_floor(project.root, 1, xml_only=True)["files"] == one["xml_parsed"]


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed")
def test_ninja_file_has_an_edge_per_asset_and_reruns_as_a_noop(project):
    ninja_dir, edges = common.prepare_ninja(project)
    info = json.loads((project.dir / "generated.json").read_text())
    counts = info["counts"]
    assert edges >= counts["resource_folders"] + counts["repositories"] + counts["levels"]
    assert common.ninja_noop(ninja_dir) > 0
    targets = common.pick_edit_targets(project)
    with common.edited(project, targets.texture_xml, common.change_width(1)):
        done = subprocess.run(["ninja", "-C", str(ninja_dir), "-n"], capture_output=True, text=True)
        assert "no work to do" not in done.stdout  # the edit makes its edge dirty


def test_targets_are_judged_from_the_figures():
    figures = {
        "noop": {"median": 0.3, "ray_imported": False},
        "floor.ninja_noop": {"median": 0.2},
        "cold.ray2": {"median": 100.0, "driver_peak_rss": 500 * 2**20},
        "edit.attribute": {"median": 2.0},
        "floor.read_parse.p2": {"median": 40.0},
        "validate.ray1": {"median": 10.0},
        "validate.ray2": {"median": 6.0},
        "validate.per_rule": {"median": 300.0, "extrapolated": True},
        "report.open": {"median": 3.4},
        "report.page_bytes": {"median": 3 * 2**20, "assets": 62000},
    }
    verdicts = {row["target"]: row["met"] for row in report.targets(figures)}
    assert list(verdicts.values()) == [True, True, False, False, True, False, True, True]
    assert all(v is None for v in (row["met"] for row in report.targets({})))
    markdown = "\n".join(report.size_markdown("1000", {"figures": figures, "meta": {}}))
    assert "**met**" in markdown and "**missed**" in markdown


def test_runner_reports_the_run_and_whether_ray_was_imported(project, tmp_path):
    build = common.bench_build_file(project, "test-runner")
    run = common.run_orchestrate(build, "--executor", "local", "--stages", "dependency")
    assert run.exit_code in (0, 1) and run.ray_imported is False
    assert [s["name"] for s in run.stages] == ["collect", "dependency"]
    assert run.built.get("collect") and run.run_build_s > 0 and run.wall >= run.run_build_s
    again = common.run_orchestrate(build, "--stages", "dependency")
    assert again.built == {} and again.ray_imported is False
