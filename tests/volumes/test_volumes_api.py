"""declaw's Volumes API on a local folder and on memory://: create/get/list/download/delete,
tar.gz round trips, VolumeFiles with compare-and-set versions, VolumeLocks, quotas, the async
twin."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path

import anyio
import pytest

from declaw_wasm._state import IntegrityError, StateStore
from declaw_wasm.exceptions import (
    ConflictException,
    FileNotFoundException,
    InvalidArgumentException,
    NotEnoughSpaceException,
    NotFoundException,
    VersionMismatchException,
)
from declaw_wasm.volumes import (
    AsyncVolumes,
    FileEntry,
    Volume,
    VolumeAttachment,
    Volumes,
)

from .conftest import TarWriteMode, make_tar, tar_names

CORPUS = {"docs/": None, "docs/a.txt": b"alpha\n", "docs/deep/b.bin": bytes(range(256)) * 40,
          "empty.txt": b"", "top.md": "héllo wörld\n".encode()}


def test_create_get_list_download_delete(state_url: str) -> None:
    vol = Volumes.create("corpus", make_tar(CORPUS))
    assert isinstance(vol, Volume) and vol.volume_id.startswith("vol_")
    assert vol.name == "corpus" and vol.size_bytes == sum(len(d) for d in CORPUS.values() if d)
    assert vol.backend == "files" and vol.quota_bytes > 0 and vol.content_type == "application/gzip"
    assert Volumes.get(vol.volume_id) == vol
    other = Volumes.empty("scratch")
    assert [v.volume_id for v in Volumes.list()] == [vol.volume_id, other.volume_id]
    names = tar_names(Volumes.download(vol.volume_id))
    assert {k: v for k, v in names.items() if v is not None} == {k: v for k, v in CORPUS.items() if v is not None}
    assert {"docs", "docs/deep"} <= set(names)
    Volumes.delete(vol.volume_id)
    with pytest.raises(NotFoundException):
        Volumes.get(vol.volume_id)
    with pytest.raises(NotFoundException):
        Volumes.delete(vol.volume_id)
    assert [v.volume_id for v in Volumes.list()] == [other.volume_id]


def test_round_trip_through_download(state_url: str) -> None:
    """download() of a volume made from download() holds the same files, modes and mtimes."""
    first = Volumes.create("one", make_tar(CORPUS))
    again = Volumes.create("two", Volumes.download(first.volume_id))
    def describe(volume_id: str) -> list[tuple[str, bytes, int, int, float]]:
        with tarfile.open(fileobj=io.BytesIO(Volumes.download(volume_id))) as tar:
            return sorted((m.name, m.type, m.size, m.mode, m.mtime) for m in tar.getmembers())

    assert describe(first.volume_id) == describe(again.volume_id)
    assert Volumes.download(first.volume_id) == Volumes.download(again.volume_id)  # deterministic


def test_create_from_path_file_object_and_iterable(state_url: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "x.csv").write_text("a,b\n1,2\n")
    (src / "top.txt").write_text("top")
    os.symlink("/etc/passwd", src / "link")  # dropped, never followed
    os.mkfifo(src / "fifo")
    from_dir = Volumes.create("from-dir", src)
    files = Volumes.files(from_dir.volume_id)
    assert sorted(e.path for e in files.list("/")) == ["/sub", "/top.txt"]
    assert files.read("/sub/x.csv") == b"a,b\n1,2\n"
    from_file = Volumes.create("from-file", str(src / "top.txt"))
    assert [e.name for e in Volumes.files(from_file.volume_id).list()] == ["top.txt"]
    data = make_tar({"f.txt": b"streamed"})
    from_fileobj = Volumes.create("fileobj", io.BytesIO(data))
    from_chunks = Volumes.ingest("chunks", (data[i:i + 7] for i in range(0, len(data), 7)))
    for vol in (from_fileobj, from_chunks):
        assert Volumes.files(vol.volume_id).read("f.txt") == b"streamed"
    assert Volumes.create("empty", b"").size_bytes == 0
    with pytest.raises(FileNotFoundError):
        Volumes.create("missing", tmp_path / "nope")


def test_volume_files_read_write_list_info(state_url: str) -> None:
    vol = Volumes.create("c", make_tar(CORPUS))
    files = Volumes.files(vol.volume_id)
    assert files.write("/notes/today.txt", b"v1") == "/notes/today.txt"
    assert files.read("notes/today.txt") == b"v1"
    info = files.info("/notes/today.txt")
    assert isinstance(info, FileEntry) and not info.is_dir and info.size == 2 and info.version
    assert files.list("/notes") == [FileEntry(name="today.txt", path="/notes/today.txt", is_dir=False,
                                              size=2, mod_time=info.mod_time, mode=0o644)]
    assert files.info("/docs").is_dir and files.exists("/docs/deep/b.bin") and not files.exists("/nope")
    assert files.mkdir("/made/here") == "/made/here" and files.info("/made").is_dir
    assert files.rename("/docs", "/moved") == {"old_path": "/docs", "new_path": "/moved"}
    assert files.read("/moved/deep/b.bin") == CORPUS["docs/deep/b.bin"]
    with pytest.raises(InvalidArgumentException, match="not empty"):
        files.remove("/moved")
    files.remove("/moved", recursive=True)
    assert not files.exists("/moved/a.txt")
    with pytest.raises(FileNotFoundException):
        files.read("/moved/a.txt")
    with pytest.raises(InvalidArgumentException, match="is a directory"):
        files.read("/made")
    with pytest.raises(InvalidArgumentException, match="is a file"):
        files.write("/top.md/inside", b"x")
    top = CORPUS["top.md"]
    assert top is not None and Volumes.get(vol.volume_id).size_bytes == len(top) + 2 + 0


def test_compare_and_set_versions(state_url: str) -> None:
    vol = Volumes.empty("cas")
    files = Volumes.files(vol.volume_id)
    files.write("/counter", b"0", if_version="")  # "": only if it does not exist yet
    with pytest.raises(ConflictException, match="changed"):
        files.write("/counter", b"0", if_version="")
    seen = files.info("/counter").version
    files.write("/counter", b"1", if_version=seen)
    with pytest.raises(VersionMismatchException):  # declaw's alias of ConflictException
        files.write("/counter", b"stale", if_version=seen)
    assert files.read("/counter") == b"1"
    files.write("/counter", b"2")  # unconditional
    assert files.info("/counter").version not in (seen, "")


@pytest.mark.heavy
def test_locks_tokens_and_expiry(state_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_LEASE_GRACE", "0.1")
    vol = Volumes.empty("locked")
    locks = Volumes.locks(vol.volume_id)
    got = locks.acquire("/data.csv", ttl_seconds=1)
    assert set(got) == {"token", "ttl_seconds", "expires_at"} and got["ttl_seconds"] == 1
    with pytest.raises(ConflictException, match="held"):
        locks.acquire("/data.csv")
    assert locks.status("/data.csv")["held"] and 0 < locks.status("/data.csv")["expires_in_ms"] <= 1000
    assert locks.acquire("/other.csv")["token"] != got["token"]  # locks are per path
    with pytest.raises(ConflictException):
        locks.release("/data.csv", "forged-token")
    with pytest.raises(ConflictException):
        locks.renew("/data.csv", "forged-token")
    renewed = locks.renew("/data.csv", got["token"], ttl_seconds=1)
    assert renewed["token"] == got["token"]
    time.sleep(1.3)
    assert locks.status("/data.csv") == {"held": False, "expires_in_ms": 0}
    with pytest.raises(ConflictException, match="expired"):
        locks.renew("/data.csv", got["token"])
    assert locks.release("/data.csv", got["token"]) is False  # it had lapsed
    second = locks.acquire("/data.csv", ttl_seconds=30)
    assert locks.release("/data.csv", second["token"]) is True
    with pytest.raises(NotFoundException):
        Volumes.locks("vol_" + "0" * 32).acquire("/x")
    with pytest.raises(InvalidArgumentException):
        locks.acquire("/x", ttl_seconds=0)


def test_quotas(state_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_BYTES", "1000")
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_FILES", "5")
    with pytest.raises(NotEnoughSpaceException, match="1000"):
        Volumes.create("big", make_tar({"a": b"x" * 1001}))
    with pytest.raises(NotEnoughSpaceException, match="files and folders, limit 5"):
        Volumes.create("many", make_tar({f"f{i}": b"" for i in range(6)}))
    vol = Volumes.create("ok", make_tar({"a": b"x" * 600}))
    assert vol.quota_bytes == 1000
    files = Volumes.files(vol.volume_id)
    with pytest.raises(NotEnoughSpaceException, match="quota"):
        files.write("/b", b"y" * 500)
    files.write("/a", b"y" * 900)  # replacing counts the new size only
    for i in range(4):
        files.write(f"/n{i}", b"")  # 5 entries: the limit
    with pytest.raises(NotEnoughSpaceException, match="limit 5"):
        files.mkdir("/one-too-many")
    assert Volumes.get(vol.volume_id).size_bytes == 900


@pytest.mark.parametrize("bad", ["../escape", "vol_x/../../etc", "a/b", "", "x" * 200, "vol_x\x00"])
def test_volume_ids_are_validated(state_url: str, bad: str) -> None:
    with pytest.raises(InvalidArgumentException):
        Volumes.get(bad)
    with pytest.raises(InvalidArgumentException):
        Volumes.files(bad).read("/x")


@pytest.mark.parametrize("bad", ["/../x", "a/../../b", "a\x00b", "\udcff"])
def test_volume_paths_are_validated(state_url: str, bad: str) -> None:
    vol = Volumes.empty("paths")
    with pytest.raises(InvalidArgumentException):
        Volumes.files(vol.volume_id).write(bad, b"x")


def test_names_validated(state_url: str) -> None:
    for bad in ["", "x" * 256, "a\nb", 3]:
        with pytest.raises(InvalidArgumentException):
            Volumes.empty(bad)  # type: ignore[arg-type]


def test_tampered_volume_content_is_detected(local_state: str) -> None:
    vol = Volumes.create("t", make_tar({"a.txt": b"genuine bytes"}))
    store = StateStore(local_state)
    blobs = list(Path(store.root, "volumes", vol.volume_id, "blobs").rglob("*"))
    pack = next(p for p in blobs if p.is_file() and b"genuine" in p.read_bytes())
    pack.write_bytes(pack.read_bytes().replace(b"genuine", b"GENUINE"))
    with pytest.raises(IntegrityError):
        Volumes.files(vol.volume_id).read("/a.txt")
    with pytest.raises(IntegrityError):
        Volumes.download(vol.volume_id)


def test_attachment_models() -> None:
    att = VolumeAttachment("vol_1", "/corpus", mode="copy")
    assert att.to_dict() == {"volume_id": "vol_1", "mount_path": "/corpus"}
    assert VolumeAttachment("vol_1", "/d", mode="mount-ro", subpath="x").to_dict() == {
        "volume_id": "vol_1", "mount_path": "/d", "mode": "mount-ro", "subpath": "x"}
    with pytest.raises(ValueError):
        VolumeAttachment("vol_1", "/d", mode="rw")  # type: ignore[arg-type]
    vol = Volume.from_dict({"volume_id": "vol_1", "name": "n"})
    assert vol.attach("/data", mode="mount") == VolumeAttachment("vol_1", "/data", mode="mount")


def test_async_volumes(state_url: str) -> None:
    async def main() -> None:
        vol = await AsyncVolumes.create("async", make_tar({"a.txt": b"A"}))
        files = AsyncVolumes.files(vol.volume_id)
        await files.write("/b.txt", b"B")
        assert await files.read("/b.txt") == b"B"
        assert sorted(e.name for e in await files.list()) == ["a.txt", "b.txt"]
        lock = await AsyncVolumes.locks(vol.volume_id).acquire("/a.txt")
        assert await AsyncVolumes.locks(vol.volume_id).release("/a.txt", lock["token"])
        assert [v.volume_id for v in await AsyncVolumes.list()] == [vol.volume_id]
        assert "a.txt" in tar_names(await AsyncVolumes.download(vol.volume_id))
        await AsyncVolumes.delete(vol.volume_id)

    anyio.run(main)


@pytest.mark.parametrize("mode", ["w", "w:bz2", "w:xz"])
def test_other_archive_formats(state_url: str, mode: TarWriteMode) -> None:
    """declaw takes tar.gz; plain tar, bzip2 and xz are read too (same rules)."""
    vol = Volumes.create("fmt", make_tar({"a/b.txt": b"bee"}, mode=mode))
    assert Volumes.files(vol.volume_id).read("/a/b.txt") == b"bee"


def test_volumes_on_s3(s3_options: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> None:
    """The same API with DECLAW_WASM_STATE=s3://... (moto's server; fsspec's config for s3)."""
    import uuid

    import fsspec.config

    monkeypatch.setitem(fsspec.config.conf, "s3", dict(s3_options))
    monkeypatch.setenv("DECLAW_WASM_STATE", f"s3://declaw-state/api-{uuid.uuid4().hex}")
    vol = Volumes.create("on-s3", make_tar(CORPUS))
    files = Volumes.files(vol.volume_id)
    assert files.read("/docs/deep/b.bin") == CORPUS["docs/deep/b.bin"]
    version = files.info("/top.md").version
    files.write("/top.md", b"new", if_version=version)
    with pytest.raises(ConflictException):
        files.write("/top.md", b"stale", if_version=version)
    lock = Volumes.locks(vol.volume_id).acquire("/top.md")
    with pytest.raises(ConflictException):
        Volumes.locks(vol.volume_id).acquire("/top.md")
    assert Volumes.locks(vol.volume_id).release("/top.md", lock["token"])
    assert tar_names(Volumes.download(vol.volume_id))["top.md"] == b"new"
    assert [v.volume_id for v in Volumes.list()] == [vol.volume_id]
    Volumes.delete(vol.volume_id)
    assert Volumes.list() == []
