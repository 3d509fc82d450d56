"""The project generator (`orchestrate generate`) and the starter rule library."""

from __future__ import annotations

import json
import re
import struct
from importlib import resources
from pathlib import Path

import pytest
import yaml
from lxml import etree

from stages.sources.messiah.generator import generate_project
from stages.sources.messiah.generator.catalog import (
    DETECTED_BY,
    FACE_BUDGET,
    KNOWN_TYPES,
    MIN_ASSETS,
    PLANT_COUNTS,
    TEXTURE_SIZE_BUDGET,
)

ASSETS = 400
SEED = 11
GUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
GUID_NAME = re.compile(rf"^{GUID_RE.pattern}$")
ATTRIBUTE_FILES = ("resource.xml", "resource", "texture.xml")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return generate_project(tmp_path_factory.mktemp("gen") / "demo", ASSETS, SEED)


@pytest.fixture(scope="module")
def project(generated):
    return _Project(generated.project)


class _Project:
    """A generated project read back independently of the generator, with lxml."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.items: list[dict] = []  # one per Item: repo, GUID, Type, Name, Package, Deps, annos
        for repo_file in sorted(root.glob("*/resource.repository")):
            for item in etree.parse(str(repo_file)).getroot().iterfind("Items/Item"):
                self.items.append(
                    {
                        "repo": repo_file.parent.name,
                        **{tag: item.findtext(tag) for tag in ("GUID", "Type", "Name", "Package")},
                        "Deps": [d.text for d in item.iterfind("Deps")],
                        "SourcePath": item.findtext("Annotation/SourcePath") or "",
                        "annos": [
                            (a.findtext("Key"), a.findtext("Value"))
                            for a in item.iterfind("Annotation/Anno")
                        ],
                    }
                )
        self.by_guid: dict[str, list[dict]] = {}
        for item in self.items:
            self.by_guid.setdefault(item["GUID"], []).append(item)
        self.folders: dict[str, list[Path]] = {}
        for repo_dir in sorted(p.parent for p in root.glob("*/resource.repository")):
            for folder in sorted(p for p in repo_dir.rglob("*") if p.is_dir()):
                if GUID_NAME.match(folder.name):
                    self.folders.setdefault(folder.name, []).append(folder)
        self.worlds = {
            p: [
                Path(lvl.text.replace("\\", "/"))
                for lvl in etree.parse(str(p)).getroot().iterfind("Levels/Level/Path")
            ]
            for p in sorted(root.glob("Worlds/*.iworld"))
        }

    def attribute_file(self, guid: str) -> Path:
        folder = self.folders[guid][0]
        return next(folder / name for name in ATTRIBUTE_FILES if (folder / name).is_file())

    def attribute(self, guid: str) -> etree._Element:
        return etree.parse(str(self.attribute_file(guid))).getroot()

    def used_level_guids(self) -> set[str]:
        return {
            e.text
            for levels in self.worlds.values()
            for level in levels
            for e in etree.parse(str(self.root / level)).getroot().iter()
            if e.text and GUID_NAME.match(e.text)
        }

    def of_type(self, rtype: str) -> list[str]:
        return list(dict.fromkeys(i["GUID"] for i in self.items if i["Type"] == rtype))


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# -- determinism and counts ----------------------------------------------------------------------
def test_same_seed_gives_identical_bytes(generated, tmp_path):
    """Two generations with the same N and seed, in different folders, are byte-identical."""
    again = generate_project(tmp_path / "again", ASSETS, SEED)
    first, second = _tree_bytes(generated.root), _tree_bytes(again.root)
    assert sorted(first) == sorted(second)
    assert [name for name in first if first[name] != second[name]] == []
    assert again.planted == generated.planted


def test_another_seed_gives_another_project(generated, tmp_path):
    """A different seed draws different GUIDs."""
    other = generate_project(tmp_path / "other", ASSETS, SEED + 1)
    assert other.planted["duplicate_guid"] != generated.planted["duplicate_guid"]


def test_counts_match_the_request(generated, project):
    """N distinct GUIDs have items; folders, worlds and the type mix are as reported."""
    assert len(project.by_guid) == ASSETS == generated.counts["resources"]
    assert len(project.items) == generated.counts["items"]
    assert sum(len(f) for f in project.folders.values()) == generated.counts["resource_folders"]
    assert len(project.worlds) == generated.counts["worlds"] >= 2
    assert sum(generated.types.values()) == ASSETS
    textures = generated.types["Texture"] / ASSETS
    assert 0.3 < textures < 0.5 and generated.types["Material"] / ASSETS > 0.12
    assert {"Mesh", "Model", "Effect", "Sound", "Animation", "Skeleton"} <= set(generated.types)


def test_too_small_a_project_is_refused(tmp_path):
    """Below MIN_ASSETS some defects could not be planted: a clear error instead."""
    with pytest.raises(ValueError, match=str(MIN_ASSETS)):
        generate_project(tmp_path / "small", MIN_ASSETS - 1, SEED)


def test_foreign_content_is_never_overwritten(tmp_path):
    """A destination whose project/ was not generated is refused; a generated one is replaced."""
    (tmp_path / "mine" / "project").mkdir(parents=True)
    (tmp_path / "mine" / "project" / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        generate_project(tmp_path / "mine", MIN_ASSETS, SEED)
    first = generate_project(tmp_path / "gen", MIN_ASSETS, SEED)
    stale = first.project / "Repository" / "stale.txt"
    stale.write_text("left over")
    generate_project(tmp_path / "gen", MIN_ASSETS, SEED)
    assert not stale.exists()


# -- format --------------------------------------------------------------------------------------
def test_repositories_parse_and_items_are_complete(project):
    """Every resource.repository parses; every Item has a GUID, Type, Name and Package."""
    repos = {i["repo"] for i in project.items}
    assert repos == {"Repository", "CommonRepository", "DLC_Repository"}
    for item in project.items:
        assert GUID_NAME.match(item["GUID"]) and item["Type"] and item["Name"] and item["Package"]


def test_every_xml_file_parses(generated):
    """Attribute files, worlds and levels are all well-formed XML."""
    suffixes = {".xml", ".iworld", ".ilevel", ".repository"}
    paths = [
        p
        for p in generated.project.rglob("*")
        if p.is_file() and (p.suffix in suffixes or p.name == "resource")
    ]
    assert len(paths) > ASSETS
    for path in paths:
        etree.parse(str(path))


def test_resource_folders_are_guids_with_attribute_files(project):
    """Every GUID-named folder has an attribute file and an item; payloads are beside it."""
    for guid, folders in project.folders.items():
        assert guid in project.by_guid
        for folder in folders:
            names = {p.name for p in folder.iterdir()}
            assert names & set(ATTRIBUTE_FILES), folder
            assert names & {"resource.data", "texture.data"}, folder


def test_levels_referenced_by_worlds_exist(project):
    """Every level path in a world (backslashes read as slashes) names an existing file."""
    levels = [level for levels in project.worlds.values() for level in levels]
    assert levels
    for level in levels:
        assert (project.root / level).is_file(), level
    assert any("\\" in p.read_text(encoding="utf-8") for p in project.worlds)


def test_chinese_paths_exist(generated, project):
    """Some packages, folders and levels have Chinese names, written as UTF-8."""
    cjk = re.compile(r"[\u4e00-\u9fff]")
    assert any(cjk.search(i["Package"]) for i in project.items)
    assert any(cjk.search(str(p)) for p in generated.project.rglob("*.ilevel"))
    assert any(
        cjk.search(folder.as_posix()) for folders in project.folders.values() for folder in folders
    )


def test_texture_attributes_and_tga_sources(project):
    """texture.xml carries the size fields; every source.tga has a real TGA header."""
    sources = 0
    for guid in project.of_type("Texture"):
        root = project.attribute(guid)
        assert root.tag == "Texture" and root.findtext("Width") and root.findtext("Format")
        for source in project.folders[guid][0].glob("source*"):
            header = source.read_bytes()[:18]
            width, height = struct.unpack("<HH", header[12:16])
            image_type, depth = header[2], header[16]
            assert image_type in (2, 10) and depth == 32 and width >= 64 and height >= 64
            sources += 1
    assert sources > 0


def test_payload_sizes_are_realistic(project):
    """Payloads average a few KB; textures are larger than materials."""

    def average(rtype: str) -> float:
        sizes = [
            f.stat().st_size
            for g in project.of_type(rtype)
            for folder in project.folders.get(g, ())
            for f in folder.glob("*.data")
        ]
        return sum(sizes) / len(sizes)

    everything = [
        f.stat().st_size
        for p in project.folders.values()
        for folder in p
        for f in folder.glob("*.data")
    ]
    assert 1024 < sum(everything) / len(everything) < 16 * 1024
    assert average("Texture") > 2 * average("Material")


def test_dependencies_fan_out_and_share(project):
    """Materials depend on textures, models on meshes and materials; some textures are shared."""
    users: dict[str, int] = {}
    for item in project.items:
        for dep in item["Deps"]:
            users[dep] = users.get(dep, 0) + 1
    assert max(users.values()) >= 5
    materials = [i for i in project.items if i["Type"] == "Material"]
    assert sum(len(i["Deps"]) for i in materials) / len(materials) > 1.5
    meshes = [i for i in project.items if i["Type"] == "Mesh"]
    assert any(k == "CollisionShape" for i in meshes for k, _ in i["annos"])


def test_build_file(generated):
    """build.yaml holds the keys docs/build-file.md defines, with the generated worlds as maps."""
    build = yaml.safe_load(generated.build_file.read_text(encoding="utf-8"))
    assert build["project"] == "project"
    worlds = sorted(
        p.relative_to(generated.project).as_posix()
        for p in generated.project.glob("Worlds/*.iworld")
    )
    assert sorted(build["cook"]["maps"]) == worlds
    assert build["cook"]["always_cook"] == ["UI/"] and build["cook"]["never_cook"] == ["Dev/"]
    assert build["rules"] == {
        "files": ["rules.yaml"],
        "fail_on": "error",
        "allow_custom_code": True,
    }
    assert [rule["name"] for rule in build["bundles"]["layout"]] == [
        "maps/{stem}",
        "ui",
        "chars/{package}",
    ]
    assert build["bundles"]["shared_dependencies"] == "extract"
    assert build["archive"] == {"compression": "zstd", "level": 3}
    assert build["hash"] == {"append_hash": True}
    assert (build["output"], build["cache"]) == ("build/out", "build/cache")
    assert build["executor"]["kind"] == "auto"
    assert generated.rules_file.read_bytes() == _starter_path().read_bytes()


def test_build_file_loads_with_the_schema(generated):
    """The build file passes the real schema (orchestrator.core.config)."""
    config = pytest.importorskip(
        "orchestrator.core.config", reason="orchestrator.core.config not available"
    )
    build = config.load_build(generated.build_file)
    assert build is not None


# -- planted defects, checked on disk ------------------------------------------------------------
def test_planted_counts(generated):
    """Each kind is planted the documented number of times; every kind has a detector."""
    per_plant = {"duplicate_name": 2, "dependency_cycle": 3}
    for kind, count in PLANT_COUNTS.items():
        assert len(set(generated.planted[kind])) == count * per_plant.get(kind, 1), kind
    assert set(DETECTED_BY) == set(PLANT_COUNTS)
    data = json.loads((generated.root / "generated.json").read_text(encoding="utf-8"))
    assert data["planted"] == generated.planted


def test_planted_reference_defects_are_on_disk(generated, project):
    """Duplicates, dangling references, missing folders, Dev references: exactly the planted ones."""
    planted = {k: set(v) for k, v in generated.planted.items()}
    referenced = {d for i in project.items for d in i["Deps"]}
    assert {
        g for g, items in project.by_guid.items() if len({i["repo"] for i in items}) > 1
    } == planted["duplicate_guid"]
    assert referenced - set(project.by_guid) == planted["missing_dep"]
    assert set(project.by_guid) - set(project.folders) == planted["item_without_folder"]
    assert project.used_level_guids() - set(project.by_guid) == planted["level_unknown_guid"]
    dev = {g for g, items in project.by_guid.items() if items[0]["Package"].startswith("Dev/")}
    assert {
        d
        for i in project.items
        if not i["Package"].startswith("Dev/")
        for d in i["Deps"]
        if d in dev
    } == planted["never_cook_ref"]
    shapes = {v for i in project.items for k, v in i["annos"] if k == "CollisionShape"}
    assert shapes - set(project.folders) == planted["missing_collision_shape"]
    assert {i["GUID"] for i in project.items if i["Type"] not in KNOWN_TYPES} == planted[
        "unknown_type"
    ]


def test_planted_cycle_is_a_cycle(generated, project):
    """The planted models depend on each other in a ring."""
    ring = generated.planted["dependency_cycle"]
    for member, following in zip(ring, ring[1:] + ring[:1]):
        assert following in project.by_guid[member][0]["Deps"]


def test_planted_attribute_defects_are_on_disk(generated, project):
    """Texture, model and material defects are exactly the planted ones."""
    planted = {k: set(v) for k, v in generated.planted.items()}
    textures = {g: project.attribute(g) for g in project.of_type("Texture") if g in project.folders}
    assert {
        g for g, t in textures.items() if int(t.findtext("Width")) > TEXTURE_SIZE_BUDGET
    } == planted["oversized_texture"]
    assert {g for g, t in textures.items() if t.findtext("Compressed") == "0"} == planted[
        "uncompressed_texture"
    ]
    assert {g for g, t in textures.items() if t.find("MipLevels") is None} == planted[
        "texture_missing_mips"
    ]
    assert {
        g
        for g in project.of_type("Model")
        if g in project.folders
        and any(int(n.text) > FACE_BUDGET for n in project.attribute(g).iter("NumFaces"))
    } == planted["model_over_face_budget"]
    materials = [i for i in project.items if i["Type"] == "Material"]
    misnamed = {i["GUID"] for i in materials if not i["Name"].endswith("_mat")}
    assert misnamed == planted["misnamed_material"]
    assert {i["GUID"] for i in materials if i["SourcePath"]} == planted["material_source_path"]
    effect_deps = {d for i in project.items if i["Type"] == "Effect" for d in i["Deps"]}
    assert {d for d in effect_deps if project.by_guid[d][0]["Type"] != "Texture"} == planted[
        "effect_non_texture_dep"
    ]


def test_planted_name_and_source_defects_are_on_disk(generated, project):
    """Duplicate names within a repository, and source images that disagree with texture.xml."""
    seen: dict[tuple[str, str], list[str]] = {}
    for item in project.items:
        seen.setdefault((item["repo"], item["Name"]), []).append(item["GUID"])
    assert {g for guids in seen.values() if len(guids) > 1 for g in guids} == set(
        generated.planted["duplicate_name"]
    )
    conflicts = set()
    for guid in project.of_type("Texture"):
        for folder in project.folders.get(guid, ()):
            source = folder / "source.tga"
            if source.exists():
                size = struct.unpack("<HH", source.read_bytes()[12:16])
                texture = project.attribute(guid)
                if size != (int(texture.findtext("Width")), int(texture.findtext("Height"))):
                    conflicts.add(guid)
    assert conflicts == set(generated.planted["src_tex_conflict"])


# -- the starter rule library --------------------------------------------------------------------
def _starter_path():
    return resources.files("configs") / "rules" / "messiah-common.yaml"


def test_starter_library_parses_and_rules_are_complete():
    """The library is a YAML list of at least 16 rules, each with id, rpath, xpath and condition."""
    rules = yaml.safe_load(_starter_path().read_text(encoding="utf-8"))
    assert isinstance(rules, list) and len(rules) >= 16
    ids = [rule["id"] for rule in rules]
    assert len(ids) == len(set(ids))
    for rule in rules:
        assert {"id", "name", "rpath", "xpath", "condition"} <= set(rule), rule.get("id")
        assert isinstance(rule["condition"], list) and rule["condition"]
        assert rule.get("severity", "error") in ("error", "warning", "info")
    detectors = {d for kinds in DETECTED_BY.values() for d in kinds if not d.startswith("cook:")}
    assert detectors <= set(ids)


# -- end to end: every planted defect is reported ------------------------------------------------
def _tokens(failure: dict, names: dict[str, set[str]]) -> set[str]:
    """The GUIDs a failure points at: in its source, via and errors (names mapped to GUIDs)."""
    text = " ".join(
        [
            failure["source"] or "",
            failure["via"] or "",
            json.dumps(failure["errors"], ensure_ascii=False),
        ]
    )
    found = set(GUID_RE.findall(text))
    for error in failure["errors"]:
        found |= names.get(str(error), set())
    return found


def test_every_planted_defect_is_reported(generated, project):
    """The starter library reports every planted defect, and nothing else."""
    messiah = pytest.importorskip(
        "stages.sources.messiah.reader", reason="Messiah source not available"
    )
    engine = pytest.importorskip("stages.rules.engine", reason="rule engine not available")
    collected = messiah.collect_project(str(generated.project))
    document = engine.validate_project(
        str(generated.project), [str(generated.rules_file)], collected.index
    )
    assert document["rule_errors"] == []
    names: dict[str, set[str]] = {}
    for item in project.items:
        names.setdefault(item["Name"], set()).add(item["GUID"])
    by_rule: dict[str, set[str]] = {}
    for failure in document["failures"]:
        by_rule.setdefault(failure["rule"], set()).update(_tokens(failure, names))
    all_planted = {g for guids in generated.planted.values() for g in guids}
    for kind, guids in generated.planted.items():
        for rule in (d for d in DETECTED_BY[kind] if not d.startswith("cook:")):
            assert set(guids) <= by_rule.get(rule, set()), (kind, rule)
    for failure in document["failures"]:
        assert _tokens(failure, names) & all_planted, failure


def test_planted_reference_defects_reach_the_cook_list(generated):
    """Duplicates, missing references, never-cook references and the cycle show in the cook list."""
    messiah = pytest.importorskip(
        "stages.sources.messiah.reader", reason="Messiah source not available"
    )
    closure = pytest.importorskip(
        "stages.cooklist.closure", reason="dependency closure not available"
    )
    build = yaml.safe_load(generated.build_file.read_text(encoding="utf-8"))
    collected = messiah.collect_project(str(generated.project))
    cooklist = closure.compute_cooklist(
        collected.assets,
        build["cook"],
        build["bundles"],
        external=collected.external,
        source_roots=collected.roots,
    )
    reports = {
        "ambiguous": set(cooklist.ambiguous),
        "missing": set(cooklist.missing),
        "never_cook_refs": set(cooklist.never_cook_refs),
        "cycles": {g for cycle in cooklist.cycles for g in cycle},
    }
    for kind, guids in generated.planted.items():
        for key in (d.removeprefix("cook:") for d in DETECTED_BY[kind] if d.startswith("cook:")):
            assert set(guids) <= reports[key], (kind, key)
