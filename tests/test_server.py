"""`declaw-wasm serve` and remote mode: what only a server has (auth, size limits, streams that
break, many clients) and the sandbox lifecycle through it. The API itself runs in both modes in
the other modules (tests marked `served`, tests/conftest.py)."""

from __future__ import annotations

import gzip
import io
import threading
import time
from typing import Any, Callable, Iterator

import anyio
import httpx
import pytest

from conftest import API_KEY, UPLOAD_LIMIT  # noqa: E402 (tests/ is on sys.path)
from declaw_wasm import (AsyncSandbox, AuthenticationException, CommandExitException, InvalidArgumentException,
                         NotFoundException, PtySize, Sandbox, SandboxException,
                         SandboxNotFoundException, TimeoutException)
from declaw_wasm.cli import main as cli_main
from declaw_wasm import testing
from declaw_wasm._remote.connection import base_url
from declaw_wasm.server import check_bind
from waiting import until  # tests/ is on sys.path


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the server's own behaviour does not depend on the guest path


@pytest.fixture
def api(server_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server_url, headers={"X-API-Key": API_KEY}, timeout=30) as client:
        yield client


def test_openapi_document_lists_the_api(api: httpx.Client) -> None:
    doc = api.get("/openapi.json").json()
    paths = doc["paths"]
    for path in ("/sandboxes", "/sandboxes/{sandbox_id}", "/sandboxes/{sandbox_id}/files",
                 "/sandboxes/{sandbox_id}/commands", "/sandboxes/{sandbox_id}/commands/stream",
                 "/sandboxes/{sandbox_id}/pty/{pid}/stream", "/sandboxes/{sandbox_id}/stdio",
                 "/sandboxes/kill-many", "/declaw-wasm/sandboxes/{sandbox_id}/execute",
                 "/declaw-wasm/sandboxes/{sandbox_id}/contexts", "/declaw-wasm/sandboxes/{sandbox_id}/commands"):
        assert path in paths
    assert not [p for p in paths if "/execute" in p and not p.startswith("/declaw-wasm/")]
    assert "SandboxInfo" in doc["components"]["schemas"]


