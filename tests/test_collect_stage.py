"""The collect and dependency stages on the engine: what an edit re-parses, counted in units."""

from __future__ import annotations

from pathlib import Path

from buildkit import make_project

from orchestrator.core.config import load_build
from orchestrator.core.observe import setup_logging
from orchestrator.core.scheduler import RunOptions, run_build


def build(build_file: Path, stages=("dependency",)):
    options = RunOptions(executor="local", stages=list(stages), progress=False, explain=True)
    return run_build(load_build(build_file), options, setup_logging())


def report(result, stage):
    return next(r for r in result.reports if r.name == stage)


def test_editing_one_attribute_file_reparses_only_its_unit(tmp_path):
    """One edited attribute file re-runs the one parse unit that read it, and nothing else."""
    build_file = make_project(tmp_path, assets=400)
    first = build(build_file)
    units = report(first, "collect").units
    assert units > 3
    texture = sorted((tmp_path / "project").rglob("texture.xml"))[0]
    relpath = texture.relative_to(tmp_path / "project").as_posix()
    texture.write_text(
        texture.read_text(encoding="utf-8").replace("<Width>", "<Width> "), encoding="utf-8"
    )
    second = build(build_file)
    collect = report(second, "collect")
    assert (collect.units, collect.built) == (units, 1)
    reasons = [o.reason for o in second.explained if o.stage == "collect"]
    assert reasons == [f"input changed: {relpath}"]


def test_noop_rerun_skips_collect_and_dependency(tmp_path):
    """With nothing changed, collect and dependency run no unit and give the same cook list."""
    build_file = make_project(tmp_path, assets=200)
    first = build(build_file)
    second = build(build_file)
    assert [report(second, s).built for s in ("collect", "dependency")] == [0, 0]
    assert second.outputs["cooklist"].to_json() == first.outputs["cooklist"].to_json()


def test_adding_a_level_changes_the_cook_list(tmp_path):
    """A new level named by a world is parsed, and its resources join the cook list."""
    build_file = make_project(tmp_path, assets=200)
    before = build(build_file).outputs["cooklist"]
    world = sorted((tmp_path / "project" / "Worlds").glob("*.iworld"))[0]
    level = tmp_path / "project" / "Levels" / "Added.ilevel"
    guid = next(g for g in before.cooked if len(g) == 36)
    level.write_text(
        f"<Level><Entities><Entity><Resource>{guid}</Resource></Entity></Entities></Level>",
        encoding="utf-8",
    )
    text = world.read_text(encoding="utf-8")
    world.write_text(
        text.replace("</Levels>", "<Level><Path>Levels/Added.ilevel</Path></Level></Levels>"),
        encoding="utf-8",
    )
    after = build(build_file).outputs["cooklist"]
    assert "Levels/Added.ilevel" in after.cooked and "Levels/Added.ilevel" not in before.cooked
