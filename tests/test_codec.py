"""The value codec: what round-trips, that equal values store equal bytes, and that bytes naming
anything but a declared record type are refused without running anything."""

from __future__ import annotations

import dataclasses
import sys
from typing import NamedTuple

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator import codec
from orchestrator.codec import RECORD, digest, dumps, loads, record
from orchestrator.errors import CodecError


@record
class Point(NamedTuple):
    x: int
    label: str


@record
@dataclasses.dataclass(frozen=True)
class Box:
    corner: Point
    tags: frozenset
    parts: tuple = ()
    computed: int = dataclasses.field(default=0, init=False)


class Undeclared(NamedTuple):
    x: int


@dataclasses.dataclass
class UndeclaredData:
    x: int


def test_records_tuples_sets_and_nesting_round_trip():
    """Records (NamedTuple and dataclass), tuples apart from lists, sets apart from frozensets,
    bytes, big ints, Chinese text and nesting all come back equal and of the same types."""
    value = {
        "points": [Point(1, "甲"), Point(2, "乙")],
        "box": Box(Point(3, "丙"), frozenset({"b", "a"}), (Point(4, "丁"), [1, (2, 3)])),
        "pair": (1, [2, 3], {"k": (4,)}),
        "set": {3, 1, 2},
        "frozen": frozenset({(1, 2), (0, 1)}),
        "bytes": b"\x00\xff",
        "big": 2**63 - 1,
        "none": None,
        "float": 0.5,
        5: "int key",
    }
    back = loads(dumps(value))
    assert back == value
    assert type(back["pair"]) is tuple and type(back["pair"][1]) is list
    assert type(back["set"]) is set and type(back["frozen"]) is frozenset
    assert type(back["points"][0]) is Point and type(back["box"]) is Box
    assert type(back["box"].parts[0]) is Point


def test_a_dataclass_record_stores_only_its_init_fields():
    """Fields the constructor does not take are not stored (the class computes them again)."""
    box = Box(Point(0, ""), frozenset())
    object.__setattr__(box, "computed", 7)
    assert loads(dumps(box)).computed == 0


INTS = st.integers(-(2**63), 2**64 - 1)  # msgpack's range
SCALARS = st.one_of(st.none(), st.booleans(), INTS, st.text(), st.binary())
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.frozensets(INTS, max_size=4),
        st.sets(st.text(max_size=3), max_size=4),
        st.builds(Point, INTS, st.text(max_size=5)),
    ),
    max_leaves=12,
)


@given(VALUES)
def test_any_value_round_trips_to_the_same_bytes(value):
    """Whatever is stored decodes to an equal value, which stores the same bytes again."""
    data = dumps(value)
    back = loads(data)
    assert back == value
    assert dumps(back) == data


def _reference_bytes(value):
    """The stored format written the plain way: a fresh msgpack call for every ext value."""

    def default(item):
        kind = type(item)
        if kind in (Point, Box):
            name = f"{kind.__module__}:{kind.__qualname__}"
            fields = list(item) if kind is Point else [item.corner, item.tags, item.parts]
            return msgpack.ExtType(RECORD, _reference_bytes([name, *fields]))
        if kind is tuple:
            return msgpack.ExtType(codec.TUPLE, _reference_bytes(list(item)))
        code = codec.FROZENSET if kind is frozenset else codec.SET
        return msgpack.ExtType(code, _reference_bytes(sorted(item)))

    return msgpack.packb(value, default=default, strict_types=True, use_bin_type=True)


@given(VALUES)
def test_the_stored_bytes_are_the_plain_msgpack_format(value):
    """The reused per-level packers write exactly what one msgpack call per ext value writes,
    so caches written before they were reused stay valid."""
    assert dumps(value) == _reference_bytes(value)


def test_a_refused_value_leaves_the_codec_usable_at_every_level():
    """A value refused deep inside a nested one leaves no half-packed bytes behind."""
    with pytest.raises(TypeError):
        dumps([1, (2, (3, Box(Point(1, "a"), frozenset(), (object(),))))])
    value = [1, (2, (3, Box(Point(1, "a"), frozenset({2}), (4,))))]
    assert dumps(value) == _reference_bytes(value)


def test_threads_store_the_same_bytes_at_once():
    """Each thread packs with packers of its own: concurrent stores do not mix their bytes."""
    from concurrent.futures import ThreadPoolExecutor

    values = [
        (index, tuple(range(index % 7)), Point(index, "p" * (index % 5))) for index in range(2000)
    ]
    with ThreadPoolExecutor(4) as pool:
        stored = list(pool.map(dumps, values))
    assert stored == [_reference_bytes(value) for value in values]


