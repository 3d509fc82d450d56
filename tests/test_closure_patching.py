"""The dependency stage's proof that an edit of the assets leaves the cook list as it was
(stages/cooklist/patching.py): whenever the facts digests key the closure alike, a cook list
computed from scratch after the edit is the one before it (order of every table included); the
state `update` keeps is the one a fresh plan makes; and in whole builds a rename runs no
dependency unit, decodes one asset, and the build equals a clean one."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import common  # noqa: E402
import lawkit  # noqa: E402
from test_collect_patching import first_item  # noqa: E402
from test_incremental_laws import MessiahChanges, aged_project, checkout, settle  # noqa: E402

from orchestrator.keyed import Changes, Keyed
from stages import dependency, manifest
from stages.cooklist import patching
from stages.cooklist.closure import compute_cooklist
from stages.cooklist.delta import patched_cooklist
from stages.cooklist.patching import (
    CookFacts,
    closure_state,
    facts_digest,
    patched_state,
    same_facts,
)
from stages.sources.base import HARD, RESOURCE, SOFT, Asset, Ref

IDS = ("a", "b", "c", "d", "e", "f", "g")
PATHS = (
    "Game/Props/rock",
    "Game/Props/tree",
    "Game/UI/icon",
    "Core/Editor/gizmo",
    "EditorTools/brush",
    "Game/L10N/fr/voice",
    "Game/L10N/de/voice",
    "Debug/test",
)
LABELS = ("Deps", "level", "CollisionShape")

refs = st.lists(
    st.builds(
        Ref, st.sampled_from(IDS + ("zz",)), st.sampled_from((HARD, SOFT)), st.sampled_from(LABELS)
    ),
    max_size=3,
).map(tuple)


@st.composite
def assets_of(draw, asset_id: str) -> Asset:
    items = draw(st.sampled_from((0, 1, 1, 1, 2)))
    paths = tuple(draw(st.lists(st.sampled_from(PATHS), min_size=1, max_size=max(1, items))))
    folders = draw(st.sampled_from(((f"Res/{asset_id}",), (), (f"Res/Editor/{asset_id}",))))
    files = tuple(f"{folder}/{asset_id}.data" for folder in folders[:1])
    return Asset(asset_id, RESOURCE, "Mesh", paths, folders, files, draw(refs), items=items)


def asset(draw, asset_id: str) -> Asset:
    return draw(assets_of(asset_id))


configs = st.fixed_dictionaries(
    {
        "maps": st.lists(st.sampled_from(IDS), max_size=1),
        "startup": st.lists(st.sampled_from(IDS + ("Game/Props/rock", "Res/b")), max_size=2),
        "always_cook": st.lists(st.sampled_from(("Game/UI", "Core", "Game/Props/t")), max_size=1),
        "never_cook": st.lists(st.sampled_from(("Debug", "Game/Props/r", "Res/c")), max_size=1),
        "cultures": st.lists(st.sampled_from(("fr", "de")), max_size=1),
        "include_editor_content": st.booleans(),
        "follow_soft_references": st.booleans(),
        "fail_on_missing": st.booleans(),
    }
)
layouts = st.lists(
    st.fixed_dictionaries(
        {
            "include": st.lists(
                st.sampled_from(("Game/UI/**", "Res/d/**", "**/voice")), max_size=1
            ),
            "exclude": st.lists(st.sampled_from(("Game/L10N/**",)), max_size=1),
        }
    ),
    max_size=1,
)

EDITS = ("rename", "rename", "refs", "add", "remove", "items", "files", "same")


@st.composite
def scenario(draw):
    start = {i: asset(draw, i) for i in draw(st.lists(st.sampled_from(IDS), unique=True))}
    edits = []
    for _ in range(draw(st.integers(1, 6))):
        edit = draw(st.sampled_from(EDITS))
        target = draw(st.sampled_from(IDS))
        edits.append((edit, target, asset(draw, target), draw(st.sampled_from(PATHS))))
    return start, edits


def apply(assets: dict[str, Asset], edit: str, target: str, fresh: Asset, path: str):
    """The assets after one edit (sorted by id, as the keyed value holds them), and the
    keyed changes the engine would report; None when the edit does not apply."""
    now = dict(assets)
    old = now.get(target)
    if edit == "add":
        if old is not None:
            return None
        now[target] = fresh
    elif old is None:
        return None
    elif edit == "remove":
        del now[target]
    elif edit == "rename":
        now[target] = Asset(**{**_fields(old), "virtual_paths": (path,) + old.virtual_paths[1:]})
    elif edit == "refs":
        now[target] = Asset(**{**_fields(old), "refs": fresh.refs})
    elif edit == "items":
        now[target] = Asset(**{**_fields(old), "items": fresh.items})
    elif edit == "files":
        now[target] = Asset(**{**_fields(old), "files": old.files + ("extra.data",)})
    changed = frozenset(k for k in now if now[k] != assets.get(k))
    removed = frozenset(set(assets) - set(now))
    return {k: now[k] for k in sorted(now)}, Changes(changed, removed)


def _fields(asset: Asset) -> dict:
    return {name: getattr(asset, name) for name in Asset.__slots__}


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), configs, layouts)
def test_an_edit_proven_harmless_leaves_the_cook_list_a_clean_build_computes(steps, cook, layout):
    start, edits = steps
    bundles = {"layout": layout, "assigned": {}}
    assets = {k: start[k] for k in sorted(start)}
    facts = CookFacts(cook, bundles)
    state = closure_state(facts, assets, "source")
    for edit, target, fresh, path in edits:
        applied = apply(assets, edit, target, fresh, path)
        if applied is None:
            continue
        before = compute_cooklist(assets, cook, bundles)
        now, changes = applied
        same = same_facts(facts, state, now, changes)
        named = patching.patched_references(facts, state, now, changes)
        event(f"{edit}: references {'patched' if named is not None else 'read again'}")
        if named is not None:  # what the references name, patched from the changed entries
            assert named == patching.references(now), (edit, target)
        else:
            named = patching.references(now)
        patched = patched_state(facts, state, now, changes, named)
        fresh_state = closure_state(facts, now, "source")
        # The facts patched from the changed entries are a fresh plan's, in the same order, so
        # the closure unit's key is a clean build's.
        assert patched == fresh_state
        if same:
            assert patched == state
        if facts_digest(fresh_state) == facts_digest(state):  # the key: sound for the cache
            after = compute_cooklist(now, cook, bundles)
            assert repr(after) == repr(before), (edit, target)
        state, assets = fresh_state, now


def test_a_rename_no_build_file_name_sees_is_proven_harmless():
    """The everyday edit: an Item renamed where no prefix, glob or startup name looks."""
    rock = Asset(
        "a",
        RESOURCE,
        "Mesh",
        ("Game/Props/rock",),
        ("Res/a",),
        ("Res/a/a.data",),
        (Ref("b", HARD, "Deps"),),
    )
    tree = Asset("b", RESOURCE, "Mesh", ("Game/Props/tree",), ("Res/b",), ("Res/b/b.data",), ())
    cook = {"startup": ["a"], "never_cook": ["Debug"]}
    bundles = {"layout": [{"include": ["Game/UI/**"]}], "assigned": {}}
    facts = CookFacts(cook, bundles)
    state = closure_state(facts, {"a": rock, "b": tree}, "source")
    renamed = Asset(**{**_fields(tree), "virtual_paths": ("Game/Props/oak",)})
    assert same_facts(facts, state, {"a": rock, "b": renamed}, Changes(frozenset("b"), frozenset()))
    moved = Asset(**{**_fields(tree), "virtual_paths": ("Game/UI/oak",)})  # now layout-named
    assert not same_facts(
        facts, state, {"a": rock, "b": moved}, Changes(frozenset("b"), frozenset())
    )


def test_renaming_into_l10n_under_the_fallback_roots_recomputes():
    """With no root named every cookable asset but L10N/ is one: a rename into L10N/ drops it."""
    rock = Asset("a", RESOURCE, "Mesh", ("Game/Props/rock",), ("Res/a",), ("Res/a/a.data",), ())
    voice = Asset(**{**_fields(rock), "virtual_paths": ("Game/L10N/fr/voice",)})
    facts = CookFacts({}, {})
    state = closure_state(facts, {"a": rock}, "source")
    assert not same_facts(facts, state, {"a": voice}, Changes(frozenset("a"), frozenset()))


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("closure-template"))


@pytest.fixture
def watched(monkeypatch):
    """The dependency stage's full plans (each decodes every asset) and the assets whose facts
    its `update` looked at, in the runs since cleared."""
    seen = {"plans": 0, "facts": 0}
    plan, facts = dependency.plan, patching.CookFacts.of

    def planning(*args):
        seen["plans"] += 1
        return plan(*args)

    def looking(self, asset):
        seen["facts"] += 1
        return facts(self, asset)

    monkeypatch.setattr(dependency, "plan", planning)
    monkeypatch.setattr(patching.CookFacts, "of", looking)
    return seen


def equals_clean(base: Path, incremental: lawkit.BuildOutcome, story: str) -> None:
    clean = lawkit.build(base / "build.yaml", "clean/out", "clean/cache")
    shutil.rmtree(base / "clean")
    problems = lawkit.differences(incremental, clean)
    assert not problems, f"incremental != clean after {story}:\n" + "\n".join(problems)


def test_a_rename_runs_no_dependency_unit_and_decodes_only_the_renamed_asset(
    template, tmp_path, watched
):
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    repository = base / "project" / "Repository" / "resource.repository"
    _, name = first_item(repository)
    text = repository.read_text(encoding="utf-8")
    repository.write_text(
        text.replace(f"<Name>{name}</Name>", f"<Name>{name}_r</Name>", 1), "utf-8"
    )
    settle(base / "project", 1)
    watched.update(plans=0, facts=0)
    run = lawkit.build(base / "build.yaml")
    assert watched == {"plans": 0, "facts": 1}  # no full plan; one asset's facts looked at
    assert not run.ran.get("dependency") and not run.planned.get("dependency")
    equals_clean(base, run, "a rename")


@pytest.mark.parametrize(
    "change", ["add_asset", "delete_asset", "edit_repository", "edit_attribute"]
)
@pytest.mark.parametrize("pick", [(3, 0), (11, 2)])
def test_everyday_edits_through_the_dependency_update_equal_a_clean_build(
    template, tmp_path, watched, change, pick
):
    """Assets added, deleted or edited: `update` patches the facts from the changed entries
    (no full plan) and the build equals a clean one."""
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    done = MessiahChanges(base).apply(change, *pick)
    watched.update(plans=0, facts=0)
    incremental = lawkit.build(base / "build.yaml")
    assert watched["plans"] == 0 and watched["facts"] <= 4, (done, watched)
    equals_clean(base, incremental, done)


# -- the cook list patched when assets come or go (stages/cooklist/delta.py) ----------------------

patch_layouts = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {
                "include": st.lists(
                    st.sampled_from(("Game/**", "Res/d/**", "**/voice", "Res/**", "Game/UI/**")),
                    min_size=1,
                    max_size=2,
                ),
                "exclude": st.lists(st.sampled_from(("Game/L10N/**", "Res/b/**")), max_size=1),
            }
        ),
        st.just({"maps": "all"}),
    ),
    max_size=3,
)


def patched_or_none(before, facts, state, now, changes, cook, bundles):
    """What the dependency stage's update makes of an edit: the cook list patched, or None."""
    added = patching.added_ids(facts, state, now, changes)
    if added is None:
        return None
    # Assets removed that no reference names: whether a cooked asset follows one is not read.
    unnamed = state.unnamed(changes.removed)
    return patched_cooklist(before, now, cook, bundles, added, changes.removed, unnamed)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), configs, patch_layouts, st.data())
