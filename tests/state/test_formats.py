"""The formats a snapshot is made of, read as hostile input: a guest image (_wasm/image.py) and a
file tree (a tar, _hostfs/trees.py). Every length, offset and member is checked; nothing writes
outside its folder; a decompression never makes more than it declared."""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
from pathlib import Path

import pytest

from declaw_wasm._hostfs.exports import ExportBudget
from declaw_wasm.exceptions import NotEnoughSpaceException
from declaw_wasm._hostfs import trees
from declaw_wasm._wasm import image as wimage
from tracing import traced

pytestmark = pytest.mark.traces_memory  # tracemalloc stays on after them (tracing.py)


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
    from declaw_wasm._hostfs.walk import usage

    _sparse(tmp_path / "hole", 512 * MIB, b"x")
    (tmp_path / "dense").write_bytes(b"y" * 10_000)
    used, entries = usage([tmp_path])
    assert entries == 2 and used >= 512 * MIB + 10_000  # not the one block it occupies
    assert (tmp_path / "hole").stat().st_blocks * 512 < MIB


@pytest.mark.heavy
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
    from declaw_wasm._hostfs.exports import Exactly
    from declaw_wasm._local.files import CappedReader
    from declaw_wasm._hostfs.copies import copy_fd

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


# -- names, headers and entries count too (docs/security.md, "Exports and the disk quota") ------------
NAME = "d" * 255


def _nest(top: Path, names: list[str]) -> int:
    """Folders `names` nested below `top`, made by descriptor (their host path may pass PATH_MAX,
    as a guest's folders renamed into folders do); an fd of the deepest (the caller closes it)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for name in names:
        os.mkdir(name, dir_fd=fd)
        nxt = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    return fd


def _files(fd: int, count: int, data: bytes = b"") -> None:
    for i in range(count):
        out = os.open(f"f{i:05d}", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, data)
        os.close(out)


class _Sink:
    """A write-only stream that keeps only its size."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        return len(data)


