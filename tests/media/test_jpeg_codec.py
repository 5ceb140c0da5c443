"""declaw_wasm/_media/jpeg.py: libjpeg-turbo in its own Wasm sandbox, against the host's Pillow.

Round trips and Pillow-made files of every kind decode as host Pillow decodes them (libjpeg-turbo
versions differ in rounding, so within a small tolerance); hostile inputs (empty, truncated,
random, bit-flipped, a header claiming 65500x65500, a progressive file repeating a scan
thousands of times) end as a `CodecError` or a decode with warnings, in bounded time, never a
crash. Host only, fast: no guest.
"""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from declaw_wasm._media import jpeg
from declaw_wasm._media.jpeg import CodecError, Header

np = pytest.importorskip("numpy")
ROOT = Path(__file__).resolve().parent.parent.parent
BIG = 1 << 30
CHANNELS = {"L": 1, "RGB": 3, "YCbCr": 3, "CMYK": 4}


def photo(width: int, height: int, noise: float = 8.0, seed: int = 1) -> Any:
    """A photo-like RGB array: smooth gradients plus noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    r = 128 + 100 * np.sin(x / width * 7) * np.cos(y / height * 5)
    g = 128 + 100 * np.sin((x + y) / (width + height) * 11)
    b = 128 + 90 * np.cos(x / width * 3 + y / height * 4)
    pixels = np.stack([r, g, b], -1) + rng.normal(0, noise, (height, width, 3))
    return np.clip(pixels, 0, 255).astype(np.uint8)


def in_mode(rgb: Any, mode: str) -> Any:
    if mode == "RGB":
        return rgb
    if mode == "L":
        return (rgb @ np.array([0.299, 0.587, 0.114])).clip(0, 255).astype(np.uint8)
    k = 255 - rgb.max(-1, keepdims=True)
    return np.concatenate([255 - rgb, k], -1).astype(np.uint8)


def pil() -> Any:
    return pytest.importorskip("PIL.Image")


def pillow_jpeg(pixels: Any, mode: str, **options: Any) -> bytes:
    out = io.BytesIO()
    pil().fromarray(pixels, mode).save(out, "JPEG", **options)
    return out.getvalue()


def pillow_decode(data: bytes, mode: str | None = None, scale: int = 1) -> Any:
    image = pil().open(io.BytesIO(data))
    if scale > 1:
        image.draft(image.mode, (image.size[0] // scale, image.size[1] // scale))
    image.load()
    if mode and image.mode != mode:
        image = image.convert(mode)
    return np.asarray(image)


def pixels_of(decoded: jpeg.Decoded, mode: str) -> Any:
    shape = (decoded.height, decoded.width) + ((CHANNELS[mode],) if mode != "L" else ())
    return np.frombuffer(decoded.pixels, np.uint8).reshape(shape)


def close(a: Any, b: Any, mean: float = 1.0, worst: int = 8) -> None:
    assert a.shape == b.shape
    diff = np.abs(a.astype(np.int32) - b.astype(np.int32))
    assert diff.mean() < mean and diff.max() <= worst, (diff.mean(), diff.max())


@pytest.fixture(scope="module", autouse=True)
def compiled() -> None:
    jpeg.warm()  # compile once (the fast tier's cache is empty), outside any one test's time


@pytest.fixture(scope="module")
def rgb() -> Any:
    return photo(96, 64)


# -- round trips and Pillow's files ------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["L", "RGB", "CMYK"])
@pytest.mark.parametrize("quality", [30, 75, 95, 100])
def test_round_trip_decodes_as_pillow_does(rgb: Any, mode: str, quality: int) -> None:
    pixels = in_mode(rgb, mode)
    height, width = pixels.shape[:2]
    data = jpeg.encode(pixels.tobytes(), width, height, mode, quality=quality)
    assert jpeg.read_header(data) == Header(width, height, CHANNELS[mode],
                                            {"L": "L", "RGB": "YCbCr", "CMYK": "CMYK"}[mode], False)
    decoded = jpeg.decode(data, mode=mode, max_bytes=BIG)
    assert (decoded.width, decoded.height, decoded.warnings, decoded.truncated) == (width, height, 0, False)
    ours = pixels_of(decoded, mode)
    close(ours, pillow_decode(data) if mode != "CMYK" else 255 - pillow_decode(data))  # Pillow inverts Adobe CMYK
    # as near the original as Pillow's own file at that quality, and as large, give or take
    theirs = pillow_jpeg(pixels if mode != "CMYK" else 255 - pixels, mode, quality=quality)
    reference = pixels_of(jpeg.decode(theirs, mode=mode, max_bytes=BIG), mode)
    error, their_error = (np.abs(p.astype(np.int32) - pixels.astype(np.int32)).mean() for p in (ours, reference))
    assert error <= their_error * 1.05 + 0.1
    assert 0.9 < len(data) / len(theirs) < 1.1


@pytest.mark.parametrize("options", [
    {"quality": 90}, {"quality": 90, "progressive": True}, {"quality": 85, "subsampling": 0},
    {"quality": 85, "subsampling": 1}, {"quality": 85, "subsampling": 2}, {"quality": 80, "optimize": True},
    {"quality": 90, "progressive": True, "subsampling": 0}, {"quality": 75, "restart_marker_blocks": 3},
    {"quality": 75, "restart_marker_rows": 1},
], ids=str)
def test_pillow_rgb_files_decode_as_pillow_decodes_them(rgb: Any, options: dict[str, Any]) -> None:
    data = pillow_jpeg(rgb, "RGB", **options)
    header = jpeg.read_header(data)
    assert (header.width, header.height, header.components, header.color_space) == (96, 64, 3, "YCbCr")
    assert header.progressive == bool(options.get("progressive"))
    decoded = jpeg.decode(data, mode="RGB", max_bytes=BIG)
    assert decoded.warnings == 0
    close(pixels_of(decoded, "RGB"), pillow_decode(data))
    # YCbCr as stored, as Pillow's draft("YCbCr") gives it
    image = pil().open(io.BytesIO(data))
    image.draft("YCbCr", None)
    ycbcr = jpeg.decode(data, mode="YCbCr", max_bytes=BIG)
    close(pixels_of(ycbcr, "YCbCr"), np.asarray(image))
    # and gray from colour, as libjpeg converts it
    gray = jpeg.decode(data, mode="L", max_bytes=BIG)
    close(pixels_of(gray, "L"), pillow_decode(data, "L"), mean=1.0, worst=2)


@pytest.mark.parametrize("progressive", [False, True])
def test_pillow_gray_and_adobe_cmyk_files(rgb: Any, progressive: bool) -> None:
    gray = pillow_jpeg(in_mode(rgb, "L"), "L", quality=90, progressive=progressive)
    assert jpeg.read_header(gray) == Header(96, 64, 1, "L", progressive)
    close(pixels_of(jpeg.decode(gray, mode="L", max_bytes=BIG), "L"), pillow_decode(gray))
    close(pixels_of(jpeg.decode(gray, mode="RGB", max_bytes=BIG), "RGB"), pillow_decode(gray, "RGB"))
    cmyk = pillow_jpeg(in_mode(rgb, "CMYK"), "CMYK", quality=90, progressive=progressive)
    assert jpeg.read_header(cmyk) == Header(96, 64, 4, "CMYK", progressive)
    # Pillow writes Adobe CMYK inverted and inverts it back on reading; we give it as stored
    close(255 - pixels_of(jpeg.decode(cmyk, mode="CMYK", max_bytes=BIG), "CMYK"), pillow_decode(cmyk))
    with pytest.raises(CodecError, match="(?i)unsupported color conversion"):
        jpeg.decode(cmyk, mode="RGB", max_bytes=BIG)


def test_arithmetic_coding_decodes_as_huffman_does_and_as_pillow(rgb: Any) -> None:
    height, width = rgb.shape[:2]
    for options in ({}, {"progressive": True}, {"subsampling": 0, "quality": 95}):
        huffman = jpeg.encode(rgb.tobytes(), width, height, "RGB", **options)
        arithmetic = jpeg.encode(rgb.tobytes(), width, height, "RGB", arithmetic=True, **options)
        assert arithmetic != huffman
        a, h = (jpeg.decode(d, mode="RGB", max_bytes=BIG) for d in (arithmetic, huffman))
        assert a == h  # the same coefficients, coded otherwise
        # Pillow reads a small arithmetic file (a large one fails there: its suspending source
        # cannot feed libjpeg's arithmetic decoder across its buffers; this module reads both)
        close(pixels_of(a, "RGB"), pillow_decode(arithmetic))
    big = photo(800, 600, noise=30)
    data = jpeg.encode(big.tobytes(), 800, 600, "RGB", arithmetic=True, quality=100, subsampling=0)
    decoded = jpeg.decode(data, mode="RGB", max_bytes=BIG)
    close(pixels_of(decoded, "RGB"), big, mean=1.5, worst=12)


@pytest.mark.parametrize("scale", [1, 2, 4, 8])
@pytest.mark.parametrize("size", [(96, 64), (101, 77), (17, 9)])
def test_scaled_decode_gives_pillows_draft_size_and_pixels(scale: int, size: tuple[int, int]) -> None:
    width, height = size
    data = pillow_jpeg(photo(width, height), "RGB", quality=90)
    decoded = jpeg.decode(data, mode="RGB", scale=scale, max_bytes=BIG)
    reference = pillow_decode(data, scale=scale)
    assert (decoded.height, decoded.width) == reference.shape[:2] == (-(-height // scale), -(-width // scale))
    close(pixels_of(decoded, "RGB"), reference)


def test_encode_options_are_written_as_pillow_writes_them(rgb: Any) -> None:
    image_module = pil()
    height, width = rgb.shape[:2]
    raw = rgb.tobytes()
    plain = image_module.open(io.BytesIO(jpeg.encode(raw, width, height, "RGB")))
    assert plain.info.get("jfif_density") == (1, 1) and plain.info.get("jfif_unit") == 0
    assert "dpi" not in plain.info
    dotted = image_module.open(io.BytesIO(jpeg.encode(raw, width, height, "RGB", dpi=(300, 150))))
    assert dotted.info["dpi"] == (300, 150) and dotted.info["jfif_unit"] == 1
    progressive = image_module.open(io.BytesIO(jpeg.encode(raw, width, height, "RGB", progressive=True)))
    assert progressive.info.get("progressive") == 1
    from PIL.JpegImagePlugin import get_sampling

    for subsampling, expected in ((-1, 2), (0, 0), (1, 1), (2, 2)):
        image = image_module.open(io.BytesIO(jpeg.encode(raw, width, height, "RGB", subsampling=subsampling)))
        assert get_sampling(image) == expected
    cmyk = image_module.open(io.BytesIO(jpeg.encode(in_mode(rgb, "CMYK").tobytes(), width, height, "CMYK")))
    assert cmyk.mode == "CMYK" and "adobe" in cmyk.info
    optimized = jpeg.encode(raw, width, height, "RGB", optimize=True)
    assert len(optimized) < len(jpeg.encode(raw, width, height, "RGB"))
    # Pillow's defaults and ours give the same file size (quality 75, 4:2:0, no options)
    assert abs(len(jpeg.encode(raw, width, height, "RGB")) - len(pillow_jpeg(rgb, "RGB"))) < 200


# -- hostile input -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sample_files(rgb: Any) -> list[bytes]:
    height, width = rgb.shape[:2]
    raw = rgb.tobytes()
    return [jpeg.encode(raw, width, height, "RGB", quality=80),
            jpeg.encode(raw, width, height, "RGB", quality=80, progressive=True),
            jpeg.encode(raw, width, height, "RGB", quality=80, arithmetic=True)]


@pytest.mark.parametrize("data, message", [
    (b"", "empty input"),
    (b"\x89PNG\r\n\x1a\n", "not a JPEG file: starts with 0x89 0x50"),
    (b"\xff", "not a JPEG file: starts with 0xFF$"),
    (b"\xff\xd8", "(?i)premature end|empty|no image"),
    (b"\xff\xd8\xff\xd9", "(?i)no image|sos|marker"),
])
def test_short_and_foreign_inputs_are_refused_with_their_reason(data: bytes, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        jpeg.decode(data, mode="RGB", max_bytes=BIG)
    with pytest.raises(CodecError):
        jpeg.read_header(data)


def test_every_truncation_decodes_with_warnings_or_is_refused(sample_files: list[bytes]) -> None:
    for data in sample_files:
        outcomes = set()
        for end in range(2, len(data) - 1, max(1, len(data) // 60)):
            try:
                decoded = jpeg.decode(data[:end], mode="RGB", max_bytes=BIG)
            except CodecError as error:
                outcomes.add("refused")
                assert str(error)
            else:
                outcomes.add("decoded")
                assert decoded.warnings > 0 and decoded.truncated
                assert decoded.warning and "premature end" in decoded.warning.lower()
                assert len(decoded.pixels) == 96 * 64 * 3
        assert outcomes == {"refused", "decoded"}  # cut in the header: refused; in the scans: grey-filled


def test_the_grey_fill_of_a_truncated_file_is_what_pillow_makes_of_it(sample_files: list[bytes]) -> None:
    image_file = pytest.importorskip("PIL.ImageFile")
    data = sample_files[0][: len(sample_files[0]) * 2 // 3]
    decoded = jpeg.decode(data, mode="RGB", max_bytes=BIG)
    assert decoded.truncated
    image_file.LOAD_TRUNCATED_IMAGES = True
    try:
        reference = pillow_decode(data)
    finally:
        image_file.LOAD_TRUNCATED_IMAGES = False
    close(pixels_of(decoded, "RGB"), reference)


def test_random_bytes_after_a_start_of_image_are_refused() -> None:
    rng = np.random.default_rng(7)
    for size in (3, 10, 100, 1000, 10000):
        for _ in range(5):
            data = b"\xff\xd8" + rng.integers(0, 256, size, dtype=np.uint8).tobytes()
            try:
                jpeg.decode(data, mode="RGB", max_bytes=BIG)
            except CodecError:
                pass


def _with_size(data: bytes, width: int, height: int) -> bytes:
    """`data` with its frame header (SOF0/SOF2) claiming `width` x `height`."""
    at = 2
    while at < len(data):
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2, 0xC9, 0xCA):
            return data[:at + 5] + struct.pack(">HH", height, width) + data[at + 9:]
        at += 2 + length
    raise AssertionError("no SOF")


def test_a_header_claiming_65500x65500_is_refused_by_max_bytes_before_decoding(sample_files: list[bytes]) -> None:
    for data in sample_files:
        huge = _with_size(data, 65500, 65500)
        assert (jpeg.read_header(huge).width, jpeg.read_header(huge).height) == (65500, 65500)
        started = time.monotonic()
        refused = r"image too large: 65500x65500 pixels .* at most 100,000,000 \(max_bytes\)"
        with pytest.raises(CodecError, match=refused):
            jpeg.decode(huge, mode="RGB", max_bytes=100_000_000)
        with pytest.raises(CodecError, match="image too large"):  # 1/8 is 201 MB, still too large
            jpeg.decode(huge, mode="RGB", scale=8, max_bytes=100_000_000)
        assert time.monotonic() - started < 1
    # a progressive one needs its coefficients (17 GB): refused by the memory cap whatever max_bytes says
    with pytest.raises(CodecError, match=r"needs [\d,]+ bytes to decode, at most 1,073,741,824"):
        jpeg.decode(_with_size(sample_files[1], 65500, 65500), mode="RGB", scale=8, max_bytes=1 << 40)


def test_a_call_stops_when_its_caller_asks_and_charges_its_meter(sample_files: list[bytes]) -> None:
    """`stop()` is asked every tick while the codec runs (a sandbox killed while its guest waits
    for a decode): a long decode (4000x3000 of noise, progressive: ~0.9 s here) ends within a
    few ticks of it saying so; the meter counts what was spent, a capped meter stops the call
    with the caller's own reason."""
    out = io.BytesIO()
    pixels = np.random.default_rng(0).integers(0, 256, (3000, 4000, 3), dtype=np.uint8)
    pytest.importorskip("PIL.Image").fromarray(pixels).save(out, "JPEG", quality=95, progressive=True)
    started = time.monotonic()
    with pytest.raises(CodecError, match="stopped: its sandbox is stopping"):
        jpeg.decode(out.getvalue(), mode="RGB", max_bytes=1 << 28, stop=lambda: time.monotonic() - started > 0.1)
    assert time.monotonic() - started < 0.4
    meter = jpeg.Meter()
    jpeg.decode(sample_files[0], mode="RGB", max_bytes=1 << 26, meter=meter)
    assert meter.spent > 1000
    capped = jpeg.Meter(cap=meter.spent // 2)
    with pytest.raises(CodecError, match=r"instruction limit \(Limits.cpu_instructions\) ran out"):
        jpeg.decode(sample_files[0], mode="RGB", max_bytes=1 << 26, meter=capped)
    assert capped.spent == meter.spent // 2


def _segments(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(marker, start, end) of each segment, a scan's entropy-coded data included in its SOS."""
    at = 2
    while at < len(data):
        marker = data[at + 1]
        if marker == 0xD9:
            yield marker, at, at + 2
            return
        end = at + 2 + struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker == 0xDA:
            while not (data[end] == 0xFF and data[end + 1] not in (0x00, *range(0xD0, 0xD8))):
                end += 1
        yield marker, at, end
        at = end


def test_a_progressive_file_repeating_a_scan_runs_out_of_fuel_quickly() -> None:
    flat = np.full((2048, 2048), 128, np.uint8).tobytes()
    data = jpeg.encode(flat, 2048, 2048, "L", progressive=True)
    scans = [(start, end) for marker, start, end in _segments(data) if marker == 0xDA]
    start, end = scans[1]  # an AC scan: every block visited, a few bytes long (one EOB run)
    hostile = data[:end] + data[start:end] * 30000 + b"\xff\xd9"
    started = time.monotonic()
    with pytest.raises(CodecError, match="took too long"):
        jpeg.decode(hostile, mode="L", scale=8, max_bytes=BIG)
    assert time.monotonic() - started < 5
    # the same scan repeated a few times: libjpeg warns (a bogus progression) and decodes
    benign = data[:end] + data[start:end] * 3 + data[end:]
    decoded = jpeg.decode(benign, mode="L", scale=8, max_bytes=BIG)
    assert decoded.warnings > 0 and not decoded.truncated


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=6),
       which=st.integers(0, 2), mode=st.sampled_from(["L", "RGB"]))
