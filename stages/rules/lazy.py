"""Values of the index made when rule code first reads them.

A rule's code sees the index as two modules, `res_store` and `res_filter`, whose attributes are
large sets (100,000 entries at 100,000 resources). Most rules read one or two of them: the
dependency-cycle rule of the starter library reads `res_store.res_in_repo` alone. Making every
set up front cost a custom-code worker about 1.8 s of every index it was sent, and decoding the
sets it never reads 2 s more; so each is made on its first read, and kept.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

#: Serializes making a value: one made value per attribute, even when threads read at once.
#: Reentrant: making one value may read another (a rooted set reads its stored set).
MAKING = threading.RLock()

#: Where an object whose attributes are made when first read (a LazyNamespace, a Messiah index
#: decoded set by set) keeps what makes those not made yet: attribute → function.
MADE = "_made"


class LazyNamespace(SimpleNamespace):
    """A SimpleNamespace (what `import res_store` gives rule code) whose attributes named in
    `made` are made by calling their function when first read. `vars()` shows those read so
    far, `dir()` all of them; a copy or a pickle holds them all."""

    __slots__ = (MADE,)

    def __init__(self, made: Mapping[str, Callable[[], Any]] | None = None, **values: Any) -> None:
        super().__init__(**values)
        object.__setattr__(self, MADE, {k: v for k, v in (made or {}).items() if k not in values})

    def __getattr__(self, name: str) -> Any:
        made = object.__getattribute__(self, MADE)
        if name not in made:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        with MAKING:
            if name in made:  # not made by another thread meanwhile
                setattr(self, name, made[name]())  # which takes it out of `made`
        return object.__getattribute__(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, MADE).pop(name, None)  # set: no longer to be made
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        made = object.__getattribute__(self, MADE)
        if name in made:
            del made[name]
            return
        super().__delattr__(name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *object.__getattribute__(self, MADE)})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyNamespace):
            return everything(self) == everything(other)
        if isinstance(other, SimpleNamespace):
            return everything(self) == vars(other)
        return NotImplemented

    __hash__ = None  # as SimpleNamespace's

    def __reduce__(self) -> tuple:
        return (_made_namespace, (everything(self),))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        pending = ", ".join(f"{name}=<not read yet>" for name in pending_of(self))
        return f"namespace({', '.join(part for part in (shown, pending) if part)})"


def _made_namespace(values: dict[str, Any]) -> LazyNamespace:
    return LazyNamespace(None, **values)


def offers(value: Any, name: str) -> bool:
    """Whether `value` has the attribute `name`, without making it if it is made on read."""
    made = getattr(value, "__dict__", {}).get(MADE)
    if made is None and isinstance(value, LazyNamespace):
        made = object.__getattribute__(value, MADE)
    return (made is not None and name in made) or hasattr(value, name)


def pending_of(namespace: LazyNamespace) -> dict[str, Callable[[], Any]]:
    """The attributes of `namespace` not made yet, and what makes each. (Functions of this
    module, not methods: rule code sees every attribute of the namespace.)"""
    return dict(object.__getattribute__(namespace, MADE))


def everything(namespace: LazyNamespace) -> dict[str, Any]:
    """Every attribute of `namespace`, each made now if it was not."""
    for name in pending_of(namespace):
        getattr(namespace, name)
    return dict(vars(namespace))


def extended(namespace: SimpleNamespace, **values: Any) -> LazyNamespace:
    """`namespace` (lazy or not) with `values` added; attributes not made yet stay so."""
    made = pending_of(namespace) if isinstance(namespace, LazyNamespace) else {}
    return LazyNamespace(made, **{**vars(namespace), **values})
