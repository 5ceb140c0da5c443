"""Name resolution for the guest: the host's DNS, or DECLAW_WASM_RESOLVE's fixed answers.

The host resolves every name itself (the guest has no DNS of its own), caps the number of
answers it considers (every one is checked by the policy: a name with one public and one
private address is refused), and the connection is then made to exactly the address that was
checked: there is no second lookup, so no DNS-rebinding window.

`DECLAW_WASM_RESOLVE="host:port:address[,address...][ host:port:address...]"` gives fixed
answers with curl's `--resolve` semantics (entries separated by spaces, `;` or commas; IPv6
addresses in brackets; `*` for any port), plus one extension: an address may carry a port
(`api.openai.com:443:127.0.0.1:8443`), so a test can map a name's 443 to a local server on
another port. A mapped address counts as explicitly allowed even when private (the policy still
applies to the name, and a metadata address is refused when the variable is read). It is a
testing hook: the first sandbox that uses it logs a warning.

`DECLAW_WASM_DNS_ANSWERS="name:address[,address][ name:address...]"` (IPv6 in brackets) stands
in for the host's DNS for those names: unlike DECLAW_WASM_RESOLVE's, its answers are judged
exactly as real DNS answers are (a private or metadata answer is refused), which is what it is
for: testing how answers are judged, on any backend (a process pool's workers read it too). It
makes no real query; the first sandbox that uses it logs a warning.

`DECLAW_WASM_EGRESS_LOOPBACK_ONLY=1` (tests only) refuses every real DNS query and every
connection to a non-loopback address, whatever the policy says: a second fence for test runs
that cannot use a network namespace.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .. import settings
from ..settings import DNS_ANSWERS_ENV, LOOPBACK_ONLY_ENV, RESOLVE_ENV
from .._printable import logger
from .._threads import CapReached, ThreadCap
from .policy import IPAddress, PolicyError, is_metadata, parse_address

log = logger("declaw_wasm.egress")

MAX_ANSWERS = 16
# A lookup runs on a thread of its own (getaddrinfo cannot be interrupted): at most this many
# alive for one sandbox, and in this process, lookups whose guest stopped waiting included.
PER_SANDBOX_LOOKUPS = 16
PROCESS_LOOKUPS = 128
LOOKUP_THREADS = ThreadCap("name lookups", PER_SANDBOX_LOOKUPS, PROCESS_LOOKUPS)

_ENTRY_START = re.compile(r"^\+?([^:\[\]\s]+):(\d{1,5}|\*):(.+)$")
_ADDRESS = re.compile(r"^(\[[0-9A-Fa-f:.%A-Za-z]+\]|[0-9.]+)(?::(\d{1,5}))?$")


class ResolveError(Exception):
    """A name could not be resolved (the message says why)."""


@dataclass(frozen=True)
class Mapped:
    """One fixed answer: the address the guest sees, and the port the host really uses (None:
    the port the guest asked for)."""

    ip: IPAddress
    port: Optional[int]


def parse_overrides(text: str) -> dict[tuple[str, Optional[int]], list[Mapped]]:
    """DECLAW_WASM_RESOLVE's entries: (name, port or None for `*`) -> answers."""
    table: dict[tuple[str, Optional[int]], list[Mapped]] = {}
    current: Optional[list[Mapped]] = None
    for item in filter(None, re.split(r"[\s;,]+", text.strip())):
        start = _ENTRY_START.match(item)
        if start:
            name, port, rest = start.groups()
            key = (name.lower().rstrip("."), None if port == "*" else int(port))
            current = table.setdefault(key, [])
            item = rest
        elif current is None:
            raise PolicyError(f"{RESOLVE_ENV}: {item!r} is not host:port:address")
        match = _ADDRESS.match(item)
        if not match:
            raise PolicyError(f"{RESOLVE_ENV}: {item!r} is not an address (IPv6 goes in brackets)")
        ip = parse_address(match.group(1))
        if ip is None:
            raise PolicyError(f"{RESOLVE_ENV}: {item!r} is not an address")
        if is_metadata(ip):
            raise PolicyError(f"{RESOLVE_ENV}: {ip} is a cloud metadata address; it cannot be mapped")
        port_text = match.group(2)
        if port_text is not None and not 0 < int(port_text) < 65536:
            raise PolicyError(f"{RESOLVE_ENV}: bad port in {item!r}")
        current.append(Mapped(ip, int(port_text) if port_text else None))
    return table


def parse_dns_answers(text: str) -> dict[str, list[IPAddress]]:
    """DECLAW_WASM_DNS_ANSWERS's entries: name -> its answers (any address, metadata included:
    they are judged, not trusted)."""
    table: dict[str, list[IPAddress]] = {}
    for item in filter(None, re.split(r"[\s;]+", text.strip())):
        name, sep, rest = item.partition(":")
        if not sep or not name or not rest:
            raise PolicyError(f"{DNS_ANSWERS_ENV}: {item!r} is not name:address[,address]")
        answers = table.setdefault(name.lower().rstrip("."), [])
        for address in rest.split(","):
            try:
                ip = parse_address(address) if _ADDRESS.match(address) else None
            except PolicyError:
                ip = None
            if ip is None or (":" in address and not address.startswith("[")):
                raise PolicyError(f"{DNS_ANSWERS_ENV}: {address!r} in {item!r} is not an address "
                                  "(IPv6 goes in brackets)")
            answers.append(ip)
    return table


