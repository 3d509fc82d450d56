"""The line of every element of a parsed XML document, past line 65,535 too.

libxml2 keeps a node's line in 16 bits. An element whose start tag ends past line 65,534 has
65,535 stored, and lxml's `sourceline` (libxml2's `xmlGetLineNo`) then answers with a
neighbour's line: its first child's, else its next or previous sibling's, and, past an entity
reference, an ancestor's (a line before the limit). A pretty-printed `<Item>` on line 80,011
reports 80,012, the line where the whitespace after its start tag ends. Every
`resource.repository` of a large project is past that limit (100,000 assets: ~800,000 lines),
and rule results, custom code and the Messiah reader's problems name these lines.

`DocumentLines` gives the true lines of one parsed document. A document of fewer lines than
libxml2 stores keeps lxml's, at no cost. A larger one is scanned once, when one of its lines is
first asked for: one pass over its bytes finds where each start tag ends (libxml2 gives an
element the line of the `>` ending its start tag, counting LF only), with comments, CDATA
sections, processing instructions and the DOCTYPE with its internal subset blanked first, and
attribute values (which may hold `>`) skipped whole. Start tags in byte order are the document's
elements in document order (`root.iter()`); each element whose lxml line differs gets its true
line in a table keyed by its proxy's id, and the table keeps those proxies alive: lxml makes a
new proxy, with a new id, for an element whose proxy was freed. Elements whose lxml line is
right (most: `<GUID>…</GUID>` ends on the line it starts) need no entry, which keeps the table
to about a quarter of a repository's elements.

The scan is trusted only where it agrees with libxml2: as many start tags as elements, and the
same line for every element the scan puts before the limit, where lxml's lines are exact.
Anything else (a parser that expands entities into elements, an encoding whose bytes are not
ASCII's and not UTF-16 or UTF-32) leaves the document with lxml's lines.
tests/test_rules_lines.py holds the law that makes the scan trustworthy: on random documents
below the limit, its lines are lxml's; moved past it, they are those lines moved.

Cost, measured on an 800,000-line repository (23 MB, 803,002 elements) on a shared 2-core
machine: building the table takes 1.1 to 1.4 s, under three times the file's parse (0.5 s) and
a quarter of checking it against messiah-common's 16 repository rules (about 5 s); it keeps
35 MiB (201,128 entries: the Items, Annotations, Annos and empty Deps), 58 MiB at the peak.

`line_of` and `lines_of` read the lines of elements of any document a live `DocumentLines`
covers: the rule engine's documents (registry.XmlDocument) and the Messiah reader's repositories
hold one while their tree is in use. Code reading `element.sourceline` directly gets lxml's line.
"""

from __future__ import annotations

import codecs
import re
import threading
import weakref
from array import array
from collections.abc import Sequence
from itertools import accumulate, chain, compress, islice, repeat, tee
from operator import attrgetter, ne
from typing import Any

from lxml import etree

#: The largest line libxml2 stores on a node; a stored 65,535 means "look at the neighbours".
LARGEST_STORED_LINE = 65534

# `sourceline` as each node's class reads it (a custom-code copy's own, custom/crossing.py),
# called in C by map().
_SOURCELINE = attrgetter("sourceline")
_MATCH_END = re.Match.end

# Markup whose text is not elements (it may hold "<"): blanked before start tags are found.
_QUOTED_DECLARATION = rb"<!(?:[^>\"']|\"[^\"]*\"|'[^']*')*>"
_NOT_ELEMENTS = re.compile(
    rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>"
    rb"|<!DOCTYPE(?:[^\[>\"']|\"[^\"]*\"|'[^']*')*"
    rb"(?:\[(?:[^\]\"'<]|\"[^\"]*\"|'[^']*'|<!--.*?-->|<\?.*?\?>|"
    + _QUOTED_DECLARATION
    + rb")*\]\s*)?>",
    re.DOTALL,
)
# A start tag, to the ">" that ends it: quoted attribute values are taken whole.
_START_TAG = re.compile(rb"<[^/][^>\"']*(?:(?:\"[^\"]*\"|'[^']*')[^>\"']*)*>")

