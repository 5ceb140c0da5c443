"""Secrets that never enter the guest: placeholders out, values in on the host, and back out.

`Sandbox.create(secrets={"OPENAI_API_KEY": Secret("sk-...", hosts=["api.openai.com"])})`: the
guest's environment holds a unique placeholder, never the value. The HTTP relay replaces the
placeholder by the value in request headers and the request target only when

* the connection is TLS that the host itself verified (the guest cannot turn verification off
  on the host side), for a name in the secret's `hosts` (entries as in `allow_out`), and
* the request's `Host` is that name (the relay refuses any other Host anyway).

Anywhere else the placeholder goes out unchanged. Vault references (vault.py) use the same
path: the guest sees `declaw:vault-managed` and the host sets the provider's auth header.

Responses: the host replaces every secret value by its placeholder in every response head
(the final one and every 1xx: status line's reason, header names and values, `Location`
included) and in bodies it decodes (identity, gzip, deflate, br, zstd), also in JSON-escaped and
URL-encoded spellings, so that an echo does not hand the value to the guest; trailers are
dropped. A body the host cannot decode (an unknown or too deeply stacked Content-Encoding, a
corrupt body, a zstd window over RFC 9659's 8 MiB, a large-window br stream, decoders needing
more memory than one body is given: declaw_wasm/_codings.py, whose bounded decoders
the relay uses) is refused with a 502 (http.py): passing it on raw would pass the value too.
That is a backstop: the real protection is where the value is sent, and an echo the host cannot
recognise (base64, encrypted, split...) still gets through (docs/security.md lists the limits).
Values live only in memory (never in snapshots, audit events or logs).
"""

from __future__ import annotations

import json
import re
import secrets as _random
from dataclasses import dataclass
from ipaddress import ip_address
from typing import TYPE_CHECKING, Iterable, Optional
from urllib.parse import quote

from ..secrets import MAX_SECRET_BYTES as MAX_SECRET_BYTES
from ..secrets import Secret as Secret  # its public home is declaw_wasm.secrets
from .policy import PolicyError, Rule, parse_rule

if TYPE_CHECKING:
    from ..secrets import VaultScope

VAULT_PLACEHOLDER = "declaw:vault-managed"


@dataclass
class Injection:
    """One secret as the relay uses it."""

    name: str
    value: str
    placeholder: str
    rules: list[Rule]
    scope: Optional["VaultScope"] = None  # a vault secret: how to add it to requests

    def applies_to(self, name: str) -> bool:
        """Whether the secret goes to `name`, the host the request is for: a name matches its
        domain, wildcard and regex entries; an IP address (a request made to one) its IP and
        CIDR entries, as in `allow_out`."""
        try:
            address = ip_address(name.strip("[]"))
        except ValueError:
            return any(rule.matches_name(name) for rule in self.rules)
        return any(rule.matches_address(address) for rule in self.rules)


