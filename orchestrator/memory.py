"""Keeping Python's cycle collector out of the way of large, acyclic allocation bursts."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run a block without the cyclic garbage collector.

    Assembling a 100,000-asset index or checking a large file allocates hundreds of thousands of
    tuples, lists and dicts that form no cycles, while the driver or worker keeps millions of
    objects alive (the tree, the index): each allocation burst would otherwise trigger full
    collections over that whole heap, measured at more than half the time of such blocks.
    Reference counting still frees everything; cycles wait for the next collection.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