def test_a_cook_list_patched_for_assets_added_or_removed_is_a_clean_one(steps, cook, layout, data):
    start, edits = steps
    assigned = data.draw(st.sampled_from(({}, {"b1": ["c"]})))
    bundles = {"layout": layout, "assigned": assigned}
    assets = {k: start[k] for k in sorted(start)}
    facts = CookFacts(cook, bundles)
    state = closure_state(facts, assets, "source")
    before = compute_cooklist(assets, cook, bundles)
    for edit, target, fresh, path in edits:
        applied = apply(assets, edit, target, fresh, path)
        if applied is None:
            continue
        now, changes = applied
        patched = patched_or_none(before, facts, state, now, changes, cook, bundles)
        after = compute_cooklist(now, cook, bundles)
        event(f"{edit}: {'patched' if patched is not None else 'computed again'}")
        if patched is not None:
            assert repr(patched) == repr(after), (edit, target)
        state, assets, before = closure_state(facts, now, "source"), now, after


stored_ids = st.lists(st.sampled_from(IDS + ("zz", "ab")), unique=True).map(sorted)


@settings(max_examples=300, deadline=None)
@given(stored_ids, stored_ids, stored_ids, st.sampled_from((0, patching.SEARCHED)))
def test_stored_ids_are_searched_and_patched_as_decoded_ones(held, asked, other, searched):
    """The state's sorted newline-separated ids (what references name, the leaves): which ids
    they hold, and the ids with some added and some removed, alike whether the bytes are
    searched and patched in place (`searched` at least the ids) or decoded (0)."""
    ids = "\n".join(held).encode("utf-8")
    assert patching.present(ids, asked, searched) == set(asked) & set(held)
    added, removed = set(other) - set(held), set(asked) & set(held)
    after = patching.merged(ids, added, removed, searched)
    assert after == "\n".join(sorted((set(held) | added) - removed)).encode("utf-8")
    assert patching.merged(ids, set(), removed, searched) == "\n".join(
        sorted(set(held) - removed)
    ).encode("utf-8")


