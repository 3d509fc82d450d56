"""Writing a planned project to disk: repositories, resource folders, worlds and levels."""

from __future__ import annotations

import os
import struct
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from random import Random

from .catalog import DLC, MAX_PAYLOAD_BYTES, PAYLOAD_POOL_BYTES, REPOSITORIES, XML_HEAD
from .model import Level, ProjectPlan, Resource


def _item_xml(r: Resource) -> str:
    deps = "".join(f"      <Deps>{d}</Deps>\n" for d in r.deps)
    annos = "".join(
        f"        <Anno>\n          <Key>{k}</Key>\n          <Value>{v}</Value>\n        </Anno>\n"
        for k, v in r.annos
    )
    source = f"<SourcePath>{r.source_path}</SourcePath>" if r.source_path else "<SourcePath />"
    return (
        f"    <Item>\n      <Type>{r.type}</Type>\n      <Flags>0</Flags>\n"
        f"      <GUID>{r.guid}</GUID>\n      <Package>{r.package}</Package>\n"
        f"      <Class>{r.type}</Class>\n{deps}      <Name>{r.name}</Name>\n"
        f"      <Annotation>\n        {source}\n        <CreationTime>{r.created}</CreationTime>\n"
        f"{annos}      </Annotation>\n    </Item>\n"
    )


def _repository_xml(items: list[Resource]) -> str:
    return (
        XML_HEAD
        + "<Repository>\n  <Items>\n"
        + "".join(map(_item_xml, items))
        + "  </Items>\n</Repository>\n"
    )


def _texture_xml(r: Resource) -> str:
    a = r.attrs
    mips = "" if a["MipLevels"] is None else f"  <MipLevels>{a['MipLevels']}</MipLevels>\n"
    return (
        f"{XML_HEAD}<Texture>\n  <Width>{a['Width']}</Width>\n  <Height>{a['Height']}</Height>\n"
        f"  <Format>{a['Format']}</Format>\n  <Compressed>{a['Compressed']}</Compressed>\n"
        f"{mips}</Texture>\n"
    )


def _resource_xml(r: Resource, body: str) -> str:
    return f'{XML_HEAD}<Resource Type="{r.type}" Name="{r.name}">\n{body}</Resource>\n'


def _material_body(r: Resource) -> str:
    a = r.attrs
    return (
        f"  <MaterialInfo>\n    <Shader>{a['Shader']}</Shader>\n    <Params>\n"
        f'      <Param Name="Roughness">{a["Roughness"]}</Param>\n'
        f'      <Param Name="Metallic">{a["Metallic"]}</Param>\n    </Params>\n'
        f"  </MaterialInfo>\n"
    )


def _mesh_body(r: Resource) -> str:
    return (
        f"  <MeshInfo>\n    <NumVertices>{r.attrs['NumVertices']}</NumVertices>\n"
        f"    <NumFaces>{r.attrs['NumFaces']}</NumFaces>\n  </MeshInfo>\n"
    )


def _model_body(r: Resource) -> str:
    entities = "".join(
        f"      <Entity>\n        <NumFaces>{faces}</NumFaces>\n"
        + (f"        <Material>{material}</Material>\n" if material else "")
        + "      </Entity>\n"
        for faces, material in r.attrs["entities"]
    )
    return f"  <ModelInfo>\n    <Root>\n{entities}    </Root>\n  </ModelInfo>\n"


def _effect_body(r: Resource) -> str:
    emitters = "".join(f"    <Emitter><Name>{e}</Name></Emitter>\n" for e in r.attrs["emitters"])
    return f"  <Emitters>\n{emitters}  </Emitters>\n"


def _sound_body(r: Resource) -> str:
    a = r.attrs
    return (
        f"  <SoundInfo>\n    <Duration>{a['Duration']}</Duration>\n"
        f"    <Channels>{a['Channels']}</Channels>\n"
        f"    <SampleRate>{a['SampleRate']}</SampleRate>\n"
        f"  </SoundInfo>\n"
    )


