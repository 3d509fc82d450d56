"""The figures of the suite, one function per section; each records into a `SizeResults`.

A section that fails records its error (results.errors) and the suite goes on with the next one.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from functools import wraps

from common import (
    BenchError,
    Project,
    SizeResults,
    asset_added,
    asset_deleted,
    bench_build_file,
    change_item_name,
    change_trim,
    change_width,
    deletable_textures,
    dump_payloads,
    edited,
    ensure_cocos_project,
    fmt_s,
    log,
    median,
    move_entity,
    ninja_noop,
    output_dir,
    pick_cocos_edit_target,
    pick_edit_targets,
    prepare_ninja,
    read_parse_floor,
    reindent,
    repeat_runs,
    run_orchestrate,
    runs_figure,
    stat_floor,
    time_validation,
    timed_figure,
    used_level,
    validation_sample,
    zstd_time,
)

RAY1 = ("--executor", "ray", "--workers", "1")
RAY2 = ("--executor", "ray", "--workers", "2")
#: The driver alone, and `auto`: on a machine of fewer than 4 cores, the driver and a forked
#: helper for each other core (executors/forked.py); with more, a local Ray.
LOCAL1 = ("--executor", "local")
LOCAL2 = ("--executor", "auto")
LOCAL = ("--executor", "local")
AUTO = ()  # the build file's executor: `auto`, what a user gets
#: The build whose warm cache the rebuilds (no-op, edits) start from: the cold build users get.
WARM_BUILD = "cold-auto"


@dataclass
class Options:
    repeat: int = 3
    repeat_cold: int = 3
    timeout: float = 4 * 3600.0
    per_rule_fraction: float | None = None  # None: all files up to 10,000 assets, else 2 %
    tools: dict = field(default_factory=dict)
    shared_paths: bool = True  # executor.shared_paths of the benchmark build files
    idle_seconds: float = 60.0  # how long an idle `orchestrate watch` is measured


def section(name: str):
    def decorate(fn):
        @wraps(fn)
        def run(project: Project, results: SizeResults, options: Options, *args, **kwargs):
            log(f"== {name} ({project.size} assets)")
            try:
                return fn(project, results, options, *args, **kwargs)
            except Exception as exc:  # record, go on with the next section
                text = f"{type(exc).__name__}: {exc}"
                results.errors[name] = text
                log(f"!! {name} failed: {text}")
                traceback.print_exc()
                return None

        return run

    return decorate


_WARMED: set = set()  # projects whose files this process has read once


# -- floors --------------------------------------------------------------------------------------


@section("floors")
def floors(
    project: Project, results: SizeResults, options: Options, which=("stat", "p1", "p2", "xml1")
) -> None:
    n = max(3, options.repeat)  # cheap, and the noisiest figures: never fewer than three runs
    if project.dir not in _WARMED:
        # The builds measured later find the project in the page cache (the machine has the
        # memory for it); so do the floors: read every file once first, untimed.
        seconds = read_parse_floor(project.root, 1, read_only=True)["seconds"]
        _WARMED.add(project.dir)
        log(f"  page cache warmed (read every file once, untimed): {seconds:.1f} s")
    if "stat" in which:
        values = [stat_floor(project.root) for _ in range(n)]
        results.put("floor.stat", timed_figure([v[0] for v in values], files=values[0][1]))
        log(f"  stat every file: {median([v[0] for v in values]):.2f} s ({values[0][1]} files)")
    for key, processes, xml_only in (("p1", 1, False), ("p2", 2, False), ("xml1", 1, True)):
        if key not in which:
            continue
        runs = [read_parse_floor(project.root, processes, xml_only) for _ in range(n)]
        name = {
            "p1": "floor.read_parse.p1",
            "p2": "floor.read_parse.p2",
            "xml1": "floor.xml_parse.p1",
        }[key]
        results.put(
            name,
            timed_figure(
                [r["seconds"] for r in runs], **{k: v for k, v in runs[0].items() if k != "seconds"}
            ),
        )
        log(f"  {name}: {results.get(name):.2f} s")


def ensure_floor(
    project: Project, results: SizeResults, options: Options, key: str, name: str
) -> None:
    if results.get(name) is None:
        floors(project, results, options, which=(key,))


# -- full builds -----------------------------------------------------------------------------------


def cold_runs(
    project: Project, options: Options, name: str, args: tuple, what: str, flags: tuple = ()
) -> list:
    """`options.repeat_cold` runs of `orchestrate run ARGS`, each from a fresh build file and
    cache of its own (`name`): cold builds. `flags` are runner.py's (`--cpu`)."""
    return repeat_runs(
        options.repeat_cold,
        lambda i: run_orchestrate(
            bench_build_file(project, name, shared_paths=options.shared_paths),
            *args,
            timeout=options.timeout,
            flags=flags,
        ),
        what,
    )


