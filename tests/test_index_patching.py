"""An index stored by entry, patched by the entries that changed (stages/sources/base.py
`patched_index`, `IndexPatcher`): what a resident build and a custom-code worker holding the
previous index make of the next one instead of decoding it whole."""

from __future__ import annotations

import pickle
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rules_helpers import CountedKeyed, make_index
from test_cache_entries import open_state  # here: imported in a @given test, its tests nest

from orchestrator import Keyed
from stages.rules.keyed_index import ILEVELS, PREFIXES, ROOT
from stages.sources.base import IndexPatcher, index_of
from stages.sources.messiah.index import MessiahIndex

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


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(st.tuples(RESOURCES, LEVELS, st.booleans()), min_size=1, max_size=6),
    extra=st.sets(st.sampled_from(GUIDS), max_size=3),
)
def test_an_index_patched_as_told_is_the_index_decoded_whole(steps, extra):
    """Told which entries changed since the index it holds (an `IndexEdit` naming that index
    and a superset of the differing keys), the patcher reads only their digests, never every
    entry's; told of another base (the flag), it reads them all; either way its answer is the
    index the entries describe."""
    from stages.rules.keyed_index import IndexEdit

    patcher = IndexPatcher()
    previous: dict | None = None
    for step, (resources, levels, same_base) in enumerate(steps):
        entries = make_index(Path("/p"), resources, tuple(sorted(levels))).entries()
        edit = None
        if previous is not None:
            differing = {
                k for k in entries.keys() | previous.keys() if entries.get(k) != previous.get(k)
            }
            base = f"i{step - 1}" if same_base else "another"
            edit = IndexEdit(
                base, frozenset(differing | {PREFIXES["res_in_repo"] + g for g in extra})
            )
        with CountedKeyed() as counted:
            given = patcher.index(Keyed("index", memory=entries), f"i{step}", edit)
        assert counted.calls == (0 if edit is not None and same_base else 1)
        assert shape(given) == shape(index_of(Keyed("index", memory=entries)))
        previous = entries


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


def stored_form(resources: dict, levels: set) -> MessiahIndex:
    """An index as the build stores it: root "", paths project-relative (`make_index` makes a
    rooted one)."""

    def rel(path):
        return None if path is None else path.removeprefix("/p/")

    entries = {}
    for key, value in make_index(Path("/p"), resources, tuple(sorted(levels))).entries().items():
        if key == ROOT:
            value = ""
        elif key.startswith(PREFIXES["res_in_disk"]):
            value = tuple(
                f._replace(Resource=rel(f.Resource), Data=rel(f.Data), HDR=rel(f.HDR))
                for f in value
            )
        elif key != ILEVELS:
            value = tuple(r._replace(RepositoryFullPath=rel(r.RepositoryFullPath)) for r in value)
        entries[key] = value
    return MessiahIndex.from_entries(sorted(entries.items()))


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(RESOURCES, LEVELS, st.booleans()), min_size=1, max_size=6))
def test_an_index_patched_in_place_and_its_rooted_form_are_those_made_afresh(steps):
    """Index after index, `MessiahIndex.patched` (copies of the sets, Items added, renamed,
    removed) is what `from_entries` makes of the entries, in every set's order; and its
    rooted form, patched from the previous one's when that was made (the flag), is the rooted
    form of the index made afresh, with the stored index's digest."""
    held = None
    for resources, levels, rooted_before in steps:
        fresh = stored_form(resources, levels)
        if held is None:
            held = fresh
        else:
            if rooted_before:
                held.at("/r")
            old, new = held.entries(), fresh.entries()
            changed = {key: value for key, value in new.items() if old.get(key) != value}
            held = held.patched(changed, [key for key in old if key not in new])
        assert shape(held) == shape(fresh)
        assert shape(held.at("/r")) == shape(fresh.at("/r"))
        assert held.at("/r") is held.at("/r/")  # made once per root
        assert held.at("/r").digest() == fresh.digest()


def test_an_index_pickles_without_the_rooted_forms_it_keeps():
    """A Ray worker gets the stored index alone: the rooted form kept beside it (and the link
    a rooted one keeps to its stored form) stay in the process that made them."""
    index = stored_form({GUIDS[0]: {"file": "Res/x/resource.xml"}}, {"L1"})
    rooted = index.at("/r")
    copy = pickle.loads(pickle.dumps(index))
    assert copy == index and not any(name.startswith("_") for name in vars(copy))
    assert pickle.loads(pickle.dumps(rooted)) == rooted


