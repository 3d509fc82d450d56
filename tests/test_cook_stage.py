"""The cook stage's units: shards of assets cooked in-process, a unit of its own for an asset
with an external cooker or a recipe; `update` plans again only the units of changed entries."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from types import SimpleNamespace

import lawkit
from buildkit import make_project

from orchestrator.core.config import load_build
from orchestrator.core.options import RunOptions
from orchestrator.core.scheduler import run_build
from orchestrator.keyed import NOTHING, Changes
from orchestrator.shell.present import setup_logging
from orchestrator.typing import Plan, StageChanges, StoredParts
from stages import cook
from stages.cooking.shards import SHARD_ASSETS, ShardMap, asset_hash, shard_id
from stages.sources.base import RESOURCE, Asset, Recipe

EXTERNAL = {"command": "texconv {input} {output}", "version": "1"}


def asset(number: int, kind: str = "Mesh") -> Asset:
    folder = f"Repo/guid-{number:04}"
    return Asset(
        f"guid-{number:04}",
        RESOURCE,
        kind,
        (f"Env/A{number}",),
        (folder,),
        (f"{folder}/resource.xml",),
        (),
        "Env",
        f"A{number}",
    )


def setup(count: int, cookers: dict | None = None, recipes: dict | None = None):
    assets = {
        a.id: a for a in (asset(i, "Texture" if i % 50 == 0 else "Mesh") for i in range(count))
    }
    ctx = SimpleNamespace(
        section=lambda name: "pc" if name == "platform" else {"cookers": cookers or {}}
    )
    inputs = {
        "assets": assets,
        "source": SimpleNamespace(recipes=recipes or {}),
        "cooklist": SimpleNamespace(cooked=list(assets)),
    }
    return ctx, inputs


def assets_of(unit) -> list[str]:
    return [job.asset_id for job in unit.payload]


def test_cheap_assets_are_cooked_in_shards_and_every_asset_in_one_unit():
    """A thousand assets with built-in cookers make a few dozen units, each holding the assets
    of one shard (sorted), each asset's key material listed in its unit's key."""
    ctx, inputs = setup(1000)
    plan = cook.plan(ctx, inputs)
    held = [a for unit in plan.units for a in assets_of(unit)]
    assert sorted(held) == sorted(inputs["cooklist"].cooked)
    assert 5 < len(plan.units) < 40
    shards = ShardMap(inputs["cooklist"].cooked)
    for unit in plan.units:
        assert unit.id.startswith("<shard ")
        assert assets_of(unit) == sorted(assets_of(unit))
        assert {shards.shard_of(a) for a in assets_of(unit)} == {unit.id}
        assert [k["asset"] for k in unit.key["assets"]] == assets_of(unit)
        assert unit.files == tuple(f for a in assets_of(unit) for f in inputs["assets"][a].files)
    assert [u.cost for u in plan.units] == sorted((u.cost for u in plan.units), reverse=True)


def test_an_external_cooker_or_a_recipe_gets_a_unit_of_its_own():
    """Assets whose cooker is a command, or that a source's recipe makes, are cooked alone (a
    process outweighs the engine's per-unit cost), weighed as a shard of in-process cooks."""
    recipe = Recipe("stages.sources.cocos.atlas:cook_page", 1, {"page": 1})
    ctx, inputs = setup(200, cookers={"Texture": EXTERNAL}, recipes={"guid-0007": recipe})
    plan = cook.plan(ctx, inputs)
    alone = {u.id for u in plan.units if not u.id.startswith("<shard ")}
    assert alone == {"guid-0000", "guid-0050", "guid-0100", "guid-0150", "guid-0007"}
    assert all(assets_of(u) == [u.id] for u in plan.units if u.id in alone)
    assert all(u.cost == SHARD_ASSETS for u in plan.units if u.id in alone)
    recipe_unit = next(u for u in plan.units if u.id == "guid-0007")
    assert recipe_unit.key["assets"][0]["cooker"]["recipe"] == recipe.cooker


def changes(plan, changed=(), removed=(), stored=None, cooklist=NOTHING) -> StageChanges:
    """What `update` hears after `plan`: asset entries changed or removed, the cook list
    changed or not; `stored` the ids of the units the state holds (those of `plan` unless
    given)."""
    return StageChanges(
        inputs={
            "assets": Changes(frozenset(changed), frozenset(removed)),
            "cooklist": cooklist,
            "source": NOTHING,
        },
        rerun=[],
        state=plan.state,
        stored_ids=lambda: list(stored) if stored is not None else [u.id for u in plan.units],
    )


def test_update_plans_again_only_the_shard_of_a_changed_entry():
    """An asset entry that changed plans its shard again, whole, naming the entry."""
    ctx, inputs = setup(1000)
    plan = cook.plan(ctx, inputs)
    assert cook.update(ctx, inputs, changes(plan)).units == []
    inputs["assets"]["guid-0123"] = dataclasses.replace(asset(123), name="Renamed")
    again = cook.update(ctx, inputs, changes(plan, ["guid-0123"]))
    (unit,) = again.units
    before = next(u for u in plan.units if "guid-0123" in assets_of(u))
    assert unit.id == before.id and assets_of(unit) == assets_of(before)
    assert again.reasons == {unit.id: "assets[guid-0123] changed"}
    assert again.removed == ()


