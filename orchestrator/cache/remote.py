"""A cache server a farm already runs, spoken to in the Bazel HTTP remote cache protocol.

`GET` / `PUT` of `<url>/cas/<sha256>` (content, named by the SHA-256 of its bytes: bazel-remote
checks that on every PUT) and `<url>/ac/<sha256>` (anything, under a key of the client's
choosing), as bazel-remote, nginx's WebDAV module and most HTTP caches serve them. Behind the
local cache folder: read local, then remote; write both (cache/__init__.py, cache/actions.py).

What goes where (every `/ac/` key is the SHA-256 of a domain-separated encoding, never a path a
server could be made to misuse):
  /cas/<sha256 of the bytes>                 a blob (a result, a part, a large value)
  /ac/<sha256("orchestrate blob v1\\0" + BLAKE3)>   `<sha256> <size>`: where a blob known by its
                                              BLAKE3 digest (the store's names) is held
  /ac/<sha256("orchestrate action v1\\0" + stage + unit key)>   an action entry (`RemoteEntry`):
                                              the files read, the result's BLAKE3 digest and its
                                              address, the check and the farm key's signature
A hit is one AC GET and one CAS GET; a part of a result, two. Nothing fetched is trusted for
being there: a blob is checked against its BLAKE3 digest, an action entry against its check and,
with the farm's key, its signature (signing.py), exactly as rows of the cache folder are; the
address entries need no signature, since what they lead to is checked by its digest.

A server that is down, slow or refuses us never fails a build: the first failure (refused,
timed out, any status but 2xx, or 404 on a GET, which is a miss) turns the remote off for the
rest of the run with one warning line, and the build goes on with the local cache. Uploads run
on a few threads behind a bounded queue, waited for when the cache is flushed (blobs before the
entries that name them), so a slow server holds a build up by at most about a timeout.

urllib3 (connection pooling per thread, timeouts, no retries) is imported only when a build
names a remote.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgpack

from ..hashing import digest_bytes
from .db import note_hazard

AC, CAS = "ac", "cas"
BLOB_ADDRESS = b"orchestrate blob v1\0"
ACTION_ENTRY = b"orchestrate action v1\0"
ENTRY_FORMAT = "orchestrate action entry 1"
ADDRESS_BYTES = 128  # `<64 hex> <size>`
MAX_ENTRY_BYTES = 64 << 20  # an action entry: mostly the files its unit read
MAX_BLOB_BYTES = 4 << 30
UPLOAD_THREADS = 4
QUEUED_BYTES = 64 << 20  # what waits for upload; the driver waits when more would


@dataclass(frozen=True)
class RemoteSettings:
    """Where the server is and how to speak to it (`cache.remote` in the build file)."""

    url: str  # http(s)://host[:port]/[prefix/], ending with "/"
    header: str = "Authorization"
    header_value: str | None = field(default=None, repr=False)  # a credential: never shown
    connect_timeout: float = 1.0
    timeout: float = 5.0  # the longest wait for the server's next bytes
    upload: bool = True  # False: read the farm's cache, never write it (a laptop)

    def __reduce__(self):  # the credential stays in the process that read it
        raise TypeError("the remote cache settings stay in the process that read them")


class BlobAddress(NamedTuple):
    """Where the server holds a blob: the SHA-256 of its bytes, and their number."""

    sha256: str
    size: int

    def encode(self) -> bytes:
        return f"{self.sha256} {self.size}".encode("ascii")

    @classmethod
    def decode(cls, data: bytes) -> BlobAddress | None:
        """The address an `/ac/` value holds; None if it holds none."""
        fields = data.split(b" ")
        if len(fields) != 2 or not _is_sha256(fields[0]) or not fields[1].isdigit():
            return None
        size = int(fields[1])
        return cls(fields[0].decode("ascii"), size) if size <= MAX_BLOB_BYTES else None

    @classmethod
    def of(cls, data: bytes) -> BlobAddress:
        return cls(hashlib.sha256(data).hexdigest(), len(data))


class RemoteEntry(NamedTuple):
    """An action entry as the server holds it: the local row's fields, and where its result is."""

    stage: str
    key: bytes
    result: bytes  # the BLAKE3 digest
    address: BlobAddress
    reads: bytes  # msgpack [[path, digest or None], …], as the local row holds them
    check: bytes
    signature: bytes | None

    def encode(self) -> bytes:
        return msgpack.packb(
            [ENTRY_FORMAT, self.stage, self.key, self.result, self.address.encode(), self.reads,
             self.check, self.signature]
        )  # fmt: skip

    @property
    def intact(self) -> bool:
        return row_check(self.result, self.reads) == self.check

    @classmethod
    def decode(cls, data: bytes) -> RemoteEntry | None:
        """The entry an `/ac/` value holds; None if it holds none (damaged, or another format)."""
        try:
            fields = msgpack.unpackb(data)
        except (ValueError, msgpack.ExtraData, TypeError):
            return None
        if not isinstance(fields, list) or len(fields) != 8 or fields[0] != ENTRY_FORMAT:
            return None
        _, stage, key, result, address, reads, check, signature = fields
        typed = isinstance(stage, str) and all(
            isinstance(value, bytes) for value in (key, result, address, reads, check)
        )
        if not typed or not isinstance(signature, bytes | None):
            return None
        located = BlobAddress.decode(address)
        if located is None:
            return None
        return cls(stage, key, result, located, reads, check, signature)


