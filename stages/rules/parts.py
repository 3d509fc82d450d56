"""Shaping the validate stage's units: large files split into parts, small files in shards.

A Messiah resource.repository is a few large files that most of a library's rules select: as one
unit each they are the long pole of validation however many workers there are. A part parses the
file once and runs a group of its rules, so the parts of a file can run side by side.

Small files (attribute files, metas: tens of thousands) are checked in shards of about
SHARD_FILES files: one unit per file made the engine's per-unit work (keys, store, state) cost
more than the checking. A file's shard is a hash of its path modulo the number of shards, so a
file added or removed changes its shard only, and an edited file re-checks the files of its
shard (milliseconds).

Costs are in bytes processed: a unit parses its file once, and each rule makes about one pass over
it; rules that also read other files (subxpath targets, built-in checks) or run custom code make
more. Executors use the cost to batch units (orchestrator/executors/ray.py).
"""

from __future__ import annotations

import math
import os
import zlib

from .loader import CompiledRule

SPLIT_MIN_BYTES = 256 * 1024  # below this, a second parse of the file costs more than it saves
RULES_PER_PART = 4  # a part's rules should outweigh its own parse of the file
PART_COST = 4 * 1024 * 1024  # bytes × passes one part aims at


def rule_weight(rule: CompiledRule) -> int:
    """Passes over the file a rule costs, roughly (its kind, not its content)."""
    weight = 1
    if rule.subxpath is not None:
        weight += 3
    if rule.condition.method == "check":
        weight += 3
    elif rule.func_str:
        weight += 1
    return weight


def unit_cost(size: int, rules: list[CompiledRule]) -> int:
    """Estimated bytes processed by a unit that checks a file of `size` bytes against `rules`."""
    return max(size, 1) * (1 + sum(rule_weight(rule) for rule in rules))


def file_size(root: str, relpath: str) -> int:
    """A project file's size in bytes (0 when it cannot be seen: the unit reports that)."""
    try:
        return os.stat(f"{root}/{relpath}").st_size
    except OSError:
        return 0


def part_count(size: int, rules: int) -> int:
    """How many parts a file of `size` bytes with `rules` rules is checked in. Only its size and
    how many rules select it decide: editing what a rule checks never moves other rules."""
    if size < SPLIT_MIN_BYTES or rules < 2 * RULES_PER_PART:
        return 1
    return max(1, min(rules // RULES_PER_PART, math.ceil(size * (1 + rules) / PART_COST)))


def split_rules(size: int, rules: list[CompiledRule], positions: list[int]) -> list[list[int]]:
    """Groups of `positions` (parallel to `rules`, ascending), one per part.

    Groups are contiguous runs of the library, cut where the rules' weights balance. Rules with
    the same digest share one group (results are keyed by digest, and a unit reports a digest
    once), and so do consecutive rules extracting the same values (they share the work on the
    file and on its subxpath targets). Rules whose custom code reads the index (so their unit
    depends on all of it) form a group of their own, first: an edit to one Item re-runs them,
    not the rules sharing a part with them.
    """
    wanted = part_count(size, len(rules))
    whole = [i for i, rule in enumerate(rules) if rule.custom_index]
    # A file with units of its own (split, or too large to share a shard) has the rules reading
    # the whole index in a unit apart; a small file keeps its one unit in its shard.
    own = wanted > 1 or size >= SHARD_MAX_BYTES
    if own and whole and len(whole) < len(rules):
        rest = [i for i in range(len(rules)) if not rules[i].custom_index]
        digests = {rules[i].digest for i in whole}
        if not any(rules[i].digest in digests for i in rest):
            groups = _split(
                max(1, wanted - 1), [rules[i] for i in rest], [positions[i] for i in rest]
            )
            return [[positions[i] for i in whole], *groups]
    return _split(wanted, rules, positions)


def _split(wanted: int, rules: list[CompiledRule], positions: list[int]) -> list[list[int]]:
    """`wanted` groups of contiguous runs (split_rules)."""
    blocks: list[list[int]] = []  # indexes into rules
    for i, rule in enumerate(rules):
        if blocks and _same_values(rules[blocks[-1][-1]], rule):
            blocks[-1].append(i)
        else:
            blocks.append([i])
    wanted = min(wanted, len(blocks))
    if wanted <= 1:
        return [list(positions)]
    weights = [sum(rule_weight(rules[i]) for i in block) for block in blocks]
    cuts = _balanced_cuts(weights, wanted)
    groups: list[list[int]] = []
    home: dict[str, int] = {}  # digest → the group of its first rule
    for start, end in zip([0] + cuts, cuts + [len(blocks)]):
        groups.append([])
        for block in blocks[start:end]:
            for i in block:
                group = home.setdefault(rules[i].digest, len(groups) - 1)
                groups[group].append(positions[i])
    return [sorted(group) for group in groups if group]


def _same_values(a: CompiledRule, b: CompiledRule) -> bool:
    filters = (a.filter.text if a.filter else None, b.filter.text if b.filter else None)
    return a.xpath.text == b.xpath.text and filters[0] == filters[1]


def _balanced_cuts(weights: list[int], parts: int) -> list[int]:
    """Block indexes where parts 2..n begin: each cut at the block boundary whose cumulative
    weight is nearest to its share of the total, every part keeping at least one block."""
    total = sum(weights)
    cumulative = []
    running = 0
    for weight in weights:
        running += weight
        cumulative.append(running)
    cuts: list[int] = []
    for j in range(1, parts):
        target = total * j / parts
        low = (cuts[-1] if cuts else 0) + 1
        high = len(weights) - (parts - j)
        best = min(range(low, high + 1), key=lambda cut: (abs(cumulative[cut - 1] - target), cut))
        cuts.append(best)
    return cuts


SHARD_FILES = 64  # small files per shard, on average
SHARD_MAX_BYTES = 64 * 1024  # a file this large (or split into parts) has units of its own


def shard_count(files: int) -> int:
    """Shards for this many small files: a power of two, about SHARD_FILES files each."""
    return 1 << max(0, math.ceil(math.log2(max(1, files) / SHARD_FILES)))


def shard_of(relpath: str, shards: int) -> int:
    """The shard a small file belongs to (stable across runs and machines)."""
    return zlib.crc32(relpath.encode("utf-8", "surrogateescape")) % shards


def shard_id(shard: int, shards: int) -> str:
    """The unit id of a shard (no project path looks like it)."""
    return f"<shard {shard}/{shards}>"
