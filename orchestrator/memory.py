"""Keeping Python's cycle collector out of the way of large, acyclic allocation bursts."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


class paused_gc:  # noqa: N801 -- used as `with paused_gc():`, like the function it replaced
    """Run a block without the cyclic garbage collector.

    Assembling a 100,000-asset index or checking a large file allocates hundreds of thousands of
    tuples, lists and dicts that form no cycles, while the driver or worker keeps millions of
    objects alive (the tree, the index): each allocation burst would otherwise trigger full
    collections over that whole heap, measured at more than half the time of such blocks.
    Reference counting still frees everything; cycles wait for the next collection.

    A class rather than a generator-based context manager: values are decoded inside one by
    the hundred thousand, and contextlib's machinery cost more than decoding a small value.
    """

    __slots__ = ("enabled",)

    def __enter__(self) -> None:
        self.enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc_info: object) -> None:
        if self.enabled:
            gc.enable()


@contextmanager
def relaxed_gc(first_generation: int = 50_000) -> Iterator[None]:
    """Run a block with the cyclic collector called far less often than Python's default (a
    collection after every 700 net allocations).

    A build's driver allocates millions of short-lived containers (decoded values, plans,
    results) and keeps millions alive; with the default threshold the young generation is
    collected thousands of times per run, and every older collection walks the whole heap.
    Cycles are still collected, just in larger batches.
    """
    before = gc.get_threshold()
    gc.set_threshold(first_generation, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)