def leaf(asset_id: str, path: str, refs=()) -> Asset:
    return Asset(
        asset_id, RESOURCE, "Texture", (path,), (f"Res/{asset_id}",), (f"Res/{asset_id}/t",), refs
    )


def test_a_texture_added_or_removed_under_an_include_rule_patches_the_cook_list():
    """The edits of the 100,000-resource benchmark (benchmarks/common.py asset_added,
    asset_deleted): a texture nothing references comes or goes where an include rule of the
    layout names it. The cook list is patched, not computed again, and is a clean one."""
    world = Asset("w", RESOURCE, "World", ("Worlds/w",), ("Res/w",), ("Res/w/w",), ())
    mesh = Asset(
        "m", RESOURCE, "Mesh", ("Game/m",), ("Res/m",), ("Res/m/m",), (Ref("t1", HARD, "Deps"),)
    )
    assets = {
        "m": mesh,
        "t1": leaf("t1", "Chars/t1"),
        "t3": leaf("t3", "Chars/t3"),
        "t5": leaf("t5", "Chars/t5", (Ref("w", HARD, "Deps"),)),
        "t6": leaf("t6", "Chars/t6", (Ref("x", HARD, "Deps"),)),
        "u": leaf("u", "UI/u"),
        "w": world,
        "x": leaf("x", "Props/x"),  # no root names it: t6 finds it
    }
    cook = {"maps": ["w"], "always_cook": ["UI/"]}
    bundles = {"layout": [{"include": ["Game/**"]}, {"include": ["Chars/**"]}], "assigned": {}}
    facts = CookFacts(cook, bundles)
    state = closure_state(facts, assets, "source")
    before = compute_cooklist(assets, cook, bundles)
    grown = dict(
        sorted({**assets, "t4": leaf("t4", "Chars/t4", (Ref("u", HARD, "Deps"),))}.items())
    )
    changes = Changes(frozenset({"t4"}), frozenset())
    patched = patched_or_none(before, facts, state, grown, changes, cook, bundles)
    assert patched is not None and repr(patched) == repr(compute_cooklist(grown, cook, bundles))
    assert patched.cooked.index("t4") == patched.cooked.index("t3") + 1
    shrunk = {k: v for k, v in assets.items() if k != "t3"}
    gone = Changes(frozenset(), frozenset({"t3"}))
    patched = patched_or_none(before, facts, state, shrunk, gone, cook, bundles)
    assert patched is not None and repr(patched) == repr(compute_cooklist(shrunk, cook, bundles))
    # m follows a reference to t1: removing t1 makes it missing, and plans again
    shrunk = {k: v for k, v in assets.items() if k != "t1"}
    gone = Changes(frozenset(), frozenset({"t1"}))
    assert patched_or_none(before, facts, state, shrunk, gone, cook, bundles) is None
    # t6 found x: removing t6 leaves x to no one, and plans again
    shrunk = {k: v for k, v in assets.items() if k != "t6"}
    gone = Changes(frozenset(), frozenset({"t6"}))
    assert patched_or_none(before, facts, state, shrunk, gone, cook, bundles) is None
    # t4 would find x before t6 does: plans again
    grown = dict(
        sorted({**assets, "t4": leaf("t4", "Chars/t4", (Ref("x", HARD, "Deps"),))}.items())
    )
    assert patched_or_none(before, facts, state, grown, changes, cook, bundles) is None


