"""declaw's own Python SDK (PyPI `declaw` 1.7.0, unchanged) against `declaw-wasm serve`: each of
its calls for sandboxes, commands, files, PTYs and stdio, and its exceptions, as its users write
them. The seed's listing run verbatim with it: tests/test_examples_declaw.py."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Iterator

import pytest

declaw = pytest.importorskip("declaw")  # the test extra installs it

from conftest import API_KEY  # noqa: E402 (tests/ is on sys.path)

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the wire does not depend on the guest path


@pytest.fixture(scope="module")
def where(server_url: str) -> dict[str, str]:
    return {"api_key": API_KEY, "domain": server_url.split("//", 1)[1]}


@pytest.fixture(scope="module")
def sbx(where: dict[str, str]) -> Iterator[Any]:
    sandbox = declaw.Sandbox.create(template="code-interpreter", timeout=600, metadata={"suite": "declaw"},
                                    **where)
    yield sandbox
    sandbox.kill(wait=True)


def test_create_with_declaws_options_and_the_sandbox_calls(where: dict[str, str]) -> None:
    policy = declaw.SecurityPolicy(pii=declaw.PIIConfig(enabled=True))
    sandbox = declaw.Sandbox.create(
        template="python", timeout=60, metadata={"k": "v"}, envs={"A": "1"}, secure=True,
        network=declaw.SandboxNetworkOpts(allow_out=["pypi.org"]), security=policy,
        lifecycle=declaw.SandboxLifecycle(on_timeout="kill"), **where)
    assert sandbox.is_running()
    info = sandbox.get_info()
    assert (info.sandbox_id, info.template_id, info.metadata) == (sandbox.sandbox_id, "code-interpreter", {"k": "v"})
    assert sandbox.commands.run("echo $A").stdout == "1\n"
    sandbox.set_timeout(120)
    metrics = sandbox.get_metrics()
    assert len(metrics) == 1 and metrics[0].disk_usage_mb >= 0
    again = declaw.Sandbox.connect(sandbox.sandbox_id, timeout=300, **where)
    assert again.get_info().sandbox_id == sandbox.sandbox_id
    listed = declaw.Sandbox.list(**where)
    assert sandbox.sandbox_id in [s["sandbox_id"] for s in listed["sandboxes"]]
    assert sandbox.kill() is True
    assert not sandbox.is_running()


def test_kill_by_id_and_kill_many(where: dict[str, str]) -> None:
    config = declaw.ConnectionConfig(**where)
    first, second = (declaw.Sandbox.create(template="base", **where) for _ in range(2))
    assert declaw.Sandbox.kill_by_id(first.sandbox_id, wait=True, connection_config=config) is True
    assert declaw.Sandbox.kill_many([second.sandbox_id, first.sandbox_id], connection_config=config) == {
        second.sandbox_id: {"queued": True}, first.sandbox_id: {"error": "sandbox not found"}}


def test_commands(sbx: Any) -> None:
    lines: list[str] = []
    result = sbx.commands.run("echo one; echo two >&2; exit 3", on_stdout=lines.append, user="user")
    assert (result.stdout, result.stderr, result.exit_code, lines) == ("one\n", "two\n", 3, ["one\n"])
    handle = sbx.commands.run("cat", background=True, stdin=True)
    sbx.commands.send_stdin(handle.pid, "typed\n")
    assert handle.pid in [p.pid for p in sbx.commands.list()]
    time.sleep(1)  # for cat to echo it
    assert sbx.commands.kill(handle.pid) is True
    with pytest.raises(declaw.CommandExitException) as raised:
        handle.wait()
    assert (raised.value.exit_code, raised.value.stdout) == (137, "typed\n")
    done = sbx.commands.run("sleep 0.3; echo later", background=True)
    assert sbx.commands.connect(done.pid).wait().stdout == "later\n"
    streamed: list[str] = []
    result = sbx.commands.run_stream("echo a; sleep 0.3; printf 'b\\nc'", on_stdout=streamed.append)
    assert (result.stdout, streamed, result.exit_code) == ("a\nb\nc", ["a", "b", "c"], 0)


def test_files(sbx: Any) -> None:
    assert sbx.files.write("/tmp/d/text.txt", "héllo").size == len("héllo".encode())
    assert sbx.files.write("/tmp/d/raw.bin", b"\x00\xff").size == 2
    assert sbx.files.read("/tmp/d/text.txt") == "héllo"
    assert sbx.files.read("/tmp/d/raw.bin", format="bytes") == bytearray(b"\x00\xff")
    assert b"".join(sbx.files.read("/tmp/d/raw.bin", format="stream")) == b"\x00\xff"
    written = sbx.files.write_files([declaw.WriteEntry("/tmp/d/a", "A"), declaw.WriteEntry("/tmp/d/b", b"B")])
    assert [w.path for w in written] == ["/tmp/d/a", "/tmp/d/b"]
    assert [e.name for e in sbx.files.list("/tmp/d")] == ["a", "b", "raw.bin", "text.txt"]
    assert sbx.files.exists("/tmp/d/a") and not sbx.files.exists("/tmp/d/zz")
    assert sbx.files.get_info("/tmp/d").type == declaw.FileType.DIR
    assert sbx.files.rename("/tmp/d/a", "/tmp/d/c").path == "/tmp/d/c"
    assert sbx.files.make_dir("/tmp/d/sub") is True and sbx.files.make_dir("/tmp/d/sub") is False
    sbx.files.remove("/tmp/d/c")
    assert not sbx.files.exists("/tmp/d/c")
    sbx.files.watch_dir("/tmp/d", recursive=True).stop()  # declaw's handle never reads events
    assert sbx.commands.run("cat /tmp/d/b").stdout == "B"


def test_pty(sbx: Any) -> None:
    pty = sbx.pty.create(declaw.PtySize(cols=100, rows=30), envs={"GREETING": "hi"})
    pty.send_stdin("echo $GREETING-$(tput cols)\n")
    time.sleep(1)
    pty.resize(declaw.PtySize(cols=90, rows=20))
    sbx.pty.send_stdin(pty.pid, "tput cols; exit 5\n")
    output = b"".join(pty)
    assert b"hi-100" in output and b"\r\n90\r\n" in output and pty.exit_code == 5
    other = sbx.pty.create()
    assert sbx.pty.kill(other.pid) is True
    assert int(other.wait()) == 137


def test_stdio(sbx: Any) -> None:
    process = sbx.stdio.start("python3 -c 'import sys; [print(l.upper(), end=\"\", flush=True) for l in sys.stdin]'")
    process.send_stdin("ping\n")
    process.send_stdin(b"pong\n")
    process.close_stdin()
    chunks = list(process)
    assert b"".join(c for kind, c in chunks if kind == "stdout") == b"PING\nPONG\n"
    assert process.exit_code == 0
    chatty: list[bytes] = []
    looping = sbx.stdio.start("cat", on_stdout=chatty.append)
    looping.send_stdin("x\n")
    deadline = time.monotonic() + 10
    while not chatty and time.monotonic() < deadline:
        time.sleep(0.05)
    assert chatty == [b"x\n"] and looping.kill() is True


def test_exceptions_come_out_as_declaws(sbx: Any, where: dict[str, str]) -> None:
    with pytest.raises(declaw.NotFoundException) as missing:
        sbx.files.read("/tmp/no-such-file")
    assert missing.value.code == "not_found"
    with pytest.raises(declaw.TimeoutException):
        sbx.commands.run("sleep 5", timeout=1)
    with pytest.raises(declaw.InvalidArgumentException):
        declaw.Sandbox.create(template="no-such-template", **where)
    with pytest.raises(declaw.AuthenticationException):
        declaw.Sandbox.create(api_key="wrong", domain=where["domain"])
    with pytest.raises(declaw.NotFoundException):
        declaw.Sandbox.connect("sbx_" + "0" * 32, **where)


def test_async_sandbox_flat_methods(where: dict[str, str]) -> None:
    async def main() -> None:
        sandbox = await declaw.AsyncSandbox.create(template="base", **where)
        try:
            result = await sandbox.run_command("echo async")
            assert result.stdout == "async\n"
            await sandbox.write_file("/tmp/f.txt", "x")
            assert await sandbox.read_file("/tmp/f.txt") == "x"
            assert await sandbox.file_exists("/tmp/f.txt")
            assert (await sandbox.get_file_info("/tmp/f.txt")).size == 1
            assert [e.name for e in await sandbox.list_files("/tmp")] == ["f.txt"]
            await sandbox.rename_file("/tmp/f.txt", "/tmp/g.txt")
            await sandbox.remove_file("/tmp/g.txt")
            assert await sandbox.make_dir("/tmp/h")
            handle = await sandbox.run_command("cat", background=True)
            await sandbox.send_command_stdin(handle.pid, "in\n")
            assert handle.pid in [p.pid for p in await sandbox.list_commands()]
            assert await sandbox.kill_command(handle.pid)
            assert (await sandbox.get_metrics())[0].memory_usage_mb >= 0
        finally:
            await sandbox.kill()

    asyncio.run(main())


def test_get_host_reaches_a_server_in_the_sandbox(sbx: Any) -> None:
    """declaw's `get_host(port)` is its path route, `{api_url}/sandboxes/{id}/ports/{port}`,
    behind the API key; the server's answers carry `Content-Security-Policy: sandbox`."""
    import httpx

    sbx.files.write("/home/user/site/index.html", "<h1>declaw</h1>")
    sbx.commands.run("python3 -m http.server 8000 -d /home/user/site", background=True)
    url = sbx.get_host(8000)
    assert url.endswith(f"/sandboxes/{sbx.sandbox_id}/ports/8000")
    answer = httpx.get(f"{url}/index.html", headers={"X-API-Key": API_KEY})
    for _ in range(100):
        if answer.status_code != 502:
            break
        time.sleep(0.2)
        answer = httpx.get(f"{url}/index.html", headers={"X-API-Key": API_KEY})
    assert answer.status_code == 200 and answer.text == "<h1>declaw</h1>"
    assert answer.headers["content-security-policy"] == "sandbox"
    assert httpx.get(f"{url}/index.html").status_code == 401


def test_traffic_access_token_for_a_sandbox_without_public_traffic(where: dict[str, str]) -> None:
    """declaw's `SandboxNetworkOpts(allow_public_traffic=False)`: the create's answer carries the
    token (declaw's SDK keeps it as `traffic_access_token`); the sandbox's servers need it in
    `e2b-traffic-access-token`, the API key alone is not enough."""
    import httpx

    sandbox = declaw.Sandbox.create(network=declaw.SandboxNetworkOpts(allow_public_traffic=False), **where)
    try:
        token = sandbox.traffic_access_token
        assert token
        sandbox.commands.run("python3 -m http.server 8000 -d /tmp", background=True)
        url = f"{sandbox.get_host(8000)}/"
        key = {"X-API-Key": API_KEY}
        answer = httpx.get(url, headers={**key, "e2b-traffic-access-token": token})
        for _ in range(100):
            if answer.status_code != 502:
                break
            time.sleep(0.2)
            answer = httpx.get(url, headers={**key, "e2b-traffic-access-token": token})
        assert answer.status_code == 200
        assert httpx.get(url, headers=key).status_code == 403
    finally:
        sandbox.kill()
