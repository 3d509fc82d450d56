"""Generate Messiah-style projects (spec/asset-project.md) for the demo, tests and benchmarks.

`generate_project(dest, assets, seed)` writes `<dest>/project/` (repositories, worlds, levels),
`<dest>/build.yaml`, `<dest>/rules.yaml` (the starter rule library) and `<dest>/generated.json`
(what was generated and planted). The output is a pure function of (assets, seed): every random
choice comes from one `random.Random(seed)`, drawn in a fixed order while the project is planned
in memory; writing never draws. Payloads are slices of one random buffer, so 100,000 resources
write in seconds and stay well under 2 GB.

A small, known set of defects is planted (see `PLANT_COUNTS` and `DETECTED_BY`); everything else
is clean against the starter library, so every rule failure on a generated project points at a
planted defect.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
from bisect import bisect
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from itertools import accumulate
from pathlib import Path
from random import Random

MIN_ASSETS = 100

REPOSITORY = "Repository"
COMMON = "CommonRepository"
DLC = "DLC_Repository"
REPOSITORIES = (REPOSITORY, COMMON, DLC)
REPOSITORY_SHARES = {REPOSITORY: 0.60, COMMON: 0.25, DLC: 0.15}
# Which repositories a resource may depend on: the main game and DLC build on the common one.
VISIBLE_REPOSITORIES = {REPOSITORY: (REPOSITORY, COMMON), COMMON: (COMMON,),
                        DLC: (DLC, REPOSITORY, COMMON)}

TYPE_WEIGHTS = {"Texture": 40, "Material": 20, "Mesh": 10, "Model": 10, "Effect": 6, "Sound": 6,
                "Animation": 6, "Skeleton": 2}
KNOWN_TYPES = tuple(TYPE_WEIGHTS)
PLACEABLE_TYPES = ("Model", "Mesh", "Effect", "Sound")

TEXTURE_SIZES = {64: 10, 128: 20, 256: 30, 512: 22, 1024: 13, 2048: 5}
MATERIAL_TEXTURE_COUNTS = {1: 30, 2: 35, 3: 25, 4: 10}
TEXTURE_FORMATS = ("ASTC_6x6", "ASTC_6x6", "ASTC_4x4", "ETC2_RGBA")
TEXTURE_SIZE_BUDGET = 2048  # the starter library's texture-max-size
FACE_BUDGET = 20000  # the starter library's model-face-budget
SOURCE_TGA_MAX_SIZE = 512  # larger sources would make the project too big to be useful

# (package family, variant stems, types it holds, weight within its repository). Families with a
# `{k}` stem get more variants as the project grows, so a package holds ~200 resources.
_ALL = tuple(TYPE_WEIGHTS)
_ART = ("Texture", "Material", "Mesh", "Model")
_CHAR = ("Texture", "Material", "Mesh", "Model", "Animation", "Skeleton")
PACKAGE_FAMILIES = {
    REPOSITORY: (
        ("Characters", ("Hero_{k}", "Npc_{k}", "Monster_{k}", "英雄_{k}", "角色/英雄"), _CHAR, 22),
        ("Environment", ("Forest_{k}", "Desert_{k}", "Town_{k}", "Dungeon_{k}", "城镇_{k}"), _ART, 30),
        ("Props", ("Common_{k}", "Weapons_{k}", "道具_{k}"), _ART, 14),
        ("Effects", ("Fire_{k}", "Magic_{k}", "技能_{k}"), ("Effect", "Texture"), 12),
        ("Audio", ("Music_{k}", "Ambience_{k}", "Voice_{k}"), ("Sound",), 10),
        ("UI", ("Icons_{k}", "HUD_{k}", "图标"), ("Texture", "Material"), 10),
        ("Dev", ("Debug", "Test"), ("Texture", "Material", "Mesh", "Model"), 2),
    ),
    COMMON: (
        ("Common/Textures", ("Set_{k}",), ("Texture",), 35),
        ("Common/Materials", ("Set_{k}",), ("Material",), 17),
        ("Common/Meshes", ("Set_{k}",), ("Mesh", "Model"), 12),
        ("Common/Rigs", ("Set_{k}",), ("Skeleton", "Animation"), 6),
        ("Common", ("Shared", "公共"), ("Texture", "Material", "Mesh"), 10),
        ("Common/Effects", ("Base_{k}",), ("Effect", "Texture"), 8),
        ("Common/Audio", ("Sfx_{k}",), ("Sound",), 12),
    ),
    DLC: (
        ("DLC/Winter", ("Characters_{k}", "Environment_{k}", "Effects_{k}", "Audio"), _ALL, 60),
        ("DLC/春节", ("角色_{k}", "场景_{k}"), _ALL, 40),
    ),
}
RESOURCES_PER_PACKAGE = 200

# Minimum resources of each (type, repository) made before the random ones, so that every
# planter finds candidates even in the smallest project.
GUARANTEED = (
    ("Texture", REPOSITORY, 16), ("Material", REPOSITORY, 8), ("Mesh", REPOSITORY, 10),
    ("Model", REPOSITORY, 9), ("Effect", REPOSITORY, 3), ("Sound", REPOSITORY, 4),
    ("Skeleton", REPOSITORY, 1), ("Animation", REPOSITORY, 1),
    ("Texture", COMMON, 4), ("Material", COMMON, 2), ("Mesh", COMMON, 2), ("Sound", COMMON, 1),
    ("Texture", DLC, 2), ("Material", DLC, 1), ("Model", DLC, 1),
)
GUARANTEED_DEV = (("Material", "Dev/Debug", 2), ("Texture", "Dev/Debug", 1), ("Mesh", "Dev/Test", 1))

PLANT_COUNTS = {
    "duplicate_guid": 2,
    "missing_dep": 2,
    "item_without_folder": 2,
    "level_unknown_guid": 2,
    "oversized_texture": 2,
    "uncompressed_texture": 2,
    "texture_missing_mips": 2,
    "model_over_face_budget": 2,
    "misnamed_material": 2,
    "duplicate_name": 2,  # pairs: both GUIDs of each pair are listed
    "never_cook_ref": 2,
    "dependency_cycle": 1,  # one cycle of three models: its three GUIDs are listed
    "missing_collision_shape": 2,
    "src_tex_conflict": 2,
    "effect_non_texture_dep": 2,
    "unknown_type": 1,
    "material_source_path": 2,
}

# What reports each planted kind: starter-library rule ids, and "cook:<key>" for the cook list.
# `planted[kind]` lists the GUIDs those reports name (the defective resource, or the dangling /
# offending GUID it references).
DETECTED_BY = {
    "duplicate_guid": ("repo-guid-unique", "cook:ambiguous"),
    "missing_dep": ("deps-resolve", "deps-on-disk", "cook:missing"),
    "item_without_folder": ("resource-folder-exists", "level-resources-on-disk", "cook:missing"),
    "level_unknown_guid": ("level-resources-exist", "cook:missing"),
    "oversized_texture": ("texture-max-size",),
    "uncompressed_texture": ("texture-compressed",),
    "texture_missing_mips": ("texture-has-mips",),
    "model_over_face_budget": ("model-face-budget",),
    "misnamed_material": ("material-naming",),
    "duplicate_name": ("names-unique",),
    "never_cook_ref": ("no-dev-deps", "cook:never_cook_refs"),
    "dependency_cycle": ("no-dependency-cycles", "cook:cycles"),
    "missing_collision_shape": ("collision-shapes-exist", "cook:missing"),
    "src_tex_conflict": ("texture-source-size",),
    "effect_non_texture_dep": ("effect-deps-are-textures",),
    "unknown_type": ("known-types",),
    "material_source_path": ("material-no-source-path",),
}

WORLD_NAMES = ("Town", "Forest", "Dungeon", "Desert", "Castle", "Harbor", "Snowfield", "Swamp",
               "Canyon", "Temple", "Volcano", "Island")
STARTER_RULES = ("rules", "messiah-common.yaml")
PAYLOAD_POOL_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 128 << 10
XML_HEAD = '<?xml version="1.0" encoding="utf-8"?>\n'


@dataclass(frozen=True)
class GeneratedProject:
    """What `generate_project` wrote: paths, counts, and the planted defects by kind."""

    root: Path  # the destination folder
    project: Path  # <root>/project, the `project:` of the build file
    build_file: Path
    rules_file: Path
    counts: dict[str, int]
    types: dict[str, int]
    planted: dict[str, list[str]]


@dataclass(slots=True)
class _Resource:
    """One planned resource (one Item, and its folder unless `has_folder` is false)."""

    guid: str
    type: str
    repo: str
    package: str
    name: str
    deps: list[str] = field(default_factory=list)
    annos: list[tuple[str, str]] = field(default_factory=list)
    attrs: dict = field(default_factory=dict)  # type-specific attribute-file values
    payload: tuple[int, int] = (0, 0)  # (offset, size) in the payload pool
    source_path: str = ""
    created: int = 0
    has_folder: bool = True
    collision: bool = False  # a collision mesh (target of CollisionShape annotations)


@dataclass(slots=True)
class _Level:
    path: str  # project-relative
    entities: list[tuple[str, str, tuple[float, float, float]]] = field(default_factory=list)


def generate_project(dest: str | Path, assets: int, seed: int, *,
                     overwrite: bool = True) -> GeneratedProject:
    """Write a project of `assets` resources (distinct GUIDs) under `dest`, deterministically."""
    if assets < MIN_ASSETS:
        raise ValueError(f"a generated project needs at least {MIN_ASSETS} assets, got {assets}")
    root = Path(dest)
    _prepare_destination(root, overwrite)
    plan = _Planner(assets, seed).plan()
    writer = _Writer(root / "project", plan)
    writer.write()
    rules_file = root / "rules.yaml"
    rules_file.write_bytes(starter_rules_bytes())
    build_file = root / "build.yaml"
    build_file.write_text(_build_yaml(plan.worlds), encoding="utf-8")
    counts = _counts(plan, writer)
    (root / "generated.json").write_text(json.dumps(
        {"assets": assets, "seed": seed, "counts": counts, "types": plan.type_counts(),
         "planted": plan.planted}, indent=1, ensure_ascii=False, sort_keys=True) + "\n",
        encoding="utf-8")
    return GeneratedProject(root=root, project=root / "project", build_file=build_file,
                            rules_file=rules_file, counts=counts, types=plan.type_counts(),
                            planted={k: list(v) for k, v in plan.planted.items()})


def starter_rules_bytes() -> bytes:
    """The starter rule library (configs/rules/messiah-common.yaml), as shipped in the wheel."""
    return resources.files("configs").joinpath(*STARTER_RULES).read_bytes()


def _prepare_destination(root: Path, overwrite: bool) -> None:
    # Only a previous generation (marked by generated.json) is ever deleted: never user content.
    project = root / "project"
    if project.exists() and any(project.iterdir()):
        if not (overwrite and (root / "generated.json").is_file()):
            raise FileExistsError(f"{project} exists and is not a generated project; "
                                  "choose an empty destination")
        shutil.rmtree(project)
    root.mkdir(parents=True, exist_ok=True)


def _counts(plan: _Plan, writer: _Writer) -> dict[str, int]:
    return {
        "resources": len({r.guid for r in plan.resources}),
        "items": len(plan.resources),
        "resource_folders": sum(1 for r in plan.resources if r.has_folder),
        "repositories": len(REPOSITORIES),
        "packages": len({(r.repo, r.package) for r in plan.resources}),
        "worlds": len(plan.worlds),
        "levels": len(plan.levels),
        "levels_used": len({p for levels in plan.worlds.values() for p in levels}),
        "entities": sum(len(level.entities) for level in plan.levels.values()),
        "files": writer.files,
        "bytes": writer.bytes,
    }


# -- planning -----------------------------------------------------------------------------------
@dataclass
class _Plan:
    resources: list[_Resource]
    worlds: dict[str, list[str]]  # world path -> level paths (project-relative)
    levels: dict[str, _Level]
    backslash_worlds: set[str]
    planted: dict[str, list[str]]
    pool_seed: int

    def type_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        seen: set[str] = set()
        for resource in self.resources:
            if resource.guid not in seen:
                seen.add(resource.guid)
                counts[resource.type] = counts.get(resource.type, 0) + 1
        return dict(sorted(counts.items()))


class _Planner:
    """Draws the whole project in memory, in a fixed order, from one Random(seed)."""

    def __init__(self, assets: int, seed: int) -> None:
        self.assets = assets
        self.rng = Random(seed)
        self.guids: set[str] = set()
        self.resources: list[_Resource] = []
        self.serial = 0
        self.packages = self._make_packages()
        self.levels: dict[str, _Level] = {}
        self.worlds: dict[str, list[str]] = {}
        self.backslash_worlds: set[str] = set()
        self.used: set[str] = set()  # GUIDs already given a defect
        self.planted: dict[str, list[str]] = {}

    def plan(self) -> _Plan:
        self._make_resources()
        self._wire_dependencies()
        self._make_maps()
        self._plant_defects()
        return _Plan(self.resources, self.worlds, self.levels, self.backslash_worlds,
                     self.planted, self.rng.getrandbits(64))

    # -- identities --------------------------------------------------------------------------
    def new_guid(self) -> str:
        while True:
            guid = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            if guid not in self.guids:
                self.guids.add(guid)
                return guid

    def new_name(self, rtype: str, package: str) -> str:
        # A global serial keeps names unique within every repository (names-unique).
        self.serial += 1
        stem = package.replace("/Set_", "_").rsplit("/", 1)[-1].split("_")[0].lower()
        prefix = {"Texture": "tex", "Material": "", "Mesh": "mesh", "Model": "mdl",
                  "Effect": "fx", "Sound": "sfx", "Animation": "anim", "Skeleton": "skel"}[rtype]
        base = f"{stem}_{self.serial:06d}"
        return f"{base}_mat" if rtype == "Material" else f"{prefix}_{base}"

    # -- packages ----------------------------------------------------------------------------
    def _make_packages(self) -> dict[tuple[str, str], tuple[list[str], list[float]]]:
        """(repository, type) -> (packages, cumulative weights) to draw a package from."""
        table: dict[tuple[str, str], tuple[list[str], list[float]]] = {}
        for repo, families in PACKAGE_FAMILIES.items():
            total = sum(f[3] for f in families)
            for family, stems, types, weight in families:
                share = self.assets * REPOSITORY_SHARES[repo] * weight / total
                variants = max(1, round(share / len(stems) / RESOURCES_PER_PACKAGE))
                names = [f"{family}/{stem.format(k=f'{k:02d}')}" for stem in stems
                         for k in (range(1, variants + 1) if "{k}" in stem else (0,))]
                for rtype in types:
                    packages, cum = table.setdefault((repo, rtype), ([], []))
                    for name in names:
                        packages.append(name)
                        cum.append((cum[-1] if cum else 0.0) + weight / len(names))
        return table

    def pick_package(self, repo: str, rtype: str, allow_dev: bool = False) -> str:
        packages, cum = self.packages[(repo, rtype)]
        while True:
            package = packages[bisect(cum, self.rng.random() * cum[-1])]
            if allow_dev or not package.startswith("Dev/"):
                return package

    # -- resources ---------------------------------------------------------------------------
    def _make_resources(self) -> None:
        for rtype, repo, count in GUARANTEED:
            for _ in range(count):
                self.add_resource(rtype, repo, self.pick_package(repo, rtype))
        for rtype, package, count in GUARANTEED_DEV:
            for _ in range(count):
                self.add_resource(rtype, REPOSITORY, package)
        for _ in range(self.assets - len(self.resources)):
            repo = self.weighted(REPOSITORY_SHARES)
            rtype = self.weighted(TYPE_WEIGHTS)
            self.add_resource(rtype, repo, self.pick_package(repo, rtype, allow_dev=True))

    def weighted(self, weights: dict):
        """A key of `weights` drawn in proportion to its value (cheaper than Random.choices)."""
        keys, cum = _CUMULATIVE[id(weights)]
        return keys[bisect(cum, self.rng.random() * cum[-1])]

    def add_resource(self, rtype: str, repo: str, package: str) -> _Resource:
        rng = self.rng
        resource = _Resource(self.new_guid(), rtype, repo, package, self.new_name(rtype, package),
                             created=1_600_000_000 + rng.randrange(100_000_000))
        size = _ATTRIBUTE_DRAWS[rtype](self, resource)
        resource.payload = (rng.randrange(PAYLOAD_POOL_BYTES), size)
        self.resources.append(resource)
        return resource

    def _draw_texture(self, r: _Resource) -> int:
        rng = self.rng
        width = self.weighted(TEXTURE_SIZES)
        height = width if rng.random() < 0.8 else max(64, width // 2)
        r.attrs = {"Width": width, "Height": height, "Format": rng.choice(TEXTURE_FORMATS),
                   "Compressed": 1, "MipLevels": max(width, height).bit_length(),
                   "source": None}
        if width <= SOURCE_TGA_MAX_SIZE and rng.random() < 0.35:
            r.attrs["source"] = (width, height, rng.randbytes(4))
        return _jitter(rng, max(1024, width * height // 64))

    def _draw_material(self, r: _Resource) -> int:
        rng = self.rng
        r.attrs = {"Shader": rng.choice(("PBR_Standard", "PBR_Skin", "Unlit", "Foliage", "Water")),
                   "Roughness": round(rng.random(), 2), "Metallic": round(rng.random(), 2)}
        return rng.randrange(256, 1024)

    def _draw_mesh(self, r: _Resource) -> int:
        rng = self.rng
        r.collision = rng.random() < 0.25
        faces = rng.randrange(12, 200) if r.collision else rng.randrange(200, 12000)
        if r.collision:
            r.name += "_col"
        r.attrs = {"NumFaces": faces, "NumVertices": faces * 3 // 2 + rng.randrange(8)}
        return rng.randrange(512, 2048) if r.collision else rng.randrange(1024, 12288)

    def _draw_model(self, r: _Resource) -> int:
        rng = self.rng
        lods = 1 if rng.random() < 0.7 else 2
        faces = rng.randrange(300, int(FACE_BUDGET * 0.9))
        r.attrs = {"entities": [[faces // (2 ** lod), None] for lod in range(lods)]}
        if rng.random() < 0.3:
            r.annos.append(("LODGroup", rng.choice(("High", "Medium", "Low"))))
        return rng.randrange(512, 2048)

    def _draw_effect(self, r: _Resource) -> int:
        rng = self.rng
        emitters = ("flame", "smoke", "sparks", "glow", "debris", "trail")
        r.attrs = {"emitters": rng.sample(emitters, rng.randint(1, 3))}
        return rng.randrange(1024, 4096)

    def _draw_sound(self, r: _Resource) -> int:
        rng = self.rng
        r.attrs = {"Duration": round(rng.uniform(0.2, 90.0), 2), "Channels": rng.choice((1, 2)),
                   "SampleRate": rng.choice((22050, 44100, 48000))}
        return rng.randrange(2048, 16384)

    def _draw_animation(self, r: _Resource) -> int:
        r.attrs = {"Frames": self.rng.randrange(10, 400), "Skeleton": None}
        return self.rng.randrange(2048, 12288)

    def _draw_skeleton(self, r: _Resource) -> int:
        r.attrs = {"NumBones": self.rng.randrange(8, 120)}
        return self.rng.randrange(1024, 3072)

    # -- dependencies ------------------------------------------------------------------------
    def _wire_dependencies(self) -> None:
        pools = _Pools(self.resources)
        wire = {"Material": self._wire_material, "Mesh": self._wire_mesh,
                "Model": self._wire_model, "Effect": self._wire_effect,
                "Animation": self._wire_animation}
        for resource in self.resources:
            if resource.type in wire:
                wire[resource.type](resource, pools)

    def pick_dep(self, r: _Resource, rtype: str, pools: _Pools) -> str | None:
        # Mostly from the same package, sometimes a widely shared common asset, else anything
        # visible from the resource's repository.
        roll = self.rng.random()
        same = pools.by_package.get((r.repo, r.package, rtype), ())
        if roll < 0.5 and same:
            target = same[self.rng.randrange(len(same))]
        elif roll < 0.7 and pools.hot.get(rtype):
            hot = pools.hot[rtype]
            target = hot[self.rng.randrange(len(hot))]
        else:
            visible = pools.visible.get((r.repo, rtype), ())
            if not visible:
                return None
            target = visible[self.rng.randrange(len(visible))]
        return None if target.guid == r.guid else target.guid

    def add_deps(self, r: _Resource, rtype: str, count: int, pools: _Pools) -> list[str]:
        added = []
        for _ in range(count):
            guid = self.pick_dep(r, rtype, pools)
            if guid and guid not in r.deps:
                r.deps.append(guid)
                added.append(guid)
        return added

    def _wire_material(self, r: _Resource, pools: _Pools) -> None:
        self.add_deps(r, "Texture", self.weighted(MATERIAL_TEXTURE_COUNTS), pools)

    def _wire_mesh(self, r: _Resource, pools: _Pools) -> None:
        if r.collision:
            return
        self.add_deps(r, "Material", self.rng.randint(1, 2), pools)
        if self.rng.random() < 0.6:
            shapes = pools.collision.get((r.repo, r.package)) or pools.collision.get(r.repo)
            if shapes:
                r.annos.append(("CollisionShape", shapes[self.rng.randrange(len(shapes))].guid))

    def _wire_model(self, r: _Resource, pools: _Pools) -> None:
        self.add_deps(r, "Mesh", self.rng.randint(1, 3), pools)
        materials = self.add_deps(r, "Material", self.rng.randint(1, 2), pools)
        if r.package.startswith(("Characters/", "DLC/")) and self.rng.random() < 0.5:
            self.add_deps(r, "Skeleton", 1, pools)
            self.add_deps(r, "Animation", self.rng.randint(1, 3), pools)
        for entity in r.attrs["entities"]:
            # A model's attribute file names its material: usually one of its Deps, sometimes
            # another one, which is then only a soft reference.
            if materials and self.rng.random() < 0.9:
                entity[1] = materials[self.rng.randrange(len(materials))]
            else:
                entity[1] = self.pick_dep(r, "Material", pools)

    def _wire_effect(self, r: _Resource, pools: _Pools) -> None:
        self.add_deps(r, "Texture", self.rng.randint(1, 3), pools)

    def _wire_animation(self, r: _Resource, pools: _Pools) -> None:
        skeletons = self.add_deps(r, "Skeleton", 1, pools)
        r.attrs["Skeleton"] = skeletons[0] if skeletons else None

    # -- worlds and levels -------------------------------------------------------------------
    def _make_maps(self) -> None:
        rng = self.rng
        world_count = max(2, min(len(WORLD_NAMES), self.assets // 5000 + 2))
        shared = "Levels/Shared/Lobby.ilevel"
        self.levels[shared] = _Level(shared)
        for index, world in enumerate(WORLD_NAMES[:world_count]):
            count = rng.randint(2, 5)
            levels = [f"Levels/{world}/{world}_{i:02d}.ilevel" for i in range(1, count + 1)]
            if index == 0:
                levels.append(f"Levels/{world}/{world}_广场.ilevel")  # a Chinese level name
            if index < 2 or rng.random() < 0.4:
                levels.append(shared)
            for path in levels:
                self.levels.setdefault(path, _Level(path))
            self.worlds[f"Worlds/{world}.iworld"] = levels
        # The last world was saved on Windows: its level paths use backslashes.
        self.backslash_worlds = {f"Worlds/{WORLD_NAMES[world_count - 1]}.iworld"}
        for i in range(1, 3):  # levels no world uses: not part of any cook
            path = f"Levels/Archive/Old_{i:02d}.ilevel"
            self.levels[path] = _Level(path)
        self._place_entities()

    def _place_entities(self) -> None:
        placeable = [r for r in self.resources
                     if r.type in PLACEABLE_TYPES and not r.collision and not _is_dev(r)]
        paths = list(self.levels)
        for i in range(max(2 * len(paths), self.assets // 4)):
            # Every level gets entities; after one round, levels are drawn at random.
            level = self.levels[paths[i] if i < len(paths) else self.rng.choice(paths)]
            self.place(level, placeable[self.rng.randrange(len(placeable))])

    def place(self, level: _Level, resource: _Resource | None, guid: str | None = None) -> None:
        rng = self.rng
        name = f"{resource.name if resource else 'entity'}_{len(level.entities):04d}"
        position = (round(rng.uniform(-500, 500), 2), round(rng.uniform(0, 50), 2),
                    round(rng.uniform(-500, 500), 2))
        level.entities.append((name, guid or resource.guid, position))

    def place_in_used_level(self, resource: _Resource | None, guid: str | None = None) -> None:
        used = sorted({p for levels in self.worlds.values() for p in levels})
        self.place(self.levels[self.rng.choice(used)], resource, guid)

    # -- planted defects ---------------------------------------------------------------------
    def _plant_defects(self) -> None:
        self.by_type: dict[str, list[_Resource]] = {}
        for resource in self.resources:
            self.by_type.setdefault(resource.type, []).append(resource)
        for kind, count in PLANT_COUNTS.items():
            self.planted[kind] = []
            for _ in range(count):
                self.planted[kind].extend(_PLANTERS[kind](self))

    def pick(self, rtype: str, predicate=lambda r: True) -> _Resource:
        """A random resource of `rtype`, not yet given a defect nor in Dev/, that fits `predicate`."""
        pool = self.by_type[rtype]

        def fits(r: _Resource) -> bool:
            return r.guid not in self.used and not _is_dev(r) and predicate(r)

        # Random probes find a fit at once in big projects; small ones fall back to a scan.
        for _ in range(64):
            chosen = pool[self.rng.randrange(len(pool))]
            if fits(chosen):
                break
        else:
            candidates = [r for r in pool if fits(r)]
            if not candidates:
                raise RuntimeError(f"not enough {rtype} resources to plant every defect")
            chosen = candidates[self.rng.randrange(len(candidates))]
        self.used.add(chosen.guid)
        return chosen

    def plant_duplicate_guid(self) -> list[str]:
        # A texture copied into CommonRepository with its GUID kept (a bad merge). Not UI or
        # Characters, so the copies never fall into two bundle-layout rules.
        original = self.pick("Texture", lambda r: r.repo == REPOSITORY
                             and r.package.startswith(("Environment/", "Props/")))
        copy = _Resource(original.guid, "Texture", COMMON, "Common/Shared",
                         self.new_name("Texture", "Common/Shared"), attrs=dict(original.attrs),
                         payload=original.payload, created=original.created)
        self.resources.append(copy)
        self.place_in_used_level(original)
        return [original.guid]

    def plant_missing_dep(self) -> list[str]:
        material = self.pick("Material")
        missing = self.new_guid()
        material.deps.append(missing)
        self.place_in_used_level(material)
        return [missing]

    def plant_item_without_folder(self) -> list[str]:
        sound = self.pick("Sound")
        sound.has_folder = False
        self.place_in_used_level(sound)
        return [sound.guid]

    def plant_level_unknown_guid(self) -> list[str]:
        unknown = self.new_guid()
        self.place_in_used_level(None, unknown)
        return [unknown]

    def plant_oversized_texture(self) -> list[str]:
        texture = self.pick("Texture", lambda r: r.attrs["source"] is None)
        texture.attrs.update(Width=4096, Height=4096, MipLevels=13)
        texture.payload = (texture.payload[0], MAX_PAYLOAD_BYTES)
        return [texture.guid]

    def plant_uncompressed_texture(self) -> list[str]:
        texture = self.pick("Texture")
        texture.attrs.update(Format="RGBA8", Compressed=0)
        return [texture.guid]

    def plant_texture_missing_mips(self) -> list[str]:
        texture = self.pick("Texture")
        texture.attrs["MipLevels"] = None
        return [texture.guid]

    def plant_model_over_face_budget(self) -> list[str]:
        model = self.pick("Model")
        model.attrs["entities"][0][0] = FACE_BUDGET + self.rng.randrange(1, 4 * FACE_BUDGET)
        return [model.guid]

    def plant_misnamed_material(self) -> list[str]:
        material = self.pick("Material")
        material.name = material.name.removesuffix("_mat") + "_Material"
        return [material.guid]

    def plant_duplicate_name(self) -> list[str]:
        first = self.pick("Mesh", lambda r: r.repo == REPOSITORY)
        second = self.pick("Mesh", lambda r: r.repo == REPOSITORY and r.package != first.package)
        second.name = first.name
        return [first.guid, second.guid]

    def plant_never_cook_ref(self) -> list[str]:
        taken = self.planted["never_cook_ref"]
        dev = [r for r in self.resources
               if _is_dev(r) and r.type == "Material" and r.guid not in taken]
        target = dev[self.rng.randrange(len(dev))]
        model = self.pick("Model", lambda r: r.repo == REPOSITORY)
        model.deps.append(target.guid)
        self.place_in_used_level(model)
        return [target.guid]

    def plant_dependency_cycle(self) -> list[str]:
        models = [self.pick("Model", lambda r: r.repo == REPOSITORY) for _ in range(3)]
        for model, target in zip(models, models[1:] + models[:1]):
            model.deps.append(target.guid)  # a model used as another's attachment
        self.place_in_used_level(models[0])
        return [m.guid for m in models]

    def plant_missing_collision_shape(self) -> list[str]:
        mesh = self.pick("Mesh", lambda r: not r.collision)
        missing = self.new_guid()
        mesh.annos = [a for a in mesh.annos if a[0] != "CollisionShape"]
        mesh.annos.append(("CollisionShape", missing))
        self.place_in_used_level(mesh)
        return [missing]

    def plant_src_tex_conflict(self) -> list[str]:
        # The artist doubled the source image and never re-imported it.
        texture = self.pick("Texture", lambda r: max(r.attrs["Width"], r.attrs["Height"])
                            <= SOURCE_TGA_MAX_SIZE // 2)
        texture.attrs["source"] = (texture.attrs["Width"] * 2, texture.attrs["Height"] * 2,
                                   self.rng.randbytes(4))
        return [texture.guid]

    def plant_effect_non_texture_dep(self) -> list[str]:
        effect = self.pick("Effect", lambda r: r.repo == REPOSITORY)
        material = self.pick("Material", lambda r: r.repo in (REPOSITORY, COMMON))
        effect.deps.append(material.guid)
        return [material.guid]

    def plant_unknown_type(self) -> list[str]:
        sound = self.pick("Sound")
        sound.type = "SoundBank_Legacy"  # a type retired from the engine
        return [sound.guid]

    def plant_material_source_path(self) -> list[str]:
        material = self.pick("Material")
        material.source_path = f"D:/art/materials/{material.name}.psd"
        return [material.guid]


_ATTRIBUTE_DRAWS = {"Texture": _Planner._draw_texture, "Material": _Planner._draw_material,
                    "Mesh": _Planner._draw_mesh, "Model": _Planner._draw_model,
                    "Effect": _Planner._draw_effect, "Sound": _Planner._draw_sound,
                    "Animation": _Planner._draw_animation, "Skeleton": _Planner._draw_skeleton}
_CUMULATIVE = {id(table): (list(table), list(accumulate(table.values())))
               for table in (REPOSITORY_SHARES, TYPE_WEIGHTS, TEXTURE_SIZES, MATERIAL_TEXTURE_COUNTS)}
_PLANTERS = {kind: getattr(_Planner, f"plant_{kind}") for kind in PLANT_COUNTS}


class _Pools:
    """Dependency targets by type: per package, per visible repositories, and a hot shared set."""

    def __init__(self, resources: list[_Resource]) -> None:
        self.by_package: dict[tuple[str, str, str], list[_Resource]] = {}
        by_repo: dict[tuple[str, str], list[_Resource]] = {}
        self.collision: dict = {}
        for r in resources:
            if _is_dev(r):
                continue  # nothing outside Dev/ may depend on Dev/ (never_cook)
            if r.collision:
                self.collision.setdefault((r.repo, r.package), []).append(r)
                self.collision.setdefault(r.repo, []).append(r)
                continue
            self.by_package.setdefault((r.repo, r.package, r.type), []).append(r)
            by_repo.setdefault((r.repo, r.type), []).append(r)
        self.visible = {(repo, rtype): [r for seen in VISIBLE_REPOSITORIES[repo]
                                        for r in by_repo.get((seen, rtype), ())]
                        for repo in REPOSITORIES for rtype in KNOWN_TYPES}
        # A few common textures and materials that half the project uses (white, flat normal…).
        self.hot = {rtype: pool[:max(2, len(pool) // 50)]
                    for rtype in ("Texture", "Material")
                    if (pool := by_repo.get((COMMON, rtype), []))}


def _is_dev(r: _Resource) -> bool:
    return r.package.startswith("Dev/")


def _jitter(rng: Random, size: int) -> int:
    return min(MAX_PAYLOAD_BYTES, int(size * rng.uniform(0.85, 1.15)))


# -- rendering ----------------------------------------------------------------------------------
# XML is built as strings: every value is generated here and holds none of & < > " (checked by
# the tests, which parse every file), and string building is many times faster than lxml trees.
def _item_xml(r: _Resource) -> str:
    deps = "".join(f"      <Deps>{d}</Deps>\n" for d in r.deps)
    annos = "".join(f"        <Anno>\n          <Key>{k}</Key>\n          <Value>{v}</Value>\n"
                    f"        </Anno>\n" for k, v in r.annos)
    source = f"<SourcePath>{r.source_path}</SourcePath>" if r.source_path else "<SourcePath />"
    return (f"    <Item>\n      <Type>{r.type}</Type>\n      <Flags>0</Flags>\n"
            f"      <GUID>{r.guid}</GUID>\n      <Package>{r.package}</Package>\n"
            f"      <Class>{r.type}</Class>\n{deps}      <Name>{r.name}</Name>\n"
            f"      <Annotation>\n        {source}\n        <CreationTime>{r.created}</CreationTime>\n"
            f"{annos}      </Annotation>\n    </Item>\n")


def _repository_xml(items: list[_Resource]) -> str:
    return (XML_HEAD + "<Repository>\n  <Items>\n" + "".join(map(_item_xml, items))
            + "  </Items>\n</Repository>\n")


def _texture_xml(r: _Resource) -> str:
    a = r.attrs
    mips = "" if a["MipLevels"] is None else f"  <MipLevels>{a['MipLevels']}</MipLevels>\n"
    return (f"{XML_HEAD}<Texture>\n  <Width>{a['Width']}</Width>\n  <Height>{a['Height']}</Height>\n"
            f"  <Format>{a['Format']}</Format>\n  <Compressed>{a['Compressed']}</Compressed>\n"
            f"{mips}</Texture>\n")


def _resource_xml(r: _Resource, body: str) -> str:
    return f'{XML_HEAD}<Resource Type="{r.type}" Name="{r.name}">\n{body}</Resource>\n'


def _material_body(r: _Resource) -> str:
    a = r.attrs
    return (f"  <MaterialInfo>\n    <Shader>{a['Shader']}</Shader>\n    <Params>\n"
            f"      <Param Name=\"Roughness\">{a['Roughness']}</Param>\n"
            f"      <Param Name=\"Metallic\">{a['Metallic']}</Param>\n    </Params>\n"
            f"  </MaterialInfo>\n")


def _mesh_body(r: _Resource) -> str:
    return (f"  <MeshInfo>\n    <NumVertices>{r.attrs['NumVertices']}</NumVertices>\n"
            f"    <NumFaces>{r.attrs['NumFaces']}</NumFaces>\n  </MeshInfo>\n")


def _model_body(r: _Resource) -> str:
    entities = "".join(
        f"      <Entity>\n        <NumFaces>{faces}</NumFaces>\n"
        + (f"        <Material>{material}</Material>\n" if material else "")
        + "      </Entity>\n"
        for faces, material in r.attrs["entities"])
    return f"  <ModelInfo>\n    <Root>\n{entities}    </Root>\n  </ModelInfo>\n"


def _effect_body(r: _Resource) -> str:
    emitters = "".join(f"    <Emitter><Name>{e}</Name></Emitter>\n" for e in r.attrs["emitters"])
    return f"  <Emitters>\n{emitters}  </Emitters>\n"


def _sound_body(r: _Resource) -> str:
    a = r.attrs
    return (f"  <SoundInfo>\n    <Duration>{a['Duration']}</Duration>\n"
            f"    <Channels>{a['Channels']}</Channels>\n"
            f"    <SampleRate>{a['SampleRate']}</SampleRate>\n"
            f"  </SoundInfo>\n")


def _animation_body(r: _Resource) -> str:
    skeleton = r.attrs["Skeleton"]
    return (f"  <AnimationInfo>\n    <Frames>{r.attrs['Frames']}</Frames>\n"
            + (f"    <Skeleton>{skeleton}</Skeleton>\n" if skeleton else "")
            + "  </AnimationInfo>\n")


def _skeleton_body(r: _Resource) -> str:
    return f"  <SkeletonInfo>\n    <NumBones>{r.attrs['NumBones']}</NumBones>\n  </SkeletonInfo>\n"


_BODIES = {"Material": _material_body, "Mesh": _mesh_body, "Model": _model_body,
           "Effect": _effect_body, "Sound": _sound_body, "Animation": _animation_body,
           "Skeleton": _skeleton_body}


def _attribute_file(r: _Resource) -> tuple[str, str]:
    """(file name, XML text) of a resource's attribute file."""
    if r.type == "Texture":
        return "texture.xml", _texture_xml(r)
    body = _BODIES.get(r.type, _sound_body)(r)  # the retired SoundBank_Legacy keeps its body
    # Skeletons come from an old exporter that writes `resource` without an extension.
    return ("resource" if r.type == "Skeleton" else "resource.xml"), _resource_xml(r, body)