def test_update_moves_an_asset_whose_new_type_has_an_external_cooker_out_of_its_shard():
    """A Type change that gives an asset a command cooker plans its own unit and its old shard
    without it (the shard is removed when nothing is left in it)."""
    ctx, inputs = setup(300, cookers={"Texture": EXTERNAL})
    plan = cook.plan(ctx, inputs)
    inputs["assets"]["guid-0123"] = asset(123, "Texture")
    again = cook.update(ctx, inputs, changes(plan, ["guid-0123"]))
    by_id = {u.id: u for u in again.units}
    shard = ShardMap(inputs["cooklist"].cooked).shard_of("guid-0123")
    assert assets_of(by_id["guid-0123"]) == ["guid-0123"]
    before = next(u for u in plan.units if u.id == shard)
    if len(assets_of(before)) > 1:
        assert assets_of(by_id[shard]) == [a for a in assets_of(before) if a != "guid-0123"]
    else:
        assert again.removed == (shard,)
    # and back: the asset's own unit goes, its shard holds it again
    inputs["assets"]["guid-0123"] = asset(123)
    stored = {u.id for u in plan.units} - set(again.removed) | set(by_id)
    back = cook.update(ctx, inputs, changes(plan, ["guid-0123"], stored=stored))
    assert "guid-0123" in back.removed
    assert assets_of(next(u for u in back.units if u.id == shard)) == assets_of(before)


MOVED = Changes(frozenset({""}), frozenset())  # a value that is not keyed changed


def replanned(plan, again) -> dict[str, dict]:
    """The units after an update, by id, with their keys: the update's, and the plan's it
    neither planned again nor removed."""
    units = {u.id: u.key for u in plan.units if u.id not in set(again.removed)}
    units.update((u.id, u.key) for u in again.units)
    return units


def boundary_asset(start: int) -> int:
    """The number of an asset not in the cook list whose id draws a shard boundary."""
    number = start
    while asset_hash(asset(number).id) % SHARD_ASSETS:
        number += 1
    return number


def test_assets_joining_or_leaving_the_cook_list_plan_again_only_their_shards():
    """An asset added to (or deleted from) the cook list plans again the shards its hash falls
    in, before and after (one drawing a boundary splits or joins two), and the unit of its own;
    the units then are exactly those a plan from scratch makes, and the others are not
    planned again."""
    ctx, inputs = setup(4000, cookers={"Texture": EXTERNAL})
    plan = cook.plan(ctx, inputs)
    stored = {u.id for u in plan.units}
    ctx.previous = {"cooked": dict.fromkeys(inputs["cooklist"].cooked, "d")}
    splitter = boundary_asset(4000)
    joiner = boundary_asset(splitter + 1) + 1  # not a boundary, most likely
    while not asset_hash(asset(joiner).id) % SHARD_ASSETS:
        joiner += 1
    joined = [asset(splitter), asset(joiner), asset(joiner + 50, "Texture")]
    left = ["guid-0007", "guid-0050"]  # a Mesh in a shard, a Texture alone
    edited = dict(inputs["assets"])
    for new in joined:
        edited[new.id] = new
    for gone in left:
        del edited[gone]
    after = {**inputs, "assets": edited, "cooklist": SimpleNamespace(cooked=list(edited))}
    again = cook.update(ctx, after, changes(plan, [a.id for a in joined], left, stored, MOVED))
    fresh = cook.plan(ctx, after)
    assert replanned(plan, again) == {u.id: u.key for u in fresh.units}
    assert "guid-0050" in again.removed
    assert len(again.units) <= 2 * (len(joined) + len(left)) < len(fresh.units) // 10
    shards = ShardMap(after["cooklist"].cooked)
    assert shard_id(asset_hash(asset(splitter).id)) in {u.id for u in again.units}
    reason = again.reasons[shards.shard_of("guid-0007")]
    assert "guid-0007 left the cook list" in reason
    assert again.reasons[joined[2].id] == f"{joined[2].id} joined the cook list"
    # and back: the assets leave and come back, the shards are as the first plan's
    back_ctx = SimpleNamespace(**vars(ctx))
    back_ctx.previous = {"cooked": dict.fromkeys(after["cooklist"].cooked, "d")}
    now = replanned(plan, again)
    back = cook.update(back_ctx, inputs, changes(fresh, left, [a.id for a in joined], now, MOVED))
    assert replanned(fresh, back) == {u.id: u.key for u in plan.units}


def test_a_cook_list_that_only_changed_its_order_plans_nothing():
    """The cook list changed, not its assets (a new order, new chains): no unit moves."""
    ctx, inputs = setup(100)
    plan = cook.plan(ctx, inputs)
    ctx.previous = {"cooked": dict.fromkeys(inputs["cooklist"].cooked, "d")}
    reordered = {**inputs, "cooklist": SimpleNamespace(cooked=inputs["cooklist"].cooked[::-1])}
    again = cook.update(ctx, reordered, changes(plan, cooklist=MOVED))
    assert again.units == [] and again.removed == ()


