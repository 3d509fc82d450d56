"""The ArtEase path language for XML files (`xpath` / `subxpath`), compiled once, run on lxml.

    NodePath [ "[" AttrChecks "]" ] [ "." ChildChecks ] [ "," Extract ] [ ":" AttrExtract ]

`compile_xml_path(text)` turns an expression into an `XmlQuery` (a frozen, picklable value) or
raises `PathSyntaxError`; `evaluate(query, root)` returns `(values, lines)`, two parallel lists
(evaluated column by column in stages/rules/xmleval.py). Tags are compared by local name
(namespaces ignored).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import NamedTuple

from lxml import etree

from .lines import line_of
from .regex import Regex, compile_regex


class PathSyntaxError(ValueError):
    """An expression that does not parse; the message says where and why."""


# A plain word: one or more characters other than white space and ` " & | = ! . , : [ ]
_PLAIN_WORD = re.compile(r'[^\s`"&|=!.,:\[\]]+')
# A name step (child tag or attribute): a plain word without `@` (attribute marker).
_NAME_STEP = re.compile(r'[^\s`"&|=!.,:\[\]@]+')
_SPACE = re.compile(r"\s*")

ANY, EXACT, PREFIX, SUFFIX = "any", "exact", "prefix", "suffix"
TEXTS, RECORDS, DOM, ATTRS, ATTR_RECORDS, NODE_TEXT = (
    "texts",
    "records",
    "dom",
    "attrs",
    "attr_records",
    "node_text",
)
AND, OR = "&", "|"


class TagTest(NamedTuple):
    """One NodePath step: `*`, `Tag`, `Prefix*` or `*Suffix`. A NamedTuple: node paths key the
    memo of every document (stages/rules/xmleval.py), and a tuple hashes in C."""

    kind: str
    text: str = ""

    def matches(self, localname: str) -> bool:
        if self.kind == ANY:
            return True
        if self.kind == EXACT:
            return localname == self.text
        if self.kind == PREFIX:
            return localname.startswith(self.text)
        return localname.endswith(self.text)


@dataclass(frozen=True, slots=True)
class Comparison:
    """`name==value` / `name!=value`: on child text at a dotted path, or on an attribute."""

    path: tuple[str, ...]  # child steps, or (attribute name,)
    negate: bool  # True for !=
    value: str | None  # literal text, or None when `pattern` is used
    pattern: Regex | None = None  # backtick regex (re.search semantics, bounded time)

    def holds_for(self, text: str) -> bool:
        if self.pattern is not None:
            return self.pattern.found_in(text)
        return text == self.value


@dataclass(frozen=True, slots=True)
class Checks:
    """Comparisons joined by & and |, evaluated left to right without precedence."""

    terms: tuple[Comparison, ...]
    joins: tuple[str, ...]  # len(terms) - 1 operators

    @property
    def mixed(self) -> bool:
        return AND in self.joins and OR in self.joins


@dataclass(frozen=True, slots=True)
class XmlQuery:
    """A compiled expression."""

    source: str
    steps: tuple[TagTest, ...]
    attr_checks: Checks | None
    child_checks: Checks | None
    extract: str  # TEXTS | RECORDS | DOM | ATTRS | ATTR_RECORDS | NODE_TEXT
    names: tuple[tuple[str, ...], ...] = ()  # dotted child paths, or (attr,) for attributes
    labels: tuple[str, ...] = ()  # the names as written (dict keys of RECORDS / ATTR_RECORDS)

    @property
    def mixes_and_or(self) -> bool:
        return any(c is not None and c.mixed for c in (self.attr_checks, self.child_checks))


# -- compiling -----------------------------------------------------------------------------------


def compile_xml_path(text: str) -> XmlQuery:
    """Compile an expression; raise PathSyntaxError naming the problem."""
    if not isinstance(text, str):
        raise PathSyntaxError(f"expected a string, got {type(text).__name__}")
    node_path, rest = _take_until(text, 0, "[.,:")
    steps = _compile_node_path(node_path)
    pos = rest
    attr_checks = child_checks = None
    extract_text = attr_text = None
    if pos < len(text) and text[pos] == "[":
        end = _find_top_level(text, pos + 1, "]")
        if end < 0:
            raise PathSyntaxError(f"'[' at {pos} has no matching ']'")
        attr_checks = _compile_checks(text[pos + 1 : end], attributes=True)
        pos = end + 1
    if pos < len(text) and text[pos] == ".":
        section, pos = _take_until(text, pos + 1, ",:[]")
        child_checks = _compile_checks(section, attributes=False)
    if pos < len(text) and text[pos] == ",":
        extract_text, pos = _take_until(text, pos + 1, ":[]")
    if pos < len(text) and text[pos] == ":":
        attr_text, pos = _take_until(text, pos + 1, "[]")
    if pos < len(text):
        raise PathSyntaxError(f"unexpected {text[pos]!r} at {pos}")
    if extract_text is not None and attr_text is not None:
        raise PathSyntaxError("cannot extract child texts and attributes in one expression")
    extract, names, labels = NODE_TEXT, (), ()
    if extract_text is not None:
        extract, names, labels = _compile_extract(extract_text)
    elif attr_text is not None:
        extract, names, labels = _compile_attr_extract(attr_text)
    return XmlQuery(text, steps, attr_checks, child_checks, extract, names, labels)


def _take_until(text: str, pos: int, stops: str) -> tuple[str, int]:
    """The text from `pos` up to the first top-level (unquoted) character of `stops`."""
    end = _find_top_level(text, pos, stops)
    end = len(text) if end < 0 else end
    return text[pos:end], end


def _find_top_level(text: str, pos: int, stops: str) -> int:
    """Index of the first character of `stops` outside backticks and double quotes, else -1."""
    quote = None
    for i in range(pos, len(text)):
        char = text[i]
        if quote:
            if char == quote:
                quote = None
        elif char in '`"':
            quote = char
        elif char in stops:
            return i
    if quote:
        raise PathSyntaxError(f"unterminated {quote} quote")
    return -1


def _compile_node_path(text: str) -> tuple[TagTest, ...]:
    if not text.strip():
        raise PathSyntaxError("empty node path")
    steps = []
    for raw in text.split("/"):
        tag = raw.strip()
        if not tag:
            raise PathSyntaxError(f"empty tag in node path {text.strip()!r}")
        if tag == "*":
            steps.append(TagTest(ANY))
        elif "*" not in tag:
            steps.append(TagTest(EXACT, _xml_name(tag, "tag")))
        elif tag.count("*") == 1 and tag.endswith("*"):
            steps.append(TagTest(PREFIX, _xml_name(tag[:-1], "tag prefix", shown=tag)))
        elif tag.count("*") == 1 and tag.startswith("*"):
            # a suffix may start with any character a name holds: checked behind a letter
            _xml_name("x" + tag[1:], "tag suffix", shown=tag)
            steps.append(TagTest(SUFFIX, tag[1:]))
        else:
            raise PathSyntaxError(f"'*' must be a whole tag, a prefix or a suffix: {tag!r}")
    return tuple(steps)


def _xml_name(name: str, what: str, *, shown: str | None = None) -> str:
    """`name` if it is an XML name without a colon (what elements' and attributes' local names
    are), else PathSyntaxError: a tag that no element can have is a mistake in the rule, not a
    path that matches nothing. lxml's own check decides (the XML 1.0 Name production)."""
    try:
        if "{" in name:  # QName would read it as {namespace}local
            raise ValueError(name)
        etree.QName(name)
    except ValueError:
        raise PathSyntaxError(
            f"{what} {shown or name!r} is not an XML name (a name starts with a letter or _ "
            "and holds letters, digits, _ - . and ·)"
        ) from None
    return name


