"""The file table: what a scan lists, what a rescan finds moved (ctime alone, renames), racy
entries and folders, names the table cannot hold, the forked stat pass, the stored columns, and
what the scheduler makes of a file whose signature moved but not its bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from enginekit import build_toy, write_toy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ProjectError
from orchestrator.files import statpass
from orchestrator.files.filetable import FileTable
from orchestrator.files.scanning import scan

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
    """Every regular file under root (links to files followed, to folders not), with sizes."""
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
                out[os.path.relpath(full, root).replace(os.sep, "/")] = os.stat(full).st_size
    return out


def listed(table: FileTable) -> dict:
    return {path: table.columns["size"][i] for i, path in enumerate(table.paths)}


def stored(table: FileTable) -> FileTable:
    """The table as the next run loads it."""
    return FileTable.from_blobs(table.to_blobs())


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
    table = scan(str(root), {str(root / "out")}, None).table
    assert listed(table) == plain_walk(root, skip={str(root / "out")})
    assert "a/link.txt" in table.paths and "linked_folder/f.txt" not in table.paths


def test_an_unchanged_tree_rescans_to_no_change_and_lists_no_folder(tmp_path):
    """A rescan of an untouched (old) tree reports nothing and lists no folder again."""
    root = tmp_path / "p"
    for i in range(5):
        (root / f"d{i}").mkdir(parents=True)
        (root / f"d{i}" / "f.txt").write_text(str(i))
    age(root)
    first = scan(str(root), set(), None)
    second = scan(str(root), set(), stored(first.table))
    assert not second.changes and second.relisted == 0
    assert second.table.paths == first.table.paths


def test_a_same_size_edit_is_seen(tmp_path):
    """An edit that keeps the size and the folder's mtime is still seen (the file's mtime)."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("aaaa")
    age(root)
    first = scan(str(root), set(), None)
    (root / "d" / "f.txt").write_text("bbbb")
    age(root, offset_s=5)
    second = scan(str(root), set(), stored(first.table))
    assert second.changes.modified == ["d/f.txt"] and not second.changes.added


def test_an_in_place_rewrite_keeping_size_and_mtime_is_seen(tmp_path):
    """`cp -p` or `rsync -t --inplace` put back the old mtime; the ctime still moves."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    target = root / "d" / "f.txt"
    target.write_text("aaaa")
    age(root)
    first = scan(str(root), set(), None)
    before = os.stat(target)
    time.sleep(0.01)
    with open(target, "r+b") as handle:  # in place: same inode, same size
        handle.write(b"zzzz")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    second = scan(str(root), set(), stored(first.table))
    assert second.changes.modified == ["d/f.txt"]


def test_a_racy_file_is_not_trusted_next_time(tmp_path):
    """A file modified within the clock's margin of a scan is seen as moved by the next scan."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("fresh")
    first = scan(str(root), set(), None)
    assert first.racy >= 1
    second = scan(str(root), set(), stored(first.table))
    assert "d/f.txt" in second.changes.modified


def test_the_stored_columns_round_trip(tmp_path):
    """A table stored as blobs loads back the same, digests included; damage is refused."""
    root = tmp_path / "p"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x").write_text("1")
    (root / "y").write_text("22")
    table = scan(str(root), set(), None).table
    table.set_digest(table.row("y"), "ab" * 32)
    again = stored(table)
    assert again.paths == table.paths and again.folders == table.folders
    assert again.digest(again.row("y")) == "ab" * 32 and again.digest(again.row("a/x")) is None
    blobs = table.to_blobs()
    blobs["size"] = blobs["size"][:-8]
    with pytest.raises(ValueError):
        FileTable.from_blobs(blobs)


