"""Ray as a user meets it: a local Ray that only this machine can reach, a cluster started with
`ray start` as docs/cluster.md says and built through, an address that is not Ray or a cluster
that wants a token refused in one line, and a node lost mid-build told in one line with Ray's
own account kept in a file under the cache folder.

The cluster (tests/raystart.py) has a head and a second node of one CPU each, on free ports,
with its own HOME and temporary folder; a finalizer ends its processes by their ids.
"""

from __future__ import annotations

import http.server
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from buildkit import cli_env, edit_build, make_project, published, run_cli
from raystart import Cluster, Node, start_cluster

SLOW_COOK = {  # a cooker slow enough that a node can be lost while batches run
    "command": 'sh -c \'sleep 0.15; find "$0" -type f | sort | xargs cat > "$1"\' {input} {output}',
    "version": "1",
}
LOOPBACK = {"127.0.0.1", "::ffff:127.0.0.1", "::1"}
#: The shapes of every line `orchestrate run` prints itself; anything else is someone else's.
OWN_LINE = re.compile(
    r"\d{4}-\d\d-\d\dT[\d:.]+Z \[\w+ *\] "  # a structured log line
    r"|stage +units|-{5}|\w+ +\d+ +\d+ +\d+ +[\d.]+ +\d+$"  # the summary table
    r"|(cook list|rules|manifest|reports?|ray startup): "  # the summary
    r"|built and published, but failed a gate: "
    r"|problems in the project: |  \w+: "  # the project's problems, by kind
    r"|  \w+: \d+/\d+ units$"  # progress without a terminal
)


def foreign_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip() and not OWN_LINE.match(line)]


