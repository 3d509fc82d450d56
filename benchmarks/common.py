"""Shared machinery of the benchmark suite (run_all.py and the bench_*.py scripts).

Everything here measures from the outside: `orchestrate` runs in a fresh interpreter through
`benchmarks/runner.py` (the console script's `main`, with `run_build` wrapped to keep its
`RunResult`), so each figure pays what a user pays, and module-level state (an initialised Ray, a
warm lxml, the stat cache in memory) never leaks from one run into the next. Floors (stat of every
file, read + parse of every file, ninja, zstd) run beside them on the same project in the same
invocation, so ratios are taken between figures measured minutes apart on the same machine.

Terms (shared/spec/pipeline.md, "Benchmark terms"): the *floor* is the time to walk the project,
read every input once and lxml-parse every XML file once, on as many processes as the run it is
compared with. Ray's startup is reported on its own and left out of cold-build ratios.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
WORK = BENCH / "work"  # git-ignored: generated projects, caches, outputs
RESULTS = BENCH / "results"
DOC = ROOT / "docs" / "benchmarks.md"
RUNNER = BENCH / "runner.py"
PY = sys.executable
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

XML_NAMES = ("resource.repository", "resource.xml", "texture.xml", "resource")
XML_SUFFIXES = (".iworld", ".ilevel")
RAY_RETRY_MARKERS = ("When connecting to an existing cluster",)
DEFAULT_TIMEOUT = 4 * 3600.0


class BenchError(RuntimeError):
    """A figure could not be measured (the message says why)."""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# -- the machine and its tools ---------------------------------------------------------------------


def machine_info() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import psutil

    def ver(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    git = {}
    try:
        git["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        git["modified_files"] = len(dirty)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "cpu": cpu,
        "os": platform.platform(),
        "python": platform.python_version(),
        "ray": ver("ray"),
        "lxml": ver("lxml"),
        "zstandard": ver("zstandard"),
        "orchestrate": ver("orchestrate"),
        "git": git,
        "ninja": tool_version("ninja", "--version"),
        "zstd": tool_version("zstd", "-V"),
    }


def tool_version(tool: str, flag: str) -> str | None:
    path = shutil.which(tool)
    if not path:
        return None
    out = subprocess.run([path, flag], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else "?"


APT_PACKAGES = {
    "ninja": "ninja-build",
    "zstd": "zstd",
    "chromium": "chromium",
    "chromedriver": "chromium-driver",
}


def ensure_tools(tools=("ninja", "zstd"), install: bool = True) -> dict[str, str | None]:
    """Path of each command-line tool; installs missing ones with apt-get when we are root."""
    missing = [t for t in tools if not shutil.which(t)]
    if (
        missing
        and install
        and hasattr(os, "geteuid")
        and os.geteuid() == 0
        and shutil.which("apt-get")
    ):
        packages = [APT_PACKAGES[t] for t in missing]
        log(f"installing {', '.join(packages)} with apt-get")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        done = subprocess.run(
            ["apt-get", "install", "-y", *packages], env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True)
            subprocess.run(
                ["apt-get", "install", "-y", *packages], env=env, capture_output=True, text=True
            )
    found = {t: shutil.which(t) for t in tools}
    for tool, path in found.items():
        if path is None:
            log(f"note: `{tool}` is not available; the figures that need it are skipped")
    return found


# -- generated projects ----------------------------------------------------------------------------


@dataclass
class Project:
    size: int
    seed: int
    dir: Path  # benchmarks/work/messiah-<size>-seed<seed>
    generated_s: float | None = None  # seconds to generate, when it was generated now

    @property
    def root(self) -> Path:
        return self.dir / "project"

    @property
    def rules(self) -> Path:
        return self.dir / "rules.yaml"

    def info(self) -> dict:
        data = json.loads((self.dir / "generated.json").read_text(encoding="utf-8"))
        return {
            "assets": data["assets"],
            "seed": data["seed"],
            **data["counts"],
            "generated_s": self.generated_s,
        }


def compile_bytecode() -> None:
    """Byte-compile the package, as `pip install .` does when it installs it.

    An editable install (`pip install -e`, the suite's) leaves compiling to the first import,
    and with PYTHONDONTWRITEBYTECODE set (this machine's environment sets it) every run compiled
    the ~120 modules it imports again: 0.2 s of each run, the no-op's included, that no
    installed copy pays. `compileall` writes the caches whatever that variable says.
    """
    import compileall

    for package in ("orchestrator", "stages"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def orchestrate_command() -> list[str]:
    script = Path(PY).with_name("orchestrate")
    if script.exists():
        return [str(script)]
    return [
        PY,
        "-c",
        "import sys; from orchestrator.shell.cli import entry; sys.argv[0] = 'orchestrate'; entry()",
    ]


def ensure_project(size: int, seed: int = 1, regenerate: bool = False) -> Project:
    """The project of `size` resources, generated once under benchmarks/work and reused."""
    return _ensure_generated("messiah", (), f"{size} resources", size, seed, regenerate)


def ensure_cocos_project(size: int, seed: int = 1, regenerate: bool = False) -> Project:
    """The Cocos Creator project of `size` assets (`orchestrate generate --engine cocos`),
    generated once under benchmarks/work and reused."""
    what = f"a Cocos project of {size} assets"
    return _ensure_generated("cocos", ("--engine", "cocos"), what, size, seed, regenerate)


def _ensure_generated(
    kind: str, engine: tuple[str, ...], what: str, size: int, seed: int, regenerate: bool
) -> Project:
    """benchmarks/work/<kind>-<size>-seed<seed>, reused when its generated.json says it is the
    same size and seed, else generated with `orchestrate generate` (and timed)."""
    dest = WORK / f"{kind}-{size}-seed{seed}"
    project = Project(size, seed, dest)
    restore_leftover_edits(project)
    meta = dest / "generated.json"
    if not regenerate and meta.is_file() and (dest / "build.yaml").is_file():
        data = json.loads(meta.read_text(encoding="utf-8"))
        if data.get("assets") == size and data.get("seed") == seed and project.root.is_dir():
            log(f"reusing {dest.relative_to(ROOT)}")
            return project
    log(f"generating {what} (seed {seed}) in {dest.relative_to(ROOT)}")
    if dest.exists():
        shutil.rmtree(dest)
    started = time.perf_counter()
    command = [*orchestrate_command(), "generate", str(dest), *engine, "--assets", str(size)]
    subprocess.run([*command, "--seed", str(seed)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    project.generated_s = time.perf_counter() - started
    return project


def bench_build_file(
    project: Project,
    name: str,
    fresh: bool = True,
    shared_paths: bool = True,
    cache: Path | dict | None = None,
) -> Path:
    """A copy of the project's build.yaml with its own cache and output folders (or the given
    `cache`: a folder, or the `cache:` mapping of a cache server).

    `executor.shared_paths: true` (workers read project files from disk: the project is on this
    machine) — see docs/benchmarks.md for why the default (`false`) is not measured.
    """
    import yaml

    raw = yaml.safe_load((project.dir / "build.yaml").read_text(encoding="utf-8"))
    run_dir = project.dir / "runs" / name
    if fresh and run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    raw["cache"] = str(run_dir / "cache") if cache is None else _cache_setting(cache)
    raw["output"] = str(run_dir / "out")
    executor = dict(raw.get("executor") or {})
    executor["shared_paths"] = shared_paths
    raw["executor"] = executor
    path = project.dir / f"bench-{name}.yaml"  # beside build.yaml: `project:` and rules resolve
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _cache_setting(cache: Path | dict) -> str | dict:
    return cache if isinstance(cache, dict) else str(cache)


def output_dir(project: Project, name: str) -> Path:
    return project.dir / "runs" / name / "out"


def agent_checkout(
    project: Project, name: str, cache: Path | dict, output: str, shared_paths: bool = True
) -> Path:
    """The build file of another agent's checkout of the project: a copy of it at another path
    (runs/<name>/checkout: the project's files hard-linked, made afresh on each call, so no
    file table or build state of an earlier one is found), building into `output` (relative
    to the copy) with `cache` (a folder another agent's builds filled, or the `cache:` mapping
    of a cache server)."""
    import yaml

    checkout = project.dir / "runs" / name / "checkout"
    shutil.rmtree(checkout, ignore_errors=True)
    checkout.mkdir(parents=True)
    shutil.copytree(project.root, checkout / "project", symlinks=True, copy_function=os.link)
    for file in ("build.yaml", "rules.yaml"):
        shutil.copy2(project.dir / file, checkout / file)
    raw = yaml.safe_load((project.dir / "build.yaml").read_text(encoding="utf-8"))
    raw["cache"] = _cache_setting(cache)
    raw["output"] = output
    raw["executor"] = {**(raw.get("executor") or {}), "shared_paths": shared_paths}
    path = checkout / f"agent-{output.replace('/', '-')}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# -- running orchestrate ---------------------------------------------------------------------------


@dataclass
class Run:
    """One `orchestrate` process."""

    wall: float  # the whole process, as a user waits for it
    exit_code: int
    run_build_s: float | None
    imports_s: float | None
    ray_imported: bool
    ray_startup: float | None
    stages: list[dict]
    driver_peak_rss: int | None
    workers_peak_rss: int | None
    code: str | None = None  # digest of orchestrator/ and stages/ as the run imported them
    driver_peak_private: int | None = None  # RSS less shared pages (Ray's object store)
    hashed_files: int | None = None  # files the scan read again (signature moved)
    scan_seconds: float | None = None
    cpu: dict | None = None  # runner.py --cpu: driver_s, all_s (CPU seconds during run_build)

    @property
    def stage_seconds(self) -> dict[str, float]:
        return {s["name"]: s["seconds"] for s in self.stages}

    @property
    def built(self) -> dict[str, int]:
        return {s["name"]: s["built"] for s in self.stages if s["built"]}

    @property
    def executor(self) -> str:
        """Where the units ran: `ray` when this run imported Ray, else `driver`."""
        return "ray" if self.ray_imported else "driver"

    @property
    def engine_s(self) -> float | None:
        """run_build's seconds without Ray's startup (the engine reports the startup inside the
        stage that first needed Ray; it is taken out here)."""
        if self.run_build_s is None:
            return None
        return self.run_build_s - (self.ray_startup or 0.0)

    def peak_total(self) -> int:
        return max((s["peak_rss"] for s in self.stages), default=0)

    def to_json(self) -> dict:
        return {
            "wall": self.wall,
            "exit_code": self.exit_code,
            "run_build_s": self.run_build_s,
            "engine_s": self.engine_s,
            "imports_s": self.imports_s,
            "ray_imported": self.ray_imported,
            "ray_startup": self.ray_startup,
            "driver_peak_rss": self.driver_peak_rss,
            "driver_peak_private": self.driver_peak_private,
            "workers_peak_rss": self.workers_peak_rss,
            "peak_rss_total": self.peak_total(),
            "hashed_files": self.hashed_files,
            "scan_seconds": self.scan_seconds,
            "cpu": self.cpu,
            "code": self.code,
            "stages": self.stages,
        }

    @classmethod
    def from_runner(cls, wall: float, data: dict) -> Run:
        """A run from what benchmarks/runner.py wrote."""
        return cls(
            wall,
            data["exit_code"],
            data["run_build_s"],
            data["imports_s"],
            data["ray_imported"],
            data["ray_startup"],
            data["stages"],
            data["driver_peak_rss"],
            data["workers_peak_rss"],
            data.get("code"),
            data.get("driver_peak_private"),
            data.get("hashed_files"),
            data.get("scan_seconds"),
            data.get("cpu"),
        )


def runner_command(
    out: Path, build_file: Path, command: str, args: tuple[str, ...], flags: tuple[str, ...] = ()
) -> list[str]:
    """The process that runs `orchestrate COMMAND BUILD ARGS` through benchmarks/runner.py,
    which writes what happened to `out` (`run` logs as JSON: nothing is drawn)."""
    logging = ("--log-format", "json") if command == "run" else ()
    return [PY, str(RUNNER), str(out), *flags, "--", command, str(build_file), *logging, *args]


def run_orchestrate(
    build_file: Path,
    *args: str,
    command: str = "run",
    timeout: float = DEFAULT_TIMEOUT,
    attempts: int = 3,
    flags: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Run:
    """`orchestrate COMMAND BUILD ARGS` in a fresh interpreter (`run` with `--log-format json`);
    exit 0 or 1 is ok (generated projects carry planted rule failures, so a full build and
    `validate` exit 1). `flags` are runner.py's (`--cpu`); `env` is added to the process's."""
    for attempt in range(attempts):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "run.json"
            started = time.perf_counter()
            done = subprocess.run(
                runner_command(out, build_file, command, args, flags),
                cwd=build_file.parent,
                env=None if env is None else {**os.environ, **env},
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            wall = time.perf_counter() - started
            if done.returncode in (0, 1) and out.is_file():
                return Run.from_runner(wall, json.loads(out.read_text(encoding="utf-8")))
            tail = "\n".join((done.stderr or "").strip().splitlines()[-8:])
            if (
                any(marker in (done.stderr or "") for marker in RAY_RETRY_MARKERS)
                and attempt + 1 < attempts
            ):
                log(
                    "  Ray found another cluster on this machine (see docs/benchmarks.md); "
                    "retrying in 20 s"
                )
                time.sleep(20)
                continue
            raise BenchError(
                f"orchestrate {command} {' '.join(args)} exited {done.returncode}:\n{tail}"
            )
    raise AssertionError("unreachable")


def repeat_runs(count: int, make: Callable[[int], Run], label: str) -> list[Run]:
    runs = []
    for i in range(count):
        run = make(i)
        log(
            f"  {label} #{i + 1}: wall {run.wall:.2f} s, engine {fmt_s(run.engine_s)}"
            + (f", ray startup {run.ray_startup:.2f} s" if run.ray_startup else "")
        )
        runs.append(run)
    return runs


def fmt_s(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.2f} s"


# -- floors ----------------------------------------------------------------------------------------


def walk_files(root: Path) -> list[str]:
    """Every file below root (absolute paths), by scandir; links to folders not followed."""
    found, stack = [], [str(root)]
    while stack:
        with os.scandir(stack.pop()) as listing:
            for entry in listing:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                else:
                    found.append(entry.path)
    return found


def is_xml(path: str) -> bool:
    name = path[path.rfind("/") + 1 :]
    return name in XML_NAMES or name.endswith(XML_SUFFIXES)


def stat_floor(root: Path) -> tuple[float, int]:
    """Seconds to walk the project and stat every file (what a no-op must at least do)."""
    started = time.perf_counter()
    files = walk_files(root)
    for path in files:
        os.stat(path)
    return time.perf_counter() - started, len(files)


def _read_parse(paths: list[str], parse: bool = True) -> tuple[int, int]:
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    size = parsed = 0
    for path in paths:
        with open(path, "rb") as handle:
            data = handle.read()
        size += len(data)
        if parse and is_xml(path):
            etree.fromstring(data, parser)
            parsed += 1
    return size, parsed


def read_parse_floor(
    root: Path, processes: int = 1, xml_only: bool = False, read_only: bool = False
) -> dict:
    """Walk, read every file (or only the XML ones) once, lxml-parse every XML file once.

    With processes > 1 the files are dealt round-robin to a fork pool of that size (its start-up
    is counted: a real run pays for its workers too).
    """
    started = time.perf_counter()
    files = walk_files(root)
    if xml_only:
        files = [f for f in files if is_xml(f)]
    if processes <= 1:
        size, parsed = _read_parse(files, parse=not read_only)
    else:
        import multiprocessing

        chunks = [files[i :: processes * 8] for i in range(processes * 8)]
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            parts = pool.map(_read_parse, chunks, chunksize=1)
        size, parsed = sum(p[0] for p in parts), sum(p[1] for p in parts)
    return {
        "seconds": time.perf_counter() - started,
        "files": len(files),
        "bytes": size,
        "xml_parsed": parsed,
        "processes": processes,
    }


# -- ninja ---------------------------------------------------------------------------------------


def _ninja_escape(path: str) -> str:
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:").replace("\n", "$\n")


def prepare_ninja(project: Project) -> tuple[Path, int]:
    """A build.ninja with one edge per asset: a resource folder's files, each repository, each
    world and each level (other files: one edge per folder), each edge writing a stamp file.

    The edges are `generator` edges and the stamps are created here, so that the manifest counts
    as built without spawning one process per edge; ninja's no-op then does exactly its usual
    work: load the manifest and the log, stat every input and every stamp, compare mtimes.
    """
    ninja_dir = project.dir / "runs" / "ninja"
    stamps = ninja_dir / "stamps"
    if ninja_dir.exists():
        shutil.rmtree(ninja_dir)
    stamps.mkdir(parents=True)
    groups: dict[str, list[str]] = {}
    for path in sorted(walk_files(project.root)):
        name = path[path.rfind("/") + 1 :]
        key = (
            path
            if (name == "resource.repository" or name.endswith(XML_SUFFIXES))
            else path[: path.rfind("/")]
        )
        groups.setdefault(key, []).append(path)
    lines = [
        "ninja_required_version = 1.5",
        "",
        "rule stamp",
        "  command = touch $out",
        "  description = STAMP $out",
        "  generator = 1",
        "",
    ]
    for number, (_key, inputs) in enumerate(groups.items()):
        lines.append(
            f"build stamps/{number}.stamp: stamp " + " ".join(_ninja_escape(p) for p in inputs)
        )
        (stamps / f"{number}.stamp").touch()
    (ninja_dir / "build.ninja").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ninja = shutil.which("ninja")
    subprocess.run([ninja, "-C", str(ninja_dir)], check=True, capture_output=True)  # settle
    return ninja_dir, len(groups)


def ninja_noop(ninja_dir: Path) -> float:
    ninja = shutil.which("ninja")
    started = time.perf_counter()
    done = subprocess.run([ninja, "-C", str(ninja_dir)], capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0 or "no work to do" not in done.stdout:
        raise BenchError(f"ninja's rerun was not a no-op: {done.stdout[-500:]}{done.stderr[-500:]}")
    return seconds


# -- edits (always restored; a backup survives an interrupted run) ---------------------------------

BACKUP_DIR = ".bench-backup"


def restore_leftover_edits(project: Project) -> None:
    backup = project.dir / BACKUP_DIR
    if not backup.is_dir():
        return
    for saved in backup.glob("*.moved"):  # a folder an interrupted run added or took away
        record = json.loads(saved.read_text(encoding="utf-8"))
        shutil.rmtree(record["added"], ignore_errors=True)
        if record["aside"]:
            shutil.move(record["aside"], record["added"])
        saved.unlink()
        log(f"restored {record['added']} left added or removed by an interrupted run")
    for saved in backup.glob("*.json"):
        record = json.loads(saved.read_text(encoding="utf-8"))
        target = Path(record["path"])
        target.write_bytes(bytes.fromhex(record["data"]))
        os.utime(target, ns=(record["atime_ns"], record["mtime_ns"]))
        saved.unlink()
        log(f"restored {target} left edited by an interrupted run")


@contextmanager
def edited(project: Project, path: Path, change: Callable[[bytes], bytes]):
    """Apply `change` to a project file; put the original bytes and mtime back afterwards."""
    original = path.read_bytes()
    st = path.stat()
    backup = project.dir / BACKUP_DIR
    backup.mkdir(exist_ok=True)
    record = backup / "edit.json"
    record.write_text(
        json.dumps(
            {
                "path": str(path),
                "data": original.hex(),
                "atime_ns": st.st_atime_ns,
                "mtime_ns": st.st_mtime_ns,
            }
        ),
        encoding="utf-8",
    )
    changed = change(original)
    if changed == original:
        raise BenchError(f"the edit of {path} changed nothing")
    try:
        path.write_bytes(changed)
        yield path
    finally:
        path.write_bytes(original)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        record.unlink(missing_ok=True)


@contextmanager
def folder_added(project: Project, folder: Path, files: dict[str, bytes]):
    """A new folder holding `files` (name → bytes) for the length of the block."""
    record = _folder_record(project, folder, None)
    try:
        folder.mkdir()
        for name, data in files.items():
            (folder / name).write_bytes(data)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        record.unlink(missing_ok=True)


@contextmanager
def folder_removed(project: Project, folder: Path):
    """`folder` taken out of the project (moved aside, mtimes kept) for the length of the block."""
    aside = project.dir / BACKUP_DIR / "removed-folder"
    shutil.rmtree(aside, ignore_errors=True)
    record = _folder_record(project, folder, aside)
    shutil.move(folder, aside)
    try:
        yield folder
    finally:
        shutil.move(aside, folder)
        record.unlink(missing_ok=True)


def _folder_record(project: Project, folder: Path, aside: Path | None) -> Path:
    """What restore_leftover_edits undoes if the run is interrupted inside the block."""
    backup = project.dir / BACKUP_DIR
    backup.mkdir(exist_ok=True)
    record = backup / "folder.moved"
    data = {"added": str(folder), "aside": str(aside) if aside else None}
    record.write_text(json.dumps(data), encoding="utf-8")
    return record


@dataclass
class EditTargets:
    texture_xml: Path  # a cooked texture (no source image) of the main repository
    guid: str
    repository: Path


def pick_edit_targets(project: Project) -> EditTargets:
    """Deterministic: the first texture (by path) under Repository/Characters without a source
    image, and the repository that lists it."""
    base = project.root / "Repository"
    for package in sorted(p for p in base.iterdir() if p.is_dir()):
        if not package.name.startswith("Characters"):
            continue
        for sub in sorted(package.rglob("texture.xml")):
            if not (sub.parent / "source.tga").exists():
                return EditTargets(sub, sub.parent.name, base / "resource.repository")
    for sub in sorted(base.rglob("texture.xml")):  # no character textures: any texture
        return EditTargets(sub, sub.parent.name, base / "resource.repository")
    raise BenchError("no texture to edit in the generated project")


def pick_cocos_edit_target(project: Project) -> Path:
    """Deterministic: the first image meta (by path) of the `shared` area, outside any auto
    atlas: editing its sprite frame re-parses one folder and re-cooks one asset."""
    for meta in sorted((project.root / "assets" / "shared").rglob("*.png.meta")):
        return meta
    raise BenchError("no image to edit in the generated Cocos project")


@contextmanager
def asset_added(project: Project, targets: EditTargets, k: int):
    """A new texture beside the edit target: a copy of its folder under a new GUID (another for
    each k, so no run finds the previous one's results in the cache) and its Item."""
    guid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"orchestrate-bench-added-{INVOCATION}-{k}"))
    source = targets.texture_xml.parent
    files = {p.name: p.read_bytes() for p in sorted(source.iterdir()) if p.is_file()}
    change = add_item_copy(targets.guid, guid, f"tex_bench_added_{INVOCATION}_{k}")
    folder = source.parent / guid
    with folder_added(project, folder, files), edited(project, targets.repository, change):
        yield