def test_the_forked_stat_pass_finds_what_one_process_finds(tmp_path, monkeypatch):
    """Splitting the stats with a forked child reports the same changes."""
    root = tmp_path / "p"
    for i in range(40):
        (root / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 7}" / f"f{i}.txt").write_text("x" * i)
    age(root)
    base = scan(str(root), set(), None).table
    (root / "d3" / "f3.txt").write_text("changed!")
    (root / "d4" / "f4.txt").unlink()
    (root / "d5" / "new.txt").write_text("n")
    single = scan(str(root), set(), stored(base))
    monkeypatch.setattr(statpass, "PARALLEL_MIN_FILES", 1)
    forked = scan(str(root), set(), stored(base))
    assert forked.changes == single.changes
    assert forked.changes.modified == ["d3/f3.txt"]
    assert forked.changes.removed == ["d4/f4.txt"] and forked.changes.added == ["d5/new.txt"]


def test_tracks_reads_a_rescan_would_notice(tmp_path):
    """Reads in the table, or absent in a listed folder, are tracked; reads behind a folder
    link or outside the project are not (the scheduler checks those itself)."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("f")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "g.txt").write_text("g")
    os.symlink(tmp_path / "other", root / "link")
    table = scan(str(root), set(), None).table
    assert table.tracks(str(root), "d/f.txt", "x")
    assert table.tracks(str(root), "d/absent.txt", None)
    assert table.tracks(str(root), "new/deep/x", None)
    assert not table.tracks(str(root), "link/g.txt", "y")
    assert not table.tracks(str(root), "link/absent.txt", None)
    assert not table.tracks(str(root), "../other/g.txt", "z")


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


def _apply(root: Path, ops, offset: int) -> tuple[set[str], set[str]]:
    """Apply the ops; (the files written, every path a file watcher would name: each file and
    folder made, written or removed)."""
    written: set[str] = set()
    touched: set[str] = set()

    def made(folder: Path) -> None:
        for parent in [folder, *folder.parents]:
            if parent == root:
                break
            touched.add(parent.relative_to(root).as_posix())

    for op, folder, name in ops:
        d = root / f"f{folder}" / f"s{folder % 2}"
        f = d / f"n{name}.txt"
        rel = f.relative_to(root).as_posix()
        if op in ("write", "append") and not d.exists():
            d.mkdir(parents=True)
            made(d)
        if op == "write":
            f.write_text("w" * name)
            _set_mtime(f, offset)
            written.add(rel)
            touched.add(rel)
        elif op == "append" and f.exists():
            with f.open("a") as handle:
                handle.write("+")
            _set_mtime(f, offset)
            written.add(rel)
            touched.add(rel)
        elif op == "remove" and f.exists():
            f.unlink()
            touched.add(rel)
        elif op == "mkdir":
            (d / f"sub{name}").mkdir(parents=True, exist_ok=True)
            made(d / f"sub{name}")
        elif op == "rmdir" and d.exists():
            for p in sorted(d.rglob("*"), key=lambda p: -len(p.parts)):
                touched.add(p.relative_to(root).as_posix())
                p.rmdir() if p.is_dir() else p.unlink()
            d.rmdir()
            touched.add(d.relative_to(root).as_posix())
    for dirpath, _, _ in os.walk(root):  # folders old again, files as the ops left them
        _set_mtime(Path(dirpath), offset)
    return written, touched


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=st.lists(OPS, min_size=1, max_size=4), watched=st.booleans())
def test_incremental_scan_equals_a_fresh_scan(tmp_path_factory, steps, watched):
    """After any edits, a rescan from the stored table lists what a scan from nothing lists,
    and reports exactly the files added, removed and rewritten; so does a rescan told by a file
    watcher which paths moved (`watched`: only those and their folders are looked at)."""
    root = tmp_path_factory.mktemp("tree") / "p"
    root.mkdir()
    age(root)
    table = scan(str(root), set(), None).table
    for offset, ops in enumerate(steps, 1):
        written, touched = _apply(root, ops, offset)
        before = set(table.paths)
        result = scan(str(root), set(), stored(table), paths=touched if watched else None)
        table = result.table
        now = plain_walk(root)
        assert listed(table) == now == listed(scan(str(root), set(), None).table)
        assert set(result.changes.added) == set(now) - before
        assert set(result.changes.removed) == before - set(now)
        assert set(result.changes.modified) <= (written & before & set(now))
        if watched:  # what no watcher named is not looked at: its signature stays as stored
            assert not set(result.changes.modified) - touched


def test_a_watched_rescan_looks_only_at_the_paths_named(tmp_path):
    """A rewrite no watcher named is not seen by a watched rescan (it trusts the watcher), and
    is by a full one."""
    root = tmp_path / "p"
    (root / "d").mkdir(parents=True)
    (root / "a.txt").write_text("a")
    (root / "d" / "b.txt").write_text("b")
    age(root)
    table = scan(str(root), set(), None).table
    (root / "a.txt").write_text("aa")
    (root / "d" / "b.txt").write_text("bb")
    age(root, offset_s=5)
    watched = scan(str(root), set(), stored(table), paths=["d/b.txt"])
    assert watched.changes.modified == ["d/b.txt"]
    assert scan(str(root), set(), stored(table)).changes.modified == ["a.txt", "d/b.txt"]


# -- the scheduler's use of it ------------------------------------------------------------------


def test_an_old_style_edit_after_a_noop_is_rebuilt(tmp_path):
    """An edit that keeps the size and is back-dated (not racy) still reruns its unit; a file
    added in an old folder is seen too."""
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


def test_a_noop_rescan_neither_relists_nor_hashes(tmp_path):
    """A rerun of an untouched old tree lists no folder and hashes no file."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "d/b.txt": "2\n"})
    age(tmp_path / "p")
    build_toy(build)
    again = build_toy(build)
    assert again.hashed_files == 0 and not again.file_changes
    assert sum(r.built for r in again.reports) == 0


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    age(root)


