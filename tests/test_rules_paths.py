"""The XML path language (spec/rules.md "The path language for XML")."""

from __future__ import annotations

import pickle

import pytest
from rules_helpers import REPOSITORY, parse

from stages.rules.paths import DocumentError, PathSyntaxError, compile_xml_path, parse_xml
from stages.rules.xmleval import evaluate

REPO = parse(REPOSITORY)


def values(expr: str, root=REPO) -> list:
    return evaluate(compile_xml_path(expr), root)[0]


def test_child_check_and_extract():
    """`*/Items/Item.Type==Material,GUID` gives the GUIDs of the materials."""
    assert values("*/Items/Item.Type==Material,GUID") == [
        "914fa3a0-62cd-4b5a-83df-92fdf494534a",
        "e081bf41-a561-4750-83af-78c80468bc6c",
    ]


def test_regex_value_in_backticks_with_and():
    """A backticked regex is searched, and & requires both checks."""
    assert values("*/Items/Item.Type==Model&Name==`^char_`,Deps") == [
        "e081bf41-a561-4750-83af-78c80468bc6c"
    ]
    assert values("*/Items/Item.Type==Material&Name==`^char_`,Deps") == []


def test_regex_not_equal_means_no_match():
    """`name!=`regex`` keeps the nodes whose text the regex does not match."""
    assert values("*/Items/Item.Name!=`_mat$`,Name") == ["Wall", "char_hero"]


def test_bare_node_path_returns_texts():
    """A 1.x bare NodePath returns the text of each matched node (repeats in document order)."""
    assert values("*/Items/Item/Deps") == [
        "9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2",
        "12345678-9876-1234-abcd-1234567890ab",
        "e081bf41-a561-4750-83af-78c80468bc6c",
    ]
    assert values("*/Items/Item/GUID") == values("*/Items/Item,GUID")


def test_dotted_check_and_dotted_extract():
    """Dotted child paths work in checks and in extracts."""
    assert values(
        "*/Items/Item.Type==Mesh&Annotation.Anno.Key==CollisionShape,Annotation.Anno.Value"
    ) == ["e4ea79e4-3505-4e96-bbc0-bc567a1204e5"]


def test_several_names_give_records():
    """Several extract names give one dict of lists per matched node (lists may be empty)."""
    assert values("*/Items/Item.Type==Material,Package,Name") == [
        {"Package": ["Test/Test_Demo"], "Name": ["Hole_mat"]},
        {"Package": ["Test/Test_Demo"], "Name": ["Trim_mat"]},
    ]
    assert values("*/Items/Item.Type==Model,Deps,Missing") == [
        {"Deps": ["e081bf41-a561-4750-83af-78c80468bc6c"], "Missing": []}
    ]


def test_dom_extract_returns_elements_with_lines():
    """`{dom}` returns the matched elements themselves, with their lines."""
    found, lines = evaluate(compile_xml_path("*/Items/Item.Type==Mesh,{dom}"), REPO)
    assert [e.tag for e in found] == ["Item"] and lines == [found[0].sourceline]


def test_or_and_left_to_right_without_precedence():
    """& and | are evaluated left to right: `A|B&C` is `(A|B)&C`, and the query says it mixes."""
    query = compile_xml_path("*/Items/Item.Type==Mesh|Type==Model&Name==Wall,GUID")
    assert query.mixes_and_or
    assert evaluate(query, REPO)[0] == ["e5ce0940-f689-404d-968f-775317804069"]
    assert not compile_xml_path("*/Items/Item.Type==Mesh|Type==Model,GUID").mixes_and_or


def test_double_quoted_value_protects_special_characters():
    """A double-quoted value may hold . , : & | = ! [ ] and spaces."""
    root = parse("<R><I><N>a.b, c:d&amp;e|f=g!h[i]</N><V>1</V></I><I><N>x</N><V>2</V></I></R>")
    assert values('*/I.N=="a.b, c:d&e|f=g!h[i]",V', root) == ["1"]
    assert values("*/I.N==`^a\\.b, c:`,V", root) == ["1"]


def test_plain_word_accepts_chinese_and_rejects_dots():
    """Plain words may be Chinese; `1.5` is not a plain word (a rule error)."""
    root = parse("<R><I><类型>模型</类型><V>1.5</V></I></R>")
    assert values("*/I.类型==模型,V", root) == ["1.5"]
    assert values('*/I.V=="1.5",类型', root) == ["模型"]
    with pytest.raises(PathSyntaxError):
        compile_xml_path("*/I.V==1.5,V")


def test_white_space_is_ignored():
    """White space around names, operators and values is ignored."""
    assert values(" * / Items / Item . Type == Material , GUID ") == values(
        "*/Items/Item.Type==Material,GUID"
    )


