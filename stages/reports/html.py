"""The build report, `reports/index.html`: one self-contained page (styles, script, pictures and
data inline; no network) made from an output folder's files and the run record.

Registered as the renderer `html` under `orchestrate.reports`: the engine calls `render` at the
end of every run, and `orchestrate report OUT` calls it again on a folder. The template is
Jinja2 (autoescaping; the page's text is the project's names). The data the script draws from
(assets, bundles, failures, chains; the units that ran, what changed) goes in as compact JSON,
gzip-compressed and base64-encoded, and the page inflates it with the browser's own
DecompressionStream: a third of the bytes of plain JSON at 100,000 assets. The headline figures,
the stage table and the pictures are plain HTML and SVG: they show without the script.

What the content part costs (reading every bundle's table of contents, shaping the data) is
spent only when the content changed: it is kept in `reports/report-content.cache` under the
digest of the files it came from, so a no-op rerun re-renders the page from it. The build state
(state.py) is kept in `reports/build-state.json` and, once a later run replaces it,
`reports/build-state.previous.json`: what "changed since the previous build" compares.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO

import jinja2
import orjson
from isal import igzip
from markupsafe import Markup

from orchestrator import (
    PREVIOUS,
    OutputFolder,
    ProjectError,
    ReportFiles,
    atomic_write,
    digest_bytes,
    digest_file,
    read_record,
)
from stages.publishing.manifests import LINK_XML, MANIFEST, bundle_file_changes

from .charts import human_bytes, timeline_svg, treemap_svg
from .diff import PatchDiff, diff_states
from .outputs import (
    CONTENT_FILES,
    COOKLIST_JSON,
    VALIDATE_JSON,
    NotABuildOutput,
    bundle_contents,
    read_manifest,
)
from .pagedata import PageContent, content, tiles_of
from .patching import patch_report
from .state import BuildState, state_of

PAGE = "reports/index.html"
CONTENT_CACHE = "reports/report-content.cache"
TOC_CACHE = "reports/report-tocs.cache"  # each bundle's table of contents, by file signature
STATE = "reports/build-state.json"
PREVIOUS_STATE = "reports/build-state.previous.json"
#: The manifest the kept content part was made of (what the next render compares with).
MANIFEST_SNAPSHOT = "reports/report-manifest.snapshot"
#: Raise when what the page is made of changes for the same files (invalidates the cache).
RENDER_VERSION = 2  # 2: ISA-L gzip
#: Entries of each list of changes the page holds (the counts are always whole).
CHANGES_LIMIT = 2000
TEMPLATES = Path(__file__).parent / "templates"


# -- the content part, kept between runs -------------------------------------------------------------


def file_digests(output_dir: Path) -> dict[str, str | None]:
    """The digest of each file the content part is made of (None: absent)."""
    found: dict[str, str | None] = {}
    folder = OutputFolder(output_dir)
    for relpath in CONTENT_FILES:
        try:
            found[relpath] = digest_file(folder.open(relpath, os.O_RDONLY))  # no link followed
        except (OSError, ProjectError):
            found[relpath] = None
    return found


def content_key(digests: dict[str, str | None]) -> str:
    """Digest of the files the content part is made of (`file_digests`; absent ones count)."""
    lines = [f"report {RENDER_VERSION}"] + [f"{rel} {digests[rel]}" for rel in CONTENT_FILES]
    return digest_bytes("\n".join(lines).encode())


def encode_data(data: dict) -> str:
    """Compact JSON, gzip (no time stamp: same data, same bytes), base64. ISA-L's gzip at
    level 3 (python-isal): at 100,000 assets a tenth of zlib's level 5 time (27 ms against
    270 ms) for a page 6 % larger; the browser inflates any gzip stream the same."""
    packed = igzip.compress(orjson.dumps(data), compresslevel=3, mtime=0)
    return base64.b64encode(packed).decode("ascii")


def decode_data(text: str) -> dict:
    """The inverse of `encode_data` (tests and tools read the page's data with it)."""
    return orjson.loads(igzip.decompress(base64.b64decode(text)))


@dataclass(frozen=True)
class ContentPart:
    """The content part of the page, ready to render: figures, the treemap, the encoded data."""

    figures: dict
    treemap: str
    data: str


def _open_kept(output_dir: Path, relpath: str) -> BinaryIO:
    """A file the report keeps in the output folder, opened without following a link (what a
    link there points to must not find its way into the page): OSError when absent, a
    ProjectError when refused."""
    return os.fdopen(OutputFolder(output_dir).open(relpath, os.O_RDONLY), "rb")


def _read_cache(output_dir: Path, key: str | None) -> tuple[dict, ContentPart] | None:
    """The kept content part and its header, if it is of content `key` (None: any)."""
    try:
        with _open_kept(output_dir, CONTENT_CACHE) as handle:
            header = orjson.loads(handle.readline())
            if key is not None and header.get("key") != key:
                return None
            parts = orjson.loads(handle.readline())
            data = handle.readline().decode("ascii").strip()
        return header, ContentPart(parts["figures"], parts["treemap"], data)
    except (
        OSError,
        ProjectError,
        orjson.JSONDecodeError,
        AttributeError,
        UnicodeDecodeError,
        KeyError,
        TypeError,
    ):
        return None


def _keep_content(
    output_dir: Path, key: str, part: ContentPart, digests: dict, manifest: bytes | None = None
) -> None:
    """Keep the content part, and a copy of the manifest it was made of (`manifest`, or read)
    for the next render to compare with. A copy, not a second name: a link moves the file's
    ctime, and the engine recognises the files it published by their signature."""
    lines = [
        orjson.dumps({"key": key, "version": RENDER_VERSION, "files": digests}),
        orjson.dumps({"figures": part.figures, "treemap": part.treemap}),
        part.data.encode("ascii"),
    ]
    folder = OutputFolder(output_dir)
    atomic_write(folder, CONTENT_CACHE, b"\n".join(lines) + b"\n")
    manifest = folder.read(MANIFEST) if manifest is None else manifest
    if manifest is not None:
        atomic_write(folder, MANIFEST_SNAPSHOT, manifest)
    elif folder.lstat(MANIFEST_SNAPSHOT) is not None:
        folder.unlink(MANIFEST_SNAPSHOT)


def build_content(output_dir: Path) -> tuple[ContentPart, BuildState | None]:
    """The content part from the folder's files, and the build's state (None without a
    manifest)."""
    try:
        manifest: dict | None = read_manifest(output_dir)
    except NotABuildOutput:
        manifest = None
    contents = bundle_contents(output_dir, manifest, TOC_CACHE) if manifest else {}
    page: PageContent = content(output_dir, manifest, contents)
    state = None
    if manifest is not None and not any(c.error for c in contents.values()):
        state = state_of(output_dir, manifest, contents)
    return ContentPart(page.figures, treemap_svg(page.tiles), encode_data(page.data)), state


# -- the build state, and what changed since the previous build ------------------------------------


def _header(output_dir: Path, relpath: str) -> dict | None:
    try:
        with _open_kept(output_dir, relpath) as handle:
            header = orjson.loads(handle.readline())
    except (OSError, ProjectError, orjson.JSONDecodeError):
        return None
    return header if isinstance(header, dict) else None


def _write_state(output_dir: Path, header: dict, body: bytes) -> None:
    atomic_write(OutputFolder(output_dir), STATE, orjson.dumps(header) + b"\n" + body)


def _state_body(output_dir: Path, relpath: str) -> bytes | None:
    try:
        with _open_kept(output_dir, relpath) as handle:
            handle.readline()
            return handle.read()
    except (OSError, ProjectError):
        return None


def _load(output_dir: Path, relpath: str) -> BuildState | None:
    body = _state_body(output_dir, relpath)
    if body is None:
        return None
    try:
        return BuildState.from_json(orjson.loads(body))
    except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError):
        return None


