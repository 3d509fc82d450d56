"""The engine's shape stays one a newcomer can hold in their head: its import graph shallow and
sparse, in layers that only import downward, and its collaborators wired at construction (no
object sets another's attributes from outside its class).

Two grains of the import graph are bounded. The layers': each sub-folder of `orchestrator/`
(core, files, cache, executors, shell) is one node beside the modules at the top, as the
engine was first measured (13 levels, 137 edges). The modules': every module a node, which
keeps the layers from hiding a tangle inside themselves.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from test_layout import REPO, imports_of, modules

ENGINE = REPO / "orchestrator"
#: Bounds of the layers' graph (issue 27: at most 9 levels and 90 edges; 13 and 137 before).
LAYERS_MAX_DEPTH, LAYERS_MAX_EDGES = 9, 90
#: Bounds of the modules' graph, as the refactor left it (12 levels, 228 edges): a guard.
#: Issue 29 added the session a build runs in (`orchestrate watch`) and entry reads
#: (files/reads.py, in every trace the core handles), issue 28 the remote cache (264 edges)
#: and core/stageentries.py (whole stages from the action cache: 276 in all); a fresh
#: checkout's state holding taken stages by reference (cache/taken.py) and what a resident
#: session keeps (cache/resident.py, out of cache/entries.py) made 286; what Ray workers store
#: and read by digest themselves (cache/workers.py, which the executors use) made 293; storing
#: a stage pausing the cycle collector while it lists the rows it wrote (core/storing.py uses
#: memory.py: a million reads rows at 100,000 resources, half a second of collections) 294;
#: the local executor's forked helpers (executors/forked.py, and what keeps a fork unsafe:
#: cache/db.py, which the cache server names too) 299.
MODULES_MAX_DEPTH, MODULES_MAX_EDGES = 12, 299
#: Attributes the engine sets on objects that are not its own, and why each may be.
OUTSIDE_ASSIGNMENTS = {
    # The process's temporary folder, for the length of a run: the build's temporary files go
    # below the cache folder, as everything a build writes does.
    ("orchestrator/cache/housekeeping.py", "tempfile.tempdir"),
    # Ray's logger says nothing to the build's output (Ray's own log file has it).
    ("orchestrator/executors/raysession.py", "ray_logger.propagate"),
}


def engine_graph() -> dict[str, set[str]]:
    """Module → the engine modules it imports (a package's imports of its own submodules, its
    face, left out, as tests/test_layout.py's circle check does)."""
    known = modules()
    return {
        name: {t for t in imports_of(name, path, known) if t.startswith("orchestrator")}
        - {t for t in imports_of(name, path, known) if t.startswith(name + ".")}
        for name, path in known.items()
        if name.startswith("orchestrator")
    }


def layer_of(module: str) -> str:
    """`orchestrator.core.scheduler` → `orchestrator.core`; a module at the top is its own."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (ENGINE / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def layers_graph() -> dict[str, set[str]]:
    """The graph with each sub-folder of orchestrator/ one node (the package's face aside)."""
    graph: dict[str, set[str]] = {}
    for name, targets in engine_graph().items():
        node = layer_of(name)
        if node == "orchestrator":
            continue
        graph.setdefault(node, set()).update(
            layer_of(t) for t in targets if layer_of(t) not in (node, "orchestrator")
        )
    return graph


def depth(graph: dict[str, set[str]]) -> int:
    """Levels of the longest import chain (a graph with a circle has no depth: RecursionError)."""

    @functools.cache
    def level(node: str) -> int:
        return 1 + max((level(t) for t in graph.get(node, ())), default=0)

    return max(level(node) for node in graph)


def edges(graph: dict[str, set[str]]) -> int:
    return sum(len(targets) for targets in graph.values())


def test_the_layers_are_shallow_and_sparse():
    graph = layers_graph()
    assert depth(graph) <= LAYERS_MAX_DEPTH, graph
    assert edges(graph) <= LAYERS_MAX_EDGES, graph


def test_the_modules_stay_within_their_bounds():
    graph = engine_graph()
    assert depth(graph) <= MODULES_MAX_DEPTH
    assert edges(graph) <= MODULES_MAX_EDGES


def test_the_graph_measures_count_what_they_say():
    """The measures on a graph whose answer is known (a chain of three, one shortcut)."""
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert (depth(graph), edges(graph)) == (3, 3)
    assert layer_of("orchestrator.core.scheduler") == "orchestrator.core"
    assert layer_of("orchestrator.errors") == "orchestrator.errors"


def outside_assignments(path: Path) -> list[str]:
    """The attributes a module sets on objects other than `self` (or `cls`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                if not isinstance(one, ast.Attribute):
                    continue
                if isinstance(one.value, ast.Name) and one.value.id in ("self", "cls"):
                    continue
                found.append(ast.unparse(one))
    return found


def test_no_object_sets_another_objects_attributes():
    """Collaborators get what they need at construction or as arguments, and records change
    through their own methods: nothing in the engine assigns to an attribute of another object
    (`ctx.previous = …` from the scheduler was how the engine used to be wired)."""
    found = {
        (path.relative_to(REPO).as_posix(), target)
        for path in sorted(ENGINE.rglob("*.py"))
        for target in outside_assignments(path)
    }
    assert found == OUTSIDE_ASSIGNMENTS


def test_the_assignment_check_sees_every_form(tmp_path):
    source = tmp_path / "m.py"
    source.write_text(
        "self.a = 1\nctx.previous = 2\nx.y, self.b = 3, 4\nreport.built += 1\nq.r: int = 5\n"
        "cls.c = 6\nself.d.e = 7\n",
        encoding="utf-8",
    )
    assert outside_assignments(source) == ["ctx.previous", "x.y", "report.built", "q.r", "self.d.e"]


def test_contributing_maps_every_engine_module():
    """A newcomer finds each module in CONTRIBUTING.md's map, under its folder."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    layout = text[text.index("## The layout") : text.index("## Adding a stage")]
    missing = [
        path.relative_to(REPO).as_posix()
        for path in sorted(ENGINE.rglob("*.py"))
        if path.name not in layout and not (path.name == "__init__.py" and path.parent != ENGINE)
    ]
    assert missing == []


def test_no_layer_imports_the_packages_face():
    """`orchestrator/__init__.py` stands above every layer (it re-exports them): a module of the
    engine that imports from it runs an arrow back up (the version was once read so)."""
    face = [
        name
        for name, targets in engine_graph().items()
        if name != "orchestrator" and "orchestrator" in targets
    ]
    assert face == [], face