def test_attribute_checks_and_missing_attribute():
    """`[@a==v]` filters on attributes; a missing attribute makes == false and != true."""
    root = parse(
        '<M><Root><Entity kind="static"><F>1</F></Entity><Entity kind="dyn"><F>2</F>'
        "</Entity><Entity><F>3</F></Entity></Root></M>"
    )
    assert values("*/Root/Entity[@kind==static],F", root) == ["1"]
    assert values("*/Root/Entity[kind!=static],F", root) == ["2", "3"]
    assert values("*/Root/Entity[@kind==`^d`|@kind==static],F", root) == ["1", "2"]


def test_attribute_extraction_one_and_several():
    """`:a` gives the values of nodes that have it; `:a,b` one dict per node."""
    root = parse('<Texture><Format quality=" high " x="1">A</Format><Format>B</Format></Texture>')
    assert values("Texture/Format:quality", root) == ["high"]
    assert values("Texture/Format:quality,x", root) == [
        {"quality": ["high"], "x": ["1"]},
        {"quality": [], "x": []},
    ]


def test_wildcards_prefix_and_suffix():
    """`*`, `Prefix*` and `*Suffix` tags match every, starting-with and ending-with children."""
    root = parse("<R><ItemA>1</ItemA><ItemB>2</ItemB><OtherItem>3</OtherItem><X>4</X></R>")
    assert values("R/*", root) == ["1", "2", "3", "4"]
    assert values("R/Item*", root) == ["1", "2"]
    assert values("R/*Item", root) == ["3"]
    assert values("Q/*", root) == []


def test_namespaces_are_ignored():
    """Tags compare by local name, whatever their namespace."""
    root = parse('<R xmlns="urn:x"><I><T>a</T></I></R>')
    assert values("R/I,T", root) == ["a"]


def test_text_is_own_text_stripped():
    """A node's text is lxml's .text stripped; an empty element gives ""."""
    root = parse("<R><I>  a <b>x</b> tail</I><I/></R>")
    assert values("R/I", root) == ["a", ""]


def test_lines_follow_values():
    """Each value carries the line of its element."""
    root = parse("<R>\n<I>\n<G>a</G>\n</I>\n<I><G>b</G></I></R>")
    assert evaluate(compile_xml_path("R/I,G"), root) == (["a", "b"], [3, 5])


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "*/Items/Item.Type",
        "*/Items/It*em",
        "*/Items/**",
        "*/Items/Item,GUID:attr",
        "*/Items/Item,",
        "*/Items/Item,GUID,,Name",
        "*/Items/Item,{dom},GUID",
        "*/Items/Item.Type==`[`,GUID",
        "*/Items/Item.Type==`abc",
        '*/Items/Item.Type=="a',
        "*//Item",
        "*/Items/Item.Type==Material GUID",
        "*/Items/Item[@kind==a",
        "*/Items/Item.*==a,GUID",
        '*/Items/Item.Type=="a`b",GUID',
        "*/Items/Item.Type==a,Annotation..Anno",
        # not XML names (spec "The path language": a tag is an XML name)
        "Root/1Item,Name",
        "Root/Item#,Name",
        "Root/{urn:x}Item",
        "Root/It#*,Name",
        "Root/*It#,Name",
        "Root/Item.Ty#pe==a,Name",
        "Root/Item.Type==a,Na#me",
        "Root/Item[@k#==a]",
        "Root/Item:k#",
    ],
)
def test_malformed_expressions_are_rejected(expr):
    """Expressions outside the grammar raise PathSyntaxError (which makes a rule error)."""
    with pytest.raises(PathSyntaxError):
        compile_xml_path(expr)


def test_xml_names_of_every_script_are_tags():
    """What XML allows in a name stays allowed: Chinese, accents, digits after the start, - and
    _, and a prefix or suffix test's parts."""
    root = parse("<根><模型 k-1='v'><名_称>a</名_称></模型><é9>b</é9></根>")
    assert evaluate(compile_xml_path("根/模型,名_称"), root)[0] == ["a"]
    assert evaluate(compile_xml_path("根/模型:k-1"), root)[0] == ["v"]
    assert evaluate(compile_xml_path("根/é*"), root)[0] == ["b"]
    assert evaluate(compile_xml_path("根/*9"), root)[0] == ["b"]


def test_compiled_queries_pickle():
    """Compiled queries survive pickling (they travel to Ray workers inside the rules)."""
    query = compile_xml_path("*/Items/Item.Type==Model&Name==`^char_`,Deps")
    assert evaluate(pickle.loads(pickle.dumps(query)), REPO) == evaluate(query, REPO)


def test_parse_errors_carry_the_line():
    """Malformed XML raises DocumentError with the line where parsing stopped."""
    with pytest.raises(DocumentError) as caught:
        parse_xml(b"<a>\n<b>\n</a>")
    assert caught.value.line == 3
    with pytest.raises(DocumentError):
        parse_xml(b'<?xml version="1.0" encoding="utf-8"?><a>\xff\xfe</a>')


