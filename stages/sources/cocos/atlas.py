"""An auto atlas's pages: where each frame goes (rectpack's MaxRects) and the page's pixels (Pillow).

Layout runs when the project is collected (from the frame sizes the metas give), so the page ids
are known before anything is cooked; the cook draws the page from that layout. Both are pure
functions of their inputs: the same frames and options give the same placements and the same
PNG bytes (fixed encoder options, no metadata chunks, no time stamps).
"""

from __future__ import annotations

import io
from typing import Any, NamedTuple

import orjson
import rectpack
from PIL import Image

from orchestrator import record
from stages.cooking.cookers import pack_files

PAGE_FILE = "page.png"
FRAMES_FILE = "frames.json"
RECIPE = "stages.sources.cocos.atlas:cook_page"
RECIPE_VERSION = 1
# Fixed options: every executor must write the same page bytes.
PNG_OPTIONS: dict[str, Any] = {"format": "PNG", "optimize": False, "compress_level": 9}


@record
class AtlasOptions(NamedTuple):
    """An `auto-atlas` meta's `userData`, with Creator's defaults."""

    max_width: int = 1024
    max_height: int = 1024
    padding: int = 2
    padding_bleed: bool = True
    allow_rotation: bool = True
    filter_unused: bool = True
    remove_texture: bool = True
    remove_image: bool = True
    remove_atlas: bool = True

    @property
    def border(self) -> int:
        """Pixels around a frame: the padding, plus one of extruded edge when bleeding."""
        return self.padding + (1 if self.padding_bleed else 0)

    def fits(self, width: int, height: int) -> bool:
        """Whether a frame fits a page, as it is or (when allowed) rotated."""
        w, h = width + 2 * self.border, height + 2 * self.border
        return (w <= self.max_width and h <= self.max_height) or (
            self.allow_rotation and h <= self.max_width and w <= self.max_height
        )


@record
class Rect(NamedTuple):
    """A rectangle of an image's pixels."""

    x: int
    y: int
    width: int
    height: int


class FrameSize(NamedTuple):
    """A frame to place: its id and its pixels' size."""

    frame: str
    width: int
    height: int


class PageSize(NamedTuple):
    width: int
    height: int


@record
class Placement(NamedTuple):
    """A frame's rectangle on its page (its pixels, padding excluded); `rotated`: turned 90°."""

    frame: str
    x: int
    y: int
    width: int
    height: int
    rotated: bool


def layout_pages(frames: list[FrameSize], options: AtlasOptions) -> list[list[Placement]]:
    """Frames in a stable order → pages of placements, in page order."""
    border = options.border
    packer = rectpack.newPacker(
        mode=rectpack.PackingMode.Offline,
        bin_algo=rectpack.PackingBin.BFF,
        pack_algo=rectpack.MaxRectsBssf,
        sort_algo=rectpack.SORT_AREA,
        rotation=options.allow_rotation,
    )
    for index, size in enumerate(frames):
        packer.add_rect(size.width + 2 * border, size.height + 2 * border, rid=index)
    packer.add_bin(options.max_width, options.max_height, count=float("inf"))
    packer.pack()
    pages: list[list[Placement]] = []
    for page in range(len(packer)):
        placed = []
        for rect in packer[page]:
            size = frames[rect.rid]
            width, height = size.width, size.height
            rotated = (rect.width, rect.height) != (width + 2 * border, height + 2 * border)
            placed.append(
                Placement(
                    size.frame,
                    int(rect.x) + border,
                    int(rect.y) + border,
                    height if rotated else width,
                    width if rotated else height,
                    rotated,
                )
            )
        placed.sort(key=lambda p: (p.y, p.x))
        pages.append(placed)
    return pages


def page_size(placements: list[Placement], options: AtlasOptions) -> PageSize:
    border = options.border
    return PageSize(
        max((p.x + p.width + border for p in placements), default=1),
        max((p.y + p.height + border for p in placements), default=1),
    )


@record
class PlacedFrame(NamedTuple):
    """A frame as the cook draws it: its pixels in their image, and where they go on the page."""

    frame: str
    image_file: str
    source: Rect
    source_rotated: bool  # stored turned 90° in its image (TexturePacker)
    x: int
    y: int
    rotated: bool  # turned 90° on the page


@record
class PageRecipe(NamedTuple):
    """An atlas page's recipe data (`Recipe.data`): what `cook_page` draws."""

    width: int
    height: int
    bleed: bool  # extrude each frame's edge into its padding
    frames: tuple[PlacedFrame, ...]


# -- the cook ------------------------------------------------------------------------------------


def cook_page(asset_id: str, files: dict[str, bytes], data: PageRecipe) -> bytes:
    """The payload of an atlas page: `page.png` and `frames.json` (each frame's rectangle)."""
    width, height = data.width, data.height
    bleed = data.bleed
    page = Image.new("RGBA", (width, height), (0, 0, 0, 0))
    images: dict[str, Image.Image | None] = {}
    records = []
    for placed in data.frames:
        frame, image_file, rotated = placed.frame, placed.image_file, placed.rotated
        px, py = placed.x, placed.y
        sx, sy, sw, sh = placed.source.x, placed.source.y, placed.source.width, placed.source.height
        src_rotated = placed.source_rotated
        if image_file not in images:
            images[image_file] = _open(files.get(image_file))
        source = images[image_file]
        record = {
            "id": frame,
            "x": px,
            "y": py,
            "width": sh if rotated else sw,
            "height": sw if rotated else sh,
            "rotated": rotated,
        }
        if source is None:
            record["missing"] = True  # the image could not be decoded: the rectangle stays empty
        else:
            pixels = _frame_pixels(source, sx, sy, sw, sh, src_rotated)
            if rotated:
                pixels = pixels.transpose(Image.Transpose.ROTATE_270)
            page.paste(pixels, (px, py))
            if bleed:
                _extrude(page, pixels, px, py)
        records.append(record)
    out = io.BytesIO()
    page.save(out, **PNG_OPTIONS)
    frames = orjson.dumps(
        {"page": asset_id, "width": width, "height": height, "frames": records},
        option=orjson.OPT_SORT_KEYS,
    )
    return pack_files({PAGE_FILE: out.getvalue(), FRAMES_FILE: frames})


def _open(data: bytes | None) -> Image.Image | None:
    if data is None:
        return None
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
    return image.convert("RGBA")


def _frame_pixels(
    source: Image.Image, x: int, y: int, width: int, height: int, src_rotated: bool
) -> Image.Image:
    """A frame's pixels from its image; a frame stored rotated (TexturePacker) is turned back."""
    if src_rotated:
        return source.crop((x, y, x + height, y + width)).transpose(Image.Transpose.ROTATE_90)
    return source.crop((x, y, x + width, y + height))


def _extrude(page: Image.Image, pixels: Image.Image, x: int, y: int) -> None:
    """Repeat the frame's edge pixels one pixel outwards (padding bleed: no seams when filtered)."""
    w, h = pixels.size
    page.paste(pixels.crop((0, 0, w, 1)), (x, y - 1))
    page.paste(pixels.crop((0, h - 1, w, h)), (x, y + h))
    page.paste(pixels.crop((0, 0, 1, h)), (x - 1, y))
    page.paste(pixels.crop((w - 1, 0, w, h)), (x + w, y))
