"""The network-rule grammar: one parser for every place a network entry is written.

`parse_rule` reads one `allow_out` / `deny_out` entry into a `Rule` (what it matches). It is the
only parser of that grammar: the egress door's policy (declaw_wasm/_egress/policy.py), a
`Secret`'s `hosts`, a vault scope's `domain_regex` and the declaw config models'
`validate_network_entry` (network_policy.py) all call it, so what a config model accepts is what
the relay enforces, and nothing it accepts is a rule that can never match.

The grammar:

* an IP address or a CIDR, v4 or v6 (`10.0.0.0/8`, `2001:db8::/32`; host bits are ignored);
  `0.0.0.0/0` (also spelled `ALL_TRAFFIC`) is all traffic, IPv6 included;
* `allow_out` only: a domain (`api.openai.com`; lower-cased, one trailing dot dropped, at least
  two labels, no label of its own numeric at the end: `127.1` and `example.123` are addresses
  or nothing, never names), a wildcard (`*.example.com`: subdomains, not the apex) or `~regex`
  (a non-empty Python regular expression, searched in the lower-case host name).

Entries are stripped of surrounding spaces. Anything else is a `PolicyError` (a `ValueError`)
naming the entry and what is allowed where.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Optional, Union

from ..exceptions import InvalidArgumentException

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

ALL_TRAFFIC = "0.0.0.0/0"

_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)")  # a label inet_aton reads as a number


class PolicyError(InvalidArgumentException, ValueError):
    """A network policy entry, secret or vault setting (or a name or address the guest gave) is
    not acceptable."""


def normalize_name(text: str) -> str:
    """A host name as rules match it: lower case, no trailing dot. Raises PolicyError for what
    no DNS name can be (bad characters, empty labels, too long)."""
    name = text.strip().lower()
    if name.endswith("."):
        name = name[:-1]
    if not name or len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        raise PolicyError(f"{text!r} is not a valid host name")
    return name


@dataclass(frozen=True)
class Rule:
    """One policy entry: its text, and what it matches."""

    text: str
    kind: str  # "all", "cidr", "domain", "wildcard", "regex"
    network: Optional[IPNetwork] = None
    pattern: Any = None  # an RE2 pattern (`_re2.compile_user_pattern`)

    def matches_name(self, name: str) -> bool:
        if self.kind == "domain":
            return name == self.text
        if self.kind == "wildcard":
            return name.endswith(self.text[1:])  # "*.x.com" -> ".x.com": subdomains only
        if self.kind == "regex":
            assert self.pattern is not None
            return self.pattern.search(name) is not None
        return False

    def matches_address(self, ip: IPAddress) -> bool:
        if self.kind == "all":
            return True
        if self.kind == "cidr":
            assert self.network is not None
            return ip.version == self.network.version and ip in self.network
        return False

    @property
    def names_addresses(self) -> bool:
        return self.kind in ("all", "cidr")


def parse_rule(entry: Any, where: str) -> Rule:
    """One `allow_out` / `deny_out` entry, checked."""
    if not isinstance(entry, str) or not entry.strip():
        raise PolicyError(f"{where}: entries must be non-empty strings, got {entry!r}")
    text = entry.strip()
    if text.upper() == "ALL_TRAFFIC":
        text = ALL_TRAFFIC
    if text.startswith("~"):
        if where != "allow_out":
            raise PolicyError(f"{where}: {entry!r}: only allow_out takes ~regex entries")
        if not text[1:]:
            raise PolicyError(f"{where}: {entry!r}: a ~regex entry needs a pattern after the ~")
        from .._re2 import compile_user_pattern  # (imported when a policy has one: RE2 is ~2 MB)

        try:  # RE2: the host names it is matched against are the guest's (_re2.py says why)
            return Rule(text, "regex", pattern=compile_user_pattern(text[1:]))
        except ValueError as exc:
            raise PolicyError(f"{where}: {entry!r} is not a valid regular expression: {exc}") from None
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        network = None
    if network is not None:
        if network.prefixlen == 0:
            return Rule(text, "all" if network.version == 4 else "cidr", network=network)
        return Rule(text, "cidr", network=network)
    if where != "allow_out":
        raise PolicyError(f"{where}: {entry!r} is not an IP address or CIDR (deny_out takes only "
                          "those; to keep a domain out, list what is allowed in allow_out)")
    wildcard = text.startswith("*.")
    try:
        name = normalize_name(text[2:] if wildcard else text)
    except PolicyError:
        raise PolicyError(f"{where}: {entry!r} is not an IP, CIDR, domain or *.domain") from None
    if "." not in name:
        raise PolicyError(f"{where}: {entry!r}: single-label names are not accepted (use a full "
                          "domain name)")
    if NUMERIC_LABEL.fullmatch(name.rsplit(".", 1)[-1]):  # the door reads such a host as an address
        raise PolicyError(f"{where}: {entry!r} is neither a domain (its last label is numeric) nor "
                          "an IP address in dotted-quad form")
    return Rule("*." + name if wildcard else name, "wildcard" if wildcard else "domain")