def whole_state(output_dir: Path) -> BuildState | None:
    """The folder's build state, or None when it holds no whole build (no manifest, or a
    bundle file missing or damaged: such a build is no basis for a comparison)."""
    try:
        manifest = read_manifest(output_dir)
    except NotABuildOutput:
        return None
    contents = bundle_contents(output_dir, manifest)
    if any(c.error for c in contents.values()):
        return None
    return state_of(output_dir, manifest, contents)


def track_state(output_dir: Path, record: dict | None, key: str, fresh: BuildState | None) -> dict:
    """Keep this build's state, move the last run's aside when this is a new run, and say what
    changed since the previous build: {"status": "first" | "same" | "changed" | "unknown", …}.

    `fresh` is the state just computed from the folder, or None when the content part came from
    the cache (then the kept state is reused if it is of the same content)."""
    folder = OutputFolder(output_dir)
    run_id = record.get("id") if record else None
    kept = _header(output_dir, STATE)
    moved = kept is not None and run_id is not None and kept.get("run") != run_id
    if moved:  # a new run: the state it replaces is the previous build's
        folder.replace(STATE, PREVIOUS_STATE)
    header = {"key": key, "run": run_id if run_id is not None else (kept or {}).get("run")}
    if fresh is None and kept is not None and kept.get("key") == key:
        body = _state_body(output_dir, PREVIOUS_STATE) if moved else None
        if body is not None:  # the same content under this run's name, without parsing it
            _write_state(output_dir, header, body)
    else:
        fresh = fresh if fresh is not None else whole_state(output_dir)
        if fresh is not None:
            _write_state(output_dir, header, orjson.dumps(fresh.to_json()))
        elif folder.lstat(STATE) is not None:  # it describes content no longer there
            folder.unlink(STATE)
    before = _header(output_dir, PREVIOUS_STATE)
    if before is None:
        return {"status": "first"}
    summary = {"run": before.get("run")}
    if before.get("key") == key:
        return {"status": "same", "previous": summary}
    old = _load(output_dir, PREVIOUS_STATE)
    new = fresh if fresh is not None else _load(output_dir, STATE)
    if old is None or new is None:
        return {"status": "unknown", "previous": summary}
    patch = diff_states(old, new)
    if patch.identical:  # the same build, though the report's own version moved
        return {"status": "same", "previous": summary}
    return {"status": "changed", "previous": summary, "diff": _capped(patch)}


