"""Auto atlases (`.pac`): membership, ids, the moves in the bundles, and the cooked page."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
import xxhash
import yaml
from cocos_projects import CocosProject, contents, frame, pack_project, redirects, texture
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from orchestrator.codec import dumps
from orchestrator.shell.cli import main
from stages.algorithms.priority import natural_key
from stages.cooking.cookers import unpack_files
from stages.sources.cocos import collect_cocos
from stages.sources.cocos.atlas import AtlasOptions, FrameSize, cook_page, layout_pages
from stages.sources.cocos.atlas_plan import atlas_options


def expected_image_id(frames: list[str]) -> str:
    """The spec's formula, computed here on its own."""
    digest = xxhash.xxh32("".join(sorted(frames, key=natural_key)).encode(), seed=0).intdigest()
    return "1" + format(digest, "x").ljust(8, "0")


@pytest.fixture
def atlas_project(tmp_path):
    """An atlas folder outside any bundle: main uses one frame, bundle `low` (5) another."""
    project = CocosProject(tmp_path)
    project.folder("assets/low", bundle="low", priority=5)
    pac = project.pac("assets/atlas/ui.pac")
    one = project.image("assets/atlas/one.png", (10, 6), color=(255, 0, 0, 255))
    two = project.image("assets/atlas/two.png", (4, 12), color=(0, 0, 255, 255))
    unpackable = project.image("assets/atlas/big.png", (5, 5), packable=False)
    huge = project.image("assets/atlas/huge.png", (1100, 4))
    nested = project.image("assets/atlas/sub/n.png", (3, 3))
    project.pac("assets/atlas/sub/sub.pac")
    unused = project.image("assets/atlas/unused.png", (3, 3))
    scene = project.scene(
        "assets/s.scene", [frame(one), frame(unpackable), frame(huge), frame(nested)]
    )
    project.prefab("assets/low/p.prefab", [frame(two)])
    return {
        "root": tmp_path,
        "pac": pac,
        "one": one,
        "two": two,
        "unpackable": unpackable,
        "huge": huge,
        "nested": nested,
        "unused": unused,
        "scene": scene,
    }


def test_membership_and_ids(atlas_project):
    """Packable frames under the .pac's folder (not a sub-.pac's), used, that fit; Creator's ids."""
    source = collect_cocos(str(atlas_project["root"]))
    atlas = next(a for a in source.pack_hook.data.atlases if a.pac == atlas_project["pac"])
    members = [f.id for f in atlas.frames]
    assert set(members) == {frame(atlas_project["one"]), frame(atlas_project["two"])}
    (page,) = atlas.pages
    assert page.image == expected_image_id(members)
    assert page.texture == page.image + "@6c48a"
    assert source.assets[page.texture].refs[0].target == page.image
    assert page.image in source.roots["auto_atlas"] and page.texture in source.roots["auto_atlas"]
    # The nested folder's .pac packs its own frame, which main uses.
    sub = next(a for a in source.pack_hook.data.atlases if a.pac != atlas_project["pac"])
    assert [f.id for f in sub.frames] == [frame(atlas_project["nested"])]


def test_frames_move_textures_leave_and_the_lower_bundle_redirects(atlas_project):
    """The first bundle gets the page; the lower one the texture as a redirect (and a dep);
    unused frame textures and images leave both bundles."""
    p = atlas_project
    source, packing = pack_project(p["root"])
    atlas = next(a for a in source.pack_hook.data.atlases if a.pac == p["pac"])
    page = atlas.pages[0]
    main_ids, low_ids = contents(packing, "main"), contents(packing, "low")
    assert {frame(p["one"]), frame(p["two"]), page.image, page.texture} <= main_ids
    for image in (p["one"], p["two"]):
        assert image not in main_ids and texture(image) not in main_ids
        assert image not in low_ids and texture(image) not in low_ids
    assert redirects(packing, "low") == {page.texture: "main"}
    assert "main" in packing.bundles["low"].dependencies
    assert {frame(p["one"]), frame(p["two"])} <= low_ids
    # Frames the atlas does not pack keep their own texture.
    assert texture(p["unpackable"]) in main_ids
    assert "default" not in packing.bundles


