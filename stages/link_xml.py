"""Stage `link_xml`: Unity's `link.xml`, preserving every asset Type the build packs.

`<linker><assembly fullname=A><type fullname=N.T preserve="all"/>…</assembly></linker>`, types
sorted. A Type that already holds a dot is taken as fully qualified: that is how a source names
its own types (a Unity source reports `UnityEngine.Material`); other Types get the namespace
`link_xml.namespace`, by default the assembly name.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from orchestrator.types import Plan, StageSpec, Unit

SPEC = StageSpec(name="link_xml", version=1, inputs=("bundles", "cooked"), outputs=("link_xml",),
                 config_keys=("link_xml",), description="link.xml for Unity's code stripping")


def qualified_type(asset_type: str, namespace: str) -> str:
    """`Namespace.Type`, or the Type itself when the source already qualified it."""
    return asset_type if "." in asset_type else f"{namespace}.{asset_type}"


def render_link_xml(types, assembly: str, namespace: str | None = None) -> bytes:
    """The link.xml bytes (UTF-8, `\\n` line ends) for a collection of asset Types."""
    names = sorted({qualified_type(t, namespace or assembly) for t in types if t})
    lines = ['<?xml version="1.0" encoding="utf-8"?>', "<linker>",
             f"  <assembly fullname={quoteattr(assembly)}>"]
    lines += [f'    <type fullname={quoteattr(name)} preserve="all"/>' for name in names]
    lines += ["  </assembly>", "</linker>", ""]
    return "\n".join(lines).encode("utf-8")


def plan(ctx, inputs: dict) -> Plan:
    options = ctx.section("link_xml")
    cooked = inputs["cooked"]
    packed = {a for bundle in inputs["bundles"].bundles.values() for a in bundle.assets}
    types = sorted({cooked[a]["type"] for a in packed if a in cooked})
    payload = (types, options.get("assembly") or "Messiah.Runtime", options.get("namespace"))
    return Plan(units=[Unit(id="link.xml", payload=payload, key={"types": types})])


def run(payload, shared, reader) -> bytes:
    types, assembly, namespace = payload
    return render_link_xml(types, assembly, namespace)


def finish(ctx, inputs: dict, results) -> dict:
    """`link_xml`: the file's bytes (published by `manifest`, before the manifest itself)."""
    return {"link_xml": results["link.xml"]}
