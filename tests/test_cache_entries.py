"""Stage values in the build state, entry by entry: what changed since a generation, tombstones,
large values in the blob store, damaged rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cache import Cache
from orchestrator.cache.entries import INLINE_MAX_BYTES, STORED_PREFIX
from orchestrator.cache.resident import MISSING, DecodedEntries, KeptResults, unchangeable
from orchestrator.cache.state import BuildState
from orchestrator.codec import digest, dumps, loads, record
from orchestrator.errors import CacheCorrupt
from orchestrator.keyed import Keyed


def open_state(folder: Path, decoded: DecodedEntries | None = None) -> BuildState:
    """The scope's state as the next run opens it (one generation later); `decoded`: a
    resident session's decoded entries."""
    (folder / "project").mkdir(exist_ok=True)
    cache = folder / "cache"
    return BuildState(
        cache, str(folder / "project"), str(folder / "out"), Cache(cache), decoded=decoded
    )


def run(folder: Path, work) -> int:
    """Open the state as a run does, do `work` with it, close it; the run's generation."""
    state = open_state(folder)
    try:
        work(state)
        return state.generation
    finally:
        state.close()
        state.values.blobs.close()  # what a run stored in the blob store is written at its end


def changes(folder: Path, value: str, since: int) -> tuple[list[str], list[str]]:
    """(keys changed, keys removed) since generation `since`, sorted."""
    state = open_state(folder)
    try:
        found = state.values.changes(value, since)
        return sorted(found.changed), sorted(found.removed)
    finally:
        state.close()


def test_changes_since_each_generation(tmp_path):
    """Each run's puts, removals and replacements are seen by a reader that last looked before
    them; an entry stored again with equal content is no change."""
    g1 = run(tmp_path, lambda s: s.values.put_entries("v", {"a": 1, "b": 2, "c": 3}.items()))
    g2 = run(
        tmp_path,
        lambda s: (
            s.values.put_entries("v", [("b", 20), ("c", 3)]),
            s.values.remove_entries("v", ["a"]),
        ),
    )
    g3 = run(tmp_path, lambda s: s.values.replace_entries("v", {"b": 20, "d": 4}))
    assert g1 < g2 < g3
    assert changes(tmp_path, "v", 0) == (["b", "d"], ["a", "c"])
    assert changes(tmp_path, "v", g1) == (["b", "d"], ["a", "c"])
    assert changes(tmp_path, "v", g2) == (["d"], ["c"])
    assert changes(tmp_path, "v", g3) == ([], [])
    state = open_state(tmp_path)
    assert state.values.generation("v") == g3 and state.values.generation("other") == 0
    assert state.values.keys("v") == ["b", "d"] and state.values.entry("v", "b") == 20
    state.close()


def test_tombstones_keep_removals_visible_until_the_key_returns(tmp_path):
    """A removed key stays a tombstone: absent to readers, a removal to `changes`; removing it
    again is no change; storing it again makes it a change."""
    run(tmp_path, lambda s: s.values.put_entries("v", [("a", 1), ("b", 2)]))
    g2 = run(tmp_path, lambda s: s.values.remove_entries("v", ["a"]))
    g3 = run(tmp_path, lambda s: s.values.remove_entries("v", ["a"]))
    assert changes(tmp_path, "v", g2) == ([], [])  # the second removal moved nothing
    state = open_state(tmp_path)
    assert "a" not in Keyed("v", state.values) and state.values.entry_digest("v", "a") is None
    with pytest.raises(KeyError):
        state.values.entry("v", "a")
    assert state.values.has("v")
    state.close()
    g4 = run(tmp_path, lambda s: s.values.put_entries("v", [("a", 1)]))
    assert changes(tmp_path, "v", g3) == (["a"], [])
    run(tmp_path, lambda s: s.values.prune_tombstones(g4 + 1))
    assert changes(tmp_path, "v", 0) == (["a", "b"], [])


def test_a_whole_value_is_one_entry(tmp_path):
    """A value that is not keyed is stored under one key and changes as a whole."""
    g1 = run(tmp_path, lambda s: s.values.put_entries("plain", [("", {"x": [1, 2]})]))
    run(tmp_path, lambda s: s.values.put_entries("plain", [("", {"x": [1, 2]})]))
    assert changes(tmp_path, "plain", g1) == ([], [])
    run(tmp_path, lambda s: s.values.put_entries("plain", [("", {"x": [1, 3]})]))
    assert changes(tmp_path, "plain", g1) == ([""], [])


