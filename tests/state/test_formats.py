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

from declaw_wasm._hostdirs import ExportBudget
from declaw_wasm.exceptions import NotEnoughSpaceException
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


def _budget(quota: int = 1 << 30) -> ExportBudget:
    return ExportBudget(quota, "test export")


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
    trees.write_tar(src, out, _budget(), "/home/user")
    dst.mkdir()
    out.seek(0)
    trees.read_tar(out, dst, _budget(), "/home/user")
    assert (dst.joinpath(*["d"] * 300) / "f").read_text() == "deep"
    assert os.readlink(dst / "abs-link") == "/etc/passwd" and os.readlink(dst / "rel-link") == "a.txt"
    copied = tmp_path / "copy"
    copied.mkdir()
    trees.copy_tree(src, copied, _budget(), "/home/user")
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
        trees.read_tar(_tar(members), top, _budget(), "/home/user")
    assert not (tmp_path / "escape").exists() and not Path("/tmp/planted").exists()


def test_a_truncated_tree_is_refused(tmp_path: Path) -> None:
    raw = _tar([_member("big", data=os.urandom(100_000))]).getvalue()
    top = tmp_path / "top"
    top.mkdir()
    with pytest.raises(trees.TreeError):
        trees.read_tar(io.BytesIO(raw[:50_000]), top, _budget(), "/home/user")


# -- exports are bounded by the disk quota (docs/security.md, "Exports and the disk quota") ----------
MIB = 1 << 20


def _sparse(path: Path, size: int, head: bytes = b"") -> None:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def _allocated(folder: Path) -> int:
    return sum(p.lstat().st_blocks * 512 for p in folder.rglob("*"))


def test_sparse_files_count_at_their_apparent_size(tmp_path: Path) -> None:
    from declaw_wasm._hostdirs import usage

    _sparse(tmp_path / "hole", 512 * MIB, b"x")
    (tmp_path / "dense").write_bytes(b"y" * 10_000)
    used, entries = usage([tmp_path])
    assert entries == 2 and used >= 512 * MIB + 10_000  # not the one block it occupies
    assert (tmp_path / "hole").stat().st_blocks * 512 < MIB


def test_a_tree_export_carries_at_most_its_quota_and_reads_nothing_past_it(tmp_path: Path) -> None:
    """write_tar (snapshots), copy_tree (fork) and read_tar (restore) refuse a tree whose files
    add up to more than the quota + 1 MiB, naming the quota and the file, before reading it."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "small").write_bytes(b"s" * (2 * MIB))
    _sparse(src / "sparse", 512 * MIB, b"x")
    out = io.BytesIO()
    with pytest.raises(NotEnoughSpaceException, match=r"test export refused: /home/user/sparse is 536870912 bytes"
                                                      r".*disk quota of 20971520 bytes \+ 1 MiB") as caught:
        trees.write_tar(src, out, _budget(20 * MIB), "/home/user")
    assert "Limits.disk_bytes" in str(caught.value) and "apparent size" in str(caught.value)
    assert out.tell() < 3 * MIB  # the small file and headers: the sparse one was never read
    copied = tmp_path / "copy"
    copied.mkdir()
    with pytest.raises(NotEnoughSpaceException, match="/home/user/sparse is 536870912 bytes"):
        trees.copy_tree(src, copied, _budget(20 * MIB), "/home/user")
    assert _allocated(copied) < 3 * MIB and not (copied / "sparse").exists()
    # a tree over the quota (from a store someone else wrote) is refused as it is read back
    out = io.BytesIO()
    trees.write_tar(src, out, _budget(1 << 30), "/home/user")
    out.seek(0)
    back = tmp_path / "back"
    back.mkdir()
    with pytest.raises(NotEnoughSpaceException, match="/home/user/sparse is 536870912 bytes"):
        trees.read_tar(out, back, _budget(20 * MIB), "/home/user")
    assert _allocated(back) < 3 * MIB


def test_a_file_grown_after_its_size_check_is_not_read_past_it(tmp_path: Path) -> None:
    """The exporters read at most the size they checked from the descriptor they checked: a
    file the guest grows (to 1 TiB, sparse) between the check and the read is cut there."""
    from declaw_wasm._hostdirs import Exactly
    from declaw_wasm._local.files import CappedReader
    from declaw_wasm._volumes.hostfs import copy_fd

    path = tmp_path / "growing"
    path.write_bytes(b"g" * MIB)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        _sparse_grow(path, 1 << 40)
        got = Exactly(f, size)
        read = b"".join(iter(lambda: got.read(64 * 1024), b""))
        assert read == b"g" * MIB
    out = tmp_path / "copy"
    with open(path, "rb") as f, open(out, "wb") as g:
        copy_fd(f.fileno(), g.fileno(), size)  # reflink or copy_file_range or read/write
    assert out.stat().st_size == MIB and out.read_bytes() == b"g" * MIB
    with open(path, "rb") as f:  # files.read: at most the quota + 1 MiB (+1 byte to see the growth)
        reader = CappedReader(f, 4 * MIB, "/home/user/growing")
        with pytest.raises(NotEnoughSpaceException, match=r"reading /home/user/growing refused: it grew past "
                                                          r"5242881 bytes.*disk quota of 4194304 bytes"):
            while reader.read(MIB):
                pass
        assert reader.count == 5 * MIB + 1
        with pytest.raises(NotEnoughSpaceException):
            CappedReader(f, 4 * MIB, "/home/user/growing").check(os.fstat(f.fileno()).st_size)


def _sparse_grow(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.seek(size - 1)
        f.write(b"x")
