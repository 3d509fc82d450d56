"""What holds custom code in: its worker's session and group (killed at the timeout and at the end
of the run), environment, working folder and resource limits (`rules.limits`)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from buildkit import TESTS, run_cli
from rules_helpers import REPOSITORY, make_index, run_rules, write_files

from orchestrator.core.config import load_build
from stages.rules.custom.containment import MIB, PASSED_VARIABLES, WorkerLimits
from stages.rules.custom.host import CustomCode, close_workers, custom_code_host, use_limits
from stages.rules.functions import IndexView
from stages.rules.sandbox import CustomCodeTimeout
from stages.settings import worker_limits

REPOSITORY_FILE = "Repository/resource.repository"
SLEEPER = "[sys.executable, '-c', 'import time; time.sleep(120)']"


@pytest.fixture
def project(tmp_path) -> Path:
    return write_files(tmp_path / "proj", {REPOSITORY_FILE: REPOSITORY})


@pytest.fixture
def view(project) -> IndexView:
    return IndexView(make_index(project, {}), str(project), "containment-view")


@pytest.fixture(autouse=True)
def fresh_workers():
    close_workers()
    yield
    close_workers()


def call(view: IndexView, source: str, name: str = "f", timeout: float = 10) -> object:
    """Define `source` in a worker and call its function `name` as a condition."""
    host = custom_code_host()
    code = CustomCode(f"key-{abs(hash(source))}", "r", source)
    host.define(code, view, timeout)
    return host.call(code, view, name, "condition", {}, timeout)


def running(pid: int) -> bool:
    """Whether a process exists and is not a zombie waiting for a parent to reap it."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def ended_soon(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def rule(**fields) -> dict:
    base = {"id": "r", "rpath": r"resource\.repository$", "xpath": "*/Items/Item,Name"}
    return {**base, **fields}


# -- the session and its group -------------------------------------------------------------------


def test_a_worker_leads_its_own_session_and_what_it_starts_ends_with_the_run(view):
    """A child of rule code is in the worker's group; ending the workers (the end of the run)
    kills it, though the worker itself had ended politely."""
    code = (
        "import os, subprocess, sys\n"
        "def f(**kw):\n"
        f"    child = subprocess.Popen({SLEEPER})\n"
        "    return [child.pid, os.getsid(0) == os.getpid(), os.getpgid(child.pid)]\n"
    )
    [child, leads_session, child_group] = call(view, code)
    [worker] = custom_code_host().worker_pids()
    assert leads_session is True and child_group == worker != os.getpgrp()
    assert running(child)
    close_workers()
    assert ended_soon(child)


def test_what_rule_code_started_is_killed_with_it_at_the_timeout(view, tmp_path):
    """At rules.timeout the worker's whole group is killed, not only the worker."""
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "def f(**kw):\n"
        f"    child = subprocess.Popen({SLEEPER})\n"
        f"    open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "    time.sleep(60)\n"
    )
    with pytest.raises(CustomCodeTimeout):
        call(view, code, timeout=1.5)
    child = int(marker.read_text())
    assert ended_soon(child)


