"""Globs: a set of them answers as each would alone, whatever mix of literal paths and wildcards."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stages.algorithms.globs import GlobSet, escape_glob, glob_match, literal_path

SEGMENT = st.text(alphabet="ab*?[]!.", min_size=1, max_size=4)
PATTERN = st.lists(SEGMENT | st.just("**"), min_size=1, max_size=3).map("/".join)
PATH = st.lists(st.text(alphabet="ab*?[].", min_size=1, max_size=4), min_size=1, max_size=3).map(
    "/".join
)


@settings(max_examples=400, deadline=None)
@given(st.lists(PATTERN | PATH.map(escape_glob), max_size=6), PATH)
def test_a_glob_set_matches_what_any_of_its_globs_matches(patterns, path):
    """GlobSet(patterns)(path) is any(glob_match(p, path)): literal paths looked up, the rest
    matched by one combined expression."""
    assert GlobSet(patterns)(path) is any(glob_match(p, path) for p in patterns)


@given(PATH)
def test_an_escaped_path_is_literal(path):
    """escape_glob's output is recognised as the literal path it matches."""
    assert literal_path(escape_glob(path)) == path


def test_wildcards_are_not_literal():
    """A pattern with a real wildcard or class has no literal path."""
    assert literal_path("UI/**") is None
    assert literal_path("a/[ab]c") is None
    assert literal_path("a/b.png") == "a/b.png"
    assert not GlobSet([]) and not GlobSet([])("a")
