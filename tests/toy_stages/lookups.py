"""Toy stage: one unit per `.ref` file, which names catalog entries one per line (`*`: every
entry); the unit looks each up through `reader.entry` (or reads the catalog whole) and joins
what it found. Nothing of the catalog is in a unit's declared key: its trace is the key."""

from orchestrator.typing import PROJECT, Plan, StageSpec, Unit

SPEC = StageSpec(name="lookups", version=1, inputs=(PROJECT, "catalog"), outputs=("joined",))


def _unit(path):
    return Unit(id=path, payload=path, key={"path": path}, files=(path,))


def plan(ctx, inputs):
    return Plan([_unit(e.path) for e in ctx.walk() if e.path.endswith(".ref")], inputs["catalog"])


def update(ctx, inputs, changes):
    """Units of `.ref` files added, and those of removed ones dropped; the engine re-runs the
    units whose file or looked-up entries changed."""
    project = changes.inputs[PROJECT]
    added = sorted(project.changed - set(changes.files_modified))
    return Plan(
        [_unit(path) for path in added if path.endswith(".ref")],
        inputs["catalog"],
        removed=tuple(path for path in sorted(project.removed) if path.endswith(".ref")),
    )


def run(payload, shared, reader):
    found = []
    for name in reader.read_bytes(payload).decode("utf-8").split():
        if name == "*":
            reader.whole("catalog")
            found += [f"{key}={shared[key]}" for key in sorted(shared)]
            continue
        entry = reader.entry("catalog", name, shared)
        found.append(f"{name}={entry if entry is not None else '?'}")
    return " ".join(found)


def finish(ctx, inputs, results):
    return {"joined": {unit_id: results[unit_id] for unit_id in sorted(results)}}


def publish(ctx, outputs):
    text = "".join(f"{path}: {line}\n" for path, line in outputs["joined"].items())
    ctx.publish_bytes("joined.txt", text.encode("utf-8"))
