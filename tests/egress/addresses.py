"""Every IPv6 form that carries an IPv4 address, built around chosen IPv4 addresses: the table
test_guest_policy.py and test_policy.py judge, and the DNS answers conftest.py serves for it
(`DECLAW_WASM_DNS_ANSWERS`, so that a process pool's workers get them too)."""

from __future__ import annotations

import ipaddress

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address

# IPv4 addresses the default policy refuses, by kind
INNER = {"loopback": "127.0.0.1", "private": "10.1.2.3", "link-local": "169.254.1.1",
         "metadata": "169.254.169.254"}
PUBLIC = "93.184.216.34"
TEREDO_SERVER = "65.54.227.120"  # a public Teredo server


def _bits(v4: str) -> int:
    return int(V4(v4))


def _local_nat64(v4: str, length: int) -> str:
    """`v4` inside RFC 8215's local-use prefix 64:ff9b:1::/48, at the position RFC 6052 gives a
    prefix of `length` bits (48, 56, 64 or 96; bits 64-71 stay zero)."""
    b = V4(v4).packed
    out = bytearray(V6("64:ff9b:1::").packed)
    if length == 48:
        out[6:8], out[9:11] = b[:2], b[2:]
    elif length == 56:
        out[7:8], out[9:12] = b[:1], b[1:]
    elif length == 64:
        out[9:13] = b
    else:
        out[12:16] = b
    return str(V6(bytes(out)))


def _teredo(server: str, client: str) -> str:
    """A Teredo address: prefix 2001::/32, the server, flags and port, the client inverted."""
    return str(V6((0x20010000 << 96) | (_bits(server) << 64) | (0xFFFF << 32) | (_bits(client) ^ 0xFFFFFFFF)))


FORMS = {
    "mapped": lambda v4: f"::ffff:{v4}",
    "translated": lambda v4: f"::ffff:0:{v4}",
    "compatible": lambda v4: f"::{v4}",
    "nat64": lambda v4: f"64:ff9b::{v4}",
    "nat64-local-48": lambda v4: _local_nat64(v4, 48),
    "nat64-local-56": lambda v4: _local_nat64(v4, 56),
    "nat64-local-64": lambda v4: _local_nat64(v4, 64),
    "nat64-local-96": lambda v4: _local_nat64(v4, 96),
    "6to4": lambda v4: str(V6((0x2002 << 112) | (_bits(v4) << 80) | 1)),
    "teredo-server": lambda v4: _teredo(v4, PUBLIC),
    "teredo-client": lambda v4: _teredo(TEREDO_SERVER, v4),
}


def table() -> dict[str, tuple[str, str, str]]:
    """case name -> (IPv6 address, form, kind of the IPv4 inside)."""
    return {f"{form}-{kind}": (str(V6(make(v4))), form, kind)
            for form, make in FORMS.items() for kind, v4 in INNER.items()}


# forms around a public address, as DNS answers (resolved, never connected to)
PUBLIC_FORMS = {f"{form}-public": str(V6(FORMS[form](PUBLIC))) for form in ("mapped", "translated", "nat64", "6to4")}


def dns_name(case: str) -> str:
    return f"{case}.forms.example"


def dns_answers() -> str:
    """DECLAW_WASM_DNS_ANSWERS for every case: `<case>.forms.example` answers its address."""
    answers = {case: address for case, (address, _, _) in table().items()} | PUBLIC_FORMS
    return " ".join(f"{dns_name(case)}:[{address}]" for case, address in answers.items())
