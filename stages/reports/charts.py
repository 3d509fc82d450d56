"""The page's pictures, drawn here as SVG: the bundles as a treemap by size, and the run as a
timeline of stages and workers.

Drawn by the build rather than by a charting library in the page: the page needs no script to
show them, stays small (no library inlined), and the pictures are the same in every browser. The
treemap's layout is squarified (Bruls, Huizing and van Wijk), from the `squarify` package.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from xml.sax.saxutils import escape

import squarify

from .pagedata import Tile

TREEMAP_WIDTH, TREEMAP_HEIGHT = 1200, 440
#: Bundles drawn one by one; the rest are one tile (each is still in the bundle table).
TREEMAP_TILES = 400
KIND_COLORS = {"layout": (214, 62, 52), "shared": (32, 70, 50)}  # hue, saturation %, lightness %
OTHER_COLOR = (150, 25, 55)
STAGE_HUES = (210, 30, 140, 280, 0, 180, 50, 330, 100, 240)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _fit(text: str, width: float, char_width: float = 6.6) -> str:
    """The text cut to what fits in `width` pixels (an ellipsis where cut); "" if nothing fits."""
    room = int((width - 8) / char_width)
    if room < 3:
        return ""
    return text if len(text) <= room else text[: room - 1] + "…"


def treemap_svg(tiles: Sequence[Tile]) -> str:
    """The bundles as tiles with an area proportional to their file size; each tile carries the
    bundle's index (`data-bundle`) for the page's script, and a tooltip."""
    ordered = sorted(tiles, key=lambda t: (-t.size, t.name))
    shown = list(ordered[:TREEMAP_TILES])
    rest = ordered[TREEMAP_TILES:]
    if rest:
        shown.append(Tile(-1, f"{len(rest)} smaller bundles", sum(t.size for t in rest), "", 0))
    if not shown:
        return ""
    values = [max(t.size, 1) for t in shown]
    rects = squarify.squarify(
        squarify.normalize_sizes(values, TREEMAP_WIDTH, TREEMAP_HEIGHT),
        0,
        0,
        TREEMAP_WIDTH,
        TREEMAP_HEIGHT,
    )
    parts = [
        f'<svg class="treemap" viewBox="0 0 {TREEMAP_WIDTH} {TREEMAP_HEIGHT}" '
        f'role="img" aria-label="bundles by size">'
    ]
    for position, (tile, rect) in enumerate(zip(shown, rects)):
        hue, saturation, lightness = KIND_COLORS.get(tile.kind, OTHER_COLOR)
        lightness += (position % 5) * 4 - 8
        x, y, w, h = rect["x"], rect["y"], rect["dx"], rect["dy"]
        label = f"{tile.name} — {human_bytes(tile.size)}" + (
            f", {tile.assets} assets" if tile.index >= 0 else ""
        )
        parts.append(
            f'<g class="tile" data-bundle="{tile.index}" tabindex="0">'
            f"<title>{escape(label)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
            f'fill="hsl({hue} {saturation}% {lightness}%)"/>'
        )
        name = _fit(tile.name, w) if h >= 16 else ""
        if name:
            parts.append(f'<text x="{x + 4:.1f}" y="{y + 13:.1f}">{escape(name)}</text>')
            size = _fit(human_bytes(tile.size), w)
            if h >= 30 and size:
                parts.append(
                    f'<text class="sub" x="{x + 4:.1f}" y="{y + 26:.1f}">{escape(size)}</text>'
                )
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _ticks(span: float, count: int = 8) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten) from 0 over `span`."""
    if span <= 0:
        return [0.0]
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(int(span / step) + 1)]


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _note(text: str, start: float, end: float, bounds: tuple[float, float], y: float) -> str:
    """A bar's caption: after the bar, else before it, else inside it (a long bar)."""
    width = len(text) * 5.6
    if end + 6 + width <= bounds[1]:
        return f'<text class="note" x="{end + 5:.1f}" y="{y}">{escape(text)}</text>'
    if start - 6 - width >= bounds[0]:
        return f'<text class="note end" x="{start - 5:.1f}" y="{y}">{escape(text)}</text>'
    return f'<text class="note inside" x="{start + 5:.1f}" y="{y}">{escape(text)}</text>'


