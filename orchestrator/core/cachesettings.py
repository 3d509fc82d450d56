"""The build file's `cache:` section: the folder, the farm's key that signs its entries, and the
cache server behind it (docs/cluster.md, "The cache key" and "A cache server").

    cache: build/cache                       # a folder, or:
    cache:
      path: build/cache
      key_env: ORCHESTRATE_CACHE_KEY         # or key_file: the farm's key (signing.py)
      remote: http://cache.farm:8080/        # or, with more said:
      remote:
        url: https://cache.farm/orchestrate/
        header_env: FARM_CACHE_AUTH          # its value is sent as the header, never shown
        header: Authorization
        connect_timeout: 1                   # seconds
        timeout: 5                           # seconds without an answer: the remote goes off
        upload: true                         # false: read the farm's cache, never write it

The secrets (the key, the header's value) are read when a build asks for them, never when the
file is loaded: `orchestrate --help`, `clean` and `cache stats` need neither.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..cache.remote import RemoteSettings
from ..cache.signing import EntryKey
from ..errors import ConfigError

Complaint = Callable[[str, tuple[str, ...]], ConfigError]  # a message about a key → the error
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


class RemoteConfig(BaseModel):
    """`cache.remote`: a server speaking the Bazel HTTP remote cache protocol (remote.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    header: str = "Authorization"
    header_env: str | None = None  # the environment variable holding the header's value
    connect_timeout: float = Field(default=1.0, gt=0, le=60)
    timeout: float = Field(default=5.0, gt=0, le=600)
    upload: bool = True

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"expected an http:// or https:// address with a host (got {value!r})")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "the address holds credentials, which would be shown wherever it is: give them "
                "in the environment variable named by header_env"
            )
        if parts.query or parts.fragment:
            raise ValueError(f"the address may not have a query or a fragment (got {value!r})")
        try:
            parts.port  # noqa: B018  (raises on a port that is no number)
        except ValueError as exc:
            raise ValueError(f"{exc} (got {value!r})") from None
        return value if value.endswith("/") else value + "/"

    @field_validator("header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not HEADER_NAME.fullmatch(value):
            raise ValueError(f"not an HTTP header name: {value!r}")
        return value


class CacheConfig(BaseModel):
    """`cache:` a folder (`cache: build/cache`), or the folder, the farm's key that signs its
    entries and the server behind it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = "build/cache"
    key_file: str | None = None  # a file holding the key (relative to the build file)
    key_env: str | None = None  # or the environment variable holding it
    remote: RemoteConfig | None = None

    @field_validator("remote", mode="before")
    @classmethod
    def _remote_url(cls, value: Any) -> Any:
        return {"url": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_key(self) -> CacheConfig:
        if self.key_file is not None and self.key_env is not None:
            raise ValueError("give the key in key_file or in key_env, not both")
        return self


def read_key(settings: CacheConfig, folder: Path, complain: Complaint) -> EntryKey | None:
    """The farm's key, read now (`key_file` relative to `folder`); None without one."""
    if settings.key_file is not None:
        where = ("cache", "key_file")
        path = Path(os.path.normpath(folder / os.path.expanduser(settings.key_file)))
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            raise complain(f"cannot read the cache key {path}: {exc.strerror}", where) from None
        source = f"cache.key_file {path}"
    elif settings.key_env is not None:
        where = ("cache", "key_env")
        secret = os.environ.get(settings.key_env, "").strip().encode("utf-8")
        if not secret:
            raise complain(f"the environment variable {settings.key_env} is not set", where)
        source = f"cache.key_env {settings.key_env}"
    else:
        return None
    try:
        return EntryKey(secret, source)
    except ValueError as exc:
        raise complain(str(exc), where) from None


def read_remote(settings: CacheConfig, complain: Complaint) -> RemoteSettings | None:
    """The cache server's settings with the header's value read now; None without a server."""
    remote = settings.remote
    if remote is None:
        return None
    value = None
    if remote.header_env is not None:
        where = ("cache", "remote", "header_env")
        value = os.environ.get(remote.header_env, "").strip()
        if not value:
            raise complain(f"the environment variable {remote.header_env} is not set", where)
        if not value.isascii() or any(ord(char) < 0x20 or ord(char) == 0x7F for char in value):
            raise complain(
                f"the environment variable {remote.header_env} holds a control character or "
                "one that is not ASCII: an HTTP header's value may hold neither",
                where,
            )
    return RemoteSettings(
        remote.url, remote.header, value, remote.connect_timeout, remote.timeout, remote.upload
    )