def test_bit_flipped_files_decode_or_are_refused(sample_files: list[bytes], flips: list[tuple[int, int]],
                                                 which: int, mode: str) -> None:
    data = bytearray(sample_files[which])
    for position, bit in flips:
        data[2 + position % (len(data) - 2)] ^= 1 << bit
    try:
        decoded = jpeg.decode(data, mode=mode, max_bytes=1 << 26)
    except CodecError as error:
        assert str(error)
    else:
        assert len(decoded.pixels) == decoded.width * decoded.height * CHANNELS[mode]


# -- arguments ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda d: jpeg.decode(d, mode="P", max_bytes=BIG), "mode must be one of L, YCbCr, RGB, CMYK, not 'P'"),
    (lambda d: jpeg.decode(d, mode="RGB", scale=3, max_bytes=BIG), "scale must be one of 1, 2, 4, 8, not 3"),
    (lambda d: jpeg.decode(d, mode="RGB", scale=True, max_bytes=BIG), "scale must be"),
    (lambda d: jpeg.decode(d, mode="RGB", max_bytes=-1), "max_bytes must be 0.."),
    (lambda d: jpeg.decode(d, mode="RGB", max_bytes=100), r"image too large: 96x64 pixels in RGB is 18,432 bytes"),
    (lambda d: jpeg.decode("text", mode="RGB", max_bytes=BIG),  # type: ignore[arg-type]
     "data must be bytes, bytearray or memoryview, not str"),
    (lambda d: jpeg.read_header(None), "not NoneType"),  # type: ignore[arg-type]
])
def test_bad_decode_arguments_are_refused_clearly(sample_files: list[bytes], call: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        call(sample_files[0])


@pytest.mark.parametrize("kwargs, message", [
    ({"pixels": b"\0" * 11}, r"pixels hold 11 bytes; 2x2 RGB needs 12"),
    ({"mode": "YCbCr"}, "mode must be one of L, RGB, CMYK, not 'YCbCr'"),
    ({"quality": 0}, "quality must be 1..100, not 0"),
    ({"quality": 101}, "quality must be 1..100, not 101"),
    ({"quality": 90.0}, "quality must be an int, not float"),
    ({"width": 0}, "width must be 1..65500, not 0"),
    ({"height": 65501}, "height must be 1..65500, not 65501"),
    ({"subsampling": 3}, "subsampling must be -1..2, not 3"),
    ({"progressive": 1}, "progressive must be a bool, not int"),
    ({"dpi": (300,)}, r"dpi must be a \(x, y\) tuple"),
    ({"dpi": (0, 72)}, r"dpi\[0\] must be 1..65535, not 0"),
    ({"pixels": [0] * 12}, "pixels must be bytes, bytearray or memoryview, not list"),
])
def test_bad_encode_arguments_are_refused_clearly(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"pixels": b"\0" * 12, "width": 2, "height": 2, "mode": "RGB", **kwargs}
    with pytest.raises(CodecError, match=message):
        jpeg.encode(**arguments)


def test_buffers_of_every_kind_are_taken(rgb: Any) -> None:
    raw = rgb.tobytes()
    height, width = rgb.shape[:2]
    data = jpeg.encode(raw, width, height, "RGB")
    assert jpeg.encode(bytearray(raw), width, height, "RGB") == data
    assert jpeg.encode(memoryview(rgb), width, height, "RGB") == data  # a 3-d uint8 view
    assert jpeg.encode(memoryview(raw)[::1], width, height, "RGB") == data
    padded = memoryview(bytes(len(raw) * 2))
    assert jpeg.encode(padded[::2], width, height, "RGB") != b""  # not contiguous: copied
    decoded = jpeg.decode(data, mode="RGB", max_bytes=BIG)
    assert jpeg.decode(bytearray(data), mode="RGB", max_bytes=BIG) == decoded
    assert jpeg.decode(memoryview(data), mode="RGB", max_bytes=BIG) == decoded
    # an empty image cannot be: 1x1 is the least
    assert jpeg.decode(jpeg.encode(b"\x80", 1, 1, "L"), mode="L", max_bytes=1).pixels in (b"\x80", b"\x7f", b"\x81")


# -- the module: threads, cache, imports -------------------------------------------------------------

def test_many_threads_decoding_at_once_get_the_serial_results(sample_files: list[bytes], rgb: Any) -> None:
    height, width = rgb.shape[:2]
    jobs = [(data, mode, scale) for data in sample_files for mode in ("L", "RGB") for scale in (1, 2)]
    expected = [jpeg.decode(d, mode=m, scale=s, max_bytes=BIG) for d, m, s in jobs]
    encoded = jpeg.encode(rgb.tobytes(), width, height, "RGB", quality=88)
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for round_ in range(3):
                job = jobs[(index + round_) % len(jobs)]
                got = jpeg.decode(job[0], mode=job[1], scale=job[2], max_bytes=BIG)
                assert got == expected[(index + round_) % len(jobs)]
                assert jpeg.encode(rgb.tobytes(), width, height, "RGB", quality=88) == encoded
            results[index] = True
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 16


def test_the_compiled_module_is_cached_and_a_read_only_cache_compiles_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_files: list[bytes]) -> None:
    monkeypatch.setenv("DECLAW_WASM_CACHE", str(tmp_path))
    monkeypatch.setattr(jpeg, "_compiled", None)
    jpeg.warm()
    [cached] = (tmp_path / "compiled").glob("jpeg-*.cwasm")
    assert cached == jpeg.compiled_path(jpeg.MODULE_PATH.read_bytes())
    assert jpeg.decode(sample_files[0], mode="RGB", max_bytes=BIG).warnings == 0
    cached.unlink()
    monkeypatch.setattr(jpeg, "_compiled", None)
    monkeypatch.setattr(jpeg, "writable", lambda folder: False)
    assert jpeg.decode(sample_files[0], mode="RGB", max_bytes=BIG).warnings == 0
    assert not list((tmp_path / "compiled").glob("jpeg-*.cwasm"))


def test_the_module_imports_nothing_and_importing_jpeg_py_does_not_load_wasmtime() -> None:
    import wasmtime

    module = wasmtime.Module(wasmtime.Engine(), jpeg.MODULE_PATH.read_bytes())
    imports = sorted(f"{i.module}.{i.name}" for i in module.imports)
    assert all(name.startswith("wasi_snapshot_preview1.") for name in imports), imports
    assert set(imports) <= {f"wasi_snapshot_preview1.{n}" for n in ("fd_close", "fd_seek", "fd_write", "proc_exit")}
    assert 100_000 < jpeg.MODULE_PATH.stat().st_size < 1_000_000
    program = "import sys, declaw_wasm._media.jpeg; print('wasmtime' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", program],
                          capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.stdout.strip() == "False", done.stderr