@contextmanager
def asset_deleted(project: Project, repository: Path, texture_xml: Path):
    """A texture no file refers to, gone: its folder and its Item."""
    guid = texture_xml.parent.name
    with (
        folder_removed(project, texture_xml.parent),
        edited(project, repository, remove_item(guid)),
    ):
        yield


#: Varies the index edits from one invocation of the suite to the next: an edit a previous
#: invocation made (the same name, the same GUID added or deleted) would find its results in the
#: action cache, and the figure would measure the cache rather than the rebuild.
INVOCATION = int(time.time())


def deletable_textures(project: Project, targets: EditTargets, count: int) -> list[Path]:
    """`count` textures of the edit target's package that no other file names (deleting one
    leaves no dangling reference), by path from a place that varies by invocation."""
    package = targets.texture_xml.parent.parent
    candidates = [p for p in sorted(package.glob("*/texture.xml")) if p != targets.texture_xml]
    mentions = dict.fromkeys((p.parent.name for p in candidates), 0)
    pattern = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    for path in project.root.rglob("*"):
        if path.suffix not in (".xml", ".repository", ".iworld", ".ilevel") or not path.is_file():
            continue
        for guid in pattern.findall(path.read_text(encoding="utf-8", errors="replace")):
            if guid in mentions and guid != path.parent.name:  # not its own attribute file
                mentions[guid] += 1
    found = [p for p in candidates if mentions[p.parent.name] == 1]  # its Item only
    if len(found) < count:
        raise BenchError(f"fewer than {count} unreferenced textures in {package}")
    start = INVOCATION % len(found)
    return (found[start:] + found[:start])[:count]


