"""Each library's HTTP and HTTPS path, unchanged, in a real guest, to local upstreams.

The upstreams are on loopback; the names are mapped there (conftest.py). Every HTTPS request
here is verified by the host against the test CA: the guest's own TLS settings play no part.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

from .conftest import outcome
from .upstream import Upstreams


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_stdlib_http_and_https(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, """
import http.client, json, ssl, urllib.request
out = {}
for scheme in ("http", "https"):
    body = urllib.request.urlopen(f"{scheme}://api.openai.com/urllib?x=1", timeout=30).read()
    out[f"urllib-{scheme}"] = json.loads(body)["path"]
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls("api.openai.com", timeout=30)
    conn.request("POST", "/hc", body=b"abc", headers={"Content-Type": "text/plain"})
    resp = conn.getresponse()
    out[f"hc-{scheme}"] = [resp.status, json.loads(resp.read())["body"]]
# the guest turning verification off changes nothing: the host verifies anyway
ctx = ssl._create_unverified_context()
out["unverified"] = json.loads(urllib.request.urlopen("https://api.openai.com/u", context=ctx).read())["path"]
tls = http.client.HTTPSConnection("api.openai.com"); tls.connect()
out["tls"] = [tls.sock.version(), tls.sock.selected_alpn_protocol(),
              ("DNS", "api.openai.com") in tls.sock.getpeercert()["subjectAltName"]]
print(json.dumps(out))
""")
    assert got["urllib-http"] == got["urllib-https"] == "/urllib?x=1"
    assert got["hc-http"] == got["hc-https"] == [200, "abc"]
    assert got["unverified"] == "/u"
    assert got["tls"][0].startswith("TLSv1.") and got["tls"][1] == "http/1.1" and got["tls"][2]
    servers = {(r.server, r.path) for r in up.records()}
    assert ("http", "/urllib?x=1") in servers and ("https", "/urllib?x=1") in servers


def test_requests_urllib3_and_a_pooled_session(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, """
import json, requests, urllib3
out = {}
for scheme in ("http", "https"):
    r = requests.post(f"{scheme}://api.openai.com/req", json={"a": 1}, timeout=30)
    out[scheme] = [r.status_code, r.json()["body"]]
    out["u3-" + scheme] = urllib3.PoolManager().request("GET", f"{scheme}://api.openai.com/u3").status
with requests.Session() as s:
    codes = [s.get("https://api.openai.com/pooled/%d" % i, timeout=30).status_code for i in range(20)]
out["pooled"] = codes
print(json.dumps(out))
""")
    assert got["http"] == got["https"] == [200, '{"a": 1}']
    assert got["u3-http"] == got["u3-https"] == 200
    assert got["pooled"] == [200] * 20
    pooled = [r for r in up.records() if r.path.startswith("/pooled/")]
    assert len(pooled) == 20
    assert len({r.client_port for r in pooled}) == 1, "the session opened more than one connection"
    events = [e for e in sbx.audit_events() if e.kind == "request" and "/pooled/" in e.url]
    assert len(events) == 20 and all(e.status_code == 200 and e.tls for e in events)


def test_httpx_sync(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, """
import json, httpx
out = {}
for scheme in ("http", "https"):
    r = httpx.post(f"{scheme}://api.openai.com/httpx", json={"b": 2}, timeout=30)
    out[scheme] = [r.status_code, r.json()["body"], r.http_version]
with httpx.Client(http2=False) as client:
    out["client"] = [client.get("https://api.openai.com/c%d" % i).status_code for i in range(5)]
print(json.dumps(out))
""")
    assert got["http"][:2] == got["https"][:2] == [200, '{"b":2}']
    assert got["https"][2] == "HTTP/1.1"
    assert got["client"] == [200] * 5
    assert len({r.client_port for r in up.records() if r.path.startswith("/c")}) == 1


def test_pandas_read_csv_of_an_https_url(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, """
import json, pandas as pd
df = pd.read_csv("https://data.example.org/csv")
print(json.dumps({"shape": list(df.shape), "sum": int(df["b"].sum())}))
""")
    assert got == {"shape": [2, 2], "sum": 6}


def test_asyncio_streams_and_aiohttp(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    got = outcome(sbx, """
import asyncio, json
out = {}
async def raw(ssl):
    reader, writer = await asyncio.open_connection("api.openai.com", 443 if ssl else 80, ssl=ssl)
    writer.write(b"GET /aio HTTP/1.1\\r\\nHost: api.openai.com\\r\\nConnection: close\\r\\n\\r\\n")
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data.split(b"\\r\\n", 1)[0].decode()

