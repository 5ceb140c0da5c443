"""TrueType fonts for the guest's Pillow, which was built without FreeType.

`ImageFont.truetype(...)` and `ImageFont.load_default(size=...)` raised ImportError ("cannot import
name '_imagingft'"): captions, labels and watermarks drawn with `ImageDraw.text` had only the
tiny bitmap font. This module is Pillow's `_imagingft` (its basic layout, as a Pillow without
libraqm has), rendered by the FreeType that matplotlib's `ft2font` (compiled into the guest)
carries: glyphs are placed, kerned and measured as Pillow's C code does — the ink box, the anchor
(`la` by default), the advance for `getlength` — and drawn antialiased into the mask `ImageDraw`
pastes. A stroke (`stroke_width`) is the glyphs' mask widened by a max filter (Pillow's uses
FreeType's stroker: the outline's corners may differ by a pixel).

`truetype("DejaVuSans.ttf")` and Debian's `/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf` find
the DejaVu fonts matplotlib ships (what fonts-dejavu gives a Debian machine); on WASI Pillow's own
search of /usr/share/fonts never runs. Text direction, language and OpenType features need libraqm:
refused as Pillow refuses them without it.
"""

from __future__ import annotations

import io
import math
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

HAVE_RAQM = False
HAVE_FRIBIDI = False
HAVE_HARFBUZZ = False
raqm_version = None
fribidi_version = None
harfbuzz_version = None
_NO_RAQM = "setting text direction, language or font features is not supported without libraqm"


def __getattr__(name: str) -> Any:
    if name == "freetype2_version":  # read when asked (features.version("freetype2")): ft2font loads then
        from matplotlib import ft2font

        return ft2font.__freetype_version__
    raise AttributeError(name)


def _pixel(value: float) -> int:
    """26.6 fixed point to whole pixels, rounded as Pillow's PIXEL() does."""
    return (int(value) + 32) >> 6


def getfont(filename: Any, size: float, index: int = 0, encoding: str = "", font_bytes: bytes = b"",
            layout_engine: int = 0) -> Font:
    return Font(filename, size, index, encoding, font_bytes, layout_engine)