@section("cold builds")
def cold_builds(
    project: Project, results: SizeResults, options: Options, dump_for_zstd: bool = True
) -> None:
    """The cold build a user gets (`orchestrate run`, the build file's executor `auto`), and
    the cold build on Ray with 2 workers (its driver's memory is a target)."""
    for label, args in (("auto", AUTO), ("ray2", RAY2)):
        runs = cold_runs(project, options, f"cold-{label}", args, f"cold build, {label}")
        results.put(f"cold.{label}", runs_figure(runs, lambda r: r.engine_s))
    if dump_for_zstd:
        payloads = dump_payloads(
            output_dir(project, "cold-ray2"), project.dir / "runs" / "zstd-payloads"
        )
        results.put("output.payloads", payloads)


@section("no-op")
def noop(project: Project, results: SizeResults, options: Options) -> None:
    build = _warm_build(project, WARM_BUILD, AUTO, options)
    runs = repeat_runs(
        options.repeat,
        lambda i: run_orchestrate(build, timeout=options.timeout),
        "no-op rerun (orchestrate run build.yaml)",
    )
    results.put("noop", runs_figure(runs, lambda r: r.wall))
    if any(r.ray_imported for r in runs):
        results.notes.append("the no-op rerun imported Ray")
    if options.tools.get("ninja"):
        ninja_dir, edges = prepare_ninja(project)
        values = [ninja_noop(ninja_dir) for _ in range(options.repeat)]
        results.put("floor.ninja_noop", timed_figure(values, edges=edges))
        log(f"  ninja no-op ({edges} edges): {median(values) * 1000:.0f} ms")
    else:
        results.notes.append("ninja not available: the ninja no-op figure is missing")
    ensure_floor(project, results, options, "stat", "floor.stat")


def _warm_build(project: Project, name: str, args: tuple, options: Options):
    """The build file of a run whose cache is warm: one untimed run first, which settles a
    cache left by other code (the product's code is in every key) or by an interrupted run."""
    build = bench_build_file(project, name, fresh=False, shared_paths=options.shared_paths)
    log(f"  warming {name} (untimed)")
    run_orchestrate(build, *args, timeout=options.timeout)
    return build


@section("edits")
def edits(project: Project, results: SizeResults, options: Options) -> None:
    build = _warm_build(project, WARM_BUILD, AUTO, options)
    targets = pick_edit_targets(project)
    rel = lambda p: str(p.relative_to(project.root))  # noqa: E731
    results.put(
        "edit.targets",
        {
            "attribute": rel(targets.texture_xml),
            "guid": targets.guid,
            "repository": rel(targets.repository),
        },
    )
    # The no-op beside the edits, in the same warm state: each edit is also "no-op + X s" (the
    # issue 29 target: rename, add, delete one asset each within 1.5 s of it).
    noop_runs = repeat_runs(
        options.repeat, lambda i: run_orchestrate(build, timeout=options.timeout), "no-op"
    )
    noop = median([r.wall for r in noop_runs])
    doomed = deletable_textures(project, targets, options.repeat)

    def one_file(path, change):
        return lambda k: edited(project, path, change(k))

    kinds = (
        ("edit.attribute", "one texture's Width", one_file(targets.texture_xml, change_width)),
        (
            "edit.repository",
            "one Item's Name in a resource.repository (rename one Item)",
            one_file(targets.repository, lambda k: change_item_name(targets.guid, k)),
        ),
        (
            "edit.add_asset",
            "one asset added: its folder and its Item",
            lambda k: asset_added(project, targets, k),
        ),
        (
            "edit.delete_asset",
            "one asset deleted: its folder and its Item",
            lambda k: asset_deleted(project, targets.repository, doomed[k - 1]),
        ),
        (
            "edit.cosmetic",
            "re-indented line + blank lines in one texture.xml",
            one_file(targets.texture_xml, reindent),
        ),
        (
            "edit.level",
            "one Entity moved in a used level (its Position)",
            one_file(used_level(project), move_entity),
        ),
    )
    for name, what, make_edit in kinds:

        def one(i: int):
            with make_edit(i + 1):
                run = run_orchestrate(build, timeout=options.timeout)
            # Untimed: the restored file is a change too, which the next timed run must not
            # pay for (an undone repository edit cost the next cosmetic edit 11 s at 100,000).
            run_orchestrate(build, timeout=options.timeout)
            return run

        runs = repeat_runs(options.repeat, one, f"{name} ({what})")
        figure = runs_figure(runs, lambda r: r.wall)
        figure["what"] = what
        figure["engine_median"] = median([r.engine_s for r in runs])
        figure["noop_median"] = noop
        figure["over_noop"] = None if noop is None else figure["median"] - noop
        log(f"  {name}: {fmt_s(figure['median'])} = no-op + {fmt_s(figure['over_noop'])}")
        results.put(name, figure)