def build(build_file: Path, explain: bool = False):
    options = RunOptions(executor="local", progress=False, explain=explain)
    return run_build(load_build(build_file), options, setup_logging("json"))


def test_explain_names_the_file_behind_a_shard_that_ran(tmp_path):
    """An edited texture re-cooks its shard, explained by the file; only that asset's `cooked`
    entry changes (the shard's other assets cook to the same bytes)."""
    build_file = make_project(tmp_path, 100, 7)
    build(build_file)
    cache = tmp_path / "build" / "cache"
    _, first = lawkit.stored_state(cache)
    manifest = json.loads((tmp_path / "build" / "out" / "manifest.json").read_bytes())
    texture = next(
        a for a, entry in sorted(manifest["assets"].items()) if entry["type"] == "Texture"
    )
    path = next((tmp_path / "project").rglob(f"{texture}/texture.xml"))
    relpath = path.relative_to(tmp_path / "project").as_posix()
    path.write_text(re.sub(r"<Width>\d+<", "<Width>77<", path.read_text("utf-8")), "utf-8")
    again = build(build_file, explain=True)
    reasons = {o.id: o.reason for o in again.explained if o.stage == "cook"}
    (shard,) = reasons
    assert shard.startswith("<shard ") and reasons[shard] == f"input changed: {relpath}"
    _, now = lawkit.stored_state(cache)
    moved = {
        key
        for (value, key), digest in now.items()
        if value == "cooked" and first.get((value, key)) != digest
    }
    assert moved == {texture}


class ShardResults(dict):
    """Unit results as `finish` sees them after an incremental update: every unit changed."""

    def __init__(self, results: dict, before: dict[str, str]) -> None:
        super().__init__(results)
        self.changed = set(results)
        self.removed: set[str] = set()
        self.before = before
        self.plan = Plan(units=[])


def test_an_incremental_finish_patches_only_the_payloads_that_changed():
    """Of a shard cooked again, `cooked` is patched only where an asset's payload digest moved
    (and `cooked_types` with it), not for the assets that cooked to the same bytes."""
    ctx, inputs = setup(3)
    old = StoredParts({"guid-0000": "d0", "guid-0001": "d1", "guid-0002": "d2"})
    new = StoredParts({"guid-0000": "d0", "guid-0001": "d1-edited", "guid-0002": "d2"})
    ctx.load_result = {"old": old}.__getitem__
    results = ShardResults({"<shard 00000000>": new}, {"<shard 00000000>": "old"})
    outputs = cook.finish(ctx, inputs, results)
    assert outputs["cooked"].set == {"guid-0001": "d1-edited"}
    assert outputs["cooked_types"].set == {"guid-0001": "Mesh"}
    assert outputs["cooked"].removed == ()


def test_an_incremental_finish_removes_the_assets_that_left_a_shard():
    """An asset that left the cook list leaves its shard's result: its `cooked` and
    `cooked_types` entries go (unless another unit cooks it now: one moving to a unit of its
    own is set there)."""
    ctx, inputs = setup(3)
    old = StoredParts({"guid-0000": "d0", "guid-0001": "d1", "guid-0002": "d2"})
    new = StoredParts({"guid-0000": "d0", "guid-0002": "d2"})
    ctx.load_result = {"old": old}.__getitem__
    results = ShardResults({"<shard 00000000>": new}, {"<shard 00000000>": "old"})
    outputs = cook.finish(ctx, inputs, results)
    assert outputs["cooked"] == ({}, ("guid-0001",))
    assert outputs["cooked_types"] == ({}, ("guid-0001",))
    alone = StoredParts({"guid-0001": "d1"})
    results = ShardResults(
        {"<shard 00000000>": new, "guid-0001": alone}, {"<shard 00000000>": "old"}
    )
    outputs = cook.finish(ctx, inputs, results)
    assert outputs["cooked"] == ({"guid-0001": "d1"}, ())


def test_update_leaves_the_own_units_of_unchanged_assets_in_a_replanned_shard_alone():
    """Replanning a shard plans again its assets cooked in it, not the assets of its hash range
    that have units of their own."""
    ctx, inputs = setup(400, cookers={"Texture": EXTERNAL})
    plan = cook.plan(ctx, inputs)
    shards = ShardMap(inputs["cooklist"].cooked)
    alone = next(u.id for u in plan.units if not u.id.startswith("<shard "))
    neighbour = next(
        a
        for a in inputs["cooklist"].cooked
        if shards.shard_of(a) == shards.shard_of(alone) and inputs["assets"][a].type == "Mesh"
    )
    inputs["assets"][neighbour] = dataclasses.replace(inputs["assets"][neighbour], name="New")
    again = cook.update(ctx, inputs, changes(plan, [neighbour]))
    assert [u.id for u in again.units] == [shards.shard_of(alone)]
    assert again.reasons == {shards.shard_of(alone): f"assets[{neighbour}] changed"}
