"""What moved among the project's files: the one record of changes the engine keeps (a scan
finds them, the build state logs them by generation, a stage's staleness reads them back)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

ADDED, REMOVED, MODIFIED = "added", "removed", "modified"  # kinds in the change log


@dataclass
class FileChanges:
    """The project's files that moved: what a scan found since the last one (`modified`: the
    signature moved, the content may not have), and what the change log says moved since a
    stage last ran (`net`: content changes only)."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    old_digests: dict[str, str] = field(default_factory=dict)  # modified path → digest before

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.modified)

    @property
    def listing_changed(self) -> bool:
        return bool(self.added or self.removed)

    def paths(self) -> list[str]:
        return [*self.added, *self.removed, *self.modified]

    def logged(self) -> list[tuple[str, str]]:
        """(path, kind) as the build state's change log keeps them."""
        return [
            *((path, ADDED) for path in self.added),
            *((path, REMOVED) for path in self.removed),
            *((path, MODIFIED) for path in self.modified),
        ]

    @classmethod
    def net(cls, logged: Iterable[tuple[str, str]]) -> FileChanges:
        """What changes logged by several runs (oldest first) amount to for a stage that last
        ran before all of them, one per path: a file added and then edited is added, one
        removed and added again modified, one added and removed again no change at all."""
        first: dict[str, str] = {}
        last: dict[str, str] = {}
        for path, kind in logged:
            first.setdefault(path, kind)
            last[path] = kind
        net = cls()
        for path, kind in first.items():
            existed, exists = kind != ADDED, last[path] != REMOVED
            if existed and exists:
                net.modified.append(path)
            elif exists:
                net.added.append(path)
            elif existed:
                net.removed.append(path)
        return net