def test_parser_does_not_expand_entities():
    """External entities are not resolved (safe parser)."""
    data = b'<!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><r><v>&e;</v></r>'
    root = parse_xml(data)
    assert "root:" not in (root.findtext("v") or "")


def test_shared_memo_matches_fresh_evaluation_on_tricky_nesting():
    """Columns shared through a memo give what each expression gives alone: namespaced children
    count, deeper or misplaced namesakes do not."""
    root = parse(
        '<R xmlns:a="urn:a"><I><G>1</G><a:G>2</a:G><X><G>nested</G></X></I>'
        "<I><X><G>n2</G></X></I><Other><I><G>deep</G></I></Other></R>"
    )
    cases = {
        "R/I,G": ["1", "2"],
        "R/I,X.G": ["nested", "n2"],
        "R/I.X.G==n2,X.G": ["n2"],
        "R/I.G==2|X.G==n2,G": ["1", "2"],
        "R/I.G!=1,X.G": ["n2"],
        "R/I,G,X.G": [{"G": ["1", "2"], "X.G": ["nested"]}, {"G": [], "X.G": ["n2"]}],
    }
    memo: dict = {}
    for expr, expected in cases.items():
        assert evaluate(compile_xml_path(expr), root, memo)[0] == expected, expr
        assert evaluate(compile_xml_path(expr), root)[0] == expected, expr


def test_bare_node_path_after_its_child_column_gives_the_same_texts_and_lines():
    """`R/I/G` after `R/I,G` in one memo reuses the column's elements: same values, same lines,
    whichever is evaluated first."""
    source = "<R>\n<I>\n<G> a </G>\n<G>b</G>\n</I>\n<I><G/></I>\n<G>top</G>\n</R>"
    expected_nodes = (["a", "b", ""], [3, 4, 6])
    expected_column = (["a", "b", ""], [3, 4, 6])
    for order in (("R/I,G", "R/I/G"), ("R/I/G", "R/I,G")):
        root = parse(source)
        memo: dict = {}
        got = {expr: evaluate(compile_xml_path(expr), root, memo) for expr in order}
        assert tuple(got["R/I/G"]) == expected_nodes
        assert tuple(got["R/I,G"]) == expected_column
        assert evaluate(compile_xml_path("R/I/G,{dom}"), root, memo)[1] == [3, 4, 6]


def test_children_of_a_single_root_match_the_per_node_definition():
    """A root's child columns, found in one pass over its children, keep document order, ignore
    namespaces, comments and deeper namesakes, and serve the columns asked for after them."""
    root = parse(
        '<T xmlns:a="urn:a">\n<W>1</W>\n<!-- <W>c</W> -->\n<a:W> 2 </a:W>\n<H>3</H>\n'
        "<X><W>deep</W></X>\n<W/>\n</T>"
    )
    memo: dict = {}
    assert evaluate(compile_xml_path("T,W"), root, memo) == (["1", "2", ""], [2, 4, 7])
    assert evaluate(compile_xml_path("T,H,W"), root, memo)[0] == [{"H": ["3"], "W": ["1", "2", ""]}]
    assert evaluate(compile_xml_path("T,Missing"), root, memo) == ([], [])
    assert evaluate(compile_xml_path("T,X.W"), root, memo)[0] == ["deep"]
    assert evaluate(compile_xml_path("T.H==3,W"), root, memo)[0] == ["1", "2", ""]
    assert evaluate(compile_xml_path("T/W"), root, memo) == (["1", "2", ""], [2, 4, 7])


def test_a_single_node_with_many_children_gives_the_same_columns():
    """Past GROUP_MAX_CHILDREN children a single node's columns come from lxml's filter: the
    same values and lines as the per-node definition (namespaced children in, deeper out)."""
    from stages.rules.xmleval import GROUP_MAX_CHILDREN

    count = GROUP_MAX_CHILDREN + 5
    items = "".join(
        f'<a:Item xmlns:a="urn:a"><G>{i}</G></a:Item>' if i % 3 else f"<Item><G> {i} </G></Item>"
        for i in range(count)
    )
    root = parse(f"<R><Items>{items}<X><Item><G>deep</G></Item></X></Items></R>")
    memo: dict = {}
    assert values("R/Items/Item,G", root) == [str(i) for i in range(count)]
    assert evaluate(compile_xml_path("R/Items/Item/G"), root, memo)[0] == [
        str(i) for i in range(count)
    ]
    assert evaluate(compile_xml_path("R/Items/Item,G"), root, memo)[0] == [
        str(i) for i in range(count)
    ]
    nodes, lines = evaluate(compile_xml_path("R/Items/Item,{dom}"), root, memo)
    assert len(nodes) == count and lines == [1] * count
