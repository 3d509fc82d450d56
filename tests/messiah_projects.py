"""Small hand-made Messiah projects for tests: repositories, resource folders, worlds, levels."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape


def guid(n: int) -> str:
    """A valid, readable GUID numbered `n`."""
    return f"{n:08x}-0000-4000-8000-{n:012x}"


@dataclass
class Item:
    guid: str
    name: str
    package: str
    type: str = "Material"
    deps: tuple[str, ...] = ()
    annos: tuple[tuple[str, str], ...] = ()
    folder: bool = True  # write a resource folder for it
    attribute: str = "resource.xml"
    attribute_body: str = ""
    extra_files: dict[str, bytes] = field(default_factory=dict)


def repository_xml(items: list[Item], bom: bool = False) -> bytes:
    parts = ['<?xml version="1.0" encoding="utf-8"?>\n<Repository>\n  <Items>\n']
    for item in items:
        deps = "".join(f"<Deps>{d}</Deps>" for d in item.deps)
        annos = "".join(
            f"<Anno><Key>{escape(k)}</Key><Value>{escape(v)}</Value></Anno>" for k, v in item.annos
        )
        parts.append(
            f"    <Item><Type>{item.type}</Type><Flags>0</Flags><GUID>{item.guid}</GUID>"
            f"<Package>{escape(item.package)}</Package>{deps}<Name>{escape(item.name)}</Name>"
            f"<Annotation><SourcePath />{annos}</Annotation></Item>\n"
        )
    parts.append("  </Items>\n</Repository>\n")
    data = "".join(parts).encode("utf-8")
    return b"\xef\xbb\xbf" + data if bom else data


def write(root: Path, relpath: str, data: bytes | str) -> Path:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def write_repository(root: Path, repo: str, items: list[Item], bom: bool = False) -> None:
    """A repository folder: its resource.repository and a folder per item (Package/GUID/)."""
    write(root, f"{repo}/resource.repository", repository_xml(items, bom))
    for item in items:
        if not item.folder:
            continue
        folder = f"{repo}/{item.package}/{item.guid}"
        body = f"<Resource>{item.attribute_body}</Resource>\n"
        write(root, f"{folder}/{item.attribute}", body)
        write(root, f"{folder}/resource.data", b"payload " + item.guid.encode())
        for name, data in item.extra_files.items():
            write(root, f"{folder}/{name}", data)


def write_world(root: Path, path: str, levels: list[str]) -> None:
    body = "".join(f"<Level><Path>{escape(level)}</Path></Level>" for level in levels)
    write(
        root,
        path,
        f'<?xml version="1.0" encoding="utf-8"?>\n<World><Levels>{body}</Levels></World>\n',
    )


def write_level(root: Path, path: str, guids: list[str]) -> None:
    body = "".join(
        f"<Entity><Name>e{n}</Name><Resource>{g}</Resource></Entity>" for n, g in enumerate(guids)
    )
    write(
        root,
        path,
        f'<?xml version="1.0" encoding="utf-8"?>\n<Level><Entities>{body}</Entities></Level>\n',
    )
