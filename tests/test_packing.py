"""Packing: explicit and implicit assets, extract vs duplicate, default bundle, conflicts, cycles."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.hashing import digest_bytes
from stages.algorithms.globs import glob_match
from stages.layout.packing import bundle_cycles, check_bundle_name, pack, shared_bundle_name
from stages.sources.base import HARD, LEVEL, RESOURCE, SOFT, WORLD, Asset, Ref

DEMO = Path(__file__).resolve().parents[2] / "shared" / "examples" / "demo"


def res(guid: str, package: str, name: str, refs=(), type_="Material") -> Asset:
    folder = f"Repo/{package}/{guid}"
    return Asset(
        guid,
        RESOURCE,
        type_,
        (f"{package}/{name}",),
        (folder,),
        (f"{folder}/resource.xml",),
        tuple(refs),
        package,
        name,
    )


def world(path: str, levels) -> Asset:
    return Asset(
        path,
        WORLD,
        "World",
        (path,),
        (path.rsplit("/", 1)[0],),
        (path,),
        tuple(Ref(lv, HARD, "level") for lv in levels),
        "",
        path.rsplit("/", 1)[1],
    )


def level(path: str, guids) -> Asset:
    return Asset(
        path,
        LEVEL,
        "Level",
        (path,),
        (path.rsplit("/", 1)[0],),
        (path,),
        tuple(Ref(g, HARD, "placed") for g in guids),
        "",
        path.rsplit("/", 1)[1],
    )


def hard(*targets):
    return [Ref(t, HARD, "Deps") for t in targets]


def shop_project():
    """Two worlds share a wall (which needs a texture); each has a prop of its own; a UI icon;
    an always-cooked font nobody references."""
    return [
        world("Worlds/A.iworld", ["Levels/A1.ilevel"]),
        world("Worlds/B.iworld", ["Levels/B1.ilevel"]),
        level("Levels/A1.ilevel", ["wall", "prop_a"]),
        level("Levels/B1.ilevel", ["wall", "prop_b"]),
        res("wall", "Env", "Wall", hard("tex")),
        res("prop_a", "Props", "PropA"),
        res("prop_b", "Props", "PropB", hard("icon")),
        res("tex", "Env", "WallTex", type_="Texture"),
        res("icon", "UI/Icons", "Icon", type_="Texture"),
        res("font", "Fonts", "Main"),
    ]


LAYOUT = [{"name": "maps/{stem}", "maps": "all"}, {"name": "ui", "include": ["UI/**"]}]
MAPS = ["Worlds/A.iworld", "Worlds/B.iworld"]


def test_extract_moves_shared_implicit_assets_to_one_shared_bundle():
    """With extract, the wall and its texture (used by both maps) live once, in shared/<hash>."""
    packing = pack(shop_project(), LAYOUT, MAPS, "extract")
    shared = shared_bundle_name(["maps/A", "maps/B"])
    assert shared == "shared/" + digest_bytes(b"maps/A\nmaps/B")[:16]
    assert set(packing.bundles) == {"maps/A", "maps/B", "ui", shared, "default"}
    assert packing.bundles[shared].implicit == ("wall", "tex")
    assert packing.bundles[shared].used_by == ("maps/A", "maps/B")
    assert packing.bundles["maps/A"].explicit == ("Worlds/A.iworld", "Levels/A1.ilevel")
    assert packing.bundles["maps/A"].implicit == ("prop_a",)
    assert packing.bundles["maps/B"].implicit == ("prop_b",)
    assert packing.bundles["maps/A"].dependencies == (shared,)
    assert packing.bundles["maps/B"].dependencies == (shared, "ui")  # prop_b uses the icon
    assert packing.bundles[shared].reverse_dependencies == ("maps/A", "maps/B")
    assert packing.bundles["ui"].reverse_dependencies == ("maps/B",)
    assert packing.asset_bundles["wall"] == (shared,)


def test_duplicate_copies_shared_implicit_assets_into_each_user():
    """With duplicate, each map bundle holds its own copy and no shared bundle exists."""
    packing = pack(shop_project(), LAYOUT, MAPS, "duplicate")
    assert not any(name.startswith("shared/") for name in packing.bundles)
    assert packing.bundles["maps/A"].implicit == ("wall", "prop_a", "tex")
    assert packing.bundles["maps/B"].implicit == ("wall", "prop_b", "tex")
    assert packing.asset_bundles["tex"] == ("maps/A", "maps/B")
    # A copy the bundle holds itself is no dependency; the explicit icon still is.
    assert packing.bundles["maps/A"].dependencies == ()
    assert packing.bundles["maps/B"].dependencies == ("ui",)
    assert packing.cycles == []


def test_unclaimed_cooked_assets_go_to_default():
    """The font no rule names and no bundle reaches is packed into `default`."""
    packing = pack(shop_project(), LAYOUT, MAPS, "extract")
    assert packing.bundles["default"].assets == ("font",)
    assert packing.bundles["default"].kind == "default"


def test_default_bundle_duplicate_copies_what_it_reaches():
    """With duplicate, an unclaimed asset's implicit dependency is copied into default too."""
    assets = shop_project() + [res("loose", "Misc", "Loose", hard("tex"))]
    dup = pack(assets, LAYOUT, MAPS, "duplicate")
    assert dup.bundles["default"].assets == ("tex", "font", "loose")  # cook-list order
    ext = pack(assets, LAYOUT, MAPS, "extract")
    assert ext.bundles["default"].assets == ("font", "loose")
    assert ext.bundles["default"].dependencies == (shared_bundle_name(["maps/A", "maps/B"]),)


