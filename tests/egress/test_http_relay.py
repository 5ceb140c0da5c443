"""The HTTP relay: requests are parsed and written anew, never forwarded as raw bytes. Smuggling
shapes, tunnels, upgrades and foreign Host headers are refused; non-HTTP bytes go only to
destinations an allow_out entry names."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from declaw_wasm import ALL_TRAFFIC

from .conftest import PROBE, outcome
from .upstream import Upstreams

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

EXCHANGE = PROBE + """
def exchange(payload, host="api.openai.com", port=80, tls=False, wait=3.0):
    s = socket.create_connection((host, port), timeout=wait)
    if tls:
        s = ssl.create_default_context().wrap_socket(s, server_hostname=host)
    s.sendall(payload)
    chunks = []
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
    except TimeoutError:
        pass
    s.close()
    return b"".join(chunks).decode("latin-1")
def status_lines(text):
    import re
    return re.findall(r"HTTP/1\\.1 [0-9]{3} [^\\r\\n]*", text)
out = {}
"""

CASES = {
    "cl_te": b"POST /a HTTP/1.1\r\nHost: api.openai.com\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: api.openai.com\r\n\r\n",
    "dup_cl": b"POST /a HTTP/1.1\r\nHost: api.openai.com\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"
              b"abcGET /smuggled HTTP/1.1\r\nHost: api.openai.com\r\n\r\n",
    "dup_cl_conflict": b"POST /a HTTP/1.1\r\nHost: api.openai.com\r\nContent-Length: 3\r\n"
                       b"Content-Length: 40\r\n\r\nabc",
    "te_te": b"POST /a HTTP/1.1\r\nHost: api.openai.com\r\nTransfer-Encoding: chunked\r\n"
             b"Transfer-Encoding: x\r\n\r\n0\r\n\r\n",
    "te_obfuscated": b"POST /a HTTP/1.1\r\nHost: api.openai.com\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    "folding": b"GET /a HTTP/1.1\r\nHost: api.openai.com\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n",
    "bare_lf": b"GET /a HTTP/1.1\nHost: api.openai.com\n\n",
    "dup_host": b"GET /a HTTP/1.1\r\nHost: api.openai.com\r\nHost: evil.com\r\n\r\n",
    "connect": b"CONNECT evil.com:443 HTTP/1.1\r\nHost: evil.com:443\r\n\r\n",
    "upgrade": b"GET /ws HTTP/1.1\r\nHost: api.openai.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
    "absolute": b"GET http://evil.com/ HTTP/1.1\r\nHost: api.openai.com\r\n\r\n",
    "foreign_host": b"GET /a HTTP/1.1\r\nHost: evil.com\r\n\r\n",
    "wrong_port": b"GET /a HTTP/1.1\r\nHost: api.openai.com:8080\r\n\r\n",
    "huge_head": b"GET /a HTTP/1.1\r\nHost: api.openai.com\r\nX-Big: " + b"a" * (80 << 10) + b"\r\n\r\n",
    "garbage": b"GET / HTTP/9.9\r\n\r\n",
}
EXPECTED = {"cl_te": 400, "dup_cl": 400, "dup_cl_conflict": 400, "te_te": 400, "te_obfuscated": 400,
            "folding": 400, "bare_lf": 400, "dup_host": 400, "connect": 405, "upgrade": 501,
            "absolute": 400, "foreign_host": 421, "wrong_port": 421, "huge_head": 431, "garbage": 400}


def test_smuggling_tunnels_and_foreign_hosts_are_refused(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    code = EXCHANGE + "".join(f"out[{name!r}] = status_lines(exchange({payload!r}))\n"
                              for name, payload in CASES.items())
    code += f"out['tls_cl_te'] = status_lines(exchange({CASES['cl_te']!r}, port=443, tls=True))\n"
    got = outcome(sbx, code + "print(json.dumps(out))\n")
    for name, status in EXPECTED.items():
        assert len(got[name]) == 1 and got[name][0].startswith(f"HTTP/1.1 {status} "), (name, got[name])
    assert got["tls_cl_te"][0].startswith("HTTP/1.1 400 ")
    assert up.records() == [], "a refused request reached the upstream"
    denied = [e for e in sbx.audit_events() if e.kind == "request" and e.decision == "denied"]
    assert len(denied) == len(CASES) + 1, "\n".join(e.reason for e in denied)
    assert any("Content-Length and Transfer-Encoding" in e.reason for e in denied)


def test_requests_are_rewritten_and_pipelines_take_turns(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, EXCHANGE + r"""
pipelined = (b"GET /one HTTP/1.1\r\nHost: api.openai.com\r\n\r\n"
             b"POST /two HTTP/1.1\r\nHost: api.openai.com\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"3\r\nabc\r\n0\r\n\r\n"
             b"GET /three HTTP/1.1\r\nhost: API.OPENAI.COM:80\r\nConnection: close\r\n\r\n")
out["pipelined"] = status_lines(exchange(pipelined))
out["http10"] = status_lines(exchange(b"GET /old HTTP/1.0\r\n\r\n"))
print(json.dumps(out))
""")
    assert got["pipelined"] == ["HTTP/1.1 200 OK"] * 3
    assert got["http10"] and got["http10"][0].startswith("HTTP/1.1 200")
    seen = {r.path: r for r in up.records()}
    assert set(seen) == {"/one", "/two", "/three", "/old"}
    assert seen["/two"].body == b"abc"  # a chunked body, re-framed
    assert seen["/old"].header("Host") == "api.openai.com"
    assert len({seen[p].client_port for p in ("/one", "/two", "/three")}) == 1


def test_raw_tcp_needs_an_allow_out_entry(make: Callable[..., Any], up: Upstreams) -> None:
    code = EXCHANGE + """
out["raw"] = attempt(lambda: exchange(b"\\x00\\x01binary protocol", host="raw.example", port=7000))
out["http"] = attempt(lambda: status_lines(exchange(b"GET /x HTTP/1.1\\r\\nHost: raw.example:7000\\r\\n\\r\\n",
                                                    host="raw.example", port=7000, wait=1.0)))
print(json.dumps(out))
"""
    got = outcome(make(), code)  # allowed by default, but no entry names it
    assert not got["raw"]["ok"] and "non-HTTP" in got["raw"]["msg"] and "network policy" in got["raw"]["msg"]
    got = outcome(make(network={"allow_out": ["raw.example"], "deny_out": [ALL_TRAFFIC]}), code)
    assert got["raw"] == {"ok": True, "value": "echo:\x00\x01binary protocol"}
    # HTTP-looking bytes are parsed as HTTP even there: the echo is no HTTP response, so 502
    assert got["http"] == {"ok": True, "value": ["HTTP/1.1 502 Bad Gateway"]}
