"""Pack's early cutoff (issue 29): an edit that leaves every cooked asset's placement signature,
the cook order and the options as they were plans no unit and keeps the bundles; anything else
packs from scratch. The law: what the stage keeps always equals `pack()` from scratch.

The Hypothesis test drives the stage's own `update`, `plan`, `run` and `finish` through random
sequences of renames, moves between packages, reference edits, assets added and removed and
cooked-set changes, over random layouts and the `extract`, `duplicate` and `priority` policies,
and compares at every step with packing from scratch. The pipeline test holds a real rename to
it: the renamed Item's layout is unchanged, so pack runs no unit."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import lawkit
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_incremental_laws import aged_project, checkout, settle

from orchestrator import UNCHANGED, KeyedPatch
from orchestrator.errors import ConfigError
from orchestrator.keyed import NOTHING, Changes
from orchestrator.typing import StageChanges
from stages import pack as stage
from stages.layout.options import pack_options
from stages.sources.base import HARD, RESOURCE, SOFT, Asset, Ref

PACKAGES = ("UI", "UI/icons", "Fx", "Char")
NAMES = ("tex_a", "tex_b", "mat", "icon_x", "mesh")
GLOBS = ("UI/**", "**/tex_*", "Fx/*", "*/icon_*", "Char/**", "**/mat")
TEMPLATES = ("{package}", "{stem}", "fixed", "ui/{stem}")


def resource(guid: str, package: str, name: str, refs: tuple[Ref, ...]) -> Asset:
    folder = f"Repo/{package}/{guid}"
    return Asset(
        guid,
        RESOURCE,
        "Texture",
        (f"{package}/{name}",),
        (folder,),
        (f"{folder}/resource.xml",),
        refs,
        package,
        name,
    )


class Project:
    """The stage's inputs as the engine would give them, and the outputs it keeps."""

    def __init__(self, assets: dict[str, Asset], cooked: list[str], sections: dict) -> None:
        self.assets = assets
        self.cooked = cooked
        self.sections = sections
        self.outputs: dict[str, Any] = {}
        self.state: Any = None
        self.key: Any = None  # the stored unit's key
        self.packing: Any = None  # its result

    def inputs(self) -> dict[str, Any]:
        return {
            "assets": self.assets,
            "source": SimpleNamespace(),
            "cooklist": SimpleNamespace(cooked=list(self.cooked)),
            "cooked": dict.fromkeys(self.cooked, b""),
        }

    def ctx(self) -> SimpleNamespace:
        return SimpleNamespace(
            section=lambda name: self.sections.get(name, "messiah" if name == "source" else {}),
            previous=self.outputs,
            log=None,
        )

    def build(self, changes: StageChanges | None) -> str:
        """One run of the stage as the engine runs it: `update` when it has a record, else
        `plan`; the unit runs when its key moved, `finish` sees which results changed, and the
        outputs are kept (UNCHANGED: as they were). Returns how it went."""
        ctx, inputs = self.ctx(), self.inputs()
        planned = stage.update(ctx, inputs, changes) if changes is not None else None
        how = "cut off" if planned is not None and not planned.units else "re-planned"
        joined = planned is not None and planned.units and planned.units[0].payload
        if isinstance(joined, stage.PatchedPacking):
            how = "patched"  # the last packing patched (layout/delta.py)
        if planned is None:
            planned, how = stage.plan(ctx, inputs), "packed"
        changed: set[str] | None = None if how == "packed" else set()
        packing = self.packing
        for unit in planned.units:
            if how == "packed" or unit.key != self.key:
                packing = stage.run(unit.payload, None, None)
                if how != "packed" and packing != self.packing:
                    changed = {unit.id}
            self.key = unit.key
        done = stage.finish(ctx, inputs, _Results(planned, packing, changed))
        if how == "cut off":
            assert all(value is UNCHANGED for value in done.values())
        for name, value in done.items():  # kept as the engine keeps them
            if isinstance(value, KeyedPatch):
                assert how in ("re-planned", "patched"), f"{name}: a patch from a full plan"
                kept = {k: v for k, v in self.outputs[name].items() if k not in value.removed}
                self.outputs[name] = kept | value.set
            elif value is not UNCHANGED:
                self.outputs[name] = value
        self.packing, self.state = packing, planned.state
        return how


