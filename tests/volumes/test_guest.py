"""Volumes as guests see them, on the real runtime: `Sandbox.create(volumes=[...])`, each mode,
writes refused on mount-ro, a mount shared between two sandboxes and written back, snapshot
and commit of sandbox folders, and attachments that must be refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from declaw_wasm import Sandbox
from declaw_wasm.exceptions import (
    InvalidArgumentException,
    NotFoundException,
    SandboxException,
)
from declaw_wasm.volumes import VolumeAttachment, Volumes, sync_volume

from .conftest import make_tar

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

CORPUS = {"x": b"hello corpus\n", "docs/readme.md": b"# readme\n", "docs/data.csv": b"a,b\n1,2\n"}


@pytest.fixture
def corpus(local_state: str) -> str:
    return Volumes.create("corpus", make_tar(CORPUS)).volume_id


def test_copy_and_mount_ro(corpus: str) -> None:
    a = Sandbox.create(volumes=[VolumeAttachment(corpus, "/corpus", mode="copy"),
                                VolumeAttachment(corpus, "/ro", mode="mount-ro"),
                                {"volume_id": corpus, "mount_path": "/home/user/data"}])
    b = Sandbox.create(volumes=[VolumeAttachment(corpus, "/corpus")])
    try:
        r = a.commands.run("cat /corpus/x /ro/x /home/user/data/docs/readme.md; ls /")
        assert r.stdout.split("\n")[:3] == ["hello corpus", "hello corpus", "# readme"]
        assert {"corpus", "ro"} <= set(r.stdout.split())
        # mount-ro: the guest cannot write through it, by shell or by Python, nor can the host API.
        r = a.commands.run("echo nope > /ro/new; echo rc=$?; rm /ro/x; mv /ro/x /ro/y; ls /ro")
        assert "rc=1" in r.stdout and "Read-only file system" in r.stderr
        assert r.stdout.split()[-2:] == ["docs", "x"]
        r = a.commands.run("python3 -c \"open('/ro/x', 'a').write('bad')\"")
        assert r.exit_code == 1 and "PermissionError" in r.stderr
        with pytest.raises(SandboxException, match="read-only"):
            a.files.write("/ro/x", "bad")
        # copy: private and writable, in both sandboxes.
        a.commands.run("echo changed > /corpus/x && echo mine > /home/user/data/x")
        assert a.files.read("/corpus/x") == "changed\n"
        assert b.commands.run("cat /corpus/x").stdout == "hello corpus\n"
        assert a.commands.run("cat /ro/x").stdout == "hello corpus\n"
    finally:
        a.kill()
        b.kill()
    assert Volumes.files(corpus).read("/x") == b"hello corpus\n"  # copies never reach the store


def test_mount_is_shared_and_written_back(corpus: str) -> None:
    att = VolumeAttachment(corpus, "/shared", mode="mount")
    a = Sandbox.create(volumes=[att])
    b = Sandbox.create(volumes=[att, VolumeAttachment(corpus, "/view", mode="mount-ro")])
    try:
        a.commands.run("echo from-a > /shared/new.txt && rm /shared/docs/data.csv")
        assert b.commands.run("cat /shared/new.txt /view/new.txt").stdout == "from-a\nfrom-a\n"
        assert b.commands.run("ls /shared/docs").stdout.split() == ["readme.md"]
        b.files.write("/shared/docs/from-b.txt", "via the files API")
        assert a.commands.run("cat /shared/docs/from-b.txt").stdout == "via the files API"
        assert sync_volume(corpus)  # written back now, not only at kill
        assert Volumes.files(corpus).read("/new.txt") == b"from-a\n"
        # A change made through the store reaches the live folder at the next sync point.
        Volumes.files(corpus).write("/store-side.txt", b"from the store")
        sync_volume(corpus)
        assert a.commands.run("cat /shared/store-side.txt").stdout == "from the store"
        a.commands.run("echo late > /shared/late.txt")
    finally:
        a.kill()
        b.kill()
    files = Volumes.files(corpus)
    assert files.read("/late.txt") == b"late\n"
    assert not files.exists("/docs/data.csv")
    assert sorted(e.name for e in files.list("/docs")) == ["from-b.txt", "readme.md"]
    c = Sandbox.create(volumes=[VolumeAttachment(corpus, "/again", mode="mount-ro")])
    try:
        assert c.commands.run("cat /again/late.txt").stdout == "late\n"
    finally:
        c.kill()


def test_mount_write_back_skips_what_guests_must_not_store(corpus: str, tmp_path: Path) -> None:
    sbx = Sandbox.create(volumes=[VolumeAttachment(corpus, "/shared", mode="mount")])
    try:
        r = sbx.commands.run("python3 -c \"import os; os.symlink('x', '/shared/link'); "
                             "os.symlink('../../../../..', '/shared/up')\"")
        assert r.exit_code == 0, r.stderr
    finally:
        sbx.kill()
    files = Volumes.files(corpus)
    assert not files.exists("/link") and not files.exists("/up")
    assert files.read("/x") == b"hello corpus\n"


def test_subpath_mounts(corpus: str) -> None:
    sbx = Sandbox.create(volumes=[VolumeAttachment(corpus, "/docs", mode="mount-ro", subpath="docs"),
                                  VolumeAttachment(corpus, "/work", mode="mount", subpath="docs")])
    try:
        assert sbx.commands.run("ls /docs").stdout.split() == ["data.csv", "readme.md"]
        sbx.commands.run("echo w > /work/written.txt")
    finally:
        sbx.kill()
    assert Volumes.files(corpus).read("/docs/written.txt") == b"w\n"


def test_snapshot_and_commit(corpus: str) -> None:
    sbx = Sandbox.create(volumes=[VolumeAttachment(corpus, "/data", mode="copy")])
    try:
        sbx.commands.run("mkdir -p /home/user/out/sub && echo 1 > /home/user/out/a && "
                         "echo 2 > /home/user/out/sub/b && echo edited > /data/x && "
                         "ln -s /etc/passwd /home/user/out/link")
        snap = Volumes.snapshot(sbx.sandbox_id, "/home/user/out", name="results")
        files = Volumes.files(snap.volume_id)
        assert snap.name == "results" and files.read("/sub/b") == b"2\n"
        assert sorted(e.name for e in files.list()) == ["a", "sub"]  # the link is dropped
        committed = Volumes.commit(sbx.sandbox_id, corpus)
        assert committed.name == "corpus-commit"
        assert Volumes.files(committed.volume_id).read("/x") == b"edited\n"
        assert Volumes.files(corpus).read("/x") == b"hello corpus\n"
        for bad in ("/proc", "/dev/null", "relative"):
            with pytest.raises(InvalidArgumentException):
                Volumes.snapshot(sbx.sandbox_id, bad)
        with pytest.raises(NotFoundException):
            Volumes.commit(sbx.sandbox_id, snap.volume_id)  # not attached to it
    finally:
        sbx.kill()
    with pytest.raises(NotFoundException):
        Volumes.snapshot(sbx.sandbox_id, "/home/user")


@pytest.mark.parametrize("attachment, error", [
    ({"mount_path": "/usr/local/lib/x"}, InvalidArgumentException),
    ({"mount_path": "relative"}, InvalidArgumentException),
    ({"mount_path": "/a/../b"}, InvalidArgumentException),
    ({"mount_path": "/"}, InvalidArgumentException),
    ({"mount_path": "/home/user", "mode": "mount"}, InvalidArgumentException),
    ({"mount_path": "/d", "subpath": "docs"}, InvalidArgumentException),
    ({"mount_path": "/d", "mode": "mount-ro", "subpath": "../up"}, InvalidArgumentException),
    ({"mount_path": "/d", "mode": "mount-ro", "subpath": "nope"}, NotFoundException),
    ({"mount_path": "/d", "volume_id": "vol_" + "0" * 32}, NotFoundException),
    ({"mount_path": "/d", "volume_id": "../../etc"}, InvalidArgumentException),
    ({"mount_path": "/d", "mode": "rw"}, InvalidArgumentException),
])
def test_bad_attachments_are_refused(corpus: str, attachment: dict[str, str], error: type) -> None:
    live = len(Sandbox.list().next_items())
    leftovers = set(os.listdir(os.environ.get("TMPDIR", "/tmp")))
    with pytest.raises(error):
        Sandbox.create(volumes=[{"volume_id": corpus, **attachment}])
    assert len(Sandbox.list().next_items()) == live
    new = set(os.listdir(os.environ.get("TMPDIR", "/tmp"))) - leftovers
    # this process's folders only: another test worker's (a pool's, Ray's) come and go meanwhile
    assert not [n for n in new if n.startswith(f"declaw-wasm-sbx-p{os.getpid()}.")]


def test_overlapping_attachments_are_refused(corpus: str) -> None:
    with pytest.raises(InvalidArgumentException, match="overlap"):
        Sandbox.create(volumes=[VolumeAttachment(corpus, "/data"), VolumeAttachment(corpus, "/data/sub")])


def test_a_copy_counts_toward_the_disk_quota(local_state: str) -> None:
    from declaw_wasm import Limits
    from declaw_wasm.exceptions import NotEnoughSpaceException

    big = Volumes.create("big", make_tar({"blob.bin": os.urandom(300_000)})).volume_id
    with pytest.raises(NotEnoughSpaceException, match="disk_bytes"):
        Sandbox.create(limits=Limits(disk_bytes=200_000), volumes=[VolumeAttachment(big, "/data")])
    sbx = Sandbox.create(limits=Limits(disk_bytes=200_000),
                         volumes=[VolumeAttachment(big, "/data", mode="mount-ro")])  # not a copy
    try:
        r = sbx.commands.run("python3 -c \"import os; print(os.path.getsize('/data/blob.bin'))\"")
        assert r.stdout.strip() == "300000"
    finally:
        sbx.kill()


def test_mount_past_the_volume_quota_is_not_written_back(local_state: str, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("DECLAW_WASM_VOLUME_MAX_BYTES", "1000")
    small = Volumes.create("small", make_tar({"a.txt": b"a"})).volume_id
    sbx = Sandbox.create(volumes=[VolumeAttachment(small, "/shared", mode="mount")])
    sbx.commands.run("python3 -c \"open('/shared/big.bin', 'wb').write(b'x' * 5000)\"")
    assert sbx.kill()  # never raises: the failure is logged
    assert "not written back" in caplog.text and "quota" in caplog.text
    assert not Volumes.files(small).exists("/big.bin")
