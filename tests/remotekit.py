"""A real cache server for the tests: nginx with its WebDAV methods on a loopback port, as a farm
runs one (docs/cluster.md, "A cache server"); and what an attacker who can write to it does.

Each test gets a folder of its own on one server (`Nginx.folder`): its URL is the remote's
address, its files are what the server stores. `/private/` answers only requests that carry
`Authorization: Bearer <TOKEN>`, and the access log records every request's Authorization.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

TOKEN = "farm-token-5f1d0c9e-never-printed"
NGINX = shutil.which("nginx") or next(
    (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)),
    None,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Nginx:
    """A running nginx: its port, the folder it stores under, its access log."""

    port: int
    root: Path
    access_log: Path

    def folder(self, private: bool = False) -> tuple[str, Path]:
        """A fresh folder on the server: (its URL, where nginx keeps its files)."""
        name = ("private/" if private else "") + uuid.uuid4().hex[:12]
        return f"http://127.0.0.1:{self.port}/{name}/", self.root / name


CONF = """\
worker_processes 1;
{user}
pid {base}/nginx.pid;
error_log {base}/error.log;
events {{ worker_connections 256; }}
http {{
    log_format auth '$request_method $uri $status "$http_authorization"';
    access_log {base}/access.log auth;
    client_body_temp_path {base}/tmp/body;
    proxy_temp_path {base}/tmp/proxy;
    fastcgi_temp_path {base}/tmp/fastcgi;
    uwsgi_temp_path {base}/tmp/uwsgi;
    scgi_temp_path {base}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {base}/store;
        client_max_body_size 0;
        location / {{
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
        }}
        location /private/ {{
            if ($http_authorization != "Bearer {token}") {{ return 401; }}
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
        }}
    }}
}}
"""


def start_nginx(base: Path) -> tuple[subprocess.Popen, Nginx]:
    """nginx in the foreground under `base` (its configuration, store, logs and pid file)."""
    if NGINX is None:
        # Not an allowed skip in CI (tests/ci_policy.py): .ci/run installs nginx.
        pytest.skip("nginx is not installed (apt-get install nginx; .ci/run installs it)")
    (base / "store" / "private").mkdir(parents=True)
    (base / "tmp").mkdir()
    for attempt in range(5):
        port = free_port()
        conf = base / "nginx.conf"
        user = "user root;" if os.geteuid() == 0 else ""
        conf.write_text(CONF.format(base=base, port=port, token=TOKEN, user=user), encoding="utf-8")
        proc = subprocess.Popen(
            [NGINX, "-p", str(base), "-c", str(conf), "-e", str(base / "error.log"),
             "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return proc, Nginx(port, base / "store", base / "access.log")
            except OSError:
                time.sleep(0.05)
        stop(proc)
        if attempt == 4:
            errors = (base / "error.log").read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(f"nginx did not start: {errors[-2000:]}")
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()


def stored(folder: Path, kind: str) -> dict[str, bytes]:
    """What the server holds under a folder's `/ac/` or `/cas/`: key → bytes."""
    area = folder / kind
    return (
        {path.name: path.read_bytes() for path in sorted(area.iterdir())} if area.is_dir() else {}
    )


def silent_server() -> tuple[socket.socket, int, list[socket.socket]]:
    """A socket on a loopback port that accepts connections and never answers (a server that
    hangs): (the socket, its port, the connections it holds). Close the socket to end it."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1], held
