"""Bad input: every case of tests/data/bad/cases.yaml gives its exit code and a message naming
the file and the problem."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml
from buildkit import run_cli, snapshot

BAD = Path(__file__).resolve().parent / "data" / "bad"
CASES = yaml.safe_load((BAD / "cases.yaml").read_text(encoding="utf-8"))
SECRET = "root:x:0:0"  # a line of /etc/passwd: must never reach an output, a report or the cache


def _make(case_dir: Path, spec: dict) -> None:
    """Build at test time what is too big or too special to commit (huge files, FIFOs, links)."""
    path = case_dir / spec["path"]
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        path.unlink()
    kind = spec["kind"]
    if kind == "huge_xml":  # many elements: a big but valid attribute file
        count = int(spec.get("elements", 400_000))
        with path.open("wb") as handle:
            handle.write(b'<?xml version="1.0" encoding="utf-8"?>\n<Resource><Name>Huge</Name>\n')
            chunk = b"".join(b"<Entity><NumFaces>%d</NumFaces></Entity>\n" % i for i in range(1000))
            for _ in range(count // 1000):
                handle.write(chunk)
            handle.write(b"</Resource>\n")
    elif kind == "huge_data":  # a big payload, written sparse-free but cheap to make
        with path.open("wb") as handle:
            block = os.urandom(1 << 20)
            for _ in range(int(spec.get("megabytes", 64))):
                handle.write(block)
    elif kind == "huge_line":  # one enormous text node
        path.write_bytes(
            b"<Resource><Name>"
            + b"x" * (int(spec.get("megabytes", 32)) << 20)
            + b"</Name></Resource>\n"
        )
    elif kind == "deep_xml":
        depth = int(spec.get("depth", 100_000))
        path.write_bytes(
            b"<Resource><Name>Deep</Name>" + b"<a>" * depth + b"</a>" * depth + b"</Resource>\n"
        )
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
        (path / "inside.txt").write_text("a folder where a file was expected\n")
    elif kind == "dangling_symlink":
        path.symlink_to(case_dir / "no-such-target")
    elif kind == "symlink_loop":
        path.symlink_to(path)
    else:
        raise AssertionError(f"unknown make kind {kind!r}")


def _prepare(tmp_path: Path, case: dict) -> Path:
    case_dir = tmp_path / "case"
    shutil.copytree(BAD / "_base", case_dir)
    overlay = BAD / case["id"]
    if overlay.is_dir():
        shutil.copytree(overlay, case_dir, dirs_exist_ok=True)
    for rel in case.get("delete", []):
        target = case_dir / rel
        shutil.rmtree(target) if target.is_dir() else target.unlink()
    for spec in case.get("make", []):
        _make(case_dir, spec)
    return case_dir


def _everything_written(case_dir: Path) -> str:
    """The text of every output, report and cache file (for what must never leak)."""
    chunks = []
    for folder in (case_dir / "build",):
        for path in folder.rglob("*") if folder.exists() else ():
            if path.is_file() and not path.is_symlink():
                chunks.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(chunks)


def test_the_corpus_is_big_and_every_case_is_described():
    """At least 40 cases; every overlay folder has a manifest entry and vice versa."""
    ids = [case["id"] for case in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 40
    folders = {p.name for p in BAD.iterdir() if p.is_dir() and p.name != "_base"}
    assert folders <= set(ids), f"undescribed cases: {sorted(folders - set(ids))}"


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_bad_input(tmp_path, case):
    """The case's exit code; its message names the file and the problem; nothing written outside."""
    case_dir = _prepare(tmp_path, case)
    sentinel = Path("/tmp/orchestrate-escaped")
    assert not sentinel.exists()
    before = snapshot(tmp_path, skip=(case_dir / "build",))
    args = [a.replace("{case}", str(case_dir)) for a in case.get("args", ["run"])]
    proc = run_cli(*args, str(case_dir / "build.yaml"), timeout=case.get("timeout", 120))
    text = proc.stdout + proc.stderr
    for report in case.get("reports", []):
        path = case_dir / "build" / "out" / "reports" / report
        assert path.is_file(), f"{report} was not written\n{text[-3000:]}"
        text += "\n" + path.read_text(encoding="utf-8")
    assert proc.returncode == case["exit"], (
        f"{case['id']}: exit {proc.returncode}, expected {case['exit']}\n{text[-4000:]}"
    )
    for fragment in case.get("expect", []):
        fragment = fragment.replace("{case}", str(case_dir))
        assert fragment in text, f"{case['id']}: {fragment!r} not in the message\n{text[-4000:]}"
    if case["exit"] != 3:
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    # no write outside `output:` and `cache:` (the case folder's build/), and no leak of secrets
    after = snapshot(tmp_path, skip=(case_dir / "build",))
    created = sorted(set(after) - set(before))
    assert created == [], f"written outside the output and cache folders: {created[:5]}"
    assert not sentinel.exists(), "a bundle escaped to /tmp"
    assert SECRET not in _everything_written(case_dir) + text
