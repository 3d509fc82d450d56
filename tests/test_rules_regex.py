"""The regexes of rules outside expressions (stages/rules/regex.py): Python's `re.search`
results, in bounded time — RE2 where it can serve, the time limit for the rest."""

from __future__ import annotations

import pickle
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rules_helpers import REPOSITORY, make_index, run_rules, write_files

from stages.rules.regex import Regex, RegexTimeout, compile_regex, regex_time_limit

# Exponential in Python's engine (hours on a path of 30 folders), linear in RE2.
CATASTROPHIC = r"^(.*?/)*(.*.*)*Q$"
# Exponential too, and beyond RE2 (a lookahead): only the time limit stops it.
CATASTROPHIC_LOOKAHEAD = r"(?=(x+)+y)"
DEEP = "/".join("abcdefghijklmnopqrstuvwxyz") + "/zz"  # 27 folders


def python_finds(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


# Where the two engines read the same pattern differently, the translation keeps Python's reading.
TRICKY = [
    (r"\.xml$", ["a.xml", "a.xml\n", "a.xmlx", "a.xml\n\n"]),
    (r"x.*\.xml$", ["x.xml", "x.xml\n", "x\n.xml", "xa.xml\n\n"]),
    (r"(?m)^x+$", ["a\nxx\nb", "xx\n", "a\n"]),
    (r"x+\Z|\Ay+", ["xx", "xx\n", "yy", "\nyy"]),
    (r"(?i)text.*\.XML$", ["TEXTure.xml", "téxt.xml", "TEXT\u212a.xml"]),
    (r"(?i)k+s", ["\u212a\u017f", "KS", "xs"]),  # Kelvin sign, long s
    (r"(?i)i+x", ["\u0130x", "\u0131x", "Ix", "ix"]),  # dotted and dotless i
    (r"(?i)[a-z]+!", ["\u212a!", "\u0130!", "É!"]),
    (r"(?i)[^k]+!", ["\u212a!", "k!", "é!"]),
    (r"(?ia)k+s", ["\u212a\u017f", "KS"]),  # ASCII case folding only
    (r"(?a)(?:a|(?i:K))", ["\u212a", "k"]),  # RE2 would read [Kk] as k folded, Kelvin too
    (r"(?:x|[Ss])y", ["\u017fy", "sy"]),
    (r"\w+$", ["模型", "a-", "", "٣", "\u00b2", "_"]),
    (r"(?a)\w+$", ["模型", "ab", "é"]),
    (r"\d{2,}z", ["٣٣z", "12z", "1z", "\u00b2\u00b2z"]),
    (r"\s+x", ["\x1cx", "\vx", " x", "\u3000x", "\x85x", "ax"]),
    (r"[\W\d]+y", ["-1y", "ay", "模y"]),
    (r"[[:alpha:]]+x", ["[:a]x", "ab x", "alpha]x"]),  # Python: a set, then "]"
    (r"\bfoo\b.*", ["a foo b", "模foo模", "afoo", "foo"]),
    (r"(?a)a|\B", ["1É1", "", "ab"]),  # RE2 tries \B between the bytes of É; Python: not on ""
    (r"(?s:a.b)|c*d", ["a\nb", "d", "a\rb"]),
    (r"a.b+", ["a\nbb", "axbb"]),
    (r"(?x) a b + # comment", ["abbb", "a b"]),
    (r"(?:ab|a)*?c", ["ababc", "aac", "b"]),
    (r"a{2,3}b", ["aab", "ab", "aaaab"]),
    (r"[^a]+b", ["\ud800b", "ab"]),  # a lone surrogate (undecodable file names)
    (r"(a)\1", ["aa", "ab"]),  # a backreference: Python's engine, under the time limit
    (r"a{1001}|b+", ["b", "a"]),  # a repeat RE2 refuses: likewise
]


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("pattern,texts", TRICKY)
def test_results_are_pythons_where_the_engines_read_a_pattern_differently(pattern, texts):
    regex = compile_regex(pattern)
    for text in texts:
        assert regex.found_in(text) is python_finds(pattern, text), (pattern, text)


@pytest.mark.parametrize(
    "pattern,engine",
    [
        (r"resource\.repository$", "plain"),
        (r"(?i)^Repository/[a-z_]\w", "plain"),
        (r".*Repository.*resource\.repository", "linear"),
        (CATASTROPHIC, "linear"),
        (r"(?i)texture\.(xml|png)$", "linear"),
        (r"(a)\1", "limited"),
        (CATASTROPHIC_LOOKAHEAD, "limited"),
    ],
)
def test_each_pattern_runs_on_the_engine_that_is_safe_for_it(pattern, engine):
    """No repetition or alternation: Python's engine (it cannot backtrack); other patterns RE2
    can express: RE2; the rest: Python's engine under the time limit."""
    assert compile_regex(pattern).engine == engine


# A grammar of what rules write: literals of every kind, classes, categories, anchors, groups,
# alternation, repeats (greedy and lazy), scoped and global flags.
_ATOMS = st.sampled_from(
    [
        "a",
        "b",
        "K",
        "k",
        "s",
        "I",
        "é",
        "模",
        "/",
        r"\.",
        ".",
        r"\d",
        r"\D",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        "[a-c]",
        "[^a/]",
        r"[\w.]",
        "[K-k]",
        "[[:a]",
        "^",
        "$",
        r"\A",
        r"\Z",
        r"\b",
        r"\B",
    ]
)


def _patterns(inner):
    return st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.tuples(inner, inner).map(lambda pair: f"(?:{pair[0]}|{pair[1]})"),
        st.tuples(inner, st.sampled_from(["*", "+", "?", "*?", "+?", "{1,3}", "{2}"])).map(
            lambda pair: f"(?:{pair[0]}){pair[1]}"
        ),
        st.tuples(st.sampled_from(["i", "s", "m", "a", "-i"]), inner).map(
            lambda pair: f"(?{pair[0]}:{pair[1]})"
        ),
    )