def timeline_svg(record: dict) -> str:
    """Stages (one row each: when it ran, built or cached) above workers (one row each: the
    slice of each stage's units it ran, shaded by how busy it was)."""
    stages = record.get("stages") or []
    slices = record.get("workers") or []
    if not stages:
        return ""
    span = max(
        [record.get("seconds") or 0.0]
        + [s["start"] + s["seconds"] for s in stages]
        + [s["end"] for s in slices]
    )
    span = max(span, 0.001)
    workers = sorted({s["worker"] for s in slices}, key=lambda w: (w != "driver", w))
    hue = {s["name"]: STAGE_HUES[i % len(STAGE_HUES)] for i, s in enumerate(stages)}
    gutter, width, row, top = 150, 1200, 22, 24
    plot = width - gutter - 10
    height = top + row * (len(stages) + len(workers)) + (12 if workers else 0) + 8

    def x(t: float) -> float:
        return gutter + plot * t / span

    parts = [
        f'<svg class="timeline" viewBox="0 0 {width} {height}" role="img" aria-label="timeline">'
    ]
    for tick in _ticks(span):
        parts.append(
            f'<line class="grid" x1="{x(tick):.1f}" y1="{top - 6}" x2="{x(tick):.1f}" y2="{height}"/>'
            f'<text class="tick" x="{x(tick):.1f}" y="{top - 10}">{_seconds(tick)}</text>'
        )
    for i, stage in enumerate(stages):
        y = top + i * row
        state = "skipped" if stage["skipped"] else ("built" if stage["built"] else "cached")
        label = (
            f"{stage['name']}: {stage['units']} units, {stage['cached']} cached, "
            f"{stage['built']} built, {_seconds(stage['seconds'])}"
            + (" (skipped whole: nothing it depends on changed)" if stage["skipped"] else "")
        )
        start, end = x(stage["start"]), x(stage["start"] + stage["seconds"])
        parts.append(
            f'<g class="stage {state}"><title>{escape(label)}</title>'
            f'<text class="row" x="{gutter - 8}" y="{y + 15}">{escape(stage["name"])}</text>'
            f'<rect x="{start:.1f}" y="{y + 3}" width="{max(end - start, 1.5):.1f}" height="{row - 6}" '
            f'style="--hue:{hue[stage["name"]]}"/>'
            + _note(
                f"{state} · {_seconds(stage['seconds'])}",
                start,
                max(end, start + 1.5),
                (gutter, width),
                y + 15,
            )
            + "</g>"
        )
    base = top + len(stages) * row + 12
    for j, worker in enumerate(workers):
        y = base + j * row
        parts.append(f'<text class="row" x="{gutter - 8}" y="{y + 15}">{escape(worker)}</text>')
        for piece in (s for s in slices if s["worker"] == worker):
            start, end = x(piece["start"]), x(piece["end"])
            length = max(piece["end"] - piece["start"], 1e-6)
            busy = min(piece["busy"] / length, 1.0)
            label = (
                f"{piece['stage']} on {worker}: {piece['units']} units, busy "
                f"{_seconds(piece['busy'])} of {_seconds(length)}"
            )
            parts.append(
                f'<g class="slice"><title>{escape(label)}</title>'
                f'<rect x="{start:.1f}" y="{y + 3}" width="{max(end - start, 1.5):.1f}" '
                f'height="{row - 6}" style="--hue:{hue.get(piece["stage"], 0)};'
                f'opacity:{0.35 + 0.65 * busy:.2f}"/></g>'
            )
    parts.append("</svg>")
    return "".join(parts)
