"""Units whose result comes in parts (`orchestrator.typing.Parts`): each part a stored result of
its own, read by digest downstream, recomputed by its unit when its blob is damaged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from enginekit import write_toy

from orchestrator import codec
from orchestrator.core.config import load_build
from orchestrator.core.options import RunOptions
from orchestrator.core.registry import load_stage
from orchestrator.core.scheduler import run_build
from orchestrator.shell.present import setup_logging

PARTS_STAGES = ("toy_stages.sizes", "toy_stages.echo")


def build_parts(build_file: Path, **options):
    opts = RunOptions(executor="local", progress=False, **options)
    stages = [load_stage(name) for name in PARTS_STAGES]
    return run_build(load_build(build_file), opts, setup_logging("console"), stages)


def built(result, stage: str) -> int:
    return next(r for r in result.reports if r.name == stage).built


def test_each_part_is_stored_under_the_digest_of_its_value(tmp_path):
    """A part's digest is that of its value stored alone, and a consumer reads it back by it."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "22\n"})
    result = build_parts(build)
    sizes = dict(result.outputs["sizes"].items())
    assert sizes == {
        "a.txt": codec.digest("a.txt: 2 bytes"),
        "b.txt": codec.digest("b.txt: 3 bytes"),
    }
    assert dict(result.outputs["echoed"]) == {"a.txt": "a.txt: 2 bytes", "b.txt": "b.txt: 3 bytes"}


def test_an_edit_changes_only_its_own_part(tmp_path):
    """The unit runs again, but only the edited file's part changes digest: the consumer of the
    other part is not run again."""
    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "22\n"})
    build_parts(build)
    (tmp_path / "p" / "b.txt").write_text("4444\n", encoding="utf-8")
    result = build_parts(build, explain=True)
    assert built(result, "sizes") == 1
    assert [o.id for o in result.explained if o.stage == "echo"] == ["b.txt"]
    assert dict(result.outputs["echoed"])["b.txt"] == "b.txt: 5 bytes"


def test_a_damaged_part_is_recomputed_by_its_unit(tmp_path, monkeypatch, capsys):
    """A part whose blob is damaged while its unit's result is intact: the run starts again and
    the unit that made the part runs again in the driver to mend it."""
    import toy_stages.echo as echo

    build = write_toy(tmp_path, {"a.txt": "1\n", "b.txt": "22\n"})
    clean = dict(build_parts(build).outputs["echoed"])
    part = codec.digest("a.txt: 2 bytes")
    packs = tmp_path / "cache" / "cas" / "packs"
    for line in (packs / "index.log").read_text("ascii").splitlines():
        _, digest, pack, offset, length = line.split(" ")
        if digest == part:
            data = bytearray((packs / pack).read_bytes())
            data[int(offset) + int(length) // 2] ^= 0xFF
            (packs / pack).write_bytes(bytes(data))
    monkeypatch.setattr(echo, "SPEC", dataclasses.replace(echo.SPEC, version=2))
    result = build_parts(build)
    assert dict(result.outputs["echoed"]) == clean
    assert "cache.recompute" in capsys.readouterr().err
