"""Helpers for rule-engine tests: small projects on disk, hand-made indexes, one-call checks."""

from __future__ import annotations

from pathlib import Path

import yaml
from lxml import etree

from stages.rules.engine import validate_project
from stages.rules.report import public
from stages.sources.messiah.index import MessiahIndex, MessiahResource, ResourceFile

REPOSITORY = """<?xml version="1.0" encoding="utf-8"?>
<Repository>
  <Items>
    <Item>
      <Type>Material</Type>
      <GUID>914fa3a0-62cd-4b5a-83df-92fdf494534a</GUID>
      <Package>Test/Test_Demo</Package>
      <Deps>9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2</Deps>
      <Deps>12345678-9876-1234-abcd-1234567890ab</Deps>
      <Name>Hole_mat</Name>
      <Annotation><SourcePath /><CreationTime>0</CreationTime></Annotation>
    </Item>
    <Item>
      <Type>Material</Type>
      <GUID>e081bf41-a561-4750-83af-78c80468bc6c</GUID>
      <Package>Test/Test_Demo</Package>
      <Name>Trim_mat</Name>
      <Annotation><SourcePath /><CreationTime>0</CreationTime></Annotation>
    </Item>
    <Item>
      <Type>Mesh</Type>
      <GUID>e5ce0940-f689-404d-968f-775317804069</GUID>
      <Package>Test/Test_Demo</Package>
      <Name>Wall</Name>
      <Annotation>
        <SourcePath />
        <Anno><Key>CollisionShape</Key><Value>e4ea79e4-3505-4e96-bbc0-bc567a1204e5</Value></Anno>
      </Annotation>
    </Item>
    <Item>
      <Type>Model</Type>
      <GUID>7a0c3d5e-1b2f-4c6d-8e9f-0a1b2c3d4e5f</GUID>
      <Package>Characters/Hero</Package>
      <Name>char_hero</Name>
      <Deps>e081bf41-a561-4750-83af-78c80468bc6c</Deps>
    </Item>
  </Items>
</Repository>
"""


def parse(text: str) -> etree._Element:
    return etree.fromstring(text.encode("utf-8"))


def write_files(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return root


def make_index(
    root: Path, resources: dict[str, dict] | None = None, ilevels: tuple[str, ...] = ()
) -> MessiahIndex:
    """An index by hand: `resources` maps GUID → {"type", "name", "package", "file", "deps",
    "in_repo" (default True), "source"}; file paths are project-relative."""
    base = root.as_posix()
    index = MessiahIndex(root=base)
    repo_path = f"{base}/Repository/resource.repository"
    for guid, info in (resources or {}).items():
        if info.get("in_repo", True):
            package, name = info.get("package", "Pkg"), info.get("name", guid[:8])
            index.res_in_repo[guid] = (
                MessiahResource(
                    guid,
                    package,
                    name,
                    info.get("type", "Material"),
                    tuple(info.get("deps", ())),
                    "Repository",
                    f"{package}/{name}",
                    repo_path,
                ),
            )
            index.res_virt_info.setdefault(f"{package}/{name}", ())
            index.res_virt_info[f"{package}/{name}"] += index.res_in_repo[guid]
        if info.get("file"):
            source = info.get("source")
            index.res_in_disk[guid] = (
                ResourceFile(
                    guid,
                    "Repository",
                    info.get("type", "Material"),
                    f"{base}/{info['file']}",
                    None,
                    None,
                    f"{base}/{source}" if source else None,
                ),
            )
    index.ilevels = frozenset(f"{base}/{rel}" for rel in ilevels)
    return index


def run_rules(
    root: Path, rules: list[dict] | str, index: MessiahIndex | None = None, **options
) -> dict:
    """Write `rules` (YAML text or rule dicts) next to the project and validate it."""
    rule_file = root.parent / f"{root.name}_rules.yaml"
    text = rules if isinstance(rules, str) else yaml.safe_dump(rules, allow_unicode=True)
    rule_file.write_text(text, encoding="utf-8")
    if index is None:
        index = make_index(root)
    return public(validate_project(str(root), [rule_file], index, **options))


def failures_of(document: dict, rule: str | None = None) -> list[tuple]:
    """(rule, source, via, errors) of each failure, optionally of one rule."""
    return [
        (f["rule"], f["source"], f["via"], f["errors"])
        for f in document["failures"]
        if rule is None or f["rule"] == rule
    ]


class CountedKeyed:
    """Counts the calls of `Keyed.digests` (every entry's digest) while it is installed."""

    def __init__(self) -> None:
        from orchestrator import Keyed

        self.calls = 0
        self.keyed = Keyed
        self.real = Keyed.digests

    def __enter__(self) -> CountedKeyed:
        counter = self

        def counted(keyed):
            counter.calls += 1
            return counter.real(keyed)

        self.keyed.digests = counted  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc) -> None:
        self.keyed.digests = self.real  # type: ignore[method-assign]
