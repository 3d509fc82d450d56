"""Planting the known defects (catalog.PLANT_COUNTS) in a planned project: each a small, deliberate
change to resources that are otherwise clean against the starter rule library."""

from __future__ import annotations

from .catalog import (
    COMMON,
    FACE_BUDGET,
    MAX_PAYLOAD_BYTES,
    PLANT_COUNTS,
    REPOSITORY,
    SOURCE_TGA_MAX_SIZE,
)
from .model import Resource, is_dev
from .planner import Planner


class DefectPlanter:
    """Plants each kind of defect on resources not yet given one, outside Dev/."""

    def __init__(self, planner: Planner) -> None:
        self.planner = planner
        self.by_type: dict[str, list[Resource]] = {}
        for resource in planner.resources:
            self.by_type.setdefault(resource.type, []).append(resource)

    def plant_all(self) -> None:
        for kind, count in PLANT_COUNTS.items():
            self.planner.planted[kind] = []
            plant = getattr(self, kind)
            for _ in range(count):
                self.planner.planted[kind].extend(plant())

    def pick(self, rtype: str, predicate=lambda r: True) -> Resource:
        """A random resource of `rtype`, not yet given a defect nor in Dev/, that fits `predicate`."""
        pool = self.by_type[rtype]

        def fits(r: Resource) -> bool:
            return r.guid not in self.planner.used and not is_dev(r) and predicate(r)

        # Random probes find a fit at once in big projects; small ones fall back to a scan.
        for _ in range(64):
            chosen = pool[self.planner.rng.randrange(len(pool))]
            if fits(chosen):
                break
        else:
            candidates = [r for r in pool if fits(r)]
            if not candidates:
                raise RuntimeError(f"not enough {rtype} resources to plant every defect")
            chosen = candidates[self.planner.rng.randrange(len(candidates))]
        self.planner.used.add(chosen.guid)
        return chosen

    def duplicate_guid(self) -> list[str]:
        # A texture copied into CommonRepository with its GUID kept (a bad merge). Not UI or
        # Characters, so the copies never fall into two bundle-layout rules.
        original = self.pick(
            "Texture",
            lambda r: r.repo == REPOSITORY and r.package.startswith(("Environment/", "Props/")),
        )
        copy = Resource(
            original.guid,
            "Texture",
            COMMON,
            "Common/Shared",
            self.planner.new_name("Texture", "Common/Shared"),
            attrs=dict(original.attrs),
            payload=original.payload,
            created=original.created,
        )
        self.planner.resources.append(copy)
        self.planner.place_in_used_level(original)
        return [original.guid]

    def missing_dep(self) -> list[str]:
        material = self.pick("Material")
        missing = self.planner.new_guid()
        material.deps.append(missing)
        self.planner.place_in_used_level(material)
        return [missing]

    def item_without_folder(self) -> list[str]:
        sound = self.pick("Sound")
        sound.has_folder = False
        self.planner.place_in_used_level(sound)
        return [sound.guid]

    def level_unknown_guid(self) -> list[str]:
        unknown = self.planner.new_guid()
        self.planner.place_in_used_level(None, unknown)
        return [unknown]

    def oversized_texture(self) -> list[str]:
        texture = self.pick("Texture", lambda r: r.attrs["source"] is None)
        texture.attrs.update(Width=4096, Height=4096, MipLevels=13)
        texture.payload = (texture.payload[0], MAX_PAYLOAD_BYTES)
        return [texture.guid]

    def uncompressed_texture(self) -> list[str]:
        texture = self.pick("Texture")
        texture.attrs.update(Format="RGBA8", Compressed=0)
        return [texture.guid]

    def texture_missing_mips(self) -> list[str]:
        texture = self.pick("Texture")
        texture.attrs["MipLevels"] = None
        return [texture.guid]

    def model_over_face_budget(self) -> list[str]:
        model = self.pick("Model")
        model.attrs["entities"][0][0] = FACE_BUDGET + self.planner.rng.randrange(1, 4 * FACE_BUDGET)
        return [model.guid]

    def misnamed_material(self) -> list[str]:
        material = self.pick("Material")
        material.name = material.name.removesuffix("_mat") + "_Material"
        return [material.guid]

    def duplicate_name(self) -> list[str]:
        first = self.pick("Mesh", lambda r: r.repo == REPOSITORY)
        second = self.pick("Mesh", lambda r: r.repo == REPOSITORY and r.package != first.package)
        second.name = first.name
        return [first.guid, second.guid]

    def never_cook_ref(self) -> list[str]:
        taken = self.planner.planted["never_cook_ref"]
        dev = [
            r
            for r in self.planner.resources
            if is_dev(r) and r.type == "Material" and r.guid not in taken
        ]
        target = dev[self.planner.rng.randrange(len(dev))]
        model = self.pick("Model", lambda r: r.repo == REPOSITORY)
        model.deps.append(target.guid)
        self.planner.place_in_used_level(model)
        return [target.guid]

    def dependency_cycle(self) -> list[str]:
        models = [self.pick("Model", lambda r: r.repo == REPOSITORY) for _ in range(3)]
        for model, target in zip(models, models[1:] + models[:1]):
            model.deps.append(target.guid)  # a model used as another's attachment
        self.planner.place_in_used_level(models[0])
        return [m.guid for m in models]

    def missing_collision_shape(self) -> list[str]:
        mesh = self.pick("Mesh", lambda r: not r.collision)
        missing = self.planner.new_guid()
        mesh.annos = [a for a in mesh.annos if a[0] != "CollisionShape"]
        mesh.annos.append(("CollisionShape", missing))
        self.planner.place_in_used_level(mesh)
        return [missing]

    def src_tex_conflict(self) -> list[str]:
        # The artist doubled the source image and never re-imported it.
        texture = self.pick(
            "Texture",
            lambda r: max(r.attrs["Width"], r.attrs["Height"]) <= SOURCE_TGA_MAX_SIZE // 2,
        )
        texture.attrs["source"] = (
            texture.attrs["Width"] * 2,
            texture.attrs["Height"] * 2,
            self.planner.rng.randbytes(4),
        )
        return [texture.guid]

    def effect_non_texture_dep(self) -> list[str]:
        effect = self.pick("Effect", lambda r: r.repo == REPOSITORY)
        material = self.pick("Material", lambda r: r.repo in (REPOSITORY, COMMON))
        effect.deps.append(material.guid)
        return [material.guid]

    def unknown_type(self) -> list[str]:
        sound = self.pick("Sound")
        sound.type = "SoundBank_Legacy"  # a type retired from the engine
        return [sound.guid]

    def material_source_path(self) -> list[str]:
        material = self.pick("Material")
        material.source_path = f"D:/art/materials/{material.name}.psd"
        return [material.guid]
