"""The project tree snapshot: incremental scans, versions, racy entries, and the no-op fast path."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from enginekit import build_toy, write_toy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.tree import Tree, TreeStore, scan

PAST = time.time_ns() - 3600 * 10**9


def age(root: Path, offset_s: int = 0) -> None:
    """Give every file and folder under `root` an mtime an hour ago (not racy), plus an offset."""
    stamp = PAST + offset_s * 10**9
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), ns=(stamp, stamp), follow_symlinks=False)
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(w[0])):
        os.utime(dirpath, ns=(stamp, stamp))


def plain_walk(root: Path, skip=()) -> dict:
    """Every regular file under root (links to files followed, to folders not), with signatures."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [
            d
            for d in dirnames
            if os.path.join(dirpath, d) not in skip and not os.path.islink(os.path.join(dirpath, d))
        ]
        for name in filenames:
            full = os.path.join(dirpath, name)
            if os.path.isfile(full):
                s = os.stat(full)
                out[os.path.relpath(full, root).replace(os.sep, "/")] = (
                    s.st_size,
                    s.st_mtime_ns,
                    s.st_ino,
                )
    return out


def rescan(root: Path, previous: Tree | None) -> Tree:
    """Scan as a run does: from the stored snapshot of the previous scan."""
    if previous is not None:
        store = TreeStore(root.parent / "cache", str(root), set())
        store.save(previous, None)
        previous = store.load()
    return scan(str(root), set(), previous)


def test_scan_lists_what_a_plain_walk_lists(tmp_path):
    """Files (file links followed), not folder links, not skipped folders: as os.walk sees them."""
    root = tmp_path / "p"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "x.xml").write_text("x")
    (root / "top.txt").write_text("t")
    (root / "out").mkdir()
    (root / "out" / "ignored").write_text("o")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "f.txt").write_text("e")
    os.symlink(tmp_path / "elsewhere", root / "linked_folder")
    os.symlink(root / "top.txt", root / "a" / "link.txt")
    tree = scan(str(root), {str(root / "out")}, None)
    assert tree.files == plain_walk(root, skip={str(root / "out")})
    assert "a/link.txt" in tree.files and "linked_folder/f.txt" not in tree.files


def test_an_unchanged_tree_keeps_its_version(tmp_path):
    """Two scans of an untouched (old) tree give one version; the second lists no folder."""
    root = tmp_path / "p"
    for i in range(5):
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / "f.txt").write_text(str(i))
    age(root)
    first = rescan(root, None)
    second = rescan(root, first)
    assert second.version == first.version and second.relisted == 0
    assert second.files == first.files


def test_a_same_size_edit_changes_the_version(tmp_path):
    """An edit that keeps the size and the folder's mtime is still seen (the file's mtime)."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("aaaa")
    age(root)
    first = rescan(root, None)
    (root / "d" / "f.txt").write_text("bbbb")
    age(root, offset_s=5)
    second = rescan(root, first)
    assert second.version != first.version
    assert second.files == plain_walk(root)


def test_a_racy_file_is_not_trusted_next_time(tmp_path):
    """A file modified within the clock's margin of a scan forces a new version on the next."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("fresh")
    first = rescan(root, None)
    assert "d/f.txt" in first.racy
    second = rescan(root, first)
    assert second.version != first.version


def test_covers_reads_the_tree_would_notice(tmp_path):
    """Reads in the tree, or absent in a listed folder, are covered; reads behind a folder link are not."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("f")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "g.txt").write_text("g")
    os.symlink(tmp_path / "other", root / "link")
    tree = scan(str(root), set(), None)
    assert tree.covers(str(root), {"d/f.txt": "x", "d/absent.txt": None, "new/deep/x": None})
    assert not tree.covers(str(root), {"link/g.txt": "y"})
    assert not tree.covers(str(root), {"link/absent.txt": None})


OPS = st.lists(
    st.tuples(
        st.sampled_from(["write", "append", "remove", "mkdir", "rmdir"]),
        st.integers(0, 3),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=8,
)


def _set_mtime(path: Path, offset_s: int) -> None:
    stamp = PAST + offset_s * 10**9
    os.utime(path, ns=(stamp, stamp))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(OPS, min_size=1, max_size=4))
def test_incremental_scan_equals_a_fresh_scan(tmp_path_factory, steps):
    """After any edits, a scan from the last snapshot lists what a scan from nothing lists, and its
    version moves exactly when the files, their signatures or the folders moved."""
    root = tmp_path_factory.mktemp("tree") / "p"
    root.mkdir()
    age(root)
    tree = rescan(root, None)
    for offset, ops in enumerate(steps, 1):
        for op, folder, name in ops:
            d = root / f"f{folder}" / f"s{folder % 2}"
            f = d / f"n{name}.txt"
            if op in ("write", "append") and not d.exists():
                d.mkdir(parents=True)
            if op == "write":
                f.write_text("w" * name)
                _set_mtime(f, offset)
            elif op == "append" and f.exists():
                with f.open("a") as handle:
                    handle.write("+")
                _set_mtime(f, offset)
            elif op == "remove" and f.exists():
                f.unlink()
            elif op == "mkdir":
                (d / f"sub{name}").mkdir(parents=True, exist_ok=True)
            elif op == "rmdir" and d.exists():
                for p in sorted(d.rglob("*"), key=lambda p: -len(p.parts)):
                    p.rmdir() if p.is_dir() else p.unlink()
                d.rmdir()
        for dirpath, _, _ in os.walk(root):  # folders old again, files as the ops left them
            _set_mtime(Path(dirpath), offset)
        before, before_version = (tree.files, set(tree.folders)), tree.version
        tree = rescan(root, tree)
        assert tree.files == scan(str(root), set(), None).files == plain_walk(root)
        assert (tree.version != before_version) == ((tree.files, set(tree.folders)) != before)


# -- the scheduler's use of it ------------------------------------------------------------------


def test_noop_on_an_old_tree_does_not_load_the_reads(tmp_path, monkeypatch):
    """A rerun whose tree did not move skips stages without loading their recorded reads."""
    from orchestrator.cache import StageRecords

    build = write_toy(tmp_path, {"a.txt": "1\n", "d/b.txt": "2\n"})
    age(tmp_path / "p")
    build_toy(build)
    build_toy(build)  # stamps the records with the (now trusted) tree version
    monkeypatch.setattr(StageRecords, "reads", lambda *a: pytest.fail("reads were loaded"))
    again = build_toy(build)
    assert sum(r.built for r in again.reports) == 0 and again.outputs["total"] == 2


def test_an_old_style_edit_after_a_noop_is_rebuilt(tmp_path):
    """An edit that keeps the size and is back-dated (not racy) still reruns its unit."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "d/b.txt": "2\n"})
    age(tmp_path / "p")
    build_toy(build)
    build_toy(build)
    (tmp_path / "p" / "d" / "b.txt").write_text("2\n3\n")
    age(tmp_path / "p", offset_s=7)
    result = build_toy(build)
    assert result.outputs["total"] == 3
    (tmp_path / "p" / "d" / "new.txt").write_text("4\n")
    age(tmp_path / "p", offset_s=9)
    assert build_toy(build).outputs["total"] == 4