def test_soft_references_followed_only_when_asked():
    """A soft reference pulls its target in only with follow_soft_references."""
    assets = [
        world("Worlds/A.iworld", ["Levels/A1.ilevel"]),
        level("Levels/A1.ilevel", ["m"]),
        res("m", "Env", "M", [Ref("t", SOFT, "attribute file")]),
        res("t", "Env", "T"),
    ]
    layout = [{"name": "maps/{stem}", "maps": "all"}]
    assert pack(assets, layout, ["Worlds/A.iworld"], follow_soft=True).bundles[
        "maps/A"
    ].implicit == ("m", "t")
    unfollowed = pack(assets, layout, ["Worlds/A.iworld"], follow_soft=False)
    assert unfollowed.bundles["maps/A"].implicit == ("m",)
    assert unfollowed.bundles["default"].assets == ("t",)


def test_include_exclude_globs_and_package_template():
    """Globs match virtual or project-relative paths; {package} keeps slashes."""
    assets = [
        res("h", "Characters/Hero", "Hero"),
        res("n", "Characters/Npc", "Npc"),
        res("d", "Characters/Npc", "Npc_debug"),
        res("x", "Props", "Barrel"),
    ]
    layout = [
        {"name": "chars/{package}", "include": ["Characters/**"], "exclude": ["**/*_debug"]},
        {"name": "props", "include": ["Repo/Props/*"]},
    ]  # a project-relative folder
    packing = pack(assets, layout, [])
    assert packing.bundles["chars/Characters/Hero"].explicit == ("h",)
    assert packing.bundles["chars/Characters/Npc"].explicit == ("n",)
    assert packing.bundles["props"].explicit == ("x",)
    assert packing.bundles["default"].assets == ("d",)


def test_asset_named_by_two_rules_is_an_error_naming_both():
    """Two rules claiming the icon fail with both rules in the message."""
    layout = LAYOUT + [{"name": "icons", "include": ["**/Icon"]}]
    with pytest.raises(ConfigError) as err:
        pack(shop_project(), layout, MAPS)
    assert "bundles.layout[1]" in str(err.value) and "bundles.layout[2]" in str(err.value)
    assert "'ui'" in str(err.value) and "'icons'" in str(err.value)