def test_a_ctime_only_change_is_a_modification_of_the_signature(tmp_path):
    """A chmod moves only the ctime: the scan reports the file modified (its bytes are then
    compared by the scheduler), nothing else."""
    tree(tmp_path, {"d/f.txt": "f", "d/g.txt": "g"})
    first = scan(str(tmp_path), set(), None).table
    os.chmod(tmp_path / "d" / "f.txt", 0o600)
    changes = scan(str(tmp_path), set(), stored(first)).changes
    assert changes.modified == ["d/f.txt"] and not changes.added and not changes.removed


def test_a_touched_file_reruns_nothing(tmp_path):
    """A file whose signature moved but whose bytes did not (touch, chmod, a rewrite of the same
    bytes) is hashed once and is no change: no unit runs, nothing is logged."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    age(tmp_path / "p")
    build_toy(build)
    target = tmp_path / "p" / "a.txt"
    os.chmod(target, 0o600)
    target.write_bytes(target.read_bytes())
    result = build_toy(build)
    assert result.file_changes.modified == [] and result.hashed_files == 1
    assert sum(report.built for report in result.reports) == 0


def test_renames_are_a_removal_and_an_addition(tmp_path):
    """A file renamed in its folder, and a folder renamed with its files, are seen as the old
    paths removed and the new ones added."""
    tree(tmp_path, {"d/f.txt": "f", "d/sub/g.txt": "g", "e/h.txt": "h"})
    first = scan(str(tmp_path), set(), None).table
    os.rename(tmp_path / "d" / "f.txt", tmp_path / "d" / "f2.txt")
    os.rename(tmp_path / "d" / "sub", tmp_path / "d" / "moved")
    result = scan(str(tmp_path), set(), stored(first))
    assert result.changes.removed == ["d/f.txt", "d/sub/g.txt"]
    assert result.changes.added == ["d/f2.txt", "d/moved/g.txt"]
    assert not result.changes.modified
    assert sorted(result.table.paths) == ["d/f2.txt", "d/moved/g.txt", "e/h.txt"]


def test_a_folder_listed_racily_is_listed_again(tmp_path):
    """A folder changed within the clock's margin of a listing is listed again next time, so
    a file added in the same tick (its mtime unchanged) is still found."""
    tree(tmp_path, {"d/f.txt": "f"})
    folder = tmp_path / "d"
    os.utime(folder)  # fresh: racy
    first = scan(str(tmp_path), set(), None)
    assert first.racy >= 1
    before = os.stat(folder)
    (folder / "new.txt").write_text("n", encoding="utf-8")
    os.utime(folder, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same tick
    result = scan(str(tmp_path), set(), stored(first.table))
    assert result.changes.added == ["d/new.txt"] and result.relisted >= 1


def test_a_name_that_is_not_utf8_is_refused_naming_it(tmp_path):
    """Paths are stored as UTF-8 text: a name that is not is a project error naming the file,
    on the first scan and on a rescan, never an internal error."""
    tree(tmp_path, {"d/f.txt": "f"})
    first = scan(str(tmp_path), set(), None).table
    bad = os.fsencode(tmp_path / "d") + b"/caf\xe9.txt"
    with open(bad, "wb") as handle:
        handle.write(b"x")
    with pytest.raises(ProjectError, match="not valid UTF-8") as raised:
        scan(str(tmp_path), set(), stored(first))
    assert raised.value.file.endswith("d/caf\ufffd.txt")
    with pytest.raises(ProjectError, match="not valid UTF-8"):
        scan(str(tmp_path), set(), None)


def test_a_failed_build_keeps_the_digests_its_units_found(tmp_path, monkeypatch):
    """A build stopped by an error still records the digests of the files its units read, so a
    later touch of those files is no change (before, it looked like an edit and re-planned
    their readers)."""
    import toy_stages.total as total

    from orchestrator.errors import ProjectError

    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "2\n"})
    age(tmp_path / "p")

    def fail(payload, shared, reader):
        raise ProjectError("the last stage fails", file="b.txt")

    with monkeypatch.context() as patched:
        patched.setattr(total, "run", fail)
        with pytest.raises(ProjectError):
            build_toy(build)
    assert build_toy(build).outputs["total"] == 2
    os.utime(tmp_path / "p" / "a.txt", ns=(PAST + 10**9, PAST + 10**9))
    result = build_toy(build)
    assert result.file_changes.modified == [] and result.hashed_files == 1


# -- what of the project the build reads: links leading out, special files, sizes --------------

SECRET = b"CI_SECRET_TOKEN=hunter2-0123456789\n"


def _messiah(tmp_path: Path, **settings) -> tuple[Path, Path]:
    """A generated project (bundles stored uncompressed, so their bytes can be searched) and
    the payload file of a UI resource, which the build cooks."""
    from buildkit import make_project

    build = make_project(
        tmp_path, 100, 2, executor={"kind": "local"}, archive={"compression": "none"}, **settings
    )
    data = sorted((tmp_path / "project" / "Repository" / "UI").rglob("resource.data"))[0]
    return build, data


def _run(build: Path):
    """A whole build in this process: (its values, every published file's bytes)."""
    from buildkit import published

    from orchestrator.core.config import load_build
    from orchestrator.core.options import RunOptions
    from orchestrator.core.scheduler import run_build
    from orchestrator.shell.present import setup_logging

    options = RunOptions(executor="local", progress=False)
    result = run_build(load_build(build), options, setup_logging())
    return result, published(build.parent / "build" / "out")


def _problems(result, kind: str) -> dict[str, str]:
    return {p.file: p.message for p in result.outputs["source"].problems if p.kind == kind}


def _relpath(build: Path, path: Path) -> str:
    return path.relative_to(build.parent / "project").as_posix()


def test_a_link_leading_out_of_the_project_is_treated_as_missing_and_named(tmp_path):
    """`resource.data -> <a file outside>` (the build's environment, a key): nothing of it is
    published, and a problem names the file and where it points; with `collect.follow_links:
    outside` it is read."""
    build, data = _messiah(tmp_path)
    secret = tmp_path / "environ"
    secret.write_bytes(SECRET)
    data.unlink()
    data.symlink_to(secret)
    result, files = _run(build)
    assert not [name for name, content in files.items() if SECRET in content]
    problems = _problems(result, "link_outside")
    assert str(secret) in problems[_relpath(build, data)]
    from buildkit import edit_build

    edit_build(build, collect={"follow_links": "outside"})
    result, files = _run(build)
    assert [name for name, content in files.items() if SECRET in content]
    assert not _problems(result, "link_outside")


def test_a_link_inside_the_project_keeps_working(tmp_path):
    """A link to another file of the project is read as that file, and is no problem."""
    build, data = _messiah(tmp_path)
    shared = tmp_path / "project" / "Shared" / "payload.bin"
    shared.parent.mkdir()
    shared.write_bytes(b"shared payload bytes 0123456789")
    data.unlink()
    data.symlink_to(Path("..") / ".." / ".." / ".." / "Shared" / "payload.bin")
    assert data.read_bytes() == shared.read_bytes()
    result, files = _run(build)
    assert [name for name, content in files.items() if shared.read_bytes() in content]
    assert not _problems(result, "link_outside")


def test_a_fifo_is_never_read(tmp_path):
    """A FIFO where a payload should be: the build neither blocks nor reads it, and names it."""
    build, data = _messiah(tmp_path)
    data.unlink()
    os.mkfifo(data)
    result, _ = _run(build)
    assert "FIFO" in _problems(result, "special_file")[_relpath(build, data)]


def test_a_file_over_the_size_limit_is_not_read(tmp_path):
    """Over `collect.max_file_size` a file is treated as missing and named with its size; a
    2 GiB sparse file under the default limit (1 GiB) costs neither memory nor cache."""
    build, data = _messiah(tmp_path, collect={"max_file_size": "1 MiB"})
    data.write_bytes(b"x" * 1_100_000 + SECRET)
    result, files = _run(build)
    assert _problems(result, "too_large") == {
        _relpath(build, data): "1,100,035 bytes, over collect.max_file_size (1,048,576 bytes): "
        "treated as missing"
    }
    assert not [name for name, content in files.items() if SECRET in content]
    huge, _ = _messiah(tmp_path / "huge")
    sparse = sorted((tmp_path / "huge" / "project" / "Repository" / "UI").rglob("resource.data"))
    with open(sparse[0], "r+b") as handle:
        handle.truncate(2 << 30)
    result, _ = _run(huge)
    assert "2,147,483,648 bytes" in _problems(result, "too_large")[_relpath(huge, sparse[0])]
    cache = sum(p.stat().st_size for p in (tmp_path / "huge" / "build").rglob("*") if p.is_file())
    assert cache < 100 << 20


def test_a_file_that_becomes_a_link_out_is_no_longer_read(tmp_path):
    """Incrementally: a payload replaced by a link leading out after a first build is refused
    by the rerun (and named); made a regular file again, it is read again."""
    build, data = _messiah(tmp_path)
    _run(build)
    secret = tmp_path / "environ"
    secret.write_bytes(SECRET)
    original = data.read_bytes()
    data.unlink()
    data.symlink_to(secret)
    result, files = _run(build)
    assert not [name for name, content in files.items() if SECRET in content]
    assert _relpath(build, data) in _problems(result, "link_outside")
    data.unlink()
    data.write_bytes(original + b" again")
    result, files = _run(build)
    assert not _problems(result, "link_outside")
    assert [name for name, content in files.items() if original + b" again" in content]


def test_every_reader_applies_the_same_check(tmp_path):
    """The unit's reader: a file behind a folder link leading out, a link out, a FIFO and a
    file over the limit are missing; a link inside, and a `../` path the build names on
    purpose, are read."""
    from orchestrator.files.projectfiles import FilePolicy
    from orchestrator.files.reads import Reader

    root, outside = tmp_path / "p", tmp_path / "outside"
    (root / "a").mkdir(parents=True)
    outside.mkdir()
    (outside / "key").write_bytes(SECRET)
    (root / "a" / "real.txt").write_bytes(b"real")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "a" / "key").symlink_to(outside / "key")
    (root / "a" / "inside").symlink_to(root / "a" / "real.txt")
    os.mkfifo(root / "a" / "fifo")
    (root / "a" / "big.bin").write_bytes(b"b" * 100)
    reader = Reader(str(root), policy=FilePolicy(max_size=50))
    for missing in ("linkdir/key", "a/key", "a/fifo", "a/big.bin"):
        assert not reader.exists(missing), missing
    assert reader.read_bytes("a/inside") == b"real"
    assert reader.read_bytes("../outside/key") == SECRET
    opted = Reader(str(root), policy=FilePolicy(follow_outside=True))
    assert opted.read_bytes("linkdir/key") == opted.read_bytes("a/key") == SECRET


