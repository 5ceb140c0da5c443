"""`declaw-wasm mcp` through the `mcp` SDK's own client: in-process, over stdio (a real
`declaw-wasm mcp` process) and over streamable HTTP (uvicorn in a thread), including that a
session's sandbox dies with the session."""

from __future__ import annotations

import base64
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp", reason="pip install 'declaw-wasm[mcp]'")

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import ImageContent, TextContent

from declaw_wasm import AsyncSandbox, Sandbox
from declaw_wasm.integrations.mcp import DeclawMcpServer, ServerOptions, main

pytestmark = pytest.mark.anyio


def _text(result: Any) -> str:
    assert not result.is_error, result.content
    return str(result.content[0].text)


async def test_tools_and_run_python_code_schema() -> None:
    """The tool drops into mcp-run-python configs: same name, parameters and required list."""
    async with Client(DeclawMcpServer(shared=True).mcp) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"run_python_code", "run_code", "create_code_context", "run_command", "read_file",
                "write_file", "list_files"} <= set(tools)
        schema = tools["run_python_code"].input_schema
        assert schema["required"] == ["python_code"]
        assert schema["properties"]["python_code"]["type"] == "string"
        assert schema["properties"]["global_variables"]["type"] == "object"
        assert schema["properties"]["global_variables"]["default"] == {}


@pytest.mark.guest
async def test_run_python_code_output_format() -> None:
    async with Client(DeclawMcpServer(shared=True).mcp) as client:
        text = _text(await client.call_tool("run_python_code", {
            "python_code": "import sys\nprint('hi')\nprint('oops', file=sys.stderr)\na + 1",
            "global_variables": {"a": 41}}))
        assert text == "<status>success</status>\n<output>\nhi\noops\n</output>\n" \
                       "<return_value>\n42\n</return_value>"
        # fresh globals each call; top-level await; JSON of the last value
        text = _text(await client.call_tool("run_python_code", {
            "python_code": "import asyncio\nawait asyncio.sleep(0)\n{'a': [1, 'x']}"}))
        assert text == '<status>success</status>\n<return_value>\n{\n  "a": [\n    1,\n' \
                       '    "x"\n  ]\n}\n</return_value>'
        text = _text(await client.call_tool("run_python_code", {"python_code": "a"}))
        assert text.startswith("<status>run-error</status>\n<error>\nTraceback")
        assert 'File "main.py", line 1, in <module>' in text and "NameError" in text
        # a string value is returned as is; None gives no return value
        assert _text(await client.call_tool("run_python_code", {"python_code": "'x<y'"})) == \
            "<status>success</status>\n<return_value>\nx<y\n</return_value>"
        assert _text(await client.call_tool("run_python_code", {"python_code": "None"})) == \
            "<status>success</status>"
        # closing tags in the output cannot end the section early
        text = _text(await client.call_tool("run_python_code",
                                            {"python_code": "print('</output><status>x')"}))
        assert "&lt;/output&gt;" in text


@pytest.mark.guest
async def test_run_python_code_json_mode() -> None:
    server = DeclawMcpServer(ServerOptions(return_mode="json"), shared=True)
    async with Client(server.mcp) as client:
        text = _text(await client.call_tool("run_python_code", {"python_code": "print(1)\n'x'"}))
        assert text == '{"status": "success", "output": ["1"], "return_value": "x"}'


@pytest.mark.guest
async def test_run_code_is_stateful_and_returns_charts() -> None:
    async with Client(DeclawMcpServer(shared=True).mcp) as client:
        result = await client.call_tool("run_code", {"code": (
            "import matplotlib.pyplot as plt\nv = 21\nplt.bar(['a', 'b'], [1, 2])\n"
            "plt.title('sales')\nplt.show()\nprint('done')")})
        assert not result.is_error
        text, image = result.content
        assert isinstance(text, TextContent) and isinstance(image, ImageContent)
        assert "done" in text.text and "[chart: bar] sales" in text.text
        assert image.type == "image" and image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(b"\x89PNG")
        assert "[result]\n42" in _text(await client.call_tool("run_code", {"code": "v * 2"}))
        # another context is independent
        context_id = _text(await client.call_tool("create_code_context", {}))
        answer = _text(await client.call_tool("run_code", {"code": "v", "context_id": context_id}))
        assert "NameError" in answer
        bad = await client.call_tool("run_code", {"code": "1", "context_id": "nope"})
        assert bad.is_error and isinstance(bad.content[0], TextContent) and "no code context" in bad.content[0].text


@pytest.mark.guest
async def test_commands_and_files() -> None:
    async with Client(DeclawMcpServer(shared=True).mcp) as client:
        assert _text(await client.call_tool("run_command", {"command": "echo hi; exit 3"})) == \
            "exit_code: 3\n[stdout]\nhi"
        await client.call_tool("write_file", {"path": "/home/user/d/a.txt", "content": "héllo"})
        assert _text(await client.call_tool("read_file", {"path": "/home/user/d/a.txt"})) == "héllo"
        listing = _text(await client.call_tool("list_files", {"path": "/home/user/d"}))
        assert listing == "/home/user/d/a.txt\t6"
        missing = await client.call_tool("read_file", {"path": "/home/user/nope"})
        assert missing.is_error and isinstance(missing.content[0], TextContent)
        assert "FileNotFoundException" in missing.content[0].text
        assert "cat: " in _text(await client.call_tool("run_command", {"command": "cat /nope"}))


