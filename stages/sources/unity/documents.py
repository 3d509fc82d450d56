"""Reading Unity's text serialization: a fast reference scanner, a `.meta` reader, and a PyYAML loader.

Unity writes "Force Text" assets as multi-document YAML (`--- !u!<classID> &<fileID>`, sometimes
followed by ` stripped`) where every cross-asset reference is a flow mapping
`{fileID: N, guid: <32 hex>, type: T}` that may wrap onto the next line. The scanner finds those
mappings with `bytes.find` and bounded look-arounds, never running a regex over a whole line: font
atlases put megabytes on one line. PyYAML (`load_documents`) is kept for small structured files
(EditorBuildSettings) and as the reference the scanner is tested and benchmarked against; it reads
through orchestrator/yamlfile.py, under the budget on what aliases expand to.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import yaml

from orchestrator import load_all, record

YAMLError = yaml.YAMLError  # what `load_documents` raises on malformed input or an alias bomb
YAML_MAGIC = b"%YAML"
_HEX = frozenset(b"0123456789abcdefABCDEF")
_GUID_KEY = b"guid:"
# How far a reference mapping's braces may sit from its `guid:` key (fileID and type are short).
_MAPPING_REACH = 512
# A `.meta`'s importer section: a top-level key naming the importer (`DefaultImporter:`).
_IMPORTER_KEY = re.compile(rb"([A-Za-z][A-Za-z0-9]*Importer):")
_DOC_HEADER = re.compile(rb"^--- !u!(-?\d+) &(-?\d+)( stripped)?[ \t]*\r?$", re.MULTILINE)


@record
class RawRef(NamedTuple):
    """One `{fileID, guid, type}` mapping as written in the file."""

    guid: str  # lower-case hex
    file_id: int
    type: int  # 0 built-in, 2 native asset, 3 imported asset; -1 when not written
    label: str  # the key holding the mapping, or the key of the list it is an item of
    line: int  # 1-based line of the mapping's `{`


@record
class MetaInfo(NamedTuple):
    """What a `.meta` file says about its asset."""

    guid: str
    bundle_name: str
    bundle_variant: str
    is_folder: bool
    importer: str = ""  # the importer section at the top level (`TextureImporter`, …); "" if none


@record
class DocumentHeader(NamedTuple):
    """One `--- !u!<class> &<fileID>` document header."""

    class_id: int
    file_id: int
    stripped: bool
    line: int


def is_text_serialized(data: bytes) -> bool:
    """Whether the bytes are Unity text serialization (Force Text), not a binary asset."""
    return data.lstrip(b"\xef\xbb\xbf")[:5] == YAML_MAGIC


def document_headers(data: bytes) -> list[DocumentHeader]:
    """Every document header, in file order (the pattern is anchored to line starts: no backtracking)."""
    headers = []
    line, last = 1, 0
    for match in _DOC_HEADER.finditer(data):
        line += data.count(b"\n", last, match.start())
        last = match.start()
        headers.append(
            DocumentHeader(int(match.group(1)), int(match.group(2)), bool(match.group(3)), line)
        )
    return headers


def first_class_id(data: bytes) -> int | None:
    """The class ID of the first document (the main object of most native assets)."""
    match = _DOC_HEADER.search(data)
    return int(match.group(1)) if match else None


def scan_references(data: bytes) -> list[RawRef]:
    """Every `{fileID, guid, type}` mapping in file order, with the key that holds it."""
    refs: list[RawRef] = []
    list_labels: dict[int, str] = {}  # line start of a `- {…}` item → its list's key (memo)
    line, counted_to = 1, 0
    pos = data.find(_GUID_KEY)
    while pos >= 0:
        ref = _reference_at(data, pos)
        if ref is not None:
            brace, guid, file_id, ref_type = ref
            line += data.count(b"\n", counted_to, brace)
            counted_to = brace
            label = _label_for(data, brace, list_labels)
            refs.append(RawRef(guid, file_id, ref_type, label, line))
        pos = data.find(_GUID_KEY, pos + len(_GUID_KEY))
    return refs


def _reference_at(data: bytes, key: int) -> tuple[int, str, int, int] | None:
    """(offset of `{`, guid, fileID, type) of the flow mapping whose `guid:` key is at `key`."""
    if key > 0 and data[key - 1] not in b" \t\n\r{,":
        return None  # `someguid:` or similar: not the key we want
    value = key + len(_GUID_KEY)
    while value < len(data) and data[value] in b" \t\r\n":
        value += 1
    guid = data[value : value + 32]
    if len(guid) != 32 or any(c not in _HEX for c in guid):
        return None
    if value + 32 < len(data) and data[value + 32] in _HEX:
        return None
    brace = data.rfind(b"{", max(0, key - _MAPPING_REACH), key)
    if brace < 0 or data.find(b"}", brace, key) >= 0:
        return None  # not inside a flow mapping (e.g. a string that mentions "guid:")
    close = data.find(b"}", value + 32, value + 32 + _MAPPING_REACH)
    if close < 0:
        return None
    fields = _flow_fields(data[brace + 1 : close])
    return (
        brace,
        guid.decode("ascii").lower(),
        _int(fields.get("fileID"), 0),
        _int(fields.get("type"), -1),
    )


# JSON-serialized assets (Shader Graph): a `"guid"` key and its 32 hex digits, plain
# (`"guid": "bbc7…"`) or inside an escaped JSON string (`\"guid\":\"bbc7…\"`, at any depth of
# escaping: the quotes carry the same backslashes). A match starts only after a non-backslash
# and has no nested repetition, so it runs in linear time on any line.
_JSON_GUID = re.compile(rb'(?<!\\)(\\*)"guid\1"[ \t\r\n]*:[ \t\r\n]*\1"([0-9a-fA-F]{32})\1"')
_JSON_NUMBER = re.compile(rb'(?<!\\)\\*"(fileID|type)\\*"[ \t\r\n]*:[ \t\r\n]*(-?[0-9]+)')
_JSON_KEY = re.compile(rb'(?<!\\)\\*"([A-Za-z_][A-Za-z0-9_]*)\\*"[ \t\r\n]*:')
_JSON_FIELDS = frozenset({"fileID", "guid", "type", "instanceID"})


def scan_json_references(data: bytes) -> list[RawRef]:
    """Every `"guid"` reference of a JSON-serialized asset in file order, with the `fileID` and
    `type` of its object and the key that holds the object (`texture`, `subGraph`)."""
    refs: list[RawRef] = []
    line, counted_to = 1, 0
    for match in _JSON_GUID.finditer(data):
        start = match.start()
        line += data.count(b"\n", counted_to, start)
        counted_to = start
        brace = data.rfind(b"{", max(0, start - _MAPPING_REACH), start)
        if brace >= 0 and data.find(b"}", brace, start) >= 0:
            brace = -1  # that `{` opens an object that closed before the key: not its own
        close = data.find(b"}", match.end(), match.end() + _MAPPING_REACH)
        body = data[brace + 1 if brace >= 0 else start : close if close >= 0 else match.end()]
        numbers = {m.group(1).decode("ascii"): int(m.group(2)) for m in _JSON_NUMBER.finditer(body)}
        refs.append(
            RawRef(
                match.group(2).decode("ascii").lower(),
                numbers.get("fileID", 0),
                numbers.get("type", -1),
                _json_label(data, brace, start),
                line,
            )
        )
    return refs


def _json_label(data: bytes, brace: int, guid_at: int) -> str:
    """The key the reference's object is the value of: the last key before its `{` that is not
    one of a reference's own fields; "guid" when there is none."""
    window = data[max(0, brace - _MAPPING_REACH) : brace] if brace >= 0 else b""
    keys = [m.group(1).decode("ascii") for m in _JSON_KEY.finditer(window)]
    return next((k for k in reversed(keys) if k not in _JSON_FIELDS), "guid")