_warned = threading.Event()
_warned_dns = threading.Event()


def dns_answers_from_env() -> dict[str, list[IPAddress]]:
    table = parse_dns_answers(settings.dns_answers())
    if table and not _warned_dns.is_set():
        _warned_dns.set()
        log.warning("%s is set: sandboxes get fixed DNS answers for %s. This is a testing hook; do "
                    "not ship it.", DNS_ANSWERS_ENV, ", ".join(sorted(table)))
    return table


def overrides_from_env() -> dict[tuple[str, Optional[int]], list[Mapped]]:
    text = settings.resolve_overrides()
    if not text.strip():
        return {}
    table = parse_overrides(text)
    if not _warned.is_set():
        _warned.set()
        log.warning("%s is set: sandboxes resolve %s to fixed addresses, which count as allowed "
                    "even when private. This is a testing hook; do not ship it.", RESOLVE_ENV,
                    ", ".join(sorted({name for name, _ in table})))
    return table


def loopback_only() -> bool:
    return settings.egress_loopback_only()


def system_lookup(name: str) -> list[Any]:
    """The host's resolver (getaddrinfo: /etc/hosts, DNS...)."""
    if loopback_only():
        raise ResolveError(f"{LOOPBACK_ONLY_ENV} is set: no real DNS queries")
    return socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)


@dataclass(frozen=True)
class Answer:
    """What a name resolved to: checked addresses in order; `mapped` if from the fixed table."""

    addresses: list[IPAddress]
    mapped: bool


class Resolver:
    """Resolves names for one sandbox (whose lookup threads are counted against
    LOOKUP_THREADS as this resolver's)."""

    def __init__(self, overrides: Optional[dict[tuple[str, Optional[int]], list[Mapped]]] = None,
                 max_answers: int = MAX_ANSWERS,
                 dns_answers: Optional[dict[str, list[IPAddress]]] = None) -> None:
        self.overrides = overrides or {}
        self.dns_answers = dns_answers or {}
        self.max_answers = max_answers
        self.queries = 0  # real DNS queries made (the tests check some are never made)
        self.system_lookup: Callable[[str], list[Any]] = system_lookup

    def mapped(self, name: str, port: Optional[int]) -> Optional[list[Mapped]]:
        found = self.overrides.get((name, port)) if port else None
        if found is None:
            found = self.overrides.get((name, None))
        if found is None and not port:
            found = next((v for (n, _), v in self.overrides.items() if n == name), None)
        return found

    def real_port(self, name: Optional[str], ip: IPAddress, port: int) -> int:
        """The port the host connects to for the guest's (ip, port) reached for `name`."""
        if name is not None:
            for entry in self.mapped(name, port) or ():
                if entry.ip == ip and entry.port is not None:
                    return entry.port
        return port

    def resolve(self, name: str, port: Optional[int], timeout: float,
                should_stop: Callable[[], bool]) -> Answer:
        """The addresses of `name` (normalised), waiting at most `timeout` seconds."""
        entries = self.mapped(name, port)
        if entries is not None:
            return Answer([e.ip for e in entries][: self.max_answers], True)
        self.queries += 1
        result: dict[str, Any] = {}
        done = threading.Event()
        system_lookup = self.system_lookup
        if name in self.dns_answers:  # as the host's DNS would answer (DECLAW_WASM_DNS_ANSWERS)
            fixed = self.dns_answers[name]

            def system_lookup(_name: str) -> list[Any]:
                return [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, socket.SOCK_STREAM,
                         6, "", (str(ip), 0)) for ip in fixed]

        def lookup() -> None:
            try:
                result["infos"] = system_lookup(name)
            except Exception as exc:  # OSError, UnicodeError, ResolveError...: the guest hears why
                result["error"] = exc
            finally:
                done.set()

        # A thread of its own per lookup (getaddrinfo cannot be interrupted): the guest's wait
        # stays stoppable, and the thread inherits its caller's network namespace. Counted
        # against this resolver's (its sandbox's) cap and the process's until it returns.
        try:
            LOOKUP_THREADS.start(self, lookup, name="declaw-dns")
        except CapReached as exc:
            raise ResolveError(f"looking up {name}: {exc}") from None
        deadline = time.monotonic() + timeout
        while not done.wait(0.05):
            if should_stop():
                raise ResolveError("stopped")
            if time.monotonic() > deadline:
                raise ResolveError(f"looking up {name} timed out after {timeout:g} s")
        if "error" in result:
            failure = result["error"]
            raise ResolveError(f"{name}: {getattr(failure, 'strerror', None) or failure}")
        addresses = self._addresses(result["infos"])
        if not addresses:
            raise ResolveError(f"{name} has no addresses")
        return Answer(addresses, False)

    def _addresses(self, infos: list[Any]) -> list[IPAddress]:
        """getaddrinfo's answers as distinct addresses, at most max_answers."""
        addresses: list[IPAddress] = []
        for info in infos:
            try:
                ip = ipaddress.ip_address(str(info[4][0]))
            except ValueError:
                continue
            if ip not in addresses:
                addresses.append(ip)
            if len(addresses) >= self.max_answers:
                break
        return addresses
