"""Evaluating compiled XML path expressions (`paths.XmlQuery`) column by column.

The rules on one file mostly query the same nodes (`*/Items/Item`) for the same children (GUID,
Type, Deps) and differ in their checks and in what they extract. Walking every node once per rule
made rule evaluation, not parsing, the cost of validation. Here a memo (one dict per parsed
document) keeps, per node path, the matched nodes and, per child path or attribute, a *column*:
the texts of every node's children at that path in document order, their lines, and which nodes
own them. Nodes and children come from lxml's C-level `iter` over the document, checks become set
operations over node positions, and extraction slices columns, so the per-node work is done once
per document however many rules read it.

The results are exactly those of the per-node definition (spec/rules.md): node sets of a node path
lie at one depth, so their subtrees are disjoint and document order groups each node's children
together, in the order a per-node walk yields them.
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from .lines import lines_of
from .paths import (
    AND,
    ATTR_RECORDS,
    ATTRS,
    DOM,
    NODE_TEXT,
    RECORDS,
    TEXTS,
    Checks,
    TagTest,
    XmlQuery,
    _children,
    descend,
    get_attribute,
    localname,
)

_XPATHS: dict[str, etree.XPath] = {}
GROUP_MAX_CHILDREN = 32  # see NodeSet._root_child_column


def _step_text(test: TagTest) -> str | None:
    """One NodePath step as an XPath step; None when its tag cannot be an XPath literal."""
    if test.kind == "any":
        return "*"
    if "'" in test.text:
        return None
    if test.kind == "exact":
        return f"*[local-name()='{test.text}']"
    if test.kind == "prefix":
        return f"*[starts-with(local-name(),'{test.text}')]"
    return (
        f"*[substring(local-name(),string-length(local-name())-{len(test.text)}+1)='{test.text}']"
    )


def _node_path_text(steps: tuple[TagTest, ...]) -> str | None:
    parts = [_step_text(test) for test in steps]
    texts = [part for part in parts if part is not None]
    return "/" + "/".join(texts) if len(texts) == len(parts) else None


def _xpath(text: str) -> etree.XPath:
    compiled = _XPATHS.get(text)
    if compiled is None:
        compiled = _XPATHS[text] = etree.XPath(text)
    return compiled


class Column:
    """Values of the nodes of a NodeSet: flat, in document order, with the position of the node
    each belongs to (non-decreasing).

    A column of elements (a child path, the nodes' own texts) computes their texts and lines
    when first read: the columns that only lead to the next node path (`Items`, then `Item`, for
    `*/Items/Item`) never need them. `like` is a column of the same elements whose texts and
    lines are these (a node set's own texts are the child column it was found as)."""

    __slots__ = ("_texts", "_lines", "owners", "size", "elements", "_starts", "_by_text", "_like")

    def __init__(
        self,
        texts: list | None,
        lines: list | None,
        owners: list,
        size: int,
        elements: list | None = None,
        like: Column | None = None,
    ) -> None:
        self._texts = texts
        self._lines = lines
        self.owners = owners
        self.size = size  # how many nodes
        self.elements = elements  # the values' elements, for child paths (the next node path)
        self._like = like
        self._starts: list[int] | None = None
        self._by_text: dict[str, list[int]] | None = None

    @property
    def texts(self) -> list:
        texts = self._texts
        if texts is None:
            like = self._like
            texts = self._texts = like.texts if like is not None else _texts(self.elements or [])
        return texts

    @property
    def lines(self) -> list:
        lines = self._lines
        if lines is None:
            like = self._like
            elements = self.elements or ()
            lines = like.lines if like is not None else lines_of(elements)
            self._lines = lines
        return lines

    def starts(self) -> list[int]:
        """Node i's values are texts[starts[i]:starts[i + 1]]."""
        if self._starts is None:
            counts = [0] * (self.size + 1)
            for owner in self.owners:
                counts[owner + 1] += 1
            for i in range(self.size):
                counts[i + 1] += counts[i]
            self._starts = counts
        return self._starts

    def by_text(self) -> dict[str, list[int]]:
        """Text → positions of the nodes having a value with that text (ascending, distinct)."""
        if self._by_text is None:
            found: dict[str, list[int]] = {}
            for text, owner in zip(self.texts, self.owners):
                positions = found.get(text)
                if positions is None:
                    found[text] = [owner]
                elif positions[-1] != owner:
                    positions.append(owner)
            self._by_text = found
        return self._by_text

    def values_of(self, positions: list[int] | None) -> tuple[list, list]:
        """(values, lines) of the nodes at `positions` (all nodes for None), in order."""
        if positions is None:
            return list(self.texts), list(self.lines)
        starts, texts, lines = self.starts(), self.texts, self.lines
        values: list = []
        value_lines: list = []
        for i in positions:
            begin, end = starts[i], starts[i + 1]
            if begin == end:
                continue
            if end - begin == 1:
                values.append(texts[begin])
                value_lines.append(lines[begin])
            else:
                values.extend(texts[begin:end])
                value_lines.extend(lines[begin:end])
        return values, value_lines


class NodeSet:
    """The nodes at one node path of one document, with columns and selections built on demand."""

    __slots__ = ("nodes", "columns", "selections", "_everyone", "_position", "_by_name")

    def __init__(self, nodes: list, found_as: Column | None = None) -> None:
        """`found_as`: the child column these nodes are the elements of, whose texts and lines
        are then the nodes' own (`*/Items/Item/GUID` after `*/Items/Item,GUID`)."""
        self.nodes = nodes
        self._position: dict[int, int] | None = None
        self._by_name: dict[str, list] | None = None  # a single node's children by local name
        self.columns: dict[Any, Column] = {}
        if found_as is not None:
            owners = list(range(len(nodes)))
            self.columns[()] = Column(None, None, owners, len(nodes), nodes, like=found_as)
        # (checks) → sorted positions; ("term", attributes, term) → a term's set of positions
        self.selections: dict[Any, Any] = {}
        self._everyone: frozenset[int] | None = None

    def everyone(self) -> frozenset[int]:
        if self._everyone is None:
            self._everyone = frozenset(range(len(self.nodes)))
        return self._everyone

    def own(self) -> Column:
        """The nodes' own texts (a 1.x bare NodePath)."""
        column = self.columns.get(())
        if column is None:
            nodes = self.nodes
            column = self.columns[()] = Column(
                None, None, list(range(len(nodes))), len(nodes), nodes
            )
        return column

    def child(self, steps: tuple[str, ...]) -> Column:
        """The texts at a dotted child path below each node."""
        column = self.columns.get(steps)
        if column is None:
            column = self.columns[steps] = self._child_column(steps)
        return column

    def attribute(self, name: str) -> Column:
        """Each node's value of an attribute (stripped; nodes without it have none)."""
        key = ("@", name)
        column = self.columns.get(key)
        if column is None:
            texts, owners = [], []
            for i, node in enumerate(self.nodes):
                value = get_attribute(node, name)
                if value is not None:
                    texts.append(value)
                    owners.append(i)
            nodes = self.nodes
            lines = lines_of([nodes[i] for i in owners])
            column = self.columns[key] = Column(texts, lines, owners, len(nodes))
        return column

    def _child_column(self, steps: tuple[str, ...]) -> Column:
        """Every element named like the last step, found by lxml's C-level `iter` (one pass,
        a proxy only per match, ten times an XPath's speed), kept when its ancestors spell the
        rest of the path up to one of the nodes."""
        nodes = self.nodes
        if not nodes:
            return Column([], [], [], 0, [])
        if len(nodes) == 1 and len(steps) == 1:
            return self._root_child_column(steps[0])
        try:
            found = nodes[0].getroottree().getroot().iter("{*}" + steps[-1])
        except ValueError:  # a name lxml does not accept as a tag
            return self._walked_column(steps)
        if self._position is None:
            # Keyed by proxy identity: lxml hands out the same proxy for an element while one
            # is alive, and `nodes` keeps them alive.
            self._position = {id(node): i for i, node in enumerate(nodes)}
        position = self._position
        found = list(found)
        if len(steps) == 1:
            owners = [position.get(id(element.getparent())) for element in found]
        else:
            upper = steps[-2::-1]
            owners = [_owner(element, upper, position) for element in found]
        if None in owners:  # namesakes elsewhere in the document
            kept = [i for i, owner in enumerate(owners) if owner is not None]
            found = [found[i] for i in kept]
            owners = [owners[i] for i in kept]
        return Column(None, None, owners, len(nodes), found)

    def _root_child_column(self, name: str) -> Column:
        """A child column of a single node. A node with few children (a small file's root:
        texture.xml) is read in one pass grouping them by local name, shared by the columns
        asked for next; many children (a repository's Items) are filtered by lxml."""
        node = self.nodes[0]
        if len(node) > GROUP_MAX_CHILDREN:
            children = list(node.iterchildren("{*}" + name))
            return Column(None, None, [0] * len(children), 1, children)
        groups = self._by_name
        if groups is None:
            groups = self._by_name = {}
            for child in node.iterchildren(etree.Element):
                tag = child.tag
                key = tag.rpartition("}")[2] if tag[0] == "{" else tag
                group = groups.get(key)
                if group is None:
                    groups[key] = [child]
                else:
                    group.append(child)
        found = groups.get(name, [])
        return Column(None, None, [0] * len(found), 1, found)

    def _walked_column(self, steps: tuple[str, ...]) -> Column:
        elements, owners = [], []
        for i, node in enumerate(self.nodes):
            found = descend(node, steps)
            elements.extend(found)
            owners.extend([i] * len(found))
        return Column(None, None, owners, len(self.nodes), elements)

    def select(self, attr_checks: Checks | None, child_checks: Checks | None) -> list[int] | None:
        """Positions of the nodes passing the checks, ascending; None for every node."""
        if attr_checks is None and child_checks is None:
            return None
        key = (attr_checks, child_checks)
        if key in self.selections:
            return self.selections[key]
        passing = self.everyone()
        if attr_checks is not None:
            passing = passing & self._passing(attr_checks, attributes=True)
        if child_checks is not None:
            passing = passing & self._passing(child_checks, attributes=False)
        chosen = self.selections[key] = sorted(passing)
        return chosen

    def _passing(self, checks: Checks, *, attributes: bool) -> frozenset[int]:
        """Checks joined left to right without precedence: the terms are pure, so `a & b` is
        the intersection of their node sets and `a | b` the union."""
        result = self._term(checks.terms[0], attributes)
        for join, term in zip(checks.joins, checks.terms[1:]):
            other = self._term(term, attributes)
            result = result & other if join == AND else result | other
        return result

    def _term(self, term, attributes: bool) -> frozenset[int]:
        key = ("term", attributes, term)
        cached = self.selections.get(key)
        if cached is not None:
            return cached
        column = self.attribute(term.path[0]) if attributes else self.child(term.path)
        by_text = column.by_text()
        if term.pattern is None:
            found = frozenset(by_text.get(term.value, ()))
        else:
            search = term.pattern.searcher()  # may raise RegexTimeout: nothing is memoised then
            found = frozenset(
                i for text, positions in by_text.items() if search(text) for i in positions
            )
        result = self.everyone() - found if term.negate else found
        self.selections[key] = result
        return result


def node_set(steps: tuple[TagTest, ...], root: etree._Element, memo: dict) -> NodeSet:
    """The (memoised) nodes of a document at a node path."""
    key = ("nodes", steps)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _node_set_at(steps, root, memo)
    return found


def _node_set_at(steps: tuple[TagTest, ...], root: etree._Element, memo: dict) -> NodeSet:
    """The node path's elements in document order. A path ending in an exact tag is the child
    column of the path one step shorter (memoised too: `*/Items/Item/GUID` reuses the nodes,
    texts and lines of the GUID column of `*/Items/Item`); other tests go through XPath, or a
    walk."""
    last = steps[-1]
    top = root.getroottree().getroot()
    if len(steps) == 1:
        return NodeSet([top] if last.matches(localname(top)) else [])
    if last.kind == "exact" and last.text is not None:
        column = node_set(steps[:-1], root, memo).child((last.text,))
        return NodeSet(column.elements or [], column)
    path_text = _node_path_text(steps)
    return NodeSet(_xpath(path_text)(top) if path_text is not None else _walk(steps, top))


def _texts(elements: list) -> list[str]:
    """`node_text` of each element, inlined: it runs for every value of a large document."""
    return [text.strip() if (text := element.text) else "" for element in elements]


def _owner(element, upper: tuple[str, ...], position: dict[int, int]) -> int | None:
    """The position of the node `element` hangs below through `upper` (names, nearest first)."""
    ancestor = element.getparent()
    for step in upper:
        if ancestor is None or localname(ancestor) != step:
            return None
        ancestor = ancestor.getparent()
    return position.get(id(ancestor)) if ancestor is not None else None


def _walk(steps: tuple[TagTest, ...], root: etree._Element) -> list:
    if not steps[0].matches(localname(root)):
        return []
    nodes = [root]
    for test in steps[1:]:
        nodes = [child for node in nodes for child in _children(node, test)]
        if not nodes:
            break
    return nodes


def select(query: XmlQuery, root: etree._Element, memo: dict | None = None) -> list:
    """The elements on the node path that pass the attribute and child checks, in document order."""
    found = node_set(query.steps, root, {} if memo is None else memo)
    positions = found.select(query.attr_checks, query.child_checks)
    return list(found.nodes) if positions is None else [found.nodes[i] for i in positions]


def evaluate(query: XmlQuery, root: etree._Element, memo: dict | None = None) -> tuple[list, list]:
    """(values, lines): what the expression extracts, and each value's element line.

    `memo` (one dict per parsed document) shares nodes, columns and selections between the rules
    that query the same document.
    """
    found = node_set(query.steps, root, {} if memo is None else memo)
    positions = found.select(query.attr_checks, query.child_checks)
    kind = query.extract
    if kind == NODE_TEXT:
        return found.own().values_of(positions)
    if kind == TEXTS:
        return found.child(query.names[0]).values_of(positions)
    if kind == ATTRS:
        return found.attribute(query.names[0][0]).values_of(positions)
    nodes = found.nodes
    chosen = range(len(nodes)) if positions is None else positions
    lines = found.own().lines
    if kind == DOM:
        return [nodes[i] for i in chosen], [lines[i] for i in chosen]
    if kind == RECORDS:
        columns = [(label, found.child(steps)) for label, steps in zip(query.labels, query.names)]
    elif kind == ATTR_RECORDS:
        columns = [(label, found.attribute(label)) for label in query.labels]
    else:
        raise ValueError(f"unknown extraction {kind!r}")
    slices = [(label, column.texts, column.starts()) for label, column in columns]
    records = [
        {label: texts[starts[i] : starts[i + 1]] for label, texts, starts in slices} for i in chosen
    ]
    return records, [lines[i] for i in chosen]