def test_large_values_go_to_the_blob_store_and_come_back(tmp_path):
    """An entry above INLINE_MAX_BYTES is stored in the blob store, referenced from its row,
    and reads back equal with the digest a value held in memory has."""
    big = bytes(range(256)) * (INLINE_MAX_BYTES // 256 + 1)
    run(tmp_path, lambda s: s.values.put_entries("v", [("big", big), ("small", b"x")]))
    db = sqlite3.connect(next(tmp_path.glob("cache/state/*/*.sqlite")))
    rows = dict(db.execute("SELECT key, data FROM entries"))
    db.close()
    assert bytes(rows["big"]).startswith(STORED_PREFIX) and len(rows["big"]) < 200
    assert bytes(rows["small"]) == b"\xc4\x01x"  # msgpack bin 8 of one byte, inline
    state = open_state(tmp_path)
    assert state.values.entry("v", "big") == big
    assert (
        Keyed("v", state.values).fingerprint()
        == Keyed("v", memory=dict(state.values.items("v"))).fingerprint()
    )
    state.close()


def _overwrite_row(tmp_path, key: str, value) -> None:
    """Write `value` over the stored bytes of entry `key`, leaving its digest as it was."""
    from orchestrator.codec import dumps

    db = sqlite3.connect(next(tmp_path.glob("cache/state/*/*.sqlite")))
    db.execute("UPDATE entries SET data = ? WHERE key = ?", (dumps(value), key))
    db.commit()
    db.close()


def test_a_row_that_fails_its_digest_is_corruption(tmp_path):
    """A value row whose bytes no longer match their digest raises CacheCorrupt (the scheduler
    then starts the run again with the stages forgotten)."""
    run(tmp_path, lambda s: s.values.put_entries("v", [("a", "right")]))
    _overwrite_row(tmp_path, "a", "wrong")
    state = open_state(tmp_path)
    with pytest.raises(CacheCorrupt, match="does not match its digest"):
        state.values.entry("v", "a")
    state.close()


def test_entries_sent_encoded_are_checked_against_their_digests(tmp_path):
    """Entries handed over undecoded (ValueStore.encoded_items: a custom-code worker decodes
    them) are the stored bytes, blob-store ones included, each checked first: a row that
    fails its digest is corruption here too, never bytes passed on unchecked."""
    from orchestrator.codec import loads

    large = "y" * (INLINE_MAX_BYTES + 1)
    run(tmp_path, lambda s: s.values.put_entries("v", [("a", "right"), ("b", large)]))
    state = open_state(tmp_path)
    assert [(k, loads(d)) for k, d in state.values.encoded_items("v")] == [
        ("a", "right"),
        ("b", large),
    ]
    state.close()
    _overwrite_row(tmp_path, "a", "wrong")
    state = open_state(tmp_path)
    with pytest.raises(CacheCorrupt, match="does not match its digest"):
        state.values.encoded_items("v")
    state.close()


def test_a_value_sent_encoded_then_decoded_is_read_from_the_state_once(tmp_path, monkeypatch):
    """A run that sends a keyed value to custom code (Keyed.encoded_items) and then decodes it
    (Keyed.items) reads its rows once, and decodes what a reader that never sent it decodes,
    blob-store entries and a patch of this run included."""
    from orchestrator.cache.entries import ValueStore
    from orchestrator.keyed import KeyedPatch

    large = "y" * (INLINE_MAX_BYTES + 1)
    entries = [("a", "one"), ("b", large), ("c", ("three", 3))]
    run(tmp_path, lambda s: s.values.put_entries("v", entries))
    state = open_state(tmp_path)
    try:
        reads: list[str] = []
        live = ValueStore._live

        def counted(self, value, data=False):
            reads.append(value)
            return live(self, value, data)

        monkeypatch.setattr(ValueStore, "_live", counted)
        sent = Keyed("v", state.values)
        assert [key for key, _ in sent.encoded_items() or []] == ["a", "b", "c"]
        assert reads == ["v"]
        assert sent.items() == entries and reads == ["v"]
        assert Keyed("v", state.values).items() == entries
        patch = KeyedPatch(set={"b": "two"}, removed=("c",))
        patched = Keyed("v", state.values, overlay=patch)
        patched.encoded_items()
        reads.clear()
        assert patched.items() == [("a", "one"), ("b", "two")] and reads == []
    finally:
        state.close()


def test_a_damaged_database_is_set_aside_and_started_again(tmp_path):
    """A database file SQLite finds malformed raises CacheCorrupt, is moved aside for a
    post-mortem, and the next open starts an empty one."""
    run(tmp_path, lambda s: s.values.put_entries("v", [(f"k{i}", "x" * 500) for i in range(200)]))
    path = next(tmp_path.glob("cache/state/*/*.sqlite"))
    data = bytearray(path.read_bytes())
    for at in range(4096, len(data), 97):  # every page after the first, scrambled
        data[at] ^= 0x5A
    path.write_bytes(bytes(data))
    with pytest.raises(CacheCorrupt):
        state = open_state(tmp_path)
        try:
            list(state.values.items("v"))
        finally:
            state.close()
    assert list(path.parent.glob(f"{path.name}.damaged-*"))
    state = open_state(tmp_path)
    assert state.values.keys("v") == [] and state.generation == 1
    state.close()


# -- a resident session's decoded entries ----------------------------------------------------------

ENTRY_VALUES = st.one_of(
    st.integers(-1000, 1000), st.text(max_size=4), st.lists(st.integers(-9, 9), max_size=3)
)
VALUES_BY_RUN = st.lists(
    st.dictionaries(st.sampled_from("abcdefgh"), ENTRY_VALUES, max_size=6), min_size=1, max_size=5
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(runs=VALUES_BY_RUN)
def test_decoded_entries_kept_between_runs_read_as_decoding_afresh(tmp_path_factory, runs):
    """Entries a resident session keeps decoded from one build to the next (a value made
    exactly each run's mapping, then read whole and by key) read as a fresh process decodes
    them, and only entries new to the session are decoded."""
    folder = tmp_path_factory.mktemp("decoded")
    decoded = DecodedEntries()
    for mapping in runs:
        state = open_state(folder, decoded)
        fresh = open_state(folder)
        try:
            state.db.begin()
            state.values.replace_entries("v", mapping)
            state.db.commit()
            kept = dict(state.values.items("v"))
            assert kept == dict(fresh.values.items("v")) == mapping
            assert list(kept) == sorted(mapping)
            for key, value in mapping.items():
                assert state.values.entry("v", key) == value
        finally:
            for opened in (state, fresh):
                opened.close()
            state.values.blobs.close()
    # What the session holds: one value per digest it read, never a digest it did not see.
    from orchestrator.codec import digest

    seen = {bytes.fromhex(digest(v)) for mapping in runs for v in mapping.values()}
    assert set(decoded._values) <= seen


KEYS = st.sampled_from("abcdefgh")
DIGEST_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.dictionaries(KEYS, ENTRY_VALUES, max_size=4)),
        st.tuples(st.just("remove"), st.lists(KEYS, max_size=3)),
        st.tuples(st.just("replace"), st.dictionaries(KEYS, ENTRY_VALUES, max_size=6)),
        st.tuples(st.just("rolled back"), st.dictionaries(KEYS, ENTRY_VALUES, max_size=6)),
        st.tuples(st.just("next build"), st.none()),
        st.tuples(st.just("read"), st.none()),
    ),
    max_size=14,
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=DIGEST_STEPS)
def test_digests_kept_between_builds_are_those_read_afresh(tmp_path_factory, steps):
    """A resident session's digests of a value (KeptDigests: advanced by the rows changed
    since, build after build) and its fingerprint are what a store keeping none reads, after
    any writes: in later builds, in the same build after a read (same generation), and after a
    rollback that takes rows back."""
    from orchestrator.cache.entries import ValueStore
    from orchestrator.cache.resident import KeptDigests

    folder = tmp_path_factory.mktemp("digests")
    kept = KeptDigests()
    state = BuildState(
        folder / "cache", str(folder), str(folder / "out"), Cache(folder / "cache"), kept=kept
    )

    def check() -> None:
        afresh = ValueStore(state.db, state.values.blobs, state.taken)
        assert state.values.digests("v") == afresh.digests("v")
        assert list(state.values.digests("v")) == sorted(afresh.digests("v"))
        assert state.values.fingerprint("v") == afresh.fingerprint("v")

    try:
        for kind, argument in steps:
            if kind == "next build":
                state.close()
                state.values.blobs.close()
                state = BuildState(
                    folder / "cache",
                    str(folder),
                    str(folder / "out"),
                    Cache(folder / "cache"),
                    kept=kept,
                )
            elif kind == "read":
                check()
            elif kind == "rolled back":
                state.begin()
                state.values.replace_entries("v", argument)
                check()
                state.rollback()
            else:
                state.begin()
                if kind == "put":
                    state.values.put_entries("v", sorted(argument.items()))
                elif kind == "remove":
                    state.values.remove_entries("v", argument)
                else:
                    state.values.replace_entries("v", argument)
                state.commit()
            check()
    finally:
        state.close()
        state.values.blobs.close()


