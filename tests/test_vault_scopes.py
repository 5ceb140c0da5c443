"""A vault value is write-only, so the scopes that say where it may go guard it too: whoever may
change a secret's scopes must not be able to point it at a host they read. Narrowing a secret's
hosts is free; adding one needs the value again (409 / `ConflictException` otherwise), and every
change, a refused one included, is an event of the vault's audit log that never holds the value.
In-process (`Vault`, `VaultClient()`) and through a server (our `VaultClient(domain=)`, declaw's
own `VaultClient`). The injection that follows the scopes: tests/egress/test_secrets.py and
test_served.py."""

from __future__ import annotations

import logging
from typing import Any, Iterator

import httpx
import pytest

from declaw_wasm import ConflictException, Vault, VaultClient, VaultScope
from declaw_wasm._egress.vault import added_hosts
from declaw_wasm.server import serve_in_thread

KEY = "vault-scopes-key"
VALUE = "sk-first-Abc123"
WIDER: list[Any] = [{"domain_regex": "api.openai.com"}, {"domain_regex": "evil.example"}]


def _scopes(*entries: str) -> list[VaultScope]:
    return [VaultScope(domain_regex=e) for e in entries]


def test_what_counts_as_adding_a_host() -> None:
    """Within the old scopes: a domain an old scope matches, `*.x.y` under `*.y`, the same regular
    expression; a scope with an address range sends nothing (injection matches names). Anything
    else adds hosts: a wildcard is not within the bare domain, nor a regex within a domain."""
    within = [
        (["api.openai.com"], ["API.OpenAI.com"]),
        (["*.example.com"], ["a.example.com", "*.b.example.com", "*.example.com"]),
        (["~^x\\.com$"], ["x.com"]),
        (["~^(a|b)\\.com$"], ["~^(a|b)\\.com$"]),
        (["api.openai.com"], ["10.0.0.0/8"]),
        (["api.openai.com", "api.anthropic.com"], ["api.anthropic.com"]),
    ]
    for old, new in within:
        assert added_hosts(_scopes(*old), _scopes(*new)) == [], (old, new)
    wider = [
        (["api.openai.com"], ["evil.example"], ["evil.example"]),
        (["*.example.com"], ["example.com"], ["example.com"]),
        (["a.example.com"], ["*.example.com"], ["*.example.com"]),
        (["x.com"], ["~^x\\.com$"], ["~^x\\.com$"]),
        (["~^x\\.com$"], ["~x\\.com"], ["~x\\.com"]),
        (["*.b.example.com"], ["*.example.com"], ["*.example.com"]),
        (["api.openai.com"], ["api.openai.com", "evil.example"], ["evil.example"]),
    ]
    for old, new, added in wider:
        assert added_hosts(_scopes(*old), _scopes(*new)) == added, (old, new)


def _widen_narrow_and_audit(client: Any, vault_events: Any) -> None:
    """The property through one client: `client` has VaultClient's methods."""
    client.create_secret(VALUE, name="openai-key", provider="openai")
    with pytest.raises(ConflictException, match="evil.example"):
        client.update_scopes("openai-key", WIDER)
    assert [s.domain_regex for s in _secret(client).scopes] == ["api.openai.com"]  # unchanged
    # the format of a host it already had is free; narrowing is free
    client.update_scopes("openai-key", [{"domain_regex": "api.openai.com", "injection_type": "header",
                                         "header_name": "X-Key"}])
    widened = client.update_scopes("openai-key", WIDER, value="sk-second-Def456")
    assert [s.domain_regex for s in widened.scopes] == ["api.openai.com", "evil.example"]
    assert widened.rotated_at is not None
    client.update_scopes("openai-key", [{"domain_regex": "evil.example"}])
    client.delete_secret("openai-key")
    events = [e for e in vault_events() if e.name == "openai-key"]
    assert [(e.action, e.decision, e.value_supplied) for e in events] == [
        ("create", "allowed", True), ("update_scopes", "denied", False), ("update_scopes", "allowed", False),
        ("update_scopes", "allowed", True), ("update_scopes", "allowed", False), ("delete", "allowed", False)]
    refused = events[1]
    assert refused.added_hosts == ["evil.example"] and refused.hosts_before == ["api.openai.com"]
    assert refused.hosts_after == ["api.openai.com", "evil.example"] and "value again" in refused.reason
    assert events[3].added_hosts == ["evil.example"] and events[4].added_hosts == []
    text = "".join(e.model_dump_json() for e in events)
    assert "sk-first" not in text and "sk-second" not in text


def _secret(client: Any) -> Any:
    return next(s for s in client.list_secrets() if s.name == "openai-key")


def test_a_secrets_hosts_widen_only_with_its_value_in_process(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    vault = Vault()
    _widen_narrow_and_audit(vault, vault.audit_events)
    vault.create_secret(VALUE, name="k", provider="openai")
    vault.update_scopes("k", WIDER, value="sk-third-Ghi789")
    assert vault.resolve("k")[0] == "sk-third-Ghi789"  # the value given is the value sent
    assert "sk-first" not in caplog.text and "sk-second" not in caplog.text and "sk-third" not in caplog.text
    assert "vault update_scopes denied" in caplog.text  # the operator's log has the refusal too
    client = VaultClient()  # this process's vault through declaw's client class
    client.create_secret(VALUE, name="mine", scopes=[{"domain_regex": "api.openai.com"}])
    try:
        with pytest.raises(ConflictException):
            client.update_scopes("mine", WIDER)
        assert client.audit_events()[-1].decision == "denied"
    finally:
        client.delete_secret("mine")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_in_thread(KEY, vault=Vault()) as url:
        yield url


def test_a_secrets_hosts_widen_only_with_its_value_served(server: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = VaultClient(api_key=KEY, domain=server)
    _widen_narrow_and_audit(client, client.audit_events)
    assert "sk-first" not in caplog.text and "sk-second" not in caplog.text
    answer = httpx.get(server + "/declaw-wasm/vault/audit", headers={"X-API-Key": KEY})
    assert answer.status_code == 200 and "sk-" not in answer.text


def test_declaws_update_scopes_can_only_narrow(server: str) -> None:
    """declaw's SDK documents `update_scopes` as keeping the value: here it narrows, or gets 409
    (docs/differences.md); to widen, delete and create the secret again."""
    declaw = pytest.importorskip("declaw")
    vault = declaw.VaultClient(api_key=KEY, domain=server.split("//", 1)[1])
    vault.create_secret(VALUE, name="theirs", scopes=[declaw.VaultScope(domain_regex="*.example.com")])
    try:
        with pytest.raises(declaw.ConflictException, match="value again"):
            vault.update_scopes("theirs", [{"domain_regex": "evil.example"}])
        vault.update_scopes("theirs", [{"domain_regex": "api.example.com"}])
        assert [s.domain_regex for s in vault.list_secrets()[0].scopes] == ["api.example.com"]
    finally:
        vault.delete_secret("theirs")
    raw = httpx.post(server + "/teams/default/vault/secrets/vs_none/scopes", headers={"X-API-Key": KEY},
                     json={"scopes": WIDER})
    assert raw.status_code == 404