def _compile_checks(text: str, *, attributes: bool) -> Checks:
    """Parse `name==value & name!=value | ...` (attributes: names may start with @)."""
    terms: list[Comparison] = []
    joins: list[str] = []
    pos = 0
    where = "attribute check" if attributes else "child check"
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
        path, pos = _parse_name(text, pos, attributes, where)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
        operator = text[pos : pos + 2]
        if operator not in ("==", "!="):
            shown = ".".join(path)
            hint = "" if attributes else f" (to extract it, write ',{shown}')"
            raise PathSyntaxError(f"{where} {shown!r} needs == or !={hint}")
        pos = _SPACE.match(text, pos + 2).end()  # type: ignore[union-attr]
        value, pattern, pos = _parse_value(text, pos, where)
        terms.append(Comparison(path, operator == "!=", value, pattern))
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
        if pos >= len(text):
            return Checks(tuple(terms), tuple(joins))
        if text[pos] not in "&|":
            raise PathSyntaxError(f"expected & or | in {where} at {text[pos:]!r}")
        joins.append(text[pos])
        pos += 1


def _parse_name(text: str, pos: int, attributes: bool, where: str) -> tuple[tuple[str, ...], int]:
    if attributes and text.startswith("@", pos):
        pos += 1
    steps = []
    while True:
        match = _NAME_STEP.match(text, pos)
        if not match:
            raise PathSyntaxError(f"{where}: expected a name at {text[pos:]!r}")
        step = match.group()
        if "*" in step:
            raise PathSyntaxError(f"{where}: '*' is only allowed in the node path ({step!r})")
        steps.append(_xml_name(step, f"{where}: the name"))
        pos = match.end()
        if attributes or not text.startswith(".", pos):
            return tuple(steps), pos
        pos += 1