def test_an_entry_kept_decoded_is_not_decoded_again(tmp_path, monkeypatch):
    """The second build of a resident session reads the value's rows but decodes only the
    entry that changed."""
    from orchestrator.cache import entries as entries_module

    decoded = DecodedEntries()
    run(tmp_path, lambda s: s.values.put_entries("v", {"a": 1, "b": [2], "c": "3"}.items()))
    state = open_state(tmp_path, decoded)
    assert dict(state.values.items("v")) == {"a": 1, "b": [2], "c": "3"}
    state.values.put_entries("v", [("b", [20])])
    calls = []
    real = entries_module.loads
    monkeypatch.setattr(entries_module, "loads", lambda data: calls.append(data) or real(data))
    assert dict(state.values.items("v")) == {"a": 1, "b": [20], "c": "3"}
    assert len(calls) == 1
    state.close()
    state.values.blobs.close()


# -- a resident session's large results ----------------------------------------------------------


@record
class Pages(NamedTuple):
    """A record such as the manifest stage's documents."""

    first: bytes
    rest: tuple


@record
class Listed(NamedTuple):
    """A record holding something that can change in place."""

    items: list


ATOMIC = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.text(max_size=3),
    st.binary(max_size=3),
)
STORABLE = st.recursive(
    ATOMIC,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(st.integers(0, 9), max_size=3),
        st.dictionaries(st.text(max_size=2), inner, max_size=3),
        st.builds(Pages, st.binary(max_size=3), st.lists(inner, max_size=2).map(tuple)),
        st.builds(Listed, st.lists(inner, max_size=2)),
    ),
    max_leaves=12,
)