def test_a_scanned_folder_is_read_without_lstat_and_a_link_put_in_its_place_is_not(
    tmp_path, monkeypatch
):
    """The scan tells the reader which folders it found real (`ProjectFiles.listed`): reading
    their files checks no folder again. A folder replaced by a link leading out is found so by
    the next scan, and reads under it, however deep, are refused again."""
    from orchestrator.files import projectfiles
    from orchestrator.files.projectfiles import ProjectFiles

    root, outside = tmp_path / "p", tmp_path / "outside"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_bytes(b"inside")
    (root / "top.txt").write_bytes(b"top")
    (outside / "b").mkdir(parents=True)
    (outside / "b" / "f.txt").write_bytes(SECRET)
    files = ProjectFiles(str(root))
    first = scan(str(root), set(), None, files)
    folders_checked: list[str] = []
    real_lstat = os.lstat

    def counted(path, *args, **kwargs):
        if os.path.isdir(path):
            folders_checked.append(str(path))
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(projectfiles.os, "lstat", counted)
    assert files.read("a/b/f.txt").data == b"inside"
    assert files.read("top.txt").data == b"top"
    assert folders_checked == []
    monkeypatch.setattr(projectfiles.os, "lstat", real_lstat)

    (root / "a" / "b" / "f.txt").unlink()
    (root / "a" / "b").rmdir()
    (root / "a").rmdir()
    (root / "a").symlink_to(outside, target_is_directory=True)
    scan(str(root), set(), stored(first.table), files)
    assert files.read("a/b/f.txt").data is None
    fresh = ProjectFiles(str(root))
    scan(str(root), set(), None, fresh)
    assert fresh.read("a/b/f.txt").data is None