class _Results:
    """A run's results: the plan, its one unit's packing, what changed (None: a full plan)."""

    def __init__(self, plan: Any, packing: Any, changed: set[str] | None) -> None:
        self.plan = plan
        self.packing = packing
        self.changed = changed

    def __getitem__(self, unit_id: str) -> Any:
        return self.packing


def scratch(project: Project) -> dict[str, Any]:
    """The outputs packing from scratch gives (what a clean build keeps)."""
    options, _ = pack_options(project.ctx(), project.inputs())
    packing = stage.pack_with([project.assets[a] for a in project.cooked], options)
    return {"bundles": packing.bundles, "asset_bundles": packing.asset_bundles}


def layouts(policy: str):
    rule = st.fixed_dictionaries(
        {
            "name": st.sampled_from(TEMPLATES),
            "include": st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2),
        },
        optional={
            "exclude": st.lists(st.sampled_from(GLOBS), min_size=1, max_size=1),
            **({"priority": st.integers(0, 3)} if policy == "priority" else {}),
        },
    )
    return st.lists(rule, max_size=2)


edit = st.tuples(
    st.sampled_from(
        (
            "rename",
            "move",
            "refs",
            "strength",
            "add",
            "remove",
            "uncook",
            "cook",
            "touch",
            "recook",
        )
    ),
    st.integers(0, 30),
    st.integers(0, 30),
    st.integers(0, 30),
)


@st.composite
def stories(draw):
    policy = draw(st.sampled_from(("extract", "duplicate", "priority")))
    layout = draw(layouts(policy))
    count = draw(st.integers(1, 8))
    assets = {}
    for i in range(count):
        guid = f"g{i:02d}"
        refs = tuple(
            Ref(f"g{t:02d}", draw(st.sampled_from((HARD, SOFT))), "uses")
            for t in draw(st.lists(st.integers(0, count - 1), max_size=3))
        )
        assets[guid] = resource(
            guid, draw(st.sampled_from(PACKAGES)), draw(st.sampled_from(NAMES)), refs
        )
    follow_soft = draw(st.booleans())
    sections = {
        "bundles": {"layout": layout, "shared_dependencies": policy},
        "cook": {"follow_soft_references": follow_soft},
    }
    return Project(assets, sorted(assets), sections), draw(st.lists(edit, max_size=8))


def apply(project: Project, what: str, a: int, b: int, c: int) -> tuple[set[str], set[str]]:
    """One edit; returns the asset ids changed (or added) and removed."""
    ids = sorted(project.assets)
    target = ids[a % len(ids)] if ids else None
    if what == "add" or target is None:
        guid = f"n{len(project.assets) + a:02d}"
        # referring to a cooked asset, to one not cooked, or to nothing
        refs = (Ref((*ids, "zz", "zz")[b % (len(ids) + 2)], HARD, "uses"),) if c % 3 else ()
        project.assets[guid] = resource(guid, PACKAGES[b % 4], NAMES[c % 5], refs)
        project.cooked.append(guid)
        return {guid}, set()
    asset = project.assets[target]
    if what == "remove":
        del project.assets[target]
        project.cooked = [x for x in project.cooked if x != target]
        before = project.assets
        project.assets = {
            k: replace(v, refs=tuple(r for r in v.refs if r.target != target))
            for k, v in before.items()
        }
        return {k for k, v in project.assets.items() if v != before[k]}, {target}
    if what == "uncook":
        project.cooked = [x for x in project.cooked if x != target]
        return set(), set()
    if what == "uncook+move":  # out of the cook, and another asset moved in the cook order
        project.cooked = [x for x in project.cooked if x != target]
        if project.cooked:
            project.cooked.insert(
                c % len(project.cooked), project.cooked.pop(b % len(project.cooked))
            )
        return set(), set()
    if what == "cook":
        if target not in project.cooked:
            project.cooked.insert(b % (len(project.cooked) + 1), target)
        return set(), set()
    if what == "recook":  # cooked again, its entry as it was (a dependency's payload moved)
        return set(), set()
    if what == "rename":
        name = NAMES[b % 5] + ("" if c % 2 else "_r")
        new = replace(asset, name=name, virtual_paths=(f"{asset.package}/{name}",))
    elif what == "move":
        package = PACKAGES[b % 4]
        new = replace(asset, package=package, virtual_paths=(f"{package}/{asset.name}",))
    elif what == "refs":
        refs = (Ref(ids[b % len(ids)], (HARD, SOFT)[c % 2], "uses"),) if b % 3 else ()
        new = replace(asset, refs=refs)
    elif what == "strength":  # the same targets, hard made soft and soft hard
        flipped = {HARD: SOFT, SOFT: HARD}
        new = replace(
            asset, refs=tuple(replace(r, strength=flipped[r.strength]) for r in asset.refs)
        )
    else:  # an attribute edit: nothing packing reads
        new = replace(asset, type="Material")
    project.assets[target] = new
    return {target}, set()


