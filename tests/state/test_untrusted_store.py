"""Whoever can write the state store (a shared folder, an `s3://` bucket) but lacks the state key,
seen through sandboxes on every backend (in-process, through `declaw-wasm serve`, in a process
pool, on Ray): a paused sandbox's create request rewritten to widen its network policy, a record
moved from another sandbox, a rewritten lease, a rewritten or moved volume record are refused on
resume and attach with a clear error, and nothing of them is used (the widened policy never takes
effect); records of before signing are refused naming `declaw-wasm state resign`, and resume
once it re-signed the store; pool workers take the key only from the calls that need it.
(The store-level properties: test_signed_records.py; Ray's twin of the pool's: tests/test_ray.py.)"""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any, Callable

import pytest

from declaw_wasm import Sandbox, SandboxException, SandboxState
from declaw_wasm._state import StateStore, keys
from declaw_wasm.volumes import VolumeAttachment, Volumes

from .records import body_of, forged, parts, unsigned

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
POLICY = {"allow_out": ["example.com"]}
WIDE = {"allow_out": ["0.0.0.0/0"]}


def folder_of(sandbox: Sandbox) -> Path:
    """The sandbox's folder in the store every backend of the test run shares (a Ray sandbox's
    id names its host after a dot; the store knows the host's id)."""
    return Path(os.environ["DECLAW_WASM_STATE"]) / "sandboxes" / sandbox.sandbox_id.split(".")[0]


def pause_manifest(sandbox: Sandbox) -> Path:
    folder = folder_of(sandbox)
    return folder / "snapshots" / body_of(folder / "state.json")["snapshot_id"] / "manifest.json"


def widened(body: dict[str, Any]) -> dict[str, Any]:
    request = {**body["sandbox"]["request"], "network": WIDE, "allow_internet_access": True}
    return {**body, "sandbox": {**body["sandbox"], "request": request}}


def top_lease(sandbox: Sandbox) -> Path:
    return sorted((folder_of(sandbox) / "lease").glob("g*.json"))[-1]


@pytest.mark.served
def test_a_paused_sandboxs_records_rewritten_without_the_key_are_refused_on_resume(
        make: Callable[..., Sandbox]) -> None:
    sbx = make(timeout=300, network=POLICY)
    other = make(timeout=300)
    try:
        sbx.run_code("x = 7")
        assert sbx.pause() is True and other.pause() is True
        manifest, state, lease = pause_manifest(sbx), folder_of(sbx) / "state.json", top_lease(sbx)
        genuine = {path: path.read_bytes() for path in (manifest, state, lease)}
        attacks = [  # the lease first: each refused resume after it leaves a generation of its own on top
            (lease, forged(genuine[lease], lambda body: {**body, "owner": "someone", "expires_at": 0.0}),
             "does not match its signature"),
            (manifest, forged(genuine[manifest], widened), "does not match its signature"),
            (manifest, unsigned(widened(parts(genuine[manifest])[1])), "declaw-wasm state resign"),
            (manifest, pause_manifest(other).read_bytes(), "does not match its signature"),  # moved here
            (state, (folder_of(other) / "state.json").read_bytes(), "moved here from another name"),
            (state, forged(genuine[state], lambda body: {**body, "info": {**body["info"], "network": WIDE}}),
             "does not match its signature"),
        ]
        for index, (path, attack, message) in enumerate(attacks):
            assert attack != genuine[path]
            path.write_bytes(attack)
            with pytest.raises(SandboxException, match=message):
                sbx.resume()
                pytest.fail(f"attack {index} on {path.name} was not refused")
            path.write_bytes(genuine[path])
            assert not sbx.is_running()
        sbx.resume()  # the genuine records: the sandbox as it was, with its own policy
        assert sbx.run_code("x").text == "7"
        info = sbx.get_info()
        assert info.state == SandboxState.RUNNING and info.network == POLICY
    finally:
        sbx.kill()
        other.kill()