def _flow_fields(body: bytes) -> dict[str, str]:
    """`fileID: 1, guid: x,\\n    type: 3` → {"fileID": "1", "guid": "x", "type": "3"}."""
    fields = {}
    for part in body.split(b","):
        key, sep, value = part.partition(b":")
        if sep:
            fields[key.strip().decode("ascii", "replace")] = value.strip().decode(
                "ascii", "replace"
            )
    return fields


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _label_for(data: bytes, brace: int, list_labels: dict[int, str]) -> str:
    """The key a mapping is the value of: `key: {…}` on its line, or the list key above `- {…}`."""
    start = data.rfind(b"\n", 0, brace) + 1
    head = data[start:brace]
    stripped = head.strip()
    if stripped.startswith(b"- "):
        stripped = stripped[2:].strip()
    if stripped in (b"", b"-"):
        label = _list_key_above(data, start, len(head) - len(head.lstrip()), list_labels)
        list_labels[start] = label
        return label
    # `key: {…}`, or a flow sequence `key: [{…}, {…}]`: the key is what precedes the first colon.
    return stripped.partition(b":")[0].strip().decode("utf-8", "replace")


def _list_key_above(data: bytes, item_start: int, indent: int, list_labels: dict[int, str]) -> str:
    """Walk up from a list item to the `key:` line that opens its list (Unity indents lists at the key)."""
    end = item_start - 1
    while end > 0:
        start = data.rfind(b"\n", 0, end) + 1
        if start in list_labels:
            return list_labels[start]  # a sibling item already resolved
        line = data[start:end]
        text = line.lstrip()
        line_indent = len(line) - len(text)
        if text and (line_indent < indent or (line_indent == indent and not text.startswith(b"-"))):
            key = text[2:] if text.startswith(b"- ") else text
            return key.split(b":", 1)[0].strip().decode("utf-8", "replace")
        end = start - 1
    return ""