def _tga_rle(width: int, height: int, pixel: bytes) -> bytes:
    """A valid run-length-encoded 32-bit TGA of one colour (tiny, whatever its size)."""
    header = struct.pack("<BBBHHBHHHHBB", 0, 0, 10, 0, 0, 0, 0, 0, width, height, 32, 0x28)
    run = min(128, width)  # runs never cross a scanline
    return header + (bytes([0x80 | (run - 1)]) + pixel) * (width * height // run)


def _wav_header(r: _Resource) -> bytes:
    channels, rate = r.attrs["Channels"], r.attrs["SampleRate"]
    data = int(r.attrs["Duration"] * rate) * channels * 2
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVEfmt "
            + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * 2, channels * 2, 16)
            + b"data" + struct.pack("<I", data))


def _world_xml(levels: list[str], backslashes: bool) -> str:
    paths = [p.replace("/", "\\") if backslashes else p for p in levels]
    rows = "".join(f"    <Level><Path>{p}</Path></Level>\n" for p in paths)
    return f"{XML_HEAD}<World>\n  <Levels>\n{rows}  </Levels>\n</World>\n"


def _level_xml(level: _Level) -> str:
    rows = "".join(
        f"    <Entity><Name>{name}</Name><Resource>{guid}</Resource>"
        f"<Position>{x} {y} {z}</Position></Entity>\n"
        for name, guid, (x, y, z) in level.entities)
    return f"{XML_HEAD}<Level>\n  <Entities>\n{rows}  </Entities>\n</Level>\n"