def test_level_shared_by_two_worlds_stays_with_the_first():
    """A level both worlds use is explicit in the first world's bundle; the other depends on it."""
    assets = [
        world("Worlds/A.iworld", ["Levels/C.ilevel"]),
        world("Worlds/B.iworld", ["Levels/C.ilevel"]),
        level("Levels/C.ilevel", []),
    ]
    packing = pack(assets, [{"name": "maps/{stem}", "maps": "all"}], MAPS)
    assert packing.bundles["maps/A"].explicit == ("Worlds/A.iworld", "Levels/C.ilevel")
    assert packing.bundles["maps/B"].dependencies == ("maps/A",)


@pytest.mark.parametrize(
    "name",
    [
        "../evil",
        "a/../../b",
        "/abs",
        "a\\b",
        "C:/x",
        "c:evil",
        "a//b",
        "./a",
        "",
        "manifest.json",
        "reports/x",
    ],
)
def test_unsafe_bundle_names_are_config_errors(name):
    """Names that could escape the output folder (or hit the loose files) are refused."""
    with pytest.raises(ConfigError):
        check_bundle_name(name)


def test_unsafe_name_from_template_is_refused():
    """A Package with `..` expanded by {package} is caught too."""
    with pytest.raises(ConfigError, match="unsafe bundle name"):
        pack([res("a", "../../etc", "A")], [{"name": "{package}", "include": ["**"]}], [])


def test_unknown_template_field_is_refused():
    with pytest.raises(ConfigError, match="guid"):
        pack(shop_project(), [{"name": "x/{guid}", "include": ["**"]}], [])


def test_bundle_that_is_another_bundles_folder_is_refused():
    """Bundles `ui` and `ui/icons` cannot both be files."""
    layout = [{"name": "ui", "include": ["Fonts/**"]}, {"name": "ui/icons", "include": ["UI/**"]}]
    with pytest.raises(ConfigError, match="folder"):
        pack(shop_project(), layout, [])


def test_bundle_cycles_are_reported():
    """Two bundles whose explicit assets reference each other form a reported cycle."""
    assets = [res("a", "A", "A", hard("b")), res("b", "B", "B", hard("a")), res("c", "C", "C")]
    layout = [
        {"name": "one", "include": ["A/**"]},
        {"name": "two", "include": ["B/**"]},
        {"name": "three", "include": ["C/**"]},
    ]
    packing = pack(assets, layout, [])
    assert packing.cycles == [("one", "two")]
    assert packing.bundles["one"].dependencies == ("two",)
    assert packing.bundles["one"].reverse_dependencies == ("two",)
    assert bundle_cycles({"x": ["y"], "y": ["z"], "z": ["x"], "w": []}) == [("x", "y", "z")]


def test_packing_is_deterministic():
    """Same inputs, same bundles; reference order inside the graph does not change membership."""
    first = pack(shop_project(), LAYOUT, MAPS)
    second = pack(shop_project(), LAYOUT, MAPS)
    assert first == second
    assert list(first.bundles) == sorted(first.bundles)


@pytest.mark.parametrize(
    "pattern,path,matches",
    [
        ("UI/**", "UI/Icons/Icon", True),
        ("UI/**", "UI", False),
        ("UI/**", "XUI/a", False),
        ("**/Icon", "Icon", True),
        ("**/Icon", "UI/Icons/Icon", True),
        ("UI/*", "UI/Icons/Icon", False),
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/y/b", True),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),
        ("*.iworld", "Worlds/A.iworld", False),
        ("**/*.iworld", "Worlds/A.iworld", True),
        ("[ab]x", "bx", True),
        ("[!ab]x", "cx", True),
        ("[!ab]x", "ax", False),
    ],
)
def test_glob_double_star_semantics(pattern, path, matches):
    assert glob_match(pattern, path) is matches


# -- the demo: shared/examples/demo/expected/bundles.json -------------------------------------
def _demo_packing(policy):
    closure = pytest.importorskip(
        "stages.cooklist.closure", reason="the dependency closure is not built"
    )
    messiah = pytest.importorskip(
        "stages.sources.messiah.reader", reason="the Messiah source is not built"
    )
    build = yaml.safe_load((DEMO / "build.yaml").read_text(encoding="utf-8"))
    source = messiah.collect_project(str(DEMO / build["project"]))
    cooklist = closure.compute_cooklist(source.assets, build["cook"], build["bundles"])
    return pack(
        [source.assets[a] for a in cooklist.cooked],
        build["bundles"]["layout"],
        build["cook"]["maps"],
        policy,
        build["cook"]["follow_soft_references"],
    )