def character_textures(root: Path) -> list[Path]:
    """The texture folders under Characters/ (the layout's `chars/{package}` names them) whose
    GUID no file names but their own and their repository's Item."""
    folders = sorted(p.parent for p in root.rglob("texture.xml") if "Characters" in p.parts)
    texts = [
        p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*")
        if p.is_file() and p.suffix in (".xml", ".repository", ".iworld", ".ilevel")
    ]
    return [f for f in folders if sum(text.count(f.name) for text in texts) == 1]


def test_a_texture_added_or_deleted_patches_the_cook_list_and_equals_a_clean_build(
    template, tmp_path, watched, monkeypatch
):
    """The benchmark's add and delete (benchmarks/common.py asset_added, asset_deleted): the
    closure unit takes the cook list `update` patched, and the pack unit the packing patched
    (--explain says so), and the manifest is patched by entry; each build equals a clean one.
    The texture deleted named nothing and nothing named it: the dependency stage decodes no
    asset but the few the layout reads (worlds), and the pack stage none."""
    document = manifest.manifest_document
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    root = base / "project"
    model, doomed = character_textures(root)[:2]
    repository = root / "Repository" / "resource.repository"
    guid = "0e7ea0b0-0000-4000-8000-000000000001"
    shutil.copytree(model, model.parent / guid)
    grown = common.add_item_copy(model.name, guid, "tex_added")(repository.read_bytes())
    repository.write_bytes(grown)
    settle(root, 1)
    watched.update(plans=0, facts=0)
    made = []  # manifests made from every entry rather than patched (stages/manifest.py)
    monkeypatch.setattr(manifest, "manifest_document", lambda *a: made.append(1) or document(*a))
    added = lawkit.build(base / "build.yaml", explain=True)
    assert made == []
    assert watched["plans"] == 0
    assert ("dependency", "closure", f"the cook list patched ({guid} added)") in added.named
    joined = [r for stage, _, r in added.named if stage == "pack"]
    assert joined and joined[0].startswith(f"{guid} joined bundle chars/"), joined
    equals_clean(base, added, "a texture added")
    shutil.rmtree(doomed)
    repository.write_bytes(common.remove_item(doomed.name)(repository.read_bytes()))
    settle(root, 2)
    made.clear()  # the clean build made its own
    whole = []  # the stages that decoded every entry of a keyed value
    as_dict = Keyed.as_dict

    def decoding(self):
        whole.append((sys._getframe(1).f_globals["__name__"], self.name))
        return as_dict(self)

    monkeypatch.setattr(Keyed, "as_dict", decoding)
    deleted = lawkit.build(base / "build.yaml", explain=True)
    monkeypatch.setattr(Keyed, "as_dict", as_dict)
    assert ("dependency", "closure", f"the cook list patched ({doomed.name} removed)") in (
        deleted.named
    )
    left = [r for stage, _, r in deleted.named if stage == "pack"]
    assert left and left[0].startswith(f"{doomed.name} left bundle chars/"), left
    assert not [w for w in whole if w[1] == "assets"], whole
    assert made == []
    equals_clean(base, deleted, "a texture deleted")