def test_a_run_piped_into_another_program_ends_with_its_build(tmp_path):
    """`orchestrate validate … | tail` returns when the build does: a process rule code started,
    holding the standard streams, does not outlive it."""
    case = tmp_path / "case"
    shutil.copytree(TESTS / "data" / "bad" / "_base", case)
    code = f"import subprocess, sys\ndef spawn(**kw):\n    subprocess.Popen({SLEEPER})\n    return []\n"
    rules = [
        {
            "id": "spawns",
            "rpath": "texture\\.xml$",
            "xpath": "Texture,Width",
            "condition": ["func_spawn"],
            "func_str": code,
        }
    ]
    (case / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    started = time.monotonic()
    # the child sleeps 120 s: only a build that kills it returns before the time limit here
    done = run_cli("validate", str(case / "build.yaml"), timeout=90)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60


# -- environment and working folder --------------------------------------------------------------


def test_rule_code_sees_only_the_documented_environment(view, monkeypatch):
    """Nothing of the build's environment reaches rule code (a CI token included)."""
    monkeypatch.setenv("CI_SECRET_TOKEN", "s3cret-value")
    code = "import os\ndef f(**kw):\n    return sorted(os.environ.items())\n"
    environment = dict(call(view, code))
    assert "CI_SECRET_TOKEN" not in environment
    assert "s3cret-value" not in repr(environment)
    documented = {"PYTHONPATH", "PYTHONUTF8", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE"}
    documented |= {"HOME", "TMPDIR", "PATH", "LC_CTYPE", *PASSED_VARIABLES}
    assert set(environment) <= documented
    assert environment["PYTHONHASHSEED"] == "0" and environment["PATH"] == os.defpath


def test_rule_code_works_in_a_folder_of_its_own_removed_with_its_worker(view, project):
    """The working folder (also HOME and TMPDIR) is the worker's, and goes when it does,
    with what rule code left there, read-only folders included."""
    code = (
        "import os, tempfile\n"
        "def f(**kw):\n"
        "    os.makedirs('left/behind')\n"
        "    open('left/behind/file', 'w').write('x')\n"
        "    os.chmod('left', 0o500)\n"
        "    return [os.getcwd(), os.environ['HOME'], tempfile.gettempdir()]\n"
    )
    folder, home, temporary = call(view, code)
    assert folder == home == temporary
    assert Path(folder).parent == Path(tempfile.gettempdir())
    assert folder not in (os.getcwd(), str(project))
    assert Path(folder, "left", "behind", "file").is_file()
    close_workers()
    assert not Path(folder).exists()


# -- resource limits -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits,body,message",
    [
        (
            WorkerLimits(memory=512 * MIB),
            "return [len(bytearray(1 << 30))]",
            "condition func_f raised MemoryError (over rules.limits.memory = 512 MiB)",
        ),
        (
            WorkerLimits(file_size=1 * MIB),
            "open('big', 'wb').write(bytes(2 * 1024 * 1024))",
            "condition func_f raised OSError: [Errno 27] File too large "
            "(over rules.limits.file_size = 1 MiB)",
        ),
        (
            WorkerLimits(cpu_seconds=1),
            "while True:\n        pass",
            "condition func_f ended its worker process "
            "(killed by signal 24, SIGXCPU: over rules.limits.cpu_seconds = 1 s)",
        ),
    ],
    ids=["memory", "file_size", "cpu_seconds"],
)
def test_a_limit_reached_by_rule_code_is_that_rules_failure_naming_it(
    project, limits, body, message
):
    """Memory, file size and CPU time are bounded by rules.limits; reaching one fails the rule
    with a message naming the limit, and the next rule runs in a fresh worker."""
    code = f"def f(**kw):\n    {body}\n"
    fine = rule(
        id="fine", condition=["func_g"], func_str="def g(data, **kw):\n    return data[:1]\n"
    )
    doc = run_rules(
        project,
        [rule(condition=["func_f"], func_str=code), fine],
        make_index(project, {}),
        timeout=60,
        limits=limits,
    )
    found = {f["rule"]: f for f in doc["failures"]}
    assert message in found["r"]["message"]
    assert found["fine"]["errors"] == ["Hole_mat"]


def test_rule_code_cannot_raise_its_limits(view):
    """The limits are hard ones: rule code cannot lift them."""
    use_limits(WorkerLimits(memory=1024 * MIB, file_size=8 * MIB, cpu_seconds=100))
    code = (
        "import resource\n"
        "def f(**kw):\n"
        "    found = []\n"
        "    for kind in (resource.RLIMIT_AS, resource.RLIMIT_FSIZE, resource.RLIMIT_CPU):\n"
        "        try:\n"
        "            resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "        except (ValueError, OSError):\n"
        "            pass\n"
        "        found.append(list(resource.getrlimit(kind)))\n"
        "    return found\n"
    )
    assert call(view, code) == [[1024 * MIB] * 2, [8 * MIB] * 2, [100, 105]]


def test_a_worker_past_half_its_cpu_time_is_replaced_after_its_call(view):
    """So that every call may use at least half of rules.limits.cpu_seconds."""
    use_limits(WorkerLimits(cpu_seconds=2))
    code = (
        "import os, time\n"
        "def f(**kw):\n"
        "    while time.process_time() < 1.2:\n"
        "        pass\n"
        "    return [os.getpid()]\n"
    )
    [first] = call(view, code)
    assert custom_code_host().worker_pids() == []
    [second] = call(view, code)
    assert second != first


def test_rules_limits_come_from_the_build_file(tmp_path):
    """`rules.limits` takes sizes with units and null for no limit; what is not given keeps its
    safe default; a memory too small for a worker to start is refused naming the key."""
    build = tmp_path / "build.yaml"
    (tmp_path / "project").mkdir()
    build.write_text(
        "project: project\nrules:\n  limits:\n    memory: 2 GiB\n    cpu_seconds: null\n",
        encoding="utf-8",
    )
    limits = worker_limits(load_build(build).section("rules"))
    assert limits == WorkerLimits(memory=2 << 30, cpu_seconds=None)
    assert limits.file_size == WorkerLimits().file_size
    build.write_text("project: project\nrules:\n  limits:\n    memory: 100 MiB\n", encoding="utf-8")
    from orchestrator.errors import ConfigError

    with pytest.raises(ConfigError, match="rules.limits.memory"):
        load_build(build)
