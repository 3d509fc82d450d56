"""Starting or joining Ray for a build, and keeping Ray's own output out of the build's.

A local Ray (no address) listens on the loopback address only: Ray maps 127.0.0.1 to the
machine's network address unless it is told that no cluster will form, and then every process
(GCS, raylet, workers, agents) binds to 127.0.0.1; nothing another host can reach.

A cluster is joined as Ray is configured where the build runs (RAY_AUTH_MODE, the token): the
address is checked first, within `CONNECT_TIMEOUT` seconds, for something that answers and
speaks HTTP/2 (gRPC, Ray's protocol), and Ray gets one attempt to join, so that a wrong address
or a missing token is one line and exit 4, not Ray's retries for half a minute.

Ray's own output (its Python loggers, the errors it prints for the driver, what its C++ core
prints while connecting) goes to `RayLog.path` under the cache folder, which the lines the build
prints about Ray name.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import ray

from ..errors import StepFailed

CONNECT_TIMEOUT = 5.0  # seconds for a cluster's address to answer, as Ray does, before exit 4
RAY_LOG = Path("logs") / "ray.log"  # under the cache folder
RAY_LOG_BYTES = 4 * 2**20  # then it is rotated once (ray.log.1)
RAYLET_PROBE_SECONDS = 1.0  # for a node's raylet to take a connection, after a batch was lost
#: Ray reads it for how many times to try reaching a cluster's GCS, about a second each
#: (ray/_private/node.py); by default 20, which a wrong address or a missing token waits out.
JOIN_ATTEMPTS_VARIABLE = "RAY_gcs_server_port_wait_time_s"
#: Ray treats a node IP of 127.0.0.1 as "no cluster": every server binds to loopback.
LOCAL_ONLY_VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP2_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame
HTTP2_SETTINGS_TYPE = 0x04


class RayLog:
    """Ray's own output for this process, in a file under the cache folder (rotated at
    RAY_LOG_BYTES). Made again by each executor: the newest one is where Ray writes."""

    def __init__(self, cache_dir: Path) -> None:
        self.path = Path(cache_dir) / RAY_LOG
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def route(self) -> None:
        """Ray's Python loggers, and the errors the driver prints for Ray, into the file. Called
        once Ray runs: `ray.init` clears the `ray` logger's handlers (what it logs while it
        starts reaches standard error, which `capturing_stderr` sends here)."""
        handler = logging.handlers.RotatingFileHandler(
            self.path, maxBytes=RAY_LOG_BYTES, backupCount=1, encoding="utf-8"
        )
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        ray_logger = logging.getLogger("ray")
        for old in ray_logger.handlers[:]:  # Ray's own prints to standard error
            ray_logger.removeHandler(old)
            old.close()
        ray_logger.addHandler(handler)
        ray_logger.propagate = False  # not to the root logger, nor Python's last-resort stderr
        if ray_logger.level == logging.NOTSET:
            ray_logger.setLevel(logging.INFO)
        # The driver prints errors Ray publishes (a task retried, a node dead) to stdout itself,
        # with no switch to turn it off: they go to the log like the rest.
        worker = sys.modules.get("ray._private.worker")
        if worker is not None and hasattr(worker, "print_to_stdstream"):
            setattr(worker, "print_to_stdstream", self.print_to_stdstream)  # noqa: B010

    def write(self, message: str) -> None:
        """A line of ours in the log (what the build saw of Ray), whether Ray runs or not."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(f"{stamp} orchestrate: {message}\n")

    def print_to_stdstream(self, data: dict, ignore_prefix: bool = False) -> None:
        """What Ray would print for the driver (`ray._private.worker.print_to_stdstream`)."""
        source = data.get("pid", "")
        for line in data.get("lines", ()):
            self.write(f"({source}) {line}" if source else str(line))

    @contextlib.contextmanager
    def capturing_stderr(self) -> Iterator[None]:
        """The process's standard error (file descriptor 2, where Ray's C++ core prints while
        it connects) into the log for the block."""
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(self.path, "ab") as target:
                os.dup2(target.fileno(), 2)
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def start_local(workers: int, pythonpath: str, ray_log: RayLog) -> None:
    """A fresh Ray of our own on this machine, every process on the loopback address."""
    import ray._private.ray_constants as constants

    local_only = {LOCAL_ONLY_VARIABLE: "0"}  # inherited by the processes Ray starts
    with (
        mock.patch.dict(os.environ, local_only),
        mock.patch.object(constants, "ENABLE_RAY_CLUSTER", False),
        ray_log.capturing_stderr(),
    ):
        # address="local": never a cluster that `ray start` happened to leave running here.
        ray.init(
            address="local",
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            runtime_env={"env_vars": {"PYTHONPATH": pythonpath, **local_only}},
        )