# -- orchestrate watch -------------------------------------------------------------------------------


@section("watch")
def watching(project: Project, results: SizeResults, options: Options) -> None:
    """`orchestrate watch` on the warm build: the seconds from an edit until the manifest
    changed, for one texture's Width saved and for the index edits (rename one Item, add one
    asset, delete one asset), a fresh edit each repeat and each undone untimed between them;
    then its CPU over `options.idle_seconds` with nothing changing."""
    from watching import manifest_of, measure

    build = _warm_build(project, WARM_BUILD, AUTO, options)
    targets = pick_edit_targets(project)
    manifest = manifest_of(output_dir(project, WARM_BUILD))
    doomed = deletable_textures(project, targets, options.repeat)
    ks = range(1, options.repeat + 1)
    edits = {
        "attribute": [edited(project, targets.texture_xml, change_width(k)) for k in ks],
        "rename": [
            edited(project, targets.repository, change_item_name(targets.guid, 100 + k)) for k in ks
        ],
        "add_asset": [asset_added(project, targets, 100 + k) for k in ks],
        "delete_asset": [asset_deleted(project, targets.repository, doomed[k - 1]) for k in ks],
    }
    latencies, share, _ = measure(build, edits, manifest, options.idle_seconds, options.timeout)
    whats = {
        "attribute": "one texture's Width saved → manifest.json changed",
        "rename": "one Item renamed in a resource.repository → manifest.json changed",
        "add_asset": "one asset added (its folder and its Item) → manifest.json changed",
        "delete_asset": "one asset deleted (its folder and its Item) → manifest.json changed",
    }
    results.put(
        "watch.save_to_manifest", timed_figure(latencies["attribute"], what=whats["attribute"])
    )
    for kind in ("rename", "add_asset", "delete_asset"):
        results.put(f"watch.{kind}_to_manifest", timed_figure(latencies[kind], what=whats[kind]))
    results.put("watch.idle_cpu", {"median": share, "seconds": options.idle_seconds})


# -- collect + dependency ---------------------------------------------------------------------------


@section("collect+dependency")
def collect(project: Project, results: SizeResults, options: Options) -> None:
    stages = ("--stages", "dependency")
    for label, args in (("local", LOCAL), ("ray1", RAY1), ("ray2", RAY2)):
        what = f"collect+dependency cold, {label}"
        runs = cold_runs(project, options, f"collect-{label}", (*stages, *args), what)
        results.put(f"collect.cold.{label}", runs_figure(runs, lambda r: r.engine_s))
    build = _warm_build(project, "collect-ray2", stages, options)
    runs = repeat_runs(
        options.repeat,
        lambda i: run_orchestrate(build, *stages, timeout=options.timeout),
        "collect+dependency no-op",
    )
    results.put("collect.noop", runs_figure(runs, lambda r: r.wall))
    targets = pick_edit_targets(project)

    def one(i: int):
        with edited(project, targets.texture_xml, change_width(i + 1)):
            return run_orchestrate(build, *stages, timeout=options.timeout)

    runs = repeat_runs(options.repeat, one, "collect+dependency, one edited attribute file")
    figure = runs_figure(runs, lambda r: r.wall)
    figure["engine_median"] = median([r.engine_s for r in runs])
    results.put("collect.edit_attribute", figure)
    run_orchestrate(build, *stages, timeout=options.timeout)
    ensure_floor(project, results, options, "xml1", "floor.xml_parse.p1")


# -- validation ------------------------------------------------------------------------------------


