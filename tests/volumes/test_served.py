"""Volumes through `declaw-wasm serve`: declaw's own `Volumes` client (PyPI `declaw` 1.7.0,
unchanged) against our routes, and our `Volumes` in remote mode (`domain=`). The server runs in
a thread of this process over a fresh state store."""

from __future__ import annotations

import io
import os
import tarfile
import time
from pathlib import Path
from typing import Any, Iterator

import anyio
import httpx
import pytest

from declaw_wasm import (AsyncVolumes, ConflictException, InvalidArgumentException, NotFoundException, Sandbox,
                         Volumes)
from declaw_wasm.server import serve_in_thread

declaw = pytest.importorskip("declaw")  # the test extra installs it

KEY = "volumes-served-key"
UPLOAD = 1 << 20  # this server's upload limit


def _tar_gz(members: dict[str, bytes], links: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if links:
            for name, kind in (("evil-link", tarfile.SYMTYPE), ("hard", tarfile.LNKTYPE)):
                info = tarfile.TarInfo(name)
                info.type, info.linkname = kind, "/etc/passwd"
                tar.addfile(info)
            info = tarfile.TarInfo("../escape.txt")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    return buf.getvalue()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    before = os.environ.get("DECLAW_WASM_STATE")
    os.environ["DECLAW_WASM_STATE"] = str(tmp_path_factory.mktemp("served-state"))
    try:
        with serve_in_thread(KEY, max_upload=UPLOAD) as url:
            yield url
    finally:
        if before is None:
            os.environ.pop("DECLAW_WASM_STATE", None)
        else:
            os.environ["DECLAW_WASM_STATE"] = before


@pytest.fixture(scope="module")
def where(server: str) -> dict[str, str]:
    return {"api_key": KEY, "domain": server.split("//", 1)[1]}


def test_declaws_volumes_client_against_the_server(where: dict[str, str]) -> None:
    vol = declaw.Volumes.create("corpus", _tar_gz({"a/b.txt": b"hello", "c.txt": b"see"}, links=True), **where)
    assert (vol.name, vol.size_bytes, vol.backend) == ("corpus", 8, "files")
    assert declaw.Volumes.get(vol.volume_id, **where).volume_id == vol.volume_id
    empty = declaw.Volumes.create("blank", **where)
    ingested = declaw.Volumes.ingest("ingested", _tar_gz({"x": b"1"}), **where)
    also_empty = declaw.Volumes.empty("blank2", **where)
    listed = {v.volume_id for v in declaw.Volumes.list(**where)}
    assert {vol.volume_id, empty.volume_id, ingested.volume_id, also_empty.volume_id} <= listed
    names = tarfile.open(fileobj=io.BytesIO(declaw.Volumes.download(vol.volume_id, **where))).getnames()
    assert sorted(names) == ["a", "a/b.txt", "c.txt"]  # links and the climbing member dropped

    files = declaw.Volumes.files(vol.volume_id, **where)
    assert files.read("/a/b.txt") == b"hello" and [e.name for e in files.list("/")] == ["a", "c.txt"]
    assert files.exists("/c.txt") and not files.exists("/nope")
    version = files.info("/c.txt").version
    files.write("/c.txt", b"new", if_version=version)
    with pytest.raises(declaw.ConflictException):
        files.write("/c.txt", b"stale", if_version=version)
    files.write("/fresh.txt", iter([b"chunk1", b"chunk2"]), if_version="")
    assert files.read("/fresh.txt") == b"chunk1chunk2"
    assert files.mkdir("/d") == "/d"
    assert files.rename("/fresh.txt", "/d/f.txt") == {"old_path": "/fresh.txt", "new_path": "/d/f.txt"}
    files.remove("/d", recursive=True)
    assert not files.exists("/d/f.txt")
    with pytest.raises(declaw.NotFoundException):
        files.read("/d/f.txt")

    locks = declaw.Volumes.locks(vol.volume_id, **where)
    held = locks.acquire("/a", ttl_seconds=30)
    assert held["ttl_seconds"] == 30 and locks.status("/a")["held"]
    with pytest.raises(declaw.ConflictException):
        locks.acquire("/a")
    assert locks.renew("/a", held["token"], ttl_seconds=60)["ttl_seconds"] == 60
    with pytest.raises(declaw.ConflictException):
        locks.release("/a", "not-the-token")
    assert locks.release("/a", held["token"]) is True and not locks.status("/a")["held"]

    for volume in (vol, empty, ingested, also_empty):
        declaw.Volumes.delete(volume.volume_id, **where)
    with pytest.raises(declaw.NotFoundException):
        declaw.Volumes.get(vol.volume_id, **where)


def test_ids_are_checked_before_they_name_a_store_path(server: str, where: dict[str, str]) -> None:
    for bad in ("a.b", "-x", "vol_%2E%2E", "x" * 200):
        with pytest.raises(declaw.InvalidArgumentException, match="invalid volume id"):
            declaw.Volumes.get(bad, **where)
    with httpx.Client(base_url=server, headers={"X-API-Key": KEY}) as api:
        for path in ("/volumes/..%2F..%2Fetc/download", "/volumes/a%00b/files/raw?path=/x"):
            response = api.get(path)
            assert response.status_code in (400, 404), path
        # a path in the body is only bytes: it is not a tar, and nothing is read from the server's disk
        response = api.post("/volumes", params={"name": "p"}, content=b"/etc/passwd")
        assert response.status_code == 400 and "tar" in response.json()["message"]
        # paths inside a volume are checked too
        vol = api.post("/volumes/empty", params={"name": "q"}).json()
        response = api.put(f"/volumes/{vol['volume_id']}/files/raw", params={"path": "/../x"}, content=b"1")
        assert response.status_code == 400
        assert api.delete(f"/volumes/{vol['volume_id']}").status_code == 204


def test_uploads_are_bounded_by_the_servers_limit(where: dict[str, str]) -> None:
    big = _tar_gz({"big.bin": os.urandom(UPLOAD + 1024)})
    with pytest.raises(declaw.NotEnoughSpaceException):
        declaw.Volumes.create("too-big", big, **where)
    assert "too-big" not in {v.name for v in declaw.Volumes.list(**where)}


@pytest.mark.guest
def test_sandboxes_attach_snapshot_and_commit_through_the_server(where: dict[str, str]) -> None:
    vol = declaw.Volumes.create("shared", _tar_gz({"data/in.txt": b"input"}), **where)
    sbx = declaw.Sandbox.create(template="code-interpreter", volumes=[vol.attach("/work", mode="mount")], **where)
    ro = declaw.Sandbox.create(template="code-interpreter", volumes=[vol.attach("/ro", mode="mount-ro")], **where)
    try:
        assert sbx.commands.run("cat /work/data/in.txt").stdout == "input"
        sbx.commands.run("mkdir -p /work/out && echo result > /work/out/r.txt && echo tmp > /tmp/t.txt")
        assert ro.commands.run("echo no > /ro/x.txt").exit_code != 0
        committed = declaw.Volumes.commit(sbx.sandbox_id, vol.volume_id, **where)
        assert committed.name == "shared-commit"
        got = declaw.Volumes.files(committed.volume_id, **where)
        assert got.read("/out/r.txt") == b"result\n" and got.read("/data/in.txt") == b"input"
        snap = declaw.Volumes.snapshot(sbx.sandbox_id, "/tmp", "tmp-snap", **where)
        assert declaw.Volumes.files(snap.volume_id, **where).read("/t.txt") == b"tmp\n"
        with pytest.raises(declaw.InvalidArgumentException):
            declaw.Volumes.snapshot(sbx.sandbox_id, "/proc", **where)
        with pytest.raises(declaw.NotFoundException):
            declaw.Volumes.commit(ro.sandbox_id, committed.volume_id, **where)  # not attached there
    finally:
        sbx.kill()
        ro.kill()
    for volume in (vol, committed, snap):
        declaw.Volumes.delete(volume.volume_id, **where)


@pytest.mark.guest
def test_our_volumes_in_remote_mode(server: str, tmp_path: Path) -> None:
    folder = tmp_path / "src"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f.txt").write_text("from a folder")
    (folder / "link").symlink_to("/etc/passwd")
    where: dict[str, Any] = {"domain": server, "api_key": KEY}
    vol = Volumes.create("from-folder", folder, **where)  # packed here, uploaded as bytes
    try:
        files = Volumes.files(vol.volume_id, **where)
        assert files.read("/sub/f.txt") == b"from a folder" and not files.exists("/link")
        files.write("/n.txt", b"1")
        with pytest.raises(ConflictException):
            files.write("/n.txt", b"2", if_version="")
        with pytest.raises(InvalidArgumentException):
            Volumes.get("bad.id", **where)
        locks = Volumes.locks(vol.volume_id, **where)
        token = locks.acquire("/n.txt", ttl_seconds=1)["token"]
        time.sleep(2.2)  # expired (plus the store's grace)
        assert not locks.status("/n.txt")["held"] and locks.release("/n.txt", token) is False
        sbx = Sandbox.create(volumes=[vol.attach("/v", mode="copy")], **where)
        try:
            assert sbx.commands.run("cat /v/sub/f.txt").stdout == "from a folder"
        finally:
            sbx.kill()

        async def twin() -> Any:
            return await AsyncVolumes.files(vol.volume_id, **where).read("/n.txt")

        assert anyio.run(twin) == b"1"
        assert vol.volume_id in {v.volume_id for v in Volumes.list(**where)}
    finally:
        Volumes.delete(vol.volume_id, **where)
    with pytest.raises(NotFoundException):
        Volumes.get(vol.volume_id, **where)
