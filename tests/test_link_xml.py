"""The `link_xml` stage on its own (orchestrator.testing): the Types the build packs, named."""

from __future__ import annotations

from orchestrator.testing import run_stage
from stages import link_xml
from stages.layout.packing import Bundle, Packing
from stages.sources.base import SourceResult


def packing(*bundles: tuple[str, tuple[str, ...]]) -> Packing:
    return Packing({name: Bundle(name, "layout", assets, ()) for name, assets in bundles}, {})


COOKED = {
    "tex": {"digest": "d1", "type": "Texture"},
    "mat": {"digest": "d2", "type": "Material"},
    "clip": {"digest": "d3", "type": "UnityEngine.AnimationClip"},
}


def test_link_xml_lists_every_packed_type_once_sorted():
    """Each Type a bundle holds appears once, qualified by the assembly's namespace, sorted."""
    run = run_stage(
        link_xml,
        settings={"link_xml": {"assembly": "Game.Runtime"}},
        inputs={
            "source": SourceResult(assets={}, index=None),
            "bundles": packing(("ui", ("tex", "mat")), ("more", ("tex",))),
            "cooked": COOKED,
        },
    )
    xml = run.outputs["link_xml"].decode("utf-8")
    assert xml.index("Game.Runtime.Material") < xml.index("Game.Runtime.Texture")
    assert xml.count("Game.Runtime.Texture") == 1
    assert run.plan.units[0].key["types"] == ["Material", "Texture"]


def test_link_xml_puts_source_named_types_in_their_assembly():
    """A Type the source places in an assembly (Unity's) goes there, under its own name."""
    source = SourceResult(
        assets={}, index=None, type_assemblies={"UnityEngine.AnimationClip": "UnityEngine"}
    )
    run = run_stage(
        link_xml,
        inputs={"source": source, "bundles": packing(("a", ("clip", "mat"))), "cooked": COOKED},
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
            "source": SourceResult(assets={}, index=None),
            "bundles": packing(("ui", ("tex",))),
            "cooked": COOKED,
        },
    )
    assert b"Material" not in run.outputs["link_xml"]
