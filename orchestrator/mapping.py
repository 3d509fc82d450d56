"""The most common incremental stage: one unit per entry of a keyed input, one output entry per
unit (write, archive and hash over bundles). These helpers give such a stage its `update` and
its `finish` in a line each."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .keyed import Changes, KeyedPatch
from .typing import Plan, Unit


def map_update(
    changes: Changes,
    make_units: Callable[[list[str]], list[Unit]],
    reason: str = "{key} changed",
    state: Any = None,
) -> Plan:
    """Units for the keys that changed, and the units of keys that went away removed."""
    keys = sorted(changes.changed)
    return Plan(
        units=make_units(keys),
        removed=tuple(sorted(changes.removed)),
        state=state,
        reasons={key: reason.format(key=key) for key in keys},
    )


def map_finish(results: Any, keys: Iterable[str], value: Callable[[str], Any]) -> Any:
    """The output: every key's entry after a full plan, the changed ones after an update."""
    if results.changed is None:
        return {key: value(key) for key in keys}
    return KeyedPatch(
        {key: value(key) for key in sorted(results.changed)}, tuple(sorted(results.removed or ()))
    )
