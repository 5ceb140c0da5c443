"""The state calls through `declaw-wasm serve`: our SDK in remote mode (snapshots, pause and
resume, restore, fork), declaw's own SDK (PyPI `declaw` 1.7.0, unchanged: `create_snapshot`,
`snapshot`, `list_snapshots`, `delete_snapshot`, `pause`, `resume`, `restore`), and the process
pool (a sandbox paused by one pool's worker resumes in another pool's)."""

from __future__ import annotations

from typing import Any

import pytest

from declaw_wasm import ConflictException, Sandbox, SandboxState

from conftest import API_KEY  # noqa: E402 (tests/ is on sys.path)

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_our_sdk_through_the_server(server_url: str, state: str) -> None:
    where: dict[str, Any] = {"domain": server_url, "api_key": API_KEY}
    sbx = Sandbox.create(**where)
    try:
        sbx.run_code("import pandas as pd; df = pd.DataFrame({'a': [1, 2, 3]})")
        sbx.files.write("/home/user/x.txt", "served")
        snap = sbx.snapshot()
        assert snap.source == "manual" and snap.sandbox_id == sbx.sandbox_id
        assert sbx.pause() is True and sbx.pause() is False
        assert sbx.get_info().state == SandboxState.PAUSED
        assert sbx.sandbox_id in {i.sandbox_id for i in Sandbox.list(**where) if i.state == SandboxState.PAUSED}
        again = Sandbox.connect(sbx.sandbox_id, **where)  # resumes (E2B's rule)
        assert "".join(again.run_code("print(int(df.a.sum()))").logs.stdout) == "6\n"
        [fork] = again.fork(count=1)
        fork.run_code("df['a'] = 0")
        assert "".join(again.run_code("print(int(df.a.sum()))").logs.stdout) == "6\n"
        assert fork.files.read("/home/user/x.txt") == "served"
        fork.kill()
        listed = Sandbox.list_snapshots(sbx.sandbox_id, **where)
        assert {s.source for s in listed} == {"manual", "pause"}
        restored = Sandbox.restore(sbx.sandbox_id, snapshot_id=snap.snapshot_id, **where)
        assert "".join(restored.run_code("print(len(df))").logs.stdout) == "3\n"
        with pytest.raises(Exception, match="secrets"):
            Sandbox.resume(sbx.sandbox_id, secrets={"X": object()}, **where)
    finally:
        Sandbox.kill(sbx.sandbox_id, **where)


def test_declaws_own_sdk(server_url: str, state: str) -> None:
    declaw = pytest.importorskip("declaw")
    where = {"api_key": API_KEY, "domain": server_url.split("//", 1)[1]}
    sbx = declaw.Sandbox.create(template="base", timeout=300, **where)
    try:
        sbx.files.write("/home/user/state.txt", "one")
        info = sbx.create_snapshot()
        assert info.sandbox_id == sbx.sandbox_id and info.created_at is not None
        sbx.files.write("/home/user/state.txt", "two")
        snap = sbx.snapshot()
        assert snap.source == "manual" and snap.vmstate_blob_key.endswith("manifest.json")
        sbx.pause()
        assert sbx.get_info().state.value == "paused"
        with pytest.raises(declaw.SandboxException):  # 409: what the paused sandbox resumes from
            sbx.delete_snapshot(sbx.list_snapshots()[0].snapshot_id)
        sbx.resume()
        assert sbx.files.read("/home/user/state.txt") == "two"
        assert [s.source for s in sbx.list_snapshots()] == ["pause", "manual", "manual"]
        assert sbx.delete_snapshot(snap.snapshot_id) is True
        back = declaw.Sandbox.restore(sbx.sandbox_id, snapshot_id=info.snapshot_id, **where)
        assert back.sandbox_id == sbx.sandbox_id
        assert back.files.read("/home/user/state.txt") == "one"
        assert back.commands.run("cat /home/user/state.txt").stdout == "one"
        page = declaw.SnapshotPaginator(declaw.api.client.ApiClient(declaw.ConnectionConfig(**where)),
                                        sandbox_id=sbx.sandbox_id) if hasattr(declaw, "api") else None
        if page is not None:
            assert {s.snapshot_id for s in page.next_items()} >= {info.snapshot_id}
    finally:
        declaw.Sandbox.kill_by_id(sbx.sandbox_id, wait=True, connection_config=declaw.ConnectionConfig(**where))


def test_the_process_pool_shares_the_store(state: str) -> None:
    from declaw_wasm._pool.pool import ProcessPool

    first = ProcessPool(1)  # workers get this process's environment: the same state store
    try:
        sbx = Sandbox.create(backend=first)
        sbx.run_code("x = 'from the first pool'")
        [fork] = sbx.fork(count=1)
        assert "".join(fork.run_code("print(x)").logs.stdout) == "from the first pool\n"
        fork.kill()
        sbx.pause()
        assert sbx.get_info().state == SandboxState.PAUSED
    finally:
        first.close()
    second = ProcessPool(1)
    try:
        again = Sandbox.connect(sbx.sandbox_id, backend=second)  # a worker of another pool resumes it
        assert "".join(again.run_code("print(x)").logs.stdout) == "from the first pool\n"
        with pytest.raises(ConflictException):  # running there: nobody else resumes it
            Sandbox.resume(sbx.sandbox_id)
        again.kill()
    finally:
        second.close()