def changeable_part(value) -> bool:
    """Whether anything in a decoded value is a list, a dict or a set (what a stage could change
    in place), found independently of `unchangeable`."""
    if isinstance(value, (list, dict, set)):
        return True
    if isinstance(value, (tuple, frozenset)):
        return any(changeable_part(item) for item in value)
    return False


def same(a, b) -> bool:
    """Equal, and of the same types all the way down (1 is not True, a tuple not a list)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


@settings(max_examples=200, deadline=None)
@given(STORABLE)
def test_kept_results_hand_out_what_decoding_the_stored_bytes_gives(value):
    """A result is kept only when nothing in it can be changed in place, and what is handed out
    for its digest is what a build reading the store decodes: equal, of the same types."""
    data = dumps(value)
    kept = KeptResults(smallest=0)
    kept.offer(digest(value), value, len(data))
    found = kept.get(digest(value))
    assert unchangeable(value) == (not changeable_part(value))
    if changeable_part(value):
        assert found is MISSING
    else:
        assert same(found, loads(data))


def test_kept_results_keep_large_ones_up_to_a_limit_least_recent_first():
    kept = KeptResults(limit=100, smallest=10)
    kept.offer("small", b"x", 5)
    assert kept.get("small") is MISSING  # cheap to read again
    for name in ("a", "b", "c"):
        kept.offer(name, name.encode(), 40)
    assert kept.get("a") is MISSING and kept.get("b") == b"b"  # 120 bytes: "a" went first
    kept.offer("d", b"d", 40)  # "b" was used since "c": "c" goes
    assert kept.get("c") is MISSING and kept.get("b") == b"b" and kept.get("d") == b"d"
    kept.offer("huge", b"h", 101)
    assert kept.get("huge") is MISSING
    kept.clear()
    assert kept.get("b") is MISSING


def test_a_values_digests_then_its_fingerprint_read_its_rows_once(tmp_path, monkeypatch):
    """Every session keeps the digests it read (a one-off run too): a build that reads the
    index's digests (which entries a unit's reads name) and then its fingerprint (whether the
    whole changed) reads its 300,000 rows once at 100,000 resources, not twice."""
    from orchestrator.cache.resident import KeptDigests

    writer = open_state(tmp_path)
    writer.begin()
    writer.values.replace_entries("v", {f"k{i}": i for i in range(20)})
    writer.commit()
    writer.close()
    writer.values.blobs.close()
    cache = tmp_path / "cache"
    state = BuildState(
        cache, str(tmp_path / "project"), str(tmp_path / "out"), Cache(cache), kept=KeptDigests()
    )
    try:
        reads: list[str] = []
        original = state.values._live

        def counted(value: str, data: bool = False) -> list:
            reads.append(value)
            return original(value, data)

        monkeypatch.setattr(state.values, "_live", counted)
        digests = state.values.digests("v")
        assert len(digests) == 20 and state.values.fingerprint("v")
        assert state.values.digests("v") is digests and reads == ["v"]
    finally:
        state.close()
        state.values.blobs.close()
