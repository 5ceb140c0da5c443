"""TrueType text in the guest's Pillow, which was built without FreeType (guest/declaw_posix/fonts.py:
Pillow's `_imagingft` over matplotlib's FreeType). Measured and drawn against the host's Pillow
(its own FreeType, basic layout) with the same font file."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from declaw_wasm import Sandbox

PIL = pytest.importorskip("PIL")
from PIL import Image, ImageDraw, ImageFont, features  # noqa: E402

pytestmark = pytest.mark.guest

TEXTS = ["Hello, World AV", "Quick brown fox jumps", "gypsy", "  spaced  ", "Ünïcödé ≈ 3.14", ""]
ANCHORS = ["la", "mm", "rs", "lt", "mb", "rd"]

MEASURE = r"""
import json
from PIL import Image, ImageDraw, ImageFont
out = {"truetype": [], "drawn": []}
for size in (12, 32):
    font = ImageFont.truetype(FONT, size)
    out["truetype"].append([font.getname(), font.getmetrics(),
                            [[font.getlength(t)] + [list(font.getbbox(t, anchor=a)) for a in ANCHORS] for t in TEXTS]])
font = ImageFont.truetype(FONT, 28)
im = Image.new("RGB", (420, 120), "white")
draw = ImageDraw.Draw(im)
draw.text((10, 10), TEXTS[0], font=font, fill="black")
draw.text((210, 80), "centred", font=font, fill="red", anchor="mm", stroke_width=2, stroke_fill="blue")
draw.multiline_text((300, 5), "a\nbb", font=font, fill="green")
out["drawn"] = [draw.textbbox((10, 10), TEXTS[0], font=font), draw.multiline_textbbox((300, 5), "a\nbb", font=font)]
im.save("/tmp/fonts.png")
print(json.dumps(out))
"""


def _host_font(sbx: Sandbox, name: str) -> bytes:
    sbx.commands.run(f"python3 -c \"import matplotlib, os, shutil; shutil.copy(os.path.join(os.path.dirname("
                     f"matplotlib.__file__), 'mpl-data/fonts/ttf/{name}'), '/tmp/{name}')\"")
    return bytes(sbx.files.read(f"/tmp/{name}", format="bytes"))


def _run(sbx: Sandbox, program: str) -> Any:
    sbx.files.write("/tmp/fonts_case.py", program)
    done = sbx.commands.run("python3 /tmp/fonts_case.py", timeout=120)
    assert done.exit_code == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_text_measures_and_lands_where_the_hosts_pillow_puts_it(local_sbx: Sandbox) -> None:
    if not features.check("freetype2"):
        pytest.skip("the host's Pillow has no FreeType to compare with")
    guest = _run(local_sbx, MEASURE.replace("FONT", repr("DejaVuSans.ttf")).replace("TEXTS", repr(TEXTS))
                 .replace("ANCHORS", repr(ANCHORS)))
    data = _host_font(local_sbx, "DejaVuSans.ttf")
    for size, measured in zip((12, 32), guest["truetype"], strict=True):
        font = ImageFont.truetype(io.BytesIO(data), size, layout_engine=ImageFont.Layout.BASIC)
        expected = [list(font.getname()), list(font.getmetrics()),
                    [[font.getlength(t)] + [list(font.getbbox(t, anchor=a)) for a in ANCHORS] for t in TEXTS]]
        assert measured == expected, size
    font = ImageFont.truetype(io.BytesIO(data), 28, layout_engine=ImageFont.Layout.BASIC)
    im = Image.new("RGB", (420, 120), "white")
    draw = ImageDraw.Draw(im)
    draw.text((10, 10), TEXTS[0], font=font, fill="black")
    draw.text((210, 80), "centred", font=font, fill="red", anchor="mm", stroke_width=2, stroke_fill="blue")
    draw.multiline_text((300, 5), "a\nbb", font=font, fill="green")
    assert guest["drawn"] == [list(draw.textbbox((10, 10), TEXTS[0], font=font)),
                              list(draw.multiline_textbbox((300, 5), "a\nbb", font=font))]
    import numpy as np

    drawn = Image.open(io.BytesIO(local_sbx.files.read("/tmp/fonts.png", format="bytes"))).convert("RGB")
    difference = np.abs(np.asarray(drawn, dtype=np.int16) - np.asarray(im, dtype=np.int16))
    assert difference.mean() < 1.0, difference.mean()  # antialiasing and the stroke's corners


def test_the_fonts_agents_name_are_found_and_the_rest_fail_as_on_linux(local_sbx: Sandbox) -> None:
    out = _run(local_sbx, r"""
import json
from PIL import ImageFont, features
out = {}
out["default"] = type(ImageFont.load_default()).__name__, ImageFont.load_default(size=40).getbbox("x")[3] > 20
out["debian"] = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf", 14).getname()
out["bare"] = ImageFont.truetype("DejaVuSerif", 14).getname()
mono = ImageFont.truetype("DejaVuSansMono.ttf", 14)
out["mono"] = mono.getlength("iiii") == mono.getlength("MMMM")
out["freetype2"] = features.check("freetype2"), features.check("raqm")
for name, call in (("arial", lambda: ImageFont.truetype("arial.ttf", 12)),
                   ("garbage", lambda: ImageFont.truetype(__import__("io").BytesIO(b"not a font"), 12)),
                   ("zero", lambda: ImageFont.truetype("DejaVuSans.ttf", 0)),
                   ("raqm", lambda: ImageFont.truetype("DejaVuSans.ttf", 12).getbbox("x", direction="rtl")),
                   ("anchor", lambda: ImageFont.truetype("DejaVuSans.ttf", 12).getbbox("x", anchor="xx"))):
    try:
        call()
        out[name] = "ok"
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
""")
    assert out["default"] == ["FreeTypeFont", True]
    assert out["debian"] == ["DejaVu Sans", "Bold"] and out["bare"] == ["DejaVu Serif", "Book"]
    assert out["mono"] is True and out["freetype2"] == [True, False]
    assert out["arial"] == ["OSError", "cannot open resource"]
    assert out["garbage"] == ["OSError", "cannot open resource"]
    assert out["zero"][0] == "ValueError"
    assert out["raqm"][0] == "KeyError" and "libraqm" in out["raqm"][1]
    assert out["anchor"] == ["ValueError", "invalid anchor"]