def test_the_pac_in_a_bundle_folder_and_the_remove_options(tmp_path):
    """With the .pac in the bundle's folder the remove options hold; the .pac leaves unless kept."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="res")
    pac = project.pac(
        "assets/res/atlas.pac", removeTextureInBundle=False, removeSpriteAtlasInBundle=False
    )
    hero = project.image("assets/res/hero.png")
    _, packing = pack_project(tmp_path)
    held = set(packing.bundles["res"].assets)
    assert texture(hero) in held and hero not in held  # texture kept, image removed
    assert pac in held
    project2 = CocosProject(tmp_path / "other")
    project2.folder("assets/res", bundle="res")
    pac2 = project2.pac("assets/res/atlas.pac")
    hero2 = project2.image("assets/res/hero.png")
    _, packing = pack_project(tmp_path / "other")
    held = set(packing.bundles["res"].assets)
    assert pac2 not in held and texture(hero2) not in held and frame(hero2) in held
    assert pac2 not in packing.bundles["res"].source_fields["paths"]


def test_the_page_is_cooked_with_every_frames_pixels(atlas_project):
    """The page holds each frame's pixels at its recorded rectangle; same bytes every time."""
    source = collect_cocos(str(atlas_project["root"]))
    atlas = next(a for a in source.pack_hook.data.atlases if a.pac == atlas_project["pac"])
    recipe = source.recipes[atlas.pages[0].image]
    files = {
        path: (atlas_project["root"] / path).read_bytes()
        for path in source.assets[atlas.pages[0].image].files
    }
    payload = cook_page(atlas.pages[0].image, files, recipe.data)
    assert payload == cook_page(atlas.pages[0].image, files, recipe.data)
    parts = unpack_files(payload)
    page = Image.open(io.BytesIO(parts["page.png"])).convert("RGBA")
    records = {r["id"]: r for r in json.loads(parts["frames.json"])["frames"]}
    one = records[frame(atlas_project["one"])]
    two = records[frame(atlas_project["two"])]
    assert (one["width"], one["height"]) in ((10, 6), (6, 10))
    assert page.getpixel((one["x"] + one["width"] // 2, one["y"] + one["height"] // 2)) == (
        255,
        0,
        0,
        255,
    )
    assert page.getpixel((two["x"] + two["width"] // 2, two["y"] + two["height"] // 2)) == (
        0,
        0,
        255,
        255,
    )
    # Padding bleed: the pixel just outside a frame repeats its edge.
    assert page.getpixel((one["x"] - 1, one["y"])) == (255, 0, 0, 255)
    # Another interpreter (another process, as a worker is) writes the same bytes, from the
    # recipe as the store gives it back.
    code = (
        "import json,sys; from stages.sources.cocos.atlas import cook_page; "
        "from orchestrator.codec import loads; "
        "d=json.loads(sys.stdin.read()); "
        "files={k: bytes.fromhex(v) for k, v in d['files'].items()}; "
        "sys.stdout.write(cook_page(d['id'], files, loads(bytes.fromhex(d['data']))).hex())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        input=json.dumps(
            {
                "id": atlas.pages[0].image,
                "data": dumps(recipe.data).hex(),
                "files": {k: v.hex() for k, v in files.items()},
            }
        ),
    )
    assert bytes.fromhex(other.stdout) == payload


def test_frames_that_need_several_pages_warn_and_each_page_has_its_own_id(tmp_path):
    """More frames than one page holds: a warning naming the .pac; page ids from their frames."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="res")
    project.pac("assets/res/a.pac", maxWidth=32, maxHeight=32, padding=0)
    images = [project.image(f"assets/res/i{n}.png", (20, 20)) for n in range(3)]
    source, packing = pack_project(tmp_path)
    atlas = source.pack_hook.data.atlases[0]
    assert len(atlas.pages) == 3
    (warning,) = [p for p in source.problems if p.kind == "atlas_pages"]
    assert warning.file == "assets/res/a.pac.meta" and "3 pages" in warning.message
    for page in atlas.pages:
        assert page.image == expected_image_id(list(page.frames))
        assert page.image in packing.bundles["res"].assets
    assert {frame(i) for i in images} <= set(packing.bundles["res"].assets)


def test_layout_is_deterministic_and_respects_the_page():
    """Same frames, same placements; every rectangle inside the page with its padding."""
    options = AtlasOptions(max_width=64, max_height=64, padding=1)
    frames = [FrameSize(f"f{n}", 5 + n, 9 - n % 4) for n in range(12)]
    first = layout_pages(frames, options)
    assert first == layout_pages(list(frames), options)
    for page in first:
        for p in page:
            assert p.x - options.border >= 0 and p.x + p.width + options.border <= 64
            assert p.y - options.border >= 0 and p.y + p.height + options.border <= 64


@pytest.mark.parametrize(
    "options",
    [{"padding": -5}, {"padding": -1}, {"maxWidth": 0}, {"maxHeight": -8}, {"maxWidth": "64"}],
    ids=["padding-5", "padding-1", "maxWidth0", "maxHeight-8", "maxWidth-text"],
)
def test_atlas_options_out_of_range_or_of_the_wrong_type_take_the_defaults(tmp_path, options):
    """A hand-edited .pac meta with a negative padding, a page side below 1 or a number written
    as text packs as with Creator's default for that option (a padding of -5 used to reach the
    packer as an empty rectangle: an internal error, exit 3)."""
    project = CocosProject(tmp_path)
    project.folder("assets/res", bundle="res")
    project.pac("assets/res/a.pac", **options)
    images = [project.image(f"assets/res/i{n}.png", (8, 8)) for n in range(2)]
    source, _ = pack_project(tmp_path)
    (atlas,) = source.pack_hook.data.atlases
    assert atlas.options == AtlasOptions()
    (page,) = atlas.pages
    assert set(page.frames) == {frame(image) for image in images}


ATLAS_OPTION_KEYS = (
    "maxWidth",
    "maxHeight",
    "padding",
    "paddingBleed",
    "allowRotation",
    "filterUnused",
    "removeTextureInBundle",
    "removeImageInBundle",
    "removeSpriteAtlasInBundle",
)
ODD_OPTION_VALUES = st.one_of(
    st.integers(-20, 80),
    st.sampled_from([0, -1, 2**31, -(2**63)]),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
    st.text(max_size=4),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    user=st.dictionaries(st.sampled_from(ATLAS_OPTION_KEYS), ODD_OPTION_VALUES, max_size=5),
    sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=6),
)
def test_any_pac_options_lay_out_frames_inside_their_page(user, sizes):
    """Whatever a .pac meta's `userData` holds, its options are usable (padding at least 0,
    page sides at least 1) and every frame that fits is placed inside its page, padding
    included."""
    options = atlas_options(user)
    assert options.padding >= 0 and options.max_width >= 1 and options.max_height >= 1
    frames = [FrameSize(f"f{n}", w, h) for n, (w, h) in enumerate(sizes) if options.fits(w, h)]
    pages = layout_pages(frames, options)
    assert sorted(p.frame for page in pages for p in page) == sorted(f.frame for f in frames)
    border = options.border
    for page in pages:
        for p in page:
            assert p.x - border >= 0 and p.x + p.width + border <= options.max_width
            assert p.y - border >= 0 and p.y + p.height + border <= options.max_height


def test_pipeline_cooks_the_page_and_reruns_byte_identically(atlas_project, tmp_path_factory):
    """`orchestrate run` packs the cooked page into main; a second build writes the same bytes."""
    root = atlas_project["root"]
    work = tmp_path_factory.mktemp("atlas-runs")
    outputs = []
    for run in range(2):
        build = work / f"build{run}.yaml"
        build.write_text(
            yaml.safe_dump(
                {
                    "project": str(root),
                    "source": "cocos",
                    "output": f"out{run}",
                    "cache": f"cache{run}",
                    "executor": {"kind": "local"},
                    "bundles": {"from_meta": True},
                }
            ),
            encoding="utf-8",
        )
        with pytest.raises(SystemExit) as stop:
            main(["run", str(build)])
        assert stop.value.code == 0
        out = work / f"out{run}"
        outputs.append(
            {
                p.relative_to(out).as_posix(): p.read_bytes()
                for p in out.rglob("*")
                if p.is_file() and "reports" not in p.parts
            }
        )
    assert outputs[0] == outputs[1]
    manifest = json.loads(outputs[0]["manifest.json"])
    source = collect_cocos(str(root))
    page = next(a for a in source.pack_hook.data.atlases if a.pac == atlas_project["pac"]).pages[0]
    assert page.image in manifest["bundles"]["main"]["assets"]
    assert manifest["bundles"]["low"]["redirects"][page.texture] == "main"


@pytest.mark.ray
def test_ray_workers_cook_the_same_page_bytes(
    atlas_project, tmp_path_factory, ray_local, monkeypatch
):
    """Cooked on Ray workers (one-unit batches), the outputs equal the local executor's."""
    import orchestrator.executors.ray as ray_executor

    monkeypatch.setattr(ray_executor, "MIN_BATCH_UNITS", 1)
    monkeypatch.setattr(ray_executor, "BATCHES_PER_WORKER", 1000)
    root = atlas_project["root"]
    work = tmp_path_factory.mktemp("atlas-executors")
    outputs = {}
    for executor in ("local", "ray"):
        build = work / f"{executor}.yaml"
        build.write_text(
            yaml.safe_dump(
                {
                    "project": str(root),
                    "source": "cocos",
                    "output": f"out-{executor}",
                    "cache": f"cache-{executor}",
                    "executor": {"kind": executor},
                    "bundles": {"from_meta": True},
                }
            ),
            encoding="utf-8",
        )
        with pytest.raises(SystemExit) as stop:
            main(["run", str(build)])
        assert stop.value.code == 0
        out = work / f"out-{executor}"
        outputs[executor] = {
            p.relative_to(out).as_posix(): p.read_bytes()
            for p in out.rglob("*")
            if p.is_file() and "reports" not in p.parts
        }
    assert outputs["local"] == outputs["ray"]


