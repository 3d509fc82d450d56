"""Cook roots, the dependency closure, its reports, `why`, and the graph exports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from messiah_projects import Item, guid, write_level, write_repository, write_world  # noqa: E402

from orchestrator.keyed import Keyed  # noqa: E402
from stages import dependency  # noqa: E402
from stages.algorithms.globs import glob_regex  # noqa: E402
from stages.cooklist.closure import compute_cooklist, find_cycles  # noqa: E402
from stages.cooklist.explain import cooklist_text, graph_dot, graph_json, why  # noqa: E402
from stages.sources.messiah.reader import collect_project  # noqa: E402

A, B, C, D, E, F = (guid(n) for n in range(1, 7))


def town(tmp_path, extra_items=(), level_guids=(A,)):
    """World W → level L → A → B (hard) → C (soft, anno); plus extra items."""
    items = [
        Item(A, "a", "Props", deps=(B,)),
        Item(B, "b", "Props", annos=(("CollisionShape", C),)),
        Item(C, "c", "Props"),
        *extra_items,
    ]
    write_repository(tmp_path, "Repo", items)
    write_world(tmp_path, "Worlds/W.iworld", ["Levels/L.ilevel"])
    write_level(tmp_path, "Levels/L.ilevel", list(level_guids))
    return collect_project(str(tmp_path)).assets


def test_maps_root_follows_world_level_hard_and_soft_references(tmp_path):
    """A map root cooks its levels and everything reachable, each with its BFS chain."""
    assets = town(tmp_path, [Item(D, "d", "Unused")])
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"]})
    assert cooklist.cooked == ["Worlds/W.iworld", "Levels/L.ilevel", A, B, C]
    assert cooklist.chains[C] == ("Worlds/W.iworld", "Levels/L.ilevel", A, B, C)
    assert D not in cooklist.cooked and cooklist.roots["maps"] == ["Worlds/W.iworld"]


def test_follow_soft_references_false_stops_at_soft_edges(tmp_path):
    """Without soft references the Anno target is not cooked."""
    assets = town(tmp_path)
    cooklist = compute_cooklist(
        assets, {"maps": ["Worlds/W.iworld"], "follow_soft_references": False}
    )
    assert C not in cooklist.cooked and B in cooklist.cooked


def test_startup_accepts_guid_and_virtual_path_and_reports_unknown(tmp_path):
    """Startup roots resolve by GUID or Package/Name; a name matching nothing is missing."""
    assets = town(tmp_path, [Item(D, "d", "Game"), Item(E, "e", "Game")])
    cooklist = compute_cooklist(assets, {"startup": [D, "Game/e", "Game/nothing"]})
    assert cooklist.roots["startup"] == [D, E]
    assert cooklist.cooked == [D, E]
    assert "Game/nothing" in cooklist.missing


def test_always_cook_prefix_matches_virtual_path_or_folder(tmp_path):
    """always_cook takes assets whose Package/Name or project folder starts with the prefix."""
    assets = town(tmp_path, [Item(D, "icon", "UI/Icons"), Item(E, "font", "Fonts")])
    by_package = compute_cooklist(assets, {"always_cook": ["UI/"]})
    assert by_package.cooked == [D]
    by_folder = compute_cooklist(assets, {"always_cook": ["Repo/Fonts/"]})
    assert by_folder.cooked == [E]


def test_never_cook_wins_and_its_references_are_reported_with_chain(tmp_path):
    """A reference into never_cook is neither cooked nor traversed, and reported with its chain."""
    assets = town(
        tmp_path,
        [Item(D, "dbg", "Dev/Debug", deps=(E,)), Item(E, "e", "Props")],
        level_guids=(A, D),
    )
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"], "never_cook": ["Dev/"]})
    assert D not in cooklist.cooked and E not in cooklist.cooked
    reason = cooklist.never_cook_refs[D]
    assert "never_cook Dev/" in reason and "Worlds/W.iworld > Levels/L.ilevel" in reason
    root_excluded = compute_cooklist(assets, {"always_cook": ["Dev/"], "never_cook": ["Dev/"]})
    assert root_excluded.cooked == [] and "cook.always_cook" in root_excluded.never_cook_refs[D]


def test_editor_content_is_excluded_unless_included(tmp_path):
    """An Editor* path segment keeps an asset out of the cook unless include_editor_content."""
    assets = town(tmp_path, [Item(D, "gizmo", "EditorOnly/Gizmos")], level_guids=(A, D))
    cook = {"maps": ["Worlds/W.iworld"]}
    excluded = compute_cooklist(assets, cook)
    assert D not in excluded.cooked and "editor content" in excluded.never_cook_refs[D]
    included = compute_cooklist(assets, {**cook, "include_editor_content": True})
    assert D in included.cooked


def test_cultures_root_only_listed_l10n_variants(tmp_path):
    """Assets below L10N/<culture>/ are roots only for listed cultures."""
    assets = town(tmp_path, [Item(D, "t", "UI/L10N/zh-Hans/Text"), Item(E, "t", "UI/L10N/en/Text")])
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"], "cultures": ["zh-Hans"]})
    assert D in cooklist.cooked and E not in cooklist.cooked
    (answer,) = why(assets, cooklist, E, {"cultures": ["zh-Hans"]})
    assert not answer.cooked and "culture en" in answer.reason


def test_no_roots_falls_back_to_everything_but_editor_and_l10n(tmp_path):
    """With no roots, every asset is cooked except editor content and L10N/ variants."""
    assets = town(
        tmp_path,
        [Item(D, "g", "Editor/Tools"), Item(E, "t", "L10N/en/Text"), Item(F, "lonely", "Misc")],
    )
    cooklist = compute_cooklist(assets, {})
    assert set(cooklist.cooked) == {"Worlds/W.iworld", "Levels/L.ilevel", A, B, C, F}
    assert cooklist.roots["all"][:2] == ["Worlds/W.iworld", "Levels/L.ilevel"]
    with_culture = compute_cooklist(assets, {"cultures": ["en"]})
    assert E in with_culture.cooked and F in with_culture.cooked


def test_layout_named_assets_are_roots_after_the_cook_roots(tmp_path):
    """An asset named by a layout include glob is cooked; one already reached keeps its chain."""
    assets = town(tmp_path, [Item(D, "icon", "UI/Icons")])
    bundles = {
        "layout": [
            {"name": "ui", "include": ["UI/**"]},
            {"name": "props", "include": ["Props/*"], "exclude": ["Props/c"]},
        ]
    }
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"]}, bundles)
    assert cooklist.roots["layout"] == [D, A, B]
    assert cooklist.cooked[-1] == D and cooklist.chains[D] == (D,)
    assert cooklist.chains[B] == ("Worlds/W.iworld", "Levels/L.ilevel", A, B)


def test_maps_all_layout_names_worlds_and_levels(tmp_path):
    """`maps: all` names each cook.maps world and its levels."""
    assets = town(tmp_path)
    cooklist = compute_cooklist(
        assets, {"maps": ["Worlds/W.iworld"]}, {"layout": [{"name": "maps/{stem}", "maps": "all"}]}
    )
    assert cooklist.roots["layout"] == ["Worlds/W.iworld", "Levels/L.ilevel"]


def test_missing_references_are_reported_once_with_chain_and_can_fail(tmp_path):
    """No item, or an item without folder, is missing once, with the referrer's chain;
    fail_on_missing sets the failure the CLI turns into exit 1."""
    ghost = guid(77)
    assets = town(
        tmp_path, [Item(D, "nofolder", "Props", folder=False)], level_guids=(A, ghost, D, ghost)
    )
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"]})
    assert cooklist.missing[ghost] == "no repository item; chain Worlds/W.iworld > Levels/L.ilevel"
    assert cooklist.missing[D].startswith("repository item without a resource folder; chain")
    assert cooklist.failure == ""
    failing = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"], "fail_on_missing": True})
    assert failing.failure and failing.to_json()["failure"]
    (answer,) = why(assets, cooklist, ghost)
    assert answer.reason.startswith("missing: no repository item")


def test_cycles_are_cooked_and_reported_once(tmp_path):
    """A → B → A is legal: both cooked, the cycle reported once starting at the first reached."""
    write_repository(
        tmp_path,
        "Repo",
        [Item(A, "a", "P", deps=(B,)), Item(B, "b", "P", deps=(A,)), Item(C, "c", "P", deps=(C,))],
    )
    assets = collect_project(str(tmp_path)).assets
    cooklist = compute_cooklist(assets, {"startup": [A, C]})
    assert set(cooklist.cooked) == {A, B, C}
    assert cooklist.cycles == [[A, B], [C]]


def test_duplicates_are_one_asset_reported_ambiguous(tmp_path):
    """A GUID in two repositories is cooked once, matched by every item's path, and ambiguous."""
    write_repository(tmp_path, "Repository", [Item(A, "x", "Art")])
    write_repository(tmp_path, "CommonRepository", [Item(A, "x", "UI/Common")])
    assets = collect_project(str(tmp_path)).assets
    cooklist = compute_cooklist(assets, {"always_cook": ["UI/"]})
    assert cooklist.cooked == [A]
    assert "CommonRepository/UI/Common/" + A in cooklist.ambiguous[A]


