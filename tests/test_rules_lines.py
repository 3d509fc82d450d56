"""The true line of every element, past line 65,535 too (stages/rules/lines.py): the scan's law
against lxml, and the lines rule results and custom code get from large files."""

from __future__ import annotations

import gc
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from rules_helpers import run_rules, write_files

from stages.rules import registry
from stages.rules.custom.crossing import element_copy, element_from
from stages.rules.custom.host import close_workers
from stages.rules.lines import (
    LARGEST_STORED_LINE,
    DocumentLines,
    line_of,
    lines_of,
    start_tag_lines,
)
from stages.rules.paths import xml_parser

REPOSITORY_FILE = "Repository/resource.repository"

# -- random documents ------------------------------------------------------------------------------

BREAKS = st.sampled_from(["\n", "\r\n", "\r", "\n\n"])
SPACES = st.one_of(st.sampled_from([" ", "\t", "  "]), BREAKS.map(lambda b: " " + b + "  "))
NAMES = st.sampled_from(["a", "Item", "GUID", "x:n", "名字", "_n.1-b", "x:资源"])
ATTRIBUTES = st.sampled_from(["id", "line", "x:k", "值", "b-c"])
# Characters of text and attribute values: ">" and quotes are allowed, "<" and "&" are not raw
# (nor "]]>" in text).
TEXT_CHARS = st.sampled_from(list("ab 中>'\"-?/=\t") + ["\n", "\r\n", "&amp;", "&gt;", "&#x4e2d;"])
CHARS = st.one_of(TEXT_CHARS, st.just("]"))
FREE_TEXT = st.lists(st.sampled_from(list("ab <>'\"/=![中\t") + ["\n", "\r\n"]), max_size=12)


@st.composite
def attribute_value(draw) -> str:
    quote = draw(st.sampled_from(['"', "'"]))
    chars = draw(st.lists(CHARS, max_size=8))
    return quote + "".join(c for c in chars if c != quote) + quote


@st.composite
def start_tag(draw, name: str, namespaces: str = "") -> str:
    """`<name ...` without its end: attributes separated by spaces or line breaks."""
    names = draw(st.lists(ATTRIBUTES, unique=True, max_size=3))
    parts = [f"<{name}{namespaces}"]
    for attribute in names:
        parts.append(draw(SPACES) + attribute + "=" + draw(attribute_value()))
    parts.append(draw(st.sampled_from(["", " ", "\n", "\r\n  "])))
    return "".join(parts)


def _comment(text: str) -> str:
    body = text.replace("--", "- -")
    return f"<!--{body} -->"


def _cdata(text: str) -> str:
    return f"<![CDATA[{text.replace(']]>', ']] >')}]]>"


def _pi(text: str) -> str:
    return f"<?pi {text.replace('?>', '? >')}?>"


MISC = st.one_of(
    FREE_TEXT.map("".join).map(_comment),
    FREE_TEXT.map("".join).map(_pi),
    BREAKS,
)


@st.composite
def content(draw, depth: int, entity: bool) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "element", "element", "misc", "cdata", "entity"]))
        if kind == "text":
            parts.append("".join(draw(st.lists(TEXT_CHARS, max_size=6))))
        elif kind == "element" and depth > 0:
            parts.append(draw(element(depth - 1, entity)))
        elif kind == "misc":
            parts.append(draw(MISC))
        elif kind == "cdata":
            parts.append(_cdata("".join(draw(FREE_TEXT))))
        elif kind == "entity" and entity:
            parts.append("&e;")  # an internal entity holding markup (never expanded)
    return "".join(parts)


@st.composite
def element(draw, depth: int, entity: bool) -> str:
    name = draw(NAMES)
    tag = draw(start_tag(name))
    if draw(st.booleans()):
        return tag + "/>"
    end = draw(st.sampled_from(["", " ", "\n"]))
    return f"{tag}>{draw(content(depth, entity))}</{name}{end}>"


