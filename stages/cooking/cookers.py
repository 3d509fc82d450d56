"""Cookers turn an asset's files into its cooked payload: built-in `copy` and `xml`, or a command.

A cooker is chosen by asset Type (`cook.cookers`); a Type not listed uses the source's default
(`SourceResult.default_cooker`: Unity ships bytes as they are, `copy`), else `xml`, which
canonicalizes the attribute files and the world/level files and copies everything else, so a
cosmetic edit (indentation, attribute order, comments) leaves the payload unchanged and the
rebuild stops at the cook. Payloads never hold time stamps or absolute paths.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from orchestrator import ConfigError, StepFailed, record

DEFAULT_COOKER = "xml"
BUILTIN_VERSIONS = {"copy": 1, "xml": 1}  # bump when a built-in's output changes
XML_SUFFIXES = (".xml", ".iworld", ".ilevel")
XML_NAMES = ("resource",)  # an attribute file may be called plain `resource`
PLACEHOLDERS = ("input", "output", "platform")

CONTAINER_MAGIC = b"ORCHPACK"
_COUNT = struct.Struct("<I")
_FILE = struct.Struct("<HQ")  # name length, data length


@record
@dataclass(frozen=True, slots=True)
class CookerSpec:
    """How one asset Type is cooked; `key()` is what enters the cook unit's cache key."""

    kind: str  # "copy" | "xml" | "external"
    command: str = ""
    version: str = ""
    timeout: float = 300.0
    output_ext: str = ""

    def key(self, platform: str) -> dict:
        if self.kind != "external":
            return {"cooker": self.kind, "version": BUILTIN_VERSIONS[self.kind]}
        # The timeout does not shape the output, so changing it does not re-cook.
        return {
            "cooker": "external",
            "command": self.command,
            "version": self.version,
            "output_ext": self.output_ext,
            "platform": platform,
        }


def cooker_for(asset_type: str, cookers: dict, default: str = "") -> CookerSpec:
    """The cooker the build file assigns to a Type (`cook.cookers`), checked; else `default`
    (the source's own default, e.g. `copy` for Unity), else `xml`."""
    declared = cookers.get(asset_type, default or DEFAULT_COOKER)
    if isinstance(declared, str):
        if declared not in BUILTIN_VERSIONS:
            raise ConfigError(
                f"unknown built-in cooker {declared!r} (copy | xml)",
                key=f"cook.cookers.{asset_type}",
            )
        return CookerSpec(declared)
    command = declared.get("command", "")
    unknown = sorted(set(re.findall(r"\{(\w*)\}", command)) - set(PLACEHOLDERS))
    if not shlex.split(command) or unknown:
        raise ConfigError(
            f"cooker command {command!r} needs a program and only the "
            f"placeholders {{input}} {{output}} {{platform}}"
            + (f" (unknown: {unknown})" if unknown else ""),
            key=f"cook.cookers.{asset_type}.command",
        )
    return CookerSpec(
        "external",
        command,
        str(declared.get("version", "")),
        float(declared.get("timeout", 300.0)),
        declared.get("output_ext", ""),
    )


def cook_files(asset_id: str, files: dict[str, bytes], spec: CookerSpec, platform: str) -> bytes:
    """The payload of one asset from its files (names relative to the asset's folder)."""
    if spec.kind == "copy":
        return pack_files(files)
    if spec.kind == "xml":
        return pack_files(
            {
                name: canonical_xml(data) if is_xml_name(name) else data
                for name, data in files.items()
            }
        )
    return run_external(asset_id, files, spec, platform)


def pack_files(files: dict[str, bytes]) -> bytes:
    """One file: its bytes as they are. Several (or none): a container, in sorted name order.

    Container: b"ORCHPACK", u32 count, then per file u16 name length, u64 data length, the
    UTF-8 name and the data (little-endian).
    """
    if len(files) == 1:
        return next(iter(files.values()))
    out = bytearray(CONTAINER_MAGIC + _COUNT.pack(len(files)))
    for name in sorted(files):
        raw = name.encode("utf-8")
        out += _FILE.pack(len(raw), len(files[name])) + raw + files[name]
    return bytes(out)