def test_a_tree_export_counts_names_and_headers_against_the_quota(tmp_path: Path) -> None:
    """300 empty files ~10 KB of path each (40 nested 255-byte folders: past the host's PATH_MAX)
    cost a quota nothing but an export ~3.3 MB of tar headers: a 2 MiB quota refuses the export
    naming the path, its length and the headers; an 8 MiB one carries it, and no more; reading
    it back counts the same headers; and the quota's own count (`usage`) sees a file down there."""
    from declaw_wasm._hostfs import PATH_MAX
    from declaw_wasm._hostfs.walk import usage

    src = tmp_path / "src"
    src.mkdir()
    fd = _nest(src, [NAME] * 40)
    try:
        _files(fd, 300)
        out = os.open("big", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(out, b"b" * MIB)
        os.close(out)
    finally:
        os.close(fd)
    assert len(str(src)) + 40 * 256 > PATH_MAX
    used, entries = usage([src])
    assert used >= MIB and entries == 40 + 301  # the quota counts what no path can reach
    with pytest.raises(NotEnoughSpaceException, match=r"test export refused: /home/user/d+\.\.\.d+/f\d{5} \(a path "
                                                      r"of 102\d\d bytes\) needs \d+ bytes of names and headers"
                                                      r".*disk quota of 2097152 bytes \+ 1 MiB"):
        trees.write_tar(src, _Sink(), _budget(2 * MIB), "/home/user")  # type: ignore[arg-type]
    written = io.BytesIO()
    trees.write_tar(src, written, _budget(8 * MIB), "/home/user")
    assert 4 * MIB < written.tell() <= 9 * MIB + tarfile.RECORDSIZE
    back = tmp_path / "back"
    back.mkdir()
    written.seek(0)
    with pytest.raises(NotEnoughSpaceException, match="needs \\d+ bytes of names and headers"):
        trees.read_tar(written, back, _budget(2 * MIB), "/home/user")
    again = tmp_path / "again"
    again.mkdir()
    written.seek(0)
    assert trees.read_tar(written, again, _budget(8 * MIB), "/home/user") == 40 + 301
    assert usage([again]) == (used, entries)


@pytest.mark.heavy
def test_a_tree_export_carries_at_most_the_quotas_file_count(tmp_path: Path) -> None:
    """Empty files cost the byte quota nothing; each counts as one entry against its file count
    (Limits.disk_files + 1024): write_tar, count_files (a fork's check), copy_tree and read_tar
    refuse a tree with more, naming the limit."""
    src = tmp_path / "src"
    src.mkdir()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    _files(fd, 1100)
    os.close(fd)
    refused = (r"test export refused: more than 1034 files and folders.*quota of 10 files and folders \+ 1024"
               r".*Limits.disk_files")
    with pytest.raises(NotEnoughSpaceException, match=refused):
        trees.write_tar(src, _Sink(), ExportBudget(1 << 30, "test export", files=10), "/home/user")  # type: ignore[arg-type]
    with pytest.raises(NotEnoughSpaceException, match=refused):
        trees.count_files([("/home/user", src)], ExportBudget(1 << 30, "test export", files=10))
    copied = tmp_path / "copy"
    copied.mkdir()
    with pytest.raises(NotEnoughSpaceException, match=refused):
        trees.copy_tree(src, copied, ExportBudget(1 << 30, "test export", files=10), "/home/user")
    assert len(os.listdir(copied)) == 1034
    written = io.BytesIO()
    trees.write_tar(src, written, _budget(), "/home/user")
    written.seek(0)
    back = tmp_path / "back"
    back.mkdir()
    with pytest.raises(NotEnoughSpaceException, match=refused):
        trees.read_tar(written, back, ExportBudget(1 << 30, "test export", files=10), "/home/user")


@pytest.mark.heavy
def test_a_tree_no_restore_could_read_is_refused_as_it_is_written(tmp_path: Path) -> None:
    """A restore reads at most `MAX_DEPTH` levels: a deeper tree (a guest can nest folders as
    deep as its file count allows) fails its snapshot, naming the path, rather than being
    stored as one that cannot be restored."""
    from declaw_wasm.exceptions import SnapshotException

    from declaw_wasm._hostfs.walk import remove_tree

    src = tmp_path / "src"
    src.mkdir()
    os.close(_nest(src, ["d"] * (trees.MAX_DEPTH + 1)))
    try:
        with pytest.raises(SnapshotException, match=rf"test export refused: .* is {trees.MAX_DEPTH + 1} folders deep"
                                                    rf".*at most {trees.MAX_DEPTH} levels"):
            trees.write_tar(src, _Sink(), _budget(), "/home/user")  # type: ignore[arg-type]
    finally:
        top = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            remove_tree(top, "src")  # (pytest's own clean-up recurses once per level)
        finally:
            os.close(top)


def test_reading_a_tree_back_bounds_its_extended_headers(tmp_path: Path) -> None:
    """A tree from the store is hostile input: a pax header larger than any path a tree carries
    (here a 3 MiB name) is refused before tarfile reads it into memory."""
    top = tmp_path / "top"
    top.mkdir()
    with pytest.raises(trees.TreeError, match="header of \\d+ bytes"):
        trees.read_tar(_tar([_member("x" * (3 * MIB), data=b"x")]), top, _budget(), "/home/user")
    assert os.listdir(top) == []


@pytest.mark.heavy
def test_writing_a_tree_holds_no_name_once_written(tmp_path: Path) -> None:
    """3000 files with ~3.6 KB paths (10 MB of names): the export's memory stays far below that
    (tarfile's TarFile would keep every member it wrote, names and all)."""
    src = tmp_path / "src"
    src.mkdir()
    fd = _nest(src, [NAME] * 14)
    try:
        _files(fd, 3000)
    finally:
        os.close(fd)
    warm = tmp_path / "warm"  # what the first export imports is not the export's
    warm.mkdir()
    trees.write_tar(warm, _Sink(), _budget(), "/home/user")  # type: ignore[arg-type]
    with traced() as traced_peak:
        count, _ = trees.write_tar(src, _Sink(), _budget(), "/home/user")  # type: ignore[arg-type]
        peak = traced_peak.now()
    assert count == 3014 and peak < 4 * MIB, peak  # (a 256 KiB write buffer, a folder's entries)