def read_meta(data: bytes) -> MetaInfo | None:
    """Parse a `.meta` file (guid, assetBundleName/Variant, folderAsset, its importer); None if
    it has no guid."""
    guid = name = variant = importer = ""
    folder = False
    for raw in data.splitlines():
        text = raw.strip()
        key = None if importer else _IMPORTER_KEY.match(raw)  # at the top level: not indented
        if key is not None:
            importer = key.group(1).decode("ascii")
        elif text.startswith(b"guid:") and not guid:
            guid = text[5:].strip().decode("ascii", "replace").lower()
        elif text.startswith(b"assetBundleName:"):
            name = text[16:].strip().decode("utf-8", "replace")
        elif text.startswith(b"assetBundleVariant:"):
            variant = text[19:].strip().decode("utf-8", "replace")
        elif text.startswith(b"folderAsset:"):
            folder = text[12:].strip() == b"yes"
    if len(guid) != 32 or any(c not in "0123456789abcdef" for c in guid):
        return None
    return MetaInfo(guid, name, variant, folder, importer)


# -- PyYAML ----------------------------------------------------------------------------------
class UnityLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader (libyaml when available) that accepts Unity's `!u!` tags as plain mappings.

    Scalars stay strings: YAML 1.1's implicit int/float typing would turn an all-digit GUID into
    an integer (`00000000000000000000000000000384` → 900, via octal) and lose it.
    """

    yaml_implicit_resolvers = {
        first: [
            (tag, pattern)
            for tag, pattern in resolvers
            if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
        ]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def _construct_tagged(loader, _suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


class PureUnityLoader(yaml.SafeLoader):
    """The same loader in pure Python (for the benchmark; libyaml is what collect would use)."""

    yaml_implicit_resolvers = UnityLoader.yaml_implicit_resolvers


for _loader in (UnityLoader, PureUnityLoader):
    _loader.add_multi_constructor("tag:unity3d.com,2011:", _construct_tagged)
# Unity declares `%TAG !u!` once but uses it in every document; YAML scopes directives to the first
# document, so each header is rewritten with the verbatim tag (and without Unity's ` stripped`).
HEADER_FOR_YAML = re.compile(rb"^--- !u!(-?\d+) &(-?\d+)(?: stripped)?", re.MULTILINE)


class Document(NamedTuple):
    """One YAML document of a Unity file, parsed."""

    header: DocumentHeader | None  # None: a header-less leading document (plain YAML)
    body: Any


def load_documents(data: bytes, pure_python: bool = False) -> list[Document]:
    """Every document, parsed by PyYAML (on libyaml unless `pure_python`), with its header."""
    headers = document_headers(data)
    text = HEADER_FOR_YAML.sub(rb"--- !<tag:unity3d.com,2011:\1> &\2", data)
    docs = load_all(text, PureUnityLoader if pure_python else UnityLoader)
    # A header-less leading document (plain YAML) gets None; Unity files have one header per doc.
    padding: list[DocumentHeader | None] = [None] * (len(docs) - len(headers))
    return list(map(Document, padding + list(headers), docs))


def references_in_documents(docs: list[Document]) -> list[tuple[str, int, int, str]]:
    """(guid, fileID, type, label) of every reference mapping in parsed documents, in document order."""
    found: list[tuple[str, int, int, str]] = []

    def walk(value: Any, label: str) -> None:
        if isinstance(value, dict):
            guid = value.get("guid")
            if isinstance(guid, str) and len(guid) == 32 and "fileID" in value:
                found.append(
                    (
                        guid.lower(),
                        _int(str(value["fileID"]), 0),
                        _int(str(value.get("type", -1)), -1),
                        label,
                    )
                )
                return
            for key, item in value.items():
                walk(item, str(key))
        elif isinstance(value, list):
            for item in value:
                walk(item, label)

    for doc in docs:
        walk(doc.body, "")
    return found