@section("validation")
def validation(project: Project, results: SizeResults, options: Options) -> None:
    """Cold `orchestrate validate` as a new user runs it (whole process, empty cache, the build
    file's executor), the validate stage's own seconds on Ray with 1 and 2 workers, and the
    in-process baselines (the ArtEase 1.x parse-per-rule checker among them)."""
    name = "validate-command"

    def cold_validate(i: int):
        build = bench_build_file(project, name, shared_paths=options.shared_paths)
        report = project.dir / "runs" / name / "validate.json"
        return run_orchestrate(
            build,
            "--format",
            "json",
            "--output",
            str(report),
            command="validate",
            timeout=options.timeout,
        )

    runs = repeat_runs(options.repeat_cold, cold_validate, "cold orchestrate validate")
    figure = runs_figure(runs, lambda r: r.wall)
    figure["engine_median"] = median([r.engine_s for r in runs])
    results.put("validate.command", figure)
    log(
        f"  cold orchestrate validate: {fmt_s(figure['median'])} whole process "
        f"(validate stage {fmt_s(figure['stages'].get('validate'))}, units in the "
        f"{figure['executor']})"
    )
    stages = ("--stages", "validate")
    for label, args in (("ray1", RAY1), ("ray2", RAY2)):
        what = f"validate (after collect+dependency), {label}"
        runs = cold_runs(project, options, f"validate-{label}", (*stages, *args), what)
        results.put(
            f"validate.{label}", runs_figure(runs, lambda r: r.stage_seconds.get("validate"))
        )
        log(f"  validate stage, {label}: {results.get(f'validate.{label}'):.2f} s")
    fraction = options.per_rule_fraction
    if fraction is None:
        fraction = 1.0 if project.size <= 10_000 else 0.02
    sample = validation_sample(project, fraction)
    log(
        f"  in-process baselines on {len(sample['big'])} large files + {len(sample['small'])} of "
        f"{sample['small_total']} other files"
    )
    engine = time_validation(project, sample, per_rule=False)
    results.put(
        "validate.engine_inprocess", {"median": engine["seconds"], **engine, "fraction": fraction}
    )
    log(f"  engine in one process: {engine['seconds']:.2f} s")
    per_rule = time_validation(project, sample, per_rule=True)
    results.put(
        "validate.per_rule", {"median": per_rule["seconds"], **per_rule, "fraction": fraction}
    )
    log(
        f"  per-rule (ArtEase 1.x) in one process: {per_rule['seconds']:.2f} s"
        + (" (extrapolated)" if per_rule["extrapolated"] else "")
    )
    ensure_floor(project, results, options, "xml1", "floor.xml_parse.p1")
    ensure_floor(project, results, options, "p2", "floor.read_parse.p2")


# -- pack ------------------------------------------------------------------------------------------

PACK_PATHS = (500, 5000)


@section("pack")
def packing(project: Project, results: SizeResults, options: Options) -> None:
    """`pack` in this process on the project's cooked assets, with layouts listing 500 and
    5,000 asset paths explicitly (benchmarks/layouts.py)."""
    from layouts import explicit_layout, load_pack_inputs, time_pack

    inputs = load_pack_inputs(project)
    log(
        f"  collected in this process ({inputs.collect_s:.1f} s): {len(inputs.cooked):,} "
        "cooked assets"
    )
    repeat = max(3, options.repeat)  # in-process and short: never fewer than three runs
    for count in PACK_PATHS:
        layout = explicit_layout(inputs.cooked, count)
        figure = time_pack(inputs, layout, repeat)
        results.put(f"pack.explicit.{count}", figure)
        log(
            f"  pack, {figure['paths']:,} explicit paths in {figure['rules']} rules: "
            f"{figure['median'] * 1000:.0f} ms ({figure['cooked']:,} cooked assets, "
            f"{figure['bundles']} bundles)"
        )
        if layout.paths < count:
            results.notes.append(
                f"pack: the project cooks {layout.paths:,} assets, fewer than {count:,}: the "
                f"layout of {count:,} paths lists all {layout.paths:,}"
            )


# -- output ------------------------------------------------------------------------------------------


