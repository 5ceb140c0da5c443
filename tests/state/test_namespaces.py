"""A server's part of the state store: `declaw-wasm serve` keeps its sandboxes, snapshots and
volumes under `namespaces/<name>/` of the store (`serve` unless `--state-namespace` or
`DECLAW_WASM_STATE_NAMESPACE` names another), apart from in-process programs', which use the
store's root. A program shares the server's on purpose by naming the same namespace."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from declaw_wasm import InvalidArgumentException, Sandbox, Volumes
from declaw_wasm.settings import state_url

from .conftest import ROOT


def test_a_namespace_is_a_part_of_the_store(state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert state_url() == state
    monkeypatch.setenv("DECLAW_WASM_STATE_NAMESPACE", "team-a")
    assert state_url() == f"{state}/namespaces/team-a"
    monkeypatch.setenv("DECLAW_WASM_STATE", "s3://bucket/prefix/")
    assert state_url() == "s3://bucket/prefix/namespaces/team-a"
    for bad in ("../up", "a/b", "-x", ".", "x" * 65, "a b"):
        monkeypatch.setenv("DECLAW_WASM_STATE_NAMESPACE", bad)
        with pytest.raises(InvalidArgumentException, match="DECLAW_WASM_STATE_NAMESPACE"):
            state_url()


@pytest.fixture(params=["local", "processes:1"])
def served(request: pytest.FixtureRequest, state: str) -> Iterator[str]:
    """`declaw-wasm serve` as its operator runs it (a process of its own, no key, loopback, its
    sandboxes in its process or in a pool's worker), on the test's store; its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DECLAW_API_KEY", "DECLAW_WASM_STATE_NAMESPACE")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["DECLAW_WASM_WARM_IMAGE"] = "1"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from declaw_wasm.cli import main; "
                             "sys.exit(main(sys.argv[1:]))", "serve", "--port", str(port), "--backend", request.param],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.mark.guest
def test_a_servers_state_is_apart_from_in_process_programs(state: str, served: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    api = httpx.Client(base_url=served, timeout=60, headers={"Content-Type": "application/json"})
    mine = Sandbox.create(timeout=120)  # an in-process program's, at the store's root
    try:
        mine.files.write("/home/user/private.txt", "the program's")
        snap = mine.create_snapshot()
        volume = Volumes.create("program-volume")
    finally:
        mine.kill()
    # the server neither lists, nor restores, nor reads what the program keeps
    assert api.get("/snapshots").json()["snapshots"] == []
    assert api.get(f"/sandboxes/{mine.sandbox_id}/snapshots").json()["snapshots"] == []
    restore = api.post(f"/sandboxes/{mine.sandbox_id}/restore", params={"snapshot_id": snap.snapshot_id})
    assert restore.status_code == 404
    assert api.get("/volumes").json()["volumes"] == []
    assert api.get(f"/volumes/{volume.volume_id}").status_code == 404
    made = api.post("/volumes/empty", params={"name": "server-volume"}).json()
    theirs = api.post("/sandboxes", json={"timeout": 120}).json()["sandbox_id"]  # in a pool: a worker's
    try:
        wrote = api.post(f"/sandboxes/{theirs}/files", json={"path": "/home/user/s.txt", "data": "the server's"})
        assert wrote.is_success, wrote.text
        server_snap = api.post(f"/sandboxes/{theirs}/snapshot").json()["snapshot_id"]
    finally:
        api.delete(f"/sandboxes/{theirs}")
    # nor the program the server's
    assert [v.name for v in Volumes.list()] == ["program-volume"]
    assert [s.snapshot_id for s in Sandbox.list_snapshots()] == [snap.snapshot_id]
    assert (Path(state) / "namespaces" / "serve" / "sandboxes" / theirs).is_dir()
    # shared on purpose: the program names the server's namespace
    monkeypatch.setenv("DECLAW_WASM_STATE_NAMESPACE", "serve")
    assert [v.volume_id for v in Volumes.list()] == [made["volume_id"]]
    shared = Sandbox.create(timeout=120)
    try:
        shared.files.write("/home/user/shared.txt", "for the server")
        taken = shared.create_snapshot()
    finally:
        shared.kill()
    assert [s["snapshot_id"] for s in api.get("/snapshots").json()["snapshots"]] == [taken.snapshot_id,
                                                                                   server_snap]
