"""Hostile volume archives: nothing lands outside the volume, links and devices are dropped (as
declaw drops them), bombs fail clearly and early, damaged archives are refused."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import time
from pathlib import Path

import pytest

from declaw_wasm.exceptions import InvalidArgumentException, NotEnoughSpaceException
from declaw_wasm.volumes import Volumes

from .conftest import host_tree, make_tar


def _member(name: str, kind: bytes, linkname: str = "", size: int = 0) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    info.size = size
    info.mode = 0o644
    return info


def _paths(volume_id: str) -> set[str]:
    data = Volumes.download(volume_id)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name for m in tar.getmembers()}


def test_escapes_links_and_devices_are_dropped(local_state: str, tmp_path: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    before = host_tree(tmp_path)
    archive = make_tar(
        {"ok.txt": b"fine", "../escape.txt": b"x", "/etc/abs.txt": b"x", "a/../../up.txt": b"x",
         "dir/./in.txt": b"kept, normalised"},
        extra=[_member("sym", tarfile.SYMTYPE, "/etc/passwd"),
               _member("rel-sym", tarfile.SYMTYPE, "../../.."),
               _member("hard", tarfile.LNKTYPE, "ok.txt"),
               _member("hard-out", tarfile.LNKTYPE, "/etc/passwd"),
               _member("dev", tarfile.CHRTYPE), _member("blk", tarfile.BLKTYPE),
               _member("fifo", tarfile.FIFOTYPE)])
    vol = Volumes.create("hostile", archive)
    assert _paths(vol.volume_id) == {"ok.txt", "dir", "dir/in.txt"}
    files = Volumes.files(vol.volume_id)
    assert files.read("/dir/in.txt") == b"kept, normalised"
    assert "dropped" in caplog.text
    # Nothing was written beside the store (escape.txt, up.txt...).
    after = host_tree(tmp_path)
    assert not any(p.endswith(("escape.txt", "up.txt", "abs.txt")) for p in after - before)


def test_member_names_too_long_are_dropped(local_state: str) -> None:
    archive = make_tar({"a" * 256: b"x", "/".join(["d"] * 300) + "/f": b"x", "ok": b"y"})
    assert _paths(Volumes.create("names", archive).volume_id) == {"ok"}


def test_file_and_folder_clashes(local_state: str) -> None:
    archive = make_tar({"a": b"file", "a/b": b"under a file", "c/": None})
    archive2 = make_tar({"c/": None, "c/d": b"x"})
    assert _paths(Volumes.create("clash", archive).volume_id) == {"a", "c"}
    assert _paths(Volumes.create("ok", archive2).volume_id) == {"c", "c/d"}


def test_tar_bomb_fails_clearly_and_early(local_state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """64 MiB of zeros (65 kB gzipped) against a 1 MiB quota: refused before reading any."""
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_BYTES", str(1 << 20))
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("zeros.bin")
        info.size = 64 << 20
        tar.addfile(info, _Zeros(64 << 20))
    bomb = raw.getvalue()
    assert len(bomb) < 2 << 20
    start = time.monotonic()
    with pytest.raises(NotEnoughSpaceException, match="quota"):
        Volumes.create("bomb", bomb)
    assert time.monotonic() - start < 2.0  # refused at the header, before reading content
    assert Volumes.list() == []


def test_many_members_and_upload_size(local_state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_FILES", "50")
    with pytest.raises(NotEnoughSpaceException, match="limit 50"):
        Volumes.create("many", make_tar({f"f{i}": b"" for i in range(51)}))
    # Dropped members count too: an endless stream of links cannot run forever.
    many_links = make_tar({}, extra=[_member(f"l{i}", tarfile.SYMTYPE, "x") for i in range(2000)])
    with pytest.raises(NotEnoughSpaceException, match="members"):
        Volumes.create("links", many_links)
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_UPLOAD", "1000")
    with pytest.raises(NotEnoughSpaceException, match="max_upload_bytes"):
        Volumes.create("upload", make_tar({"a": os.urandom(5000)}))


def test_huge_pax_header_is_refused_before_it_is_read(local_state: str) -> None:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("x")
        info.pax_headers = {"comment": "y" * (2 << 20)}
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(InvalidArgumentException, match="header"):
        Volumes.create("pax", gzip.compress(raw.getvalue()))


@pytest.mark.parametrize("data", [b"not a tar at all" * 100, gzip.compress(b"gzip of not a tar" * 100)])
def test_not_an_archive(local_state: str, data: bytes) -> None:
    with pytest.raises(InvalidArgumentException, match="tar"):
        Volumes.create("junk", data)


def test_truncated_archive(local_state: str) -> None:
    archive = make_tar({"a.bin": bytes(range(256)) * 400})
    with pytest.raises(InvalidArgumentException, match="damaged|truncated"):
        Volumes.create("cut", archive[: len(archive) // 2])
    assert Volumes.list() == []


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, b: "bytearray") -> int:  # type: ignore[override]
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n


def test_compressed_archives_are_read_by_the_body_codec_with_its_bounds(local_state: str) -> None:
    """A tar.gz or tar.zst is undone by the host's one body codec (the relay's): read whole, a
    zstd frame needing a window over 8 MiB refused before it is allocated, and anything but
    another gzip member after one refused rather than dropped."""
    from declaw_wasm._codings import zstd_module

    zstd = zstd_module()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        data = b"hello from a zstd archive\n"
        info = tarfile.TarInfo("z/hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    plain = raw.getvalue()
    vol = Volumes.create("zst", bytes(zstd.compress(plain)))
    assert "z/hello.txt" in _paths(vol.volume_id)
    wide = bytes(zstd.compress(plain + b"\0" * (9 << 20),
                               options={zstd.CompressionParameter.window_log: 24}))
    with pytest.raises(InvalidArgumentException, match="a window over 8 MiB"):
        Volumes.create("wide", wide)
    with pytest.raises(InvalidArgumentException, match="damaged|truncated"):
        Volumes.create("trailing", gzip.compress(plain) + b"not another member" + b"\0" * 1024)
