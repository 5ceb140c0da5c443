"""The adapters use only the public API, so they work in remote mode too: each runs here
against `declaw-wasm serve` (in a thread of this process, tests/conftest.py) instead of
in-process sandboxes."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest
from conftest import API_KEY  # tests/ is on sys.path

from declaw_wasm import testing
from declaw_wasm.integrations.anthropic import PersistentShell

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _need(module: str) -> None:
    try:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed")
    except ModuleNotFoundError:
        pytest.skip(f"{module} is not installed")


@pytest.fixture
def remote_env(server_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sandboxes the adapters make go to the server (DECLAW_DOMAIN, as a user would set it)."""
    monkeypatch.setenv("DECLAW_DOMAIN", server_url)
    monkeypatch.setenv("DECLAW_API_KEY", API_KEY)
    yield


def test_persistent_shell_on_a_served_sandbox(served_sbx: object) -> None:
    shell = PersistentShell(served_sbx)  # type: ignore[arg-type]
    shell.run("mkdir -p /tmp/r && cd /tmp/r && export K=v")
    assert shell.run("pwd; echo $K").stdout == "/tmp/r\nv\n"


def test_deepagents_on_a_served_sandbox(served_sbx: object) -> None:
    _need("deepagents.backends.sandbox")
    from declaw_wasm.integrations.deepagents import DeclawWasmSandbox

    backend = DeclawWasmSandbox(served_sbx)  # type: ignore[arg-type]
    backend.write("/home/user/remote/a.py", "x = 'needle'\n")
    assert [m["line"] for m in backend.grep("needle", path="/home/user/remote").matches or []] == [1]
    assert backend.edit("/home/user/remote/a.py", "needle", "thread").error is None
    assert backend.execute("cat /home/user/remote/a.py").output == "x = 'thread'\n"


@pytest.mark.anyio
async def test_openai_agents_session_remote(remote_env: None) -> None:
    _need("agents.sandbox")
    import io
    from pathlib import Path

    from declaw_wasm.integrations.openai_agents import (
        DeclawWasmSandboxClient,
        DeclawWasmSandboxClientOptions,
        DeclawWasmSandboxSession,
    )

    client = DeclawWasmSandboxClient()
    session = await client.create(options=DeclawWasmSandboxClientOptions())
    async with session:
        assert isinstance(session._inner, DeclawWasmSandboxSession)
        assert not testing.is_local(session._inner.sandbox)
        await session.write(Path("f.txt"), io.BytesIO(b"remote"))
        assert (await session.exec("cat f.txt")).stdout == b"remote"
        archive = (await session._inner.persist_workspace()).read()
        assert b"remote" in archive
        update = await session.pty_exec_start("python3", tty=True, yield_time_s=1)
        assert update.process_id is not None
        update = await session.pty_write_stdin(session_id=update.process_id, chars="2**10\n",
                                               yield_time_s=1)
        assert b"1024" in update.output
    await client.delete(session)


@pytest.mark.anyio
async def test_pydantic_ai_backend_remote(remote_env: None) -> None:
    _need("pydantic_ai.workspaces")
    from declaw_wasm.integrations.pydantic_ai import DeclawWasmWorkspaceBackend

    backend = DeclawWasmWorkspaceBackend(timeout=120)
    try:
        await backend.write_bytes("/home/user/w/b.bin", b"\x00\xff")
        assert await backend.read_bytes("/home/user/w/b.bin") == b"\x00\xff"
        assert (await backend.run(["cat", "/home/user/w/b.bin"])).exit_code == 0
        assert backend.ref is not None
        attached = DeclawWasmWorkspaceBackend(backend.ref)
        assert [e.name for e in await attached.list_dir("/home/user/w")] == ["b.bin"]
    finally:
        await backend.destroy()
