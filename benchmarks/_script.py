"""Command-line plumbing shared by the bench_*.py scripts (each runs a few sections)."""

from __future__ import annotations

import argparse
import json
import sys

import common
import figures as F
import report


def run_sections(description: str, sections, argv=None, needs_tools=()) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--assets", type=int, default=10000, help="project size (resources)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (medians)")
    parser.add_argument("--repeat-cold", type=int, default=None)
    parser.add_argument("--per-rule-fraction", type=float, default=None)
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON")
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    args = parser.parse_args(argv)
    tools = common.ensure_tools(needs_tools, install=not args.no_install) if needs_tools else {}
    options = F.Options(
        repeat=args.repeat,
        repeat_cold=args.repeat_cold or args.repeat,
        per_rule_fraction=args.per_rule_fraction,
        tools=tools,
    )
    project = common.ensure_project(args.assets, args.seed)
    results = common.SizeResults(args.assets)
    results.put("project", project.info())
    for section in sections:
        section(project, results, options)
    if args.json:
        json.dump(
            {"figures": results.figures, "notes": results.notes, "errors": results.errors},
            sys.stdout,
            indent=1,
            default=str,
        )
        print()
    else:
        report.print_summary(results.figures)
        for note in results.notes:
            print(f"note: {note}")
    for name, error in results.errors.items():
        print(f"not measured: {name}: {error}", file=sys.stderr)
    return 1 if results.errors else 0
