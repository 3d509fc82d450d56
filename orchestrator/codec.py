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
import threading
from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Any, TypeVar

import msgpack

from .errors import CodecError
from .hashing import digest_bytes
from .memory import paused_gc

T = TypeVar("T")

RECORD, TUPLE, FROZENSET, SET = 1, 2, 3, 4
#: A packer that produced more bytes than this is replaced, so that its grown buffer is freed.
KEEP_BUFFER_BYTES = 1 << 20

#: msgpack's ExtType made as the tuple it is, without its checks in Python (our codes are
#: valid, a Packer's output is bytes): they were a third of encoding a value of records.
_ExtType = msgpack.ExtType
_new_ext: Callable[[type, tuple[int, bytes]], Any] = tuple.__new__
#: stored name → what makes a record of its class from the decoded [name, *values] (`_builder`)
_records: dict[str, Callable[[list], Any]] = {}
#: record class → (stored name, the function giving its field values in order)
_fields: dict[type, tuple[str, Callable[[Any], Iterable[Any]]]] = {}
_packages: set[str] = {"orchestrator"}


def record(cls: type[T]) -> type[T]:
    """Class decorator: instances of `cls` (a NamedTuple or a dataclass) may be stored."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    values: Callable[[Any], Iterable[Any]]
    if hasattr(cls, "_fields"):
        values = iter  # a NamedTuple: its values are the tuple
    elif dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if f.init]
        getter = attrgetter(*names)  # one C call for every field
        values = getter if len(names) > 1 else _one_value(getter)
    else:
        raise TypeError(f"{name} is neither a NamedTuple nor a dataclass")
    _records[name] = _builder(cls)
    _fields[cls] = (name, values)
    return cls


def _builder(cls: type) -> Callable[[list], Any]:
    """What makes a record of `cls` from its decoded [name, *values]. A NamedTuple with all
    its fields stored is the tuple of them (its generated __new__ does only that, and calling
    it costs a fifth of decoding an index); otherwise the class is called, defaults filling
    fields a record stored before they existed."""
    if hasattr(cls, "_fields"):

        def named_tuple(
            values: list, cls: Any = cls, arity: int = len(cls._fields) + 1, make=tuple.__new__
        ) -> Any:
            return make(cls, values[1:]) if len(values) == arity else cls(*values[1:])

        return named_tuple
    return lambda values: cls(*values[1:])


def _one_value(getter: Callable[[Any], Any]) -> Callable[[Any], tuple[Any]]:
    return lambda value: (getter(value),)


def allow_package(name: str) -> None:
    """Let the decoder import record-defining modules of this top-level package."""
    _packages.add(name.split(".")[0])


class _Level:
    """A msgpack Packer for one nesting level of ext values, and the level below it.

    An ext value's data is packed while its container is being packed, so one Packer cannot
    serve both; a fresh one per nested value (`msgpack.packb`) cost several microseconds each,
    which was most of the time spent storing a build's values. Levels are made on demand and
    kept per thread. A Packer keeps the buffer it grew for the largest value it packed, so
    after a large value the level takes a new one (a 100 MB index kept 100 MB alive).
    """

    def __init__(self) -> None:
        self.packer = self._new_packer()
        self.below: _Level | None = None
        self.busy = False

    def _new_packer(self) -> msgpack.Packer:
        return msgpack.Packer(default=self.default, strict_types=True, use_bin_type=True)

    def run(self, value: Any) -> bytes:
        """`value`'s bytes, packed at this level (a Packer resets its buffer after an error)."""
        data = self.packer.pack(value)
        if len(data) > KEEP_BUFFER_BYTES:
            self.packer = self._new_packer()
        return data

    def run_once(self, value: Any) -> bytes:
        """`value`'s bytes at the top level; a call while this level packs (a signal handler
        storing a value) packs on a level of its own."""
        if self.busy:
            return _Level().run(value)
        self.busy = True
        try:
            return self.run(value)
        finally:
            self.busy = False

    def pack(self, value: Any) -> bytes:
        below = self.below
        if below is None:
            below = self.below = _Level()
        return below.run(value)

    def default(self, value: Any) -> Any:
        kind = type(value)
        spec = _fields.get(kind)
        if spec is not None:
            name, values = spec
            return _new_ext(_ExtType, (RECORD, self.pack([name, *values(value)])))
        if kind is tuple:
            return _new_ext(_ExtType, (TUPLE, self.pack(list(value))))
        if kind is frozenset or kind is set:
            code = FROZENSET if kind is frozenset else SET
            return _new_ext(_ExtType, (code, self.pack(sorted(value))))
        if (isinstance(value, tuple) and hasattr(value, "_fields")) or dataclasses.is_dataclass(
            value
        ):
            raise TypeError(
                f"{kind.__module__}.{kind.__qualname__} is not declared storable "
                f"(orchestrator.codec.record)"
            )
        raise TypeError(f"cannot store a {kind.__name__}")


class _Levels(threading.local):
    def __init__(self) -> None:
        self.top = _Level()


_levels = _Levels()


def _pack(value: Any) -> bytes:
    return _levels.top.run_once(value)


def _unpack(data: bytes) -> Any:
    return _unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)


_unpackb = msgpack.unpackb


def _ext(code: int, data: bytes) -> Any:
    # Called for every tuple and record of a value (400,000 of them in a 100,000-resource
    # index): msgpack is called directly, not through _unpack.
    if code == TUPLE:
        return tuple(_unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False))
    if code == RECORD:
        values = _unpackb(data, ext_hook=_ext, raw=False, strict_map_key=False)
        try:
            build = _records[values[0]]
        except (KeyError, IndexError, TypeError):  # unknown, or its module not imported yet
            build = _record_builder(values[0] if values else None)
        return build(values)
    if code == FROZENSET:
        return frozenset(_unpack(data))
    if code == SET:
        return set(_unpack(data))
    raise CodecError(f"unknown ext type {code}")


def _record_builder(name: Any) -> Callable[[list], Any]:
    """The builder of the record class stored as `name`, its module imported first when it
    belongs to an allowed package; CodecError when there is none."""
    build = _records.get(name) if isinstance(name, str) else None
    if build is None and isinstance(name, str) and ":" in name:
        module = name.partition(":")[0]
        if module.split(".")[0] in _packages:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
            build = _records.get(name)
    if build is None:
        raise CodecError(f"unknown record type {name!r}")
    return build


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
