"""Collect patches its outputs Item by Item (issue 29): a repository edit, an asset added or
deleted, a file joining a resource folder re-derive the assets and index entries of the GUIDs
they touch, without assembling the project again, and leave exactly what a clean build leaves
(every value entry, every published file). The changes these tests make are the issue's
everyday edits; tests/test_incremental_laws.py holds random sequences of them to the same law.
"""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

import lawkit
import pytest
from test_incremental_laws import MessiahChanges, aged_project, checkout, settle

from stages.sources.messiah import SOURCE


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("patch-template"))


@pytest.fixture
def spied(monkeypatch):
    """How often collect assembled the whole project (`assemble`) in the runs since cleared."""
    assembled: list[int] = []
    original = SOURCE.assemble

    def spy(*args, **kwargs):
        assembled.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(type(SOURCE), "assemble", lambda self, *a, **k: spy(*a, **k))
    return assembled


def equals_clean(base: Path, story: str, assembled: list[int]) -> lawkit.BuildOutcome:
    """Build incrementally (`assembled` counts whether it assembled) and clean; compare."""
    assembled.clear()
    incremental = lawkit.build(base / "build.yaml", explain=True)
    assembled.append(0)  # the mark between the two builds
    clean = lawkit.build(base / "build.yaml", "clean/out", "clean/cache")
    shutil.rmtree(base / "clean")
    assert assembled[-1] == 1, "the spy saw no clean build assemble"
    problems = lawkit.differences(incremental, clean)
    assert not problems, f"incremental != clean after {story}:\n" + "\n".join(problems)
    return incremental


def first_item(repository: Path) -> tuple[str, str]:
    """(GUID, Name) of the repository's first Item that has a resource folder."""
    text = repository.read_text(encoding="utf-8")
    root = repository.parent
    for match in re.finditer(
        r"<GUID>([^<]+)</GUID>(?:(?!</Item>).)*?<Name>([^<]*)</Name>", text, re.S
    ):
        if any(root.rglob(match.group(1))):
            return match.group(1), match.group(2)
    raise AssertionError("no Item with a folder")


def test_renaming_an_item_patches_its_entries(template, tmp_path, spied, capfd):
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    repository = base / "project" / "Repository" / "resource.repository"
    guid, name = first_item(repository)
    text = repository.read_text(encoding="utf-8")
    repository.write_text(
        text.replace(f"<Name>{name}</Name>", f"<Name>{name}_r</Name>", 1), "utf-8"
    )
    settle(base / "project", 1)
    capfd.readouterr()
    run = equals_clean(base, "a rename", spied)
    explained = "".join(capfd.readouterr())
    assert spied[0] == 0  # the incremental build assembled nothing
    # Only the renamed Item's entries moved: its `repo/` entry and the two virtual paths.
    moved = {key for (value, key), digest in run.values.items() if value == "index"}
    assert f"repo/{guid}" in moved
    # --explain names the entry behind the units it re-ran, and what changed in it.
    assert f"index entry repo/{guid}: Name, VirtualPath changed" in explained


@pytest.mark.parametrize(
    "change",
    [
        "edit_repository",
        "add_asset",
        "delete_asset",
        "add_file",
        "delete_file",
        "edit_attribute",
        "edit_map",
        "rename_folder",
        "move_asset",
    ],
)
@pytest.mark.parametrize("pick", [(3, 0), (11, 2), (40, 5)])
def test_everyday_edits_patch_and_equal_a_clean_build(template, tmp_path, spied, change, pick):
    """Each kind of change, at a few places: the incremental build equals a clean one; the
    repository edits and the folders added or removed are patched, not assembled."""
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    changes = MessiahChanges(base)
    done = changes.apply(change, *pick)
    equals_clean(base, done, spied)
    if change in ("edit_repository", "add_asset", "delete_asset", "add_file", "edit_attribute"):
        assert spied[0] == 0, f"{done}: collect assembled everything"


def test_adding_an_asset_with_its_item_patches(template, tmp_path, spied):
    """The issue's "add one asset": a resource folder and its Item in the repository."""
    base = tmp_path
    checkout(template, base)
    lawkit.build(base / "build.yaml")
    repository = base / "project" / "Repository" / "resource.repository"
    guid, _ = first_item(repository)
    folder = next((base / "project" / "Repository").rglob(guid))
    new = str(uuid.UUID(int=0xABCDEF << 80))
    shutil.copytree(folder, folder.parent / new)
    text = repository.read_text(encoding="utf-8")
    start = text.rindex("<Item>", 0, text.index(f"<GUID>{guid}</GUID>"))
    end = text.index("</Item>", start) + len("</Item>")
    item = text[start:end].replace(guid, new).replace("</Name>", "_copy</Name>")
    repository.write_text(text[:end] + "\n    " + item + text[end:], encoding="utf-8")
    run = equals_clean(base, "an asset added", spied)
    assert spied[0] == 0
    assert run.ran.get("collect") and len(run.ran["collect"]) <= 2  # its batch and repository