def _build_yaml(worlds: dict[str, list[str]]) -> str:
    maps = "".join(f"    - {w}\n" for w in worlds)
    return f"""\
# Generated by `orchestrate generate`: cooks every world plus the UI, validates with the starter
# rule library (rules.yaml), packs maps, UI and characters into bundles.
project: project
source: messiah
platform: generic

cook:
  maps:
{maps}  always_cook: [UI/]
  never_cook: [Dev/]
  follow_soft_references: true
  fail_on_missing: false

rules:
  files: [rules.yaml]
  fail_on: error
  allow_custom_code: true

bundles:
  layout:
    - name: "maps/{{stem}}"
      maps: all
    - name: ui
      include: ["UI/**"]
    - name: "chars/{{package}}"
      include: ["Characters/**"]
  shared_dependencies: extract

archive:
  compression: zstd
  level: 3

hash:
  append_hash: true

link_xml:
  assembly: Messiah.Runtime

output: build/out
cache: build/cache

executor:
  kind: auto
"""


# -- writing ------------------------------------------------------------------------------------
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
WRITE_THREADS = 4
WRITE_CHUNK = 2000


def _put(path: str, data: bytes | memoryview) -> None:
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    try:
        written = os.write(fd, data)
        while written < len(data):  # a short write (rare on regular files): finish it
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)


