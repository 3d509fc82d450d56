"""How collect's keyed `index` value names its entries (stages/sources/messiah/index.py makes
them; rules/traced.py traces reads of them): one entry per GUID of `res_in_repo` and
`res_in_disk` and per virtual path of `res_virt_info`, under a prefix each, and one entry each
for the used levels and the project root. A module of its own, importing nothing of the rules,
so that what reads the entries (the rule functions, the sources) imports no circle."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from orchestrator import to_posix

#: A predefined set keyed by GUID or virtual path (an index attribute) → the prefix of its
#: entries in the keyed index; the used levels and the project root are one entry each.
PREFIXES = {"res_in_repo": "repo/", "res_in_disk": "disk/", "res_virt_info": "virt/"}
ILEVELS, ROOT = "ilevels", "root"


def rooted_paths(stored_root: str, paths: Iterable[str], root: str) -> frozenset[str]:
    """A set of project-relative paths of an index whose root is `stored_root` ("" as stored),
    as the index rooted at `root` (`MessiahIndex.at`) holds it: absolute under `root`, or as
    they are when the index was made with absolute paths."""
    if stored_root:
        return frozenset(paths)
    prefix = to_posix(root).rstrip("/") + "/"
    return frozenset(prefix + path for path in paths)


class IndexEdit(NamedTuple):
    """How an index differs from an earlier one: the earlier one's identity (the token the
    validate stage names an index by in the caches of the processes that read it) and the keys
    of the entries changed, added or removed since (the stage's changes of its index input)."""

    base: str
    keys: frozenset[str]
