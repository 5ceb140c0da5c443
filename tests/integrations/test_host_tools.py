"""Host tools ("code mode"): sandboxed code calls functions of this process through the door
(`from declaw_tools import search`), sync and awaited; async host functions; exceptions come
back with their message only; a call counts against the cell's timeout and stops on kill(); the
door's size limits; every call audited; in-process and in a process pool; refused where the
callables cannot be reached (served mode, Ray). And cells' top-level `await`."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator

import pytest
from conftest import API_KEY  # tests/ is on sys.path

from declaw_wasm import (AsyncSandbox, InvalidArgumentException, Sandbox, SandboxException,
                         TimeoutException)
from declaw_wasm._pool.pool import ProcessPool


@dataclass
class Hit:
    title: str
    score: float


def search(q: str, limit: int = 2) -> list[dict[str, Any]]:
    """Search the index."""
    return [{"title": f"{q} {i}", "score": 1.0 / (i + 1), "raw": b"\x00\x01"} for i in range(limit)]


def failing(kind: str) -> None:
    if kind == "value":
        raise ValueError("bad query")
    if kind == "key":
        raise KeyError("missing")

    class QuotaExceeded(Exception):
        pass

    raise QuotaExceeded("over quota at /srv/secret/path.py")


@pytest.fixture
def sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600, tools={"search": search, "failing": failing,
                                                 "hits": lambda n: [Hit(f"t{i}", i / 2) for i in range(n)]})
    yield sandbox
    sandbox.kill()


def _value(sandbox: Sandbox, code: str, **kwargs: Any) -> Any:
    execution = sandbox.run_code(code, **kwargs)
    assert execution.error is None, execution.error
    return execution.text


def test_a_sync_call_returns_the_hosts_value(sbx: Sandbox) -> None:
    assert eval(_value(sbx, "from declaw_tools import search\nsearch('wasm', limit=2)")) == search("wasm", 2)
    # pydantic-able values (dataclasses here) arrive as plain data; numpy arguments as numbers
    assert eval(_value(sbx, "from declaw_tools import hits\nhits(2)")) == \
        [{"title": "t0", "score": 0.0}, {"title": "t1", "score": 0.5}]
    assert _value(sbx, "import numpy as np\nfrom declaw_tools import search\n"
                       "len(search(q=str(np.int64(3)), limit=np.int64(3)))") == "3"
    assert _value(sbx, "import declaw_tools\nsorted(declaw_tools.available())") == "['failing', 'hits', 'search']"
    assert "Search the index." in _value(sbx, "import declaw_tools\ndeclaw_tools.search.__doc__")


@pytest.mark.guest
def test_await_and_gather_run_calls_at_once() -> None:
    def slow(x: int) -> int:
        time.sleep(0.5)
        return x * 2

    with Sandbox.create(tools={"slow": slow}) as sbx:
        code = ("import asyncio, time\nfrom declaw_tools import slow\nstart = time.monotonic()\n"
                "values = await asyncio.gather(*(slow(i) for i in range(4)))\n"
                "one = await slow(10)\n(values, one, time.monotonic() - start)")
        values, one, took = eval(_value(sbx, code))
        assert values == [0, 2, 4, 6] and one == 20
        assert took < 1.6  # four gathered half-second calls at once, then one more (serial: 2.5 s)
    with Sandbox.create(tools={"double": lambda x: 2 * x}) as sbx:  # past 64 at once: they queue
        assert _value(sbx, "import asyncio\nfrom declaw_tools import double\n"
                           "sum(await asyncio.gather(*(double(i) for i in range(300))))") == str(300 * 299)
        # in code that awaits, a call is a coroutine; one never awaited is named in the warning
        execution = sbx.run_code("import asyncio, gc\nfrom declaw_tools import double\nx = double(2)\n"
                                 "await asyncio.sleep(0)\ndel x\ngc.collect()\n")
        assert "coroutine 'double' was never awaited" in "".join(execution.logs.stderr)


@pytest.mark.guest
def test_async_host_functions() -> None:
    async def fetch(url: str) -> str:
        await asyncio.sleep(0.01)
        return f"page {url}"

    with Sandbox.create(tools=[fetch]) as sbx:  # a list names tools by __name__
        assert _value(sbx, "from declaw_tools import fetch\nfetch('a')") == "page a"
        assert _value(sbx, "from declaw_tools import fetch\nawait fetch('b')") == "page b"


@pytest.mark.guest
@pytest.mark.anyio
async def test_async_face_runs_coroutine_tools_on_its_own_loop() -> None:
    loops: list[Any] = []

    async def where() -> str:
        loops.append(asyncio.get_running_loop())
        return "here"

    sbx = await AsyncSandbox.create(tools={"where": where})
    try:
        execution = await sbx.run_code("from declaw_tools import where\nwhere()")
        assert execution.text == "here"
        execution = await sbx.run_code("from declaw_tools import cell_only\ncell_only(2)",
                                       tools={"cell_only": lambda n: n + 1})
        assert execution.text == "3"
    finally:
        await sbx.kill()
    assert loops == [asyncio.get_running_loop()]


def test_exceptions_come_back_with_their_message_only(sbx: Sandbox) -> None:
    code = ("from declaw_tools import failing, ToolError\nseen = []\n"
            "for kind in ('value', 'key', 'custom'):\n"
            "    try:\n        failing(kind)\n"
            "    except ToolError as exc:\n        seen.append(('ToolError', exc.type_name, str(exc)))\n"
            "    except Exception as exc:\n        seen.append((type(exc).__name__, exc.args[0]))\n"
            "seen")
    assert eval(_value(sbx, code)) == [("ValueError", "bad query"), ("KeyError", "missing"),
                                       ("ToolError", "QuotaExceeded", "over quota at /srv/secret/path.py")]
    error = sbx.run_code("from declaw_tools import failing\nfailing('value')").error
    assert error is not None and error.name == "ValueError" and error.value == "bad query"
    assert __file__ not in error.traceback and "declaw_wasm" not in error.traceback  # no host frames


@pytest.mark.guest
def test_a_blocking_tool_counts_against_the_cells_timeout() -> None:
    release = threading.Event()
    with Sandbox.create(tools={"block": lambda: release.wait(60)}) as sbx:
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sbx.run_code("from declaw_tools import block\nblock()", timeout=1)
        assert time.monotonic() - start < 3
        release.set()
        assert sbx.run_code("1 + 1").text == "2"  # the context starts afresh


@pytest.mark.guest
def test_kill_stops_a_cell_waiting_for_a_tool() -> None:
    started, release = threading.Event(), threading.Event()

    def block() -> None:
        started.set()
        release.wait(60)

    sbx = Sandbox.create(tools={"block": block})
    outcome: list[Any] = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(sbx, "from declaw_tools import block\nblock()")))
    thread.start()
    try:
        assert started.wait(30)
        start = time.monotonic()
        assert sbx.kill()
        thread.join(10)
        assert time.monotonic() - start < 3 and not thread.is_alive()
        assert isinstance(outcome[0], SandboxException)
    finally:
        release.set()


def _outcome(sbx: Sandbox, code: str, tools: Any = None) -> Any:
    try:
        return sbx.run_code(code, timeout=120, tools=tools)
    except Exception as exc:
        return exc


@pytest.mark.guest
def test_the_doors_size_limit_holds_both_ways() -> None:
    with Sandbox.create(tools={"echo": lambda data: len(data), "big": lambda: b"x" * (17 << 20)}) as sbx:
        code = ("from declaw_tools import echo, big, ToolError\nout = []\n"
                "for call in (lambda: echo(b'y' * (17 << 20)), big):\n"
                "    try:\n        call()\n"
                "    except (ToolError, ValueError) as exc:\n        out.append(str(exc))\n"
                "out.append(echo(b'z' * (1 << 20)))\nout")
        too_big_args, too_big_result, fine = eval(_value(sbx, code))
        assert "the door carries at most 16777216" in too_big_args
        assert "the result of host tool 'big'" in too_big_result and "at most 16777216" in too_big_result
        assert fine == 1 << 20


@pytest.mark.guest
def test_values_that_cannot_cross_raise_in_the_guest() -> None:
    with Sandbox.create(tools={"opaque": lambda: threading.Lock()}) as sbx:
        error = sbx.run_code("from declaw_tools import opaque\nopaque()").error
        assert error is not None and error.name == "TypeError" and "cannot cross to the sandbox" in error.value
        error = sbx.run_code("from declaw_tools import opaque\nopaque(object())").error
        assert error is not None and error.name == "ToolError" and "cannot cross to the host" in error.value


def test_every_call_is_audited(sbx: Sandbox) -> None:
    sbx.run_code("from declaw_tools import nope", tools={"nope": lambda: None})
    sbx.run_code("from declaw_tools import search, failing\nsearch('a')\ntry:\n    failing('value')\n"
                 "except ValueError:\n    pass\ntry:\n    nope()\nexcept Exception:\n    pass")
    tools = [e for e in sbx.audit_events() if e.kind == "tool"]
    assert [(e.url, e.decision, e.error) for e in tools] == [
        ("tool:search", "allowed", ""), ("tool:failing", "allowed", "bad query"),
        ("tool:nope", "denied", "")]
    assert tools[0].method == "TOOL" and tools[0].bytes_out > 0 and tools[0].bytes_in > 50
    assert tools[0].duration_ms >= 0 and "no host tool named 'nope'" in tools[2].reason


def test_cell_tools_last_for_their_cell_and_commands_see_the_sandboxs(sbx: Sandbox) -> None:
    assert _value(sbx, "from declaw_tools import double\ndouble(4)", tools={"double": lambda x: 2 * x}) == "8"
    error = sbx.run_code("double(5)").error  # the name is still bound; the tool is gone
    assert error is not None and "no host tool named 'double'" in error.value
    # a cell's tools come before the sandbox's of the same name
    assert _value(sbx, "from declaw_tools import search\nsearch('x')", tools={"search": lambda q: q}) == "x"
    result = sbx.commands.run(
        "python3 -c \"from declaw_tools import search; print(search('cmd', limit=1)[0]['title'])\"")
    assert result.stdout == "cmd 0\n"


def test_tools_are_checked() -> None:
    for bad in ({"not a name": search}, {"class": search}, {"available": search}, {"x": 3}, "search"):
        with pytest.raises(InvalidArgumentException):
            Sandbox.create(tools=bad)


@pytest.mark.guest
def test_top_level_await_in_cells() -> None:
    with Sandbox.create() as sbx:
        assert _value(sbx, "import asyncio\nawait asyncio.sleep(0.01)\nx = await asyncio.sleep(0, result=5)\nx") == "5"
        # the context keeps one event loop: a task started in one cell runs on in the next
        _value(sbx, "import asyncio\nasync def tick():\n    await asyncio.sleep(0.2)\n    return 'ticked'\n"
                    "task = asyncio.create_task(tick())\nawait asyncio.sleep(0)")
        assert _value(sbx, "await task") == "ticked"
        assert _value(sbx, "sum(i for i in range(4))") == "6"  # plain cells stay plain


@pytest.mark.guest
def test_in_a_process_pool_the_calls_come_back_here() -> None:
    seen: list[tuple[str, int]] = []
    release = threading.Event()

    def note(word: str) -> int:
        seen.append((word, threading.get_ident()))
        return len(word)

    pool = ProcessPool(1)
    try:
        sbx = Sandbox.create(backend=pool, tools={"note": note})
        assert _value(sbx, "from declaw_tools import note\nnote('ab')") == "2"
        assert _value(sbx, "from declaw_tools import note\nawait note('abc')") == "3"
        assert _value(sbx, "from declaw_tools import shout\nshout('hi')", tools={"shout": str.upper}) == "HI"
        assert [w for w, _ in seen] == ["ab", "abc"]  # called in this process
        assert [e.url for e in sbx.audit_events() if e.kind == "tool"] == ["tool:note", "tool:note", "tool:shout"]
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sbx.run_code("from declaw_tools import block\nblock()", timeout=1,
                         tools={"block": lambda: release.wait(60)})
        assert time.monotonic() - start < 4
        assert sbx.run_code("1 + 1").text == "2"
        outcome: list[Any] = []
        started = threading.Event()

        def block() -> bool:
            started.set()
            return release.wait(60)

        blocking = {"block": block}
        thread = threading.Thread(target=lambda: outcome.append(
            _outcome(sbx, "from declaw_tools import block\nblock()", blocking)))
        thread.start()
        assert started.wait(30)
        start = time.monotonic()
        assert sbx.kill()  # the worker stops waiting for the parent's answer
        thread.join(10)
        assert not thread.is_alive() and time.monotonic() - start < 4
        assert isinstance(outcome[0], SandboxException)
    finally:
        release.set()
        pool.close()



@pytest.mark.guest
def test_served_mode_and_ray_refuse_tools(server_url: str) -> None:
    with pytest.raises(InvalidArgumentException, match="cannot reach a sandbox on a declaw-wasm server"):
        Sandbox.create(domain=server_url, api_key=API_KEY, tools={"search": search})
    sbx = Sandbox.create(domain=server_url, api_key=API_KEY)
    try:
        with pytest.raises(InvalidArgumentException, match="tools= .host callables. cannot reach"):
            sbx.run_code("1", tools={"search": search})
    finally:
        sbx.kill()
    from declaw_wasm._ray.sandboxes import RayLink
    from declaw_wasm._pool.client import refuse_host_only
    from declaw_wasm.sandbox import create_request, tool_spec

    request = create_request(None, None, None, None, {"tools": tool_spec({"search": search})}, {})
    with pytest.raises(InvalidArgumentException, match="cannot reach a sandbox on Ray"):
        refuse_host_only(request, "Ray")  # what RaySandboxes.create does first
    with pytest.raises(InvalidArgumentException, match="cannot reach a sandbox on Ray"):
        RayLink(None, "host-0").lend_tools(tool_spec({"search": search}))  # a cell's tools
