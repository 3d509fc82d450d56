"""Rescans: what counts as moved (ctime alone, renames), racily clean folders, names the table
cannot hold; and what the scheduler makes of a file whose signature moved but not its bytes."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from enginekit import build_toy, write_toy

from orchestrator.errors import ProjectError
from orchestrator.filetable import FileTable
from orchestrator.scanning import scan

PAST = time.time_ns() - 3600 * 10**9


def age(root: Path) -> None:
    """Everything under `root` an hour old: not racy."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), ns=(PAST, PAST))
    for dirpath, _, _ in sorted(os.walk(root), key=lambda walked: -len(walked[0])):
        os.utime(dirpath, ns=(PAST, PAST))


def stored(table: FileTable) -> FileTable:
    return FileTable.from_blobs(table.to_blobs())


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
