"""The cook list for people: `cooklist --format text` and `why` name assets as people know them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from messiah_projects import Item, guid, write_level, write_repository, write_world  # noqa: E402

from orchestrator.shell.cli import main  # noqa: E402
from stages.cooklist.closure import compute_cooklist  # noqa: E402
from stages.cooklist.explain import (  # noqa: E402
    cooklist_text,
    display_name,
    namer,
    why,
    why_text,
)
from stages.sources.base import LEVEL, RESOURCE, WORLD, Asset  # noqa: E402
from stages.sources.messiah.reader import collect_project  # noqa: E402

A, B, C, D, E, GHOST = (guid(n) for n in (1, 2, 3, 4, 5, 77))
HERO, MAT, SHAPE = (f"Chars/{n}" for n in ("hero", "hero_mat", "hero_shape"))


def shown(virtual_path: str, type_: str, asset_id: str) -> str:
    return f"{virtual_path} ({type_}) {asset_id}"


def asset(asset_id, kind=RESOURCE, type_="Material", paths=(), folders=()) -> Asset:
    return Asset(asset_id, kind, type_, tuple(paths), tuple(folders), ("f",), ())


@pytest.mark.parametrize(
    "given,expected",
    [
        (asset(A, paths=["Chars/hero_mat"]), f"Chars/hero_mat (Material) {A}"),
        (
            asset(A, type_="Texture", paths=["Props/Crate", "Props/Crate_copy"]),
            f"Props/Crate | Props/Crate_copy (Texture) {A}",
        ),
        (asset(A, type_="Texture", folders=[f"Repo/P/{A}"]), f"Repo/P/{A} (Texture)"),
        (asset(A, type_="", folders=[f"Repo/P/{A}"]), f"Repo/P/{A}"),
        (asset(A, type_=""), A),
        (asset("Worlds/Town.iworld", WORLD, "World", ["Worlds/Town.iworld"]), "Worlds/Town.iworld"),
        (asset("Levels/T.ilevel", LEVEL, "Level", ["Levels/T.ilevel"]), "Levels/T.ilevel"),
        # a source whose ids are paths (Unity): the path, with the type, not twice
        (asset("Assets/M/red.mat", paths=["Assets/M/red.mat"]), "Assets/M/red.mat (Material)"),
        (
            asset("Assets/Scenes/Main.unity", WORLD, "Scene", ["Assets/Scenes/Main.unity"]),
            "Assets/Scenes/Main.unity",
        ),
        # a source whose ids are not paths (uuids): the path, the type, then the id
        (
            asset("3f2a", paths=["db://assets/hero.prefab"], type_="cc.Prefab"),
            "db://assets/hero.prefab (cc.Prefab) 3f2a",
        ),
    ],
)
def test_display_name_comes_from_the_assets_own_fields(given, expected):
    """A resource shows its virtual path(s), type and id; a world or level its path."""
    assert display_name(given) == expected


def test_namer_shows_unknown_ids_as_they_are():
    """An id with no asset (a missing reference, a build-file name) is shown unchanged."""
    name = namer({A: asset(A, paths=["P/a"])})
    assert name(A) == f"P/a (Material) {A}" and name(GHOST) == GHOST


def town(root: Path) -> dict[str, Asset]:
    """World → level → hero (Model) → material (hard) → shape (soft, an Anno); the hero's
    Deps also name a GUID with no item; the level places a Dev/ resource (never cooked)."""
    write_repository(
        root,
        "Repo",
        [
            Item(A, "hero", "Chars", type="Model", deps=(B, GHOST)),
            Item(B, "hero_mat", "Chars", annos=(("CollisionShape", C),)),
            Item(C, "hero_shape", "Chars", type="Mesh"),
            Item(D, "probe", "Dev", type="Model"),
            Item(E, "lonely", "Misc", type="Sound"),
        ],
    )
    write_world(root, "Worlds/W.iworld", ["Levels/L.ilevel"])
    write_level(root, "Levels/L.ilevel", [A, D])
    return collect_project(str(root)).assets


COOK = {"maps": ["Worlds/W.iworld"], "never_cook": ["Dev/"]}


def test_cooklist_text_names_assets_and_their_chains(tmp_path):
    """Cooked assets, missing and never_cook references show virtual path, type and GUID,
    worlds and levels their paths, along every chain."""
    assets = town(tmp_path)
    text = cooklist_text(compute_cooklist(assets, COOK), assets)
    hero, mat, shape = shown(HERO, "Model", A), shown(MAT, "Material", B), shown(SHAPE, "Mesh", C)
    start = "Worlds/W.iworld > Levels/L.ilevel"
    assert text.startswith("cooked (5):\n  Worlds/W.iworld  (root from maps)\n")
    assert "  Levels/L.ilevel  <- Worlds/W.iworld\n" in text
    assert f"  {shape}  <- {start} > {hero} > {mat}\n" in text
    assert f"  {GHOST}: no repository item; chain {start} > {hero}\n" in text
    probe = shown("Dev/probe", "Model", D)
    assert f"  {probe}: never_cook Dev/; chain {start}\n" in text


def test_cooklist_text_names_cycle_members_and_soft_references(tmp_path):
    """Cycles read the same way; a soft reference's label follows its chain."""
    write_repository(
        tmp_path,
        "Repo",
        [
            Item(A, "a", "P", deps=(B,)),
            Item(B, "b", "P", deps=(A,), annos=(("CollisionShape", GHOST),)),
        ],
    )
    assets = collect_project(str(tmp_path)).assets
    text = cooklist_text(compute_cooklist(assets, {"startup": [A]}), assets)
    a, b = shown("P/a", "Material", A), shown("P/b", "Material", B)
    assert f"cycles (1):\n  {a} > {b} > {a}\n" in text
    assert f"  {GHOST}: no repository item; chain {a} > {b} (soft: CollisionShape)\n" in text


