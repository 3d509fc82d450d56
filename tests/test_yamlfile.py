"""orchestrator/yamlfile.py: one budget on what aliases expand to, for every YAML the product reads.

The budget counts expanded size (a node 1, a scalar also its characters) while a file is composed:
999 aliases of one long string are refused like a billion laughs, before anything walks them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError, ExpansionRefused
from orchestrator.yamlfile import (
    EXPANSION_BUDGET,
    compose_all,
    load_all,
    may_hold_alias,
    read_yaml,
)

C_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "file.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def string_aliases(length: int, aliases: int) -> str:
    """One anchored string of `length` characters, repeated by `aliases` aliases (one a line)."""
    return f"text: &s {'x' * length}\ncopies:\n" + "".join("  - *s\n" for _ in range(aliases))


def test_aliases_of_a_long_string_are_refused_by_their_size(tmp_path: Path):
    """A 20 KB string repeated by 60 aliases is 1.2 MB of text to whatever walks it: refused at
    the alias that crosses the budget (line 3 + 49), naming the file and the budget."""
    path = write(tmp_path, string_aliases(20_000, 60))
    with pytest.raises(ConfigError) as refused:
        read_yaml(path, ConfigError, "build file")
    assert refused.value.file == str(path)
    assert refused.value.line == 3 + EXPANSION_BUDGET // 20_001
    assert f"YAML expansion budget of {EXPANSION_BUDGET:,}" in refused.value.message
    assert "not valid YAML" not in refused.value.message


def test_what_stays_within_the_budget_loads_as_pyyaml_loads_it(tmp_path: Path):
    """Anchors as people use them (a shared block, a merge key, a string repeated) load as usual."""
    text = (
        "defaults: &defaults {compression: lz4, level: 9}\n"
        "archive:\n  <<: *defaults\n  level: 3\n"
        + string_aliases(2_000, 400)  # 800 KB: within the budget
    )
    node, data = read_yaml(write(tmp_path, text), ConfigError, "build file")
    assert data == yaml.safe_load(text)
    assert node.start_mark.line == 0


def test_billion_laughs_are_refused_at_the_alias_that_crosses(tmp_path: Path):
    levels = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]\n"]
    levels += [f"l{n}: &l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]\n" for n in range(1, 9)]
    with pytest.raises(ConfigError) as refused:
        read_yaml(write(tmp_path, "".join(levels)), ConfigError, "build file")
    # Lines 2-5 add 273,978; each *l4 of line 6 adds 243,577: the fourth crosses 1,000,000.
    assert refused.value.line == 6 and "alias bomb" in refused.value.message


def test_an_alias_inside_its_own_anchor_is_refused(tmp_path: Path):
    with pytest.raises(ConfigError) as refused:
        read_yaml(write(tmp_path, "a: &loop\n  b: [1, *loop]\n"), ConfigError, "rule file")
    assert refused.value.line == 2
    assert refused.value.message == "the alias *loop repeats its own anchor"


@pytest.mark.parametrize("loader", [yaml.SafeLoader, C_LOADER], ids=["python", "libyaml"])
def test_the_budget_holds_across_the_documents_of_one_stream(loader):
    """Each document alone is within the budget; the stream (one file) is not."""
    document = "--- " + "{text: &s " + "x" * 100_000 + ", copies: [" + "*s, " * 6 + "]}\n"
    assert len(load_all(document, loader)) == 1
    with pytest.raises(ExpansionRefused) as refused:
        compose_all(document * 2, loader)
    assert refused.value.problem_mark.line == 1  # the second document's line


@pytest.mark.parametrize("loader", [yaml.SafeLoader, C_LOADER], ids=["python", "libyaml"])
def test_bytes_and_text_give_what_pyyaml_gives(loader):
    text = "--- &a {k: [1, &b 2, *b]}\n--- [3]\n"
    assert load_all(text, loader) == list(yaml.load_all(text, Loader=loader))
    assert load_all(text.encode(), loader) == list(yaml.load_all(text, Loader=loader))


# -- the law the fast path rests on --------------------------------------------------------------
YAML_PIECES = st.sampled_from(
    [
        "*a", "&a ", "*", "&", " ", "\t", "\n", "\r\n", "\x85", "\u2028", "\ufeff", "[", "]",
        "{", "}", ",", ":", ": ", "?", "? ", "- ", "-", "'", '"', "#", "!", "!t ", "|", ">",
        "---", "--- ", "...", "%YAML 1.1\n", "a", "b", "\\", "模型", "x*y", "&a*b", '{"k"', "{k",
        "[k", "- &a x\n", "k: ",
    ]
)  # fmt: skip
#: Any character before a `*`: printable ASCII, YAML's other breaks and blanks, the BOM, Chinese.
BEFORE_STAR = [chr(c) for c in range(0x20, 0x7F)] + list("\t\n\r\x85\u2028\u2029\ufeff模")
#: What may come before that character: places where a node can begin once it is written.
CONTEXTS = ["", "k:", "-", "[", "[a", "{", '{"a"', "['a'", "[?", "{?", "---", "k:\n", "a"]


def _alias_events(text: str | bytes, loader: type) -> int:
    """How many alias events the parser yields before the end or its first error."""
    found = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            found += isinstance(event, yaml.AliasEvent)
    except yaml.YAMLError:
        pass
    return found


def _law_holds(text: str) -> bool:
    """`may_hold_alias` False ⇒ neither PyYAML's nor libyaml's parser sees an alias, in the text
    or in its UTF-8 bytes."""
    if may_hold_alias(text):
        return True
    return not may_hold_alias(text.encode("utf-8")) and not any(
        _alias_events(form, loader)
        for form in (text, text.encode("utf-8"))
        for loader in {yaml.SafeLoader, C_LOADER}
    )


def test_no_alias_begins_where_the_check_says_none_can():
    """Every character before a `*`, in every place a node can begin (then the loader's own
    composer, libyaml's, reads the text without a budget: nothing in it can expand)."""
    for context in CONTEXTS:
        for before in BEFORE_STAR:
            for after in ("", "]", "}", " : 1}", "\n"):
                text = f"{context}{before}*a{after}"
                assert _law_holds(text), repr(text)


@settings(max_examples=600, deadline=None, derandomize=True)
@given(st.lists(YAML_PIECES, max_size=14).map("".join))
def test_a_text_where_no_alias_can_begin_holds_none(text: str):
    assert _law_holds(text), repr(text)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(YAML_PIECES, max_size=14).map("".join))
def test_the_budgeted_composer_reads_what_pyyaml_reads(text: str):
    """Both paths give PyYAML's data, or both refuse the text; only data that contains itself
    (`&a [*a]`, which PyYAML builds as a recursive list) is refused where PyYAML is not."""
    for loader in {yaml.SafeLoader, C_LOADER}:
        try:
            expected = repr(list(yaml.load_all(text, Loader=loader)))
        except (yaml.YAMLError, RecursionError):
            expected = "error"
        try:
            found = repr(load_all(text, loader))
        except ExpansionRefused as refused:
            assert "repeats its own anchor" in str(refused.problem)
            assert "[...]" in expected or "{...}" in expected
            continue
        except yaml.YAMLError:
            found = "error"
        assert found == expected, loader