def test_why_by_virtual_path_and_folder_and_unreachable(tmp_path):
    """`why` accepts a virtual path or a project-relative path and explains unreachability."""
    assets = town(tmp_path, [Item(D, "d", "Misc")])
    write_level(tmp_path, "Levels/Spare.ilevel", [])
    assets = collect_project(str(tmp_path)).assets
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"]})
    (answer,) = why(assets, cooklist, "Props/b")
    assert answer.cooked and answer.chain == ("Worlds/W.iworld", "Levels/L.ilevel", A, B)
    (answer,) = why(assets, cooklist, f"Repo/Misc/{D}")
    assert not answer.cooked and "unreachable" in answer.reason
    (answer,) = why(assets, cooklist, "Levels/Spare.ilevel")
    assert "no cooked world uses it" in answer.reason
    (answer,) = why(assets, cooklist, "Dev/never")
    assert "not found" in answer.reason


def test_graph_exports_and_text(tmp_path):
    """DOT and JSON exports hold every node and typed edge; soft edges are dashed."""
    assets = town(tmp_path)
    cooklist = compute_cooklist(assets, {"maps": ["Worlds/W.iworld"]})
    graph = graph_json(assets, cooklist)
    assert {"from": B, "to": C, "strength": "soft", "label": "CollisionShape"} in graph["edges"]
    assert all(n["cooked"] for n in graph["nodes"])
    json.dumps(graph)
    dot = graph_dot(assets, cooklist)
    assert (
        dot.startswith("digraph")
        and f'"{B}" -> "{C}" [label="CollisionShape", style=dashed]' in dot
    )
    a, b, c = (f"Props/{n} (Material) {g}" for n, g in (("a", A), ("b", B), ("c", C)))
    text = cooklist_text(cooklist, assets)
    assert f"  {c}  <- Worlds/W.iworld > Levels/L.ilevel > {a} > {b}\n" in text
    assert "  Worlds/W.iworld  (root from maps)\n" in text


