"""The last large file parsed, kept for the next unit of the same process while the driver runs
the validate stage's units itself.

A large file that many rules select is checked in parts, one unit each (parts.py), so that
workers share it. When the driver runs the units one after the other (the local executor), each
part parsed the file again and rebuilt the columns the earlier parts had built: measured at 46%
more time for the 10k project's repositories than checking each in one unit. The parts of a
file run back to back (units are ordered by cost), so keeping the last large document, with its
memo, lets the next part start from it. It is used only when its bytes have the digest the
unit's reader just recorded for the file, so results and traces are those of a fresh parse.

Only the driver keeps a document (the stage's `plan` turns keeping on and `finish` off and drops
it): a Ray worker would hold it while running other stages' units.
"""

from __future__ import annotations

from typing import Any, NamedTuple

KEEP_MIN_BYTES = 256 * 1024  # smaller files are never split into parts (parts.SPLIT_MIN_BYTES)


class Parsed(NamedTuple):
    """A file's document, and the path language that parsed it."""

    language: Any
    document: Any


class _Kept(NamedTuple):
    path: str  # absolute
    digest: str
    language: Any
    document: Any


class KeptDocuments:
    """At most one parsed document, kept while keeping is on."""

    def __init__(self) -> None:
        self.on = False
        self._kept: _Kept | None = None

    def start(self) -> None:
        self.on = True
        self._kept = None

    def stop(self) -> None:
        self.on = False
        self._kept = None

    def get(self, path: str, digest: str | None) -> Parsed | None:
        """`path` parsed from bytes with this digest, if kept."""
        kept = self._kept
        if kept is None or digest is None or kept.path != path or kept.digest != digest:
            return None
        return Parsed(kept.language, kept.document)

    def offer(self, path: str, digest: str | None, size: int, language: Any, document: Any):
        """Keep a document just parsed (a large one, while keeping is on), dropping the last."""
        if self.on and digest is not None and size >= KEEP_MIN_BYTES:
            self._kept = _Kept(path, digest, language, document)


# One per process: the driver's validate stage turns it on and off (see the module docstring).
KEPT = KeptDocuments()
