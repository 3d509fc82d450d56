"""Stage `collect`: the asset source's view of the project — assets, the rule index, the rest.

Parsing fans out over the source's parse units (per repository, per world/level, per shard of
attribute files); each unit's result holds one part per file, so editing a file re-parses only
its unit. Incrementally: a content edit changes no unit (the engine re-runs the units that read
the file); files added or removed re-plan the units whose file lists they change (the source's
`replan`); and the source patches the assets and index entries of the GUIDs the re-parsed parts
and the moved folders touch (`patch`: Item by Item, stages/sources/messiah/patching.py) instead
of assembling the project again. A source without them plans and assembles everything.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from orchestrator import (
    DEFAULT_MAX_FILE_SIZE,
    LINK_OUTSIDE,
    PROJECT,
    SPECIAL_FILE,
    TOO_LARGE,
    UNCHANGED,
    Plan,
    Problem,
    StageChanges,
    StageSpec,
    Unit,
    record,
)
from stages.algorithms.globs import compile_globs
from stages.sources import get_source, log_problems, raise_on_fatal
from stages.sources.base import ParseUnit, index_entries

SPEC = StageSpec(
    name="collect",
    # 3: assets, index and source as values of their own (assets keyed by id), patched in place.
    # 4: problems are the engine's records (orchestrator.typing.Problem)
    # 5: the index keyed (sources.base.index_entries: by GUID and virtual path for Messiah),
    # its paths project-relative (no value depends on where the checkout lies)
    version=5,
    inputs=(PROJECT,),
    outputs=("assets", "index", "source"),
    keyed=("assets", "index"),
    config_keys=("project", "source", "collect", "cocos"),
    description="walk the project; parse repositories, maps and attribute files",
)


@record
class ParseJob(NamedTuple):
    """One unit's work: a parse unit of the named source, with the `collect` options it parses
    by (those a worker may see)."""

    source: str
    unit: ParseUnit
    options: dict


def project_files(ctx) -> list:
    """The project's FileEntry list without the paths `collect.exclude` leaves out."""
    patterns = ctx.section("collect").get("exclude") or []
    if not patterns:  # the usual case: no call per file
        return list(ctx.walk())
    excluded = compile_globs(patterns)
    return [entry for entry in ctx.walk() if not excluded(entry.path)]


def refused_problems(ctx) -> list[Problem]:
    """A problem for each project entry the engine does not read (`collect.exclude` aside):
    the file is treated as missing, and the problem says why."""
    section = ctx.section("collect")
    patterns = section.get("exclude") or []
    excluded = compile_globs(patterns) if patterns else None
    limit = int(section.get("max_file_size") or DEFAULT_MAX_FILE_SIZE)
    problems = []
    for path, (kind, detail) in sorted(ctx.refused_files().items()):
        if excluded is not None and excluded(path):
            continue
        if kind == LINK_OUTSIDE:
            message = (
                f"a symbolic link leading out of the project (to {detail}): treated as "
                "missing (`collect.follow_links: outside` follows it)"
            )
        elif kind == SPECIAL_FILE:
            message = f"a {detail}, not a regular file: never read"
        elif kind == TOO_LARGE:
            message = (
                f"{int(detail):,} bytes, over collect.max_file_size ({limit:,} bytes): "
                "treated as missing"
            )
        else:
            message = f"its name holds a control character ({detail}): left out"
        problems.append(Problem(kind, _printable(path), message))
    return problems