@pytest.mark.served
def test_unsigned_records_are_refused_until_the_store_is_re_signed(make: Callable[..., Sandbox]) -> None:
    sbx = make(timeout=300)
    try:
        sbx.run_code("y = 'before signing'")
        sbx.pause()
        store = StateStore(os.environ["DECLAW_WASM_STATE"])
        local = sbx.sandbox_id.split(".")[0]
        for name in [n for n in store.walk() if n.startswith(f"sandboxes/{local}/")]:
            path = Path(store.path(name))
            path.write_bytes(unsigned(parts(path.read_bytes())[1]))  # as the declaw-wasm of before wrote it
        with pytest.raises(SandboxException, match="declaw-wasm state resign"):
            sbx.resume()
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        done = subprocess.run([sys.executable, "-m", "declaw_wasm.cli", "state", "resign"], env=env,
                              capture_output=True, text=True, timeout=120)
        assert f"signed    sandbox-state   sandboxes/{local}/state.json  (was unsigned)" in done.stdout, done
        assert not [line for line in done.stdout.splitlines() if line.startswith("left") and f"/{local}/" in line]
        sbx.resume()
        assert sbx.run_code("y").text == "before signing"
    finally:
        sbx.kill()


def _tar(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.served
def test_a_volume_record_rewritten_or_moved_is_refused_on_attach(make: Callable[..., Sandbox]) -> None:
    vol = Volumes.create("genuine", _tar({"a.txt": b"genuine"}))
    decoy = Volumes.create("decoy", _tar({"a.txt": b"planted"}))
    store = Path(os.environ["DECLAW_WASM_STATE"]) / "volumes"
    manifest = store / vol.volume_id / "manifest.json"
    genuine = manifest.read_bytes()
    attach = [VolumeAttachment(vol.volume_id, "/data", mode="mount-ro")]
    try:
        for attack in (forged(genuine, lambda body: {**body, "quota_bytes": 1 << 60, "revision": 99}),
                       (store / decoy.volume_id / "manifest.json").read_bytes()):  # another volume's, moved
            manifest.write_bytes(attack)
            with pytest.raises(SandboxException, match="does not match its signature"):
                make(timeout=60, volumes=attach)
        manifest.write_bytes(genuine)
        with make(timeout=60, volumes=attach) as sbx:
            assert sbx.files.read("/data/a.txt") == "genuine"
    finally:
        manifest.write_bytes(genuine)
        Volumes.delete(vol.volume_id)
        Volumes.delete(decoy.volume_id)


def test_pool_workers_take_the_key_only_from_the_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool whose workers started before the key file existed: the key (made at the first call
    that needs it, in this process) reaches them with their calls, and is in neither their
    environment nor the store; a key this process changes reaches them with the next call."""
    from declaw_wasm._pool.pool import ProcessPool

    state = tmp_path / "state"
    key_file = tmp_path / "config" / "state.key"
    monkeypatch.setenv("DECLAW_WASM_STATE", str(state))  # the workers inherit it
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY_FILE", str(key_file))
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY", secrets.token_hex(32))  # set, then gone: not inherited either
    pool = ProcessPool(1)
    monkeypatch.delenv("DECLAW_WASM_STATE_KEY")
    try:
        [worker] = pool.workers
        assert worker.ready.wait(120)
        environ = Path(f"/proc/{worker.pid}/environ").read_bytes()
        assert b"DECLAW_WASM_STATE_KEY" not in environ and str(state).encode() in environ
        assert not key_file.exists()
        sbx = Sandbox.create(backend=pool, timeout=300)
        sbx.run_code("z = 'pooled'")
        sbx.pause()
        key = keys.current()  # the file this process made for the create
        assert key.source == str(key_file)
        assert parts((folder_of(sbx) / "state.json").read_bytes())[0][3] == key.key_id
        stored = b"".join(p.read_bytes() for p in state.rglob("*") if p.is_file())
        assert key.secret not in stored and key.secret.hex().encode() not in stored
        monkeypatch.setenv("DECLAW_WASM_STATE_KEY", secrets.token_hex(32))  # this process's key changes ...
        with pytest.raises(SandboxException, match="signed with another state key"):
            Sandbox.connect(sbx.sandbox_id, backend=pool).resume()  # ... and the worker has it at once
        monkeypatch.delenv("DECLAW_WASM_STATE_KEY")
        again = Sandbox.connect(sbx.sandbox_id, backend=pool)
        again.resume()
        assert again.run_code("z").text == "pooled"
        again.kill()
    finally:
        pool.close()
