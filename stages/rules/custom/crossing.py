"""What crosses between a validating process and a custom-code worker, and how.

Requests go out pickled: the worker trusts the process that started it. Replies come back through
`load_reply`, an unpickler that builds plain data only (str, bytes, numbers, None, lists, tuples,
dicts, sets, elements): whatever the code in a worker does, it can make its own call fail, never
run code in the validating process.

What a custom function returns is made plain data in the worker (`to_plain`): subclasses of the
built-in types become the built-in type (a NamedTuple a tuple), any other object its `str()`.

An extracted element (`{dom}`) crosses as a copy of its subtree — tag, attributes, text, children
and each one's line (its true line, past 65,535 too: ../lines.py) — so its parent and siblings
stay behind. An element a function returns that
it was given comes back as the original element (its identity and line kept); another comes back as
a new copy with the lines it had in the worker.
"""

from __future__ import annotations

import io
import pickle
import threading
from typing import Any, NamedTuple

from lxml import etree

from ..lines import LARGEST_STORED_LINE, lines_of

PROTOCOL = 5
#: A reply larger than this is refused (a worker cannot make the validating process allocate more).
MAX_REPLY_BYTES = 1 << 29
MAX_DEPTH = 200


def element_copy(element: Any) -> tuple[bytes, list]:
    """The XML of an element's subtree and the line of each of its nodes, in document order."""
    return etree.tostring(element, with_tail=False), lines_of(list(element.iter()))


_STORED_LINE = etree._Element.sourceline  # lxml's own descriptor: the line on the C node


class _TrueLine:
    """`sourceline` as the copied node had it, past 65,535 too.

    lxml refuses to set a line past 16 bits (`OverflowError`), though its parser reports larger
    ones: a line up to LARGEST_STORED_LINE is set on the node, a larger one is kept on the node's
    Python object (`true_line`). `element_from` keeps every node's object of such a copy alive
    as long as any of them is (each holds the list of all): whichever node custom code holds,
    every node it reaches is the object that has its line."""

    __slots__ = ()

    @property
    def sourceline(self) -> int | None:
        line = self.__dict__.get("true_line")
        return _STORED_LINE.__get__(self) if line is None else line

    @sourceline.setter
    def sourceline(self, line: int) -> None:
        if line > LARGEST_STORED_LINE:
            self.__dict__["true_line"] = line
        else:
            self.__dict__.pop("true_line", None)
            _STORED_LINE.__set__(self, line)


class _LinedElement(_TrueLine, etree.ElementBase):
    pass


class _LinedComment(_TrueLine, etree.CommentBase):
    pass


class _LinedPI(_TrueLine, etree.PIBase):
    pass


_LOOKUP = etree.ElementDefaultClassLookup(element=_LinedElement, comment=_LinedComment, pi=_LinedPI)
_PARSERS = threading.local()


def _parser(lined: bool) -> etree.XMLParser:
    """A safe parser, one per thread and kind (lxml parsers are not shared); a `lined` one makes
    `_TrueLine` nodes."""
    parser = getattr(_PARSERS, "lined" if lined else "plain", None)
    if parser is None:
        parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
        if lined:
            parser.set_element_class_lookup(_LOOKUP)
        setattr(_PARSERS, "lined" if lined else "plain", parser)
    return parser


def element_from(xml: bytes, lines: list) -> Any:
    """An element rebuilt from `element_copy`, each node with its line (entities and DTDs are
    never resolved). Plain lxml nodes unless a line is past what lxml stores (most copies)."""
    lines = [line if type(line) is int and line >= 0 else None for line in lines]
    large_lines = any(line is not None and line > LARGEST_STORED_LINE for line in lines)
    element = etree.fromstring(xml, _parser(large_lines))
    nodes = list(element.iter())
    for node, line in zip(nodes, lines):
        if line is None:
            continue
        if line <= LARGEST_STORED_LINE:
            _STORED_LINE.__set__(node, line)
        else:
            node.sourceline = line
    if large_lines:
        for node in nodes:
            node.kept_with = nodes
    return element


