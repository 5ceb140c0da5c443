"""What `pip install` writes into a sandbox is counted as the disk quota counts it, and a
find-links folder is looked at with bounded host memory: the confined files API's `write_trees`,
`room` and `entries` (declaw_wasm/_local/files.py), on a sandbox's file tree without a guest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import Limits
from declaw_wasm._hostfs.walk import usage
from declaw_wasm._local.files import SandboxFS
from declaw_wasm.exceptions import InvalidArgumentException, NotEnoughSpaceException
from declaw_wasm.models import FileType
from tracing import traced

pytestmark = pytest.mark.traces_memory  # tracemalloc stays on after them (tracing.py)

MIB = 1 << 20


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[SandboxFS]:
    (tmp_path / "skeleton").mkdir()
    tree = SandboxFS([], tmp_path / "skeleton", limits=Limits(disk_bytes=4 * MIB, disk_files=5000))
    try:
        yield tree
    finally:
        tree.destroy()


def tiny_files(folder: Path, count: int, text: str = "x") -> Path:
    """`count` one-byte modules in a package folder: `count` bytes, `count` blocks."""
    (folder / "tiny").mkdir(parents=True)
    for i in range(count):
        (folder / "tiny" / f"m{i:05d}.py").write_text(text)
    return folder


def used(fs: SandboxFS) -> tuple[int, int]:
    return usage(fs.writable_folders())


@pytest.mark.heavy
def test_an_installed_tree_is_written_within_the_disk_quota_as_it_counts(fs: SandboxFS, tmp_path: Path) -> None:
    """The quota counts each file's blocks: 2 000 one-byte modules are 2 KB of content but ~8 MiB
    of a 4 MiB quota. Refused whole before anything is written (not written, then the guest killed
    by the quota watcher); what fits is written and counted the same way."""
    before = used(fs)
    site = "/home/user/.local/lib/python3.15/site-packages"
    with pytest.raises(NotEnoughSpaceException, match="disk quota exceeded"):
        fs.write_trees([(tiny_files(tmp_path / "big", 2000), site)])
    assert used(fs) == before and not fs.exists("/home/user/.local")
    with pytest.raises(NotEnoughSpaceException, match="files, limit 5000"):
        fs.write_trees([(tiny_files(tmp_path / "many", 5000, text=""), "/tmp/many")])
    assert used(fs) == before
    trees = [(tiny_files(tmp_path / "fits", 200), site), (tiny_files(tmp_path / "bin", 2), "/tmp/b")]
    assert fs.write_trees(trees) == 202
    after = used(fs)
    assert after[0] - before[0] >= 202 * 4096 and after[0] <= 4 * MIB
    assert fs.read_bytes(f"{site}/tiny/m00199.py") == b"x"


def test_an_install_the_estimate_let_through_is_stopped_at_the_quota(fs: SandboxFS, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What is written is counted as it is written: should the estimate fall short (here: a
    file system whose blocks it takes for one byte), the write stops at the quota and what it
    created is removed, files and folders."""
    monkeypatch.setattr(SandboxFS, "_block_size", lambda self, dest: 1)
    fs.write("/home/user/keep/old.py", "kept")
    before = used(fs)
    with pytest.raises(NotEnoughSpaceException, match="disk quota exceeded"):
        fs.write_trees([(tiny_files(tmp_path / "big", 2000), "/home/user/keep")])
    assert used(fs) == before
    assert [name for name, _ in fs.entries("/home/user/keep", 10)] == ["old.py"]


@pytest.mark.heavy
def test_a_folder_is_looked_at_entry_by_entry_up_to_a_bound(fs: SandboxFS) -> None:
    """`entries` yields names and types as the folder gives them and refuses one past its
    bound: a folder of 20 000 files with 250-byte names costs the host about the bound's worth
    of names, never a listing of all (an EntryInfo and a full path each)."""
    folder = fs.host_path("/tmp/wide")
    assert folder is not None
    folder.mkdir()
    for i in range(20_000):
        (folder / ("f" * 245 + f"{i:05d}")).touch()
    (folder / "sub.whl").mkdir()
    os.symlink("elsewhere", folder / "link.whl")
    with traced() as peak:
        with pytest.raises(InvalidArgumentException, match="/tmp/wide: more than 1000 entries"):
            fs.entries("/tmp/wide", 1000)
        assert peak.now() < 2 * MIB
    got = dict(fs.entries("/tmp/wide", 20_002))
    assert len(got) == 20_002 and got["sub.whl"] == FileType.DIR and got["link.whl"] == FileType.SYMLINK
    assert got["f" * 245 + "00000"] == FileType.FILE


def test_the_room_left_is_what_the_quota_counts(fs: SandboxFS) -> None:
    bytes_left, files_left = fs.room() or (0, 0)
    fs.write("/tmp/one", b"x")
    after = fs.room()
    assert after is not None and after[1] == files_left - 1 and bytes_left - after[0] >= 1
