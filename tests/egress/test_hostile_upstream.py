"""Hostile upstream servers met from guest code: whatever an upstream sends, or does not send,
the guest gets an error or a bounded answer within a bound, the host's memory stays bounded, the
host and the sandbox go on (the next request in the same sandbox works), a TLS failure is a
verification error before anything is sent, and no error the host writes hands the upstream's
bytes (a secret's value among them) to the guest. docs/security.md, "Upstream servers and the
relay".

The servers: tests/egress/upstream.py `Hostile` (real sockets on loopback, real TLS with
certificates made here by trustme), one misbehaviour per request path. Guests reach them by
address (127.0.0.1, allowed by `allow_out`), so a process pool's workers need no new
environment. The relay is host code: the warm guest path only; the cases that measure memory or
that the relay fixed run in a process pool's worker too (the relay runs there).
"""

from __future__ import annotations

import datetime
import json
import ssl
import time
import uuid
from typing import Any, Callable, Iterator, Optional

import pytest
import trustme

from declaw_wasm import Limits, Sandbox, Secret, testing
from declaw_wasm.security import InjectionDefenseConfig, SecurityPolicy

from security.support import PeakRSS
from .upstream import Hostile, Upstreams

pytestmark = pytest.mark.guest

MiB = 1 << 20
LOOPBACK = {"allow_out": ["127.0.0.1/32"]}
BOTH = pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
SECRET = "sk-live-Hostile0123456789abcdef"

