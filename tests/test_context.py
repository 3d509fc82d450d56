"""The driver's context: a content digest that units (or the driver) compute is remembered in the
file table only under the signature of the bytes actually read, never under the signature the
scan saw, so a file edited between the scan and a read cannot pass for unchanged next run."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import toy_stages.lines as lines
from enginekit import build_toy, write_toy

from orchestrator.core.config import load_build
from orchestrator.files.reads import Reader
from orchestrator.hashing import digest_bytes
from orchestrator.testing import RecordingContext

OLD = b"1\n"
PAST_NS = time.time_ns() - 3600 * 10**9


def back_date(root: Path) -> None:
    """Give every file under `root` an mtime an hour ago, so the scan trusts its signature."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), ns=(PAST_NS, PAST_NS))


def rewrite_in_place(path: Path, data: bytes, keep_mtime: bool) -> None:
    """Rewrite `path` in place (same inode), optionally putting its mtime back, and make sure its
    ctime moved (file times are coarse: a rewrite inside one tick is retried after it)."""
    before = os.stat(path)
    while True:
        with open(path, "r+b") as handle:
            handle.write(data)
            handle.truncate()
        if keep_mtime:
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if os.stat(path).st_ctime_ns != before.st_ctime_ns:
            return
        time.sleep(0.01)


def scanned_context(tmp_path: Path, files: dict[str, bytes]) -> RecordingContext:
    """A driver context whose file table is a scan of a project holding `files` (back-dated)."""
    project = tmp_path / "project"
    for rel, data in files.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(data)
    back_date(project)
    build = tmp_path / "build.yaml"
    build.write_text("project: project\noutput: out\ncache: cache\n", encoding="utf-8")
    return RecordingContext(load_build(build), {})


def read_and_note(ctx: RecordingContext, relpath: str) -> bytes:
    """Read a file as a unit does and hand its reads to the driver, as the scheduler does."""
    reader = Reader(ctx.root)
    data = reader.read_bytes(relpath)
    ctx.note_reads(reader.reads, reader.signatures)
    return data


def test_a_digest_read_under_the_scanned_signature_is_remembered(tmp_path):
    """The control: a unit read the bytes the scan saw, so their digest is kept in the table."""
    ctx = scanned_context(tmp_path, {"a.txt": OLD})
    row = ctx.files.row("a.txt")
    assert row is not None and ctx.files.digest(row) is None
    assert read_and_note(ctx, "a.txt") == OLD
    assert ctx.files.digest(row) == digest_bytes(OLD)


@pytest.mark.parametrize(
    "new, keep_mtime",
    [(b"1\n2\n3\n", False), (b"9\n", True)],
    ids=["longer", "same-size-same-mtime"],
)
def test_bytes_edited_after_the_scan_are_not_remembered_under_its_signature(
    tmp_path, new, keep_mtime
):
    """A file rewritten between the scan and a unit's read (even keeping its size and mtime):
    the new bytes' digest is not stored under the signature the scan saw, and a digest already
    known for the scanned bytes stays."""
    ctx = scanned_context(tmp_path, {"a.txt": OLD, "b.txt": OLD})
    project = tmp_path / "project"
    a_row, b_row = ctx.files.row("a.txt"), ctx.files.row("b.txt")
    assert a_row is not None and b_row is not None
    rewrite_in_place(project / "a.txt", new, keep_mtime)
    assert read_and_note(ctx, "a.txt") == new
    assert ctx.files.digest(a_row) is None
    assert read_and_note(ctx, "b.txt") == OLD  # read before its edit: known
    rewrite_in_place(project / "b.txt", new, keep_mtime)
    assert read_and_note(ctx, "b.txt") == new
    assert ctx.files.digest(b_row) == digest_bytes(OLD)