def change_trim(k: int) -> Callable[[bytes], bytes]:
    """A real value change in a sprite frame: `trimX` becomes k."""

    def change(data: bytes) -> bytes:
        return re.sub(rb'"trimX": \d+', f'"trimX": {k}'.encode(), data, count=1)

    return change


def change_width(k: int) -> Callable[[bytes], bytes]:
    """A real value change: Width + k (Width - k if that would pass the 2048 budget)."""

    def change(data: bytes) -> bytes:
        match = re.search(rb"<Width>(\d+)</Width>", data)
        width = int(match.group(1))
        new = width + k if width + k <= 2048 else width - k
        return data[: match.start(1)] + str(new).encode() + data[match.end(1) :]

    return change


def change_item_name(guid: str, k: int) -> Callable[[bytes], bytes]:
    """Rename one Item of a resource.repository (the Name after its GUID; a new name in each
    invocation of the suite)."""

    def change(data: bytes) -> bytes:
        at = data.index(f"<GUID>{guid}</GUID>".encode())
        start = data.index(b"<Name>", at) + len(b"<Name>")
        end = data.index(b"</Name>", start)
        return data[:end] + f"_b{INVOCATION}_{k}".encode() + data[end:]

    return change


def used_level(project: Project) -> Path:
    """Deterministic: the first level (by path) of the first world (by path) that names one:
    a level the cook uses, which the rules on used levels check."""
    for world in sorted((project.root / "Worlds").glob("*.iworld")):
        found = re.search(rb"<Path>([^<]+[.]ilevel)</Path>", world.read_bytes())
        if found is not None:
            return project.root / found.group(1).decode("utf-8")
    raise BenchError("no world names a level in the generated project")


