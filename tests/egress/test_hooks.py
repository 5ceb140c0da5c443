"""The content-guard hook (a small guard of the test's own, written to the Protocol), run_code
cells sharing a pooled connection, and the async twin of audit_events."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import pytest

from declaw_wasm import testing
from declaw_wasm import AsyncSandbox
from declaw_wasm._guard.contract import BlockResponse, ContentGuard, Headers, RequestOutcome

from .conftest import outcome
from .upstream import Upstreams

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


class _Filter:
    def __init__(self, headers: Headers) -> None:
        self.headers = headers + [("X-Filtered", "1")]
        self.counts = {"transformations_applied": 1}
        self.tail = b""

    def feed(self, chunk: bytes) -> bytes:  # holds back a possible partial match
        data = (self.tail + chunk).replace(b"HELLO", b"hello!")
        self.tail = data[-4:]
        return data[:-4]

    def end(self) -> bytes:
        return self.tail


class TagGuard:
    """Uppercases bodies to /guarded, blocks /blocked, rewrites HELLO in responses."""

    def wants_request_body(self, host: str, method: str, url: str, headers: Headers) -> bool:
        return "/guarded" in url or "/blocked" in url

    def request(self, host: str, method: str, url: str, headers: Headers, body: bytes) -> RequestOutcome:
        if "/blocked" in url:
            return RequestOutcome(headers, body, BlockResponse(403, [("Content-Type", "text/plain")], b"no\n"),
                                  {"injection_blocks": 1})
        return RequestOutcome(headers + [("X-Guarded", host)], body.upper(), counts={"pii_redactions": 2})

    def wants_response_body(self, host: str, method: str, url: str, status: int, headers: Headers) -> bool:
        return "/guarded" in url or "/gzip" in url

    def response(self, host: str, method: str, url: str, status: int, headers: Headers) -> _Filter:
        return _Filter(headers)


def test_the_guard_hook(make: Callable[..., Any], up: Upstreams) -> None:
    assert isinstance(TagGuard(), ContentGuard)
    sbx = make()
    testing.egress_of(sbx).guard = TagGuard()
    got = outcome(sbx, """
import json, requests
r = requests.post("https://api.openai.com/guarded", data="hello " * 5000)
g = requests.get("https://api.openai.com/gzip", headers={"X-Say": "HELLO"})
b = requests.post("https://api.openai.com/blocked", data="x")
s = requests.post("https://api.openai.com/streamed", data="hello")
print(json.dumps({"guarded": [r.headers.get("X-Filtered"), r.json()["body"][:20]],
                  "gzip": [g.headers.get("Content-Encoding"), g.json()["headers"]["X-Say"]],
                  "blocked": [b.status_code, b.text], "streamed": s.json()["body"]}))
""")
    assert got["guarded"] == ["1", "hello! hello! hello!"]
    assert got["gzip"] == [None, "hello!"]
    assert got["blocked"] == [403, "no\n"]
    assert got["streamed"] == "hello"
    seen = {r.path: r for r in up.records()}
    assert seen["/guarded"].body == b"HELLO " * 5000 and seen["/guarded"].header("X-Guarded") == "api.openai.com"
    assert "/blocked" not in seen
    events = {e.url.rsplit("/", 1)[-1]: e for e in sbx.audit_events() if e.kind == "request"}
    assert events["guarded"].pii_redactions == 2 and events["guarded"].transformations_applied == 1
    assert events["blocked"].injection_blocks == 1 and events["blocked"].decision == "denied"


def test_run_code_cells_share_a_pooled_connection(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    first = sbx.run_code("import requests\ns = requests.Session()\ns.get('https://api.openai.com/cell1').status_code")
    second = sbx.run_code("s.get('https://api.openai.com/cell2').json()['path']")
    assert first.error is None and first.text == "200"
    assert second.error is None and second.text in ("/cell2", "'/cell2'")
    ports = [r.client_port for r in up.records() if r.path in ("/cell1", "/cell2")]
    assert len(ports) == 2 and ports[0] == ports[1]


def test_async_sandbox_audit_events(up: Upstreams) -> None:
    async def main() -> list[Any]:
        sbx = await AsyncSandbox.create(timeout=120, network={"allow_out": ["api.openai.com"]})
        try:
            await sbx.commands.run("python3 -c \"import urllib.request as u; u.urlopen('http://api.openai.com/a')\"")
            return await sbx.audit_events()
        finally:
            await sbx.kill()

    events = asyncio.run(main())
    assert [e.kind for e in events] == ["dns", "connection", "request"]
    assert json.loads(events[-1].model_dump_json())["status_code"] == 200