def test_digest_of_a_file_edited_since_the_scan_is_its_bytes_now_but_is_not_remembered(tmp_path):
    """The driver's own hashing (`digest_of`) answers with the bytes now and, like a unit's
    read, leaves the scanned row without a digest: it would describe other bytes."""
    ctx = scanned_context(tmp_path, {"a.txt": OLD})
    row = ctx.files.row("a.txt")
    assert row is not None
    rewrite_in_place(tmp_path / "project" / "a.txt", b"2\n", keep_mtime=True)
    assert ctx.digest_of("a.txt") == digest_bytes(b"2\n")
    assert ctx.files.digest(row) is None


def test_a_file_edited_between_two_units_reading_it_is_read_again_next_run(tmp_path, monkeypatch):
    """`a.txt` is read by its own unit, then edited, then read by `b.txt`'s unit (which includes
    it): the next run still sees the edit (the digest of the new bytes was not taken for the
    scanned file), reruns `a.txt`'s unit, and equals a clean build."""
    files = {"a.txt": "1\n", "b.txt": "include a.txt\n2\n"}
    edited = "1\n1\n1\n"
    build = write_toy(tmp_path / "raced", files)
    back_date(tmp_path / "raced" / "p")
    target = tmp_path / "raced" / "p" / "a.txt"
    original_run = lines.run

    def edit_before_b(payload, shared, reader):
        if payload == "b.txt":
            rewrite_in_place(target, edited.encode(), keep_mtime=False)
        return original_run(payload, shared, reader)

    with monkeypatch.context() as patched:
        patched.setattr(lines, "run", edit_before_b)
        raced = build_toy(build)
    # the race happened as staged: a's unit counted the old a.txt, b's unit the edited one
    assert raced.outputs["counts"] == {"a.txt": 1, "b.txt": 4}
    again = build_toy(build)
    assert again.file_changes.modified == ["a.txt"]
    clean = build_toy(write_toy(tmp_path / "clean", {**files, "a.txt": edited}))
    assert again.outputs == clean.outputs
    assert again.outputs["counts"] == {"a.txt": 3, "b.txt": 4}


def test_output_holds_only_the_bytes_there_and_counts_them_as_published(tmp_path):
    """A file holding the bytes is published by the stage; another size, digest or no file is not."""
    ctx = scanned_context(tmp_path, {"a.txt": b"a"})
    ctx.begin_stage(previous=None)
    ctx.publish_bytes("b/x.bin", b"payload")
    ctx.begin_stage(previous=None)
    assert not ctx.output_holds("b/x.bin", 8, digest_bytes(b"payload"))
    assert not ctx.output_holds("b/x.bin", 7, digest_bytes(b"payloaX"))
    assert not ctx.output_holds("b/missing.bin", 7, digest_bytes(b"payload"))
    assert ctx.stage_published == set()
    assert ctx.output_holds("b/x.bin", 7, digest_bytes(b"payload"))
    assert ctx.stage_published == {"b/x.bin"}
    (tmp_path / "out" / "b" / "x.bin").write_bytes(b"payloaX")  # edited behind our back
    assert not ctx.output_holds("b/x.bin", 7, digest_bytes(b"payload"))


def test_what_a_stage_published_is_signed_as_the_folder_holds_it(tmp_path):
    """The signatures a stage's record keeps of what it published (found right, written, or
    written again) are the files' as they are in the folder, taken as they were published."""
    from orchestrator.cache.records import output_signature

    ctx = scanned_context(tmp_path, {"a.txt": b"a"})
    ctx.begin_stage(previous=None)
    ctx.publish_bytes("b/x.bin", b"payload")
    ctx.publish_bytes("b/y.bin", b"one")
    ctx.begin_stage(previous=None)
    assert ctx.output_holds("b/x.bin", 7, digest_bytes(b"payload"))  # found right
    ctx.publish_bytes("b/y.bin", b"one")  # unchanged: left alone
    ctx.publish_bytes("b/y.bin", b"two")  # written again in the same stage
    ctx.publish_bytes("z.bin", b"new")
    out = tmp_path / "out"
    signed = {path: output_signature(st) for path, st in ctx.stage_signatures.items()}
    assert signed == {
        path: output_signature(os.lstat(out / path)) for path in ("b/x.bin", "b/y.bin", "z.bin")
    }
    assert set(signed) == ctx.stage_published
