"""The recording reader: the signature it reports for a file is that of the bytes it read, taken
from the open descriptor, so the driver can remember a digest under exactly that signature."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from orchestrator.files.filetable import signature_of
from orchestrator.files.projectfiles import ProjectFiles
from orchestrator.files.reads import Reader
from orchestrator.hashing import digest_bytes

OLD = b"old\n"
NEW = b"new and longer\n"


def replace_on_read(monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
    """Make the next read of `path` race an editor: as soon as the file is open, a new file is
    saved over it through a rename (a new inode), before it is stat-ed or a byte is read."""
    real_open = os.open

    def open_then_replace(name, *args, **kwargs):
        fd = real_open(name, *args, **kwargs)
        if os.fspath(name) == str(path):
            monkeypatch.setattr(os, "open", real_open)
            staged = path.with_name(path.name + ".saving")
            staged.write_bytes(NEW)
            os.replace(staged, path)
        return fd

    monkeypatch.setattr(os, "open", open_then_replace)


def test_a_file_replaced_while_read_gives_the_bytes_and_signature_of_the_file_opened(
    tmp_path, monkeypatch
):
    """A file saved over right after it is opened: the bytes and the stat returned are both the
    opened file's (its inode and size), not those of the file now at the path."""
    path = tmp_path / "a.txt"
    path.write_bytes(OLD)
    opened_inode = os.stat(path).st_ino
    replace_on_read(monkeypatch, path)
    data, st = ProjectFiles(str(tmp_path)).read(path.name)
    assert data == OLD
    assert st is not None
    assert (st.st_ino, st.st_size) == (opened_inode, len(OLD))
    now = os.stat(path)
    assert now.st_ino != opened_inode and signature_of(st) != signature_of(now)


def test_the_reader_records_the_signature_of_what_it_read(tmp_path, monkeypatch):
    """The reader's digest and signature of a file describe the same bytes, even when the file
    is replaced while it reads: the signature is never that of the file now at the path."""
    path = tmp_path / "a.txt"
    path.write_bytes(OLD)
    reader = Reader(str(tmp_path))
    replace_on_read(monkeypatch, path)
    assert reader.read_bytes("a.txt") == OLD
    assert reader.reads["a.txt"] == digest_bytes(OLD)
    size, _mtime, _ctime, inode, _dev = reader.signatures["a.txt"]
    assert size == len(OLD)
    assert inode != os.stat(path).st_ino
    assert tuple(reader.signatures["a.txt"]) != tuple(signature_of(os.stat(path)))


def test_bytes_sent_by_the_driver_carry_no_signature(tmp_path):
    """Preloaded bytes were not read from disk here: digest recorded, no signature claimed."""
    (tmp_path / "a.txt").write_bytes(NEW)
    reader = Reader(str(tmp_path), preloaded={"a.txt": OLD})
    assert reader.read_bytes("a.txt") == OLD
    assert reader.reads == {"a.txt": digest_bytes(OLD)} and reader.signatures == {}


def test_whole_file_is_read_whatever_its_size(tmp_path: Path):
    """Empty, small and multi-chunk files come back byte for byte."""
    for size in (0, 1, 100, 200_003):
        path = tmp_path / f"f{size}"
        data = bytes(i % 251 for i in range(size))
        path.write_bytes(data)
        assert ProjectFiles(str(tmp_path)).read(path.name)[0] == data


def test_a_file_growing_while_read_is_read_to_its_end(tmp_path: Path, monkeypatch):
    """Bytes appended after the file was stat-ed are read too (the descriptor is read to EOF)."""
    path = tmp_path / "log.xml"
    path.write_bytes(OLD)
    real_fstat = os.fstat

    def fstat_then_grow(fd):
        result = real_fstat(fd)
        with open(path, "ab") as handle:
            handle.write(NEW)
        return result

    monkeypatch.setattr(os, "fstat", fstat_then_grow)
    data, _ = ProjectFiles(str(tmp_path)).read(path.name)
    monkeypatch.undo()
    assert data == OLD + NEW
