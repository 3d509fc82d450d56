"""Toy stage: one unit per part of `sizes`, reading it back by digest (`Unit.blobs`)."""

from orchestrator.typing import Plan, StageSpec, Unit

SPEC = StageSpec(name="echo", version=1, inputs=("sizes",), outputs=("echoed",))


def plan(ctx, inputs):
    sizes = inputs["sizes"]
    return Plan(
        [
            Unit(id=path, payload=digest, key={"digest": digest}, blobs=(digest,))
            for path, digest in sorted(sizes.items())
        ]
    )


def run(payload, shared, reader):
    return reader.blob(payload)


def finish(ctx, inputs, results):
    return {"echoed": {path: results[path] for path in sorted(results)}}
