"""Cookers: copy, xml canonicalization (early cutoff), external commands and their failures."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from orchestrator import codec
from orchestrator.errors import ConfigError, StepFailed
from orchestrator.files.reads import Reader
from orchestrator.testing import StoredResults
from stages import cook
from stages.cooking.cookers import (
    CookerSpec,
    canonical_xml,
    cook_files,
    cooker_for,
    pack_files,
    unpack_files,
)
from stages.sources.base import RESOURCE, Asset

PY = sys.executable


def test_copy_keeps_a_single_file_as_it_is():
    assert (
        cook_files("g", {"resource.data": b"\x00\x01raw"}, CookerSpec("copy"), "pc")
        == b"\x00\x01raw"
    )


def test_container_is_deterministic_and_round_trips():
    """Several files: the container is in sorted name order whatever the dict order."""
    files = {"texture.xml": b"<T/>", "source.tga": b"TGA", "texture.data": b"\x00" * 5}
    packed = pack_files(files)
    assert packed == pack_files(dict(reversed(list(files.items()))))
    assert unpack_files(packed) == files
    assert list(unpack_files(packed)) == sorted(files)


def test_xml_cosmetic_edits_do_not_change_the_payload():
    """Attribute order, indentation, comments, declaration and BOM leave the payload as it was."""
    before = (
        b'<?xml version="1.0" encoding="utf-8"?>\n<Resource Type="Model" Name="hero">\n'
        b"  <NumFaces>6000</NumFaces>\n</Resource>\n"
    )
    after = (
        b'\xef\xbb\xbf<Resource   Name="hero"\n Type="Model"><!-- tidy -->'
        b"<NumFaces> 6000 </NumFaces></Resource>"
    )
    spec = CookerSpec("xml")
    files = {"resource.data": b"DATA"}
    assert cook_files("g", {**files, "resource.xml": before}, spec, "pc") == cook_files(
        "g", {**files, "resource.xml": after}, spec, "pc"
    )


def test_xml_real_edits_change_the_payload():
    a = canonical_xml(b"<R><NumFaces>6000</NumFaces></R>")
    assert a == b"<R><NumFaces>6000</NumFaces></R>"
    assert canonical_xml(b"<R><NumFaces>6001</NumFaces></R>") != a
    assert canonical_xml(b'<R a="1"/>') != canonical_xml(b'<R a="2"/>')


def test_xml_cooker_leaves_binary_and_broken_files_alone():
    """Non-XML names are copied; an unparseable attribute file is kept byte for byte."""
    broken = b"<Resource><unclosed></Resource>"
    payload = cook_files(
        "g", {"resource.xml": broken, "texture.data": b"  <x/>  "}, CookerSpec("xml"), "pc"
    )
    assert unpack_files(payload) == {"resource.xml": broken, "texture.data": b"  <x/>  "}


def test_cooker_choice_and_key():
    """Types default to xml; the external cooker's version enters the key, its timeout not."""
    assert cooker_for("Texture", {}).kind == "xml"
    assert cooker_for("Texture", {"Texture": "copy"}).kind == "copy"
    v1 = cooker_for("Texture", {"Texture": {"command": "tool {input} {output}", "version": "1"}})
    v2 = cooker_for("Texture", {"Texture": {"command": "tool {input} {output}", "version": "2"}})
    slow = cooker_for(
        "Texture", {"Texture": {"command": "tool {input} {output}", "version": "1", "timeout": 999}}
    )
    assert v1.key("pc") != v2.key("pc")
    assert v1.key("pc") == slow.key("pc")
    assert v1.key("pc") != v1.key("android")
    assert CookerSpec("xml").key("pc") == CookerSpec("xml").key("android")


@pytest.mark.parametrize(
    "cookers", [{"T": "zip"}, {"T": {"command": "tool {inptu}"}}, {"T": {"command": "   "}}]
)
def test_bad_cooker_declarations_are_config_errors(cookers):
    with pytest.raises(ConfigError, match="cook.cookers.T"):
        cooker_for("T", cookers)


def _external(script: str, timeout: float = 30.0) -> CookerSpec:
    return CookerSpec(
        "external", f"{PY} -c {_quote(script)} {{input}} {{output}} {{platform}}", "1", timeout
    )


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_external_cooker_gets_input_output_and_platform(tmp_path):
    """The tool reads {input}, writes {output}; its output is the payload."""
    script = (
        "import sys; data = open(sys.argv[1], 'rb').read(); "
        "open(sys.argv[2], 'wb').write(sys.argv[3].encode() + b':' + data.upper())"
    )
    assert (
        cook_files("g", {"texture.data": b"pixels"}, _external(script), "android")
        == b"android:PIXELS"
    )


def test_external_cooker_failure_names_the_asset_and_shows_stderr():
    script = "import sys; sys.stderr.write('bad texture format ASTC_13x13'); sys.exit(3)"
    with pytest.raises(StepFailed) as err:
        cook_files("9dc97d9a-guid", {"texture.data": b"x"}, _external(script), "pc")
    message = str(err.value)
    assert "9dc97d9a-guid" in message and "exit 3" in message and "ASTC_13x13" in message
    assert err.value.exit_code == 4


def test_external_cooker_timeout_is_a_step_failure():
    with pytest.raises(StepFailed, match="timed out"):
        cook_files("slow-guid", {"a": b"x"}, _external("import time; time.sleep(30)", 0.5), "pc")


def test_external_cooker_without_output_fails():
    with pytest.raises(StepFailed, match="no output"):
        cook_files("g", {"a": b"x"}, _external("pass"), "pc")


def test_missing_tool_is_a_step_failure():
    spec = CookerSpec("external", "/no/such/tool-xyz {input} {output}", "1")
    with pytest.raises(StepFailed, match="could not start"):
        cook_files("g", {"a": b"x"}, spec, "pc")


def test_cook_stage_reads_through_the_reader(tmp_path):
    """The cook unit reads the asset's files via the reader (traced) and names them relative
    to the asset folder; the payload is a part of the unit's result, and `finish` reports the
    part's digest (that of the CookedAsset alone) without loading payloads."""
    folder = "Repo/Env/guid-1"
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "resource.xml").write_bytes(b'<R b="2" a="1" />')
    (tmp_path / folder / "resource.data").write_bytes(b"DATA")
    asset = Asset(
        "guid-1",
        RESOURCE,
        "Mesh",
        ("Env/Wall",),
        (folder,),
        (f"{folder}/resource.data", f"{folder}/resource.xml"),
        (),
        "Env",
        "Wall",
    )
    ctx = SimpleNamespace(section=lambda name: "pc" if name == "platform" else {"cookers": {}})
    inputs = {
        "assets": {"guid-1": asset},
        "source": SimpleNamespace(),
        "cooklist": SimpleNamespace(cooked=["guid-1"]),
    }
    plan = cook.plan(ctx, inputs)
    (unit,) = plan.units
    assert unit.files == asset.files
    reader = Reader(str(tmp_path))
    result = cook.run(unit.payload, plan.shared, reader)
    assert set(reader.reads) == set(asset.files)
    cooked = result.values["guid-1"]
    assert unpack_files(cooked.data) == {
        "resource.data": b"DATA",
        "resource.xml": b'<R a="1" b="2"></R>',
    }
    assert cooked.size == len(cooked.data)
    stored: dict = {}
    outputs = cook.finish(ctx, inputs, StoredResults(plan, {unit.id: result}, stored))
    assert outputs == {
        "cooked": {"guid-1": codec.digest(cooked)},
        "cooked_types": {"guid-1": "Mesh"},
    }
    assert stored[outputs["cooked"]["guid-1"]] == cooked
