"""Helpers for tests of the real pipeline: generated projects, CLI runs, output and cache checks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from orchestrator.hashing import digest_bytes

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent


def make_project(dest: Path, assets: int = 120, seed: int = 5, **settings) -> Path:
    """Generate a project under `dest`; apply build-file `settings`; return the build file."""
    from stages.sources.messiah.generator import generate_project

    project = generate_project(dest, assets, seed)
    build_file = Path(project.build_file)
    if settings:
        edit_build(build_file, **settings)
    return build_file


def edit_build(build_file: Path, **settings) -> Path:
    """Merge `settings` (section → mapping or value) into a build file."""
    data = yaml.safe_load(build_file.read_text(encoding="utf-8"))
    for key, value in settings.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    build_file.write_text(
        yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    return build_file


def cli_env(**extra: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(REPO), env.get("PYTHONPATH", "")])
    env["CI"] = "true"
    env.update(extra)
    return env


def run_cli(
    *args: str, prelude: str = "", timeout: float = 300, **popen
) -> subprocess.CompletedProcess:
    """Run `orchestrate ARGS` in a fresh interpreter; `prelude` is Python run before it."""
    script = textwrap.dedent(prelude) + "\nfrom orchestrator.shell.cli import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=popen.pop("env", None) or cli_env(),
        timeout=timeout,
        **popen,
    )


def run_inprocess(*args: str) -> int:
    """Run `orchestrate ARGS` in this process; returns the exit code."""
    from orchestrator.shell.cli import main

    try:
        main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def published(output_dir: Path) -> dict[str, bytes]:
    """Every published file (reports excluded) → its bytes."""
    output_dir = Path(output_dir)
    found = {}
    for path in sorted(output_dir.rglob("*")):
        rel = path.relative_to(output_dir).as_posix()
        if rel == "reports" or rel.startswith("reports/") or not path.is_file():
            continue
        found[rel] = path.read_bytes()
    return found


CONTENT_REPORTS = ("validate.json", "junit.xml", "validate.txt", "cooklist.json")


def content_reports(output_dir: Path) -> dict[str, bytes]:
    """The reports that say what the build found (not when it ran): name → bytes."""
    folder = Path(output_dir) / "reports"
    return {
        name: (folder / name).read_bytes() for name in CONTENT_REPORTS if (folder / name).is_file()
    }


def cache_problems(cache_dir: Path, torn_ok: bool = False, key=None) -> list[str]:
    """Entries of a cache that fail verification (leftover temporary files are not entries).

    Loose blobs must match their names; every intact pack-index line must name a blob the cache
    returns verified; every action row must pass its check and name a stored blob;
    the databases must pass SQLite's integrity check, every stored value its digest and every
    row of a build state its check (signed with `key`, the build's EntryKey, if given). A damaged
    index line (a torn append of a killed run) is a problem unless `torn_ok`: the index skips
    such lines by design.
    """
    import sqlite3

    from orchestrator.cache import Cache, line_checksum
    from orchestrator.cache.statedb import RowChecks
    from orchestrator.errors import CacheCorrupt

    problems = []
    cache_dir = Path(cache_dir)
    cache = Cache(cache_dir)
    for path in sorted(cache_dir.rglob("*")):
        if not path.is_file() or path.name.startswith(".tmp-") or ".damaged-" in path.name:
            continue
        parts = path.relative_to(cache_dir).parts
        if parts[0] == "cas" and len(parts) == 3 and len(parts[1]) == 2:
            if digest_bytes(path.read_bytes()) != path.name:
                problems.append(f"blob {path} does not match its name")
        elif parts[0] == "cas" and path.name == "index.log":
            for number, line in enumerate(path.read_bytes().split(b"\n"), 1):
                if not line:
                    continue
                check, _, rest = line.partition(b" ")
                if line_checksum(rest) != check:
                    if not torn_ok:
                        problems.append(f"pack index line {number} is damaged")
                    continue
                try:
                    cache.get_blob(rest.split(b" ")[0].decode("ascii"))
                except CacheCorrupt as exc:
                    problems.append(f"pack index line {number}: {exc}")
        elif path.suffix == ".sqlite":
            db = sqlite3.connect(path)
            try:
                verdict = db.execute("PRAGMA integrity_check").fetchone()[0]
                if verdict != "ok":
                    problems.append(f"{path.name}: {verdict}")
                elif path.name == "actions.sqlite":
                    problems += _action_problems(cache, db)
                else:
                    checks = RowChecks(key, path.relative_to(cache_dir).as_posix())
                    problems += _state_problems(cache, db, path, checks)
            except sqlite3.DatabaseError as exc:
                problems.append(f"{path.name}: {exc}")
            finally:
                db.close()
    return problems


def _action_problems(cache, db) -> list[str]:
    from orchestrator.errors import CacheCorrupt

    problems = []
    for stage, result, reads, check in db.execute(
        "SELECT stage, result, reads, check_ FROM actions"
    ):
        if digest_bytes(bytes(result) + bytes(reads)).encode("ascii")[:16] != bytes(check):
            problems.append(f"an action row of {stage} fails its check")
            continue
        try:
            cache.get_blob(bytes(result).hex())
        except CacheCorrupt as exc:
            problems.append(f"an action row of {stage}: {exc}")
    return problems


def _state_problems(cache, db, path: Path, checks) -> list[str]:
    from orchestrator.cache.entries import STORED_PREFIX
    from orchestrator.codec import allow_package, loads

    allow_package("stages")  # units hold records of the stages' types, as a build would decode

    problems = []
    for value, key, gen, digest, data, check in db.execute("SELECT * FROM entries"):
        if not checks.verify("entries", check, value, key, gen, digest, int(data is not None)):
            problems.append(f"{path.name}: entry {value}[{key}] fails its check")
        if data is None:
            continue
        data = bytes(data)
        if data.startswith(STORED_PREFIX):
            data = cache.get_blob(data[len(STORED_PREFIX) :].decode("ascii"))
        if digest_bytes(data) != bytes(digest).hex():
            problems.append(f"{path.name}: entry {value}[{key}] does not match its digest")
    for stage, unit_id, key, result, digest, data, check in db.execute("SELECT * FROM units"):
        if not checks.verify("units", check, stage, unit_id, key, result, digest):
            problems.append(f"{path.name}: unit {stage}/{unit_id} fails its check")
            continue
        if digest_bytes(data) != digest.hex():
            problems.append(f"{path.name}: unit {stage}/{unit_id} does not match its digest")
            continue
        try:
            loads(bytes(data))
        except Exception as exc:
            problems.append(f"{path.name}: unit {stage}/{unit_id} does not decode: {exc}")
    for name, data, check in db.execute("SELECT * FROM records"):
        if not checks.verify("records", check, name, data):
            problems.append(f"{path.name}: records row {name} fails its check")
    for name, data, digest, check in db.execute("SELECT * FROM filetable"):
        if digest_bytes(bytes(data)) != digest or not checks.verify(
            "filetable", check, name, digest
        ):
            problems.append(f"{path.name}: filetable row {name} fails its digest or check")
    for gen, changed, kind, check in db.execute("SELECT * FROM file_changes"):
        if not checks.verify("file_changes", check, gen, changed, kind):
            problems.append(f"{path.name}: file change {changed} fails its check")
    for published_path, *row, check in db.execute("SELECT * FROM outputs"):
        if not checks.verify("outputs", check, published_path, *row):
            problems.append(f"{path.name}: published file {published_path} fails its check")
    for name, value, check in db.execute("SELECT * FROM meta"):
        if not checks.verify("meta", check, name, value):
            problems.append(f"{path.name}: meta row {name} fails its check")
    return problems


def snapshot(folder: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file under `folder`, except under `skip`."""
    skip_text = tuple(str(p) for p in skip)
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        if dirpath.startswith(skip_text):
            dirnames[:] = []
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            found[path] = (st.st_size, st.st_mtime_ns)
    return found