PATTERNS = st.tuples(
    st.sampled_from(["", "(?i)", "(?s)", "(?m)", "(?a)", "(?im)"]),
    st.recursive(_ATOMS, _patterns, max_leaves=8),
).map("".join)
TEXTS = st.text(
    alphabet=st.sampled_from(
        list("abksKIiS/._-1 \n") + list("éÉ模٣\u212a\u017f\u0130\u0131\u3000\x1c")
    ),
    max_size=12,
)


@pytest.mark.filterwarnings("ignore::FutureWarning")  # "[[:a]": Python's nested-set warning
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PATTERNS, st.lists(TEXTS, min_size=1, max_size=6))
def test_rules_see_pythons_results_whichever_engine_runs(pattern, texts):
    """The law: for every pattern Python accepts and every text, `found_in` is `re.search`."""
    try:
        re.compile(pattern)
    except re.error:
        return
    regex = compile_regex(pattern)
    for text in texts:
        assert regex.found_in(text) is python_finds(pattern, text), (pattern, text, regex.engine)


def test_the_catastrophic_pattern_of_the_issue_is_linear():
    regex = compile_regex(CATASTROPHIC)
    started = time.perf_counter()
    assert regex.found_in("/" + DEEP + "/file.xml") is False
    assert regex.found_in("/" + DEEP + "/Q") is True
    assert time.perf_counter() - started < 1.0


def test_a_search_past_the_time_limit_raises_naming_the_pattern():
    regex = compile_regex(CATASTROPHIC_LOOKAHEAD)
    started = time.perf_counter()
    with regex_time_limit(0.3), pytest.raises(RegexTimeout) as raised:
        regex.found_in("x" * 40)
    assert time.perf_counter() - started < 5
    assert str(raised.value) == (
        f"the regex {CATASTROPHIC_LOOKAHEAD!r} ran longer than 0.3 s (rules.timeout)"
    )