def run_orchestrate(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = run_cli(*args, env=env, timeout=600)
    return proc, time.monotonic() - started


# -- an address that is not Ray -----------------------------------------------------------------


class _Silent(threading.Thread):
    """Accepts connections and never says a word."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []

    def run(self) -> None:
        while True:
            try:
                self.held.append(self.server.accept()[0])
            except OSError:
                return


@pytest.fixture
def web_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def silent_server():
    silent = _Silent()
    silent.start()
    yield f"127.0.0.1:{silent.port}"
    silent.server.close()
    for conn in silent.held:
        conn.close()


@pytest.mark.parametrize("server", ["web_server", "silent_server"])
def test_an_address_that_answers_but_is_not_ray_fails_in_one_line(tmp_path, request, server):
    """A web server, or a port that accepts and says nothing, at the cluster's address: exit 4
    within the documented seconds, one line naming the address, none of Ray's."""
    from orchestrator.executors.raysession import CONNECT_TIMEOUT  # imports Ray: not at collection

    address = request.getfixturevalue(server)
    build = make_project(tmp_path, 100, 3, executor={"kind": "ray", "address": address})
    proc, seconds = run_orchestrate("run", str(build), env=cli_env())
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert proc.stderr.splitlines() == [
        f"error: executor.address: {address} answers, but not as Ray (no HTTP/2 within "
        f"{CONNECT_TIMEOUT:.0f} s): give the head node's GCS address "
        "(`ray start --head --port`, 6379 by default)"
    ]
    assert proc.stdout == ""
    assert seconds < CONNECT_TIMEOUT + 15  # the interpreter, the scan; never Ray's retries
    assert "5 seconds" in (Path(__file__).parents[1] / "docs" / "cluster.md").read_text()


# -- a local Ray ---------------------------------------------------------------------------------

LISTENERS_AT_CLOSE = """
import psutil
import orchestrator.executors.ray as _ray_executor
_close = _ray_executor.RayExecutor.close

def _listeners_then_close(self):
    me = psutil.Process()
    ours = {p.pid for p in [me, *me.children(recursive=True)]}
    for conn in psutil.net_connections("inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in ours:
            print("LISTEN", psutil.Process(conn.pid).name(), conn.laddr.ip, flush=True)
    _close(self)

_ray_executor.RayExecutor.close = _listeners_then_close
"""


@pytest.mark.ray
@pytest.mark.slow
def test_a_local_ray_listens_on_loopback_only(tmp_path):
    """Every process of the Ray a build starts (GCS, raylet, workers, agents, the driver's
    own servers) listens on the loopback address only; nothing of Ray's reaches the output."""
    build = make_project(tmp_path, 100, 3, executor={"kind": "ray"})
    env = cli_env()
    env.pop("RAY_ADDRESS", None)
    proc = run_cli("run", str(build), "--workers", "1", prelude=LISTENERS_AT_CLOSE, env=env)
    assert proc.returncode == 1, proc.stderr[-3000:]  # the planted rule failures
    listening = [line.split() for line in proc.stdout.splitlines() if line.startswith("LISTEN")]
    names = {name for _, name, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening
    assert {ip for _, _, ip in listening} <= LOOPBACK, listening
    others = [line for line in proc.stdout.splitlines() if not line.startswith("LISTEN")]
    assert foreign_lines("\n".join(others) + "\n" + proc.stderr) == []


# -- a cluster started as docs/cluster.md says ---------------------------------------------------


@pytest.fixture(scope="module")
def cluster(request) -> Cluster:
    # Ray's socket paths are limited to 107 bytes: a short folder of its own under /tmp.
    folder = Path(tempfile.mkdtemp(prefix="orch-ray-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    started = start_cluster(folder / "c", cli_env(), nodes=1)  # stops what it started if it fails
    request.addfinalizer(started.stop)  # finalizers run last first: stopped, then removed
    return started


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return make_project(
        tmp_path_factory.mktemp("source") / "p",
        120,
        11,
        cook={"cookers": {"Texture": SLOW_COOK}},
        executor={"kind": "local"},
    )


@pytest.fixture(scope="module")
def reference(source, tmp_path_factory) -> tuple[int, dict[str, bytes]]:
    """The exit code and the published files of a local build of `source`."""
    build = copy_project(source, tmp_path_factory.mktemp("reference"))
    proc = run_cli("run", str(build), env=cli_env())
    return proc.returncode, published(build.parent / "build" / "out")


def copy_project(build_file: Path, dest: Path) -> Path:
    shutil.copytree(build_file.parent, dest / "p", ignore=shutil.ignore_patterns("build"))
    return dest / "p" / build_file.name


def node_id(node: Node) -> str:
    for proc in node.processes():
        for word in proc.cmdline():
            if word.startswith("--node_id="):
                return word.removeprefix("--node_id=")
    raise AssertionError("the node has no raylet")


@pytest.mark.ray
@pytest.mark.slow
def test_a_build_through_the_documented_cluster_equals_a_local_build(
    cluster, source, reference, tmp_path
):
    """The head and a second node started by docs/cluster.md's commands (token authentication
    on), the build pointed at them by `executor.address` with the documented environment:
    published outputs identical to a local build's, and nothing of Ray's in the output."""
    build = copy_project(source, tmp_path)
    edit_build(build, executor={"kind": "ray", "address": cluster.address})
    proc, _ = run_orchestrate("run", str(build), env=cluster.env)
    assert proc.returncode == reference[0], proc.stderr[-3000:]
    assert published(build.parent / "build" / "out") == reference[1]
    assert foreign_lines(proc.stdout + proc.stderr) == []
    assert f"address={cluster.address}" in proc.stderr


@pytest.mark.ray
@pytest.mark.slow
def test_a_driver_without_the_token_is_refused_in_one_line(cluster, source, tmp_path):
    """The same build from an environment without RAY_AUTH_MODE=token: exit 4 in seconds, one
    line saying the cluster wants a token (Ray's retries and messages go to its log)."""
    build = copy_project(source, tmp_path)
    edit_build(build, executor={"kind": "ray", "address": cluster.address})
    env = {k: v for k, v in cluster.env.items() if k != "RAY_AUTH_MODE"}
    proc, seconds = run_orchestrate("run", str(build), env=env)
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    line = proc.stderr.strip()
    assert line.startswith(f"error: executor.address: the Ray cluster at {cluster.address} wants")
    assert "RAY_AUTH_MODE=token" in line
    assert seconds < 30  # Ray alone retries for 20 s, printing a line a second
    ray_log = build.parent / "build" / "cache" / "logs" / "ray.log"
    assert "InvalidAuthToken" in ray_log.read_text(encoding="utf-8", errors="replace")


@pytest.mark.ray
@pytest.mark.slow
def test_a_node_lost_mid_build_reads_as_one_line(cluster, source, reference, tmp_path):
    """The second node killed while it runs batches: the build completes with identical outputs,
    and says so in one line naming the node, the batches retried and Ray's log under the cache
    folder (which holds Ray's account of it); no other line of Ray's reaches the output.
    (Last in this module: the cluster keeps one node after it.)"""
    build = copy_project(source, tmp_path)
    edit_build(build, executor={"kind": "ray", "address": cluster.address})
    victim = cluster.nodes[0]
    lost = node_id(victim)
    events: dict[str, float] = {}

    def kill_when_it_cooks() -> None:
        """Kill the node once one of its workers runs a batch of cook units (a cooker runs
        under it): a batch of slow units is then surely lost with the node."""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            for proc in victim.processes():
                if _name(proc).startswith("ray::_run_batch") and _children(proc):
                    events["killed"] = time.monotonic()
                    victim.kill()
                    return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_it_cooks, daemon=True)
    killer.start()
    proc, _ = run_orchestrate("run", str(build), env=cluster.env)
    finished = time.monotonic()
    killer.join(timeout=60)
    assert "killed" in events and events["killed"] < finished, "the node was not killed mid-build"
    assert proc.returncode == reference[0], proc.stderr[-3000:]
    assert published(build.parent / "build" / "out") == reference[1]
    output = proc.stdout + proc.stderr
    told = [line for line in output.splitlines() if " lost; " in line]
    assert len(told) == 1, output[-3000:]
    (retried,) = re.findall(rf"node {lost} lost; (\d+) batch(?:es)? retried", told[0])
    assert int(retried) >= 1
    ray_log = build.parent / "build" / "cache" / "logs" / "ray.log"
    assert f"ray_log={ray_log}" in told[0]
    assert lost in ray_log.read_text(encoding="utf-8", errors="replace")
    assert foreign_lines(output) == []


def _name(proc) -> str:
    try:
        return (proc.cmdline() or [""])[0]
    except Exception:  # it ended meanwhile
        return ""


def _children(proc) -> list:
    try:
        return proc.children()
    except Exception:  # it ended meanwhile
        return []


def test_the_cluster_helper_reads_the_documented_steps():
    """The steps come from docs/cluster.md (so the cluster tests follow the documentation):
    a head, a node, with token authentication, and a check."""
    from raystart import documented_steps

    steps = documented_steps()
    ray_steps = [s for s in steps if s.argv[:2] in (["ray", "start"], ["ray", "status"])]
    assert [s.starts_head for s in ray_steps] == [True, False, False]
    assert [s.starts_node for s in ray_steps] == [False, True, False]
    assert all(s.env.get("RAY_AUTH_MODE") == "token" for s in ray_steps)