def test_why_text_names_the_asset_and_its_chain(tmp_path):
    """`why` shows the asset and each link of its chain by name, and keeps ids in its data."""
    assets = town(tmp_path)
    cooklist = compute_cooklist(assets, COOK)
    name = namer(assets)
    (answer,) = why(assets, cooklist, SHAPE, COOK, name)
    assert answer.chain == ("Worlds/W.iworld", "Levels/L.ilevel", A, B, C)
    hero, mat, shape = shown(HERO, "Model", A), shown(MAT, "Material", B), shown(SHAPE, "Mesh", C)
    assert why_text([answer], name) == (
        f"{shape}: cooked: Worlds/W.iworld > Levels/L.ilevel > {hero} > {mat} > {shape} "
        "(root from maps)\n"
    )
    (missing,) = why(assets, cooklist, GHOST, COOK, name)
    assert why_text([missing], name) == (
        f"{GHOST}: missing: no repository item; chain Worlds/W.iworld > Levels/L.ilevel > {hero}\n"
    )
    (never,) = why(assets, cooklist, "Dev/probe", COOK, name)
    probe = shown("Dev/probe", "Model", D)
    assert why_text([never], name) == (
        f"{probe}: not cooked: never_cook Dev/; chain Worlds/W.iworld > Levels/L.ilevel\n"
    )
    (lonely,) = why(assets, cooklist, E, COOK, name)
    assert why_text([lonely], name) == (
        f"{shown('Misc/lonely', 'Sound', E)}: not cooked: unreachable (no root references it)\n"
    )


def run_cli(*args: str) -> int:
    with pytest.raises(SystemExit) as stop:
        main(list(args))
    return stop.value.code


@pytest.fixture
def build(tmp_path) -> Path:
    town(tmp_path / "project")
    path = tmp_path / "build.yaml"
    path.write_text(
        "project: project\ncook:\n  maps: [Worlds/W.iworld]\n  never_cook: [Dev/]\n"
        "executor:\n  kind: local\n",
        encoding="utf-8",
    )
    return path


def test_cooklist_and_why_commands_print_names(build, capsys):
    """`orchestrate cooklist --format text` and `orchestrate why` print names, chains included."""
    hero, mat = shown(HERO, "Model", A), shown(MAT, "Material", B)
    assert run_cli("cooklist", str(build)) == 0
    out = capsys.readouterr().out
    assert f"  {mat}  <- Worlds/W.iworld > Levels/L.ilevel > {hero}\n" in out
    assert run_cli("why", str(build), MAT) == 0
    assert capsys.readouterr().out == (
        f"{mat}: cooked: Worlds/W.iworld > Levels/L.ilevel > {hero} > {mat} (root from maps)\n"
    )


def test_cooklist_json_keeps_ids(build, capsys):
    """The JSON cook list is for machines: ids and the reasons exactly as before."""
    assert run_cli("cooklist", str(build), "--format", "json") == 0
    document = json.loads(capsys.readouterr().out)
    assert document["cooked"] == ["Worlds/W.iworld", "Levels/L.ilevel", A, B, C]
    assert document["chains"][B] == ["Worlds/W.iworld", "Levels/L.ilevel", A, B]
    assert document["missing"] == {
        GHOST: f"no repository item; chain Worlds/W.iworld > Levels/L.ilevel > {A}"
    }
    assert document["never_cook_refs"] == {
        D: "never_cook Dev/; chain Worlds/W.iworld > Levels/L.ilevel"
    }