# The guest: `fetch(**case)` for each case of /tmp/cases.json (http.client, or httpx with
# client="httpx"; reads at most `read` bytes of the body, then holds the connection `pause`
# seconds; with echo="NAME", sends the variable NAME's value as X-Echo), then /ok on the first
# case's server (the sandbox's network still works). Prints {name: {"ok", "status", "body" (its
# start), "size", "left" (bytes of a Content-Length body that never came), "type", "msg",
# "secs"}}.
GUEST = r'''
import http.client, json, os, ssl, sys, time
def fetch(port, path, tls=False, timeout=5.0, read=1 << 20, method="GET", body=0, pause=0.0,
          client="http.client", echo=""):
    start = time.monotonic()
    out = {}
    data = b"x" * body if body else None
    headers = {"X-Echo": os.environ[echo]} if echo else {}
    try:
        if client == "httpx":
            import httpx
            with httpx.Client(verify=ssl.create_default_context(), timeout=timeout) as c:
                with c.stream(method, ("https" if tls else "http") + f"://127.0.0.1:{port}{path}",
                              content=data, headers=headers) as r:
                    out["status"] = r.status_code
                    got, size = b"", 0
                    for piece in r.iter_raw():
                        got += piece[:300 - len(got)]
                        size += len(piece)
                        if size >= read:
                            break
                    out.update(ok=True, size=size, body=got.decode("latin-1"))
        else:
            kw = {"context": ssl.create_default_context()} if tls else {}
            conn = (http.client.HTTPSConnection if tls else http.client.HTTPConnection)(
                "127.0.0.1", port, timeout=timeout, **kw)
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            out["status"] = r.status
            got, size = b"", 0
            while size < read:
                piece = r.read(min(1 << 16, read - size))
                if not piece:
                    break
                got += piece[:300 - len(got)]
                size += len(piece)
            if pause:
                time.sleep(pause)
            out.update(ok=True, size=size, body=got.decode("latin-1"), left=r.length)
            conn.close()
    except Exception as exc:
        out.update(ok=False, type=type(exc).__name__, msg=str(exc)[:600])
    out["secs"] = round(time.monotonic() - start, 2)
    return out
cases = json.load(open("/tmp/cases.json"))
if len(sys.argv) > 1:  # ready (httpx imported: ~30 MiB of the guest's), tell the server, wait
    if any(case.get("client") == "httpx" for case in cases.values()):
        import httpx
    fetch(int(sys.argv[1]), sys.argv[2])
    while not os.path.exists("/tmp/go"):
        time.sleep(0.01)
out = {name: fetch(**case) for name, case in cases.items()}
first = next(iter(cases.values()))
out["after"] = fetch(first["port"], "/ok", tls=first.get("tls", False))
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the relay is host code: the guest path does not change it


@pytest.fixture(scope="module")
def hostile(upstreams: Upstreams) -> Iterator[Hostile]:
    server = Hostile()
    for coding in ("gzip", "br", "zstd"):  # made now, not while a test measures this process
        Hostile.bomb(coding, 32)
    yield server
    server.stop()


def _context(cert: Any) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


@pytest.fixture(scope="module")
def tls_hostiles(upstreams: Upstreams, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Hostile]]:
    """Hostile servers over TLS, by certificate: `valid` (for 127.0.0.1, from the CA the host
    trusts), `expired`, `wrong-name` (for another name), `untrusted` (from a CA the host does
    not know), `self-signed` (a CA's own certificate)."""
    ca = upstreams.ca
    assert ca is not None
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=30)
    other = trustme.CA()
    contexts = {"valid": _context(ca.issue_cert("127.0.0.1")),
                "expired": _context(ca.issue_cert("127.0.0.1", not_before=past - datetime.timedelta(days=1),
                                                  not_after=past)),
                "wrong-name": _context(ca.issue_cert("unrelated.test")),
                "untrusted": _context(other.issue_cert("127.0.0.1"))}
    folder = tmp_path_factory.mktemp("self-signed")
    other.cert_pem.write_to_path(str(folder / "cert.pem"))
    other.private_key_pem.write_to_path(str(folder / "key.pem"))
    own = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    own.load_cert_chain(str(folder / "cert.pem"), str(folder / "key.pem"))
    contexts["self-signed"] = own
    servers = {name: Hostile(tls=context) for name, context in contexts.items()}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture
def fresh_servers(hostile: Hostile, tls_hostiles: dict[str, Hostile]) -> dict[str, Hostile]:
    """The servers, with this test's records only."""
    for server in (hostile, *tls_hostiles.values()):
        server.clear()
    return {"plain": hostile, **tls_hostiles}


def run_cases(sbx: Sandbox, cases: dict[str, dict[str, Any]], timeout: float = 120) -> dict[str, Any]:
    """Run GUEST on `cases`; its results (the last one, "after", must be a 200 "ok")."""
    return measured(sbx, cases, timeout=timeout)[0]


def measured(sbx: Sandbox, cases: dict[str, dict[str, Any]], pid: Optional[int] = None,
             server: Optional[Hostile] = None, timeout: float = 120) -> tuple[dict[str, Any], int]:
    """Run GUEST on `cases`; its results, and (with `server`) how far the RSS of the process
    running the relay (`pid`, None: this one) rose while the guest ran them, from the moment the
    guest was ready (its interpreter and http.client loaded, one request to `server` made)."""
    sbx.files.write("/tmp/cases.json", json.dumps(cases))
    sbx.files.write("/tmp/hostile.py", GUEST)
    if server is None:
        result = sbx.commands.run("python3 /tmp/hostile.py", timeout=timeout)
        growth = 0
    else:
        ready = f"/ok?ready={uuid.uuid4().hex}"
        handle = sbx.commands.run(f"python3 /tmp/hostile.py {server.port} {ready}", background=True,
                                  timeout=timeout)
        deadline = time.monotonic() + 60
        while not any(ready.encode() in head for head in server.heads) and time.monotonic() < deadline:
            time.sleep(0.01)
        with PeakRSS(pid) as mem:
            sbx.files.write("/tmp/go", "")
            result = handle.wait()
        growth = mem.growth
    assert result.exit_code == 0, (result.stdout, result.stderr)
    got: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    assert (got["after"].get("status"), got["after"].get("body")) == (200, "ok\n"), got["after"]
    return got, growth


def relay_pid(sbx: Sandbox, mode: str, request: pytest.FixtureRequest) -> Optional[int]:
    """The pid of the process running the sandbox's relay (None: this one)."""
    return request.getfixturevalue("egress_pool").pid_of(sbx.sandbox_id) if mode == "processes" else None


def refused(got: dict[str, Any], why: str) -> bool:
    """The guest got the host's 502 saying `why`."""
    return got.get("status") == 502 and why in got.get("body", "")


def cut(got: dict[str, Any]) -> bool:
    """The guest's read of the body failed, or came short of its Content-Length: never a
    complete answer."""
    return got["ok"] is False or bool(got.get("left"))


# -- malformed answers ---------------------------------------------------------------------------

MALFORMED = {  # path -> what the 502 says
    "/bad-status/garbage": "illegal status line", "/bad-status/version": "illegal status line",
    "/bad-status/empty": "no response line received", "/bad-status/icy": "illegal status line",
    "/bad-header/nocolon": "illegal header line", "/bad-header/nul": "illegal header line",
    "/bad-header/space": "illegal header line", "/framing/cl-cl": "conflicting Content-Length headers",
    "/framing/te-unknown": "Only Transfer-Encoding: chunked is supported",
    "/framing/cl-negative": "bad Content-Length",
    "/huge-head/100": "response head larger than 65536 bytes (Limits.net_header_bytes)",
    "/flood-head": "Receive buffer too long",
}
CUT = ["/bad-chunk/hex", "/bad-chunk/negative", "/bad-chunk/huge", "/bad-chunk/footer", "/framing/cl-short"]


@BOTH
def test_a_malformed_answer_is_a_502_or_a_cut_body_and_the_sandbox_goes_on(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str) -> None:
    """A status line or a header line that is not one, conflicting or unknown framing, a head
    over the bound or without end: the host's 502 naming what was wrong (its head not yet sent);
    a chunk size that is not one, or a body shorter than announced: the guest's answer is cut,
    never complete. An obsolete folded header and Content-Length with Transfer-Encoding are
    read as RFC 9112 says, and reach the guest in the host's own framing. Over HTTP and HTTPS,
    each within a second or two, and the same sandbox's next request works."""
    sbx = make(network=LOOPBACK)
    plain, tls = fresh_servers["plain"].port, fresh_servers["valid"].port
    cases = {f"http {path}": {"port": plain, "path": path} for path in [*MALFORMED, *CUT]}
    cases |= {f"https {path}": {"port": tls, "path": path, "tls": True}
              for path in ["/bad-status/garbage", "/framing/cl-cl", "/flood-head", "/bad-chunk/hex"]}
    for path in ("/bad-header/fold", "/framing/cl-te"):
        cases[f"http {path}"] = {"port": plain, "path": path}
    got = run_cases(sbx, cases)
    for name, result in got.items():
        assert result["secs"] < 3, (name, result)
        path = name.split(" ", 1)[-1]
        if path in MALFORMED:
            assert refused(result, MALFORMED[path]), (name, result)
            assert "the server sent a malformed response" in result["body"] or "cannot forward" in result["body"]
        elif path in CUT:
            assert result.get("status") == 200 and cut(result), (name, result)
    for path in ("/bad-header/fold", "/framing/cl-te"):
        assert (got[f"http {path}"]["status"], got[f"http {path}"]["body"]) == (200, "ok")
    events = [e for e in sbx.audit_events() if e.kind == "request" and "/bad-status/" in e.url]
    assert events and all(e.status_code == 502 and e.decision == "denied" for e in events)


# -- floods, storms, early answers ---------------------------------------------------------------

@BOTH
def test_floods_and_storms_hold_bounded_host_memory_and_end_within_a_bound(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str,
        request: pytest.FixtureRequest, no_background_guests: None) -> None:
    """An endless body the guest reads 8 MiB of, then holds unread for a second; an endless head;
    thousands of 1xx heads, and 1xx heads without end, read with http.client and with httpx (which
    skips them all: before, it was held past its own timeouts until the connection's byte limit,
    1 GiB); an answer before the request's 4 MiB body ended. The guest gets its bounded answer
    or an error within seconds; the relay's process grows by less than 64 MiB and the flooding
    server gets out only what the windows hold."""
    sbx = make(network=LOOPBACK)
    server = fresh_servers["plain"]
    p, tls = server.port, fresh_servers["valid"].port
    cases = {"flood-body": {"port": p, "path": "/flood-body", "read": 8 * MiB, "pause": 1.0},
             "flood-body https": {"port": tls, "path": "/flood-body", "tls": True, "read": 8 * MiB, "pause": 1.0},
             "flood-head": {"port": p, "path": "/flood-head"},
             "info 50": {"port": p, "path": "/info/50/100"},
             "info 3000": {"port": p, "path": "/info/3000"},
             "info 3000 httpx": {"port": p, "path": "/info/3000/100", "client": "httpx"},
             "info-flood": {"port": p, "path": "/info-flood"},
             "info-flood httpx": {"port": p, "path": "/info-flood", "client": "httpx", "timeout": 3.0},
             "early": {"port": p, "path": "/early", "method": "POST", "body": 4 * MiB}}
    got, growth = measured(sbx, cases, relay_pid(sbx, mode, request), server)
    assert all(result["secs"] < 8 for result in got.values()), got
    for name in ("flood-body", "flood-body https"):
        assert (got[name]["status"], got[name]["size"]) == (200, 8 * MiB), got[name]
    assert refused(got["flood-head"], "Receive buffer too long")
    assert (got["info 50"]["status"], got["info 50"]["body"]) == (200, "ok")
    over = "the server sent more than 100 informational (1xx) responses to one request"
    assert refused(got["info 3000 httpx"], over) and refused(got["info-flood httpx"], over)
    for name in ("info 3000", "info-flood"):  # http.client: a 502, or its own bound (a 103 is final to it)
        assert refused(got[name], over) or got[name].get("status") == 103 or \
            "got more than 100 interim responses" in got[name].get("msg", ""), got[name]
    assert (got["early"]["status"], got["early"]["body"]) == (200, "early")
    assert growth < 64 * MiB, f"the relay's process grew by {growth >> 20} MiB"
    assert server.sent < 64 * MiB, server.sent  # 2 × 8 MiB read, the rest held back by the windows
    if mode == "in-process":
        assert testing.egress_of(sbx).budget.held == 0  # the guest ended: nothing held


# -- slow, silent, closing, resetting ------------------------------------------------------------

def test_slow_and_silent_servers_are_bounded_by_the_guests_timeout_or_the_idle_limit(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile]) -> None:
    """A head dripped a byte at a time never completes: the guest's timeout ends the wait, and
    without one Limits.net_idle_timeout does (the head's bytes are no traffic for the guest:
    before, each byte restarted the idle timer, and a head dripped faster than it held a guest
    without a timeout of its own for as long as the server liked); a body dripped a byte at a
    time reaches the guest byte by byte (the relay does not hold it back); a server that never
    answers ends a guest's wait without a timeout at Limits.net_idle_timeout; one that closes or
    resets without answering is the end of the stream."""
    sbx = make(network=LOOPBACK, limits=Limits(net_idle_timeout=1.5))
    p = fresh_servers["plain"].port
    got = run_cases(sbx, {
        "drip-head": {"port": p, "path": "/drip-head/0.1", "timeout": 1.0},
        "drip-head no timeout": {"port": p, "path": "/drip-head/0.2", "timeout": None},
        "drip-body": {"port": p, "path": "/drip-body/0.05/20", "timeout": 1.0},
        "silent": {"port": p, "path": "/silent", "timeout": None},
        "close": {"port": p, "path": "/close"},
        "reset-now": {"port": p, "path": "/reset-now"}})
    assert got["drip-head"]["type"] == "TimeoutError" and got["drip-head"]["secs"] < 3, got["drip-head"]
    assert (got["drip-body"]["status"], got["drip-body"]["body"]) == (200, "d" * 20), got["drip-body"]
    assert got["drip-body"]["secs"] < 5
    for name in ("silent", "drip-head no timeout"):
        assert got[name]["type"] == "TimeoutError" and "Limits.net_idle_timeout" in got[name]["msg"], got[name]
        assert got[name]["secs"] < 5
    for name in ("close", "reset-now"):
        assert got[name]["type"] in ("RemoteDisconnected", "ConnectionResetError"), got[name]
        assert got[name]["secs"] < 3


@BOTH
def test_an_answer_cut_by_a_reset_never_reaches_the_guest_complete(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str) -> None:
    """The server sends 64 KiB of a 1 MiB answer and resets the connection (an RST, SO_LINGER 0):
    whatever the answer's framing (Content-Length, chunked, or to the connection's close), over
    HTTP and HTTPS, the guest's read fails or comes short. Before, an answer framed by the
    connection's close reached the guest as a complete one (the relay took the reset for the
    end of the stream)."""
    sbx = make(network=LOOPBACK)
    plain, tls = fresh_servers["plain"].port, fresh_servers["valid"].port
    cases = {f"{scheme} {framing}": {"port": port, "path": f"/reset/{framing}", "tls": scheme == "https"}
             for scheme, port in (("http", plain), ("https", tls)) for framing in ("cl", "chunked", "close")}
    got = run_cases(sbx, cases)
    for name in cases:
        assert got[name].get("status") == 200 and cut(got[name]), (name, got[name])
        assert got[name].get("size", 0) <= 64 << 10
    events = {e.url.rsplit("/", 1)[1] + " " + e.url.split(":")[0]: e for e in sbx.audit_events()
              if e.kind == "request" and "/reset/" in e.url}
    assert "the server reset the connection in the middle of its answer" in events["close http"].reason


# -- TLS -----------------------------------------------------------------------------------------

@BOTH
def test_tls_failures_reach_the_guest_as_verification_errors_and_nothing_is_sent(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str) -> None:
    """An expired certificate, one for another name, one from a CA the host does not trust, a
    self-signed one: the guest's TLS fails with ssl.SSLCertVerificationError naming why, and no
    request reaches the server. A server that never answers the handshake ends it at
    Limits.net_connect_timeout. (A server asking for TLS 1.2 renegotiation cannot be made with
    Python's ssl: upstream.py `Hostile`.)"""
    sbx = make(network=LOOPBACK, limits=Limits(net_connect_timeout=1.5))
    why = {"expired": "certificate has expired", "wrong-name": "IP address mismatch",
           "untrusted": "unable to get local issuer certificate", "self-signed": "self-signed certificate"}
    cases = {"valid": {"port": fresh_servers["valid"].port, "path": "/ok", "tls": True}}
    cases |= {name: {"port": fresh_servers[name].port, "path": "/ok", "tls": True} for name in why}
    cases["stall"] = {"port": fresh_servers["plain"].port, "path": "/ok", "tls": True, "timeout": 30}
    got = run_cases(sbx, cases)
    assert (got["valid"]["status"], got["valid"]["body"]) == (200, "ok\n")
    for name, reason in why.items():
        assert got[name]["type"] == "SSLCertVerificationError" and reason in got[name]["msg"], got[name]
        assert fresh_servers[name].heads == [] and fresh_servers[name].handshakes == {"ok": 0, "failed": 1}
    assert got["stall"]["type"] == "TimeoutError" and "TLS handshake" in got["stall"]["msg"], got["stall"]
    assert got["stall"]["secs"] < 5 and fresh_servers["plain"].heads == []


# -- codings -------------------------------------------------------------------------------------

@BOTH
def test_decompression_bombs_decode_within_bounded_host_memory(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str,
        request: pytest.FixtureRequest, no_background_guests: None) -> None:
    """With secrets on the sandbox the relay decodes every body (to scrub it): 32 MiB of zeros in
    gzip (16 KiB, ~1000x), br and zstd (far more), read 4 MiB at a time and held: the relay decodes
    only as far as its window towards the guest, so its process grows by less than 48 MiB; an
    unknown coding is refused with a 502 naming it. Without secrets the coded bytes pass as they
    came (the guest decodes them itself, in its own memory)."""
    sbx = make(network=LOOPBACK, secrets={"TOKEN": Secret(SECRET, hosts=["example.com"])})
    p = fresh_servers["plain"].port
    cases = {coding: {"port": p, "path": f"/bomb/{coding}/32", "read": 4 * MiB, "pause": 0.5}
             for coding in ("gzip", "br", "zstd")}
    cases["https gzip"] = {"port": fresh_servers["valid"].port, "path": "/bomb/gzip/32", "tls": True,
                           "read": 4 * MiB, "pause": 0.5}
    cases["unknown"] = {"port": p, "path": "/coding/xyz"}
    got, growth = measured(sbx, cases, relay_pid(sbx, mode, request), fresh_servers["plain"])
    for name in ("gzip", "br", "zstd", "https gzip"):
        assert (got[name]["status"], got[name]["size"]) == (200, 4 * MiB), got[name]
        assert got[name]["body"] == "0" * 300
    assert refused(got["unknown"], "Content-Encoding 'xyz' is not one the host can decode")
    assert growth < 48 * MiB, f"the relay's process grew by {growth >> 20} MiB"
    plain = make(network=LOOPBACK)
    raw = run_cases(plain, {"gzip": {"port": p, "path": "/bomb/gzip/32"}})["gzip"]
    assert (raw["status"], raw["size"]) == (200, len(Hostile.bomb("gzip", 32)))


# -- secrets -------------------------------------------------------------------------------------

@BOTH
def test_no_error_the_host_writes_quotes_the_upstreams_bytes(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], mode: str) -> None:
    """A server that knows a secret's value puts it where the relay's parser fails (a status line,
    a header line, a chunk size) or in a body of a coding the host cannot decode: over HTTP a
    server that learnt it elsewhere, over HTTPS the value the host injected into the request (the
    placeholder sent as X-Echo). The guest gets the host's 502 (or a cut body) naming what was
    wrong, never the value. Before, the 502 quoted the line h11 could not parse, value and all,
    past the scrubber."""
    # (a regex: an address entry in `hosts` is accepted but never matches a connection's name)
    sbx = make(network=LOOPBACK, secrets={"TOKEN": Secret(SECRET, hosts=["127.0.0.1"])})
    plain, tls = fresh_servers["plain"], fresh_servers["valid"]
    plain.planted = SECRET
    paths = ("/bad-status/leak", "/bad-header/leak", "/bad-chunk/leak", "/coding/xyz")
    cases = {f"http {path}": {"port": plain.port, "path": path} for path in paths}
    cases |= {f"https {path}": {"port": tls.port, "path": path, "tls": True, "echo": "TOKEN"} for path in paths}
    got = run_cases(sbx, cases)
    assert SECRET not in json.dumps(got)
    assert all(SECRET.encode() in head for head in tls.heads[:len(paths)])  # injected, so echoed
    for scheme in ("http", "https"):
        assert refused(got[f"{scheme} /bad-status/leak"], "the server sent a malformed response: illegal status line\n")
        assert refused(got[f"{scheme} /bad-header/leak"], "the server sent a malformed response: illegal header line\n")
        assert got[f"{scheme} /bad-chunk/leak"]["status"] == 200 and cut(got[f"{scheme} /bad-chunk/leak"])
        assert refused(got[f"{scheme} /coding/xyz"], "with secrets on this sandbox")
    assert SECRET not in "".join(e.model_dump_json() for e in sbx.audit_events())


# -- guards --------------------------------------------------------------------------------------

def test_a_response_guard_meets_a_bomb_and_a_drip_within_bounds(
        make: Callable[..., Sandbox], fresh_servers: dict[str, Hostile], no_background_guests: None) -> None:
    """A blocking injection scan reads every answer, holding each back until scanned: a gzip bomb
    of 32 MiB is cut at the decoded bytes the guard may read (Limits.net_guard_response_bytes,
    1 MiB here) with the relay's process growing by less than 48 MiB; a body dripped a byte at a
    time reaches the guest whole once it ends, in time; the sandbox's next request works."""
    sbx = make(network=LOOPBACK, security=SecurityPolicy(injection_defense=InjectionDefenseConfig(
        enabled=True, action="block", domains=["127.0.0.1"])),
        limits=Limits(net_guard_response_bytes=1 * MiB, net_guard_scan_bytes=64 << 10))
    p = fresh_servers["plain"].port
    cases = {"bomb": {"port": p, "path": "/bomb/gzip/32", "read": 40 * MiB},
             "drip": {"port": p, "path": "/drip-body/0.05/20", "timeout": 2.0}}
    got, growth = measured(sbx, cases, None, fresh_servers["plain"])
    bomb = got["bomb"]
    assert bomb.get("status") == 200 and cut(bomb) and bomb.get("size", 0) <= 1 * MiB, bomb
    assert bomb["secs"] < 10
    assert (got["drip"]["status"], got["drip"]["body"]) == (200, "d" * 20) and got["drip"]["secs"] < 5
    assert growth < 48 * MiB, f"the relay's process grew by {growth >> 20} MiB"
    events = {e.url.split("/", 3)[3]: e for e in sbx.audit_events() if e.kind == "request"}
    assert events["bomb/gzip/32"].guard == "limits" and events["bomb/gzip/32"].decision == "denied"
    assert "Limits.net_guard_response_bytes" in events["bomb/gzip/32"].reason