def _animation_body(r: Resource) -> str:
    skeleton = r.attrs["Skeleton"]
    return (
        f"  <AnimationInfo>\n    <Frames>{r.attrs['Frames']}</Frames>\n"
        + (f"    <Skeleton>{skeleton}</Skeleton>\n" if skeleton else "")
        + "  </AnimationInfo>\n"
    )


def _skeleton_body(r: Resource) -> str:
    return f"  <SkeletonInfo>\n    <NumBones>{r.attrs['NumBones']}</NumBones>\n  </SkeletonInfo>\n"


_BODIES = {
    "Material": _material_body,
    "Mesh": _mesh_body,
    "Model": _model_body,
    "Effect": _effect_body,
    "Sound": _sound_body,
    "Animation": _animation_body,
    "Skeleton": _skeleton_body,
}


def _attribute_file(r: Resource) -> tuple[str, str]:
    """(file name, XML text) of a resource's attribute file."""
    if r.type == "Texture":
        return "texture.xml", _texture_xml(r)
    body = _BODIES.get(r.type, _sound_body)(r)  # the retired SoundBank_Legacy keeps its body
    # Skeletons come from an old exporter that writes `resource` without an extension.
    return ("resource" if r.type == "Skeleton" else "resource.xml"), _resource_xml(r, body)


def _tga_rle(width: int, height: int, pixel: bytes) -> bytes:
    """A valid run-length-encoded 32-bit TGA of one colour (tiny, whatever its size)."""
    header = struct.pack("<BBBHHBHHHHBB", 0, 0, 10, 0, 0, 0, 0, 0, width, height, 32, 0x28)
    run = min(128, width)  # runs never cross a scanline
    return header + (bytes([0x80 | (run - 1)]) + pixel) * (width * height // run)


def _wav_header(r: Resource) -> bytes:
    channels, rate = r.attrs["Channels"], r.attrs["SampleRate"]
    data = int(r.attrs["Duration"] * rate) * channels * 2
    return (
        b"RIFF"
        + struct.pack("<I", 36 + data)
        + b"WAVEfmt "
        + struct.pack("<IHHIIHH", 16, 1, channels, rate, rate * channels * 2, channels * 2, 16)
        + b"data"
        + struct.pack("<I", data)
    )


def _world_xml(levels: list[str], backslashes: bool) -> str:
    paths = [p.replace("/", "\\") if backslashes else p for p in levels]
    rows = "".join(f"    <Level><Path>{p}</Path></Level>\n" for p in paths)
    return f"{XML_HEAD}<World>\n  <Levels>\n{rows}  </Levels>\n</World>\n"


def _level_xml(level: Level) -> str:
    rows = "".join(
        f"    <Entity><Name>{name}</Name><Resource>{guid}</Resource>"
        f"<Position>{x} {y} {z}</Position></Entity>\n"
        for name, guid, (x, y, z) in level.entities
    )
    return f"{XML_HEAD}<Level>\n  <Entities>\n{rows}  </Entities>\n</Level>\n"


def build_yaml(worlds: dict[str, list[str]]) -> str:
    maps = "".join(f"    - {w}\n" for w in worlds)
    return f"""\
# Generated by `orchestrate generate`: cooks every world plus the UI, validates with the starter
# rule library (rules.yaml), packs maps, UI and characters into bundles.
project: project
source: messiah
platform: generic

cook:
  maps:
{maps}  always_cook: [UI/]
  never_cook: [Dev/]
  follow_soft_references: true
  fail_on_missing: false

rules:
  files: [rules.yaml]
  fail_on: error
  allow_custom_code: true

bundles:
  layout:
    - name: "maps/{{stem}}"
      maps: all
    - name: ui
      include: ["UI/**"]
    - name: "chars/{{package}}"
      include: ["Characters/**"]
  shared_dependencies: extract

archive:
  compression: zstd
  level: 3

hash:
  append_hash: true

link_xml:
  assembly: Messiah.Runtime

output: build/out
cache: build/cache

executor:
  kind: auto
"""


# -- writing ------------------------------------------------------------------------------------
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)
WRITE_THREADS = 4
WRITE_CHUNK = 2000


