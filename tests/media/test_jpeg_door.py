"""JPEG in the guest's Pillow, through the host's sandboxed codec (the `jpeg.decode` and
`jpeg.encode` door ops: declaw_wasm/_media/door.py, guest/declaw_posix/jpeg.py; docs/security.md,
"The guest's JPEG codec on the host").

What users do (open, load, thumbnail, save, matplotlib's savefig) is checked against the host's
own Pillow reading the same files; what an attacker does is sent as raw door requests."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from declaw_wasm import Sandbox
from declaw_wasm.exceptions import TimeoutException

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

pytestmark = pytest.mark.guest


def run(sbx: Sandbox, program: str, timeout: float = 120) -> str:
    sbx.files.write("/tmp/jpeg_case.py", program)
    done = sbx.commands.run("python3 /tmp/jpeg_case.py", timeout=timeout)
    assert done.exit_code == 0, (done.stdout[-2000:], done.stderr[-3000:], done.error)
    return done.stdout


def host_image(sbx: Sandbox, path: str) -> Image.Image:
    image = Image.open(io.BytesIO(sbx.files.read(path, format="bytes")))
    image.load()
    return image


def mean_difference(a: Image.Image, b: Image.Image) -> float:
    import numpy as np

    return float(np.abs(np.asarray(a, dtype=np.int16) - np.asarray(b, dtype=np.int16)).mean())


PHOTO = """
import numpy as np
from PIL import Image
y, x = np.mgrid[0:{h}, 0:{w}]
rgb = np.stack([(x * 255 // {w}), (y * 255 // {h}), ((x + y) * 127 // ({w} + {h}))], -1).astype(np.uint8)
rgb = (rgb + np.random.default_rng(1).integers(0, 24, rgb.shape, dtype=np.uint8))
Image.fromarray(rgb).save("{path}", quality=90)
"""


def test_pillow_saves_and_reads_jpeg_files_as_the_hosts_pillow_does(local_sbx: Sandbox) -> None:
    run(local_sbx, PHOTO.format(w=640, h=480, path="/tmp/photo.jpg") + """
im = Image.open("/tmp/photo.jpg")
print(im.format, im.mode, im.size)
im.load()
im.convert("L").save("/tmp/gray.jpg", quality=60)
im.convert("CMYK").save("/tmp/cmyk.jpg")
im.save("/tmp/prog.jpg", progressive=True, optimize=True, quality=75, subsampling=0, dpi=(300, 300),
        comment="made in a sandbox", icc_profile=b"not really a profile" * 10)
exif = Image.Exif(); exif[0x010F] = "declaw"
im.save("/tmp/exif.jpg", exif=exif)
Image.fromarray(np.asarray(Image.open("/tmp/prog.jpg"))).save("/tmp/roundtrip.png")
""")
    photo = host_image(local_sbx, "/tmp/photo.jpg")
    assert (photo.format, photo.mode, photo.size) == ("JPEG", "RGB", (640, 480))
    # what the guest decoded (written as PNG) is what the host's libjpeg decodes
    assert mean_difference(host_image(local_sbx, "/tmp/roundtrip.png"), host_image(local_sbx, "/tmp/prog.jpg")) < 1.0
    gray = host_image(local_sbx, "/tmp/gray.jpg")
    assert gray.mode == "L" and gray.size == (640, 480)
    cmyk = host_image(local_sbx, "/tmp/cmyk.jpg")
    assert cmyk.mode == "CMYK" and mean_difference(cmyk.convert("RGB"), photo) < 6
    prog = host_image(local_sbx, "/tmp/prog.jpg")
    assert prog.info.get("progressive") or prog.info.get("progression")
    assert prog.info["dpi"] == (300, 300) and prog.info["comment"] == b"made in a sandbox"
    assert prog.info["icc_profile"] == b"not really a profile" * 10
    assert host_image(local_sbx, "/tmp/exif.jpg").getexif()[0x010F] == "declaw"


def test_draft_thumbnail_and_every_mode_a_jpeg_decodes_to(local_sbx: Sandbox) -> None:
    local_sbx.files.write("/tmp/host.jpg", _host_jpeg((1600, 1200), "RGB"))
    local_sbx.files.write("/tmp/host_cmyk.jpg", _host_jpeg((300, 200), "CMYK"))
    local_sbx.files.write("/tmp/host_gray.jpg", _host_jpeg((300, 200), "L", progressive=True))
    out = json.loads(run(local_sbx, """
import json
from PIL import Image
im = Image.open("/tmp/host.jpg"); im.thumbnail((200, 200)); im.save("/tmp/thumb.png")
drafted = Image.open("/tmp/host.jpg"); drafted.draft("L", (400, 300)); drafted.load()
ycc = Image.open("/tmp/host.jpg"); ycc.draft("YCbCr", (800, 600)); ycc.load()
cmyk = Image.open("/tmp/host_cmyk.jpg"); cmyk.load(); cmyk.save("/tmp/cmyk.tiff")
gray = Image.open("/tmp/host_gray.jpg"); gray.load(); gray.save("/tmp/gray.png")
print(json.dumps([im.size, drafted.mode, drafted.size, ycc.mode, ycc.size, cmyk.mode]))
"""))
    host_thumb = Image.open(io.BytesIO(_host_jpeg((1600, 1200), "RGB")))
    host_thumb.thumbnail((200, 200))
    assert out == [list(host_thumb.size), "L", [400, 300], "YCbCr", [800, 600], "CMYK"]
    assert mean_difference(host_image(local_sbx, "/tmp/thumb.png"), host_thumb) < 2.0
    host_cmyk = Image.open(io.BytesIO(_host_jpeg((300, 200), "CMYK")))
    assert mean_difference(host_image(local_sbx, "/tmp/cmyk.tiff"), host_cmyk) < 1.0
    assert mean_difference(host_image(local_sbx, "/tmp/gray.png"),
                           Image.open(io.BytesIO(_host_jpeg((300, 200), "L", progressive=True)))) < 1.0


def test_matplotlib_saves_jpeg_and_a_truncated_file_raises_as_pillows_own(local_sbx: Sandbox) -> None:
    whole = _host_jpeg((200, 100), "RGB")
    local_sbx.files.write("/tmp/cut.jpg", whole[: len(whole) // 2])
    out = run(local_sbx, """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 3, 2]); plt.savefig("/tmp/chart.jpg", dpi=50)
from PIL import Image, ImageFile
try:
    Image.open("/tmp/cut.jpg").load()
except OSError as exc:
    print("refused:", exc)
ImageFile.LOAD_TRUNCATED_IMAGES = True
im = Image.open("/tmp/cut.jpg"); im.load(); print("loaded", im.size)
""")
    assert "refused: image file is truncated" in out and "loaded (200, 100)" in out
    chart = host_image(local_sbx, "/tmp/chart.jpg")
    assert chart.format == "JPEG" and chart.size == (320, 240)


def test_a_photo_larger_than_a_door_frame_decodes_and_encodes(local_sbx: Sandbox) -> None:
    """A 3000x2000 RGB image is 18 MB of pixels, past the door's 16 MiB frames: the codec
    moves them by address."""
    out = run(local_sbx, PHOTO.format(w=3000, h=2000, path="/tmp/big.jpg") + """
im = Image.open("/tmp/big.jpg"); im.load()
print(im.size, round(float(np.asarray(im).mean()), 1))
""", timeout=300)
    host = host_image(local_sbx, "/tmp/big.jpg")
    import numpy as np

    assert out.split()[0:2] == ["(3000,", "2000)"]
    assert abs(float(out.split()[2]) - float(np.asarray(host).mean())) < 0.5


# -- hostile requests ------------------------------------------------------------------------------

DOOR = """
import json, sys, msgpack, numpy, _host
def address(buffer):
    return int(numpy.frombuffer(buffer, dtype=numpy.uint8).__array_interface__["data"][0])
def call(request):
    return msgpack.unpackb(_host.call(msgpack.packb(request, use_bin_type=True)), raw=False)
jpeg = bytearray(open("/tmp/ok.jpg", "rb").read())
room = bytearray(b"\\xaa" * (64 + 300 * 200 * 3 + 64))
dst = address(room) + 64
answers = {}
"""


def _door(sbx: Sandbox, cases: str) -> dict[str, Any]:
    out = run(sbx, DOOR + cases + "\nprint(json.dumps(answers, default=repr))\n")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def _error(answer: Any) -> str:
    assert isinstance(answer, dict) and "error" in answer, answer
    return str(answer["error"]["message"])


def test_addresses_and_lengths_outside_the_guests_memory_are_refused_naming_the_field() -> None:
    sbx = Sandbox.create(timeout=300)
    try:
        sbx.files.write("/tmp/ok.jpg", _host_jpeg((300, 200), "RGB"))
        answers = _door(sbx, """
base = dict(op="jpeg.decode", src=address(jpeg), src_len=len(jpeg), dst=dst, dst_len=300 * 200 * 3, mode="RGB")
answers["ok"] = call(base)
answers["canaries"] = [room[:64] == b"\\xaa" * 64, room[-64:] == b"\\xaa" * 64, room[64:70] != b"\\xaa" * 6]
answers["src_past_end"] = call({**base, "src": (1 << 32) - 8, "src_len": 100})
answers["dst_past_end"] = call({**base, "dst": (1 << 32) - 8})
answers["dst_len_huge"] = call({**base, "dst_len": (1 << 30)})
answers["negative"] = call({**base, "src": -1})
answers["too_small"] = call({**base, "dst_len": 300 * 200 * 3 - 1})
answers["bad_scale"] = call({**base, "scale": 3})
answers["bad_mode"] = call({**base, "mode": "RGBA"})
answers["extra_field"] = call({**base, "path": "/etc/passwd"})
answers["garbage"] = call({**base, "src_len": 64, "src": address(room)})
answers["encode_len"] = call(dict(op="jpeg.encode", src=dst, src_len=10, dst=address(jpeg), dst_len=len(jpeg),
                                  width=300, height=200, mode="RGB"))
small = bytearray(16)
answers["encode_needs"] = call(dict(op="jpeg.encode", src=dst, src_len=300 * 200 * 3, dst=address(small),
                                    dst_len=16, width=300, height=200, mode="RGB"))
answers["small_untouched"] = bytes(small) == bytes(16)
""")
    finally:
        sbx.kill()
    assert answers["ok"]["width"] == 300 and answers["ok"]["height"] == 200
    assert answers["canaries"] == [True, True, True]
    assert "src" in _error(answers["src_past_end"]) and "memory" in _error(answers["src_past_end"])
    assert "dst" in _error(answers["dst_past_end"]) and "memory" in _error(answers["dst_past_end"])
    assert "dst" in _error(answers["dst_len_huge"])
    assert "src" in _error(answers["negative"])
    assert "too large" in _error(answers["too_small"]) or "bytes" in _error(answers["too_small"])
    assert "scale" in _error(answers["bad_scale"]) and "mode" in _error(answers["bad_mode"])
    assert "path" in _error(answers["extra_field"])
    assert "JPEG" in _error(answers["garbage"]) or "jpeg" in _error(answers["garbage"]).lower()
    assert "src_len" in _error(answers["encode_len"])
    assert answers["encode_needs"]["needed"] > 16 and answers["small_untouched"] is True


def test_a_hostile_file_ends_with_an_error_and_the_sandbox_goes_on() -> None:
    """Random bytes after a real header, and every eighth truncation of a real file: each
    answered (an error or a decode), none crashing the guest or the host."""
    sbx = Sandbox.create(timeout=300)
    try:
        sbx.files.write("/tmp/ok.jpg", _host_jpeg((300, 200), "RGB", progressive=True))
        answers = _door(sbx, """
import random
rng = random.Random(7)
base = dict(op="jpeg.decode", dst=dst, dst_len=300 * 200 * 3, mode="RGB")
kinds = set()
for cut in range(0, len(jpeg), max(1, len(jpeg) // 40)):
    piece = bytearray(jpeg[:cut])
    reply = call({**base, "src": address(piece) if piece else 0, "src_len": len(piece)})
    kinds.add("error" if "error" in reply else "decoded")
for _ in range(40):
    mangled = bytearray(jpeg)
    for _ in range(rng.randint(1, 20)):
        mangled[rng.randrange(2, len(mangled))] = rng.randrange(256)
    reply = call({**base, "src": address(mangled), "src_len": len(mangled)})
    kinds.add("error" if "error" in reply else "decoded")
answers["kinds"] = sorted(kinds)
""")
        assert sbx.commands.run("echo still here").stdout == "still here\n"
    finally:
        sbx.kill()
    assert "error" in answers["kinds"]


def _noise_jpeg(width: int, height: int) -> bytes:
    """Noise, progressive, quality 95: the dearest real file per pixel to decode."""
    import numpy as np

    pixels = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=95, progressive=True)
    return out.getvalue()


def test_a_long_decode_stops_with_its_command() -> None:
    """A 6000x4000 photo of noise, progressive (~1.2 s of the codec's work on this machine's
    host): its command's timeout stops the decode within a tick, well before it would end,
    and the sandbox goes on."""
    import time

    sbx = Sandbox.create(timeout=300)
    try:
        sbx.files.write("/tmp/ok.jpg", _noise_jpeg(6000, 4000))
        sbx.files.write("/tmp/long.py", DOOR.replace('room = bytearray(b"\\xaa" * (64 + 300 * 200 * 3 + 64))',
                                                     "room = bytearray(6000 * 4000 * 3 + 128)") + """
print(call(dict(op="jpeg.decode", src=address(jpeg), src_len=len(jpeg), dst=dst, dst_len=6000 * 4000 * 3,
                mode="RGB"))["width"])
""")
        start = time.monotonic()
        assert sbx.commands.run("python3 /tmp/long.py", timeout=60).stdout == "6000\n"
        whole = time.monotonic() - start
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sbx.commands.run("python3 /tmp/long.py", timeout=0.4)
        took = time.monotonic() - start
        assert took < whole - 0.3, (took, whole)
        assert sbx.commands.run("echo on").stdout == "on\n"
    finally:
        sbx.kill()


def _host_jpeg(size: tuple[int, int], mode: str, **options: Any) -> bytes:
    import numpy as np

    width, height = size
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack([x * 255 // width, y * 255 // height, (x + y) * 127 // (width + height)], -1).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).convert(mode).save(out, "JPEG", quality=85, **options)
    return out.getvalue()
