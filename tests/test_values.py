"""Unit results as a stage's `finish` reads them after an incremental update."""

from __future__ import annotations

import pytest

from orchestrator.core.values import UpdatedDigests


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
