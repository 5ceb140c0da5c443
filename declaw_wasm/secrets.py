"""Secrets the guest never sees: `Secret` and the host-side `Vault` with declaw's vault models.

`Secret(value, hosts=[...])` is a value for `Sandbox.create(secrets=...)`: the guest's variable holds
a placeholder and the egress relay (declaw_wasm/_egress/secrets.py) puts the value into requests to
`hosts` only. The vault: named secrets with scopes, for `Sandbox.create(vault_refs=...)`.

declaw's names and shapes (`VaultClient`, `VaultSecret`, `VaultScope`, `VaultPreset`, provider
presets), kept in this process (declaw_wasm/vault.py's `VaultClient` reaches this one, or a
server's): `VaultClient().create_secret("sk-...", name="fintech-openai", provider="openai")`,
then `Sandbox.create(vault_refs={"OPENAI_API_KEY": "fintech-openai"})`.
The guest's variable holds `declaw:vault-managed`; the host adds the provider's auth to requests
to the scoped hosts, over TLS it verified (the relay). Values are write-only through the API.

The default vault is in memory. `Vault(path=...)` keeps secrets in a JSON file the user points
at (mode 0600; never inside declaw-wasm's cache folder, which is meant to be copied around).
Injection types supported here: bearer, header, basic, query (declaw's sigv4, oidc, hmac and
database types are refused with a clear error).

Write-only means the scopes guard the value too: whoever may change a secret's scopes could point
it at a host they read and have a sandbox send it there. So `update_scopes` may narrow a secret's
hosts freely but widens them only with the value supplied again (`value=`: the caller then knows
what it sends), else `ConflictException` (409 through a server). A new scope is within the old
ones when an old scope matches its host (a domain), holds its subdomains (`*.x` under `*.y`), or
is the same regular expression; anything else counts as wider. Every change — and every refused
widening — is an event of the vault's audit log (`audit_events()`; never the value).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import secrets as _random
import tempfile
import threading
from collections import deque
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Iterable, Literal, Optional, Union
from urllib.parse import quote

from pydantic import Field, ValidationError

from ._model import Model  # built on first use (a cold start pays for what it uses)
from ._printable import logger
from .exceptions import ConflictException

from .security.network_rules import PolicyError, Rule, parse_rule

SUPPORTED_TYPES = ("bearer", "header", "basic", "query")
VAULT_URI = re.compile(r"^vault://[^/]+/[^/]+/(.+)$")
MAX_SECRET_BYTES = 16 << 10  # a value's size, as a `Secret`'s
MAX_EVENTS = 10_000  # the vault's audit log keeps the newest events
log = logger("declaw_wasm.vault")


class Secret:
    """A value the guest may use but never see: `Secret("sk-...", hosts=["api.openai.com"])`.

    `hosts` entries are as in `allow_out` (domains, `*.domain`, `~regex`, IPs, CIDRs): the value
    is only ever sent over verified TLS to those."""

    __slots__ = ("_value", "hosts")

    def __init__(self, value: str, hosts: Iterable[str]) -> None:
        if not isinstance(value, str) or not value:
            raise PolicyError("Secret: the value must be a non-empty string")
        if len(value.encode("utf-8", "surrogatepass")) > MAX_SECRET_BYTES:
            raise PolicyError(f"Secret: the value is longer than {MAX_SECRET_BYTES} bytes")
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
            raise PolicyError("Secret: the value contains control characters (CR, LF, NUL...)")
        if isinstance(hosts, str) or not hosts:
            raise PolicyError("Secret: hosts must be a non-empty list of domains (as in allow_out)")
        self._value = value
        self.hosts = [parse_rule(h, "allow_out").text for h in hosts]

    def reveal(self) -> str:
        """The value (host side only)."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret('***', hosts={self.hosts!r})"

    def __reduce__(self) -> str:
        raise TypeError("a Secret is not picklable: its value must never be written anywhere")


