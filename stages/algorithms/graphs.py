"""Graph algorithms the stages share (asset cycles in the cook list, bundle cycles in packing)."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def strongly_connected(
    order: Iterable[str], edges: Callable[[str], Iterable[str]]
) -> list[list[str]]:
    """Every strongly connected component (iterative Tarjan: no recursion limit on deep asset
    chains), visiting roots in `order`; members of a component in the order Tarjan pops them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in order:
        if start in index:
            continue
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(edges(start)))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges(child))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components