def _readable(table: FileTable) -> set[str]:
    return {entry.path for entry in table.entries()}


def _edit_steps(kinds: list[str], names: int, per_step: int):
    """Up to four steps of up to `per_step` edits (kind, folder 0-2, name 0-`names`), each
    step followed by a scan."""
    edit = st.tuples(st.sampled_from(kinds), st.integers(0, 2), st.integers(0, names))
    return st.lists(st.lists(edit, min_size=1, max_size=per_step), min_size=1, max_size=4)


def _age_step(root: Path, offset: int) -> None:
    """Give every folder and file under `root` (not links) the mtime of step `offset`."""
    for dirpath, _, filenames in os.walk(root):
        _set_mtime(Path(dirpath), offset)
        for filename in filenames:
            path = Path(dirpath, filename)
            if not path.is_symlink():
                _set_mtime(path, offset)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_edit_steps(["write", "grow", "link_out", "link_in", "remove"], 3, 6))
def test_incremental_scan_with_refusals_equals_a_fresh_scan(tmp_path_factory, steps):
    """With links leading out and files over the limit coming and going, a rescan from the
    stored table refuses exactly what a scan from nothing refuses, lists the same readable
    files, and reports as added and removed what became readable or refused."""
    from orchestrator.files.projectfiles import FilePolicy, ProjectFiles

    base = tmp_path_factory.mktemp("tree")
    root, outside = base / "p", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    files = ProjectFiles(str(root), FilePolicy(max_size=6))
    age(root)
    table = scan(str(root), set(), None, files).table
    for offset, ops in enumerate(steps, 1):
        for op, folder, name in ops:
            d = root / f"f{folder}"
            d.mkdir(exist_ok=True)
            f = d / f"n{name}"
            if f.is_symlink() or f.exists():
                f.unlink()
            if op == "write":
                f.write_bytes(b"w" * name)
            elif op == "grow":
                f.write_bytes(b"g" * (5 + name))
            elif op == "link_out":
                f.symlink_to(outside / "secret")
            elif op == "link_in":
                (root / "target").write_bytes(b"t")
                f.symlink_to(root / "target")
        _age_step(root, offset)
        before = _readable(table)
        result = scan(str(root), set(), stored(table), files)
        table = result.table
        fresh = scan(str(root), set(), None, files).table
        assert _readable(table) == _readable(fresh)
        assert table.refused == fresh.refused
        assert set(result.changes.added) >= _readable(table) - before
        assert set(result.changes.removed) >= before - _readable(table)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_edit_steps(["write", "folder_out", "folder_in", "folder_real", "remove"], 2, 4))