def move_entity(k: int) -> Callable[[bytes], bytes]:
    """Move the first Entity of a level (its Position; another place in each invocation)."""

    def change(data: bytes) -> bytes:
        start = data.index(b"<Position>") + len(b"<Position>")
        end = data.index(b"</Position>", start)
        return data[:start] + f"{INVOCATION % 1000}.{k} 0 0".encode() + data[end:]

    return change


def item_of(guid: str, data: bytes) -> tuple[int, int]:
    """Where the repository Item of `guid` starts and ends (its `<Item>` … `</Item>` line)."""
    at = data.index(f"<GUID>{guid}</GUID>".encode())
    start = data.rindex(b"<Item>", 0, at)
    start = data.rindex(b"\n", 0, start) + 1
    end = data.index(b"</Item>", at) + len(b"</Item>")
    end = data.index(b"\n", end) + 1
    return start, end


def add_item_copy(guid: str, new_guid: str, new_name: str) -> Callable[[bytes], bytes]:
    """Add an Item after `guid`'s: a copy of it with another GUID and Name."""

    def change(data: bytes) -> bytes:
        start, end = item_of(guid, data)
        item = data[start:end].replace(guid.encode(), new_guid.encode())
        item = re.sub(rb"<Name>[^<]*</Name>", f"<Name>{new_name}</Name>".encode(), item, count=1)
        return data[:end] + item + data[end:]

    return change