async def many():
    import aiohttp
    async with aiohttp.ClientSession() as session:
        async def one(i):
            async with session.get(f"https://api.openai.com/aiohttp/{i}") as r:
                return (await r.json())["path"]
        return await asyncio.gather(*(one(i) for i in range(10)))

out["plain"] = asyncio.run(raw(False))
out["tls"] = asyncio.run(raw(True))
out["aiohttp"] = asyncio.run(many())
print(json.dumps(out))
""")
    assert got["plain"] == got["tls"] == "HTTP/1.1 200 OK"
    assert got["aiohttp"] == [f"/aiohttp/{i}" for i in range(10)]


def test_readiness_is_truthful(make: Callable[..., Any], up: Upstreams) -> None:
    """select/poll/selectors see an idle kept-alive connection as not readable, and readable
    once the server answers; urllib3's pooled-connection check keeps it."""
    sbx = make()
    got = outcome(sbx, """
import json, select, selectors, socket, time
s = socket.create_connection(("api.openai.com", 80), timeout=10)
out = {"idle": select.select([s], [], [], 0)[0] == [], "writable": select.select([], [s], [], 0)[1] == [s]}
p = select.poll(); p.register(s, select.POLLIN)
out["poll_idle"] = p.poll(0)
s.sendall(b"GET /x HTTP/1.1\\r\\nHost: api.openai.com\\r\\n\\r\\n")
t = time.monotonic()
out["select_wait"] = select.select([s], [], [], 10)[0] == [s]
out["waited_s"] = round(time.monotonic() - t, 3)
sel = selectors.DefaultSelector(); sel.register(s, selectors.EVENT_READ)
out["selector"] = len(sel.select(1)) == 1
data = s.recv(65536)
out["partial"] = data.startswith(b"HTTP/1.1 200")
# the server writes headers and body apart: read the whole answer before calling it drained
while b"\\r\\n\\r\\n" not in data:
    data += s.recv(65536)
head, _, body = data.partition(b"\\r\\n\\r\\n")
length = int([l for l in head.split(b"\\r\\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
while len(body) < length:
    body += s.recv(65536)
time.sleep(0.2)
out["drained"] = select.select([s], [], [], 0)[0] == []
s.close()
import urllib3
pool = urllib3.HTTPConnectionPool("api.openai.com", 80)
pool.request("GET", "/one")
conn = pool.pool.queue[-1] if pool.pool.queue[-1] is not None else pool.pool.queue[0]
from urllib3.util.wait import wait_for_read
out["pooled_dropped"] = wait_for_read(conn.sock, timeout=0)
pool.request("GET", "/two")
print(json.dumps(out))
""")
    assert got["idle"] and got["writable"] and got["poll_idle"] == []
    assert got["select_wait"] and got["waited_s"] < 5 and got["selector"] and got["partial"]
    assert got["drained"] and got["pooled_dropped"] is False
    one = [r.client_port for r in up.records() if r.path in ("/one", "/two")]
    assert len(one) == 2 and one[0] == one[1]


def test_a_closed_socket_still_reads_through_its_makefile(make: Callable[..., Any], up: Upstreams) -> None:
    """As CPython's sockets: close() with a makefile() still open defers the real close, so
    http.client (which closes its socket and reads the response through the file) gets a body
    that arrives after the headers (once, a response's later segment met 'Bad file descriptor')."""
    sbx = make()
    got = outcome(sbx, """
import json, socket
s = socket.create_connection(("api.openai.com", 80), timeout=30)
s.sendall(b"GET /late HTTP/1.1\\r\\nHost: api.openai.com\\r\\nConnection: close\\r\\n\\r\\n")
f = s.makefile("rb")
s.close()
head = f.readline()
data = f.read()
out = {"fileno_while_file_open": s.fileno() != -1, "status": head.decode().split()[1],
       "body": json.loads(data.split(b"\\r\\n\\r\\n", 1)[1])["path"]}
f.close()
out["fileno_after"] = s.fileno()
print(json.dumps(out))
""")
    assert got == {"fileno_while_file_open": True, "status": "200", "body": "/late", "fileno_after": -1}
