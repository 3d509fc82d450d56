"""An index stored by entry, patched by the entries that changed (stages/sources/base.py
`patched_index`, `IndexPatcher`): what a resident build and a custom-code worker holding the
previous index make of the next one instead of decoding it whole."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rules_helpers import make_index

from orchestrator import Keyed
from stages.sources.base import IndexPatcher, index_of

GUIDS = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(10)]
RESOURCES = st.dictionaries(
    st.sampled_from(GUIDS),
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["a", "b", "英雄"]),
            "package": st.sampled_from(["P", "Q"]),
            "deps": st.lists(st.sampled_from(GUIDS), max_size=2),
            "file": st.sampled_from(["", "Res/x/resource.xml"]),
        }
    ),
    max_size=8,
)
LEVELS = st.sets(st.sampled_from(["L1", "L2"]))


def shape(index) -> list:
    """Everything an index holds, each set in its order (the order custom code iterates)."""
    return list(index.entries().items())


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(RESOURCES, LEVELS), min_size=1, max_size=6))
def test_a_patched_index_is_the_index_decoded_whole(steps):
    """Index after index (a resident build's edits), the patcher's answer, patched from the
    previous one or decoded whole, is the index the entries describe, in every set's order."""
    patcher = IndexPatcher()
    for resources, levels in steps:
        entries = make_index(Path("/p"), resources, tuple(sorted(levels))).entries()
        given = patcher.index(Keyed("index", memory=entries))
        assert shape(given) == shape(index_of(Keyed("index", memory=entries)))


def test_a_few_changed_entries_are_decoded_and_the_rest_kept():
    """After an edit of one Item of many, only the entries it changed are read; with more than
    a tenth of the index changed, it is decoded whole."""
    guids = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(50)]
    resources = {guid: {"name": guid[:8], "file": f"R/{guid}/resource.xml"} for guid in guids}
    patcher = IndexPatcher()
    before = make_index(Path("/p"), resources).entries()
    patcher.index(Keyed("index", memory=before))
    read: list[str] = []

    class Watched(Keyed):
        def __getitem__(self, key):
            read.append(key)
            return super().__getitem__(key)

    resources[guids[3]] = {"name": "renamed", "file": f"R/{guids[3]}/resource.xml"}
    entries = make_index(Path("/p"), resources).entries()
    patched = patcher.index(Watched("index", memory=entries))
    assert sorted(read) == sorted(k for k in entries if before.get(k) != entries[k])
    assert read and len(read) < 5
    assert shape(patched) == shape(index_of(Keyed("index", memory=entries)))
    for guid in guids[:10]:  # a fifth of the Items renamed: decoded whole, nothing read by key
        resources[guid] = {"name": "again" + guid[:4], "file": f"R/{guid}/resource.xml"}
    read.clear()
    entries = make_index(Path("/p"), resources).entries()
    assert shape(patcher.index(Watched("index", memory=entries))) == shape(
        index_of(Keyed("index", memory=entries))
    )
    assert read == []


PATCHES = st.tuples(RESOURCES, LEVELS, st.booleans())


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(PATCHES, min_size=1, max_size=4))
def test_an_index_sent_encoded_is_the_index_decoded_whole(tmp_path_factory, steps):
    """What a one-off run sends a custom-code worker (the stored entries' codec bytes, decoded
    there: Keyed.encoded_items, decoded_entries) makes the index the driver would decode, run
    after run, whether this run's collect stored the index or patched it in memory (an
    overlay on what the state holds), with entries large enough to live in the blob store."""
    from test_cache_entries import open_state

    from orchestrator import KeyedPatch, decoded_entries

    folder = tmp_path_factory.mktemp("state")
    for resources, levels, patched in steps:
        entries = make_index(Path("/p"), resources, tuple(sorted(levels))).entries()
        entries["note/large"] = "x" * 300_000  # over INLINE_MAX_BYTES: a blob-store reference
        state = open_state(folder)
        try:
            held = dict(state.values.items("index"))
            if patched and held:
                removed = tuple(sorted(set(held) - set(entries)))
                changed = {k: v for k, v in entries.items() if held.get(k) != v}
                keyed = Keyed("index", state.values, overlay=KeyedPatch(changed, removed))
            else:
                state.values.replace_entries("index", entries)
                keyed = Keyed("index", state.values)
            encoded = keyed.encoded_items()
            assert encoded is not None and all(isinstance(data, bytes) for _, data in encoded)
            sent = index_of(decoded_entries(encoded))
            assert shape(sent) == shape(index_of(Keyed("index", memory=entries)))
            if patched and held:  # what the stage stores after it: the next step reads it
                state.values.replace_entries("index", entries)
        finally:
            state.close()
            state.values.blobs.close()