def join(address: str, code_roots: list[str], ray_log: RayLog) -> None:
    """Join the cluster at `address` as Ray is configured here; StepFailed (exit 4) in one line
    when nothing answers there as Ray within CONNECT_TIMEOUT, or the cluster refuses us."""
    check_answers_as_ray(address)
    attempts = {} if JOIN_ATTEMPTS_VARIABLE in os.environ else {JOIN_ATTEMPTS_VARIABLE: "1"}
    try:
        with mock.patch.dict(os.environ, attempts), ray_log.capturing_stderr():
            # A cluster may not have our code: ship the packages with the job.
            ray.init(
                address=address,
                runtime_env={"py_modules": code_roots},
                log_to_driver=False,
                configure_logging=False,
            )
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        ray_log.write(f"joining {address}: {type(exc).__name__}: {_causes(exc)}")
        if _wants_token(exc):
            raise StepFailed(
                f"the Ray cluster at {address} wants a token: set RAY_AUTH_MODE=token, with the "
                "cluster's token in ~/.ray/auth_token or RAY_AUTH_TOKEN (docs/cluster.md)",
                key="executor.address",
            ) from None
        raise StepFailed(
            f"cannot join the Ray cluster at {address}: {exc} (Ray's log: {ray_log.path})",
            key="executor.address",
        ) from None


def _causes(exc: BaseException | None) -> str:
    texts = []
    while exc is not None:
        texts.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(texts)


def _wants_token(exc: BaseException | None) -> bool:
    """Whether Ray failed to join for want of a token: its AuthenticationError, raised, or (as
    `ray.init` reports it) named in the traceback text of the last attempt."""
    while exc is not None:
        if isinstance(exc, ray.exceptions.AuthenticationError):
            return True
        if ray.exceptions.AuthenticationError.__name__ in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def check_answers_as_ray(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Exit 4 within `timeout` seconds when nothing listens at a cluster address, or what
    answers does not speak HTTP/2 (the protocol of Ray's GCS and of Ray Client): `ray.init`
    would retry for half a minute or more. `auto` and addresses without a port are Ray's."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    deadline = time.monotonic() + timeout
    try:
        conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except OSError as exc:
        why = f"nothing answered in {timeout:.0f} s" if isinstance(exc, TimeoutError) else None
        raise StepFailed(
            f"the Ray cluster at {address} is unreachable: {why or exc.strerror or exc}",
            key="executor.address",
        ) from None
    with conn:
        try:
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            conn.sendall(HTTP2_PREFACE + HTTP2_SETTINGS)
            reply = _read_frame_header(conn)
        except OSError:  # it timed out, or closed the connection on us
            reply = b""
    if len(reply) < 9 or reply[3] != HTTP2_SETTINGS_TYPE:
        raise StepFailed(
            f"{address} answers, but not as Ray (no HTTP/2 within {timeout:.0f} s): give the "
            "head node's GCS address (`ray start --head --port`, 6379 by default)",
            key="executor.address",
        )


def _read_frame_header(conn: socket.socket) -> bytes:
    """The first 9 bytes the server sends (an HTTP/2 frame header), fewer if it closes."""
    data = b""
    while len(data) < 9:
        chunk = conn.recv(9 - len(data))
        if not chunk:
            break
        data += chunk
    return data


class NodeState(NamedTuple):
    id: str
    alive: bool  # as the cluster's GCS knows it
    host: str  # where its raylet listens
    port: int


def cluster_nodes() -> list[NodeState]:
    return [
        NodeState(
            node["NodeID"],
            bool(node["Alive"]),
            node.get("NodeManagerAddress") or "",
            int(node.get("NodeManagerPort") or 0),
        )
        for node in ray.nodes()
    ]


def unreachable(nodes: list[NodeState], timeout: float = RAYLET_PROBE_SECONDS) -> list[str]:
    """The nodes the GCS still holds alive whose raylet no longer takes a connection: lost,
    though the GCS declares it only after its health checks fail for some seconds."""
    alive = [node for node in nodes if node.alive and node.host and node.port]
    if not alive:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(alive))) as pool:
        answers = list(pool.map(lambda node: _accepts(node.host, node.port, timeout), alive))
    return [node.id for node, answered in zip(alive, answers, strict=True) if not answered]


def _accepts(host: str, port: int, timeout: float) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError:
        return False
    return True