# XML 1.0 Appendix F: how a document in a wide encoding begins (a byte order mark, else "<?").
_WIDE_STARTS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (b"<\0\0\0", "utf-32-le"),
    (b"\0\0\0<", "utf-32-be"),
    (b"<\0?\0", "utf-16-le"),
    (b"\0<\0?", "utf-16-be"),
)


def _blank(match: re.Match) -> bytes:
    return match.group().replace(b"<", b" ")


def _ascii_bytes(data: bytes) -> bytes | None:
    """The document in an encoding where "<" and LF are their ASCII bytes (UTF-8, GBK, Latin-1
    and the like already are; UTF-16 and UTF-32 are transcoded); None when it cannot be."""
    for start, encoding in _WIDE_STARTS:
        if data.startswith(start):
            try:
                return data.decode(encoding).encode("utf-8")
            except UnicodeError:
                return None
    return data


def start_tag_lines(data: bytes) -> Sequence[int] | None:
    """The line where each start tag of a well-formed document ends, in order; None when the
    document's bytes cannot be scanned (see _ascii_bytes)."""
    text = _ascii_bytes(data)
    if text is None:
        return None
    text = _NOT_ELEMENTS.sub(_blank, text)
    # In C, into arrays (8 bytes a tag, not a Python int's 36): where each tag ends, then the
    # LFs between one tag's end and the next, summed from line 1.
    ends = array("q", map(_MATCH_END, _START_TAG.finditer(text)))
    gaps = map(text.count, repeat(b"\n"), chain((0,), ends), ends)
    return array("q", islice(accumulate(gaps, initial=1), 1, None))


_LIVE: weakref.WeakSet[DocumentLines] = weakref.WeakSet()


class DocumentLines:
    """The true line of each element of one parsed document (see the module docstring).

    Keep it as long as the tree is used: it keeps the proxies its table is keyed by alive, and
    `line_of` finds the table only while it lives."""

    __slots__ = ("root", "_data", "_table", "_kept", "_lock", "__weakref__")

    def __init__(self, root: Any, data: bytes) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._kept: list[Any] = []
        # A document of n lines has n - 1 LFs (in UTF-16 and UTF-32, at least as many 0x0A bytes).
        if data.count(b"\n") < LARGEST_STORED_LINE:
            self._data: bytes | None = None
            self._table: dict[int, int] | None = {}
        else:
            self._data = data
            self._table = None
            _LIVE.add(self)

    def line(self, element: Any) -> int | None:
        """The line of the start tag of `element`, one of this document's elements."""
        return self.table().get(id(element), _SOURCELINE(element))

    def table(self) -> dict[int, int]:
        """id of a kept proxy → its element's line, for the elements lxml tells wrong; built on
        first use."""
        table = self._table
        if table is None:
            with self._lock:
                if self._table is None:
                    self._table = self._build()
                    self._data = None
            table = self._table
        return table

    def _build(self) -> dict[int, int]:
        assert self._data is not None  # only a large document's table is built
        lines = start_tag_lines(self._data)
        if lines is None:
            return {}
        # (element, line) where lxml's line differs, in C: the two copies of the iterator walk
        # in step, so only the proxies kept are alive at the end, not one per element.
        elements, again = tee(self.root.iter(etree.Element))
        try:
            differing = list(
                compress(zip(elements, lines, strict=True), map(ne, map(_SOURCELINE, again), lines))
            )
        except ValueError:  # as many start tags as elements, or the scan is not of this tree
            return {}
        if any(line <= LARGEST_STORED_LINE for _, line in differing):
            return {}  # it disagrees where lxml's lines are exact: it is not trusted
        self._kept = [element for element, _ in differing]
        return {id(element): line for element, line in differing}


def line_of(element: Any) -> int | None:
    """The line of an element of any document (a comment's or PI's is lxml's)."""
    return lines_of((element,))[0]


def lines_of(elements: Any) -> list[int | None]:
    """The lines of elements, in order: lxml's, except where a live DocumentLines knows better
    (every live one's table is built then: they are few, and needed)."""
    elements = elements if isinstance(elements, (list, tuple)) else list(elements)
    lines = list(map(_SOURCELINE, elements))
    if not _LIVE:
        return lines
    for document in list(_LIVE):
        table = document.table()
        if table:  # an id is in one table at most: each keeps the proxies of its keys alive
            lines = list(map(table.get, map(id, elements), lines))
    return lines
