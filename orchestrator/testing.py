"""Helpers for testing a stage on its own, as `structlog.testing` helps test logging.

`run_stage(stage, files={...}, inputs={...})` writes a temporary project and build file, then
runs the stage's `plan`, every unit's `run` (in this process, through the recording reader the
executors use), `finish` and `publish`, without the cache or the rest of the pipeline. What the
stage did comes back in a `StageRun`: its outputs, the files it published, what each unit read,
and what it logged.

    >>> from orchestrator.testing import run_stage
    >>> from stages import link_xml
    >>> run = run_stage(link_xml, inputs={...}, settings={"link_xml": {"assembly": "Game"}})
    >>> assert b"Game.Material" in run.outputs["link_xml"]
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import yaml

from .cache import Cache
from .cache.state import BuildState
from .codec import dumps
from .core.config import Build, load_build
from .core.context import Context
from .executors import WorkItem, run_item
from .files.projectfiles import ProjectFiles
from .files.reads import FOUND, entry_read
from .files.scanning import scan
from .hashing import digest_bytes
from .keyed import Keyed
from .typing import Digest, Parts, Plan, StoredParts

__all__ = ["RecordingContext", "StageRun", "StoredResults", "run_stage", "write_project"]


def write_project(root: Path, files: Mapping[str, str | bytes]) -> Path:
    """Write `files` (project-relative path → text or bytes) under `root`; returns `root`."""
    root.mkdir(parents=True, exist_ok=True)
    for relpath, content in files.items():
        path = root / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


class RecordingContext(Context):
    """The engine's driver-side context, keeping what the stage published and logged."""

    def __init__(self, build: Build, stored: dict[Digest, Any], resident: bool = False) -> None:
        self.logs = structlog.testing.CapturingLogger()
        root = str(build.project_root)
        key = build.cache_key()  # a state signed with the farm's key is read with it
        cache = Cache(build.cache_dir, key=key)
        state = BuildState(build.cache_dir, root, str(build.output_dir), cache, key=key)
        skip = {str(build.output_dir), str(build.cache_dir)}
        project = ProjectFiles(root, build.file_policy)
        files = scan(root, skip, None, project).table
        super().__init__(
            build, project, state, files, self.logs, stored.__getitem__, resident=resident
        )
        self.stored = stored
        self.published_bytes: dict[str, bytes] = {}

    def publish_bytes(self, relpath: str, data: bytes) -> bool:
        self.published_bytes[relpath] = data
        return super().publish_bytes(relpath, data)


class StoredResults(Mapping):
    """A stage's unit results as `finish` sees them, with the digests the store would give."""

    def __init__(self, plan: Plan, results: dict[str, Any], stored: dict[Digest, Any]) -> None:
        self.plan = plan
        self.changed: set[str] | None = None  # a full run, as a first build is
        self.removed: set[str] | None = None
        self.before: dict[str, Digest] = {}
        self._results = {}
        self._digests = {}
        for unit_id, value in results.items():
            if isinstance(value, Parts):  # each part stored apart, as the engine does
                value = StoredParts(
                    {name: _store(part, stored) for name, part in value.values.items()}
                )
            self._results[unit_id] = value
            self._digests[unit_id] = _store(value, stored)

    def digest(self, unit_id: str) -> Digest:
        return self._digests[unit_id]

    def __getitem__(self, unit_id: str) -> Any:
        return self._results[unit_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)


def _resolved(reads: dict[str, Digest | None], given: Mapping[str, Any]) -> dict:
    """A unit's reads with the entries it found given their digests, as the engine gives them
    from the build state: an entry's stored digest, a whole value's fingerprint."""
    resolved = dict(reads)
    for path, digest in reads.items():
        read = entry_read(path)
        if read is None or digest != FOUND:
            continue
        value = given[read.value]
        if read.key is not None:
            resolved[path] = digest_bytes(dumps(value[read.key]))
        else:
            whole = value if isinstance(value, Keyed) else Keyed(read.value, memory=value)
            resolved[path] = whole.fingerprint()
    return resolved


def _store(value: Any, stored: dict[Digest, Any]) -> Digest:
    digest = digest_bytes(dumps(value))
    stored[digest] = value
    return digest


@dataclass
class StageRun:
    """What one stage did: its plan and outputs, and what its units and hooks touched."""

    plan: Plan
    outputs: dict[str, Any]
    context: RecordingContext
    reads: dict[str, dict[str, Digest | None]] = field(default_factory=dict)  # unit → its reads

    @property
    def published(self) -> dict[str, bytes]:
        """Output-relative path → bytes, for every file the stage published."""
        return self.context.published_bytes

    @property
    def logs(self) -> list[Any]:
        """What the stage logged (structlog `CapturingLogger` calls: method name, args, kwargs)."""
        return self.context.logs.calls


def run_stage(
    stage: Any,
    *,
    inputs: Mapping[str, Any] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    project: Path | None = None,
    settings: Mapping[str, Any] | None = None,
    blobs: Mapping[Digest, Any] | None = None,
    workdir: Path | None = None,
    publish: bool = True,
    resident: bool = False,
) -> StageRun:
    """Run `stage` (a stage module) once, in this process.

    The project is `project` (a folder) or `files` written to a temporary one; `settings` are
    build-file sections (validated like a real build file's); `blobs` are stored results of
    upstream stages that units read with `reader.blob(digest)`; `resident`: as a build of
    `orchestrate watch` (StageContext.resident). Errors a unit raises are raised.
    """
    workdir = Path(workdir or tempfile.mkdtemp(prefix="orchestrate-stage-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if project is None:
        project = write_project(workdir / "project", files or {})
    build_file = workdir / "build.yaml"
    document = {
        "project": str(Path(project).resolve()),
        "output": str(workdir / "out"),
        "cache": str(workdir / "cache"),
        **(settings or {}),
    }
    build_file.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    build = load_build(build_file)
    stored: dict[Digest, Any] = dict(blobs or {})
    ctx = RecordingContext(build, stored, resident)
    given = dict(inputs or {})
    plan = stage.plan(ctx, given)
    results: dict[str, Any] = {}
    reads: dict[str, dict[str, Digest | None]] = {}
    for unit in plan.units:
        item = WorkItem(unit.id, unit.payload, {d: stored[d] for d in unit.blobs}, want=unit.files)
        finished = run_item(
            stage.run, item, plan.shared, ctx.root, True, "test", policy=ctx.project.policy
        )
        if finished.error is not None:
            raise finished.error
        results[unit.id] = finished.result
        reads[unit.id] = _resolved(finished.reads, given)
    outputs = stage.finish(ctx, given, StoredResults(plan, results, stored))
    hook = getattr(stage, "publish", None)
    if publish and hook is not None:
        hook(ctx, outputs)
    return StageRun(plan, outputs, ctx, reads)
