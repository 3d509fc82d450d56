"""The file watches (files/watcher.py): what a batch names (project paths relative to the root,
the output and cache folders left out, files outside the project the build depends on, saved
however an editor saves), and when it says every file must be looked at instead (a burst the
kernel's queue may not have held, the project folder gone)."""

from __future__ import annotations

import os

from orchestrator.files import watcher
from orchestrator.files.watcher import FileEvents


def tree(tmp_path):
    root = tmp_path / "project"
    (root / "a").mkdir(parents=True)
    (root / "out").mkdir()
    (tmp_path / "build.yaml").write_text("project: project\n")
    return root


def settled(events: FileEvents):
    """Every batch until the watch is quiet, as one."""
    batch = events.next(timeout=10)
    changed, outside = set(batch.changed), set(batch.outside)
    while more := events.next(timeout=0.5):
        changed |= more.changed
        outside |= more.outside
    return batch, changed, outside


def test_a_batch_names_what_moved_and_leaves_out_the_output(tmp_path):
    root = tree(tmp_path)
    events = FileEvents(str(root), [str(root / "out")], [str(tmp_path / "build.yaml")])
    try:
        (root / "a" / "x 名字.xml").write_text("x")
        (root / "out" / "bundle").write_text("o")
        (root / "new" / "deep").mkdir(parents=True)
        batch, changed, outside = settled(events)
        # new/deep may come before the watch of new/ does: naming new/ is enough (the scan
        # lists a new folder whole)
        assert changed - {"new/deep"} == {"a/x 名字.xml", "new"}
        assert not outside and batch.rescan is None
        (tmp_path / "build.yaml.tmp").write_text("project: project\n# saved\n")
        os.replace(tmp_path / "build.yaml.tmp", tmp_path / "build.yaml")  # as editors save
        (tmp_path / "unrelated.txt").write_text("u")
        _, changed, outside = settled(events)
        assert outside == {str(tmp_path / "build.yaml")} and not changed
        assert not events.next(timeout=0.3)  # nothing moving: an empty batch at the timeout
    finally:
        events.close()


def test_files_outside_watched_later_are_seen(tmp_path):
    root = tree(tmp_path)
    rules = tmp_path / "rules" / "lib.yaml"
    rules.parent.mkdir()
    rules.write_text("- a\n")
    events = FileEvents(str(root))
    try:
        events.watch_more([str(rules)])
        rules.write_text("- b\n")
        assert settled(events)[2] == {str(rules)}
    finally:
        events.close()


def test_a_burst_asks_for_every_file_to_be_looked_at(tmp_path, monkeypatch):
    monkeypatch.setattr(watcher, "OVERFLOW_SUSPECT_PATHS", 20)
    root = tree(tmp_path)
    events = FileEvents(str(root))
    try:
        for i in range(40):
            (root / "a" / f"f{i}").write_text("x")
        batch = events.next(timeout=10)
        assert batch.rescan and "at once" in batch.rescan and not batch.lost
    finally:
        events.close()


def test_the_project_folder_going_loses_the_watch(tmp_path):
    root = tree(tmp_path)
    events = FileEvents(str(root))
    try:
        root.rename(tmp_path / "elsewhere")
        batch = events.next(timeout=10)
        assert batch.lost and "gone" in batch.lost and batch.rescan
    finally:
        events.close()