def test_every_request_needs_the_key(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECLAW_API_KEY", raising=False)
    with pytest.raises(AuthenticationException):
        Sandbox.create(domain=server_url)
    with pytest.raises(AuthenticationException):
        Sandbox.create(domain=server_url, api_key="wrong-" + API_KEY)
    for headers in ({}, {"X-API-Key": "nope"}, {"Authorization": "Bearer nope"}):
        for method, path in (("GET", "/health"), ("GET", "/openapi.json"), ("GET", "/sandboxes")):
            response = httpx.request(method, server_url + path, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"] == "AuthenticationException"
    ok = httpx.get(server_url + "/sandboxes", headers={"Authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200


@pytest.mark.guest
def test_the_key_comes_from_the_environment(server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_DOMAIN", server_url)
    monkeypatch.setenv("DECLAW_API_KEY", API_KEY)
    with Sandbox.create() as sbx:
        assert not testing.is_local(sbx)
        assert sbx.commands.run("echo from-env").stdout == "from-env\n"


def test_the_servers_environment_never_reaches_a_guest(served_sbx: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_API_KEY", "sk-served-secret")  # the server runs in this process
    r = served_sbx.commands.run("env; python3 -c 'import os; print(dict(os.environ))'")
    assert "sk-served-secret" not in r.stdout and "DECLAW_API_KEY" not in r.stdout
    assert "sk-served-secret" not in str(served_sbx.run_code("import os; dict(os.environ)").text)


def test_no_key_means_loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "a-key")
    monkeypatch.delenv("DECLAW_API_KEY", raising=False)
    with pytest.raises(SystemExit, match="without an API key"):
        cli_main(["serve", "--host", "0.0.0.0", "--port", "1"])


def test_domain_forms() -> None:
    assert base_url("localhost:8080") == "http://localhost:8080"
    assert base_url("127.0.0.1:9") == "http://127.0.0.1:9"
    assert base_url("sandboxes.example.com:443") == "https://sandboxes.example.com:443"
    assert base_url("http://10.0.0.5:8080/") == "http://10.0.0.5:8080"
    with pytest.raises(InvalidArgumentException):
        base_url("ftp://x")


def test_oversize_uploads_and_bodies_are_refused(served_sbx: Sandbox, api: httpx.Client) -> None:
    big = b"x" * (UPLOAD_LIMIT + 1)
    with pytest.raises(InvalidArgumentException, match="larger than"):
        served_sbx.files.write("/tmp/too-big.bin", big)  # a declared Content-Length
    with pytest.raises(InvalidArgumentException, match="larger than"):
        served_sbx.files.write("/tmp/too-big.bin", io.BytesIO(big))  # chunked: counted as it comes
    assert not served_sbx.files.exists("/tmp/too-big.bin")  # nothing half-written
    response = api.post(f"/declaw-wasm/sandboxes/{served_sbx.sandbox_id}/execute",
                        content=b'{"code": "' + b"1" * (17 << 20) + b'"}',
                        headers={"content-type": "application/json"})
    assert response.status_code == 413 and response.json()["error"] == "InvalidArgumentException"
    chunked = api.post(f"/declaw-wasm/sandboxes/{served_sbx.sandbox_id}/execute",  # no Content-Length
                       content=iter([b'{"code": "', b"1" * (17 << 20), b'"}']),
                       headers={"content-type": "application/json"})
    assert chunked.status_code == 413 and chunked.json()["error"] == "InvalidArgumentException"
    served_sbx.files.write("/tmp/just-fits.bin", io.BytesIO(b"y" * UPLOAD_LIMIT))
    assert served_sbx.files.get_info("/tmp/just-fits.bin").size == UPLOAD_LIMIT


def test_streaming_is_real(served_sbx: Sandbox) -> None:
    seen: list[float] = []
    start = time.monotonic()
    result = served_sbx.commands.run("echo a; sleep 2; echo b",
                                     on_stdout=lambda _: seen.append(time.monotonic() - start))
    assert result.stdout == "a\nb\n"
    assert seen[0] < 1.0 and seen[-1] > 1.9 and time.monotonic() - start > 1.9


def test_a_client_disconnecting_mid_stream_leaves_the_server_healthy(served_sbx: Sandbox, api: httpx.Client) -> None:
    base = f"/sandboxes/{served_sbx.sandbox_id}"
    ours = "/declaw-wasm" + base
    with api.stream("POST", ours + "/commands", json={"cmd": "echo up; sleep 30", "timeout": 0}) as r:
        lines = r.iter_lines()
        assert '"start"' in next(lines) and "up" in next(lines)
    # a foreground command whose client is gone is killed (our NDJSON run, declaw's JSON run)
    until(lambda: not any(p.cmd == "echo up; sleep 30" for p in served_sbx.commands.list()))
    with pytest.raises(httpx.ReadTimeout):
        api.post(base + "/commands", json={"cmd": "echo json; sleep 31", "timeout": 0}, timeout=1)
    until(lambda: not any(p.cmd == "echo json; sleep 31" for p in served_sbx.commands.list()))
    with api.stream("POST", ours + "/execute", json={"code": "print('x', flush=True)\nimport time\n"
                                                             "time.sleep(1)\ny = 5"}) as r:
        assert '"stdout"' in next(r.iter_lines())
    served_sbx.files.write("/tmp/three-mib.bin", b"z" * (3 << 20))
    with api.stream("GET", base + "/files", params={"path": "/tmp/three-mib.bin"}) as r:
        next(r.iter_bytes())
    assert served_sbx.commands.run("echo still fine").stdout == "still fine\n"
    assert served_sbx.run_code("y").text == "5"  # the abandoned cell finished


def test_twenty_concurrent_clients_and_a_slow_guest(make_served: Callable[..., Sandbox]) -> None:
    slow = make_served()
    slow_handle = slow.commands.run("python3 -c 'while True: pass'", background=True, timeout=0)
    errors: list[BaseException] = []
    times: list[float] = []

    def client(i: int) -> None:
        try:
            start = time.monotonic()
            with make_served() as sbx:
                sbx.files.write(f"/tmp/who-{i}.txt", f"client {i}")
                r = sbx.commands.run(f"cat /tmp/who-{i}.txt; echo; python3 -c 'print({i} * 2)'")
                assert r.stdout == f"client {i}\n{i * 2}\n", r
                assert sbx.files.read(f"/tmp/who-{i}.txt") == f"client {i}"
            times.append(time.monotonic() - start)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(times) == 20 and max(times) < 60
    assert slow_handle.kill()
    with pytest.raises(CommandExitException) as killed:
        slow_handle.wait()
    assert killed.value.exit_code == 137
    slow.kill()


def test_lifecycle_through_the_server(make_served: Callable[..., Sandbox], server_url: str) -> None:
    sbx = make_served(metadata={"owner": "served"}, timeout=60)
    params: dict[str, Any] = {"domain": server_url, "api_key": API_KEY}
    info = sbx.get_info()
    assert (info.sandbox_id, info.template_id, info.metadata) == (sbx.sandbox_id, "code-interpreter",
                                                                    {"owner": "served"})
    assert sbx.sandbox_id in [i.sandbox_id for i in Sandbox.list(**params).next_items()]
    assert Sandbox.get_info(sbx.sandbox_id, **params).sandbox_id == sbx.sandbox_id
    again = Sandbox.connect(sbx.sandbox_id, **params)
    again.files.write("/tmp/shared", "same")
    assert sbx.files.read("/tmp/shared") == "same" and sbx.is_running()
    sbx.set_timeout(1)
    time.sleep(1.5)
    assert not sbx.is_running()
    with pytest.raises(TimeoutException, match="reached its timeout"):
        sbx.files.read("/tmp/shared")
    with make_served() as other:
        assert Sandbox.kill(other.sandbox_id, **params) is True
        assert Sandbox.kill(other.sandbox_id, **params) is False
        with pytest.raises(SandboxNotFoundException):
            other.commands.run("echo gone")
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect("sbx_" + "0" * 32, **params)
    assert len(sbx.sandbox_id) == 4 + 32  # 128 random bits


def test_errors_keep_their_class(served_sbx: Sandbox, make_served: Callable[..., Sandbox]) -> None:
    with pytest.raises(InvalidArgumentException, match="unknown template"):
        make_served(template="no-such-template")
    with pytest.raises(InvalidArgumentException, match="may not exceed"):
        from declaw_wasm import Limits
        make_served(limits=Limits(memory_limit=4 << 30))
    with pytest.raises(NotFoundException):
        served_sbx.commands.connect(99999)
    with pytest.raises(TimeoutException) as info:
        served_sbx.commands.run("echo partial; sleep 10", timeout=1)
    assert info.value.stdout == "partial\n"
    with pytest.raises(TimeoutException):
        served_sbx.run_code("import time; time.sleep(10)", timeout=1)
    with pytest.raises(InvalidArgumentException, match="only python and bash"):
        served_sbx.run_code("1", language="r")
    with pytest.raises(InvalidArgumentException, match="PtySize"):
        served_sbx.pty.create(None)  # type: ignore[arg-type]  # wrong on purpose
    with pytest.raises(NotFoundException):
        served_sbx.pty.connect(99999)


@pytest.mark.guest
def test_async_sandbox_through_the_server(server_url: str) -> None:
    async def main() -> None:
        sbx = await AsyncSandbox.create(domain=server_url, api_key=API_KEY)
        try:
            seen: list[str] = []

            async def on_stdout(text: str) -> None:
                seen.append(text)

            r = await sbx.commands.run("echo one; echo two", on_stdout=on_stdout)
            # the output streams to the callback; how it is cut into chunks is not a contract
            # (under load the server's stream may carry both lines in one)
            assert (r.stdout, "".join(seen)) == ("one\ntwo\n", "one\ntwo\n") and seen
            handle = await sbx.commands.run("cat", background=True, stdin=True)
            await handle.send_stdin("piped\n")
            await handle.close_stdin()
            assert (await handle.wait()).stdout == "piped\n" and handle.exit_code == 0
            await sbx.files.write("/tmp/async.txt", "abc")
            chunks = [c async for c in await sbx.files.read("/tmp/async.txt", format="stream")]
            assert b"".join(chunks) == b"abc"
            execution = await sbx.run_code("print('hi'); 6 * 7")
            assert (execution.text, execution.logs.stdout) == ("42", ["hi\n"])
            assert (await sbx.get_info()).sandbox_id == sbx.sandbox_id
            data: list[bytes] = []
            pty = await sbx.pty.create(PtySize(24, 80), on_data=data.append)
            await sbx.pty.send_stdin(pty.pid, b"echo async-pty\nexit\n")
            await pty.wait()
            assert b"async-pty\r\n" in b"".join(data)
        finally:
            assert await sbx.kill() is True

    anyio.run(main)


@pytest.mark.guest
def test_the_seed_example_prints_the_same_when_served(server_url: str) -> None:
    """examples/code_interpreter.py, run as a user would with DECLAW_DOMAIN set: a separate
    process that only talks HTTP (it never loads the runtime)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "code_interpreter.py"
    env = {**os.environ, "DECLAW_DOMAIN": server_url, "DECLAW_API_KEY": API_KEY}
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:6] == ["--- snippet 0: exit 0", "solution: {x: 13/7, y: 11/7}",
                         "--- snippet 1: exit 0", "{'APAC': 150, 'EU': 80}",
                         "--- snippet 2: exit 0", "wrote /tmp/chart.png"]
    assert 10_000 < int(lines[6].split(":")[1].split()[0]) < 200_000


def test_pty_over_a_raw_websocket(served_sbx: Sandbox, server_url: str) -> None:
    """The socket alone is enough for a terminal client: stdin and resizes go up it too."""
    from websockets.sync.client import connect

    base = f"/sandboxes/{served_sbx.sandbox_id}/pty"
    pid = httpx.post(server_url + base, json={"size": {"rows": 24, "cols": 80}},
                     headers={"X-API-Key": API_KEY}).json()["pid"]
    ws_url = server_url.replace("http", "ws", 1) + f"/declaw-wasm{base}/{pid}"
    with connect(ws_url, additional_headers={"X-API-Key": API_KEY}) as socket:
        output = b""

        def readuntil(marker: bytes) -> None:
            nonlocal output
            while marker not in output:
                message = socket.recv(timeout=10)
                assert isinstance(message, bytes), message
                output += message

        readuntil(b"$ ")
        socket.send('{"type": "resize", "rows": 30, "cols": 99}')
        socket.send(b"tput cols; exit 4\n")
        readuntil(b"99\r\n")
        end = socket.recv(timeout=10)
        while isinstance(end, bytes):
            end = socket.recv(timeout=10)
        assert '"exit_code":4' in end.replace(" ", "")
    from websockets.exceptions import InvalidHandshake

    with pytest.raises(InvalidHandshake):  # no key: the handshake is refused
        connect(ws_url).__enter__()


@pytest.mark.guest
def test_stopping_the_server_kills_its_sandboxes() -> None:
    from declaw_wasm.server import serve_in_thread

    def live() -> set[str]:
        return {info.sandbox_id for info in Sandbox.list()}

    with serve_in_thread("short-lived", grace=0.5) as url:
        sbx = Sandbox.create(domain=url, api_key="short-lived")
        handle = sbx.commands.run("sleep 60", background=True, timeout=0)
        assert sbx.sandbox_id in live()
    assert sbx.sandbox_id not in live()  # killed, host folder gone
    with pytest.raises(SandboxException):
        handle.wait()



# -- declaw's wire, as its SDKs speak it (the SDKs themselves: tests/test_declaw_sdk.py) ----------
@pytest.mark.guest
def test_declaw_shapes_at_declaws_paths(api: httpx.Client) -> None:
    made = api.post("/sandboxes", json={"template": "base", "timeout": 60, "secure": True, "user": "x",
                                        "network": {"allow_out": ["pypi.org"]}, "unknown": 1})
    assert made.status_code == 201, made.text
    sid = made.json()["sandbox_id"]
    base = f"/sandboxes/{sid}"
    listed = api.get("/sandboxes").json()
    assert set(listed) == {"sandboxes", "next_token"} and sid in [s["sandbox_id"] for s in listed["sandboxes"]]
    assert api.get(base + "/status").json() == {"is_running": True}
    assert api.patch(base + "/timeout", json={"timeout": 120}).status_code == 204
    run = api.post(base + "/commands", json={"cmd": "echo out; echo err >&2; exit 3", "user": "user"})
    assert run.json() == {"stdout": "out\n", "stderr": "err\n", "exit_code": 3, "error": None}
    pid = api.post(base + "/commands", json={"cmd": "cat", "background": True, "stdin": True}).json()["pid"]
    assert api.post(f"{base}/commands/{pid}/stdin", json={"data": "fed\n"}).status_code == 204
    assert pid in [p["pid"] for p in api.get(base + "/commands").json()]
    assert api.delete(f"{base}/commands/{pid}").json()["killed"] is True
    assert api.get(f"{base}/commands/{pid}/wait").json()["exit_code"] == 137
    with api.stream("POST", base + "/commands/stream", json={"cmd": "printf 'a\\nb'", "stream": True}) as r:
        events = [line for line in r.iter_lines() if line.startswith("data:")]
    assert events == ['data: {"type":"stdout","data":"a"}', 'data: {"type":"stdout","data":"b"}',
                      'data: {"exit_code":0}']
    slow = api.post(base + "/commands", json={"cmd": "echo so-far; sleep 5", "timeout": 1})
    assert slow.status_code == 408 and slow.json()["code"] == "timeout" and slow.json()["stdout"] == "so-far\n"
    missing = api.get(base + "/files", params={"path": "/tmp/none"})
    assert missing.status_code == 404 and set(missing.json()) >= {"error", "message", "code"}
    assert api.get("/sandboxes/sbx_nope/status").json() == {"is_running": False}
    assert api.get(base + "/metrics").json()[0]["disk_usage_mb"] >= 0
    assert api.delete(base + "?async=true").json()["queued"] is True
    assert api.post("/sandboxes/kill-many", json={"sandbox_ids": [sid]}).json() == {
        "results": {sid: {"error": "sandbox not found"}}}


def test_gzip_travels_both_ways(served_sbx: Sandbox, api: httpx.Client) -> None:
    data = b"compress me " * 10_000
    info = served_sbx.files.write("/tmp/gz.bin", data, gzip=True)
    assert info.size == len(data)
    assert served_sbx.files.read("/tmp/gz.bin", format="bytes", gzip=True) == data
    raw = api.get(f"/sandboxes/{served_sbx.sandbox_id}/files", params={"path": "/tmp/gz.bin"},
                  headers={"accept-encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip" and raw.content == data  # httpx decodes
    bad = api.put(f"/sandboxes/{served_sbx.sandbox_id}/files/raw", params={"path": "/tmp/bad.gz"},
                  content=b"not gzip", headers={"content-encoding": "gzip"})
    assert bad.status_code == 400 and not served_sbx.files.exists("/tmp/bad.gz")
    # a body of two gzip members is all written; one cut inside a member is refused
    two = api.put(f"/sandboxes/{served_sbx.sandbox_id}/files/raw", params={"path": "/tmp/two.bin"},
                  content=gzip.compress(data) + gzip.compress(b"and more"), headers={"content-encoding": "gzip"})
    assert two.status_code < 300 and served_sbx.files.read("/tmp/two.bin", format="bytes") == data + b"and more"
    cut = api.put(f"/sandboxes/{served_sbx.sandbox_id}/files/raw", params={"path": "/tmp/cut.bin"},
                  content=gzip.compress(data)[:-6], headers={"content-encoding": "gzip"})
    assert cut.status_code == 400 and "ends inside a gzip stream" in cut.text, cut.text


def test_a_raw_create_with_a_flag_that_is_not_a_bool_is_refused(api: httpx.Client) -> None:
    """`allow_internet_access` is a JSON bool: "no", "off" or 0 from a client that is not ours
    is refused naming the field (it was read as False), as the SDKs refuse it."""
    for value in ("no", "off", 0, "false"):
        answer = api.post("/sandboxes", json={"allow_internet_access": value})
        assert answer.status_code in (400, 422), (value, answer.status_code, answer.text)
        assert "allow_internet_access" in answer.text
