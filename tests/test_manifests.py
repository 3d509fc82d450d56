"""The manifest's bytes patched in place agree with the document made again."""

from __future__ import annotations

from typing import NamedTuple

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.publishing.manifests import (
    PATCH_LIMIT,
    FileFieldsChange,
    bundle_file_changes,
    file_fields,
    named_bundle_files,
    patch_bundle_files,
    to_json_bytes,
)


class FakeBundleFile(NamedTuple):
    file: str
    size: int
    crc32: int
    content_hash: str
    raw_hash: str


names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)
hashes = st.text(alphabet="0123456789abcdef", min_size=8, max_size=8)
bundle_files = st.builds(
    FakeBundleFile, names, st.integers(0, 2**40), st.integers(0, 2**32 - 1), hashes, hashes
)


def document(bundles: dict[str, FakeBundleFile], priority: bool) -> dict:
    entries = {}
    for name, record in bundles.items():
        entry = {
            **file_fields(record),
            "kind": "explicit",
            "assets": [f"{name}/a", "b"],
            "dependencies": [],
            "used_by": ["x"],
        }
        if priority:
            entry.update(priority=1, redirects={"file": name}, paths={"size": ["s"]})
        entries[name] = entry
    return {
        "assets": {"file": {"bundles": list(bundles), "type": "Texture"}},
        "build": {"platform": "generic"},
        "bundles": entries,
        "cooklist": ["a", "file"],
        "format": 1,
        "missing": [],
    }


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(names, bundle_files, min_size=1, max_size=8),
    st.data(),
    st.booleans(),
)
def test_patch_equals_the_document_made_again(bundles, data, priority):
    """Patching some bundles' file fields gives the bytes of the patched document, exactly."""
    before = to_json_bytes(document(bundles, priority))
    chosen = data.draw(st.lists(st.sampled_from(sorted(bundles)), unique=True, min_size=1))
    changed = {name: data.draw(bundle_files) for name in chosen}
    after = to_json_bytes(document({**bundles, **changed}, priority))
    assert patch_bundle_files(before, changed) == after


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(names, bundle_files, max_size=8), st.booleans())
def test_named_files_are_those_the_document_names(bundles, priority):
    """The files found line by line are the ones a full parse finds (none for no bundles)."""
    data = to_json_bytes(document(bundles, priority))
    expected = sorted({b["file"] for b in orjson.loads(data)["bundles"].values()})
    found = named_bundle_files(data)
    assert found == expected or (found is None and not bundles)


def test_unknown_bundle_or_shape_is_not_patched():
    """A bundle the manifest lacks, a foreign layout or too many bundles give None, not bytes."""
    record = FakeBundleFile("f", 1, 2, "aa", "bb")
    data = to_json_bytes(document({"a": record}, False))
    assert patch_bundle_files(data, {"zz": record}) is None
    assert patch_bundle_files(orjson.dumps(orjson.loads(data)), {"a": record}) is None
    many = {f"b{i}": record for i in range(PATCH_LIMIT + 1)}
    assert patch_bundle_files(to_json_bytes(document(many, False)), many) is None


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(names, bundle_files, min_size=1, max_size=8),
    st.data(),
    st.booleans(),
)
def test_file_changes_between_two_manifests_are_found_exactly(bundles, data, priority):
    """The bundles whose file fields differ are found with both sides' fields; a difference
    anywhere else (a bundle's assets) is refused."""
    before = to_json_bytes(document(bundles, priority))
    chosen = data.draw(st.lists(st.sampled_from(sorted(bundles)), unique=True))
    changed = {name: data.draw(bundle_files) for name in chosen}
    after = to_json_bytes(document({**bundles, **changed}, priority))
    found = bundle_file_changes(before, after)
    expected = {
        name: FileFieldsChange(file_fields(bundles[name]), file_fields(record))
        for name, record in changed.items()
        if record != bundles[name]
    }
    assert found == expected
    other = orjson.loads(after)
    moved = data.draw(st.sampled_from(sorted(bundles)))
    other["bundles"][moved]["assets"].append("one more")
    assert bundle_file_changes(before, to_json_bytes(other)) is None