def _parse_value(text: str, pos: int, where: str) -> tuple[str | None, Regex | None, int]:
    if pos >= len(text):
        raise PathSyntaxError(f"{where}: missing value")
    char = text[pos]
    if char == "`":
        end = text.find("`", pos + 1)
        if end < 0:
            raise PathSyntaxError(f"{where}: unterminated backtick")
        try:
            return None, compile_regex(text[pos + 1 : end]), end + 1
        except re.error as exc:
            raise PathSyntaxError(f"{where}: bad regex `{text[pos + 1 : end]}`: {exc}") from None
    if char == '"':
        end = text.find('"', pos + 1)
        if end < 0:
            raise PathSyntaxError(f"{where}: unterminated double quote")
        value = text[pos + 1 : end]
        if "`" in value:
            raise PathSyntaxError(f'{where}: a "quoted" value cannot hold a backtick')
        return value, None, end + 1
    match = _PLAIN_WORD.match(text, pos)
    if not match:
        raise PathSyntaxError(f"{where}: expected a value at {text[pos:]!r}")
    return match.group(), None, match.end()


def _compile_extract(text: str) -> tuple[str, tuple, tuple]:
    labels = tuple(part.strip() for part in text.split(","))
    if any(not label for label in labels):
        raise PathSyntaxError("empty name in the extract list")
    if "{dom}" in labels:
        if len(labels) > 1:
            raise PathSyntaxError("{dom} must be extracted alone")
        return DOM, (), labels
    names = []
    for label in labels:
        steps = tuple(step.strip() for step in label.split("."))
        for step in steps:
            if not step or not _NAME_STEP.fullmatch(step) or "*" in step:
                raise PathSyntaxError(f"not a child name: {label!r}")
            _xml_name(step, "the child name", shown=label)
        names.append(steps)
    return (TEXTS if len(names) == 1 else RECORDS), tuple(names), labels


def _compile_attr_extract(text: str) -> tuple[str, tuple, tuple]:
    labels = []
    for part in text.split(","):
        name = part.strip()
        if name.startswith("@"):
            name = name[1:].strip()
        if not name:
            raise PathSyntaxError("empty attribute name")
        if not _NAME_STEP.fullmatch(name) or "*" in name:
            raise PathSyntaxError(f"not an attribute name: {name!r}")
        labels.append(_xml_name(name, "the attribute name"))
    names = tuple((name,) for name in labels)
    return (ATTRS if len(names) == 1 else ATTR_RECORDS), names, tuple(labels)


# -- parsing documents ---------------------------------------------------------------------------

_PARSERS = threading.local()


def xml_parser() -> etree.XMLParser:
    """A safe parser (no entities, no DTD, no network), one per thread (lxml parsers are not shared)."""
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
        )
        _PARSERS.parser = parser
    return parser


class DocumentError(Exception):
    """A file that cannot be parsed; `line` is where the parser stopped, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def parse_xml(data: bytes, relpath: str = "") -> etree._Element:
    """The root element of an XML document; raise DocumentError with the line on failure."""
    try:
        return etree.fromstring(data, xml_parser())
    except etree.XMLSyntaxError as exc:
        message = exc.msg or str(exc)
        # lxml appends ", line N, column M" to its messages; the line is reported separately.
        message = re.sub(r",? line \d+, column \d+$", "", message.split(" (<string>")[0])
        raise DocumentError(f"not well-formed XML: {message}", exc.lineno) from None
    except (ValueError, LookupError) as exc:  # e.g. an unknown encoding in the declaration
        raise DocumentError(f"not well-formed XML: {exc}", 1) from None


# -- evaluating ----------------------------------------------------------------------------------


def localname(element: etree._Element) -> str:
    tag = element.tag
    return tag.rpartition("}")[2] if tag[0] == "{" else tag


def node_text(element: etree._Element) -> str:
    """The element's own text before its first child, stripped; "" when empty."""
    text = element.text
    return text.strip() if text else ""


def element_label(element: etree._Element) -> str:
    """How an element is shown and compared: "<Tag> line N"."""
    return f"<{localname(element)}> line {line_of(element)}"


def _children(element: etree._Element, test: TagTest):
    if test.kind == EXACT:
        return element.iterchildren("{*}" + test.text)
    children = element.iterchildren(etree.Element)
    if test.kind == ANY:
        return children
    return [child for child in children if test.matches(localname(child))]


def descend(element: etree._Element, steps: tuple[str, ...]) -> list[etree._Element]:
    """The elements at a dotted child path below `element`, in document order."""
    nodes = [element]
    for step in steps:
        key = "{*}" + step
        nodes = [child for node in nodes for child in node.iterchildren(key)]
        if not nodes:
            break
    return nodes


def get_attribute(element: etree._Element, name: str) -> str | None:
    """An attribute's value (stripped), matched by name, else by local name; None when absent."""
    value = element.get(name)
    if value is None and "{" not in name:
        for key, candidate in element.attrib.items():
            if key[0] == "{" and key.rpartition("}")[2] == name:
                value = candidate
                break
    return value.strip() if value is not None else None
