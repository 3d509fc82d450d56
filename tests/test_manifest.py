"""The output folder: manifest, staging manifest, link.xml, incremental and atomic publishing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from messiah_projects import Item, guid, write, write_level, write_repository, write_world

import orchestrator
from orchestrator.core.config import load_build
from orchestrator.core.options import RunOptions
from orchestrator.core.scheduler import run_build
from orchestrator.shell.present import setup_logging
from stages.bundlefile.inspect import extract_entry, inspect_bundle
from stages.link_xml import qualified_type, render_link_xml
from stages.manifest import staging_document
from stages.publishing.output import publish_build, remove_stale, write_if_changed

OUTPUT_STAGES = ["manifest"]  # and every stage it needs: all but validate

BUILD_YAML = """\
project: p
output: out
cache: cache
platform: android
cook:
  maps: [Worlds/A.iworld, Worlds/B.iworld]
  always_cook: [UI/]
bundles:
  layout:
    - name: "maps/{stem}"
      maps: all
%(ui_rule)s  shared_dependencies: extract
archive:
  compression: zstd
  level: 3
hash:
  append_hash: true
link_xml:
  assembly: Game.Runtime
"""
UI_RULE = """    - name: ui
      include: ["UI/**"]
"""


def make_project(base: Path, ui_rule: bool = True) -> Path:
    """Two worlds sharing a wall (and its texture), a prop for world A, a UI icon."""
    root = base / "p"
    write_repository(
        root,
        "Repository",
        [
            Item(guid(1), "Wall", "Env", type="Mesh", deps=(guid(2),)),
            Item(guid(2), "WallTex", "Env", type="Texture"),
            Item(guid(3), "PropA", "Props", type="Model"),
            Item(guid(4), "Icon", "UI/Icons", type="Texture"),
        ],
    )
    write_world(root, "Worlds/A.iworld", ["Levels/A1.ilevel"])
    write_world(root, "Worlds/B.iworld", ["Levels/B1.ilevel"])
    write_level(root, "Levels/A1.ilevel", [guid(1), guid(3)])
    write_level(root, "Levels/B1.ilevel", [guid(1)])
    return set_layout(base, ui_rule)


def set_layout(base: Path, ui_rule: bool) -> Path:
    build = base / "build.yaml"
    build.write_text(BUILD_YAML % {"ui_rule": UI_RULE if ui_rule else ""}, encoding="utf-8")
    return build


def build(build_file: Path):
    return run_build(
        load_build(build_file),
        RunOptions(executor="local", progress=False, stages=OUTPUT_STAGES),
        setup_logging("console"),
    )


def built(result, stage: str) -> int:
    return next(r for r in result.reports if r.name == stage).built


def published(out: Path) -> dict[str, bytes]:
    """Every published file (reports excluded: they are not under the byte-identity rule)."""
    return {
        p.relative_to(out).as_posix(): p.read_bytes()
        for p in sorted(out.rglob("*"))
        if p.is_file() and not p.relative_to(out).as_posix().startswith("reports/")
    }


def mtimes(out: Path) -> dict[str, int]:
    return {rel: (out / rel).stat().st_mtime_ns for rel in published(out)}


def test_build_publishes_bundles_manifest_and_loose_files(tmp_path):
    """Every bundle the manifest names exists with the recorded size, CRC and hashes."""
    build(make_project(tmp_path))
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["bundles"]) == {
        "maps/A",
        "maps/B",
        "ui",
        manifest["assets"][guid(1)]["bundles"][0],
    }
    for name, record in manifest["bundles"].items():
        path = out / record["file"]
        assert record["file"].startswith(name + "_") and len(record["file"]) == len(name) + 33
        description = inspect_bundle(path)
        assert description["size"] == record["size"] == path.stat().st_size
        assert description["crc32"] == record["crc32"]
        assert description["content_hash"] == record["content_hash"]
        assert record["file"].endswith(record["content_hash"][:32])
        assert sorted(e["id"] for e in description["entries"]) == sorted(record["assets"])
    shared = manifest["assets"][guid(1)]["bundles"][0]
    assert shared.startswith("shared/")
    assert manifest["bundles"]["maps/A"]["dependencies"] == [shared]
    assert manifest["bundles"][shared]["reverse_dependencies"] == ["maps/A", "maps/B"]
    assert manifest["assets"][guid(3)] == {"bundles": ["maps/A"], "type": "Model"}
    assert manifest["cooklist"][:2] == ["Worlds/A.iworld", "Worlds/B.iworld"]
    assert manifest["build"]["platform"] == "android"
    assert manifest["build"]["tool_version"] == orchestrator.__version__
    assert manifest["build"]["stage_versions"]["write"] >= 1
    staging = json.loads((out / "staging.json").read_text())
    assert sorted(u["file"] for u in staging["ufs"]) == sorted(
        b["file"] for b in manifest["bundles"].values()
    )
    assert staging["non_ufs"] == ["link.xml", "manifest.json", "staging.json"]
    link = (out / "link.xml").read_text()
    assert '<assembly fullname="Game.Runtime">' in link
    assert '<type fullname="Game.Runtime.Mesh" preserve="all"/>' in link
    # The world's payload is its canonical XML, readable at random from its bundle.
    extract_entry(out / manifest["bundles"]["maps/A"]["file"], "Worlds/A.iworld", tmp_path / "w")
    assert (tmp_path / "w").read_bytes().startswith(b"<World><Levels>")


def test_outputs_are_identical_across_checkouts(tmp_path):
    """Two checkouts at different absolute paths publish byte-identical files, with no path in them."""
    first = make_project(tmp_path / "one")
    build(first)
    shutil.copytree(tmp_path / "one" / "p", tmp_path / "elsewhere" / "p")
    second = set_layout(tmp_path / "elsewhere", True)
    build(second)
    a, b = published(tmp_path / "one" / "out"), published(tmp_path / "elsewhere" / "out")
    assert a == b
    for data in a.values():
        assert str(tmp_path).encode() not in data


def test_noop_rerun_rewrites_nothing(tmp_path):
    """A rerun with nothing changed runs no unit and touches no published file."""
    build_file = make_project(tmp_path)
    build(build_file)
    before = mtimes(tmp_path / "out")
    again = build(build_file)
    assert sum(r.built for r in again.reports) == 0
    assert mtimes(tmp_path / "out") == before


def test_editing_one_asset_rewrites_only_its_bundle(tmp_path):
    """A changed prop rewrites maps/A (new hashed name, old file removed) and the manifests only."""
    build_file = make_project(tmp_path)
    build(build_file)
    out = tmp_path / "out"
    old = json.loads((out / "manifest.json").read_text())
    before = mtimes(out)
    write(tmp_path / "p", f"Repository/Props/{guid(3)}/resource.data", b"a new prop")
    result = build(build_file)
    assert built(result, "write") == 1 and built(result, "archive") == 1
    new = json.loads((out / "manifest.json").read_text())
    after = mtimes(out)
    changed = {rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel)}
    old_a, new_a = old["bundles"]["maps/A"]["file"], new["bundles"]["maps/A"]["file"]
    assert old_a != new_a
    assert changed == {old_a, new_a, "manifest.json", "staging.json"}
    assert not (out / old_a).exists()
    assert all((out / b["file"]).is_file() for b in new["bundles"].values())


def test_cosmetic_xml_edit_stops_at_the_cook(tmp_path):
    """Reformatting an attribute file re-cooks one asset and nothing after it."""
    build_file = make_project(tmp_path)
    build(build_file)
    before = mtimes(tmp_path / "out")
    write(
        tmp_path / "p",
        f"Repository/Env/{guid(1)}/resource.xml",
        "<?xml version='1.0'?>\n<Resource>\n\n   <!-- tidied -->\n</Resource>",
    )
    result = build(build_file)
    assert built(result, "cook") == 1
    assert built(result, "write") == 0 and built(result, "manifest") == 0
    assert mtimes(tmp_path / "out") == before


def test_bundle_that_disappears_is_removed_after_the_manifest(tmp_path):
    """Dropping the ui rule moves the icon to `default` and removes the ui file."""
    build_file = make_project(tmp_path)
    build(build_file)
    out = tmp_path / "out"
    ui_file = json.loads((out / "manifest.json").read_text())["bundles"]["ui"]["file"]
    set_layout(tmp_path, ui_rule=False)
    build(build_file)
    manifest = json.loads((out / "manifest.json").read_text())
    assert "ui" not in manifest["bundles"]
    assert manifest["assets"][guid(4)]["bundles"] == ["default"]
    assert not (out / ui_file).exists()
    assert {
        p.relative_to(out).as_posix()
        for p in out.rglob("*")
        if p.is_file() and not p.relative_to(out).as_posix().startswith("reports/")
    } == {b["file"] for b in manifest["bundles"].values()} | {
        "manifest.json",
        "staging.json",
        "link.xml",
    }


def test_a_process_publishing_again_knows_the_files_of_its_last_manifest(tmp_path, monkeypatch):
    """The bundle files the last manifest names are kept by its digest (a resident build does
    not search its 24 MB for them again); they are those the manifest names, and stale files
    are still removed by them. A manifest in the folder that is not those bytes is read."""
    from stages.publishing import output
    from stages.publishing.manifests import named_bundle_files

    build_file = make_project(tmp_path)
    build(build_file)
    out = tmp_path / "out"
    data = (out / "manifest.json").read_bytes()
    kept = output.LAST_PUBLISHED.kept
    assert kept is not None and kept.files == named_bundle_files(data)
    ui_file = json.loads(data)["bundles"]["ui"]["file"]
    read: list[bool] = []
    searched = output.previous_bundle_files
    monkeypatch.setattr(
        output, "previous_bundle_files", lambda *a, **k: read.append(True) or searched(*a, **k)
    )
    set_layout(tmp_path, ui_rule=False)
    build(build_file)
    assert read == [] and not (out / ui_file).exists()
    output.LAST_PUBLISHED.kept = output.NamedFiles("0" * 64, [])  # another manifest's
    set_layout(tmp_path, ui_rule=True)
    build(build_file)
    assert read == [True]


class RecordingCtx:
    """A stand-in for the engine's Context that logs what is published and when."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.events: list[str] = []

    def publish_bytes(self, relpath: str, data: bytes) -> bool:
        self.events.append(f"write {relpath}")
        return write_if_changed(self.output_dir, relpath, data)