def cooked_changes(before: list[str], after: list[str], recooked: set[str]) -> Changes:
    """How cook's `cooked` moved, as the engine tells it: the payloads of assets cooked anew or
    again (an edited one is cooked again), and those no longer cooked."""
    now = set(after)
    changed = (now - set(before)) | (recooked & now)
    return Changes(frozenset(changed), frozenset(set(before) - now))


def step(project: Project, what: str, a: int, b: int, c: int) -> str | None:
    """One edit, built as the engine builds it, held to packing from scratch: the outputs, the
    unit's key and result, the signatures and the state a clean plan makes. Returns how it
    went; None when a clean build fails (and the incremental one must fail too)."""
    cooked_before = list(project.cooked)
    target = sorted(project.assets)[a % len(project.assets)] if project.assets else None
    changed, removed = apply(project, what, a, b, c)
    changes = StageChanges(
        {
            "assets": Changes(frozenset(changed), frozenset(removed)),
            "source": NOTHING,
            "cooklist": NOTHING
            if project.cooked == cooked_before
            else Changes(frozenset({""}), frozenset()),
            "cooked": cooked_changes(
                cooked_before,
                project.cooked,
                changed | ({target} if what == "recook" else set()),
            ),
        },
        [],
        project.state,
    )
    try:
        expected = scratch(project)
    except ConfigError:
        # A clean build fails: the incremental one must not keep the old bundles.
        with pytest.raises(ConfigError):
            project.build(changes)
        return None
    how = project.build(changes)
    event(f"{what}: {how}")
    kept = {name: project.outputs[name] for name in ("bundles", "asset_bundles")}
    assert kept == expected, f"{how} after {what}"
    # What a clean build stores: the unit's key and every cooked asset's signature.
    clean = stage.plan(project.ctx(), project.inputs())
    assert project.key == clean.units[0].key, f"{how} after {what}: a stale key"
    assert project.outputs["placements"] == clean.scratch.placements, f"{how} after {what}"
    # The unit's result (kept in the action cache under that key) and the state are too.
    assert repr(project.packing) == repr(stage.run(clean.units[0].payload, None, None))
    assert project.state == clean.state, f"{how} after {what}"
    return how


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stories())
def test_pack_update_always_equals_packing_from_scratch(story):
    project, edits = story
    try:
        scratch(project)
    except ConfigError:
        return  # a layout that fails from the start builds nothing to patch
    assert project.build(None) == "packed"
    for what, a, b, c in edits:
        if step(project, what, a, b, c) is None:
            return


POLICIES = ("extract", "duplicate")  # a priority fill packs from scratch


