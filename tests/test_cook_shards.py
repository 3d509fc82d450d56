"""Cook shards (stages/cooking/shards.py): cut by content, so the number of assets never moves
an asset to another shard, and an asset added or removed changes only its neighbourhood."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.cooking.shards import SHARD_ASSETS, ShardMap, asset_hash, shard_id


def guids(count: int, seed: int = 0) -> list[str]:
    return [str(uuid.UUID(int=(seed << 64) + i * 0x9E3779B97F4A7C15)) for i in range(count)]


def grouped(ids: list[str]) -> dict[str, list[str]]:
    """Shard id → its assets, sorted by id; shards in id order."""
    shard_map = ShardMap(ids)
    shards: dict[str, list[str]] = {}
    for asset_id in ids:
        shards.setdefault(shard_map.shard_of(asset_id), []).append(asset_id)
    return {name: sorted(shards[name]) for name in sorted(shards)}


def test_shards_hold_about_shard_assets_each():
    """Ten thousand assets make about 10,000 / SHARD_ASSETS shards, none empty."""
    ids = guids(10_000)
    shards = grouped(ids)
    assert 0.6 * 10_000 / SHARD_ASSETS < len(shards) < 1.5 * 10_000 / SHARD_ASSETS
    assert sum(len(members) for members in shards.values()) == len(ids)
    assert all(members == sorted(members) for members in shards.values())


def test_a_shard_is_named_by_the_hash_it_starts_at():
    """An asset belongs to the shard starting at the largest boundary not above its hash; a
    boundary is an asset whose hash is a multiple of SHARD_ASSETS (or 0)."""
    ids = guids(2_000)
    shards = ShardMap(ids)
    for asset_id in ids[:200]:
        bound = max(b for b in shards.bounds if b <= asset_hash(asset_id))
        assert shards.shard_of(asset_id) == shard_id(bound)
    assert all(b == 0 or b % SHARD_ASSETS == 0 for b in shards.bounds)
    assert shard_id(0x1F) == "<shard 0000001f>"


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(min_value=0, max_value=600),
    seed=st.integers(min_value=0, max_value=2**16),
    extra=st.text(min_size=1, max_size=12),
)
def test_adding_an_asset_moves_only_assets_of_its_own_shard(count, seed, extra):
    """Adding (or, read backwards, removing) one asset moves no asset outside the shard it
    lands in: the shard count is not derived from the number of assets."""
    ids = guids(count, seed)
    if extra in ids:
        return
    before = ShardMap(ids)
    after = ShardMap([*ids, extra])
    landed = before.shard_of(extra)
    moved = {a for a in ids if before.shard_of(a) != after.shard_of(a)}
    assert all(before.shard_of(a) == landed for a in moved)
    if asset_hash(extra) % SHARD_ASSETS:
        assert not moved  # not a boundary: nothing moves at all


def test_members_are_the_assets_of_the_shards_named():
    """`members` keeps the given order and only the assets of the named shards (an asset id
    among the names, as for a unit of its own, selects nothing)."""
    ids = guids(1_000)
    shards = ShardMap(ids)
    named = {shards.shard_of(ids[3]), shards.shard_of(ids[500]), ids[7]}
    assert shards.members(ids, named) == [a for a in ids if shards.shard_of(a) in named]