def _record(name, file, data):
    from orchestrator.hashing import digest_bytes
    from stages.hash import BundleFile

    return BundleFile(name, file, len(data), 0, "c" * 64, digest_bytes(data), 1, "")


def test_publish_order_bundles_then_loose_then_manifest_then_removal(tmp_path):
    """Bundles land before the manifest that names them; stale files go only after it."""
    out = tmp_path / "out"
    write(out, "old_bundle", b"old")
    write(out, "manifest.json", json.dumps({"bundles": {"old": {"file": "old_bundle"}}}))
    ctx = RecordingCtx(out)
    data = {"a": b"AAA", "sub/b": b"BBB"}
    records = [_record(n, n + "_f", d) for n, d in data.items()]
    loads = []

    def load(name):
        loads.append(name)
        assert (out / "old_bundle").exists()  # nothing removed while bundles are written
        return data[name]

    publish_build(ctx, records, load, {"link.xml": b"<linker/>", "staging.json": b"{}"}, b"{}")
    assert ctx.events == [
        "write a_f",
        "write sub/b_f",
        "write link.xml",
        "write staging.json",
        "write manifest.json",
    ]
    assert not (out / "old_bundle").exists()
    # Unchanged bundles are not even loaded from the store the second time.
    loads.clear()
    publish_build(ctx, records, load, {}, b"{}")
    assert loads == []