@section("write+archive+hash vs zstd")
def output(project: Project, results: SizeResults, options: Options) -> None:
    if results.get("cold.ray2") is None:
        cold_builds(project, results, options)
    payloads = results.figures.get("output.payloads")
    if not payloads:
        raise BenchError("no payloads were dumped from a cold build")
    if options.tools.get("zstd"):
        from pathlib import Path

        values = [zstd_time(Path(payloads["dir"])) for _ in range(options.repeat)]
        results.put(
            "output.zstd", timed_figure(values, bytes=payloads["bytes"], files=payloads["files"])
        )
        log(
            f"  zstd -3 -T1 over {payloads['bytes'] / 2**20:.0f} MB in {payloads['files']} "
            f"files: {median(values):.2f} s"
        )
    else:
        results.notes.append("zstd not available: the zstd throughput figure is missing")


# -- the Cocos source --------------------------------------------------------------------------------


@section("cocos")
def cocos(project: Project, results: SizeResults, options: Options) -> None:
    """A generated Cocos Creator project of the same size: cold (Ray, 2 workers), no-op, and one
    edited sprite frame, next to the Messiah figures."""
    cocos_project = ensure_cocos_project(project.size, project.seed)
    results.put("cocos.project", cocos_project.info())
    runs = repeat_runs(
        options.repeat_cold,
        lambda i: run_orchestrate(
            bench_build_file(cocos_project, "cocos-cold-ray2", shared_paths=options.shared_paths),
            *RAY2,
            timeout=options.timeout,
        ),
        "Cocos cold build, ray2",
    )
    results.put("cocos.cold.ray2", runs_figure(runs, lambda r: r.engine_s))
    build = _warm_build(cocos_project, "cocos-cold-ray2", (), options)
    runs = repeat_runs(
        options.repeat,
        lambda i: run_orchestrate(build, timeout=options.timeout),
        "Cocos no-op rerun",
    )
    results.put("cocos.noop", runs_figure(runs, lambda r: r.wall))
    target = pick_cocos_edit_target(cocos_project)

    def one(i: int):
        with edited(cocos_project, target, change_trim(i + 1)):
            return run_orchestrate(build, timeout=options.timeout)

    runs = repeat_runs(options.repeat, one, "Cocos, one edited sprite frame (trimX)")
    figure = runs_figure(runs, lambda r: r.wall)
    figure["what"] = f"trimX of {target.relative_to(cocos_project.root)}"
    figure["engine_median"] = median([r.engine_s for r in runs])
    results.put("cocos.edit", figure)
    run_orchestrate(build, timeout=options.timeout)  # leave the cache matching the files


# -- the build report --------------------------------------------------------------------------------


@section("report page")
def report_page(project: Project, results: SizeResults, options: Options) -> None:
    """The HTML report of a local build: its size, the renderer's seconds (content made afresh,
    and kept from the last run), and a headless Chromium opening it, clicking the largest
    bundle and searching."""
    import browser

    name = "report-local"
    build = bench_build_file(project, name, fresh=False, shared_paths=options.shared_paths)
    out = output_dir(project, name)
    if not (out / "manifest.json").is_file():
        log("  building (local executor) for the report")
        run_orchestrate(build, *LOCAL, timeout=options.timeout)
    run = run_orchestrate(build, *LOCAL, timeout=options.timeout)  # the page as a rerun writes it
    fresh = [browser.render_seconds(out, fresh=True) for _ in range(options.repeat)]
    results.put("report.render", timed_figure(fresh))
    kept = [browser.render_seconds(out, fresh=False) for _ in range(options.repeat)]
    results.put("report.render_kept", timed_figure(kept))
    log(f"  render: {median(fresh):.2f} s afresh, {median(kept):.2f} s with the kept content")
    page = out / browser.PAGE
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    results.put(
        "report.page_bytes",
        {
            "median": page.stat().st_size,
            "assets": len(manifest["assets"]),
            "bundles": len(manifest["bundles"]),
            "noop_wall": run.wall,
        },
    )
    log(
        f"  page: {page.stat().st_size / 2**20:.2f} MB for {len(manifest['assets']):,} assets in "
        f"{len(manifest['bundles']):,} bundles"
    )
    opened = browser.open_page(page, max(options.repeat, 1), search="no-such-asset-zz")
    results.put("report.open", opened)
    log(
        f"  open in headless Chromium: {opened['median']:.2f} s to drawn "
        f"(load event {opened['load_median']:.2f} s); click the largest bundle "
        f"{opened['click_median'] * 1000:.0f} ms; a search over every asset "
        f"{opened['search_median'] * 1000:.0f} ms"
    )
