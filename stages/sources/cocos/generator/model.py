"""What the Cocos generator's planner decides and its writer writes: one item per asset."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from random import Random

TEXTURE, SPRITE_FRAME = "6c48a", "f9941"  # Creator's sub-asset ids of an image
COLORS = ((230, 60, 60, 255), (60, 200, 90, 255), (70, 90, 230, 255), (240, 200, 40, 255))


@dataclass
class Item:
    """An asset to write: its kind, file, id, references and what its kind needs."""

    kind: str
    path: str  # project-relative file
    id: str
    refs: list[str] = field(default_factory=list)
    size: tuple[int, int] = (8, 8)
    color: int = 0
    packable: bool = False
    frames: list[str] = field(default_factory=list)  # a sheet's frame sub ids


def new_id(rng: Random) -> str:
    """A version-4 uuid drawn from `rng`."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))