class SecretBook:
    """A sandbox's secrets: placeholders for the guest, injection and scrubbing for the relay."""

    def __init__(self, injections: Iterable[Injection] = ()) -> None:
        self.injections = list(injections)
        self._needles: Optional[list[tuple[bytes, bytes]]] = None

    @classmethod
    def build(cls, secrets: Optional[dict[str, Secret]], vault_refs: Optional[dict[str, str]],
              vault: object = None) -> "SecretBook":
        found: list[Injection] = []
        if secrets is not None:
            if not isinstance(secrets, dict):
                raise PolicyError("secrets must be a dict of environment variable name to Secret")
            for name, secret in secrets.items():
                _check_env_name(name, "secrets")
                if not isinstance(secret, Secret):
                    raise PolicyError(f"secrets[{name!r}] must be a declaw_wasm.Secret (value and hosts)")
                found.append(Injection(name, secret.reveal(), "declaw-secret-" + _random.token_hex(16),
                                       [parse_rule(h, "allow_out") for h in secret.hosts]))
        if vault_refs:
            from ..secrets import Vault

            store = vault if isinstance(vault, Vault) else Vault.default()
            if not isinstance(vault_refs, dict):
                raise PolicyError("vault_refs must be a dict of environment variable name to secret name")
            for name, ref in vault_refs.items():
                _check_env_name(name, "vault_refs")
                value, scopes = store.resolve(ref)
                for scope in scopes:
                    found.append(Injection(name, value, VAULT_PLACEHOLDER, [scope.rule()], scope))
        names = [i.name for i in found if i.scope is None]
        if len(set(names)) != len(names):
            raise PolicyError("secrets: a variable is named twice")
        return cls(found)

    def __bool__(self) -> bool:
        return bool(self.injections)

    def guest_env(self) -> dict[str, str]:
        return {i.name: i.placeholder for i in self.injections}

    def use_placeholders(self, placeholders: dict[str, str]) -> None:
        """Give the secrets named in `placeholders` those placeholders (a restored sandbox: its
        guests' memory holds the old ones). Before the book is used."""
        for inj in self.injections:
            if inj.scope is None and inj.name in placeholders:
                inj.placeholder = placeholders[inj.name]
        self._needles = None

    def values(self) -> list[str]:
        return [i.value for i in self.injections]

    # -- requests ----------------------------------------------------------------------------
    def inject(self, name: str, verified_tls: bool, target: str,
               headers: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]], list[str]]:
        """The request's target and headers with placeholders replaced for the secrets scoped
        to `name` (only over verified TLS), and vault headers added; the names injected."""
        if not verified_tls:
            return target, headers, []
        used: list[str] = []
        for inj in self.injections:
            if not inj.applies_to(name):
                continue
            if inj.scope is not None:
                target, headers = inj.scope.apply(inj.value, target, headers)
                used.append(inj.name)
                continue
            if inj.placeholder in target:
                target = target.replace(inj.placeholder, quote(inj.value, safe=""))
                used.append(inj.name)
            replaced = []
            for key, val in headers:
                if inj.placeholder in val:
                    val = val.replace(inj.placeholder, inj.value)
                    used.append(inj.name)
                replaced.append((key, val))
            headers = replaced
        return target, headers, sorted(set(used))

    # -- responses ---------------------------------------------------------------------------
    def needles(self) -> list[tuple[bytes, bytes]]:
        """(spelling of a value, its placeholder), longest first."""
        if self._needles is None:
            pairs: dict[bytes, bytes] = {}
            for inj in self.injections:
                mark = inj.placeholder.encode()
                for form in _spellings(inj.value):
                    pairs.setdefault(form.encode("utf-8", "surrogatepass"), mark)
            self._needles = sorted(pairs.items(), key=lambda kv: -len(kv[0]))
        return self._needles

    def scrub_bytes(self, data: bytes) -> bytes:
        """`data` (a header name or value, a reason phrase) with every spelling of every value
        replaced by its placeholder: on the bytes as they came, so a value in any encoding of
        its UTF-8 form the needles cover is found."""
        for needle, mark in self.needles():
            if needle in data:
                data = data.replace(needle, mark)
        return data

    def holds_value(self, data: bytes) -> bool:
        return any(needle in data for needle, _ in self.needles())

    def scrubber(self) -> "Scrubber":
        return Scrubber(self.needles())


def _check_env_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not name or "=" in name or "\x00" in name:
        raise PolicyError(f"{where}: {name!r} is not a valid environment variable name")


def _spellings(value: str) -> list[str]:
    """How a value may come back in a body: as is, JSON-escaped (with and without `\\/`, ASCII
    escapes), URL-encoded (with upper- and lower-case hex)."""
    forms = [value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             quote(value, safe=""), quote(value)]
    forms.append(forms[1].replace("/", "\\/"))
    forms += [_PERCENT.sub(lambda m: m.group(0).lower(), f) for f in forms[3:5]]
    return [f for i, f in enumerate(forms) if f and f not in forms[:i]]


_PERCENT = re.compile(r"%[0-9A-F]{2}")


class Scrubber:
    """Replaces every needle in a stream, also across chunk boundaries (it holds back the last
    `longest - 1` bytes until the next chunk or the end)."""

    def __init__(self, needles: list[tuple[bytes, bytes]]) -> None:
        self.needles = needles
        self.keep = max((len(n) for n, _ in needles), default=1) - 1
        self.tail = b""
        self.hits = 0

    def feed(self, chunk: bytes) -> bytes:
        data = self._replace(self.tail + chunk)
        if self.keep <= 0:
            self.tail = b""
            return data
        self.tail = data[-self.keep:]
        return data[: -self.keep]

    def end(self) -> bytes:
        data, self.tail = self.tail, b""
        return data

    def _replace(self, data: bytes) -> bytes:
        for needle, mark in self.needles:
            if needle in data:
                self.hits += data.count(needle)
                data = data.replace(needle, mark)
        return data