def _printable(path: str) -> str:
    """A path as it can be shown on one line (a control character written as \\xNN)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in path)


def source_options(ctx, source) -> dict:
    """`collect` options, plus what a source reads of the build beyond them (its `configure`:
    the Cocos source's `cocos` section and engine folder). Keys starting with `_` are for the
    source's `plan` and `assemble` in the driver only, never sent with the parse units."""
    options = dict(ctx.section("collect"))
    configure = getattr(source, "configure", None)
    if configure is not None:
        options.update(configure(ctx))
    return options


@record
class CollectState(NamedTuple):
    """What the next `update` starts from: how many of the source's problems are the refused
    files' (they come last), and the source's own state of the listing (`listing_state`)."""

    refused: int
    listing: Any


@record
class Moved(NamedTuple):
    """What `update` tells `finish` (the plan's scratch): the resource folders files added or
    removed touched (the source's `replan`), and how many refused files the problems ended with."""

    folders: dict
    refused: int


def _unit(name: str, source, unit: ParseUnit, unit_options: dict) -> Unit:
    return Unit(
        id=unit.id,
        payload=ParseJob(name, unit, unit_options),
        # The file list is key material: a file joining a shard must re-run it even though
        # the trace only records the files that were read.
        key={
            "source": name,
            "source_version": source.version,
            "kind": unit.kind,
            "files": list(unit.files),
        },
        files=unit.files,
        cost=max(1, len(unit.files)),
    )


def _unit_options(options: dict) -> dict:
    return {key: value for key, value in options.items() if not key.startswith("_")}


def plan(ctx, inputs: dict) -> Plan:
    name = ctx.section("source")
    source = get_source(name)
    options = source_options(ctx, source)
    files = project_files(ctx)
    units = [
        _unit(name, source, unit, _unit_options(options)) for unit in source.plan(files, options)
    ]
    listing = getattr(source, "listing_state", None)
    state = CollectState(
        len(refused_problems(ctx)), listing(files) if listing is not None else None
    )
    return Plan(units=units, state=state)


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Edits to files change no unit (the engine re-runs those that read them). Files added or
    removed change the listing: a source that can (`replan`) says which parse units that
    changes; else the project is planned again."""
    state = changes.state
    if not isinstance(state, CollectState):
        return None
    project = changes.inputs[PROJECT]
    added = project.changed - set(changes.files_modified)
    removed = set(project.removed)
    patterns = ctx.section("collect").get("exclude") or []
    if patterns:
        excluded = compile_globs(patterns)
        added = {path for path in added if not excluded(path)}
        removed = {path for path in removed if not excluded(path)}
    refused = len(refused_problems(ctx))
    if not added and not removed:
        return Plan(
            units=[], state=state._replace(refused=refused), scratch=Moved({}, state.refused)
        )
    name = ctx.section("source")
    source = get_source(name)
    replan = getattr(source, "replan", None)
    if replan is None:
        return None
    found = replan(project_files(ctx), added, removed, changes.stored_units, state.listing)
    if found is None:
        return None
    options = _unit_options(source_options(ctx, source))
    return Plan(
        units=[_unit(name, source, unit, options) for unit in found.units],
        removed=found.removed,
        state=CollectState(refused, found.state),
        scratch=Moved(found.folders, state.refused),
        reasons={unit.id: "files added or removed in its batch" for unit in found.units},
    )


def run(job: ParseJob, shared, reader):
    return get_source(job.source).parse(job.unit, reader, job.options)


def finish(ctx, inputs: dict, results) -> dict:
    name = ctx.section("source")
    source = get_source(name)
    if results.changed is not None:
        patched = _patch(ctx, source, results)
        if patched is not None:
            return patched
    options = source_options(ctx, source)
    parts = PartResults(results)
    result = source.assemble(ctx.root, project_files(ctx), parts, options)
    result.problems.extend(refused_problems(ctx))
    raise_on_fatal(result.problems, bool(options.get("skip_broken")))
    log_problems(ctx.log, "collect.problem", result.problems)
    return {
        "assets": result.assets,
        "index": index_entries(result.index),
        "source": result.info(),
    }


def problems(build, outputs) -> list[Problem]:
    """What the source noticed in the project, kept in the stored `source` value: every run
    reports them, a skipped or cached one too, until the files are fixed."""
    return list(outputs["source"].problems)


def _patch(ctx, source, results) -> dict[str, Any] | None:
    """The outputs patched from the parts that changed and the folders files were added to or
    removed from, when the source can say what they change (its `patch`: the assets and index
    entries of the GUIDs they touch); None to assemble everything again."""
    moved = results.plan.scratch
    if not isinstance(moved, Moved):
        return None
    previous = ctx.previous["source"]
    refused = refused_problems(ctx)
    kept = list(previous.problems)[: len(previous.problems) - moved.refused]
    problems = kept + refused
    info = (
        UNCHANGED if problems == list(previous.problems) else replace(previous, problems=problems)
    )
    if not results.changed and not results.removed and not moved.folders:
        return {"assets": UNCHANGED, "index": UNCHANGED, "source": info}
    patch = getattr(source, "patch", None)
    if patch is None:
        return None
    found = patch(
        ctx.root,
        ctx.previous["assets"],
        ctx.previous["index"],
        results,
        ctx.load_result,
        moved.folders,
    )
    if found is None:
        return None
    assets, index = found
    return {"assets": assets, "index": index, "source": info}


class PartResults(dict):
    """The parse results by unit id, with `digests` (unit id → digest of the stored result).

    A source may name what it derives from a few parts by their digests instead of hashing the
    derived value (the Messiah index: 100,000 entries, from a handful of repository parts).
    """

    def __init__(self, results) -> None:
        super().__init__((unit_id, results[unit_id]) for unit_id in results)
        self.digests = {unit_id: results.digest(unit_id) for unit_id in results}