SHOP_RESOURCES = ("wall", "prop_a", "prop_b", "tex", "icon", "font")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    left_out=st.sets(st.sampled_from(SHOP_RESOURCES)),
    policy=st.sampled_from(["extract", "duplicate", "priority"]),
)
def test_what_no_bundle_may_hold_packs_as_if_it_were_absent(left_out, policy):
    """Assets no bundle may hold (`not_bundled`) are in no bundle and the rest packs exactly as
    without them; each rule naming one says so (`not_bundled`, the file and the bundle)."""
    reasons = dict.fromkeys(left_out, "never bundled here")
    packing = pack(shop_project(), LAYOUT, MAPS, policy, not_bundled=reasons)
    without = pack([a for a in shop_project() if a.id not in left_out], LAYOUT, MAPS, policy)
    assert packing.bundles == without.bundles
    assert {a: b for a, b in packing.asset_bundles.items() if a not in left_out} == (
        without.asset_bundles
    )
    assert all(packing.asset_bundles[a] == () for a in left_out)
    named = {"icon"} & left_out  # the `ui` rule (UI/**) names the icon; nothing else is named
    assert [(p.kind, p.file) for p in packing.problems] == [
        ("not_bundled", "Repo/UI/Icons/icon/resource.xml") for _ in named
    ]
    assert all("'ui'" in p.message and "bundles.layout[1]" in p.message for p in packing.problems)


def _normalized(bundles: dict) -> dict:
    """Bundle → (explicit, implicit, dependencies) as sets, shared/<hex> written `shared/*`."""

    def star(name):
        return "shared/*" if name.startswith("shared/") else name

    return {
        star(name): (set(b["explicit"]), set(b["implicit"]), {star(d) for d in b["dependencies"]})
        for name, b in bundles.items()
    }


@pytest.mark.shared
@pytest.mark.skipif(not DEMO.is_dir(), reason=f"shared demo not found at {DEMO}")
@pytest.mark.parametrize("policy", ["extract", "duplicate"])
def test_demo_bundles_match_expected(policy):
    """The demo packs exactly as the hand-derived bundles.json says, for both policies."""
    expected = json.loads((DEMO / "expected" / "bundles.json").read_text(encoding="utf-8"))[policy]
    packing = _demo_packing(policy)
    got = {
        name: {"explicit": b.explicit, "implicit": b.implicit, "dependencies": b.dependencies}
        for name, b in packing.bundles.items()
    }
    assert _normalized(got) == _normalized(expected)
    if policy == "extract":
        (shared,) = [b for b in packing.bundles.values() if b.kind == "shared"]
        assert list(shared.used_by) == expected["shared/*"]["used_by"]
        assert shared.name == shared_bundle_name(shared.used_by)


@pytest.mark.shared
@pytest.mark.skipif(not DEMO.is_dir(), reason=f"shared demo not found at {DEMO}")
def test_demo_packing_ignores_cook_order_for_membership():
    """Shuffling the cooked assets changes no bundle's membership or dependencies."""
    packing = _demo_packing("extract")
    closure = pytest.importorskip("stages.cooklist.closure")
    messiah = pytest.importorskip("stages.sources.messiah.reader")
    build = yaml.safe_load((DEMO / "build.yaml").read_text(encoding="utf-8"))
    source = messiah.collect_project(str(DEMO / build["project"]))
    cooked = [
        source.assets[a]
        for a in closure.compute_cooklist(source.assets, build["cook"], build["bundles"]).cooked
    ]
    random.Random(7).shuffle(cooked)
    shuffled = pack(cooked, build["bundles"]["layout"], build["cook"]["maps"], "extract")
    assert {n: (set(b.assets), b.dependencies) for n, b in shuffled.bundles.items()} == {
        n: (set(b.assets), b.dependencies) for n, b in packing.bundles.items()
    }
