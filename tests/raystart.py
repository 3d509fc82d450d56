"""A Ray cluster started on this machine with `ray start`, as docs/cluster.md's steps say.

The steps are read from the first bash block of docs/cluster.md ("1. Start a cluster"), so the
test breaks when they stop working with the installed Ray, on a machine where Ray already ran
(with the token Ray then keeps). Each step runs as written, with `HEAD_HOST` and the head's port
filled in and with flags that keep the cluster to itself on a shared machine: its own `HOME`
(where the token lives), temporary folder and free ports, one CPU per node, and `--block`, so
that every Ray process of a node descends from a process the test started and is ended by its
id (never `ray stop`, which ends every Ray of the user).
"""

from __future__ import annotations

import contextlib
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
CLUSTER_DOC = REPO / "docs" / "cluster.md"
DOC_PORT = "6379"
#: Ray maps 127.0.0.1 to the machine's address for a cluster; the steps name the head this way.
HEAD_HOST = "127.0.0.1"
START_SECONDS = 90.0


@dataclass(frozen=True)
class Step:
    """One command of the documented steps: environment assignments, then the command."""

    env: dict[str, str]
    argv: list[str]

    @property
    def starts_head(self) -> bool:
        return self.argv[:2] == ["ray", "start"] and "--head" in self.argv

    @property
    def starts_node(self) -> bool:
        return self.argv[:2] == ["ray", "start"] and "--head" not in self.argv


def documented_steps(doc: Path = CLUSTER_DOC) -> list[Step]:
    """The commands of the first bash block of docs/cluster.md, comments left out."""
    block = re.search(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), re.S)
    assert block, f"{doc} has no bash block"
    steps = []
    for line in block.group(1).splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line)
        env = {}
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        steps.append(Step(env, words))
    return steps


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _own_ports() -> list[str]:
    """Ports a node would otherwise take at fixed defaults (52365, …)."""
    return [
        f"--dashboard-agent-listen-port={free_port()}",
        f"--dashboard-agent-grpc-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        f"--runtime-env-agent-port={free_port()}",
    ]


@dataclass
class Node:
    """A `ray start --block` process: it and its descendants are the node's Ray processes."""

    process: subprocess.Popen
    log: Path

    def processes(self) -> list[psutil.Process]:
        try:
            root = psutil.Process(self.process.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def kill(self) -> None:
        """SIGKILL to the node's processes, by id: as when a machine is lost."""
        for proc in reversed(self.processes()):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)


@dataclass
class Cluster:
    address: str
    env: dict[str, str]  # the environment of a driver on this machine (HOME, RAY_AUTH_MODE)
    folder: Path
    head: Node | None = None
    nodes: list[Node] = field(default_factory=list)

    def stop(self) -> None:
        for node in [*self.nodes, *([self.head] if self.head else [])]:
            node.kill()
        # A Ray process that left its parent still names the cluster's own folder.
        for proc in psutil.process_iter(["cmdline"]):
            if str(self.folder) in " ".join(proc.info.get("cmdline") or []):
                with contextlib.suppress(psutil.Error):
                    proc.kill()

    def logs(self) -> str:
        nodes = [*([self.head] if self.head else []), *self.nodes]
        return "\n".join(f"--- {n.log}\n{n.log.read_text(errors='replace')[-3000:]}" for n in nodes)


def _ray_command(argv: list[str]) -> list[str]:
    return [str(Path(sys.executable).with_name(argv[0])), *argv[1:]]


def start_cluster(folder: Path, base_env: dict[str, str], nodes: int = 1) -> Cluster:
    """The documented steps: a head and `nodes` more nodes, one CPU each; the caller calls
    `stop()` in a finalizer. The returned
    environment is the driver's: the cluster's `HOME` and what the steps set (RAY_AUTH_MODE).

    `folder` must be short: Ray's socket paths under it are limited to 107 bytes.
    """
    home = folder / "home"
    home.mkdir(parents=True)
    port = str(free_port())
    env = {**base_env, "HOME": str(home)}
    for name in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(name, None)
    cluster = Cluster(f"{HEAD_HOST}:{port}", env, folder)
    try:
        # As on a machine where a local Ray has run once: Ray 2.60 then holds a token in
        # ~/.ray/auth_token, and a head started there wants it from every node.
        made = subprocess.run(
            _ray_command(["ray", "get-auth-token", "--generate"]),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
        for step in documented_steps():
            argv = [w.replace("HEAD_HOST", HEAD_HOST).replace(DOC_PORT, port) for w in step.argv]
            env.update(step.env)
            if step.starts_head:
                own = [f"--temp-dir={folder}/t", "--include-dashboard=false", "--num-cpus=1"]
                cluster.head = _start_node(cluster, argv + own, env)
            elif step.starts_node:
                cluster.nodes += [
                    _start_node(cluster, argv + ["--num-cpus=1"], env) for _ in range(nodes)
                ]
            else:
                done = subprocess.run(
                    _ray_command(argv), env=env, capture_output=True, text=True, timeout=120
                )
                assert done.returncode == 0, f"{shlex.join(argv)}: {done.stdout}{done.stderr}"
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_node(cluster: Cluster, argv: list[str], env: dict[str, str]) -> Node:
    """`ray start … --block` in its own session; returns once the node says it runs."""
    log = cluster.folder / f"node-{len(cluster.nodes) + (cluster.head is not None)}.log"
    own = ["--block", "--disable-usage-stats", *_own_ports()]
    with log.open("w") as out:
        process = subprocess.Popen(
            _ray_command(argv + own),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    node = Node(process, log)
    deadline = time.monotonic() + START_SECONDS
    while "Ray runtime started" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            cluster.nodes.append(node)  # stopped with the others
            raise AssertionError(f"{shlex.join(argv)} did not start\n{cluster.logs()}")
        time.sleep(0.5)
    return node