def test_glob_semantics():
    """`**` crosses folders, `*` stays within one name."""
    import re

    assert re.fullmatch(glob_regex("UI/**"), "UI/Icons/a")
    assert re.fullmatch(glob_regex("Props/*"), "Props/a")
    assert not re.fullmatch(glob_regex("Props/*"), "Props/x/a")
    assert re.fullmatch(glob_regex("**/a"), "a")


def test_dependency_stage_plans_one_unit_and_publishes_the_report(tmp_path):
    """The dependency stage runs the closure from the build file sections and publishes JSON."""
    assets = town(tmp_path)
    source = collect_project(str(tmp_path))
    sections = {
        "cook": {"maps": ["Worlds/W.iworld"], "cookers": {}, "fail_on_missing": True},
        "bundles": {"layout": [], "shared_dependencies": "extract"},
    }
    from orchestrator.testing import run_stage

    run = run_stage(
        dependency,
        project=tmp_path,
        settings=sections,
        inputs={"source": source.info(), "assets": Keyed("assets", memory=source.assets)},
    )
    (unit,) = run.plan.units
    assert unit.key["facts"]  # what the cook list sees of the assets (patching.py)
    document = json.loads(run.published["reports/cooklist.json"])
    assert document["cooked"] == ["Worlds/W.iworld", "Levels/L.ilevel", A, B, C]
    assert document["failure"] == "" and set(assets) == set(source.assets)


def test_source_defined_roots_follow_maps_and_disable_the_fallback(tmp_path):
    """A source's own roots (Unity's build scenes) are cooked right after maps; no fallback."""
    assets = town(tmp_path, [Item(D, "d", "Misc")])
    cooklist = compute_cooklist(assets, {"startup": [D]}, source_roots={"scenes": [B]})
    assert list(cooklist.roots)[:3] == ["maps", "source:scenes", "startup"]
    assert cooklist.cooked == [B, D, C]


def test_find_cycles_asks_each_node_for_its_edges_once():
    """A loop to itself, a cycle of three and a chain: one cycle each, in discovery order, with
    each node's edges asked for once (Tarjan and the lone node's loop test share them)."""
    graph = {"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": ["d"], "e": ["a"], "f": []}
    asked: list[str] = []

    def edges(node: str) -> list[str]:
        asked.append(node)
        return graph[node]

    assert find_cycles(["e", "a", "b", "c", "d", "f"], edges) == [["a", "b", "c"], ["d"]]
    assert sorted(asked) == sorted(graph)