def remove_item(guid: str) -> Callable[[bytes], bytes]:
    """Take `guid`'s Item out of a resource.repository."""

    def change(data: bytes) -> bytes:
        start, end = item_of(guid, data)
        return data[:start] + data[end:]

    return change


def reindent(k: int) -> Callable[[bytes], bytes]:
    """Cosmetic: re-indent the Width line and add blank lines (same document for XML)."""

    def change(data: bytes) -> bytes:
        return data.replace(b"\n  <Width>", b"\n" + b"\n" * k + b" " * (2 + 2 * k) + b"<Width>", 1)

    return change


# -- validation baselines (in this process) ----------------------------------------------------------


def validation_sample(project: Project, fraction: float) -> dict:
    """Files the rules select, stratified: every repository, world and level file (few, large:
    they carry most of the rules) plus every k-th other file (sorted by path)."""
    from stages.rules.engine import walk_files as engine_walk

    files = engine_walk(str(project.root))
    big = [f for f in files if f.endswith(("resource.repository",) + XML_SUFFIXES)]
    small = [f for f in files if f not in set(big)]
    if fraction >= 1:
        chosen = small
    else:
        step = max(1, round(1 / fraction))
        chosen = small[::step]
    return {"big": big, "small": chosen, "small_total": len(small)}