@pytest.mark.guest
async def test_stdio_transport_runs_the_cli() -> None:
    """A real `declaw-wasm mcp` process, spoken to by the SDK's stdio client."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "declaw_wasm.cli", "mcp", "--timeout", "60"],
        env={**os.environ})
    async with Client(params) as client:
        text = _text(await client.call_tool("run_python_code", {"python_code": "6 * 7"}))
        assert text == "<status>success</status>\n<return_value>\n42\n</return_value>"
        await client.call_tool("run_code", {"code": "kept = 'yes'"})
        assert "[result]\nyes" in _text(await client.call_tool("run_code", {"code": "kept"}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    import uvicorn

    server = DeclawMcpServer(ServerOptions(timeout=120))
    port = _free_port()
    config = uvicorn.Config(server.http_app(), host="127.0.0.1", port=port, log_level="warning")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/mcp"
    uv.should_exit = True
    thread.join(10)


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_http_answers_only_loopback_names_and_no_other_origins_page(http_server: str) -> None:
    """The listener's checks are the ones every listener of ours shares (_webguard.py): a forged
    Host (DNS rebinding) gets 421, another origin's or site's page 403; the SDK's own rule that a
    POST is JSON stays (a form or text/plain POST: 400). No tool runs, so no sandbox is made."""
    import httpx

    port = int(http_server.rsplit(":", 1)[1].split("/")[0])
    with httpx.Client(timeout=30) as client:
        def post(headers: dict[str, str], **kw: Any) -> int:
            answer = client.post(http_server, headers={**ACCEPT, **headers}, **kw)
            return answer.status_code

        origin: str | None  # None in the last loop: no Origin header
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", "localhost.evil", ""):
            assert post({"Host": host}, json=INITIALIZE) == 421, host
        for origin in ("http://evil.example", "null", "http://localhost:1", f"http://8000-sbx_1.localhost:{port}"):
            assert post({"Origin": origin}, json=INITIALIZE) == 403, origin
        assert post({"Sec-Fetch-Site": "cross-site"}, json=INITIALIZE) == 403
        assert post({"Content-Type": "text/plain"}, content=json.dumps(INITIALIZE)) == 400
        assert post({"Content-Type": "application/x-www-form-urlencoded"}, content=b"a=b") == 400
        for host, origin in ((f"localhost:{port}", f"http://localhost:{port}"), (f"[::1]:{port}", None),
                             (f"127.0.0.1:{port}", f"http://127.0.0.1:{port}")):
            headers = {"Host": host, **({"Origin": origin} if origin else {})}
            assert post(headers, json=INITIALIZE) == 200, host


def _live_ids() -> set[str]:
    return {info.sandbox_id for info in Sandbox.list().next_items()}


@pytest.mark.guest
async def test_http_session_owns_a_sandbox_killed_at_the_end(http_server: str) -> None:
    before = _live_ids()
    async with Client(http_server, mode="legacy") as client:
        await client.call_tool("run_code", {"code": "n = 5"})
        assert "[result]\n6" in _text(await client.call_tool("run_code", {"code": "n + 1"}))
        mine = _live_ids() - before
        assert len(mine) == 1
        async with Client(http_server, mode="legacy") as other:  # another session: its own
            text = _text(await other.call_tool("run_code", {"code": "n"}))
            assert "NameError" in text
            assert len(_live_ids() - before) == 2
    with anyio.fail_after(10):
        while _live_ids() & mine:
            await anyio.sleep(0.05)


@pytest.mark.guest
async def test_http_modern_protocol_is_stateless(http_server: str) -> None:
    """2026-07-28 clients have no session: each call gets a sandbox of its own, gone after."""
    before = _live_ids()
    async with Client(http_server) as client:
        text = _text(await client.call_tool("run_python_code", {"python_code": "1 + 1"}))
        assert "<return_value>\n2\n</return_value>" in text
    assert not (_live_ids() - before)


@pytest.mark.guest
async def test_server_options_set_every_sandboxs_policy() -> None:
    """`--network` / `--security` / `--no-internet` (ServerOptions) reach each session's sandbox;
    a bad policy stops the server at start."""
    before = _live_ids()
    server = DeclawMcpServer(ServerOptions(network={"deny_out": ["0.0.0.0/0"]},
                                           security={"audit": {"enabled": True}}), shared=True)
    async with Client(server.mcp) as client:
        await client.call_tool("run_code", {"code": "1"})
        (mine,) = _live_ids() - before
        assert (await (await AsyncSandbox.connect(mine)).get_info()).network == {"deny_out": ["0.0.0.0/0"]}
        text = _text(await client.call_tool("run_command", {"command": "curl -sS https://example.com"}))
        assert not text.startswith("exit_code: 0")
    assert main(["--network", '{"allow_out": ["not a host!!"]}']) == 2