DOCTYPE = st.sampled_from(
    [
        "",
        '<!DOCTYPE Root SYSTEM "root.dtd">\n',
        "<!DOCTYPE Root [\n"
        "  <!ENTITY e \"<b>1</b> > <c x='>'/>\">\n"
        "  <!-- a comment <d> ' \" ] -->\n"
        "  <?pi <f> ] ?>\n"
        "  <!ELEMENT Root ANY>\n"
        '  <!ATTLIST Root x:a CDATA "d>"\n'
        "            id CDATA 'g> ]'>\n"
        "]>\n",
        '<!DOCTYPE Root PUBLIC "-//x//y" "y.dtd" [\n<!ENTITY e "<h/>">\n]  >',
    ]
)
ENCODINGS = st.sampled_from(["utf-8", "utf-16", "gbk", "utf-8-sig"])


class Document(NamedTuple):
    """A random document as text, split just after its root's start tag (where a test may add
    lines), and the encoding it is written in."""

    head: str
    body: str
    encoding: str

    def data(self, padding: int = 0) -> bytes:
        return (self.head + "\n" * padding + self.body).encode(self.encoding)


@st.composite
def documents(draw) -> Document:
    encoding = draw(ENCODINGS)
    declared = encoding.removesuffix("-sig")
    declaration = draw(st.sampled_from(["", f'<?xml version="1.0" encoding="{declared}"?>\n']))
    if encoding == "gbk" and not declaration:
        declaration = '<?xml version="1.0" encoding="gbk"?>'
    doctype = draw(DOCTYPE)
    before = "".join(draw(st.lists(MISC, max_size=2)))
    root_tag = draw(start_tag("Root", ' xmlns="urn:d" xmlns:x="urn:x"')) + ">"
    body = (
        draw(content(3, entity="ENTITY e" in doctype))
        + "</Root>"
        + "".join(draw(st.lists(MISC, max_size=2)))
    )
    return Document(declaration + doctype + before + root_tag, body, encoding)


