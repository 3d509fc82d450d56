"""Toy stage: each .txt file made into a large page (a record of bytes, as the manifest stage's
documents are), stored as its unit's result and published by digest."""

from typing import NamedTuple

from orchestrator.codec import record
from orchestrator.typing import Plan, StageSpec, Unit

SPEC = StageSpec(name="pages", version=1, inputs=(), outputs=("pages",), keyed=("pages",))
#: A page's size: past what a resident session keeps of the results it stores and reads.
PAGE_BYTES = 100_000


@record
class Page(NamedTuple):
    body: bytes
    lines: tuple


def plan(ctx, inputs):
    paths = [e.path for e in ctx.walk() if e.path.endswith(".txt")]
    return Plan([Unit(id=path, payload=path, key={"path": path}, files=(path,)) for path in paths])


def run(payload, shared, reader):
    text = reader.read_bytes(payload)
    return Page((text * (PAGE_BYTES // max(len(text), 1) + 1))[:PAGE_BYTES], tuple(text.split()))


def finish(ctx, inputs, results):
    """Each file → the digest of its page (read back when published)."""
    return {"pages": {path: results.digest(path) for path in sorted(results)}}


def publish(ctx, outputs):
    for path, digest in outputs["pages"].items():
        page = ctx.load_result(digest)
        ctx.publish_bytes(f"pages/{path}", page.body + b"\n".join(page.lines))