class VaultScope(Model):
    """Where and how a vault secret is added to requests (declaw's fields). `domain_regex`:
    a domain, `*.domain`, or `~regex` (searched in the host name)."""

    domain_regex: str
    injection_type: str = ""
    header_name: str = ""
    value_prefix: str = ""
    basic_username: str = ""
    extra_headers: dict[str, str] = Field(default_factory=dict)
    query_params: dict[str, str] = Field(default_factory=dict)

    def checked(self) -> "VaultScope":
        kind = self.injection_type or "bearer"
        if kind not in SUPPORTED_TYPES:
            raise PolicyError(f"vault scope {self.domain_regex!r}: injection_type {kind!r} is not "
                              f"supported here (only {', '.join(SUPPORTED_TYPES)})")
        if kind == "header" and not self.header_name:
            raise PolicyError(f"vault scope {self.domain_regex!r}: injection_type 'header' needs header_name")
        if kind == "query" and not (self.header_name or self.query_params):
            raise PolicyError(f"vault scope {self.domain_regex!r}: injection_type 'query' needs "
                              "header_name (the query parameter's name)")
        self.rule()
        return self

    def rule(self) -> Rule:
        return parse_rule(self.domain_regex, "allow_out")

    def apply(self, value: str, target: str,
              headers: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
        """Add the secret to one request (target, headers)."""
        kind = self.injection_type or "bearer"
        set_headers: dict[str, str] = {}
        if kind == "bearer":
            set_headers["Authorization"] = f"Bearer {self.value_prefix}{value}"
        elif kind == "header":
            set_headers[self.header_name] = f"{self.value_prefix}{value}"
        elif kind == "basic":
            token = base64.b64encode(f"{self.basic_username}:{value}".encode()).decode()
            set_headers["Authorization"] = f"Basic {token}"
        elif kind == "query":
            name = self.header_name or next(iter(self.query_params))
            sep = "&" if "?" in target else "?"
            target = f"{target}{sep}{quote(name, safe='')}={quote(self.value_prefix + value, safe='')}"
        lowered = {k.lower() for k in set_headers}
        out = [(k, v) for k, v in headers if k.lower() not in lowered]
        out += list(set_headers.items())
        present = {k.lower() for k, _ in out}
        out += [(k, v) for k, v in self.extra_headers.items() if k.lower() not in present]
        return target, out


def _check_value(value: object, where: str) -> None:
    """A value goes into HTTP headers: no CR, LF, NUL or other control characters."""
    if not isinstance(value, str) or not value or any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise PolicyError(f"{where}: the value must be a non-empty string without control characters")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SECRET_BYTES:
        raise PolicyError(f"{where}: the value is longer than {MAX_SECRET_BYTES} bytes")


class VaultSecret(Model):
    """A secret's metadata (the value is never returned)."""

    secret_id: str
    name: str
    scopes: list[VaultScope]
    created_at: datetime
    updated_at: datetime
    rotated_at: Optional[datetime] = None
    rotation_interval_days: int = 0
    rotation_due: bool = False


class VaultEvent(Model):
    """One change to the vault, or a refused one (the vault's audit log). Never the value."""

    timestamp: datetime
    action: Literal["create", "rotate", "update_scopes", "delete"]
    secret_id: str
    name: str
    decision: Literal["allowed", "denied"] = "allowed"
    hosts_before: list[str] = Field(default_factory=list)  # the scopes' domain entries
    hosts_after: list[str] = Field(default_factory=list)
    added_hosts: list[str] = Field(default_factory=list)  # entries the old scopes did not cover
    value_supplied: bool = False  # the change came with the value (create, rotate, a widening)
    reason: str = ""


def _hosts(scopes: list["VaultScope"]) -> list[str]:
    return [s.domain_regex for s in scopes]


def added_hosts(old: list["VaultScope"], new: list["VaultScope"]) -> list[str]:
    """The entries of `new` whose hosts the `old` scopes do not all cover (empty: a narrowing
    or the same hosts). Conservative: a regular expression is covered only by the same one."""
    before = [s.rule() for s in old]
    out = []
    for scope in new:
        rule = scope.rule()
        if rule.kind in ("all", "cidr"):  # injection matches host names only: such a scope sends nothing
            continue
        if rule.kind == "domain":
            covered = any(b.matches_name(rule.text) for b in before)
        elif rule.kind == "wildcard":  # "*.x.y" is within "*.y"
            covered = any(b.kind == "wildcard" and rule.text[1:].endswith(b.text[1:]) for b in before)
        else:
            covered = any(b.kind == "regex" and b.text == rule.text for b in before)
        if not covered:
            out.append(scope.domain_regex)
    return out


class VaultPreset(Model):
    key: str
    name: str
    category: str
    key_hint: str
    docs_url: str
    scopes: list[VaultScope]


def _preset(key: str, name: str, category: str, hint: str, docs: str, domain: str,
            **scope: Any) -> VaultPreset:
    return VaultPreset(key=key, name=name, category=category, key_hint=hint, docs_url=docs,
                       scopes=[VaultScope(domain_regex=domain, **scope)])


@functools.lru_cache(maxsize=None)
def presets() -> dict[str, VaultPreset]:
    """The known providers (built on first use: validating them costs a cold start ~ms)."""
    return {p.key: p for p in [
        _preset("openai", "OpenAI", "llm", "sk-...", "https://platform.openai.com/api-keys",
                "api.openai.com", injection_type="bearer"),
        _preset("anthropic", "Anthropic", "llm", "sk-ant-...", "https://console.anthropic.com/",
                "api.anthropic.com", injection_type="header", header_name="x-api-key",
                extra_headers={"anthropic-version": "2023-06-01"}),
        _preset("gemini", "Google Gemini", "llm", "AIza...", "https://aistudio.google.com/apikey",
                "generativelanguage.googleapis.com", injection_type="header", header_name="x-goog-api-key"),
        _preset("mistral", "Mistral", "llm", "", "https://console.mistral.ai/", "api.mistral.ai",
                injection_type="bearer"),
        _preset("groq", "Groq", "llm", "gsk_...", "https://console.groq.com/keys", "api.groq.com",
                injection_type="bearer"),
        _preset("huggingface", "Hugging Face", "ml", "hf_...", "https://huggingface.co/settings/tokens",
                "huggingface.co", injection_type="bearer"),
        _preset("github", "GitHub", "dev", "ghp_...", "https://github.com/settings/tokens",
                "api.github.com", injection_type="bearer"),
        _preset("stripe", "Stripe", "payments", "sk_live_...", "https://dashboard.stripe.com/apikeys",
                "api.stripe.com", injection_type="bearer"),
        _preset("alphavantage", "Alpha Vantage", "data", "", "https://www.alphavantage.co/support/",
                "www.alphavantage.co", injection_type="query", header_name="apikey"),
    ]}


class Vault:
    """Named secrets with scopes, host side."""

    _default: ClassVar[Optional["Vault"]] = None
    _default_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Union[str, Path, None] = None) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, str] = {}
        self._meta: dict[str, VaultSecret] = {}
        self._events: "deque[VaultEvent]" = deque(maxlen=MAX_EVENTS)
        self.path = Path(path).expanduser().resolve() if path is not None else None
        if self.path is not None:
            from .settings import cache_dir

            cache = cache_dir().resolve()
            if self.path == cache or cache in self.path.parents:
                raise PolicyError(f"Vault(path={str(path)!r}) is inside declaw-wasm's cache folder; "
                                  "keep secrets elsewhere")
            if self.path.exists():
                self._load()

    @classmethod
    def default(cls) -> "Vault":
        """The process's in-memory vault (what `VaultClient()` and `vault_refs=` use)."""
        with cls._default_lock:
            if cls._default is None:
                cls._default = cls()
            return cls._default

    # -- declaw's VaultClient methods ------------------------------------------------------------
    def create_secret(self, value: str, *, name: Optional[str] = None, provider: Optional[str] = None,
                      scopes: Optional[list[Union[VaultScope, dict[str, Any]]]] = None,
                      rotation_interval_days: int = 0) -> VaultSecret:
        _check_value(value, "create_secret")
        checked = self._scopes(provider, scopes)
        now = datetime.now(timezone.utc)
        name = name or provider or f"secret-{_random.token_hex(4)}"  # declaw: the provider's key
        with self._lock:
            if name in self._meta:
                raise PolicyError(f"a vault secret named {name!r} exists (rotate_secret changes its value)")
            self._values[name] = value
            self._meta[name] = VaultSecret(secret_id="vs_" + _random.token_hex(8), name=name,
                                           scopes=checked, created_at=now, updated_at=now,
                                           rotation_interval_days=rotation_interval_days)
            self._save()
            self._record("create", self._meta[name], hosts_after=_hosts(checked), value_supplied=True)
            return self._meta[name]

    def list_secrets(self) -> list[VaultSecret]:
        with self._lock:
            return list(self._meta.values())

    def rotate_secret(self, name: str, value: str) -> VaultSecret:
        _check_value(value, "rotate_secret")
        with self._lock:
            meta = self._get(name)
            now = datetime.now(timezone.utc)
            self._values[name] = value
            self._meta[name] = meta.model_copy(update={"updated_at": now, "rotated_at": now})
            self._save()
            self._record("rotate", meta, hosts_before=_hosts(meta.scopes), hosts_after=_hosts(meta.scopes),
                         value_supplied=True)
            return self._meta[name]

    def delete_secret(self, name: str) -> bool:
        with self._lock:
            meta = self._get(name)
            del self._values[name], self._meta[name]
            self._save()
            self._record("delete", meta, hosts_before=_hosts(meta.scopes))
            return True

    def update_scopes(self, name: str, scopes: list[Union[VaultScope, dict[str, Any]]],
                      value: Optional[str] = None) -> VaultSecret:
        """Replace the secret's scopes. Narrowing (or keeping) its hosts needs nothing more;
        adding a host needs `value` (the secret's value, given again: it replaces the stored
        one, as `rotate_secret` would), else `ConflictException`. Each call is an audit event,
        a refused one included."""
        checked = self._scopes(None, scopes)
        if value is not None:
            _check_value(value, "update_scopes")
        with self._lock:
            meta = self._get(name)
            added = added_hosts(meta.scopes, checked)
            before, after = _hosts(meta.scopes), _hosts(checked)
            if added and value is None:
                reason = (f"update_scopes would send vault secret {name!r} to {', '.join(added)}, beyond its "
                          f"hosts ({', '.join(before)}); widening a secret's hosts needs its value again "
                          "(update_scopes(name, scopes, value=...)), or delete and create it")
                self._record("update_scopes", meta, "denied", before, after, added, reason=reason)
                raise ConflictException(reason)
            now = datetime.now(timezone.utc)
            update: dict[str, Any] = {"scopes": checked, "updated_at": now}
            if value is not None:
                self._values[name] = value
                update["rotated_at"] = now
            self._meta[name] = meta.model_copy(update=update)
            self._save()
            self._record("update_scopes", meta, "allowed", before, after, added, value_supplied=value is not None)
            return self._meta[name]

    def audit_events(self) -> list[VaultEvent]:
        """The vault's changes (and refused ones), oldest first; the newest `MAX_EVENTS` are kept,
        in memory."""
        with self._lock:
            return list(self._events)

    @staticmethod
    def list_presets() -> list[VaultPreset]:
        return list(presets().values())

    # -- for sandboxes -------------------------------------------------------------------------
    def resolve(self, ref: str) -> tuple[str, list[VaultScope]]:
        """A `vault_refs` value (a name, or `vault://<team>/<env>/<name>`) -> value, scopes."""
        if not isinstance(ref, str):
            raise PolicyError(f"vault_refs values must be secret names, got {ref!r}")
        match = VAULT_URI.match(ref)
        name = match.group(1) if match else ref
        with self._lock:
            meta = self._get(name)
            return self._values[name], list(meta.scopes)

    # -- internals -----------------------------------------------------------------------------
    def _record(self, action: Literal["create", "rotate", "update_scopes", "delete"], meta: VaultSecret,
                decision: Literal["allowed", "denied"] = "allowed", hosts_before: Optional[list[str]] = None,
                hosts_after: Optional[list[str]] = None, added: Optional[list[str]] = None,
                value_supplied: bool = False, reason: str = "") -> None:
        """One audit event (under the lock), and its log line (no value, ever)."""
        event = VaultEvent(timestamp=datetime.now(timezone.utc), action=action, secret_id=meta.secret_id,
                           name=meta.name, decision=decision, hosts_before=hosts_before or [],
                           hosts_after=hosts_after or [], added_hosts=added or [], value_supplied=value_supplied,
                           reason=reason)
        self._events.append(event)
        log.info("vault %s %s of %r (%s): hosts %s -> %s%s", action, decision, meta.name[:100], meta.secret_id,
                 event.hosts_before, event.hosts_after, f", added {event.added_hosts}" if added else "")

    def _get(self, name: str) -> VaultSecret:
        meta = self._meta.get(name)
        if meta is None:
            raise PolicyError(f"no vault secret named {name!r} (create it with "
                              "VaultClient().create_secret(value, name=...))")
        return meta

    @staticmethod
    def _scopes(provider: Optional[str], scopes: Optional[list[Any]]) -> list[VaultScope]:
        found: list[VaultScope] = []
        if provider is not None:
            preset = presets().get(provider)
            if preset is None:
                raise PolicyError(f"unknown vault provider {provider!r} (known: {', '.join(presets())})")
            found += [s.model_copy() for s in preset.scopes]
        for scope in scopes or []:
            try:
                found.append(scope if isinstance(scope, VaultScope) else VaultScope.model_validate(scope))
            except ValidationError as exc:
                problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
                raise PolicyError(f"bad vault scope: {problems}") from None
        if not found:
            raise PolicyError("a vault secret needs a provider or scopes (where it may be sent)")
        return [s.checked() for s in found]

    def _save(self) -> None:
        if self.path is None:
            return
        data = {name: {"value": self._values[name], "meta": meta.model_dump(mode="json")}
                for name, meta in self._meta.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".vault-", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except BaseException:
            os.unlink(tmp)
            raise

    def _load(self) -> None:
        assert self.path is not None
        data = json.loads(self.path.read_text())
        for name, item in data.items():
            self._values[name] = item["value"]
            self._meta[name] = VaultSecret.model_validate(item["meta"])
