"""The benchmark suite: every figure of the performance issues, on generated projects.

    python benchmarks/run_all.py --sizes 10000,100000 --repeat 3
    python benchmarks/run_all.py --sizes 10000            # quick mode, a few minutes

Sets up what it needs (`ninja`, `zstd`: installed with apt-get when missing and run as root;
a figure is skipped with a note otherwise), generates the projects once under benchmarks/work/
(git-ignored; reused for the same size and seed), measures every figure `--repeat` times
(medians), writes benchmarks/results/<date>.json and regenerates docs/benchmarks.md with the
targets marked met or missed. Results are written after every section, so a long run can be
watched (and a partial one is still recorded).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import common
import farm
import figures as F
import report

SECTIONS = (
    "floors",
    "cold",
    "output",
    "noop",
    "edits",
    "watch",
    "collect",
    "validate",
    "pack",
    "cocos",
    "report",
    "fresh",
    "scaling",
)
# The name each section records its failure under (figures.section).
SECTION_ERRORS = {
    "floors": "floors",
    "cold": "cold builds",
    "output": "write+archive+hash",
    "noop": "no-op",
    "edits": "edits",
    "watch": "watch",
    "collect": "collect+dependency",
    "validate": "validation",
    "pack": "pack",
    "cocos": "cocos",
    "report": "report page",
    "fresh": "fresh checkout",
    "scaling": "scaling",
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default="10000,100000",
        help="comma-separated project sizes (resources); default 10000,100000",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (medians)")
    parser.add_argument(
        "--repeat-cold",
        type=int,
        default=None,
        help="runs per cold-build figure (default: --repeat)",
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of: {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--per-rule-fraction",
        type=float,
        default=None,
        help="fraction of the small files the in-process validation baselines "
        "check (default: all up to 10,000 resources, else 0.02; the rest "
        "is extrapolated and labelled so)",
    )
    parser.add_argument(
        "--timeout", type=float, default=4 * 3600.0, help="seconds any one orchestrate run may take"
    )
    parser.add_argument(
        "--shared-paths",
        choices=("true", "false"),
        default="true",
        help="executor.shared_paths of the benchmark build files (default true: "
        "Ray workers read the project from disk; see docs/benchmarks.md)",
    )
    parser.add_argument("--regenerate", action="store_true", help="regenerate the projects")
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    parser.add_argument("--no-doc", action="store_true", help="do not rewrite docs/benchmarks.md")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="start from today's stored figures of each size and replace only "
        "those the chosen --sections measure (e.g. rerun the floors)",
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections: {', '.join(sorted(unknown))}")

    wanted = ("ninja", "zstd") + (("chromium", "chromedriver") if "report" in sections else ())
    tools = common.ensure_tools(wanted, install=not args.no_install)
    common.compile_bytecode()
    options = F.Options(
        repeat=args.repeat,
        repeat_cold=args.repeat_cold or args.repeat,
        timeout=args.timeout,
        per_rule_fraction=args.per_rule_fraction,
        tools=tools,
        shared_paths=args.shared_paths == "true",
    )
    meta = {
        "command": "python benchmarks/run_all.py "
        + " ".join(map(shlex.quote, sys.argv[1:] if argv is None else argv)),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "repeat": options.repeat,
        "repeat_cold": options.repeat_cold,
        "sections": sections,
        "shared_paths": options.shared_paths,
        "machine": common.machine_info(),
    }
    date = time.strftime("%Y-%m-%d")
    all_results: dict[int, common.SizeResults] = {}

    def save(partial: bool) -> None:
        meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
        meta["partial"] = partial
        path = common.write_results(meta, all_results, date)
        if not args.no_doc:
            current = {
                str(size): {
                    "meta": meta,
                    "figures": r.figures,
                    "notes": r.notes,
                    "errors": r.errors,
                }
                for size, r in all_results.items()
            }
            report.write_doc(current)
        return path

    for size in sizes:
        results = common.SizeResults(size)
        if args.merge:
            stored = common.stored_results(date).get(str(size))
            if stored:
                results.figures.update(stored.get("figures", {}))
                results.notes.extend(stored.get("notes", []))
                results.errors.update(stored.get("errors", {}))
                previous = stored.get("meta", {})
                history = previous.get("history_by_size", {}).get(str(size)) or [
                    common.invocation_summary(previous)
                ]
                meta.setdefault("history_by_size", {})[str(size)] = list(history)
        all_results[size] = results
        project = common.ensure_project(size, args.seed, args.regenerate)
        results.put("project", project.info())
        steps = {
            "floors": lambda: F.floors(project, results, options),
            "cold": lambda: F.cold_builds(project, results, options),
            "output": lambda: F.output(project, results, options),
            "noop": lambda: F.noop(project, results, options),
            "edits": lambda: F.edits(project, results, options),
            "watch": lambda: F.watching(project, results, options),
            "collect": lambda: F.collect(project, results, options),
            "validate": lambda: F.validation(project, results, options),
            "pack": lambda: F.packing(project, results, options),
            "cocos": lambda: F.cocos(project, results, options),
            "report": lambda: F.report_page(project, results, options),
            "fresh": lambda: farm.fresh_checkouts(project, results, options),
            "scaling": lambda: farm.scaling(project, results, options),
        }
        for name in SECTIONS:
            if name in sections:
                for stale in [k for k in results.errors if k.startswith(SECTION_ERRORS[name])]:
                    del results.errors[stale]
                steps[name]()
                save(partial=True)
        path = save(partial=size != sizes[-1])
        print(f"\n==== {size:,} resources ====")
        report.print_summary(results.figures)
        for name, error in results.errors.items():
            print(f"not measured: {name}: {error}")
    print(
        f"\nresults: {path.relative_to(common.ROOT)}"
        + ("" if args.no_doc else f"; table: {common.DOC.relative_to(common.ROOT)}")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
