"""The planned project in memory: resources, levels, worlds and what was planted."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class Resource:
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
class Level:
    path: str  # project-relative
    entities: list[tuple[str, str, tuple[float, float, float]]] = field(default_factory=list)


@dataclass
class ProjectPlan:
    resources: list[Resource]
    worlds: dict[str, list[str]]  # world path -> level paths (project-relative)
    levels: dict[str, Level]
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


def is_dev(r: Resource) -> bool:
    return r.package.startswith("Dev/")