class Font:
    """One face at one size: Pillow's `ImagingFont` of `_imagingft`."""

    def __init__(self, filename: Any, size: float, index: int = 0, encoding: str = "", font_bytes: bytes = b"",
                 layout_engine: int = 0) -> None:
        from matplotlib import ft2font

        if size <= 0:
            raise ValueError("font size must be greater than 0")
        source: Any = io.BytesIO(font_bytes) if font_bytes else os.fsdecode(filename)
        try:
            self._face = ft2font.FT2Font(source, hinting_factor=1, face_index=index)
        except (OSError, RuntimeError, ValueError) as error:
            raise OSError("cannot open resource") from error
        self._face.set_size(float(size), 72)  # Pillow's sizes are pixels: points at 72 dpi
        self._ft2font = ft2font
        self.size = size
        self.family = self._face.family_name
        self.style = self._face.style_name
        # FreeType's size metrics: the scaled ascender rounded up to a pixel, the descender down
        self.ascent = math.ceil(self._face.ascender * size / self._face.units_per_EM)
        self.descent = -math.floor(self._face.descender * size / self._face.units_per_EM)
        self.glyphs = self._face.num_glyphs
        self.x_ppem = self.y_ppem = round(size)

    # -- layout ---------------------------------------------------------------------------------
    def _layout(self, text: Any, mode: str, direction: Any, features: Any, language: Any,
                ) -> tuple[list[tuple[Any, int]], int]:
        """Each glyph with its pen position (26.6), and the advance of the whole text."""
        if direction is not None or features is not None or language is not None:
            raise KeyError(_NO_RAQM)
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("latin-1")
        face, flags = self._face, self._flags(mode)
        face.clear()  # the glyphs loaded for the last text (ft2font keeps each until cleared)
        placed: list[tuple[Any, int]] = []
        pen, previous = 0, 0
        for char in str(text):
            index = face.get_char_index(ord(char))
            if previous and index:
                # Pillow's basic layout adds the kerning's whole pixels to a 26.6 advance (1/64 of
                # what it means): text measures and lands where a Pillow without libraqm puts it
                pen += _pixel(face.get_kerning(previous, index, self._ft2font.Kerning.DEFAULT))
            glyph = face.load_char(ord(char), flags)
            placed.append((glyph, pen))
            pen += glyph.horiAdvance  # the hinted advance, 26.6
            previous = index
        return placed, pen

    def _flags(self, mode: str) -> Any:
        flags = self._ft2font.LoadFlags
        return flags.TARGET_MONO if mode == "1" else flags.DEFAULT

    def _box(self, placed: list[tuple[Any, int]], advance: int, anchor: Any) -> tuple[int, int, int, int, int, int]:
        """The ink box in pixels (x_min, x_max from the pen's origin; y_min, y_max up from the
        baseline) and the anchor's point (x, y up), as Pillow's bounding_box_and_anchors."""
        if not placed:  # no text: Pillow measures nothing from any anchor
            return 0, 0, 0, 0, 0, 0
        # the ink's pixel box, with the pen's line from 0 to the advance and the baseline in it
        x_min, x_max, y_min, y_max = 0, _pixel(advance), 0, 0
        for glyph, pen in placed:
            if glyph.width and glyph.height:
                x_min = min(x_min, _floor(pen + glyph.bbox[0]))
                x_max = max(x_max, _ceil(pen + glyph.bbox[2]))
                y_min = min(y_min, _floor(glyph.bbox[1]))
                y_max = max(y_max, _ceil(glyph.bbox[3]))
        anchor = anchor or "la"
        if len(anchor) != 2 or anchor[0] not in "lmrs" or anchor[1] not in "atmsbd":
            raise ValueError("invalid anchor")
        if anchor[0] == "s":
            raise ValueError("anchor not supported for horizontal text")
        x_anchor = {"l": 0, "m": _pixel(advance // 2), "r": _pixel(advance)}[anchor[0]]
        y_anchor = {"a": self.ascent, "t": y_max, "m": _pixel((self.ascent - self.descent) * 32), "s": 0,
                    "b": y_min, "d": -self.descent}[anchor[1]]
        return x_min, x_max, y_min, y_max, x_anchor, y_anchor

    # -- Pillow's ImagingFont methods -----------------------------------------------------------------
    def getlength(self, text: Any, mode: str = "", direction: Any = None, features: Any = None,
                  language: Any = None) -> int:
        """The advance of `text`, 26.6 (Pillow divides by 64)."""
        return self._layout(text, mode, direction, features, language)[1]

    def getsize(self, text: Any, mode: str = "", direction: Any = None, features: Any = None,
                language: Any = None, anchor: Any = None) -> tuple[tuple[int, int], tuple[int, int]]:
        """((width, height) of the ink, (x, y) of its top left from the anchor, y down)."""
        placed, advance = self._layout(text, mode, direction, features, language)
        x_min, x_max, y_min, y_max, x_anchor, y_anchor = self._box(placed, advance, anchor)
        return (x_max - x_min, y_max - y_min), (x_min - x_anchor, y_anchor - y_max)

    def render(self, text: Any, fill: Callable[[int, int], Any], mode: str = "", direction: Any = None,
               features: Any = None, language: Any = None, stroke_width: float = 0, stroke_filled: bool = False,
               anchor: Any = None, ink: int = 0, start: Any = (0, 0)) -> tuple[Any, tuple[int, int]]:
        """The text's mask (an ImagingCore, L; RGBA in ink's colour for mode RGBA) and where its top
        left lies from the anchor."""
        import numpy
        from PIL import Image, ImageFilter

        placed, advance = self._layout(text, mode, direction, features, language)
        x_min, x_max, y_min, y_max, x_anchor, y_anchor = self._box(placed, advance, anchor)
        width, height = x_max - x_min, y_max - y_min
        pad = math.ceil(stroke_width) if stroke_width else 0
        fill(width + 2 * pad, height + 2 * pad)  # Pillow's own size check (the decompression bomb's)
        canvas = numpy.zeros((max(height, 0) + 2 * pad, max(width, 0) + 2 * pad), numpy.uint8)
        for glyph, pen in placed:
            if glyph.width and glyph.height:
                # x: the pen's pixel (ft2font adds the glyph's own left bearing); y: its bitmap's top
                self._face.draw_glyph_to_bitmap(canvas, _pixel(pen) - x_min + pad,
                                                y_max - _ceil(glyph.bbox[3]) + pad, glyph,
                                                antialiased=mode != "1")
        mask = Image.fromarray(canvas, "L")
        if pad:
            mask = mask.filter(ImageFilter.MaxFilter(2 * pad + 1))
        if mode == "RGBA":
            red, green, blue, alpha = (ink & 0xFF, ink >> 8 & 0xFF, ink >> 16 & 0xFF, ink >> 24 & 0xFF)
            coloured = Image.new("RGBA", mask.size, (red, green, blue, 0))
            coloured.putalpha(mask.point(lambda v: v * alpha // 255))
            mask = coloured
        return mask.im, (x_min - x_anchor - pad, y_anchor - y_max - pad)

    def getvarnames(self) -> list[bytes]:
        raise OSError("invalid argument")  # as FreeType answers for a font without variations

    def getvaraxes(self) -> list[Any]:
        raise OSError("invalid argument")

    def setvarname(self, index: int) -> None:
        raise OSError("invalid argument")

    def setvaraxes(self, axes: Any) -> None:
        raise OSError("invalid argument")


def _floor(value: int) -> int:
    return math.floor(value / 64)


def _ceil(value: int) -> int:
    return math.ceil(value / 64)


def patch_imagefont(module: Any) -> None:
    """On `import PIL.ImageFont`: this module as its `core`, unless Pillow has its own FreeType;
    and `truetype` finding the DejaVu fonts by name (module docstring)."""
    import sys

    core = getattr(module, "core", None)
    if isinstance(core, type(sys)):
        return
    sys.modules.setdefault("PIL._imagingft", sys.modules[__name__])
    module.core = sys.modules[__name__]
    truetype = module.truetype

    def truetype_or_dejavu(font: Any = None, size: float = 10, index: int = 0, encoding: str = "",
                           layout_engine: Any = None) -> Any:
        try:
            return truetype(font, size, index, encoding, layout_engine)
        except OSError:
            found = _shipped(font)
            if found is None:
                raise
            return truetype(found, size, index, encoding, layout_engine)

    truetype_or_dejavu.__doc__ = truetype.__doc__
    truetype_or_dejavu.__wrapped__ = truetype  # type: ignore[attr-defined]
    module.truetype = truetype_or_dejavu


def _shipped(font: Any) -> str | None:
    """A font matplotlib ships with the name of `font` (a path or a bare name, with or without
    its extension), or None."""
    if not isinstance(font, (str, bytes, os.PathLike)):
        return None
    import matplotlib

    name = os.path.basename(os.fsdecode(font))
    folder = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "fonts", "ttf")
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for candidate in names:
        if candidate == name or (not os.path.splitext(name)[1] and os.path.splitext(candidate)[0] == name):
            return os.path.join(folder, candidate)
    return None
