"""Namespaces whose attributes are made when first read (stages/rules/lazy.py): what rule code
gets as `res_store` and `res_filter` behaves as the plain namespace it replaces."""

from __future__ import annotations

import copy
import pickle
import threading
from types import SimpleNamespace

import pytest

from stages.rules.lazy import LazyNamespace, everything, extended, offers, pending_of


def counted() -> tuple[LazyNamespace, list[str]]:
    calls: list[str] = []

    def maker(name: str, value: object):
        return lambda: calls.append(name) or value

    return LazyNamespace({"a": maker("a", {"x": 1}), "b": maker("b", [2])}, c=3), calls


def test_an_attribute_is_made_once_when_first_read():
    namespace, calls = counted()
    assert calls == [] and vars(namespace) == {"c": 3}
    assert namespace.a == {"x": 1} and namespace.a is namespace.a
    assert calls == ["a"] and vars(namespace) == {"c": 3, "a": {"x": 1}}
    assert namespace.b == [2] and calls == ["a", "b"]


def test_it_answers_as_a_plain_namespace_does():
    namespace, calls = counted()
    assert sorted(name for name in dir(namespace) if not name.startswith("_")) == ["a", "b", "c"]
    with pytest.raises(AttributeError, match="zz"):
        _ = namespace.zz
    assert not hasattr(namespace, "zz")
    namespace.a = "set"  # set before it was read: never made
    assert namespace.a == "set" and calls == []
    del namespace.b
    assert not hasattr(namespace, "b") and calls == []
    assert namespace == SimpleNamespace(a="set", c=3)


@pytest.mark.parametrize(
    "clone", [copy.copy, copy.deepcopy, lambda n: pickle.loads(pickle.dumps(n))]
)
def test_a_copy_holds_every_attribute(clone):
    namespace, calls = counted()
    cloned = clone(namespace)
    assert everything(cloned) == {"a": {"x": 1}, "b": [2], "c": 3}
    assert sorted(calls) == ["a", "b"]


def test_offers_and_extended_make_nothing():
    namespace, calls = counted()
    assert offers(namespace, "a") and offers(namespace, "c") and not offers(namespace, "zz")
    more = extended(namespace, d=4)
    assert calls == [] and sorted(pending_of(more)) == ["a", "b"]
    assert more.d == 4 and more.b == [2] and calls == ["b"]
    plain = extended(SimpleNamespace(e=5), f=6)
    assert vars(plain) == {"e": 5, "f": 6} and pending_of(plain) == {}


def test_threads_reading_at_once_get_one_value():
    started = threading.Barrier(4)
    calls: list[int] = []

    def slow() -> object:
        calls.append(1)
        return object()

    namespace = LazyNamespace({"a": slow})
    seen: list[object] = []

    def read() -> None:
        started.wait()
        seen.append(namespace.a)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1 and all(value is seen[0] for value in seen)