class _Writer:
    """Writes a plan to disk with as little Python per file as possible (no fsync)."""

    def __init__(self, project: Path, plan: _Plan) -> None:
        self.project = str(project)
        self.plan = plan
        self.files = 0
        self.bytes = 0
        # One buffer of random bytes; payloads are views into it (cheap and deterministic).
        pool_size = PAYLOAD_POOL_BYTES + MAX_PAYLOAD_BYTES
        self.pool = memoryview(Random(plan.pool_seed).randbytes(pool_size))

    def write(self) -> None:
        os.makedirs(self.project, exist_ok=True)
        self.write_repositories()
        self.write_resource_folders()
        self.write_maps()

    def put(self, path: str, data: bytes | memoryview) -> None:
        _put(path, data)
        self.files += 1
        self.bytes += len(data)

    def write_repositories(self) -> None:
        for repo in REPOSITORIES:
            items = [r for r in self.plan.resources if r.repo == repo]
            os.makedirs(f"{self.project}/{repo}", exist_ok=True)
            text = _repository_xml(items).encode("utf-8")
            if repo == DLC:
                text = b"\xef\xbb\xbf" + text  # this one was saved by a Windows tool, with a BOM
            self.put(f"{self.project}/{repo}/resource.repository", text)

    def write_resource_folders(self) -> None:
        # Creating files is nearly all kernel time, and os calls release the GIL: a few threads
        # keep every core busy. Each thread returns its own counts; the bytes are the same.
        with_folders = [r for r in self.plan.resources if r.has_folder]
        for package_dir in dict.fromkeys(f"{self.project}/{r.repo}/{r.package}" for r in with_folders):
            os.makedirs(package_dir, exist_ok=True)
        chunks = [with_folders[i:i + WRITE_CHUNK] for i in range(0, len(with_folders), WRITE_CHUNK)]
        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            for files, size in pool.map(self.write_chunk, chunks):
                self.files += files
                self.bytes += size

    def write_chunk(self, chunk: list[_Resource]) -> tuple[int, int]:
        files = size = 0
        for r in chunk:
            folder = f"{self.project}/{r.repo}/{r.package}/{r.guid}"
            os.mkdir(folder)
            for name, data in self.resource_files(r):
                _put(f"{folder}/{name}", data)
                files += 1
                size += len(data)
        return files, size

    def resource_files(self, r: _Resource) -> list[tuple[str, bytes | memoryview]]:
        name, text = _attribute_file(r)
        offset, size = r.payload
        files = [(name, text.encode("utf-8")),
                 ("texture.data" if r.type == "Texture" else "resource.data",
                  self.pool[offset:offset + size])]
        source = r.attrs.get("source") if r.type == "Texture" else None
        if source:
            files.append(("source.tga", _tga_rle(*source)))
        if r.type == "Sound":
            files.append(("sound.hdr", _wav_header(r)))
        return files

    def write_maps(self) -> None:
        for path, level in self.plan.levels.items():
            os.makedirs(os.path.dirname(f"{self.project}/{path}"), exist_ok=True)
            self.put(f"{self.project}/{path}", _level_xml(level).encode("utf-8"))
        os.makedirs(f"{self.project}/Worlds", exist_ok=True)
        for path, levels in self.plan.worlds.items():
            text = _world_xml(levels, path in self.plan.backslash_worlds)
            self.put(f"{self.project}/{path}", text.encode("utf-8"))
