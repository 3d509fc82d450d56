"""Stage `collect`: the asset source's view of the project — assets, the rule index, the rest.

Parsing fans out over the source's parse units (per repository, per world/level, per shard of
attribute files); each unit's result holds one part per file, so editing a file re-parses only
its unit. Incrementally: a content edit changes no unit (the engine re-runs the units that read
the file), and when only attribute files changed the source patches the assets they name
instead of assembling the project again (`patch_assets`); a file added or removed plans again.
"""

from __future__ import annotations

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
from stages.sources.base import ParseUnit

SPEC = StageSpec(
    name="collect",
    # 3: assets, index and source as values of their own (assets keyed by id), patched in place.
    # 4: problems are the engine's records (orchestrator.typing.Problem)
    # 5: indexes hold project-relative paths (no value depends on where the checkout lies)
    version=5,
    inputs=(PROJECT,),
    outputs=("assets", "index", "source"),
    keyed=("assets",),
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


def plan(ctx, inputs: dict) -> Plan:
    name = ctx.section("source")
    source = get_source(name)
    options = source_options(ctx, source)
    unit_options = {key: value for key, value in options.items() if not key.startswith("_")}
    units = []
    for unit in source.plan(project_files(ctx), options):
        units.append(
            Unit(
                id=unit.id,
                payload=ParseJob(name, unit, unit_options),
                # The file list is key material: a file joining a shard must re-run it
                # even though the trace only records the files that were read.
                key={
                    "source": name,
                    "source_version": source.version,
                    "kind": unit.kind,
                    "files": list(unit.files),
                },
                files=unit.files,
                cost=max(1, len(unit.files)),
            )
        )
    return Plan(units=units)


def update(ctx, inputs: dict, changes: StageChanges) -> Plan | None:
    """Edits to files change no unit (the engine re-runs those that read them); a file added
    or removed changes the listing, so the project is planned again."""
    project = changes.inputs[PROJECT]
    added = project.changed - set(changes.files_modified)
    if added or project.removed:
        return None
    return Plan(units=[])


def run(job: ParseJob, shared, reader):
    return get_source(job.source).parse(job.unit, reader, job.options)


def finish(ctx, inputs: dict, results) -> dict:
    name = ctx.section("source")
    source = get_source(name)
    if results.changed is not None:
        if not results.changed and not results.removed:
            return {"assets": UNCHANGED, "index": UNCHANGED, "source": UNCHANGED}
        patched = _patch(ctx, source, results)
        if patched is not None:
            return patched
    options = source_options(ctx, source)
    parts = PartResults(results)
    result = source.assemble(ctx.root, project_files(ctx), parts, options)
    result.problems.extend(refused_problems(ctx))
    raise_on_fatal(result.problems, bool(options.get("skip_broken")))
    log_problems(ctx.log, "collect.problem", result.problems)
    return {"assets": result.assets, "index": result.index, "source": result.info()}


def problems(build, outputs) -> list[Problem]:
    """What the source noticed in the project, kept in the stored `source` value: every run
    reports them, a skipped or cached one too, until the files are fixed."""
    return list(outputs["source"].problems)


def _patch(ctx, source, results) -> dict[str, Any] | None:
    """The outputs patched from the parts that changed, when the source can say what they
    change (only the assets their files name); None to assemble everything again."""
    patch_assets = getattr(source, "patch_assets", None)
    if patch_assets is None or results.removed:
        return None
    before = {unit_id: ctx.load_result(digest) for unit_id, digest in results.before.items()}
    after = {unit_id: results[unit_id] for unit_id in results.changed}
    changed = patch_assets(ctx.previous["assets"], before, after)
    if changed is None:
        return None
    from orchestrator import KeyedPatch

    return {"assets": KeyedPatch(changed), "index": UNCHANGED, "source": UNCHANGED}


class PartResults(dict):
    """The parse results by unit id, with `digests` (unit id → digest of the stored result).

    A source may name what it derives from a few parts by their digests instead of hashing the
    derived value (the Messiah index: 100,000 entries, from a handful of repository parts).
    """

    def __init__(self, results) -> None:
        super().__init__((unit_id, results[unit_id]) for unit_id in results)
        self.digests = {unit_id: results.digest(unit_id) for unit_id in results}