@st.composite
def sparse_stories(draw):
    """Projects where most assets reference nothing, under layouts whose rules name most of
    them, and edits that mostly take one asset out of the cook or bring one in: the loose
    assets the pack drops from its last packing (layout/delta.py), and the neighbours that
    make it pack again (a reference to or from it, its bundle's last asset, `default`)."""
    layout = [
        {"name": draw(st.sampled_from(TEMPLATES + ("default",))), "include": [glob]}
        for glob in draw(st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2, unique=True))
    ]
    count = draw(st.integers(1, 8))
    assets = {}
    for i in range(count):
        guid = f"g{i:02d}"
        targets = draw(st.lists(st.integers(0, count), max_size=1)) if draw(st.booleans()) else []
        refs = tuple(Ref(f"g{t:02d}", draw(st.sampled_from((HARD, SOFT))), "uses") for t in targets)
        assets[guid] = resource(
            guid, draw(st.sampled_from(PACKAGES)), draw(st.sampled_from(NAMES)), refs
        )
    sections = {
        "bundles": {"layout": layout, "shared_dependencies": draw(st.sampled_from(POLICIES))},
        "cook": {"follow_soft_references": draw(st.booleans())},
    }
    kinds = st.sampled_from(("remove", "remove", "uncook", "uncook+move", "add", "cook", "touch"))
    edits = draw(st.lists(st.tuples(kinds, *[st.integers(0, 30)] * 3), max_size=6))
    return Project(assets, sorted(assets), sections), edits


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_stories())
def test_an_asset_leaving_the_cook_patches_the_packing_as_packing_from_scratch(story):
    """The delete patch's law: whenever `update` drops an asset from the last packing, the
    outputs, the unit's key and result and the state are packing from scratch's."""
    project, edits = story
    try:
        scratch(project)
    except ConfigError:
        return
    assert project.build(None) == "packed"
    for what, a, b, c in edits:
        if step(project, what, a, b, c) is None:
            return


def test_a_texture_joining_its_bundle_patches_the_packing():
    """The benchmark's added texture (benchmarks/common.py asset_added): nothing references it,
    it references nothing cooked, an include rule names it into a bundle that exists. The last
    packing is patched (no pack from scratch) and equals one; an asset that a cooked asset
    already referred to (from another bundle: a new dependency) is packed from scratch."""
    ui = resource("g00", "UI", "tex_ui", (Ref("n09", HARD, "uses"),))
    chars = [resource(f"g0{i}", "Char", f"tex_{i}", ()) for i in (1, 3)]
    assets = {a.id: a for a in [ui, *chars]}
    layout = [
        {"name": "ui", "include": ["UI/**"]},
        {"name": "{package}", "include": ["Char/**"]},
    ]
    # one bundle named by two rules: the first rule's assets come first, whatever their order
    one_bundle = [{"name": "Char", "include": ["UI/**"]}, layout[1]]
    for newcomer, refs, rules, joins in (
        ("g02", (Ref("zz", SOFT, "x"),), layout, True),
        ("n09", (), layout, False),  # g00 refers to it: ui depends on Char now
        ("g02", (Ref("g00", HARD, "x"),), layout, False),  # it refers to g00: the same
        ("g02", (), one_bundle, False),
    ):
        sections = {"bundles": {"layout": rules, "shared_dependencies": "extract"}, "cook": {}}
        project = Project(dict(assets), sorted(assets), sections)
        assert project.build(None) == "packed"
        before = list(project.cooked)
        project.assets[newcomer] = resource(newcomer, "Char", "tex_new", refs)
        project.cooked.insert(2 if rules is layout else 0, newcomer)
        changes = StageChanges(
            {
                "assets": Changes(frozenset({newcomer}), frozenset()),
                "source": NOTHING,
                "cooklist": Changes(frozenset({""}), frozenset()),
                "cooked": cooked_changes(before, project.cooked, {newcomer}),
            },
            [],
            project.state,
        )
        assert project.build(changes) == ("patched" if joins else "re-planned")
        kept = {name: project.outputs[name] for name in ("bundles", "asset_bundles")}
        assert kept == scratch(project)
        if rules is layout:
            assert project.outputs["bundles"]["Char"].explicit == ("g01", newcomer, "g03")
        clean = stage.plan(project.ctx(), project.inputs())
        assert project.key == clean.units[0].key and project.state == clean.state
        assert repr(project.packing) == repr(stage.run(clean.units[0].payload, None, None))