def test_stale_removal_never_leaves_the_output_folder(tmp_path):
    """A tampered manifest naming files outside the folder removes nothing there."""
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("keep me")
    (tmp_path / "abs.txt").write_text("keep me too")
    removed = remove_stale(
        out, ["../victim.txt", str(tmp_path / "abs.txt"), "a/../../victim.txt"], keep=set()
    )
    assert removed == [] and victim.exists() and (tmp_path / "abs.txt").exists()
    write(out, "shared/x/old", b"1")
    assert remove_stale(out, ["shared/x/old"], keep=set()) == ["shared/x/old"]
    assert not (out / "shared").exists()  # emptied folders go too


def test_write_if_changed_refuses_escaping_paths(tmp_path):
    from orchestrator.errors import ProjectError

    for bad in ("../x", "/etc/x", "a\\..\\b", "C:/x", "a//b"):
        with pytest.raises(ProjectError):
            write_if_changed(tmp_path, bad, b"x")


def test_link_xml_format_and_type_naming_hook():
    """Types are sorted, namespaced by default, and a dotted Type is already qualified."""
    xml = render_link_xml(["Texture", "Material", "UnityEngine.Sprite", "Material"], "Game.Runtime")
    assert xml == (
        b'<?xml version="1.0" encoding="utf-8"?>\n<linker>\n'
        b'  <assembly fullname="Game.Runtime">\n'
        b'    <type fullname="Game.Runtime.Material" preserve="all"/>\n'
        b'    <type fullname="Game.Runtime.Texture" preserve="all"/>\n'
        b'    <type fullname="UnityEngine.Sprite" preserve="all"/>\n'
        b"  </assembly>\n</linker>\n"
    )
    assert qualified_type("Mesh", "My.Space") == "My.Space.Mesh"
    assert b'fullname="A&amp;B.X"' in render_link_xml(["X"], "A&B")


def test_staging_manifest_splits_bundled_from_loose():
    files = {"ui": _record("ui", "ui_f", b"1"), "maps/A": _record("maps/A", "maps/A_f", b"2")}
    doc = staging_document(files)
    assert [u["file"] for u in doc["ufs"]] == ["maps/A_f", "ui_f"]
    assert doc["non_ufs"] == ["link.xml", "manifest.json", "staging.json"]