def test_frames_a_higher_bundle_owns_stay_redirects_with_their_texture_image_and_paths(tmp_path):
    """An auto atlas in a lower bundle's folder whose frames a higher bundle reached first: in the
    lower bundle those frames are redirects, and so are their textures and images, which it keeps
    with their paths (Creator 3.8 lists them in the bundle's `uuids`); only the frames it holds
    itself lose their texture and image to the page."""
    project = CocosProject(tmp_path)
    project.folder("assets/high", bundle="high", priority=9)
    project.folder("assets/low", bundle="low", priority=2)
    project.pac("assets/low/atlas/ui.pac")
    shared = [project.image(f"assets/low/atlas/shared{n}.png", (6, 6)) for n in range(3)]
    own = project.image("assets/low/atlas/own.png", (5, 7))
    project.prefab("assets/high/ui.prefab", [frame(image) for image in shared])
    source, packing = pack_project(tmp_path)
    (atlas,) = source.pack_hook.data.atlases
    (page,) = atlas.pages
    low_redirects = redirects(packing, "low")
    low_paths = packing.bundles["low"].source_fields["paths"]
    for image in shared:
        for asset_id in (frame(image), texture(image), image):
            assert low_redirects.get(asset_id) == "high", asset_id
            assert asset_id in low_paths, asset_id
        assert low_paths[texture(image)] == low_paths[image] + "/texture"
        # The bundle that holds the frame packs it: its texture and image leave that bundle.
        assert frame(image) in packing.bundles["high"].assets
        assert {texture(image), image}.isdisjoint(contents(packing, "high"))
    low_ids = contents(packing, "low")
    assert frame(own) in packing.bundles["low"].assets
    assert {texture(own), own}.isdisjoint(low_ids)
    assert own not in low_paths and texture(own) not in low_paths
    assert low_redirects[page.texture] == "high"
    assert page.image in packing.bundles["high"].assets