@settings(max_examples=60, deadline=None)
@given(resources=RESOURCES, levels=LEVELS, read=st.sets(st.sampled_from(sorted(PREFIXES))))
def test_an_index_decoded_set_by_set_is_the_index_decoded_whole(resources, levels, read):
    """`MessiahIndex.from_encoded` (the stored entries' bytes, each set decoded when first
    read) is what `from_entries` makes, rooted or not, in every set's order; a set not read
    is not decoded, and reading one set of the rooted form decodes that set alone."""
    from orchestrator.codec import dumps, loads

    fresh = stored_form(resources, levels)
    encoded = [(key, dumps(value)) for key, value in sorted(fresh.entries().items())]
    decoded: list[object] = []

    def decode(data: bytes) -> object:
        value = loads(data)
        decoded.append(value)
        return value

    lazy = MessiahIndex.from_encoded(encoded, decode)
    made_first = len(decoded)  # the root and the used levels
    rooted = lazy.at("/r")
    for attribute in sorted(read):
        assert getattr(rooted, attribute) == getattr(fresh.at("/r"), attribute)
    expected = sum(len(getattr(fresh, attribute)) for attribute in read)
    assert len(decoded) - made_first == expected
    assert shape(lazy) == shape(fresh)  # every set, read now
    assert shape(lazy.at("/r")) == shape(fresh.at("/r"))
    assert lazy == fresh and lazy.digest() == fresh.digest()
    assert len(decoded) - made_first == len(fresh.entries()) - 2  # each entry decoded once


def test_an_index_decoded_set_by_set_pickles_whole_and_offers_its_sets_unread():
    """A Ray worker's copy of an index whose sets were not read yet holds them all; asking
    whether the index offers the predefined sets decodes none of them."""
    from orchestrator.codec import dumps, loads
    from stages.rules.functions import index_is_available

    fresh = stored_form({GUIDS[0]: {"file": "Res/x/resource.xml"}, GUIDS[1]: {}}, {"L1"})
    encoded = [(key, dumps(value)) for key, value in sorted(fresh.entries().items())]
    decoded: list[bytes] = []
    lazy = MessiahIndex.from_encoded(encoded, lambda data: decoded.append(data) or loads(data))
    assert index_is_available(lazy) and index_is_available(lazy.at("/r"))
    assert len(decoded) == 2  # the root and the used levels
    copy = pickle.loads(pickle.dumps(lazy))
    assert shape(copy) == shape(fresh) and not any(name.startswith("_") for name in vars(copy))


def test_a_namespace_makes_a_set_when_rule_code_first_reads_it():
    """`import res_store` gives rule code the sets made on first read: building the modules
    decodes nothing, reading `res_store.res_in_repo` decodes that set alone, and what the
    modules hold is what the index decoded whole gives."""
    from orchestrator.codec import dumps, loads
    from stages.rules.functions import IndexView

    resources = {GUIDS[0]: {"file": "Res/x/resource.xml"}, GUIDS[1]: {"deps": [GUIDS[0]]}}
    fresh = stored_form(resources, {"L1"})
    encoded = [(key, dumps(value)) for key, value in sorted(fresh.entries().items())]
    decoded: list[bytes] = []
    lazy = MessiahIndex.from_encoded(encoded, lambda data: decoded.append(data) or loads(data))
    modules = IndexView(lazy, "/r").namespaces()
    assert len(decoded) == 2
    assert modules.res_store.res_in_repo == fresh.at("/r").res_in_repo
    assert len(decoded) == 2 + len(fresh.res_in_repo)
    whole = IndexView(fresh, "/r").namespaces()
    assert modules.res_store == whole.res_store
    assert modules.res_filter.ALL_RES == whole.res_filter.ALL_RES
    assert modules.res_filter.ALL_RES_GUID == whole.res_filter.ALL_RES_GUID
    assert callable(modules.res_filter.guidToRealPath)


def test_a_resident_sessions_rooted_forms_keep_no_earlier_index_alive():
    """Build after build a resident session patches the index and its rooted form; a set no
    build reads (rooted when first read) must not chain each rooted form to the one before,
    which would keep every earlier index (a copy of a changed set each) alive."""
    import gc
    import weakref

    held = stored_form({GUIDS[0]: {"name": "a"}, GUIDS[1]: {"file": "Res/x/resource.xml"}}, {"L1"})
    first = weakref.ref(held)
    for step in range(4):
        rooted = held.at("/r")
        assert GUIDS[0] in rooted.res_in_repo  # the other sets are never read
        fresh = stored_form({GUIDS[0]: {"name": f"n{step}"}, GUIDS[1]: {}}, {"L1"})
        old, new = held.entries(), fresh.entries()
        changed = {key: value for key, value in new.items() if old.get(key) != value}
        held = held.patched(changed, [key for key in old if key not in new])
    del rooted, old, changed
    gc.collect()
    assert first() is None
    assert shape(held.at("/r")) == shape(fresh.at("/r"))
