"""Which cook unit an asset belongs to: cheap assets in shards, expensive ones alone.

One unit per asset made the engine's per-unit work (keys, action-cache lookups, build-state
rows) cost more than cooking with a built-in cooker, which takes a fraction of a millisecond.
Such assets are cooked in shards of about SHARD_ASSETS. An asset cooked by an external command,
or made by a source's recipe (a Cocos atlas page composes many sprites), costs a process or far
more than the engine's overhead: it keeps a unit of its own, so workers share that work.

Shards are cut by content, not counted: the cooked assets are ordered by a stable hash of their
id, and a shard starts at every asset whose hash is a multiple of SHARD_ASSETS (and at hash 0).
An asset's shard thus depends only on the assets near it in that order, never on how many
there are: adding or removing an asset changes its own shard (or, when it starts one, splits or
joins two), where a count of shards derived from the number of assets would move every asset
to another shard when the count changed (and re-cook all of them). The boundaries are drawn
from every cooked asset, alone or not, so that an asset changing cooker changes no boundary.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from collections.abc import Iterable

SHARD_ASSETS = 64  # assets per shard, on average (about 1,000 shards for 62,000 assets)


def asset_hash(asset_id: str) -> int:
    """A stable 32-bit hash of an asset id (the same on every machine and run)."""
    return zlib.crc32(asset_id.encode("utf-8", "surrogateescape"))


def shard_id(bound: int) -> str:
    """The unit id of the shard starting at hash `bound` (no asset id looks like it)."""
    return f"<shard {bound:08x}>"


class ShardMap:
    """Where each of a cook list's assets falls: the hashes at which shards start."""

    def __init__(self, asset_ids: Iterable[str]) -> None:
        starts = {0}
        starts.update(h for h in map(asset_hash, asset_ids) if h % SHARD_ASSETS == 0)
        self.bounds = sorted(starts)

    def _bound_of(self, asset_id: str) -> int:
        return self.bounds[bisect_right(self.bounds, asset_hash(asset_id)) - 1]

    def shard_of(self, asset_id: str) -> str:
        """The id of the shard holding `asset_id` (one of the assets the map was drawn from)."""
        return shard_id(self._bound_of(asset_id))

    def members(self, asset_ids: Iterable[str], shard_ids: Iterable[str]) -> list[str]:
        """Those of `asset_ids` that the shards named hold, in the order given."""
        named = set(shard_ids)
        wanted = {bound for bound in self.bounds if shard_id(bound) in named}
        return [asset_id for asset_id in asset_ids if self._bound_of(asset_id) in wanted]
