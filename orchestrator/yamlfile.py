"""Reading YAML: every YAML the product reads (build files, rule files, Unity assets and `.meta`
files) is composed here, under one budget on what aliases expand to.

PyYAML shares an anchor's node with each of its aliases, so a 600-byte "billion laughs" file
composes instantly; whatever walks the data afterwards (the schema, a rule's digest, a rule's
`**` path, `validate.json`) sees every copy: gigabytes of work. So while a file is composed each
`*alias` adds the expanded size of what it repeats, before anything is built from it: a node
counts 1 and a scalar also its characters (999 aliases of one 2 MB string are 2 GB of text, not
999 nodes). Past EXPANSION_BUDGET the file is refused (`ExpansionRefused`, naming the alias's
line and the budget). An alias inside its own anchor (data that contains itself) is refused too:
nothing that walks it would end. What a file holds without aliases is bounded by its own size.

The budget is kept by a Python composer (`_Budgeted`) over the loader's own parser: libyaml's
for a libyaml loader, so both paths read the same events. Composing in Python costs ~1.4x
libyaml's composer, so a text in which no alias can begin (`may_hold_alias`: no `*` after a
blank, a flow indicator or at the start, almost every Unity file) goes to the loader's own
composer unchanged: with no alias, the expanded size is the written size.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import yaml

from .errors import ExpansionRefused, OrchestrateError

#: What aliases may add to one file, in all: each node 1, each scalar also its characters
#: (about 1 MB of repeated text, far beyond what anchors are used for by hand).
EXPANSION_BUDGET = 1_000_000

# The characters after which a `*` can start an alias token (in YAML 1.1 as libyaml and PyYAML
# scan it): blanks and line breaks (NEL, LS and PS included), the flow indicators that open or
# separate entries, and the key and value indicators (`{"a":*b}`, `[? *b]`). Anywhere else a `*`
# is inside a scalar, a tag, a comment, or an error the parser reports before any alias is seen.
_BEFORE_ALIAS = " \t\r\n\f\v[{,:?\x85\u2028\u2029\ufeff"
# The same set as the last byte of its UTF-8 encoding (over-approximating is harmless: a byte
# that ends another character only sends its text to the budgeted composer).
_BEFORE_ALIAS_BYTES = frozenset(b"".join(c.encode("utf-8")[-1:] for c in _BEFORE_ALIAS))


def may_hold_alias(text: str | bytes) -> bool:
    """Whether a `*` in the text could start an alias (False means it holds none, for sure)."""
    if isinstance(text, bytes):
        before: frozenset[int] | str = _BEFORE_ALIAS_BYTES
        pos = text.find(b"*")
        while pos >= 0:
            if pos == 0 or text[pos - 1] in before:
                return True
            pos = text.find(b"*", pos + 1)
        return False
    pos = text.find("*")
    while pos >= 0:
        if pos == 0 or text[pos - 1] in _BEFORE_ALIAS:
            return True
        pos = text.find("*", pos + 1)
    return False


class _Budgeted(yaml.composer.Composer):
    """A composer that counts the expanded size of every alias before it returns the shared node.

    Mixed in ahead of a loader (a Python or a libyaml parser): its methods take over composing,
    the loader's parser, resolver and constructor stay.
    """

    loader: ClassVar[Any]  # the loader mixed with (its parser, resolver and constructor)

    def __init__(self, stream: Any) -> None:
        type(self).loader.__init__(self, stream)
        self.anchors: dict[str, Any] = {}  # a libyaml loader's __init__ has not set them
        self.added = 0  # what aliases added to the file so far
        self._sizes: dict[int, int] = {}  # id of a finished node → its expanded size

    def compose_document(self) -> Any:
        self._sizes = {}  # anchors do not cross documents (and ids of dropped nodes are reused)
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self.anchors:
            size = self._sizes.get(id(self.anchors[event.anchor]))
            if size is None:  # its collection is still being composed
                raise ExpansionRefused(
                    problem=f"the alias *{event.anchor} repeats its own anchor",
                    problem_mark=event.start_mark,
                )
            self.added += size
            if self.added > EXPANSION_BUDGET:
                raise ExpansionRefused(
                    problem=f"aliases expand the file past the YAML expansion budget of "
                    f"{EXPANSION_BUDGET:,} (a node counts 1, a scalar also its characters; an "
                    "alias bomb?): write the repeated parts out, or use fewer aliases",
                    problem_mark=event.start_mark,
                )
        return super().compose_node(parent, index)

    def compose_scalar_node(self, anchor: Any) -> Any:
        node = super().compose_scalar_node(anchor)
        self._sizes[id(node)] = 1 + len(node.value)
        return node

    def compose_sequence_node(self, anchor: Any) -> Any:
        node = super().compose_sequence_node(anchor)
        sizes = self._sizes
        self._sizes[id(node)] = 1 + sum(sizes[id(item)] for item in node.value)
        return node

    def compose_mapping_node(self, anchor: Any) -> Any:
        node = super().compose_mapping_node(anchor)
        sizes = self._sizes
        self._sizes[id(node)] = 1 + sum(sizes[id(k)] + sizes[id(v)] for k, v in node.value)
        return node


@functools.cache
def _budgeted(loader: type) -> type:
    """The loader with the budgeted composer ahead of its own (PyYAML's or libyaml's)."""
    return type(f"Budgeted{loader.__name__}", (_Budgeted, loader), {"loader": loader})


def _loader_for(text: str | bytes, loader: type) -> Any:
    return (_budgeted(loader) if may_hold_alias(text) else loader)(text)


def compose_all(text: str | bytes, loader: type) -> list[Any]:
    """The root node of every document, within the budget (else ExpansionRefused, a YAMLError)."""
    return _documents(text, loader, composed=True)


def load_all(text: str | bytes, loader: type) -> list[Any]:
    """The data of every document, within the budget (else ExpansionRefused, a YAMLError)."""
    return _documents(text, loader, composed=False)


def _documents(text: str | bytes, loader: type, composed: bool) -> list[Any]:
    reader = _loader_for(text, loader)
    more, next_document = (
        (reader.check_node, reader.get_node) if composed else (reader.check_data, reader.get_data)
    )
    try:
        documents = []
        while more():
            documents.append(next_document())
        return documents
    except RecursionError:  # the Python composer nests a frame per level (libyaml stops at 1000)
        raise yaml.YAMLError("nested too deeply to read") from None
    finally:
        reader.dispose()


class YamlFile(NamedTuple):
    node: Any  # the node tree (its marks give line numbers)
    data: Any


def read_yaml(path: Path, error: type[OrchestrateError], what: str) -> YamlFile:
    """A UTF-8 YAML file (BOM allowed); `what` names it in messages."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error(f"{what} not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read the {what}: {exc}", file=str(path)) from None
    loader = None
    try:
        loader = _loader_for(text, yaml.SafeLoader)  # its reader refuses some characters at once
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(
            problem if isinstance(exc, ExpansionRefused) else f"not valid YAML: {problem}",
            file=str(path),
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except RecursionError:
        raise error(f"the {what} is nested too deeply", file=str(path)) from None
    finally:
        if loader is not None:
            loader.dispose()
    return YamlFile(node, data)