def test_a_reader_the_scans_taught_reads_what_a_new_reader_reads(tmp_path_factory, steps):
    """Folders turned into links leading out or inside, and back into folders, between scans:
    the reader each scan told which folders it found real (`ProjectFiles.listed`) reads every
    file exactly as a reader made afresh reads it (a link out's files missing)."""
    import shutil

    from orchestrator.files.projectfiles import ProjectFiles

    base = tmp_path_factory.mktemp("taught")
    root, outside = base / "p", base / "outside"
    (root / "inner" / "deep").mkdir(parents=True)
    (root / "inner" / "deep" / "n0").write_bytes(b"inner")
    (outside / "deep").mkdir(parents=True)
    for name in range(3):
        (outside / f"n{name}").write_bytes(b"secret")
        (outside / "deep" / f"n{name}").write_bytes(b"deep secret")
    files = ProjectFiles(str(root))
    age(root)
    table = scan(str(root), set(), None, files).table
    paths = [
        f"f{folder}/{sub}n{name}"
        for folder in range(3)
        for sub in ("", "deep/")
        for name in range(3)
    ]
    for offset, ops in enumerate(steps, 1):
        for op, folder, name in ops:
            d = root / f"f{folder}"
            if op in ("folder_out", "folder_in", "folder_real", "remove"):
                if d.is_symlink():
                    d.unlink()
                elif d.exists():
                    shutil.rmtree(d)
            if op == "folder_out":
                d.symlink_to(outside, target_is_directory=True)
            elif op == "folder_in":
                d.symlink_to(root / "inner", target_is_directory=True)
            elif op in ("folder_real", "write") and not d.is_symlink():
                (d / "deep").mkdir(parents=True, exist_ok=True)
                (d / f"n{name}").write_bytes(b"w%d" % name)
                (d / "deep" / f"n{name}").write_bytes(b"d%d" % name)
        _age_step(root, offset)
        table = scan(str(root), set(), stored(table), files).table
        for path in paths:  # reading first what a folder link leads to, then the link
            assert files.read(path).data == ProjectFiles(str(root)).read(path).data, path


def test_a_name_with_a_control_character_is_left_out_and_named(tmp_path):
    """A project file or folder whose name holds a control character is not listed (it would
    start another line of a log, a report or the ledger); the table names it, escaped by the
    problem that reports it."""
    root = tmp_path / "p"
    (root / "a").mkdir(parents=True)
    (root / "a" / "fine.txt").write_text("f")
    (root / "a" / "evil\ntouch x #").write_text("e")
    (root / "dir\x1b").mkdir()
    (root / "dir\x1b" / "inside.txt").write_text("i")
    table = scan(str(root), set(), None).table
    assert _readable(table) == {"a/fine.txt"}
    assert {path: why.kind for path, why in table.refused.items()} == {
        "a/evil\ntouch x #": "unsafe_name",
        "dir\x1b": "unsafe_name",
    }
    from stages.collect import _printable

    assert _printable("a/evil\ntouch x #") == "a/evil\\x0atouch x #"
