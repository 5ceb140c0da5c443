"""The formats a snapshot is made of, read as hostile input: a guest image (_wasm/image.py) and a
file tree (a tar, _local/trees.py). Every length, offset and member is checked; nothing writes
outside its folder; a decompression never makes more than it declared."""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
from pathlib import Path

import pytest

from declaw_wasm._local import trees
from declaw_wasm._wasm import image as wimage


def _image(pieces: list[tuple[int, bytes]], size: int = 1 << 20, codec: str = "zstd") -> wimage.GuestImage:
    return wimage.GuestImage("0" * 64, size, [wimage.Piece(o, len(d), raw=d) for o, d in pieces], clock_ns=5)


@pytest.mark.parametrize("codec", ["zstd", "zlib", "none"])
def test_an_image_round_trips(codec: str) -> None:
    pages = [(0, b"a" * 4096), (8192, os.urandom(8192)), (1 << 19, b"\x00" * 4096)]
    back = wimage.decode(wimage.encode(_image(pages), codec))
    assert back.memory_size == 1 << 20 and back.clock_ns == 5
    assert [(p.offset, p.data()) for p in back.pieces] == pages


def _with_header(blob: bytes, change: dict[str, object]) -> bytes:
    """The image with header fields changed (the header is at the end, before its length)."""
    (hlen,) = struct.unpack_from("<I", blob, len(blob) - 12)
    start = len(blob) - 12 - hlen
    header = json.loads(blob[start:start + hlen])
    header.update(change)
    raw = json.dumps(header).encode()
    return blob[:start] + raw + struct.pack("<I", len(raw)) + blob[-8:]


def test_a_damaged_or_hostile_image_is_refused() -> None:
    blob = wimage.encode(_image([(4096, os.urandom(4096))]), "zstd")
    (hlen,) = struct.unpack_from("<I", blob, len(blob) - 12)
    cases = [
        b"", b"NOTANIMG" + blob[8:], blob[:-1], blob + b"x", blob[:8] + blob[9:], blob[:-13] + b"[" + blob[-12:],
        blob[:-12] + struct.pack("<I", 1 << 30) + blob[-8:],
        _with_header(blob, {"memory_size": 12345}),  # not whole wasm pages
        _with_header(blob, {"memory_size": 8 << 30}),  # over 4 GiB
        _with_header(blob, {"pieces": [[4095, 4096, hlen]]}),  # misaligned
        _with_header(blob, {"pieces": [[(1 << 20) - 4096, 8192, 10]]}),  # outside memory
        _with_header(blob, {"codec": "lzma"}),
        _with_header(blob, {"clock_ns": -1}),
    ]
    for bad in cases:
        with pytest.raises(wimage.ImageError):
            wimage.decode(bad)


def test_decompression_never_makes_more_than_declared() -> None:
    from backports import zstd  # the test extra has it (the stdlib's on 3.14)

    bomb = zstd.compress(b"\x00" * (64 << 20))
    piece = wimage.Piece(0, 4096, packed=bomb, codec="zstd")
    with pytest.raises(wimage.ImageError):
        piece.data()


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data else None)
    buf.seek(0)
    return buf


Member = tuple[tarfile.TarInfo, bytes]


def _member(name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", link: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data)
    info.linkname = link
    return info, data


def test_a_tree_round_trips_with_links_and_deep_folders(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    deep = src.joinpath(*["d"] * 300)
    deep.mkdir(parents=True)
    (deep / "f").write_text("deep")
    (src / "a.txt").write_text("a")
    os.symlink("/etc/passwd", src / "abs-link")  # a guest's link: kept as text, never followed
    os.symlink("a.txt", src / "rel-link")
    out = io.BytesIO()
    trees.write_tar(src, out)
    dst.mkdir()
    out.seek(0)
    trees.read_tar(out, dst)
    assert (dst.joinpath(*["d"] * 300) / "f").read_text() == "deep"
    assert os.readlink(dst / "abs-link") == "/etc/passwd" and os.readlink(dst / "rel-link") == "a.txt"
    copied = tmp_path / "copy"
    copied.mkdir()
    trees.copy_tree(src, copied)
    assert (copied / "a.txt").read_text() == "a" and os.readlink(copied / "abs-link") == "/etc/passwd"


@pytest.mark.parametrize("members", [
    [_member("../escape", data=b"x")],
    [_member("/abs", data=b"x")],
    [_member("a/../../escape", data=b"x")],
    [_member("hard", tarfile.LNKTYPE, link="a")],
    [_member("dev", tarfile.CHRTYPE)],
    [_member("fifo", tarfile.FIFOTYPE)],
    # a link first, then a member through it: never followed
    [_member("out", tarfile.SYMTYPE, link="/tmp"), _member("out/planted", data=b"x")],
    [_member("dir", tarfile.SYMTYPE, link=".."), _member("dir/escape", data=b"x")],
], ids=["dotdot", "absolute", "climb", "hardlink", "device", "fifo", "via-abs-link", "via-rel-link"])
def test_a_hostile_tree_never_writes_outside_its_folder(tmp_path: Path, members: list[Member]) -> None:
    top = tmp_path / "top"
    top.mkdir()
    with pytest.raises(trees.TreeError):
        trees.read_tar(_tar(members), top)
    assert not (tmp_path / "escape").exists() and not Path("/tmp/planted").exists()


def test_a_truncated_tree_is_refused(tmp_path: Path) -> None:
    raw = _tar([_member("big", data=os.urandom(100_000))]).getvalue()
    top = tmp_path / "top"
    top.mkdir()
    with pytest.raises(trees.TreeError):
        trees.read_tar(io.BytesIO(raw[:50_000]), top)
