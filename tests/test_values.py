"""Unit results as a stage's `finish` reads them after an incremental update."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.core.values import EntryDigests, UpdatedDigests
from orchestrator.errors import InternalError
from orchestrator.files.reads import FOUND, entry_path, entry_read, whole_path


def stored_reads(stored: dict[str, str]):
    reads: list[int] = []

    def read() -> dict[str, str]:
        reads.append(1)
        return dict(stored)

    return read, reads


def test_the_units_an_update_looked_at_are_answered_without_reading_the_state():
    read, reads = stored_reads({"a": "old-a", "b": "b", "gone": "g"})
    digests = UpdatedDigests({"a": "new-a"}, {"gone"}, read)
    assert digests["a"] == "new-a" and "a" in digests
    assert reads == []


def test_the_others_are_the_stored_ones_with_the_new_over_them_and_the_removed_left_out():
    read, reads = stored_reads({"a": "old-a", "b": "b", "gone": "g"})
    digests = UpdatedDigests({"a": "new-a", "c": "new-c"}, {"gone"}, read)
    assert dict(digests) == {"a": "new-a", "b": "b", "c": "new-c"}
    assert digests["b"] == "b" and len(digests) == 3 and "gone" not in digests
    with pytest.raises(KeyError):
        digests["gone"]
    assert reads == [1]  # read once, however often asked


# -- EntryDigests: the stored digests of what units' traces read ---------------------------------

VALUES = ["index", "assets", "index2"]
KEYS = ["a", "b", "a/b", "", "键"]


class FakeStore:
    """A value store of a few values, each key's digest fixed by the test."""

    notes: dict = {}

    def __init__(self, digests: dict[str, dict[str, str]]) -> None:
        self._digests = digests

    def digests(self, value: str) -> dict[str, str]:
        return dict(self._digests.get(value, {}))

    def digests_of(self, value: str, keys: list[str]) -> dict[str, str]:
        held = self._digests.get(value, {})
        return {key: held[key] for key in keys if key in held}

    def fingerprint(self, value: str) -> str:
        return "fp-" + repr(sorted(self._digests.get(value, {}).items()))


def resolved_one_by_one(store: FakeStore, reads: dict) -> dict:
    """What `resolve` must give, read path by path."""
    out = dict(reads)
    for path, digest in reads.items():
        read = entry_read(path)
        if read is None or digest != FOUND:
            continue
        held = store.digests(read.value)
        out[path] = store.fingerprint(read.value) if read.key is None else held.get(read.key)
    return out


stored_digests = st.dictionaries(
    st.sampled_from(VALUES),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(["d1", "d2"]), max_size=4),
    max_size=3,
)
trace = st.dictionaries(
    st.one_of(
        st.builds(entry_path, st.sampled_from(VALUES), st.sampled_from(KEYS)),
        st.builds(whole_path, st.sampled_from(VALUES)),
        st.sampled_from(["a.xml", "b/c.xml"]),
    ),
    st.sampled_from([FOUND, None, "d1"]),
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(stored=stored_digests, reads=trace, few=st.sampled_from([0, 1, 2000]))
def test_entry_digests_resolve_and_compare_as_reading_each_path_would(stored, reads, few):
    store = FakeStore(stored)
    digests = EntryDigests(store)  # type: ignore[arg-type]
    digests.FEW = few  # by key, or the whole value in one pass
    expected = resolved_one_by_one(store, reads)
    assert digests.resolve(reads, VALUES) == expected
    again = EntryDigests(store)  # type: ignore[arg-type]
    differing = {p for p, d in expected.items() if entry_read(p) and d != expected_now(store, p)}
    found = again.changed(expected.items())
    assert found is None if not differing else found in differing


def expected_now(store: FakeStore, path: str) -> str | None:
    read = entry_read(path)
    assert read is not None
    if read.key is None:
        return store.fingerprint(read.value)
    return store.digests(read.value).get(read.key)


def test_an_entry_read_of_a_value_the_stage_does_not_take_is_an_internal_error():
    digests = EntryDigests(FakeStore({}))  # type: ignore[arg-type]
    with pytest.raises(InternalError, match="'assets'"):
        digests.resolve(
            {entry_path("assets", "a"): FOUND, entry_path("index", "b"): FOUND}, ["index"]
        )
