"""Drawing a whole project in memory from one Random(seed), in a fixed order: resources, their
attribute values and payload sizes, dependencies, worlds and levels (defects: defects.py)."""

from __future__ import annotations

import uuid
from bisect import bisect
from itertools import accumulate
from random import Random

from .catalog import (
    COMMON,
    FACE_BUDGET,
    GUARANTEED,
    GUARANTEED_DEV,
    KNOWN_TYPES,
    MATERIAL_TEXTURE_COUNTS,
    MAX_PAYLOAD_BYTES,
    PACKAGE_FAMILIES,
    PAYLOAD_POOL_BYTES,
    PLACEABLE_TYPES,
    REPOSITORIES,
    REPOSITORY,
    REPOSITORY_SHARES,
    RESOURCES_PER_PACKAGE,
    SOURCE_TGA_MAX_SIZE,
    TEXTURE_FORMATS,
    TEXTURE_SIZES,
    TYPE_WEIGHTS,
    VISIBLE_REPOSITORIES,
    WORLD_NAMES,
)
from .model import Level, ProjectPlan, Resource, is_dev


class Planner:
    """Draws the whole project in memory, in a fixed order, from one Random(seed)."""

    def __init__(self, assets: int, seed: int) -> None:
        self.assets = assets
        self.rng = Random(seed)
        self.guids: set[str] = set()
        self.resources: list[Resource] = []
        self.serial = 0
        self.packages = self._make_packages()
        self.levels: dict[str, Level] = {}
        self.worlds: dict[str, list[str]] = {}
        self.backslash_worlds: set[str] = set()
        self.used: set[str] = set()  # GUIDs already given a defect
        self.planted: dict[str, list[str]] = {}

    def plan_clean(self) -> None:
        """Resources, their dependencies, worlds and levels: a project with no defect yet."""
        self._make_resources()
        self._wire_dependencies()
        self._make_maps()

    def result(self) -> ProjectPlan:
        """The plan as drawn (call after planting the defects: the pool seed is drawn last)."""
        return ProjectPlan(
            self.resources,
            self.worlds,
            self.levels,
            self.backslash_worlds,
            self.planted,
            self.rng.getrandbits(64),
        )

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
        prefix = {
            "Texture": "tex",
            "Material": "",
            "Mesh": "mesh",
            "Model": "mdl",
            "Effect": "fx",
            "Sound": "sfx",
            "Animation": "anim",
            "Skeleton": "skel",
        }[rtype]
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
                names = [
                    f"{family}/{stem.format(k=f'{k:02d}')}"
                    for stem in stems
                    for k in (range(1, variants + 1) if "{k}" in stem else (0,))
                ]
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
            repo = self.weighted("repository")
            rtype = self.weighted("type")
            self.add_resource(rtype, repo, self.pick_package(repo, rtype, allow_dev=True))

    def weighted(self, weights: str):
        """A key of `weights` drawn in proportion to its value (cheaper than Random.choices)."""
        keys, cum = CUMULATIVE[weights]
        return keys[bisect(cum, self.rng.random() * cum[-1])]

    def add_resource(self, rtype: str, repo: str, package: str) -> Resource:
        rng = self.rng
        resource = Resource(
            self.new_guid(),
            rtype,
            repo,
            package,
            self.new_name(rtype, package),
            created=1_600_000_000 + rng.randrange(100_000_000),
        )
        size = ATTRIBUTE_DRAWS[rtype](self, resource)
        resource.payload = (rng.randrange(PAYLOAD_POOL_BYTES), size)
        self.resources.append(resource)
        return resource

    def _draw_texture(self, r: Resource) -> int:
        rng = self.rng
        width = self.weighted("texture size")
        height = width if rng.random() < 0.8 else max(64, width // 2)
        r.attrs = {
            "Width": width,
            "Height": height,
            "Format": rng.choice(TEXTURE_FORMATS),
            "Compressed": 1,
            "MipLevels": max(width, height).bit_length(),
            "source": None,
        }
        if width <= SOURCE_TGA_MAX_SIZE and rng.random() < 0.35:
            r.attrs["source"] = (width, height, rng.randbytes(4))
        return jitter(rng, max(1024, width * height // 64))

    def _draw_material(self, r: Resource) -> int:
        rng = self.rng
        r.attrs = {
            "Shader": rng.choice(("PBR_Standard", "PBR_Skin", "Unlit", "Foliage", "Water")),
            "Roughness": round(rng.random(), 2),
            "Metallic": round(rng.random(), 2),
        }
        return rng.randrange(256, 1024)

    def _draw_mesh(self, r: Resource) -> int:
        rng = self.rng
        r.collision = rng.random() < 0.25
        faces = rng.randrange(12, 200) if r.collision else rng.randrange(200, 12000)
        if r.collision:
            r.name += "_col"
        r.attrs = {"NumFaces": faces, "NumVertices": faces * 3 // 2 + rng.randrange(8)}
        return rng.randrange(512, 2048) if r.collision else rng.randrange(1024, 12288)

    def _draw_model(self, r: Resource) -> int:
        rng = self.rng
        lods = 1 if rng.random() < 0.7 else 2
        faces = rng.randrange(300, int(FACE_BUDGET * 0.9))
        r.attrs = {"entities": [[faces // (2**lod), None] for lod in range(lods)]}
        if rng.random() < 0.3:
            r.annos.append(("LODGroup", rng.choice(("High", "Medium", "Low"))))
        return rng.randrange(512, 2048)

    def _draw_effect(self, r: Resource) -> int:
        rng = self.rng
        emitters = ("flame", "smoke", "sparks", "glow", "debris", "trail")
        r.attrs = {"emitters": rng.sample(emitters, rng.randint(1, 3))}
        return rng.randrange(1024, 4096)

    def _draw_sound(self, r: Resource) -> int:
        rng = self.rng
        r.attrs = {
            "Duration": round(rng.uniform(0.2, 90.0), 2),
            "Channels": rng.choice((1, 2)),
            "SampleRate": rng.choice((22050, 44100, 48000)),
        }
        return rng.randrange(2048, 16384)

    def _draw_animation(self, r: Resource) -> int:
        r.attrs = {"Frames": self.rng.randrange(10, 400), "Skeleton": None}
        return self.rng.randrange(2048, 12288)

    def _draw_skeleton(self, r: Resource) -> int:
        r.attrs = {"NumBones": self.rng.randrange(8, 120)}
        return self.rng.randrange(1024, 3072)

    # -- dependencies ------------------------------------------------------------------------
    def _wire_dependencies(self) -> None:
        pools = DependencyPools(self.resources)
        wire = {
            "Material": self._wire_material,
            "Mesh": self._wire_mesh,
            "Model": self._wire_model,
            "Effect": self._wire_effect,
            "Animation": self._wire_animation,
        }
        for resource in self.resources:
            if resource.type in wire:
                wire[resource.type](resource, pools)

    def pick_dep(self, r: Resource, rtype: str, pools: DependencyPools) -> str | None:
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

    def add_deps(self, r: Resource, rtype: str, count: int, pools: DependencyPools) -> list[str]:
        added = []
        for _ in range(count):
            guid = self.pick_dep(r, rtype, pools)
            if guid and guid not in r.deps:
                r.deps.append(guid)
                added.append(guid)
        return added

    def _wire_material(self, r: Resource, pools: DependencyPools) -> None:
        self.add_deps(r, "Texture", self.weighted("material textures"), pools)

    def _wire_mesh(self, r: Resource, pools: DependencyPools) -> None:
        if r.collision:
            return
        self.add_deps(r, "Material", self.rng.randint(1, 2), pools)
        if self.rng.random() < 0.6:
            shapes = pools.collision.get((r.repo, r.package)) or pools.collision.get(r.repo)
            if shapes:
                r.annos.append(("CollisionShape", shapes[self.rng.randrange(len(shapes))].guid))

    def _wire_model(self, r: Resource, pools: DependencyPools) -> None:
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

    def _wire_effect(self, r: Resource, pools: DependencyPools) -> None:
        self.add_deps(r, "Texture", self.rng.randint(1, 3), pools)

    def _wire_animation(self, r: Resource, pools: DependencyPools) -> None:
        skeletons = self.add_deps(r, "Skeleton", 1, pools)
        r.attrs["Skeleton"] = skeletons[0] if skeletons else None

    # -- worlds and levels -------------------------------------------------------------------
    def _make_maps(self) -> None:
        rng = self.rng
        world_count = max(2, min(len(WORLD_NAMES), self.assets // 5000 + 2))
        shared = "Levels/Shared/Lobby.ilevel"
        self.levels[shared] = Level(shared)
        for index, world in enumerate(WORLD_NAMES[:world_count]):
            count = rng.randint(2, 5)
            levels = [f"Levels/{world}/{world}_{i:02d}.ilevel" for i in range(1, count + 1)]
            if index == 0:
                levels.append(f"Levels/{world}/{world}_广场.ilevel")  # a Chinese level name
            if index < 2 or rng.random() < 0.4:
                levels.append(shared)
            for path in levels:
                self.levels.setdefault(path, Level(path))
            self.worlds[f"Worlds/{world}.iworld"] = levels
        # The last world was saved on Windows: its level paths use backslashes.
        self.backslash_worlds = {f"Worlds/{WORLD_NAMES[world_count - 1]}.iworld"}
        for i in range(1, 3):  # levels no world uses: not part of any cook
            path = f"Levels/Archive/Old_{i:02d}.ilevel"
            self.levels[path] = Level(path)
        self._place_entities()

    def _place_entities(self) -> None:
        placeable = [
            r
            for r in self.resources
            if r.type in PLACEABLE_TYPES and not r.collision and not is_dev(r)
        ]
        paths = list(self.levels)
        for i in range(max(2 * len(paths), self.assets // 4)):
            # Every level gets entities; after one round, levels are drawn at random.
            level = self.levels[paths[i] if i < len(paths) else self.rng.choice(paths)]
            self.place(level, placeable[self.rng.randrange(len(placeable))])

    def place(self, level: Level, resource: Resource | None, guid: str | None = None) -> None:
        rng = self.rng
        name = f"{resource.name if resource else 'entity'}_{len(level.entities):04d}"
        position = (
            round(rng.uniform(-500, 500), 2),
            round(rng.uniform(0, 50), 2),
            round(rng.uniform(-500, 500), 2),
        )
        placed = guid or (resource.guid if resource is not None else "")
        level.entities.append((name, placed, position))

    def place_in_used_level(self, resource: Resource | None, guid: str | None = None) -> None:
        used = sorted({p for levels in self.worlds.values() for p in levels})
        self.place(self.levels[self.rng.choice(used)], resource, guid)

    # -- planted defects ---------------------------------------------------------------------


ATTRIBUTE_DRAWS = {
    "Texture": Planner._draw_texture,
    "Material": Planner._draw_material,
    "Mesh": Planner._draw_mesh,
    "Model": Planner._draw_model,
    "Effect": Planner._draw_effect,
    "Sound": Planner._draw_sound,
    "Animation": Planner._draw_animation,
    "Skeleton": Planner._draw_skeleton,
}
WEIGHTS: dict[str, dict] = {
    "repository": REPOSITORY_SHARES,
    "type": TYPE_WEIGHTS,
    "texture size": TEXTURE_SIZES,
    "material textures": MATERIAL_TEXTURE_COUNTS,
}
CUMULATIVE = {
    name: (list(table), list(accumulate(table.values()))) for name, table in WEIGHTS.items()
}


class DependencyPools:
    """Dependency targets by type: per package, per visible repositories, and a hot shared set."""

    def __init__(self, resources: list[Resource]) -> None:
        self.by_package: dict[tuple[str, str, str], list[Resource]] = {}
        by_repo: dict[tuple[str, str], list[Resource]] = {}
        self.collision: dict = {}
        for r in resources:
            if is_dev(r):
                continue  # nothing outside Dev/ may depend on Dev/ (never_cook)
            if r.collision:
                self.collision.setdefault((r.repo, r.package), []).append(r)
                self.collision.setdefault(r.repo, []).append(r)
                continue
            self.by_package.setdefault((r.repo, r.package, r.type), []).append(r)
            by_repo.setdefault((r.repo, r.type), []).append(r)
        self.visible = {
            (repo, rtype): [
                r for seen in VISIBLE_REPOSITORIES[repo] for r in by_repo.get((seen, rtype), ())
            ]
            for repo in REPOSITORIES
            for rtype in KNOWN_TYPES
        }
        # A few common textures and materials that half the project uses (white, flat normal…).
        self.hot = {
            rtype: pool[: max(2, len(pool) // 50)]
            for rtype in ("Texture", "Material")
            if (pool := by_repo.get((COMMON, rtype), []))
        }


def jitter(rng: Random, size: int) -> int:
    return min(MAX_PAYLOAD_BYTES, int(size * rng.uniform(0.85, 1.15)))


# -- rendering ----------------------------------------------------------------------------------
# XML is built as strings: every value is generated here and holds none of & < > " (checked by
# the tests, which parse every file), and string building is many times faster than lxml trees.
