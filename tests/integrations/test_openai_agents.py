"""The OpenAI Agents SDK backend: `SandboxAgent` + `Runner` driven by a scripted model (no LLM),
resume from serialized state into a new sandbox, and the session API the SDK relies on."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents.sandbox", reason="pip install 'declaw-wasm[openai-agents]'")

from agents import Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.sandbox.entries import File
from agents.sandbox.errors import (
    ExecNonZeroError,
    WorkspaceArchiveWriteError,
    WorkspaceReadNotFoundError,
)
from agents.sandbox.files import EntryKind, FileEntry
from agents.sandbox.manifest import Manifest
from agents.sandbox.snapshot import LocalSnapshotSpec
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from declaw_wasm import AsyncSandbox, Sandbox
from declaw_wasm.integrations.openai_agents import (
    FALLBACK_ROOT,
    DeclawWasmSandboxClient,
    DeclawWasmSandboxClientOptions,
    DeclawWasmSandboxSessionState,
)

pytestmark = [pytest.mark.guest, pytest.mark.anyio]


class ScriptedModel(Model):
    """Plays back tool calls, then a final message; records what it was sent."""

    def __init__(self, turns: list[dict[str, Any] | str]) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []
        self.instructions: list[str | None] = []

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.inputs.append(input)
        self.instructions.append(system_instructions)
        turn = self.turns.pop(0)
        if isinstance(turn, str):
            item: Any = ResponseOutputMessage(
                id="msg", role="assistant", status="completed", type="message",
                content=[ResponseOutputText(text=turn, type="output_text", annotations=[])])
        else:
            item = ResponseFunctionToolCall(
                id=f"fc{len(self.turns)}", call_id=f"call{len(self.turns)}", type="function_call",
                name=turn["name"], arguments=json.dumps(turn["arguments"]), status="completed")
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


def _tool_outputs(model: ScriptedModel) -> list[str]:
    outputs = []
    if model.inputs:  # each request carries the whole conversation so far
        sent = model.inputs[-1]
        for item in sent if isinstance(sent, list) else []:
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                outputs.append(str(item["output"]))
    return outputs


def _live() -> set[str]:
    return {info.sandbox_id for info in Sandbox.list().next_items()}


async def test_runner_drives_the_sandbox() -> None:
    model = ScriptedModel([
        {"name": "exec_command", "arguments": {"cmd": "cat data.txt; echo made > out.txt; pwd"}},
        {"name": "exec_command", "arguments": {"cmd": "ls; exit 3"}},
        "all done",
    ])
    agent = SandboxAgent(name="dev", model=model, instructions="Work in the sandbox.",
                         default_manifest=Manifest(entries={"data.txt": File(content=b"42\n")}))
    client = DeclawWasmSandboxClient()
    before = _live()
    result = await Runner.run(agent, "go", run_config=RunConfig(tracing_disabled=True, sandbox=SandboxRunConfig(
        client=client, options=DeclawWasmSandboxClientOptions())))
    assert result.final_output == "all done"
    first, second = _tool_outputs(model)
    assert "42" in first and "/workspace\n" in first  # the SDK's default root, writable here
    assert "data.txt" in second and "out.txt" in second and "Process exited with code 3" in second
    assert "/workspace" in (model.instructions[0] or "")
    assert not (_live() - before)  # the runner's session is deleted at the end


async def test_resume_in_a_new_sandbox_from_the_tar_snapshot(tmp_path: Path) -> None:
    client = DeclawWasmSandboxClient()
    options = DeclawWasmSandboxClientOptions()
    write = ScriptedModel([
        {"name": "exec_command", "arguments": {"cmd": "mkdir -p sub && echo kept > sub/n.txt"}},
        "written"])
    agent = SandboxAgent(name="dev", model=write)
    first = await Runner.run(agent, "write", run_config=RunConfig(tracing_disabled=True, sandbox=SandboxRunConfig(
        client=client, options=options, snapshot=LocalSnapshotSpec(base_path=tmp_path))))
    payload = first.to_state().to_json()["sandbox"]["session_state"]
    state = client.deserialize_session_state(payload)
    assert isinstance(state, DeclawWasmSandboxSessionState)
    assert state.sandbox_id not in _live()  # the first sandbox is gone
    read = ScriptedModel([{"name": "exec_command", "arguments": {"cmd": "cat sub/n.txt"}},
                          "read"])
    await Runner.run(SandboxAgent(name="dev", model=read), "read", run_config=RunConfig(
        tracing_disabled=True, sandbox=SandboxRunConfig(client=client, session_state=state)))
    assert "kept" in _tool_outputs(read)[0]


@pytest.fixture
async def session() -> AsyncIterator[Any]:
    client = DeclawWasmSandboxClient()
    sess = await client.create(manifest=Manifest(root=FALLBACK_ROOT, entries={
        "a.txt": File(content=b"alpha\n")}), options=DeclawWasmSandboxClientOptions())
    async with sess:
        yield sess
    await client.delete(sess)


async def test_exec_returns_nonzero_and_unwraps_shells(session: Any) -> None:
    result = await session.exec("echo out; echo err >&2; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
    result = await session.exec("sh", "-c", 'printf "%s|%s" "$1" "$2"', "sh", "a b", "$c",
                                shell=False)
    assert result.stdout == b"a b|$c"
    result = await session.exec("cat", "a.txt", shell=False)
    assert result.stdout == b"alpha\n"
    assert (await session.exec("sudo", "-u", "user", "--", "pwd", shell=False)).stdout == \
        f"{FALLBACK_ROOT}\n".encode()


async def test_files_ls_mkdir_rm(session: Any) -> None:
    await session.mkdir("x/y", parents=True)
    await session.write("x/y/z.txt", io.BytesIO(b"zed"))
    assert (await session.read("x/y/z.txt")).read() == b"zed"
    assert await session.read_bounded("x/y/z.txt", max_bytes=2) == b"ze"
    entries = await session.ls("x")
    assert entries and all(isinstance(e, FileEntry) for e in entries)
    assert [(e.path, e.kind, e.is_dir()) for e in entries] == \
        [(f"{FALLBACK_ROOT}/x/y", EntryKind.DIRECTORY, True)]
    with pytest.raises(WorkspaceArchiveWriteError):
        await session.mkdir("p/q")  # no parents
    with pytest.raises(ExecNonZeroError):
        await session.rm("x")  # a folder needs recursive, as `rm` without -r
    await session.rm("x/y/z.txt")
    assert await session.ls("x/y") == []
    await session.rm("x", recursive=True)
    await session.rm("x", recursive=True)  # missing + recursive: fine, as `rm -rf`
    with pytest.raises(WorkspaceReadNotFoundError):
        await session.read("x/y/z.txt")
    with pytest.raises(WorkspaceReadNotFoundError):
        await session.read_bounded("x/y/z.txt", max_bytes=1)


async def test_persist_and_hydrate_are_a_portable_tar(session: Any) -> None:
    await session.mkdir("d", parents=True)
    await session.write("d/f.bin", io.BytesIO(bytes(range(256))))
    archive = await session._inner.persist_workspace()
    data = archive.read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = sorted(tar.getnames())
        assert names == ["a.txt", "d", "d/f.bin"]  # workspace-relative names
    await session.rm("d", recursive=True)
    await session._inner.hydrate_workspace(io.BytesIO(data))
    assert (await session.read("d/f.bin")).read() == bytes(range(256))
    evil = io.BytesIO()
    with tarfile.open(fileobj=evil, mode="w") as tar:
        info = tarfile.TarInfo("../escape.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(Exception) as refused:
        await session._inner.hydrate_workspace(io.BytesIO(evil.getvalue()))
    assert "would leave the workspace" in str(refused.value.__cause__)
    assert not await session._inner.sandbox.files.exists(
        "/home/user/escape.txt")


async def test_pty_interactive_and_piped(session: Any) -> None:
    update = await session.pty_exec_start("python3", tty=True, yield_time_s=1)
    assert update.process_id is not None and b">>> " in update.output
    update = await session.pty_write_stdin(session_id=update.process_id, chars="print(6*7)\n",
                                           yield_time_s=1)
    assert b"42" in update.output
    update = await session.pty_write_stdin(session_id=update.process_id, chars="exit()\n",
                                           yield_time_s=2)
    assert update.exit_code == 0 and update.process_id is None
    update = await session.pty_exec_start("cat", yield_time_s=0.3)
    update = await session.pty_write_stdin(session_id=update.process_id, chars="ping\n",
                                           yield_time_s=0.5)
    assert update.output == b"ping\n"
    await session.pty_terminate_all()
    done = await session.pty_exec_start("echo one; exit 4", yield_time_s=2)
    assert (done.output, done.exit_code, done.process_id) == (b"one\n", 4, None)


async def test_default_manifest_root_is_workspace() -> None:
    client = DeclawWasmSandboxClient()
    sess = await client.create(options=DeclawWasmSandboxClientOptions())
    try:
        assert sess._inner.state.manifest.root == "/workspace"
    finally:
        await client.delete(sess)


async def test_default_manifest_root_works() -> None:
    """With the SDK's default manifest the session starts and runs in its root, wherever the
    sandbox can put it."""
    client = DeclawWasmSandboxClient()
    sess = await client.create(options=DeclawWasmSandboxClientOptions())
    async with sess:
        root = sess._inner.state.manifest.root
        assert root in ("/workspace", FALLBACK_ROOT)
        assert (await sess.exec("pwd")).stdout == f"{root}\n".encode()
    await client.delete(sess)


async def test_sandbox_options_reach_the_sandbox_and_survive_a_resume() -> None:
    """`network`, `security` and `secrets` go to `AsyncSandbox.create`; the state keeps the
    first two as declaw's JSON (a sandbox made again on resume gets them) and never a secret's
    value (a resumed session takes secrets from the client)."""
    from declaw_wasm import Secret

    secrets = {"API_TOKEN": Secret("tok-value-123", hosts=["api.example.com"])}
    client = DeclawWasmSandboxClient(secrets=secrets)
    options = DeclawWasmSandboxClientOptions(network={"deny_out": ["0.0.0.0/0"]}, secrets=secrets,
                                             security={"audit": {"enabled": True}})
    sess = await client.create(manifest=Manifest(root=FALLBACK_ROOT), options=options)
    async with sess:
        assert isinstance(sess.state, DeclawWasmSandboxSessionState)
        first = sess.state.sandbox_id
        token = (await sess.exec("echo $API_TOKEN")).stdout.decode().strip()
        assert token and token != "tok-value-123"  # the guest sees a placeholder
    payload = sess.state.model_dump(mode="json")
    assert payload["network"] == {"deny_out": ["0.0.0.0/0"]} and "policy_json" in payload["security"]
    assert "tok-value-123" not in json.dumps(payload)
    await client.delete(sess)  # the sandbox is gone: the resume makes a new one
    state = client.deserialize_session_state(payload)
    resumed = await client.resume(state)
    async with resumed:
        assert isinstance(resumed.state, DeclawWasmSandboxSessionState)
        assert resumed.state.sandbox_id not in (None, first)
        info = await (await AsyncSandbox.connect(resumed.state.sandbox_id)).get_info()
        assert info.network == {"deny_out": ["0.0.0.0/0"]}
        assert (await resumed.exec("echo $API_TOKEN")).stdout.strip()
    await client.delete(resumed)


async def test_resolve_exposed_port_reaches_a_server_in_the_sandbox() -> None:
    """The SDK's `resolve_exposed_port`: an exposed port resolves to where the sandbox's server
    is reached (get_host, docs/inbound.md); a port not exposed is the SDK's own refusal."""
    import http.client

    from agents.sandbox.errors import ExposedPortUnavailableError

    client = DeclawWasmSandboxClient()
    sess = await client.create(manifest=Manifest(root=FALLBACK_ROOT),
                               options=DeclawWasmSandboxClientOptions(exposed_ports=(8000,)))
    async with sess:
        await sess.exec("mkdir -p site && echo served > site/index.html")
        inner: Any = sess._inner
        await inner.sandbox.commands.run(f"python3 -m http.server 8000 -d {FALLBACK_ROOT}/site",
                                         background=True)
        endpoint = await sess.resolve_exposed_port(8000)
        assert endpoint.url_for("http").startswith("http://127.0.0.1:")
        status, body = 502, b""
        for _ in range(100):
            conn = http.client.HTTPConnection(endpoint.host, endpoint.port, timeout=10)
            conn.request("GET", "/index.html")
            answer = conn.getresponse()
            status, body = answer.status, answer.read()
            conn.close()
            if status != 502:
                break
            await asyncio.sleep(0.2)
        assert (status, body) == (200, b"served\n")
        with pytest.raises(ExposedPortUnavailableError):
            await sess.resolve_exposed_port(9000)
    await client.delete(sess)
