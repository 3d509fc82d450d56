"""The `link_xml` stage on its own (orchestrator.testing): the Types the build packs, named."""

from __future__ import annotations

from orchestrator.testing import run_stage
from stages import link_xml
from stages.sources.base import SourceInfo

TYPES = {"tex": "Texture", "mat": "Material", "clip": "UnityEngine.AnimationClip"}


def held(*bundles: tuple[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """asset → the bundles holding it, as the pack stage's `asset_bundles`."""
    found: dict[str, tuple[str, ...]] = {}
    for name, assets in bundles:
        for asset in assets:
            found[asset] = (*found.get(asset, ()), name)
    return found


def test_link_xml_lists_every_packed_type_once_sorted():
    """Each Type a bundle holds appears once, qualified by the assembly's namespace, sorted."""
    run = run_stage(
        link_xml,
        settings={"link_xml": {"assembly": "Game.Runtime"}},
        inputs={
            "source": SourceInfo(),
            "asset_bundles": held(("ui", ("tex", "mat")), ("more", ("tex",))),
            "cooked_types": TYPES,
        },
    )
    xml = run.outputs["link_xml"].decode("utf-8")
    assert xml.index("Game.Runtime.Material") < xml.index("Game.Runtime.Texture")
    assert xml.count("Game.Runtime.Texture") == 1
    assert run.plan.units[0].key["types"] == ["Material", "Texture"]


def test_link_xml_puts_source_named_types_in_their_assembly():
    """A Type the source places in an assembly (Unity's) goes there, under its own name."""
    source = SourceInfo(type_assemblies={"UnityEngine.AnimationClip": "UnityEngine"})
    run = run_stage(
        link_xml,
        inputs={
            "source": source,
            "asset_bundles": held(("a", ("clip", "mat"))),
            "cooked_types": TYPES,
        },
    )
    xml = run.outputs["link_xml"].decode("utf-8")
    assert '<assembly fullname="UnityEngine">' in xml
    assert '<type fullname="UnityEngine.AnimationClip" preserve="all"/>' in xml
    assert '<type fullname="Messiah.Runtime.Material" preserve="all"/>' in xml


def test_unpacked_assets_do_not_reach_link_xml():
    """A cooked asset no bundle holds adds no Type."""
    run = run_stage(
        link_xml,
        inputs={
            "source": SourceInfo(),
            "asset_bundles": held(("ui", ("tex",))),
            "cooked_types": TYPES,
        },
    )
    assert b"Material" not in run.outputs["link_xml"]