def test_compiled_regexes_pickle_and_compare_by_pattern():
    regex = compile_regex(CATASTROPHIC)
    again = pickle.loads(pickle.dumps(regex))
    assert again == regex == Regex(CATASTROPHIC) and again.found_in("/a/Q")


# -- in rules ------------------------------------------------------------------------------------


@pytest.fixture
def deep_project(tmp_path) -> Path:
    """A repository 27 folders deep, and values that make Python's engine backtrack."""
    root = tmp_path / "proj"
    repository = REPOSITORY.replace("<Name>Wall</Name>", f"<Name>{DEEP}</Name>").replace(
        "<Name>char_hero</Name>", "<Name>" + "x" * 40 + "</Name>"
    )
    write_files(root, {f"{DEEP}/resource.repository": repository})
    return root


def rule(**fields) -> dict:
    return {
        "id": "r",
        "rpath": r"resource\.repository$",
        "xpath": "*/Items/Item,Name",
        "condition": ["exists"],
        **fields,
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "fields",
    [
        {"rpath": CATASTROPHIC},
        {"not_rpath": CATASTROPHIC},
        {"filter": CATASTROPHIC},
        {"not_filter": CATASTROPHIC},
        {"xpath": f"*/Items/Item.Name!=`{CATASTROPHIC}`,Name"},
    ],
    ids=["rpath", "not_rpath", "filter", "not_filter", "xpath-predicate"],
)
def test_catastrophic_patterns_in_rules_run_in_linear_time(deep_project, fields):
    """issue 26, 6: `rpath: '^(.*?/)*(.*.*)*Q$'` hung `validate` past 120 s with `timeout: 2`
    (also not_rpath, filter, predicates in paths). Now each runs in RE2, with Python's result."""
    started = time.perf_counter()
    document = run_rules(deep_project, [rule(**fields)], make_index(deep_project), timeout=2)
    assert time.perf_counter() - started < 20
    assert document["rule_errors"] == [] and document["failures"] == []
    # what Python's engine would have found: no path and no value ends in Q
    expected = 0 if "rpath" in fields else 1
    assert document["sources_checked"] == expected


@pytest.mark.timeout(60)
@pytest.mark.parametrize("field", ["rpath", "not_rpath"])
def test_a_path_search_past_the_time_limit_makes_its_rule_a_rule_error(deep_project, field):
    """A pattern RE2 cannot run (a lookahead) that runs past rules.timeout on a path: its rule
    selects nothing and is a rule error naming the field, the pattern and the path; the other
    rules run."""
    slow = r"(?=(\w+/?)+Q)"
    document = run_rules(
        deep_project,
        [rule(id="slow", **{field: slow}), rule(id="fine")],
        make_index(deep_project),
        timeout=0.5,
    )
    [error] = document["rule_errors"]
    assert error["rule"] == "slow"
    assert (
        f"{field}: the regex {slow!r} ran longer than 0.5 s (rules.timeout) on "
        in (error["message"])
    )
    assert "resource.repository" in error["message"]
    assert document["sources_checked"] == 1  # the other rule's


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "fields,named",
    [
        ({"filter": CATASTROPHIC_LOOKAHEAD}, "filter: "),
        ({"not_filter": CATASTROPHIC_LOOKAHEAD}, "not_filter: "),
        (
            {"xpath": f"*/Items/Item.Name==`{CATASTROPHIC_LOOKAHEAD}`,Name"},
            "the path expression ",
        ),
    ],
    ids=["filter", "not_filter", "xpath-predicate"],
)
def test_a_value_search_past_the_time_limit_fails_its_source(deep_project, fields, named):
    """A filter, not_filter or backtick value that runs past rules.timeout fails the source
    (errors []), with a message naming the field and the pattern."""
    document = run_rules(deep_project, [rule(**fields)], make_index(deep_project), timeout=0.5)
    [failure] = document["failures"]
    assert failure["rule"] == "r" and failure["errors"] == []
    message = failure["message"]
    assert named in message and f"the regex {CATASTROPHIC_LOOKAHEAD!r} ran longer than 0.5 s" in (
        message
    )
