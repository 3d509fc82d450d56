"""Helpers for the report and diff tests: the shared demo copied into a test folder, built with
the real CLI into a chosen output folder, and edited as a person would."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from orchestrator.shell.cli import main

UI_ICON = "5d7f9b1d-3f5a-4c7e-8a9b-1c3e5f7a9b1d"
TRIM_TEX = "3b1e7c52-0a4f-4d7e-9b8e-5f2a6c1d9e01"
NEW_ICON = "0badc0de-1234-4abc-8def-0123456789ab"


def copy_demo(shared_dir: Path, dest: Path) -> Path:
    """The demo (project, rules, build file) copied to `dest`; its build file."""
    shutil.copytree(shared_dir / "examples" / "demo", dest)
    return dest / "build.yaml"


def cli(*args: str) -> int:
    """Run the `orchestrate` CLI in this process; its exit code."""
    with pytest.raises(SystemExit) as exit_info:
        main(list(args))
    return exit_info.value.code


def build(build_file: Path, output: str, *options: str) -> Path:
    """Build into `output` (relative to the build file); the output folder. A demo build fails
    its rule gate by design (exit 1) and still publishes."""
    data = yaml.safe_load(build_file.read_text(encoding="utf-8"))
    data["output"] = output
    build_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    code = cli("run", str(build_file), "--executor", "local", *options)
    assert code in (0, 1), f"the build exited {code}"
    return build_file.parent / output


def edit_texture_width(build_file: Path, width: int) -> None:
    """An attribute edit: the Width of the texture Trim_tex."""
    path = next((build_file.parent / "project").rglob(f"{TRIM_TEX}/texture.xml"))
    text = path.read_text(encoding="utf-8")
    start, end = text.index("<Width>") + len("<Width>"), text.index("</Width>")
    path.write_text(text[:start] + str(width) + text[end:], encoding="utf-8")


def add_icon(build_file: Path) -> None:
    """A new texture under UI/ (cooked by `always_cook: [UI/]`): its resource folder and its
    repository item."""
    project = build_file.parent / "project"
    source = project / "Repository" / "UI" / "Icons" / UI_ICON
    folder = source.parent / NEW_ICON
    shutil.copytree(source, folder)
    xml = folder / "texture.xml"
    xml.write_text(xml.read_text(encoding="utf-8").replace("32", "16"), encoding="utf-8")
    (folder / "texture.data").write_bytes(b"a second icon\n")
    repository = project / "Repository" / "resource.repository"
    item = (
        "    <Item>\n      <Type>Texture</Type>\n      <Flags>0</Flags>\n"
        f"      <GUID>{NEW_ICON}</GUID>\n      <Package>UI/Icons</Package>\n"
        "      <Class>Texture</Class>\n      <Name>UI_icon_small</Name>\n"
        "      <Annotation>\n        <SourcePath />\n        <CreationTime>0</CreationTime>\n"
        "      </Annotation>\n    </Item>\n"
    )
    text = repository.read_text(encoding="utf-8")
    at = text.index("  </Items>")
    repository.write_text(text[:at] + item + text[at:], encoding="utf-8")


def move_icon(build_file: Path) -> None:
    """A layout change: the small icon (see `add_icon`) leaves `ui` for a bundle of its own."""
    data = yaml.safe_load(build_file.read_text(encoding="utf-8"))
    layout = data["bundles"]["layout"]
    ui = next(rule for rule in layout if rule["name"] == "ui")
    ui["exclude"] = ["UI/Icons/UI_icon_small"]
    layout.append({"name": "icons/small", "include": ["UI/Icons/UI_icon_small"]})
    build_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