def test_manifest_json_bytes_are_those_of_json_dumps():
    """orjson writes what json.dumps(indent=2, sort_keys=True, ensure_ascii=False) wrote: key
    order by code point, escapes, empty containers; what orjson refuses falls back."""
    from stages.manifest import to_json_bytes

    documents = [
        {},
        [],
        {"b": [], "a": {}, "c": [[], {}]},
        {"é": 1, "Z": 2, "中文": 3, "\U0001f600": 4, "\uffff": 5, "a b": [None, True, False, -1]},
        {"s": 'quote " backslash \\ slash / \n\r\t\b\f \x00\x1f\x7f \u2028\u2029 ü 🎮'},
        {"nested": {"list": [1, {"k": "v"}], "tuple": ("x", 2)}},
        {"big": 2**70},  # past 64 bits: orjson refuses, json writes it
    ]
    for document in documents:
        expected = (
            json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        ).encode()
        assert to_json_bytes(document) == expected


class _CountingDigests:
    """The engine's output digests (a real build state's) counting the files it had to hash."""

    def __init__(self, root: Path, out: Path) -> None:
        from orchestrator.cache import Cache
        from orchestrator.cache.state import BuildState

        cache = Cache(root / "cache")
        self.state = BuildState(root / "cache", str(root), str(out), cache)
        self.out = out
        self.hashed: list[str] = []

    def __call__(self, relpath: str, st) -> str:
        from orchestrator.hashing import digest_file

        known = self.state.outputs.digest(relpath, st)
        if known is not None:
            return known
        self.hashed.append(relpath)
        digest = digest_file(str(self.out / relpath))
        self.state.outputs.put(relpath, st, digest)
        return digest


def test_unchanged_bundles_are_not_hashed_again_but_changed_ones_are_rewritten(tmp_path):
    """With the engine's output digests a file whose signature is known is not read again; a
    file changed behind our back (same size) is noticed and rewritten."""
    out = tmp_path / "out"
    ctx = RecordingCtx(out)
    ctx.output_digest = _CountingDigests(tmp_path, out)
    data = {"a": b"AAA", "sub/b": b"BBB"}
    records = [_record(n, n + "_f", d) for n, d in data.items()]
    publish_build(ctx, records, data.__getitem__, {}, b"{}")
    publish_build(ctx, records, data.__getitem__, {}, b"{}")
    assert sorted(ctx.output_digest.hashed) == ["a_f", "sub/b_f"]
    ctx.output_digest.hashed.clear()
    ctx.events.clear()
    publish_build(ctx, records, data.__getitem__, {}, b"{}")
    assert ctx.output_digest.hashed == [] and ctx.events == ["write manifest.json"]
    (out / "a_f").write_bytes(b"XXX")
    publish_build(ctx, records, data.__getitem__, {}, b"{}")
    assert ctx.events[-2:] == ["write a_f", "write manifest.json"]
    assert (out / "a_f").read_bytes() == b"AAA"


def test_publishing_refuses_a_link_out_of_the_output_folder(tmp_path):
    """A folder inside the output that links elsewhere is refused when written through or
    compared with; paths that could leave the folder are refused when named."""
    from orchestrator.cache import atomic_write
    from orchestrator.errors import ProjectError
    from stages.publishing.output import OutputFolder

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "shared").symlink_to(elsewhere, target_is_directory=True)
    folder = OutputFolder(out)
    assert folder.path("maps/a_f") == out.resolve() / "maps" / "a_f"
    for bad in ("shared/x", "shared/y"):
        with pytest.raises(ProjectError, match="symbolic link"):
            atomic_write(folder, bad, b"x")
        with pytest.raises(ProjectError, match="symbolic link"):
            folder.matches(bad, 1, "0" * 64)
    for bad in ("../x", "a//b"):
        with pytest.raises(ProjectError):
            folder.path(bad)
    assert list(elsewhere.iterdir()) == []


def test_a_bundle_deleted_after_a_partial_republish_is_restored(tmp_path):
    """Bundles left as they were by a run that rewrote another one still count as published."""
    build_file = make_project(tmp_path)
    build(build_file)
    out = tmp_path / "out"
    write(tmp_path / "p", f"Repository/Props/{guid(3)}/resource.data", b"a new prop")
    build(build_file)  # rewrites maps/A only; the others were found right
    document = json.loads((out / "manifest.json").read_text())
    ui_file = out / document["bundles"]["ui"]["file"]
    ui_bytes = ui_file.read_bytes()
    ui_file.unlink()
    build(build_file)
    assert ui_file.read_bytes() == ui_bytes
