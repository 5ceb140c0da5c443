"""The network policy: which names and addresses a sandbox may connect to.

declaw's semantics (declaw 1.7.0's NetworkPolicy / SandboxNetworkOpts, E2B's
`network={"allow_out": [...], "deny_out": [...]}`, `allow_internet_access`), as issue 14 fixes
them where declaw's SDK and docs disagree:

* `allow_out` entries are IPs, CIDRs (v4 or v6), domains (`api.openai.com`), wildcards
  (`*.example.com`: subdomains only, not the apex) or `~regex` (searched in the name);
  `deny_out` entries are IPs and CIDRs. `ALL_TRAFFIC` (`0.0.0.0/0`) means all traffic, IPv6
  included.
* Allow wins over deny. An `allow_out` list denies everything it does not allow (with or
  without `deny_out`); `deny_out` alone denies its ranges and leaves the rest of the public
  internet; `allow_internet_access=False` denies everything. No policy: the public internet.
* Every non-global address (loopback, RFC 1918, link-local, CGNAT, multicast, reserved, the
  host's own addresses, IPv4 embedded in IPv6 forms that carry one of those...) is denied unless
  an `allow_out` CIDR narrower than the whole address space names it, whatever else allows it.
  Cloud metadata addresses are denied always.
* With an allow-list, a name no rule can match is refused before any DNS query (no data leaks
  through lookups of `<data>.attacker.example`). Names that only a CIDR rule could admit are
  refused too: reach such destinations by address.

The engine takes plain data (lists of strings and a bool); `Policy.from_create` adapts the
`network=` forms users pass (E2B's dict, declaw's option objects).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable, Optional

# The rule grammar is declaw_wasm.security.network_rules' (one parser for the relay, secrets, vault
# scopes and the declaw config models); re-exported here for the engine's users.
from ..security.network_rules import ALL_TRAFFIC as ALL_TRAFFIC
from ..security.network_rules import NUMERIC_LABEL, IPAddress, IPNetwork, PolicyError, Rule, parse_rule
from ..security.network_rules import normalize_name as normalize_name


def _nets(*texts: str) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(t) for t in texts)


# What `ipaddress.is_global` misses, or gets differently across Python versions: all of these
# are non-global here, whatever the running Python says.
_NON_GLOBAL_V4 = _nets(
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32")
_NON_GLOBAL_V6 = _nets(
    "::/128", "::1/128", "::/96", "100::/64", "2001::/23", "2001:db8::/32", "64:ff9b:1::/48",
    "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: for local use, any length
_SIIT = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated `::ffff:0:a.b.c.d` (RFC 2765)
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")
_TEREDO = ipaddress.ip_network("2001::/32")
_COMPAT = ipaddress.ip_network("::/96")  # IPv4-compatible `::a.b.c.d` (deprecated)

# Cloud instance metadata services (AWS, GCP, Azure, OCI: 169.254.169.254; AWS ECS task
# metadata; Alibaba; AWS IMDS over IPv6; Oracle's second address). Denied always.
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.170.23", "100.100.100.200", "192.0.0.192",
    "fd00:ec2::254", "fd00:ec2::23"))
METADATA_NAMES = frozenset({"metadata.google.internal", "metadata.goog", "metadata",
                            "instance-data", "instance-data.ec2.internal"})



# -- addresses --------------------------------------------------------------------------------

def parse_inet_aton(text: str) -> Optional[ipaddress.IPv4Address]:
    """IPv4 in every spelling `inet_aton` (and so the guest's C library, curl, browsers)
    accepts: 1 to 4 parts, each decimal, octal (leading 0) or hex (0x); the last part fills the
    remaining bytes (`127.1`, `2130706433`, `0x7f.1`, `0177.0.0.01`). None if not one."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        try:
            if part[:2].lower() == "0x":
                value = int(part[2:], 16) if len(part) > 2 else -1
            elif len(part) > 1 and part[0] == "0":
                value = int(part[1:], 8)
            else:
                value = int(part, 10) if part.isdigit() else -1
        except ValueError:
            return None
        if value < 0:
            return None
        values.append(value)
    *head, last = values
    if any(v > 255 for v in head) or last >= 1 << (8 * (4 - len(head))):
        return None
    number = last
    for i, v in enumerate(head):
        number |= v << (8 * (3 - i))
    return ipaddress.IPv4Address(number)


def parse_address(text: str) -> Optional[IPAddress]:
    """`text` as an IP address if it spells one (any IPv4 spelling, IPv6 with or without
    brackets and a zone id), else None (a name). Raises PolicyError for something that looks
    numeric but is no valid address (never to be looked up as a name)."""
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            raise PolicyError(f"{text!r} is not a valid IPv6 address") from None
    bare = text[:-1] if text.endswith(".") else text
    try:
        return ipaddress.IPv4Address(bare)
    except ValueError:
        pass
    last = bare.rsplit(".", 1)[-1].lower()
    if bare and NUMERIC_LABEL.fullmatch(last):  # no top-level domain is numeric
        address = parse_inet_aton(bare.lower())
        if address is None:
            raise PolicyError(f"{text!r} is not a valid IPv4 address")
        return address
    return None


def unwrap(ip: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is that IPv4 address on the wire."""
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip
        if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
            ip = ipaddress.IPv6Address(str(ip).split("%", 1)[0])
    return ip


def carried_v4(ip: IPAddress) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 transition form carries (none for any other address): what
    the packets may really reach, through a translator, a tunnel or a dual-stack socket.

    * mapped `::ffff:a.b.c.d` and translated (SIIT) `::ffff:0:a.b.c.d`: the last 32 bits;
    * compatible `::a.b.c.d` (not `::` and `::1`): the last 32 bits;
    * NAT64, the well-known `64:ff9b::/96` (RFC 6052): the last 32 bits;
    * NAT64, the local-use `64:ff9b:1::/48` (RFC 8215): a network may carve out of it a prefix
      of any of RFC 6052's lengths from /48 down (/48, /56, /64 or /96), and the host cannot
      know which, so the address is read at each of those positions (RFC 6052 section 2.2,
      skipping bits 64-71) and every reading counts;
    * 6to4 `2002::/16`: bits 16-47;
    * Teredo `2001::/32`: the server (bits 32-63) and the client (the last 32 bits, inverted).
    """
    if not isinstance(ip, ipaddress.IPv6Address):
        return ()
    last = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None or ip in _SIIT or ip in _NAT64:
        return (last,)
    if ip in _COMPAT:
        return (last,) if int(ip) > 1 else ()
    if ip in _NAT64_LOCAL:
        b = ip.packed
        readings = (b[6:8] + b[9:11], b[7:8] + b[9:12], b[9:13], b[12:16])  # /48 /56 /64 /96
        return tuple(dict.fromkeys(ipaddress.IPv4Address(r) for r in readings))
    if ip in _SIX_TO_FOUR:
        return (ipaddress.IPv4Address(ip.packed[2:6]),)
    if ip in _TEREDO:
        server = ipaddress.IPv4Address(ip.packed[4:8])
        client = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF ^ 0xFFFFFFFF)
        return (server, client)
    return ()


def is_metadata(ip: IPAddress) -> bool:
    ip = unwrap(ip)
    return ip in METADATA_ADDRESSES or any(v4 in METADATA_ADDRESSES for v4 in carried_v4(ip))


class _HostAddresses:
    """The host's own addresses (every interface), refreshed every 30 s: a sandbox must not
    reach services listening on the host through its public address either."""

    TTL = 30.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = -self.TTL
        self._addresses: frozenset[IPAddress] = frozenset()

    def get(self) -> frozenset[IPAddress]:
        with self._lock:
            if time.monotonic() - self._at > self.TTL:
                self._addresses = frozenset(self._scan())
                self._at = time.monotonic()
            return self._addresses

    @staticmethod
    def _scan() -> set[IPAddress]:
        found: set[IPAddress] = set()
        try:  # Linux: every local IPv4 address is a "/32 host LOCAL" leaf of the FIB trie
            lines = open("/proc/net/fib_trie").read().splitlines()
            for i, line in enumerate(lines):
                if "/32 host LOCAL" in line and i > 0:
                    found.add(ipaddress.ip_address(lines[i - 1].split()[-1]))
        except (OSError, ValueError):
            pass
        try:
            for line in open("/proc/net/if_inet6").read().splitlines():
                hexa = line.split()[0]
                found.add(ipaddress.IPv6Address(int(hexa, 16)))
        except (OSError, ValueError, IndexError):
            pass
        if not found:  # not Linux: what the host's name resolves to (may ask DNS once)
            try:
                for info in socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP):
                    found.add(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            except (OSError, ValueError, UnicodeError):
                pass
        return found


host_addresses = _HostAddresses()


def non_global_reason(ip: IPAddress) -> Optional[str]:
    """Why `ip` is not a public internet address ("loopback", "private"...), or None."""
    ip = unwrap(ip)
    if isinstance(ip, ipaddress.IPv4Address):
        if any(ip in net for net in _NON_GLOBAL_V4) or not ip.is_global:
            return _kind(ip)
    elif ip.is_loopback or ip.is_unspecified:
        return _kind(ip)
    elif ip in _NAT64_LOCAL:  # never public, and which reading is meant is unknown (carried_v4)
        return "local-use NAT64 (64:ff9b:1::/48)"
    else:
        carried = carried_v4(ip)
        for inner in carried:
            reason = non_global_reason(inner)
            if reason:
                return f"IPv6 form of a {reason}"
        if ip in _COMPAT or ip in _TEREDO:
            return "IPv4-compatible or Teredo"
        if any(ip in net for net in _NON_GLOBAL_V6) or (not carried and not ip.is_global):
            return _kind(ip)
    if ip in host_addresses.get():
        return "the host's own"
    return None


def _kind(ip: IPAddress) -> str:
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if isinstance(ip, ipaddress.IPv4Address) and ip in ipaddress.ip_network("100.64.0.0/10"):
        return "carrier-grade NAT"
    if ip.is_private:
        return "private"
    return "reserved"


def _entries(value: Any, where: str) -> list[Any]:
    """`network`'s `allow_out`/`deny_out`: a list (or tuple, set) of strings, or nothing."""
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise PolicyError(f"network: {where} must be a list of strings, got {type(value).__name__} "
                          f"{value!r:.80}")
    return list(value)


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one name or destination."""

    allowed: bool
    rule: str  # the entry that decided, or "default", "metadata", "non-global", ...
    reason: str  # one sentence: for the guest's exception message and the audit log
    explicit: bool = False  # an allow_out entry named the destination (raw TCP may pass)

    def as_dict(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "rule": self.rule, "reason": self.reason}


def _allow(rule: str, reason: str, explicit: bool = False) -> Decision:
    return Decision(True, rule, reason, explicit)


def _deny(rule: str, reason: str) -> Decision:
    return Decision(False, rule, reason)


@dataclass(frozen=True)
class Policy:
    """A sandbox's network policy (plain data in, decisions out)."""

    allow: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    internet: bool = True

    @classmethod
    def from_lists(cls, allow_out: Iterable[str] = (), deny_out: Iterable[str] = (),
                   allow_internet: bool = True) -> "Policy":
        if isinstance(allow_out, str) or isinstance(deny_out, str):
            raise PolicyError("allow_out and deny_out must be lists of strings, not one string")
        allow = tuple(parse_rule(e, "allow_out") for e in allow_out)
        deny = tuple(parse_rule(e, "deny_out") for e in deny_out)
        return cls(allow, deny, bool(allow_internet))

    @classmethod
    def from_create(cls, network: Any = None, allow_internet_access: Any = True,
                    security: Any = None) -> "Policy":
        """From `Sandbox.create`'s arguments: `network` as E2B's dict or any object with
        `allow_out`/`deny_out` attributes (declaw's NetworkPolicy/SandboxNetworkOpts); if it is
        None, `security.network` (declaw hoists it the same way). `allow_internet_access=False`
        wins over both, as in declaw."""
        if not isinstance(allow_internet_access, bool):
            raise PolicyError(f"allow_internet_access must be True or False, got {allow_internet_access!r}")
        if not allow_internet_access:
            return cls(internet=False)
        if network is None and security is not None:
            network = getattr(security, "network", None)
        if network is None:
            return cls()
        if isinstance(network, dict):
            unknown = set(network) - {"allow_out", "deny_out", "allow_public_traffic",
                                      "mask_request_host"}
            if unknown:
                raise PolicyError(f"network: unknown key(s) {', '.join(sorted(unknown))} (expected "
                                  "allow_out, deny_out)")
            get = network.get
        elif hasattr(network, "allow_out") or hasattr(network, "deny_out"):
            def get(key: str, default: Any = None) -> Any:
                return getattr(network, key, default)
        else:
            raise PolicyError("network must be a dict {'allow_out': [...], 'deny_out': [...]} or an "
                              f"object with allow_out/deny_out, got {type(network).__name__}")
        if get("mask_request_host", None):
            raise PolicyError("network: mask_request_host is not supported (every request's Host "
                              "must be the name its connection was opened for)")
        return cls.from_lists(_entries(get("allow_out", None), "allow_out"),
                              _entries(get("deny_out", None), "deny_out"))

    # -- questions ---------------------------------------------------------------------------
    @property
    def allow_list(self) -> bool:
        """Whether everything not allowed is denied."""
        return bool(self.allow) or not self.internet

    @property
    def resolves_any_name(self) -> bool:
        return any(rule.kind == "all" or (rule.kind == "cidr" and rule.network is not None
                                          and rule.network.prefixlen == 0) for rule in self.allow)

    def _name_rule(self, name: str) -> Optional[Rule]:
        return next((rule for rule in self.allow if rule.matches_name(name)), None)

    def check_name(self, name: str, mapped: bool = False) -> Decision:
        """Before any DNS query: may `name` (normalised) be looked up at all?"""
        if not self.internet:
            return _deny("allow_internet_access=False", "the sandbox has no internet access")
        if name in METADATA_NAMES:
            return _deny("metadata", f"{name} is a cloud metadata service")
        rule = self._name_rule(name)
        if rule is not None:
            return _allow(rule.text, f"allow_out entry {rule.text!r} matches {name}", True)
        if self.allow_list and not self.resolves_any_name:
            return _deny("not in allow_out", f"{name} matches no allow_out entry")
        if "." not in name and not mapped:
            return _deny("single-label", f"{name!r} is a single-label name (local networks only)")
        if name == "localhost" or name.endswith(".localhost"):
            return _deny("non-global", f"{name} is a loopback name")
        return _allow("default", "public names are allowed")

    def check_address(self, ip: IPAddress, name: Optional[str] = None,
                      mapped: bool = False) -> Decision:
        """May the sandbox connect to `ip` (reached for `name`, if by name)? `mapped`: the
        address came from DECLAW_WASM_RESOLVE, which counts as an explicit allow of a private
        address (never of a metadata one)."""
        ip = unwrap(ip)
        if is_metadata(ip):
            return _deny("metadata", f"{ip} is a cloud metadata address (always denied)")
        if not self.internet:
            return _deny("allow_internet_access=False", "the sandbox has no internet access")
        narrow = self._narrow(ip)
        reason = non_global_reason(ip)
        if reason and narrow is None and not mapped:
            article = "an" if reason[0] in "aeiouIU" else "a"
            return _deny("non-global", f"{ip} is {article} {reason} address (allowed only by an "
                         "allow_out CIDR that names it)")
        rule = self._name_rule(name) if name else None
        if rule is None:
            rule = narrow or next((r for r in self.allow if r.matches_address(ip)), None)
        if rule is not None:
            return _allow(rule.text, f"allow_out entry {rule.text!r} allows {name or ip}", True)
        if self.allow_list:
            return _deny("not in allow_out", f"{name or ip} matches no allow_out entry")
        carried = carried_v4(ip)
        for deny in self.deny:
            if deny.matches_address(ip) or any(deny.matches_address(v4) for v4 in carried):
                return _deny(deny.text, f"deny_out entry {deny.text!r} denies {ip}")
        return _allow("default", "public addresses are allowed")

    def _narrow(self, ip: IPAddress) -> Optional[Rule]:
        """The allow_out CIDR (narrower than everything) that names `ip`: one that contains it,
        or, for an IPv6 form carrying IPv4 addresses, one that contains each of them (as a
        mapped address is judged as its IPv4 address, so is every form by what it carries)."""
        narrow = [r for r in self.allow if r.kind == "cidr" and r.network is not None
                  and r.network.prefixlen > 0]
        found = next((r for r in narrow if r.matches_address(ip)), None)
        carried = carried_v4(ip)
        if found is not None or not carried:
            return found
        rules = [next((r for r in narrow if r.matches_address(v4)), None) for v4 in carried]
        return rules[0] if all(rules) else None

    def describe(self) -> dict[str, Any]:
        """The policy as plain data (for the audit log and served mode)."""
        return {"allow_out": [r.text for r in self.allow], "deny_out": [r.text for r in self.deny],
                "allow_internet_access": self.internet}
