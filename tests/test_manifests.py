"""The manifest's bytes patched in place agree with the document made again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import NamedTuple

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from stages.layout.packing import Bundle, PackingInfo
from stages.publishing.manifests import (
    PATCH_LIMIT,
    FileFieldsChange,
    asset_entry,
    build_fields,
    bundle_entry,
    bundle_file_changes,
    cook_fields,
    file_fields,
    manifest_document,
    named_bundle_files,
    patch_bundle_files,
    patched_document,
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


# -- the document patched by entry (stages/manifest.py `_entries_patched`) ------------------------

ids = st.sampled_from(("a1", "b2", "c3", "d4", "e5", "f6"))
bundle_names = st.sampled_from(("chars/x", "chars/y", "ui", "shared/0f"))


def manifest_inputs(data) -> tuple:
    """Bundles, asset → bundles, the packing's info, bundle files, cook list and types."""
    names = data.draw(st.lists(bundle_names, unique=True, max_size=4))
    bundles = {
        name: Bundle(
            name,
            "layout",
            tuple(data.draw(st.lists(ids, unique=True, max_size=3))),
            tuple(data.draw(st.lists(ids, unique=True, max_size=2))),
            tuple(data.draw(st.lists(bundle_names, unique=True, max_size=2))),
        )
        for name in sorted(names)
    }
    files = {name: data.draw(bundle_files) for name in bundles}
    held = {
        a: tuple(data.draw(st.lists(bundle_names, max_size=2))) for a in data.draw(st.sets(ids))
    }
    types = {a: data.draw(st.sampled_from(("Texture", "Mesh"))) for a in held}
    types.update({a: "Material" for a in data.draw(st.sets(ids)) if a not in types})
    cooked = data.draw(st.permutations(sorted(set(types) | {"zz"})))
    cooklist = SimpleNamespace(cooked=cooked, missing={"m": "no item"})
    info = PackingInfo([tuple(names[:2])] if len(names) > 1 else [], "extract", [])
    return bundles, dict(sorted(held.items())), info, files, cooklist, types


def made(inputs: tuple) -> dict:
    return manifest_document(*inputs, "generic", {"pack": 5})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_document_patched_by_entry_is_the_document_made_again(data):
    """The last manifest with the bundles and assets that changed made again, and the cook
    list's and the build's fields set anew, is the manifest made from every entry."""
    before, after = manifest_inputs(data), manifest_inputs(data)
    bundles, held, info, files, cooklist, types = after
    named = set(before[0]) | set(bundles)
    changed = set(before[1]) | set(before[5]) | set(held) | set(types)
    document = patched_document(
        to_json_bytes(made(before)),
        {n: bundle_entry(bundles[n], files[n]) if n in bundles else None for n in named},
        {a: asset_entry(types[a], held[a]) if a in held else None for a in changed},
        {
            "build": build_fields(info, "generic", {"pack": 5}),
            **cook_fields(cooklist, set(types), info),
        },
    )
    assert document is not None and to_json_bytes(document) == to_json_bytes(made(after))
    # entries left as they were stay as they were: patching none keeps the document
    assert patched_document(to_json_bytes(made(after)), {}, {}, {}) == made(after)
