"""How values are stored: msgpack data that executes nothing when read.

A cache folder may be shared between machines, so what it holds is untrusted input: pickle
would run whatever code a writer put there. msgpack carries only data; the few shapes it lacks
are ext types: tuples (kept apart from lists), frozensets and sets (sorted, so the bytes are
deterministic), and *records*, instances of classes a module declared storable with `@record`.
Decoding builds records by calling the registered class with the stored field values, and
nothing else: an unknown record name is an error, never an import of something else.

A record's name is `module:qualname`. A module that defines records is imported at decode time
only when it belongs to a package allowed with `allow_package` (the engine and the packages of
the registered stages), so values decode in a process that has not imported their stage yet.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from typing import Any, TypeVar

import msgpack

from .hashing import digest_bytes
from .memory import paused_gc

T = TypeVar("T")

RECORD, TUPLE, FROZENSET, SET = 1, 2, 3, 4

_records: dict[str, type] = {}
_fields: dict[type, tuple[str, tuple[str, ...] | None]] = {}
_packages: set[str] = {"orchestrator"}


class CodecError(ValueError):
    """Bytes that do not decode to a value of known types (damaged, or foreign)."""


def record(cls: type[T]) -> type[T]:
    """Class decorator: instances of `cls` (a NamedTuple or a dataclass) may be stored."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    if hasattr(cls, "_fields"):
        fields = None  # a NamedTuple: its values are the tuple
    elif dataclasses.is_dataclass(cls):
        fields = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    else:
        raise TypeError(f"{name} is neither a NamedTuple nor a dataclass")
    _records[name] = cls
    _fields[cls] = (name, fields)
    return cls


def allow_package(name: str) -> None:
    """Let the decoder import record-defining modules of this top-level package."""
    _packages.add(name.split(".")[0])


def _pack(value: Any) -> bytes:
    return msgpack.packb(value, default=_default, strict_types=True, use_bin_type=True)


def _default(value: Any) -> Any:
    kind = type(value)
    spec = _fields.get(kind)
    if spec is not None:
        name, fields = spec
        values = list(value) if fields is None else [getattr(value, f) for f in fields]
        return msgpack.ExtType(RECORD, _pack([name, *values]))
    if kind is tuple:
        return msgpack.ExtType(TUPLE, _pack(list(value)))
    if kind is frozenset or kind is set:
        return msgpack.ExtType(FROZENSET if kind is frozenset else SET, _pack(sorted(value)))
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        raise TypeError(
            f"{kind.__module__}.{kind.__qualname__} is not declared storable "
            f"(orchestrator.codec.record)"
        )
    if dataclasses.is_dataclass(value):
        raise TypeError(
            f"{kind.__module__}.{kind.__qualname__} is not declared storable "
            f"(orchestrator.codec.record)"
        )
    raise TypeError(f"cannot store a {kind.__name__}")


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)


def _ext(code: int, data: bytes) -> Any:
    if code == TUPLE:
        return tuple(_unpack(data))
    if code == RECORD:
        name, *values = _unpack(data)
        return _record_class(name)(*values)
    if code == FROZENSET:
        return frozenset(_unpack(data))
    if code == SET:
        return set(_unpack(data))
    raise CodecError(f"unknown ext type {code}")


def _record_class(name: Any) -> type:
    cls = _records.get(name) if isinstance(name, str) else None
    if cls is None and isinstance(name, str) and ":" in name:
        module = name.partition(":")[0]
        if module.split(".")[0] in _packages:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
            cls = _records.get(name)
    if cls is None:
        raise CodecError(f"unknown record type {name!r}")
    return cls


def dumps(value: Any) -> bytes:
    """The stored bytes of a value: equal values give equal bytes, sets included (sorted);
    a dict keeps its order, so a value whose digest matters builds its dicts in key order."""
    return _pack(value)


def loads(data: bytes) -> Any:
    """The value stored in `data`; CodecError when it is not a value this process knows."""
    try:
        with paused_gc():  # a large value is a burst of acyclic containers (memory.py)
            return _unpack(data)
    except CodecError:
        raise
    except Exception as exc:  # msgpack's own errors, a record refusing its fields
        raise CodecError(f"undecodable value: {type(exc).__name__}: {exc}") from None


def digest(value: Any) -> str:
    """The digest of a value's stored bytes."""
    return digest_bytes(dumps(value))