# -- requests: the validating process → a worker ---------------------------------------------------


class _RequestPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=PROTOCOL)
        self.elements: list[Any] = []

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, etree._Element):
            self.elements.append(obj)
            xml, lines = element_copy(obj)
            return ("element", len(self.elements) - 1, xml, lines)
        return None


class Request(NamedTuple):
    """A request as the host sends it."""

    frame: bytes
    elements: list[Any]  # the elements it carries (their positions are their references)


def dump_request(message: Any) -> Request:
    buffer = io.BytesIO()
    pickler = _RequestPickler(buffer)
    pickler.dump(message)
    return Request(buffer.getvalue(), pickler.elements)


class _RequestUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.given: dict[int, int] = {}  # id of a rebuilt element → its reference (this request)
        self.keep: list[Any] = []  # the rebuilt elements, alive as long as their ids are used

    def persistent_load(self, pid: Any) -> Any:
        _, reference, xml, lines = pid
        element = element_from(xml, lines)
        self.keep.append(element)
        self.given[id(element)] = reference
        return element


class Received(NamedTuple):
    """A request as a worker rebuilt it."""

    message: Any
    given: dict[int, int]  # id of a rebuilt element → its reference
    keep: list[Any]  # the rebuilt elements: alive as long as their ids are used


def load_request(data: bytes) -> Received:
    unpickler = _RequestUnpickler(io.BytesIO(data))
    message = unpickler.load()
    return Received(message, unpickler.given, unpickler.keep)


# -- replies: a worker → the validating process ----------------------------------------------------


def to_plain(value: Any, depth: int = 0) -> Any:
    """`value` as plain data (see the module docstring); elements are left for the pickler."""
    if depth > MAX_DEPTH:
        raise ValueError(f"the value is nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if value is None or kind in (str, bytes, int, float, bool, complex):
        return value
    if isinstance(value, etree._Element):
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict):
        return {to_plain(k, depth + 1): to_plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(to_plain(v, depth + 1) for v in value)
    if isinstance(value, frozenset):
        return frozenset(to_plain(v, depth + 1) for v in value)
    if isinstance(value, set):
        return {to_plain(v, depth + 1) for v in value}
    return str(value)


class _ReplyPickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, given: dict[int, int]) -> None:
        super().__init__(file, protocol=PROTOCOL)
        self.given = given

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, etree._Element):
            reference = self.given.get(id(obj))
            if reference is not None:
                return ("given", reference)
            xml, lines = element_copy(obj)
            return ("element", xml, lines)
        return None


def dump_reply(message: Any, given: dict[int, int]) -> bytes:
    """A reply's bytes (its data already plain)."""
    buffer = io.BytesIO()
    _ReplyPickler(buffer, given).dump(message)
    return buffer.getvalue()


class _ReplyUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, sent: list[Any]) -> None:
        super().__init__(file)
        self.sent = sent

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("builtins", "complex"):
            return complex
        raise pickle.UnpicklingError(f"{module}.{name} may not cross from a custom-code worker")

    def persistent_load(self, pid: Any) -> Any:
        if isinstance(pid, tuple) and len(pid) == 2 and pid[0] == "given":
            reference = pid[1]
            if type(reference) is int and 0 <= reference < len(self.sent):
                return self.sent[reference]
        elif (
            isinstance(pid, tuple)
            and len(pid) == 3
            and pid[0] == "element"
            and type(pid[1]) is bytes
            and type(pid[2]) is list
        ):
            try:
                return element_from(pid[1], pid[2])
            except etree.XMLSyntaxError as exc:
                raise pickle.UnpicklingError(f"an element that does not parse: {exc}") from None
        raise pickle.UnpicklingError("an unknown reference")


def load_reply(data: bytes, sent: list[Any]) -> Any:
    """A worker's reply, built from plain data only (pickle.UnpicklingError otherwise)."""
    return _ReplyUnpickler(io.BytesIO(data), sent).load()