def time_validation(project: Project, sample: dict, per_rule: bool) -> dict:
    """Seconds of the per-rule baseline (or the engine's in-process validate_project) on the
    sample, with the small files' part extrapolated to all of them."""
    from stages.rules.engine import validate_project
    from stages.rules.naive import validate_per_rule
    from stages.sources.messiah.reader import build_index

    index = build_index(str(project.root))
    check = validate_per_rule if per_rule else validate_project
    parts = {}
    for part in ("big", "small"):
        started = time.perf_counter()
        document = check(str(project.root), [str(project.rules)], index, files=sample[part])
        parts[part] = time.perf_counter() - started
        parts[f"{part}_failures"] = len(document.get("failures", []))
    factor = sample["small_total"] / max(1, len(sample["small"]))
    total = parts["big"] + parts["small"] * factor
    return {
        "seconds": total,
        "measured_s": parts["big"] + parts["small"],
        "big_s": parts["big"],
        "small_s": parts["small"],
        "small_factor": factor,
        "files_big": len(sample["big"]),
        "files_small": len(sample["small"]),
        "extrapolated": factor > 1.0001,
    }


# -- output: zstd on the same payloads ----------------------------------------------------------------


def dump_payloads(out_dir: Path, dest: Path) -> dict:
    """From the bundles a build published: per bundle, the entries' payloads concatenated."""
    from stages.bundlefile.format import MAGIC, iter_entries

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    files = size = entries = 0
    for path in sorted(out_dir.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            continue
        payloads = [e.payload for e in iter_entries(data)]
        blob = b"".join(payloads)
        (dest / f"{files:05d}.bin").write_bytes(blob)
        files += 1
        size += len(blob)
        entries += len(payloads)
    return {"files": files, "bytes": size, "entries": entries, "dir": str(dest)}


def zstd_time(payload_dir: Path) -> float:
    zstd = shutil.which("zstd")
    inputs = sorted(str(p) for p in payload_dir.glob("*.bin"))
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run([zstd, "-3", "-T1", "-q", "-c", *inputs], stdout=sink, check=True)
    return time.perf_counter() - started


# -- results ----------------------------------------------------------------------------------------


@dataclass
class SizeResults:
    """Everything measured on one project size."""

    size: int
    figures: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def put(self, name: str, value: Any) -> None:
        self.figures[name] = value

    def get(self, name: str, key: str = "median") -> Any:
        figure = self.figures.get(name)
        if isinstance(figure, dict):
            return figure.get(key)
        return None


def runs_figure(runs: list[Run], value: Callable[[Run], float | None]) -> dict:
    values = [value(r) for r in runs]
    stage_names = [s["name"] for s in runs[0].stages] if runs else []
    # The engine reports each stage's seconds with Ray's startup taken out (reported apart).
    stages = {name: median([r.stage_seconds.get(name) for r in runs]) for name in stage_names}
    return {
        "median": median(values),
        "values": values,
        "wall_median": median([r.wall for r in runs]),
        "ray_startup_median": median([r.ray_startup for r in runs]),
        "scan_median": median([r.scan_seconds for r in runs]),
        "stages": stages,
        "built": runs[-1].built if runs else {},
        "ray_imported": any(r.ray_imported for r in runs),
        "executor": runs[-1].executor if runs else None,
        "hashed_files": max((r.hashed_files or 0) for r in runs) if runs else None,
        "driver_peak_rss": max((r.driver_peak_rss or 0) for r in runs) if runs else None,
        "driver_peak_private": max((r.driver_peak_private or 0) for r in runs) if runs else None,
        "workers_peak_rss": max((r.workers_peak_rss or 0) for r in runs) if runs else None,
        "peak_rss_total": max((r.peak_total() for r in runs), default=None),
        "runs": [r.to_json() for r in runs],
    }


def timed_figure(values: list[float], **extra) -> dict:
    return {"median": median(values), "values": values, **extra}


def write_results(meta: dict, sizes: dict[int, SizeResults], date: str) -> Path:
    """benchmarks/results/<date>.json: this invocation's sizes replace that day's earlier ones."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{date}.json"
    data = {"sizes": {}}
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            data = {"sizes": {}}
    for size, results in sizes.items():
        data["sizes"][str(size)] = {
            "meta": meta,
            "figures": results.figures,
            "notes": results.notes,
            "errors": results.errors,
        }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def invocation_summary(meta: dict) -> dict:
    """What a results file says about the invocation that measured it (for merged results)."""
    return {
        key: meta.get(key) for key in ("command", "finished", "sections", "repeat", "repeat_cold")
    } | {"commit": meta.get("machine", {}).get("git", {}).get("commit")}


def stored_results(date: str) -> dict[str, dict]:
    """The sizes stored in benchmarks/results/<date>.json (empty if none)."""
    path = RESULTS / f"{date}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("sizes", {})
    except (OSError, ValueError):
        return {}


def latest_results() -> dict[str, dict]:
    """The newest stored result of every size (benchmarks/results/*.json)."""
    found: dict[str, tuple[str, dict]] = {}
    for path in sorted(RESULTS.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        for size, entry in data.get("sizes", {}).items():
            stamp = entry.get("meta", {}).get("finished", path.stem)
            if size not in found or stamp >= found[size][0]:
                found[size] = (stamp, entry)
    return {size: entry for size, (_, entry) in found.items()}