def test_a_large_value_does_not_keep_its_packing_buffer_alive():
    """After storing a value of megabytes, the codec holds no buffer of its size (a Packer
    keeps the buffer it grew; a build stores a 100 MB index once)."""
    import tracemalloc

    value = [("x" * 100, index) for index in range(100_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        size = len(dumps(value))
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert size > 10 * codec.KEEP_BUFFER_BYTES
    assert retained < 2 * codec.KEEP_BUFFER_BYTES


def test_sets_store_the_same_bytes_whatever_their_insertion_order():
    """Sets are stored sorted: equal sets, equal bytes, equal digests."""
    first, second = set(), set()
    for item in ["q", "a", "m", "z"]:
        first.add(item)
    for item in ["z", "m", "a", "q"]:
        second.add(item)
    assert dumps(first) == dumps(second)
    assert digest(frozenset(range(100))) == digest(frozenset(reversed(range(100))))


def test_dicts_keep_their_order_and_it_is_part_of_the_bytes():
    """A dict decodes in the order it was stored (sources rely on repository order), so the
    same entries in another order are other bytes: producers that need stable digests build
    their dicts in key order (as Keyed values are read)."""
    forward, backward = {"a": 1, "b": 2}, {"b": 2, "a": 1}
    assert list(loads(dumps(backward))) == ["b", "a"]
    assert dumps(forward) != dumps(backward)


def test_undeclared_types_are_refused_when_stored():
    """A NamedTuple or dataclass that is not declared storable, or any other object, is refused
    with a message naming it."""
    with pytest.raises(TypeError, match="Undeclared is not declared storable"):
        dumps(Undeclared(1))
    with pytest.raises(TypeError, match="UndeclaredData is not declared storable"):
        dumps(UndeclaredData(1))
    with pytest.raises(TypeError, match="cannot store a object"):
        dumps(object())


def test_a_record_name_not_declared_is_refused_without_importing_it():
    """Bytes naming a class nobody declared — even one importable from the standard library, or a
    module outside the allowed packages — are refused; the module is never imported."""
    for name in ("os:system", "subprocess:Popen", "collections:OrderedDict", "tests_evil:Thing"):
        forged = msgpack.packb(
            msgpack.ExtType(RECORD, msgpack.packb([name, "echo pwned"], use_bin_type=True)),
            use_bin_type=True,
        )
        with pytest.raises(CodecError, match="unknown record type"):
            loads(forged)
    assert "tests_evil" not in sys.modules


def test_a_record_of_an_allowed_package_is_imported_to_decode(tmp_path, monkeypatch):
    """A record defined in a module of an allowed package decodes in a process that has not
    imported that module yet (values are read before their stage is); a package not allowed is
    never imported."""
    package = tmp_path / "codecpkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kinds.py").write_text(
        "from typing import NamedTuple\n"
        "from orchestrator.codec import record\n\n\n"
        "@record\nclass Kind(NamedTuple):\n    name: str\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(codec, "_records", dict(codec._records))
    monkeypatch.setattr(codec, "_fields", dict(codec._fields))
    monkeypatch.setattr(codec, "_packages", set(codec._packages))
    from codecpkg.kinds import Kind  # type: ignore[import-not-found]

    data = dumps(Kind("x"))
    for module in ("codecpkg.kinds", "codecpkg"):
        monkeypatch.delitem(sys.modules, module)
    del codec._records["codecpkg.kinds:Kind"]
    with pytest.raises(CodecError, match="unknown record type"):
        loads(data)
    assert "codecpkg" not in sys.modules
    codec.allow_package("codecpkg.anything")
    assert loads(data).name == "x"
    assert "codecpkg.kinds" in sys.modules


def test_unknown_ext_codes_and_damaged_bytes_are_codec_errors():
    """An ext code the codec does not know, truncated bytes and a record whose fields do not
    fit its class are CodecErrors, never something else."""
    with pytest.raises(CodecError, match="unknown ext type 42"):
        loads(msgpack.packb(msgpack.ExtType(42, b"anything")))
    data = dumps({"a": [Point(1, "x")] * 3})
    with pytest.raises(CodecError):
        loads(data[:-3])
    wrong_arity = msgpack.packb(
        msgpack.ExtType(RECORD, msgpack.packb([f"{__name__}:Point", 1, "x", "extra"]))
    )
    with pytest.raises(CodecError):
        loads(wrong_arity)


@record
class Versioned(NamedTuple):
    name: str
    added_later: int = 7


def test_a_record_stored_before_a_field_existed_decodes_with_its_default():
    """A NamedTuple stored with all its fields is rebuilt as the tuple of them; one stored
    before a defaulted field was added is built by its class, the default filling the field;
    an empty record is a CodecError."""
    name = f"{__name__}:Versioned"
    assert loads(dumps(Versioned("a", 3))) == Versioned("a", 3)
    assert type(loads(dumps(Versioned("a", 3)))) is Versioned
    older = msgpack.packb(msgpack.ExtType(RECORD, msgpack.packb([name, "a"])))
    assert loads(older) == Versioned("a", 7)
    with pytest.raises(CodecError):
        loads(msgpack.packb(msgpack.ExtType(RECORD, msgpack.packb([]))))
