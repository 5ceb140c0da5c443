"""JPEG for the guest's Pillow, which was built without libjpeg.

`Image.open("photo.jpg").load()`, `im.save("x.jpg")`, `im.thumbnail(...)` of a JPEG and
matplotlib's `savefig("x.jpg")` failed ("decoder jpeg not available"). Pillow parses a JPEG's
markers in Python (size, mode, EXIF, ICC, DPI) and hands the compressed data to a codec by name;
this module registers Python codecs under Pillow's own name, "jpeg", that ask the host through
the door ops `jpeg.decode` and `jpeg.encode` (declaw_wasm/_media/door.py): the host runs
libjpeg-turbo, compiled to WebAssembly, in an instance of its own. Pixels and JPEG bytes move by
address (buffers of this guest's memory that the host reads and writes), not inside the door's
frames.

What Pillow's own codec does and this one does too: the draft scales (1/2, 1/4, 1/8: `draft`,
`thumbnail`), gray/RGB/CMYK (Adobe's inverted CMYK, as Pillow writes and reads it), quality,
progressive, optimize, subsampling, DPI, EXIF, ICC profiles, XMP and comments (the markers are
written into the file here, where Pillow's C encoder writes them). Refused with a clear error:
custom quantization tables (`qtables`, `quality="keep"` and the presets that name tables) and
`streamtype`. A truncated file raises as Pillow's does, unless `ImageFile.LOAD_TRUNCATED_IMAGES`.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

# Pillow's raw mode of a JPEG tile -> (what the host decodes to, the raw mode of those bytes)
_DECODED = {"L": ("L", "L"), "RGB": ("RGB", "RGB"), "RGBX": ("RGB", "RGB"), "CMYK": ("CMYK", "CMYK"),
            "CMYK;I": ("CMYK", "CMYK;I"), "YCbCr": ("RGB", "RGB")}
# Pillow's raw mode of an image to save -> (the host's pixel layout, the raw mode packing them)
_ENCODED = {"L": ("L", "L"), "RGB": ("RGB", "RGB"), "CMYK;I": ("CMYK", "CMYK;I"), "YCbCr": ("RGB", "RGB")}
_BANDS = {"L": 1, "RGB": 3, "CMYK": 4}
_EOI = b"\xff\xd9"


def patch_pillow(image: ModuleType) -> None:
    """On `import PIL.Image`: the "jpeg" decoder and encoder, unless this Pillow has its own."""
    if hasattr(image.core, "jpeg_decoder") or "jpeg" in image.DECODERS:
        return
    from PIL import ImageFile

    class JpegDecoder(ImageFile.PyDecoder):
        _pulls_fd = True

        def decode(self, buffer: Any) -> tuple[int, int]:
            assert self.fd is not None and self.im is not None
            rawmode = self.args[0] if self.args else self.mode
            scale = self.args[2] if len(self.args) > 2 else 1
            data = self.fd.read()  # the file from the tile's offset on (the codec stops at its end)
            if _EOI not in data and not ImageFile.LOAD_TRUNCATED_IMAGES:
                # as Pillow's own decoder says it: libjpeg would fill the rest with grey
                raise OSError("image file is truncated (no end-of-image marker)")
            wanted, raw = _DECODED.get(rawmode, (None, None))
            if wanted is None or raw is None:
                raise OSError(f"cannot decode a JPEG to raw mode {rawmode}")
            width, height = self.state.xsize, self.state.ysize
            pixels: bytes | bytearray = decode(data, wanted, scale, width, height)
            if rawmode == "YCbCr":  # Pillow's draft("YCbCr"): the host gives RGB
                from PIL import Image

                pixels = Image.frombytes("RGB", (width, height), pixels).convert("YCbCr").tobytes()
                raw = "YCbCr"
            self.set_as_raw(pixels, raw)
            return -1, 0

    class JpegEncoder(ImageFile.PyEncoder):
        _pushes_fd = True

        def encode(self, bufsize: int) -> tuple[int, int, bytes]:
            from PIL import Image

            assert self.im is not None
            args = tuple(self.args) + (None,) * 15
            (rawmode, quality, progressive, _smooth, optimize, _keep_rgb, streamtype, dpi, subsampling,
             _restart_blocks, _restart_rows, qtables, comment, extra, exif) = args[:15]
            if qtables:
                raise OSError("custom JPEG quantization tables (qtables, quality='keep' or a preset naming "
                              "tables) are not supported in this sandbox: give quality= and subsampling= instead")
            if streamtype:
                raise OSError("JPEG streamtype (tables-only or image-only streams) is not supported in this sandbox")
            layout, packing = _ENCODED.get(rawmode, (None, None))
            if layout is None or packing is None:
                raise OSError(f"cannot write raw mode {rawmode} as JPEG")
            width, height = self.state.xsize, self.state.ysize
            if rawmode == "YCbCr":  # (Pillow's encoder takes YCbCr as it is; here it goes as RGB)
                ycc = _packed(Image, self, "YCbCr", "YCbCr")
                pixels = Image.frombytes("YCbCr", (width, height), ycc).convert("RGB").tobytes()
            else:
                pixels = _packed(Image, self, self.mode, packing)
            data = encode(pixels, layout, width, height, quality=quality if quality and quality > 0 else None,
                          progressive=bool(progressive), optimize=bool(optimize),
                          subsampling=subsampling if isinstance(subsampling, int) else -1,
                          dpi=tuple(dpi) if dpi and dpi[0] > 0 and dpi[1] > 0 else None)
            data = _with_markers(data, exif or b"", extra or b"", comment)
            return len(data), 1, data

    image.register_decoder("jpeg", JpegDecoder)
    image.register_encoder("jpeg", JpegEncoder)


def _packed(image: Any, codec: Any, mode: str, rawmode: str) -> bytes:
    """The codec's image region as raw bytes in `rawmode` (what `Image.tobytes` does)."""
    packer = image._getencoder(mode, "raw", rawmode)
    packer.setimage(codec.im, codec.state.extents())
    chunks = []
    while True:
        _, status, chunk = packer.encode(1 << 16)
        chunks.append(chunk)
        if status:
            break
    if status < 0:
        raise OSError(f"cannot pack the image as {rawmode} (error {status})")
    return b"".join(chunks)