def unpack_files(payload: bytes) -> dict[str, bytes]:
    """Inverse of `pack_files` for a container payload."""
    if not payload.startswith(CONTAINER_MAGIC):
        raise ValueError("not a multi-file payload")
    pos = len(CONTAINER_MAGIC)
    (count,) = _COUNT.unpack_from(payload, pos)
    pos += _COUNT.size
    files = {}
    for _ in range(count):
        name_len, size = _FILE.unpack_from(payload, pos)
        pos += _FILE.size
        name = payload[pos : pos + name_len].decode("utf-8")
        pos += name_len
        files[name] = payload[pos : pos + size]
        pos += size
    return files


def is_xml_name(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.lower().endswith(XML_SUFFIXES) or base in XML_NAMES


_PARSER = etree.XMLParser(
    remove_blank_text=True,
    remove_comments=True,
    remove_pis=True,
    resolve_entities=False,
    no_network=True,
    huge_tree=True,
)


def canonical_xml(data: bytes) -> bytes:
    """Canonical XML 2.0 with text trimmed and no comments: attribute order, indentation, the
    XML declaration and a BOM no longer matter. Unparseable bytes are kept as they are (the
    rules report them; the cook is not the place to fail on them)."""
    try:
        root = etree.fromstring(data, _PARSER)
    except etree.XMLSyntaxError:
        return data
    if next(root.iter(etree.Entity), None) is not None:
        return data  # entity references are never expanded, and C14N cannot write them
    return etree.tostring(root, method="c14n2", strip_text=True, with_comments=False)


def run_external(asset_id: str, files: dict[str, bytes], spec: CookerSpec, platform: str) -> bytes:
    """Run the cooker's command in a temporary folder; its output file is the payload.

    `{input}` is the asset's only file, or the folder holding its files; `{output}` is the file
    the tool must write; `{platform}` the build's platform. No shell is involved.
    """
    with tempfile.TemporaryDirectory(prefix="orchestrate-cook-") as tmp:
        input_dir = Path(tmp, "input")
        for name, data in files.items():
            target = input_dir / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        input_dir.mkdir(exist_ok=True)
        only = next(iter(files)) if len(files) == 1 else None
        values = {
            "input": str(input_dir / only) if only else str(input_dir),
            "output": str(Path(tmp, "output" + spec.output_ext)),
            "platform": platform,
        }
        args = [
            re.sub(r"\{(input|output|platform)\}", lambda m: values[m.group(1)], arg)
            for arg in shlex.split(spec.command)
        ]
        returncode, stderr = _run(args, tmp, spec.timeout, asset_id)
        if returncode != 0:
            raise StepFailed(
                f"cooker `{args[0]}` failed on asset {asset_id} (exit {returncode})"
                + _tail(stderr),
                key=asset_id,
            )
        try:
            return Path(values["output"]).read_bytes()
        except FileNotFoundError:
            raise StepFailed(
                f"cooker `{args[0]}` wrote no output for asset {asset_id} "
                f"(expected {{output}})" + _tail(stderr),
                key=asset_id,
            ) from None


def _run(args: list[str], cwd: str, timeout: float, asset_id: str) -> tuple[int, bytes]:
    try:
        # A session of its own, so a timeout kills the tool and anything it started.
        process = subprocess.Popen(
            args,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise StepFailed(
            f"cooker `{args[0]}` could not start for asset {asset_id}: {exc}", key=asset_id
        ) from None
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        _, stderr = process.communicate()
        raise StepFailed(
            f"cooker `{args[0]}` timed out after {timeout:g} s on asset {asset_id}" + _tail(stderr),
            key=asset_id,
        ) from None
    return process.returncode, stderr


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()


def _tail(stderr: bytes | None, limit: int = 2000) -> str:
    text = (stderr or b"").decode("utf-8", "replace").strip()
    if not text:
        return ""
    return ":\n" + (text if len(text) <= limit else "…" + text[-limit:])