def _put(path: str, data: bytes | memoryview) -> None:
    fd = os.open(path, _OPEN_FLAGS, 0o644)
    try:
        written = os.write(fd, data)
        while written < len(data):  # a short write (rare on regular files): finish it
            written += os.write(fd, data[written:])
    finally:
        os.close(fd)


class ProjectWriter:
    """Writes a plan to disk with as little Python per file as possible (no fsync)."""

    def __init__(self, project: Path, plan: ProjectPlan) -> None:
        self.project = str(project)
        self.plan = plan
        self.files = 0
        self.bytes = 0
        # One buffer of random bytes; payloads are views into it (cheap and deterministic).
        pool_size = PAYLOAD_POOL_BYTES + MAX_PAYLOAD_BYTES
        self.pool = memoryview(Random(plan.pool_seed).randbytes(pool_size))

    def write(self) -> None:
        os.makedirs(self.project, exist_ok=True)
        self.write_repositories()
        self.write_resource_folders()
        self.write_maps()

    def put(self, path: str, data: bytes | memoryview) -> None:
        _put(path, data)
        self.files += 1
        self.bytes += len(data)

    def write_repositories(self) -> None:
        for repo in REPOSITORIES:
            items = [r for r in self.plan.resources if r.repo == repo]
            os.makedirs(f"{self.project}/{repo}", exist_ok=True)
            text = _repository_xml(items).encode("utf-8")
            if repo == DLC:
                text = b"\xef\xbb\xbf" + text  # this one was saved by a Windows tool, with a BOM
            self.put(f"{self.project}/{repo}/resource.repository", text)

    def write_resource_folders(self) -> None:
        # Creating files is nearly all kernel time, and os calls release the GIL: a few threads
        # keep every core busy. Each thread returns its own counts; the bytes are the same.
        with_folders = [r for r in self.plan.resources if r.has_folder]
        for package_dir in dict.fromkeys(
            f"{self.project}/{r.repo}/{r.package}" for r in with_folders
        ):
            os.makedirs(package_dir, exist_ok=True)
        chunks = [
            with_folders[i : i + WRITE_CHUNK] for i in range(0, len(with_folders), WRITE_CHUNK)
        ]
        with ThreadPoolExecutor(WRITE_THREADS) as pool:
            for files, size in pool.map(self.write_chunk, chunks):
                self.files += files
                self.bytes += size

    def write_chunk(self, chunk: list[Resource]) -> tuple[int, int]:
        files = size = 0
        for r in chunk:
            folder = f"{self.project}/{r.repo}/{r.package}/{r.guid}"
            os.mkdir(folder)
            for name, data in self.resource_files(r):
                _put(f"{folder}/{name}", data)
                files += 1
                size += len(data)
        return files, size

    def resource_files(self, r: Resource) -> list[tuple[str, bytes | memoryview]]:
        name, text = _attribute_file(r)
        offset, size = r.payload
        files = [
            (name, text.encode("utf-8")),
            (
                "texture.data" if r.type == "Texture" else "resource.data",
                self.pool[offset : offset + size],
            ),
        ]
        source = r.attrs.get("source") if r.type == "Texture" else None
        if source:
            files.append(("source.tga", _tga_rle(*source)))
        if r.type == "Sound":
            files.append(("sound.hdr", _wav_header(r)))
        return files  # type: ignore[return-value]

    def write_maps(self) -> None:
        for path, level in self.plan.levels.items():
            os.makedirs(os.path.dirname(f"{self.project}/{path}"), exist_ok=True)
            self.put(f"{self.project}/{path}", _level_xml(level).encode("utf-8"))
        os.makedirs(f"{self.project}/Worlds", exist_ok=True)
        for path, levels in self.plan.worlds.items():
            text = _world_xml(levels, path in self.plan.backslash_worlds)
            self.put(f"{self.project}/{path}", text.encode("utf-8"))
