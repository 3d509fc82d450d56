"""Stage `link_xml`: Unity's `link.xml`, preserving every asset Type the build packs.

`<linker><assembly fullname=A><type fullname=N.T preserve="all"/>…</assembly>…</linker>`,
assemblies and types sorted. A source may name the assembly of its own Types
(`SourceResult.type_assemblies`: the Unity source puts `UnityEngine.Material` in `UnityEngine`);
every other Type goes in `link_xml.assembly`. A Type that already holds a dot is taken as fully
qualified; other Types get the namespace `link_xml.namespace`, by default the assembly name.
"""

from __future__ import annotations

from typing import NamedTuple
from xml.sax.saxutils import quoteattr

from orchestrator import Plan, StageSpec, Unit, record

SPEC = StageSpec(
    name="link_xml",
    version=2,
    inputs=("source", "asset_bundles", "cooked_types"),
    outputs=("link_xml",),
    config_keys=("link_xml",),
    description="link.xml for Unity's code stripping",
)

DEFAULT_ASSEMBLY = "Messiah.Runtime"  # the build file's default; kept for contexts without one


@record
class LinkXmlJob(NamedTuple):
    """The one unit's work: the Types the build packs, and where `render_link_xml` puts them."""

    types: list[str]  # sorted
    assembly: str  # of every Type the source does not place
    namespace: str | None  # of an unqualified Type (None: the assembly's name)
    assemblies: dict[str, str]  # Type → its assembly, as the source says


def qualified_type(asset_type: str, namespace: str) -> str:
    """`Namespace.Type`, or the Type itself when the source already qualified it."""
    return asset_type if "." in asset_type else f"{namespace}.{asset_type}"


def render_link_xml(
    types,
    assembly: str,
    namespace: str | None = None,
    type_assemblies: dict[str, str] | None = None,
) -> bytes:
    """The link.xml bytes (UTF-8, `\\n` line ends) for a collection of asset Types."""
    grouped: dict[str, set[str]] = {}
    for asset_type in types:
        if not asset_type:
            continue
        owner = (type_assemblies or {}).get(asset_type)
        name = asset_type if owner else qualified_type(asset_type, namespace or assembly)
        grouped.setdefault(owner or assembly, set()).add(name)
    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<linker>"]
    for owner in sorted(grouped or {assembly: set()}):
        lines.append(f"  <assembly fullname={quoteattr(owner)}>")
        lines += [
            f'    <type fullname={quoteattr(name)} preserve="all"/>'
            for name in sorted(grouped.get(owner, ()))
        ]
        lines.append("  </assembly>")
    lines += ["</linker>", ""]
    return "\n".join(lines).encode("utf-8")


def plan(ctx, inputs: dict) -> Plan:
    options = ctx.section("link_xml")
    types_of = dict(inputs["cooked_types"].items())
    types = sorted({types_of[a] for a in inputs["asset_bundles"] if a in types_of})
    known = getattr(inputs["source"], "type_assemblies", None) or {}
    assemblies = {t: known[t] for t in types if t in known}
    job = LinkXmlJob(
        types,
        options.get("assembly") or DEFAULT_ASSEMBLY,
        options.get("namespace"),
        assemblies,
    )
    return Plan(
        units=[
            Unit(
                id="link.xml",
                payload=job,
                key={"types": types, "assemblies": sorted(assemblies.items())},
            )
        ]
    )


def run(job: LinkXmlJob, shared, reader) -> bytes:
    return render_link_xml(job.types, job.assembly, job.namespace, job.assemblies)


def finish(ctx, inputs: dict, results) -> dict:
    """`link_xml`: the file's bytes (published by `manifest`, before the manifest itself)."""
    return {"link_xml": results["link.xml"]}
