"""Reading a YAML file users wrote: the data and its node tree (for line numbers), or an error
of the caller's kind naming the file and the line.

Aliases are counted while the file is composed: each `*alias` adds the size of what it repeats,
and past ALIAS_NODE_BUDGET nodes the file is refused, naming the alias's line. PyYAML shares the
repeated nodes, so a 500-byte "billion laughs" file loads instantly, but whatever walks the data
afterwards (the schema, a rule's digest) sees every copy: gigabytes of work. An alias inside its
own anchor (data that contains itself) is refused too: nothing that walks it would end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .errors import OrchestrateError

#: Nodes that aliases may add to a file, in all (far beyond what anchors are used for by hand).
ALIAS_NODE_BUDGET = 100_000


class AliasRefused(yaml.YAMLError):
    def __init__(self, line: int, reason: str) -> None:
        super().__init__(reason)
        self.line = line
        self.reason = reason


class _CountingLoader(yaml.SafeLoader):
    """A safe loader that refuses aliases past the node budget."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_nodes = 0
        self._sizes: dict[int, int] = {}  # id of a composed node → its expanded size (this file)
        self._open: list[str] = []  # anchors of the collections being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1
            if event.anchor in self._open:
                raise AliasRefused(line, f"the alias *{event.anchor} repeats its own anchor")
            anchor = self.anchors.get(event.anchor)
            if anchor is not None:
                self.alias_nodes += self._expanded_size(anchor)
                if self.alias_nodes > ALIAS_NODE_BUDGET:
                    raise AliasRefused(
                        line,
                        f"aliases expand the file past {ALIAS_NODE_BUDGET:,} nodes (a YAML alias "
                        "bomb?); write the repeated parts out, or use fewer aliases",
                    )
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)) and event.anchor:
            self._open.append(event.anchor)
            try:
                return super().compose_node(parent, index)
            finally:
                self._open.pop()
        return super().compose_node(parent, index)

    def _expanded_size(self, node: Any) -> int:
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        if isinstance(node, yaml.SequenceNode):
            size = 1 + sum(self._expanded_size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size = 1 + sum(self._expanded_size(k) + self._expanded_size(v) for k, v in node.value)
        else:
            size = 1
        self._sizes[id(node)] = size
        return size


def read_yaml(path: Path, error: type[OrchestrateError], what: str) -> tuple[Any, Any]:
    """(node tree, data) of a UTF-8 YAML file (BOM allowed); `what` names it in messages."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise error(f"{what} not found", file=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read the {what}: {exc}", file=str(path)) from None
    loader = None
    try:
        loader = _CountingLoader(text)  # its reader refuses some characters at once
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except AliasRefused as exc:
        raise error(exc.reason, file=str(path), line=exc.line) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(
            f"not valid YAML: {problem}",
            file=str(path),
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except RecursionError:
        raise error(f"the {what} is nested too deeply", file=str(path)) from None
    finally:
        if loader is not None:
            loader.dispose()
    return node, data
