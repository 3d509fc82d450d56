"""Profile the runs the incremental engine's targets are about, with py-spy: the cold build, the
no-op rerun, one edited attribute file and a fresh checkout (a copy of the project at another
path, no build state, the same warm cache folder), each `orchestrate run build.yaml` as a user
runs it (executor `auto`, a fresh process through benchmarks/runner.py `--stage-frames`).

    python benchmarks/profile_runs.py --size 100000
    python benchmarks/profile_runs.py --size 10000 --runs noop,one-edit --rate 200
    python benchmarks/profile_runs.py --size 10000 --runs rename,add-asset,delete-asset

Uses the suite's generated project (benchmarks/work/messiah-<size>-seed<seed>, generated when
missing) with a cache of its own (runs/profile, emptied first). Writes a text summary per run to
benchmarks/results/profiles/<date>-<size>-<run>.txt (time by stage, top functions by inclusive
and self time: benchmarks/profiles.py) and keeps py-spy's collapsed stacks beside the run's cache
(benchmarks/work/.../runs/profile/<run>.collapsed: flamegraph.pl and speedscope read them).
Needs py-spy (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import common
import profiles

RUNS = ("cold", "noop", "one-edit", "rename", "add-asset", "delete-asset", "fresh")
TITLES = {
    "cold": "cold build (empty cache)",
    "noop": "no-op rerun (nothing changed since the cold build)",
    "one-edit": "one edited attribute file",
    "rename": "one Item renamed in a resource.repository",
    "add-asset": "one asset added (its folder and its Item)",
    "delete-asset": "one asset deleted (its folder and its Item)",
    "fresh": "a fresh checkout at another path with the warm cache folder (no build state)",
}
PROFILES = common.RESULTS / "profiles"


def find_py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).is_file():
        raise common.BenchError("py-spy is not installed: pip install -e '.[bench]'")
    return found


def shown(path: Path) -> Path:
    """`path` relative to the repository when it is inside it."""
    return path.relative_to(common.ROOT) if path.is_relative_to(common.ROOT) else path


def size_label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def profile_run(
    py_spy: str, build: Path, run_dir: Path, what: str, rate: int
) -> tuple[common.Run, list[profiles.Stack], Path]:
    """One `orchestrate run` under `py-spy record`: the run and its stacks."""
    collapsed = run_dir / f"{what}.collapsed"
    result = run_dir / f"{what}.run.json"
    result.unlink(missing_ok=True)
    command = [
        py_spy,
        "record",
        "--format",
        "raw",
        "--function",
        "--threads",
        "--idle",
        "--subprocesses",
        "--rate",
        str(rate),
        "--output",
        str(collapsed),
        "--",
        *common.runner_command(result, build, "run", (), ("--stage-frames",)),
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=build.parent, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if not result.is_file() or not collapsed.is_file():
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise common.BenchError(f"the profiled {what} run failed ({done.returncode}):\n{tail}")
    run = common.Run.from_runner(wall, json.loads(result.read_text(encoding="utf-8")))
    if run.exit_code not in (0, 1):
        raise common.BenchError(f"the profiled {what} run exited {run.exit_code}")
    return run, profiles.parse_collapsed(collapsed.read_text(encoding="utf-8")), collapsed


def header(
    what: str, detail: str, project: common.Project, build: Path, run: common.Run, rate: int
) -> list[str]:
    machine = common.machine_info()
    git = machine.get("git", {})
    spy = common.tool_version(find_py_spy(), "--version")
    stages = " · ".join(
        f"{s['name']} {common.fmt_s(s['seconds'])} ({s['built']}/{s['units']} units run)"
        for s in run.stages
    )
    return [
        f"py-spy profile: {TITLES[what]}{detail}",
        f"`orchestrate run {build.name}` (executor auto), {project.size:,} resources "
        f"(seed {project.seed}), {machine['cores']} cores",
        f"recorded {time.strftime('%Y-%m-%dT%H:%M:%S')}, commit {git.get('commit', '?')} "
        f"(+{git.get('modified_files', '?')} modified files), sources digest {run.code}; "
        f"{spy} record --rate {rate} --idle --function --threads --subprocesses",
        f"process: {run.wall:.2f} s under py-spy; run_build {common.fmt_s(run.run_build_s)}; "
        f"exit {run.exit_code}; units in the {run.executor}; files re-hashed by the scan: "
        f"{run.hashed_files}; scan {common.fmt_s(run.scan_seconds)}",
        f"stages (RunResult): {stages}",
    ]


def edit_of_run(project: common.Project, what: str) -> tuple[AbstractContextManager, str]:
    """The edit a profiled run starts from (none for the cold and no-op runs), and its detail."""
    targets = common.pick_edit_targets(project)
    texture = targets.texture_xml.relative_to(project.root)
    if what == "one-edit":
        edit = common.edited(project, targets.texture_xml, common.change_width(1))
        return edit, f" (Width of {texture})"
    if what == "rename":
        change = common.change_item_name(targets.guid, 1)
        return common.edited(project, targets.repository, change), f" ({targets.guid})"
    if what == "add-asset":
        return common.asset_added(project, targets, 1), f" (a copy of {texture})"
    if what == "delete-asset":
        doomed = common.deletable_textures(project, targets, 1)[0]
        detail = f" ({doomed.parent.relative_to(project.root)})"
        return common.asset_deleted(project, targets.repository, doomed), detail
    return nullcontext(), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10000, help="project size (resources)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--runs", default=",".join(RUNS), help=f"comma-separated subset of: {', '.join(RUNS)}"
    )
    parser.add_argument("--rate", type=int, default=100, help="samples per second")
    parser.add_argument("--top", type=int, default=40, help="functions in the top lists")
    parser.add_argument(
        "--out", type=Path, default=PROFILES, help="folder of the summaries (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    unknown = set(runs) - set(RUNS)
    if unknown:
        parser.error(f"unknown runs: {', '.join(sorted(unknown))}")
    py_spy = find_py_spy()
    common.compile_bytecode()
    project = common.ensure_project(args.size, args.seed)
    build = common.bench_build_file(project, "profile")  # an empty cache and output of its own
    run_dir = build.parent / "runs" / "profile"
    args.out.mkdir(parents=True, exist_ok=True)
    date = time.strftime("%Y-%m-%d")
    written = []
    if "cold" not in runs:
        common.log("warming the cache (not profiled)")
        common.run_orchestrate(build)
    for what in RUNS:
        if what not in runs:
            continue
        common.log(f"profiling the {what} run")
        edit, detail = edit_of_run(project, what)
        target = build
        if what == "fresh":
            target = common.agent_checkout(project, "profile-fresh", run_dir / "cache", "out")
        with edit:
            run, stacks, collapsed = profile_run(py_spy, target, run_dir, what, args.rate)
        if what not in ("cold", "noop", "fresh"):
            common.run_orchestrate(build)  # the cache matches the restored files again
        lines = header(what, detail, project, target, run, args.rate)
        lines.append(f"collapsed stacks: {shown(collapsed)}")
        text = profiles.render(profiles.summarise(stacks, args.rate), lines, top=args.top)
        path = args.out / f"{date}-{size_label(args.size)}-{what}.txt"
        path.write_text(text, encoding="utf-8")
        written.append(path)
        common.log(f"  {run.wall:.2f} s under py-spy; summary: {shown(path)}")
    for path in written:
        print(shown(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