def test_a_reference_made_soft_packs_again_when_soft_ones_are_not_followed():
    """The same target by a soft reference is no edge: the asset it held leaves the bundle."""
    project = Project(
        {
            "g00": resource("g00", "UI", "tex_a", (Ref("g01", HARD, "uses"),)),
            "g01": resource("g01", "Fx", "mat", ()),
        },
        ["g00", "g01"],
        {
            "bundles": {"layout": [{"name": "ui", "include": ["UI/**"]}]},
            "cook": {"follow_soft_references": False},
        },
    )
    assert project.build(None) == "packed"
    changes = StageChanges(
        {"assets": Changes(frozenset({"g00"}), frozenset()), "source": NOTHING}
        | {"cooklist": NOTHING, "cooked": NOTHING},
        [],
        project.state,
    )
    renamed = StageChanges(changes.inputs, [], project.state)
    project.assets["g00"] = replace(
        project.assets["g00"], name="tex_r", virtual_paths=("UI/tex_r",)
    )
    assert project.build(renamed) == "cut off"  # still under UI/: the same bundle
    soft = replace(project.assets["g00"].refs[0], strength=SOFT)
    project.assets["g00"] = replace(project.assets["g00"], refs=(soft,))
    assert project.build(StageChanges(changes.inputs, [], project.state)) == "re-planned"
    assert project.outputs["asset_bundles"] == {"g00": ("ui",), "g01": ("default",)}
    assert project.outputs["asset_bundles"] == scratch(project)["asset_bundles"]


# -- the pipeline: a rename whose layout is unchanged runs no pack unit --------------------------
@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("pack-template"))


def cooked_item(repository: str, build: lawkit.BuildOutcome) -> tuple[str, str]:
    """(GUID, Name) of the repository's first Item the build cooked (and so packed)."""
    for match in re.finditer(
        r"<GUID>([^<]+)</GUID>(?:(?!</Item>).)*?<Name>([^<]*)</Name>", repository, re.S
    ):
        if ("asset_bundles", match.group(1)) in build.values:
            return match.group(1), match.group(2)
    raise AssertionError("no cooked Item")


def test_a_rename_whose_layout_is_unchanged_runs_no_pack_unit(template, tmp_path, monkeypatch):
    """The issue's rename: an Item of a generated project renamed in its package (the layout
    rules match packages), so `update` answers and pack plans and runs no unit; the build
    equals a clean one."""
    base = tmp_path
    checkout(template, base)
    before = lawkit.build(base / "build.yaml")
    repository = base / "project" / "Repository" / "resource.repository"
    text = repository.read_text(encoding="utf-8")
    guid, name = cooked_item(text, before)
    repository.write_text(text.replace(f"<Name>{name}</Name>", f"<Name>{name}_r</Name>", 1))
    settle(base / "project", 1)
    planned_whole: list[str] = []
    plan = stage.plan
    monkeypatch.setattr(
        stage, "plan", lambda ctx, inputs: planned_whole.append("pack") or plan(ctx, inputs)
    )
    incremental = lawkit.build(base / "build.yaml")
    assert not incremental.error  # (exit 1: the generated project fails rules on purpose)
    assert incremental.values[("assets", guid)] != before.values[("assets", guid)]
    assert not planned_whole, "pack planned everything again for a rename"
    assert not incremental.planned.get("pack") and not incremental.ran.get("pack")
    monkeypatch.setattr(stage, "plan", plan)
    clean = lawkit.build(base / "build.yaml", "clean/out", "clean/cache")
    problems = lawkit.differences(incremental, clean)
    assert not problems, "incremental != clean after a rename:\n" + "\n".join(problems)
