"""Keyed values: a value held in memory, in the build state, or as the state patched by an
overlay looks the same to a consumer — entries, key order, membership, fingerprint."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.cache import Cache
from orchestrator.cache.state import BuildState
from orchestrator.keyed import Changes, Keyed, KeyedPatch

KEYS = st.text(alphabet="abcé資料/._-", min_size=1, max_size=6)
ENTRIES = st.one_of(
    st.integers(-5, 5),
    st.text(max_size=4),
    st.tuples(st.text(max_size=3), st.integers(0, 3)),
    st.frozensets(st.integers(0, 5), max_size=3),
)


def open_state(folder: Path) -> BuildState:
    project = folder / "project"
    project.mkdir(exist_ok=True)
    cache = folder / "cache"
    return BuildState(cache, str(project), str(folder / "out"), Cache(cache))


def agree(value: Keyed, expected: dict) -> None:
    """`value` shows exactly `expected`, keys in sorted order, whichever way it is held."""
    assert list(value) == sorted(expected)
    assert len(value) == len(expected)
    assert list(value.items()) == sorted(expected.items())
    assert value.values() == [expected[key] for key in sorted(expected)]
    assert value.as_dict() == expected and list(value.as_dict()) == sorted(expected)
    for key, entry in expected.items():
        assert key in value and value[key] == entry
    assert "never-a-key" not in value and 5 not in value
    with pytest.raises(KeyError):
        value["never-a-key"]


@settings(max_examples=60, deadline=None)
@given(
    before=st.dictionaries(KEYS, ENTRIES, max_size=8),
    changed=st.dictionaries(KEYS, ENTRIES, max_size=4),
    removals=st.sets(KEYS, max_size=4),
)
def test_memory_state_and_overlay_agree(before, changed, removals):
    """The value after a patch, held as a dict, stored in the state, or as the old state under
    the patch, has the same entries, order, membership and fingerprint."""
    removed = tuple(sorted((removals & set(before)) - set(changed)))
    after = {key: entry for key, entry in {**before, **changed}.items() if key not in removed}
    with tempfile.TemporaryDirectory() as folder:
        state = open_state(Path(folder))
        try:
            state.values.replace_entries("old", before)
            state.values.replace_entries("new", after)
            shuffled = dict(reversed(list(after.items())))  # a stage's own insertion order
            held = [
                Keyed("v", memory=shuffled),
                Keyed("new", state.values),
                Keyed("old", state.values, overlay=KeyedPatch(changed, removed)),
            ]
            for value in held:
                agree(value, after)
            fingerprints = {value.fingerprint() for value in held[:2]}
            fingerprints.add(Keyed("v", memory=after).fingerprint())
            assert len(fingerprints) == 1
        finally:
            state.close()


def test_a_state_backed_value_reads_only_the_entries_asked_for(tmp_path, monkeypatch):
    """Looking up one entry decodes that entry alone, and only once."""
    state = open_state(tmp_path)
    state.values.replace_entries("v", {f"k{i}": i for i in range(50)})
    decoded = []
    original = state.values.decode

    def counting(digest, data):
        decoded.append(data)
        return original(digest, data)

    monkeypatch.setattr(state.values, "decode", counting)
    value = Keyed("v", state.values)
    assert value["k7"] == 7 and value["k7"] == 7
    assert "k8" in value and "zz" not in value
    assert len(decoded) == 1
    state.close()


@pytest.mark.parametrize("overlay", [None, KeyedPatch({"k3": "new", "n": 9}, ("k4",))])
def test_a_value_read_whole_answers_lookups_without_reading_again(tmp_path, monkeypatch, overlay):
    """After one pass over every entry (a consumer reading the whole value), a consumer looking
    entries up one by one gets the same entries without another query or decode."""
    state = open_state(tmp_path)
    state.values.replace_entries("v", {f"k{i}": i for i in range(50)})
    value = Keyed("v", state.values, overlay=overlay)
    expected = dict(value.items())
    looked_up = []
    original = state.values.entry
    monkeypatch.setattr(state.values, "entry", lambda *a: looked_up.append(a) or original(*a))
    monkeypatch.setattr(state.values, "items", None)  # no second pass either
    assert {key: value[key] for key in value} == expected
    assert list(value.items()) == sorted(expected.items()) and looked_up == []
    state.close()


def test_fingerprint_moves_with_any_entry_and_only_then(tmp_path):
    """The fingerprint of a stored value changes when an entry is changed, added or removed,
    and comes back when the value does."""
    state = open_state(tmp_path)
    state.values.replace_entries("v", {"a": 1, "b": (2, "x")})
    first = Keyed("v", state.values).fingerprint()
    state.values.put_entries("v", [("b", (2, "y"))])
    second = Keyed("v", state.values).fingerprint()
    state.values.put_entries("v", [("c", None)])
    third = Keyed("v", state.values).fingerprint()
    state.values.replace_entries("v", {"a": 1, "b": (2, "x")})
    assert len({first, second, third}) == 3
    assert Keyed("v", state.values).fingerprint() == first
    state.close()


def test_patches_and_changes_are_false_when_empty():
    """An empty patch or change set means nothing moved; `everything` is a change."""
    assert not KeyedPatch({}) and KeyedPatch({}, ("gone",)) and KeyedPatch({"a": 1})
    nothing = Changes(frozenset(), frozenset())
    assert not nothing and Changes(frozenset(), frozenset(), everything=True)
    changes = Changes(frozenset({"a"}), frozenset({"b"}))
    assert changes and changes.touched == {"a", "b"}


@pytest.mark.parametrize("overlay", [None, KeyedPatch({"k3": "new", "n": 9}, ("k4",))])
def test_a_value_read_whole_after_a_few_lookups_is_read_in_one_pass(tmp_path, monkeypatch, overlay):
    """A consumer that looked a few entries up, then reads the whole value (a rule unit past
    its lookups), reads the stored entries once: not entry by entry, and without listing the
    keys first to count them."""
    state = open_state(tmp_path)
    state.values.replace_entries("v", {f"k{i}": i for i in range(50)})
    value = Keyed("v", state.values, overlay=overlay)
    expected = dict(Keyed("v", state.values, overlay=overlay).items())
    assert value["k7"] == 7
    monkeypatch.setattr(state.values, "entry", None)  # no lookup per key
    monkeypatch.setattr(state.values, "keys", None)  # no listing of the keys
    assert list(value.items()) == sorted(expected.items())
    assert {key: value[key] for key in value} == expected
    state.close()