def _address(buffer: bytearray) -> int:
    """Where `buffer` lies in this guest's memory (WASI's ctypes refuses `addressof`; numpy's
    array interface gives the same integer). The buffer must not be resized while the host uses it."""
    import numpy

    return int(numpy.frombuffer(buffer, dtype=numpy.uint8).__array_interface__["data"][0]) if buffer else 0


def _call(op: str, **request: Any) -> dict[str, Any]:
    from declaw_shell import door

    reply = door.call(op, **request)
    if "error" in reply:
        raise OSError(reply["error"].get("message", f"{op} failed"))
    result: dict[str, Any] = reply
    return result


def decode(data: bytes, mode: str, scale: int, width: int, height: int) -> bytearray:
    """`data`, a JPEG file, as `width` × `height` pixels of `mode` (L, RGB, CMYK) at 1/`scale`."""
    source = bytearray(data)
    pixels = bytearray(width * height * _BANDS[mode])
    answer = _call("jpeg.decode", src=_address(source), src_len=len(source), dst=_address(pixels),
                   dst_len=len(pixels), mode=mode, scale=scale)
    if (answer["width"], answer["height"]) != (width, height):
        raise OSError(f"the JPEG decodes to {answer['width']}x{answer['height']} pixels, not the "
                      f"{width}x{height} its header promised")
    return pixels


def encode(pixels: bytes, mode: str, width: int, height: int, *, quality: int | None, progressive: bool,
           optimize: bool, subsampling: int, dpi: tuple[int, ...] | None) -> bytes:
    """`pixels` (rows of `mode`) as a JPEG file, as libjpeg writes it."""
    source = bytearray(pixels)
    request: dict[str, Any] = {"width": width, "height": height, "mode": mode, "progressive": progressive,
                               "optimize": optimize, "subsampling": max(-1, min(2, subsampling))}
    if quality is not None:
        request["quality"] = max(1, min(100, quality))
    if dpi is not None:
        request["dpi"] = [max(0, min(65535, round(d))) for d in dpi[:2]]
    room = len(source) // 2 + 65536
    for _ in range(2):
        out = bytearray(room)
        answer = _call("jpeg.encode", src=_address(source), src_len=len(source), dst=_address(out),
                       dst_len=len(out), **request)
        if "size" in answer:
            del out[answer["size"]:]
            return bytes(out)
        room = answer["needed"]
    raise OSError("the JPEG encoder asked for more room twice")


def _with_markers(data: bytes, exif: bytes, extra: bytes, comment: Any) -> bytes:
    """libjpeg's file with Pillow's markers where Pillow's encoder writes them: after the
    SOI and the APPn segments libjpeg wrote (JFIF, Adobe), EXIF (APP1), the `extra` segments
    (XMP, ICC profile), then the comment."""
    if not exif and not extra and not comment:
        return data
    at = 2  # past SOI
    while at + 4 <= len(data) and data[at] == 0xFF and 0xE0 <= data[at + 1] <= 0xEF:
        at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
    inserted = b""
    if exif:
        inserted += b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif
    inserted += extra
    if comment:
        text = comment.encode() if isinstance(comment, str) else bytes(comment)
        inserted += b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text
    return data[:at] + inserted + data[at:]