def _capped(patch: PatchDiff) -> dict:
    document = patch.to_json()
    totals = {}
    for group in ("bundles", "assets", "link_xml"):
        for kind, rows in document[group].items():
            totals[f"{group}.{kind}"] = len(rows)
            document[group][kind] = rows[:CHANGES_LIMIT]
    document["totals"] = totals
    document["files"] = document["files"][:CHANGES_LIMIT]
    return document


# -- the page ----------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters["bytes"] = human_bytes
    environment.filters["thousands"] = lambda n: f"{n:,}"
    return environment


def outcome(record: dict | None) -> dict:
    """How the run ended, in words, for the page's banner."""
    if record is None:
        return {
            "state": "unknown",
            "title": "no run record",
            "detail": "this folder has no reports/run.json",
        }
    code = record.get("exit_code")
    words: dict[Any, tuple[str, str]] = {
        0: ("passed", "built and passed"),
        1: ("failed", "built and published, but failed a gate"),
        2: ("error", "stopped: bad input"),
        3: ("error", "stopped: internal error"),
        4: ("error", "stopped: a step failed outside the project"),
    }
    state, title = words.get(code, ("error", "stopped"))
    return {"state": state, "title": f"exit {code}: {title}", "detail": ""}


def run_data(output_dir: Path, record: dict | None, changes: dict) -> dict:
    """What the page's script shows about the run: the record less what the HTML already
    holds, the previous run's figures, and what changed."""
    previous = read_record(output_dir / PREVIOUS) if record is not None else None
    return {
        "ran": (record or {}).get("ran"),
        "previousRun": None
        if previous is None
        else {
            "run": previous.get("run"),
            "started": previous.get("started"),
            "seconds": previous.get("seconds"),
            "exit_code": previous.get("exit_code"),
            "stages": {
                s["name"]: {"seconds": s["seconds"], "built": s["built"], "units": s["units"]}
                for s in previous.get("stages", [])
            },
        },
        "changes": changes,
    }


