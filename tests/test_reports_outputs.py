"""Reading an output folder: tables of contents come from the cache only for unchanged files."""

from __future__ import annotations

from buildkit import make_project, run_inprocess

from stages.reports import outputs
from stages.reports.outputs import bundle_contents, read_manifest


def test_bundle_tables_of_contents_are_read_once_per_file_version(tmp_path, monkeypatch):
    """With a cache, a second reading reads no bundle; a rewritten bundle is read again, and
    what comes back equals a reading without the cache."""
    build_file = make_project(tmp_path, 100, 7, executor={"kind": "local"})
    assert run_inprocess("run", str(build_file)) in (0, 1)
    out = tmp_path / "build" / "out"
    manifest = read_manifest(out)
    cache = "reports/tocs.cache"
    read = []
    original = outputs.read_toc

    def counting(output_dir, relpath, folder=None):
        read.append(relpath)
        return original(output_dir, relpath, folder)

    monkeypatch.setattr(outputs, "read_toc", counting)
    first = bundle_contents(out, manifest, cache)
    assert len(read) == len(manifest["bundles"]) > 1
    read.clear()
    assert bundle_contents(out, manifest, cache) == first and read == []
    name, bundle = sorted(manifest["bundles"].items())[0]
    path = out / bundle["file"]
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)  # the same bytes, another file: read again, not trusted
    assert bundle_contents(out, manifest, cache) == first and read == [bundle["file"]]
    assert bundle_contents(out, manifest) == first