def lxml_lines(data: bytes) -> list[int]:
    root = etree.fromstring(data, xml_parser())
    return [element.sourceline for element in root.iter(etree.Element)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_the_scan_finds_the_lines_lxml_gives_below_the_limit(document):
    """The law that makes the scan trustworthy: on any document below line 65,535 (where lxml's
    lines are exact), the line where each start tag ends is lxml's line of each element, in
    document order, whatever comments, CDATA, PIs, DOCTYPE, attribute values holding ">",
    start tags over several lines, namespaces, line ends and encoding it has."""
    data = document.data()
    assert list(start_tag_lines(data) or ()) == lxml_lines(data)


PADDING = 70_000  # lines added after the root's start tag: every other element is past the limit


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_past_the_limit_every_element_has_its_line(document):
    """A document moved down by PADDING lines: each element's line is its line in the document
    without them (lxml's, exact there) plus PADDING, where lxml's own is often another."""
    small = lxml_lines(document.data())
    data = document.data(PADDING)
    root = etree.fromstring(data, xml_parser())
    lines = DocumentLines(root, data)
    elements = list(root.iter(etree.Element))
    expected = small[:1] + [line + PADDING for line in small[1:]]
    assert [lines.line(element) for element in elements] == expected
    assert lines_of(elements) == expected
    assert [line_of(element) for element in elements] == expected


# -- the table: its trust, its cost, its life --------------------------------------------------


def pretty_repository(items: int) -> tuple[str, list[int]]:
    """A pretty-printed repository and the line of each Item's start tag."""
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<Repository>", "  <Items>"]
    starts = []
    for i in range(items):
        starts.append(len(out) + 1)
        out += ["    <Item>", f"      <Name>n{i}</Name>", "      <Deps/>", "    </Item>"]
    out += ["  </Items>", "</Repository>", ""]
    return "\n".join(out), starts


def test_a_small_document_keeps_lxmls_lines_without_a_scan():
    text, starts = pretty_repository(10)
    root = etree.fromstring(text.encode(), xml_parser())
    lines = DocumentLines(root, text.encode())
    assert lines.table() == {}  # nothing to build: no line past what lxml stores
    assert [lines.line(e) for e in root.iter("Item")] == starts


def test_lxml_is_wrong_past_the_limit_and_the_table_is_not():
    """What the module exists for, and the proxies it keeps: only the elements lxml tells
    wrong (here the Items and the empty Deps, not the Names), alive while the table lives."""
    text, starts = pretty_repository(20_000)
    data = text.encode()
    root = etree.fromstring(data, xml_parser())
    items = list(root.iter("Item"))
    late = [i for i, line in enumerate(starts) if line > LARGEST_STORED_LINE]
    assert late and all(items[i].sourceline == starts[i] + 1 for i in late)  # lxml: next line
    lines = DocumentLines(root, data)
    assert [lines.line(item) for item in items] == starts
    names = [item[0] for item in items]
    assert [lines.line(name) for name in names] == [line + 1 for line in starts]
    table = lines.table()
    assert len(table) == 2 * len(late)  # each late Item and its Deps
    del items, names
    gc.collect()
    assert [lines.line(item) for item in root.iter("Item")] == starts  # kept: same proxies


def test_a_scan_that_disagrees_with_lxml_is_not_trusted(monkeypatch):
    """Where lxml's lines are exact (before the limit) and the scan says otherwise, or the
    counts differ, the document keeps lxml's lines rather than a wrong table."""
    import stages.rules.lines as module

    text, _starts = pretty_repository(20_000)
    data = text.encode()
    real = module.start_tag_lines
    for wrong in (lambda d: [line + 1 for line in real(d)], lambda d: real(d)[1:]):
        monkeypatch.setattr(module, "start_tag_lines", wrong)
        root = etree.fromstring(data, xml_parser())
        lines = DocumentLines(root, data)
        assert lines.table() == {}
        assert [lines.line(e) for e in root.iter("Item")] == [
            e.sourceline for e in root.iter("Item")
        ]


def test_a_documents_lines_end_with_it():
    """The table lives as long as its DocumentLines (held with the parsed document): then the
    proxies it kept are freed, and no other element can be mistaken for one of them."""
    from stages.rules.lines import _LIVE

    text, _starts = pretty_repository(20_000)
    data = text.encode()
    root = etree.fromstring(data, xml_parser())
    lines = DocumentLines(root, data)
    lines.table()
    assert lines in _LIVE
    del lines
    assert not _LIVE  # freed by reference counting, with its kept proxies


# -- rule results and custom code on large files ----------------------------------------------


class LargeFile(NamedTuple):
    """A repository past line 65,535: its text, and the lines where the start tags of its Items
    and of their Deps end (each Item also says its own line in its `line` attribute)."""

    text: str
    items: list[int]
    deps: list[int]


def large_repository(pretty: bool) -> LargeFile:
    """Pretty-printed (an element a line), or compact (an Item a line, its first child's text
    running over two lines): lxml gets most Items past the limit wrong either way."""
    out = ['<?xml version="1.0" encoding="utf-8"?>', "<!-- <Item> -->", "<Repository>", "<Items>"]
    items, deps = [], []
    count = 10_000 if pretty else 34_000
    for i in range(count):
        line = len(out) + 1
        name = f"late{i}" if i >= count - 3 else f"n{i}"
        items.append(line)
        if pretty:
            deps.append(line + 2)
            out += [
                f'  <Item line="{line}">',
                f"    <Name>{name}</Name>",
                "    <Deps/>",
                "    <Annotation>",
                "      <Anno><Key>k</Key><Value>v</Value></Anno>",
                "    </Annotation>",
                "  </Item>",
            ]
        else:
            deps.append(line + 1)
            out += [
                f'  <Item line="{line}"><Note>first',
                f"second</Note><Name>{name}</Name><Deps/></Item>",
            ]
    out += ["</Items>", "</Repository>", ""]
    assert len(out) > 65_535 and items[-1] > 65_535
    return LargeFile("\n".join(out), items, deps)


def all_fail(rule_id: str, xpath: str) -> dict:
    return {
        "id": rule_id,
        "rpath": r"resource\.repository$",
        "xpath": xpath,
        "condition": ["满足表达式", "False"],
    }


@pytest.fixture(autouse=True)
def fresh_workers():
    close_workers()
    yield
    close_workers()


@pytest.mark.parametrize("pretty", [True, False], ids=["pretty", "compact"])
def test_rule_results_name_the_lines_of_elements_past_65535(tmp_path, pretty):
    """A failing rule's `lines` (and its `{dom}` errors, "<Item> line N"), the lines of an
    attribute's and of a child's values, and `d.sourceline` in an expression: each the line of
    the element's start tag, past the limit too."""
    large = large_repository(pretty)
    project = write_files(tmp_path / "big", {REPOSITORY_FILE: large.text})
    rules = [
        all_fail("items", "*/Items/Item,{dom}"),
        all_fail("line-attribute", "*/Items/Item:line"),
        all_fail("deps", "*/Items/Item,Deps"),
        {
            "id": "sourceline",
            "rpath": r"resource\.repository$",
            "xpath": "*/Items/Item,{dom}",
            "condition": ["满足表达式", "d.sourceline == int(d.get('line'))"],
        },
    ]
    doc = run_rules(project, rules)
    assert doc["rule_errors"] == []
    found = {failure["rule"]: failure for failure in doc["failures"]}
    assert set(found) == {"items", "line-attribute", "deps"}  # `sourceline` passes
    assert found["items"]["lines"] == large.items
    assert found["items"]["errors"] == [f"<Item> line {line}" for line in large.items]
    assert found["line-attribute"]["errors"] == [str(line) for line in large.items]
    assert found["line-attribute"]["lines"] == large.items
    assert found["deps"]["lines"] == large.deps


@pytest.mark.parametrize("pretty", [True, False], ids=["pretty", "compact"])
def test_custom_code_sees_the_lines_of_elements_past_65535(tmp_path, pretty):
    """`sourceline` in a func_str, of the elements it is given and of their children, and the
    lines of the elements it returns, given or new."""
    large = large_repository(pretty)
    project = write_files(tmp_path / "big", {REPOSITORY_FILE: large.text})
    code = (
        "def lines(data, **kw):\n"
        "    return [[e.sourceline, e.find('Deps').sourceline] for e in data]\n"
        "def given(data, **kw):\n"
        "    return data[-1:]\n"
        "def child(data, **kw):\n"
        "    return [e.find('Deps') for e in data[:1]]\n"
    )
    rules = [
        {
            "id": name,
            "rpath": r"resource\.repository$",
            "xpath": "*/Items/Item.Name==`^late`,{dom}",
            "condition": [f"func_{name}"],
            "func_str": code,
        }
        for name in ("lines", "given", "child")
    ]
    doc = run_rules(project, rules)
    assert doc["rule_errors"] == []
    found = {failure["rule"]: failure for failure in doc["failures"]}
    late = list(zip(large.items[-3:], large.deps[-3:]))
    assert found["lines"]["errors"] == [[item, deps] for item, deps in late]
    assert found["given"]["errors"] == [f"<Item> line {large.items[-1]}"]
    assert found["given"]["lines"] == [large.items[-1]]
    assert found["child"]["errors"] == [f"<Deps> line {large.deps[-3]}"]


def test_a_copys_lines_outlive_the_cycle_collector():
    """A copy whose root is before the limit and whose children are past it (an element that
    spans line 65,535) keeps its children's lines while custom code holds only the root."""
    copy = element_from(b"<a><b/><c/></a>", [65_000, 70_000, 70_001])
    gc.collect()
    assert [node.sourceline for node in copy.iter()] == [65_000, 70_000, 70_001]
    held = copy[1]
    del copy
    gc.collect()
    assert [held.getparent().sourceline, held.sourceline] == [65_000, 70_001]


def test_a_copy_takes_the_true_lines_of_the_original():
    large = large_repository(pretty=True)
    document = registry.XML.parse(large.text.encode(), REPOSITORY_FILE)
    last = list(document.root.iter("Item"))[-1]
    _xml, lines = element_copy(last)
    assert lines[0] == large.items[-1] and large.deps[-1] in lines