def page_html(output_dir: Path, record: dict | None, part: ContentPart, changes: dict) -> str:
    template = _environment().get_template("index.html.j2")
    stages = (record or {}).get("stages") or []
    return template.render(
        output=str(output_dir),
        record=record,
        outcome=outcome(record),
        figures=part.figures,
        stages=stages,
        hits=sum(s["cached"] for s in stages),
        units=sum(s["units"] for s in stages),
        treemap=Markup(part.treemap),
        timeline=Markup(timeline_svg(record or {})),
        content_data=part.data,
        run_data=encode_data(run_data(output_dir, record, changes)),
        style=Markup((TEMPLATES / "report.css").read_text(encoding="utf-8")),
        script=Markup((TEMPLATES / "report.js").read_text(encoding="utf-8")),
    )


def render(output_dir: Path, record: dict | None) -> ReportFiles:
    """Write `reports/index.html` for the output folder: the page, and the files it keeps beside
    it (its content cache and the build summaries it compares), so `clean` knows them."""
    output_dir = Path(output_dir)
    digests = file_digests(output_dir)
    key = content_key(digests)
    kept_part = _read_cache(output_dir, key)
    part = kept_part[1] if kept_part is not None else None
    fresh, changes = None, None
    if part is None:
        patched = _patched(output_dir, record, key, digests)
        if patched is not None:
            part, changes = patched
        else:
            part, fresh = build_content(output_dir)
            if not part.figures["unreadable_bundles"]:  # a repaired file must be read again
                _keep_content(output_dir, key, part, digests)
    if changes is None:
        changes = track_state(output_dir, record, key, fresh)
    folder = OutputFolder(output_dir)
    atomic_write(folder, PAGE, page_html(output_dir, record, part, changes).encode("utf-8"))
    kept = (CONTENT_CACHE, TOC_CACHE, STATE, PREVIOUS_STATE, MANIFEST_SNAPSHOT)
    return ReportFiles(
        pages=(folder.path(PAGE),),
        kept=tuple(folder.path(name) for name in kept if folder.lstat(name) is not None),
    )


def _patched(
    output_dir: Path, record: dict | None, key: str, digests: dict
) -> tuple[ContentPart, dict] | None:
    """The content part and the changes since the last run, patched from what the last render
    kept (`patching.py`), when this run's build differs from it in bundles' files alone."""
    folder = OutputFolder(output_dir)
    run_id = record.get("id") if record else None
    last = _read_cache(output_dir, None)
    kept = _header(output_dir, STATE)
    if last is None or kept is None or run_id is None or kept.get("run") == run_id:
        return None
    header, part = last
    old = header.get("files")
    if kept.get("key") != header.get("key") or not isinstance(old, dict):
        return None
    if any(old.get(rel) != digests[rel] for rel in (COOKLIST_JSON, LINK_XML)):
        return None
    snapshot, manifest = folder.read(MANIFEST_SNAPSHOT), folder.read(MANIFEST)
    if snapshot is None or manifest is None:
        return None
    if old.get(MANIFEST) is None or digest_bytes(snapshot) != old[MANIFEST]:
        return None
    changed = bundle_file_changes(snapshot, manifest)
    body = _state_body(output_dir, STATE)
    if changed is None or body is None:
        return None
    try:
        state = orjson.loads(body)
        data = decode_data(part.data)
        result = patch_report(
            output_dir,
            data,
            dict(part.figures),
            state,
            changed,
            old.get(VALIDATE_JSON) != digests[VALIDATE_JSON],
        )
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    if result is None:
        return None
    fresh = ContentPart(result.figures, treemap_svg(tiles_of(data["bundles"])), encode_data(data))
    _keep_content(output_dir, key, fresh, digests, manifest)
    folder.replace(STATE, PREVIOUS_STATE)
    _write_state(output_dir, {"key": key, "run": run_id}, orjson.dumps(state))
    summary = {"run": kept.get("run")}
    if result.diff.identical:
        return fresh, {"status": "same", "previous": summary}
    return fresh, {"status": "changed", "previous": summary, "diff": _capped(result.diff)}