def row_check(result: bytes, reads: bytes) -> bytes:
    """An action entry's plain check (proof it is intact, not of who wrote it: signing.py)."""
    return digest_bytes(result + reads).encode("ascii")[:16]


def blob_key(digest: str) -> str:
    """The `/ac/` key of a blob's address."""
    return hashlib.sha256(BLOB_ADDRESS + digest.encode("ascii")).hexdigest()


def action_key(stage: str, key: bytes) -> str:
    """The `/ac/` key of a unit's action entry."""
    name = stage.encode("utf-8")
    return hashlib.sha256(ACTION_ENTRY + len(name).to_bytes(8, "big") + name + key).hexdigest()


def _is_sha256(text: bytes) -> bool:
    return len(text) == 64 and all(c in b"0123456789abcdef" for c in text)


class RemoteStore:
    """One cache server for one run: blocking GETs for the driver, PUTs on upload threads."""

    def __init__(self, settings: RemoteSettings, log: Any) -> None:
        import urllib3

        self.settings = settings
        self._log = log
        headers = {"User-Agent": "orchestrate"}
        if settings.header_value is not None:
            headers[settings.header] = settings.header_value
        self._errors = urllib3.exceptions
        self._http = urllib3.PoolManager(
            num_pools=2,
            maxsize=UPLOAD_THREADS + 1,
            block=True,
            headers=headers,
            retries=False,  # a failure turns the remote off: no storm of retries at a sick server
            timeout=urllib3.Timeout(connect=settings.connect_timeout, read=settings.timeout),
        )
        self._failure: str | None = None
        self._room = threading.Condition()  # guards the queued bytes and the failure
        self._queued = 0
        self._tasks: queue.Queue[tuple[Callable[[], Any], int] | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._closed = False
        note_hazard(self, RemoteStore._fork_hazard)

    def _fork_hazard(self) -> str | None:
        """A forked copy would share the pooled connections and the upload threads' queue."""
        return None if self._closed else "a cache server's connections are open"

    @property
    def available(self) -> bool:
        return self._failure is None

    @property
    def url(self) -> str:
        return self.settings.url

    # -- requests ------------------------------------------------------------------------------
    def get(self, kind: str, key: str, limit: int) -> bytes | None:
        """The value under `/<kind>/<key>`; None on a miss or once the remote is off. At most
        `limit` + 1 bytes are read: a longer answer is cut (and fails its digest)."""
        if self._failure is not None:
            return None
        try:
            response = self._http.request(
                "GET", self._url(kind, key), preload_content=False, decode_content=False,
                redirect=False,
            )  # fmt: skip
        except self._errors.HTTPError as exc:
            self.fail(self._reason(exc))
            return None
        try:
            if response.status == 404:
                return None
            if response.status != 200:
                self.fail(f"HTTP {response.status} for GET /{kind}/")
                return None
            return response.read(limit + 1, decode_content=False)
        except self._errors.HTTPError as exc:
            self.fail(self._reason(exc))
            return None
        finally:
            response.close()
            response.release_conn()

    def put(self, kind: str, key: str, data: bytes) -> bool:
        """Store `data` under `/<kind>/<key>` now (on an upload thread); False once off."""
        if self._failure is not None:
            return False
        try:
            response = self._http.request(
                "PUT", self._url(kind, key), body=data, preload_content=False, redirect=False,
                headers={**self._http.headers, "Content-Type": "application/octet-stream"},
            )  # fmt: skip
            response.drain_conn()
            response.release_conn()
        except self._errors.HTTPError as exc:
            self.fail(self._reason(exc))
            return False
        if 200 <= response.status < 300:
            return True
        hint = ""
        if kind == AC and response.status == 400:  # bazel-remote checks ActionResults by default
            hint = "; bazel-remote needs --disable_http_ac_validation"
        self.fail(f"HTTP {response.status} for PUT /{kind}/{hint}")
        return False

    def _url(self, kind: str, key: str) -> str:
        return f"{self.settings.url}{kind}/{key}"

    def _reason(self, exc: Exception) -> str:
        """What went wrong, in a few words (never a header: urllib3's errors hold none)."""
        errors = self._errors
        if isinstance(exc, errors.ReadTimeoutError):
            return f"no answer within {self.settings.timeout:g} s"
        if isinstance(exc, errors.NameResolutionError):
            return "its host name does not resolve"
        if isinstance(exc, errors.NewConnectionError):
            cause = exc.__cause__
            if isinstance(cause, OSError) and cause.strerror:
                return cause.strerror.lower()
            return "no connection"
        if isinstance(exc, errors.ConnectTimeoutError):
            return f"no connection within {self.settings.connect_timeout:g} s"
        return str(exc).rpartition("): ")[2] or type(exc).__name__

    def fail(self, why: str) -> None:
        """Turn the remote off for the rest of the run, saying so once."""
        with self._room:
            if self._failure is not None:
                return
            self._failure = why
            self._room.notify_all()
        if self._log is not None:
            self._log.warning(
                f"remote cache {self.settings.url} unavailable ({why}): building without it"
            )

    # -- uploads ---------------------------------------------------------------------------------
    def submit(self, task: Callable[[], Any], size: int) -> None:
        """Run `task` (which calls `put`) on an upload thread; waits while the queue is full."""
        if self._failure is not None or self._closed:
            return
        if not self._threads:
            for number in range(UPLOAD_THREADS):
                thread = threading.Thread(
                    target=self._work, name=f"remote-cache-upload-{number}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        with self._room:
            while self._queued and self._queued + size > QUEUED_BYTES and self._failure is None:
                self._room.wait()
            self._queued += size
        self._tasks.put((task, size))

    def _work(self) -> None:
        while True:
            item = self._tasks.get()
            if item is None:
                self._tasks.task_done()
                return
            task, size = item
            try:
                if self._failure is None:
                    task()
            except Exception as exc:  # an upload never fails the build: the remote goes off
                self.fail(f"{type(exc).__name__}: {exc}")
            finally:
                with self._room:
                    self._queued -= size
                    self._room.notify_all()
                self._tasks.task_done()

    def wait(self) -> None:
        """Until every upload submitted so far is done (or dropped, the remote being off)."""
        if self._threads:
            self._tasks.join()

    def close(self) -> None:
        """Finish the uploads, stop the threads, let go of the connections."""
        if self._closed:
            return
        self._closed = True
        self.wait()
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()
        self._http.clear()
