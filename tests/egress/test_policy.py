"""The policy engine alone (host side, no guest): declaw's semantics as issue 14 fixes them."""

from __future__ import annotations

import ipaddress

import pytest

from declaw_wasm._egress.policy import (ALL_TRAFFIC, Policy, PolicyError, carried_v4, is_metadata,
                                        non_global_reason, parse_address, parse_inet_aton)
from declaw_wasm._egress.resolve import parse_dns_answers, parse_overrides

from . import addresses

ip = ipaddress.ip_address
PUBLIC = ip("93.184.216.34")
PUBLIC6 = ip("2606:2800:220:1:248:1893:25c8:1946")


def allowed(policy: Policy, address: str, name: str | None = None, mapped: bool = False) -> bool:
    return policy.check_address(ip(address), name, mapped).allowed


def test_default_policy_is_the_public_internet() -> None:
    policy = Policy()
    assert allowed(policy, str(PUBLIC), "example.com")
    assert allowed(policy, str(PUBLIC6))
    assert policy.check_name("example.com").allowed


def test_allow_internet_access_false_denies_everything() -> None:
    policy = Policy.from_create({"allow_out": ["example.com"]}, allow_internet_access=False)
    assert not policy.check_name("example.com").allowed
    assert not allowed(policy, str(PUBLIC), "example.com")
    assert not allowed(policy, "127.0.0.1", "example.com", mapped=True)


def test_allow_list_denies_the_rest_with_or_without_deny_out() -> None:
    for deny in ([], [ALL_TRAFFIC]):
        policy = Policy.from_lists(["api.openai.com"], deny)
        assert allowed(policy, str(PUBLIC), "api.openai.com")
        assert not allowed(policy, str(PUBLIC), "evil.com")
        assert not allowed(policy, str(PUBLIC))  # a literal address no rule names


def test_allow_wins_over_deny() -> None:
    policy = Policy.from_lists(["93.184.216.0/24"], ["93.184.0.0/16", ALL_TRAFFIC])
    assert allowed(policy, str(PUBLIC))
    assert not allowed(policy, "93.184.1.1")
    policy = Policy.from_lists(["api.openai.com"], ["93.184.216.34/32"])
    assert allowed(policy, str(PUBLIC), "api.openai.com")


def test_deny_out_alone_leaves_the_rest_of_the_internet() -> None:
    policy = Policy.from_lists([], ["93.184.216.0/24"])
    assert not allowed(policy, str(PUBLIC))
    assert allowed(policy, "8.8.8.8")
    assert policy.check_name("anything.example").allowed  # names are checked by address


def test_all_traffic_includes_ipv6() -> None:
    policy = Policy.from_lists([], [ALL_TRAFFIC])
    assert not allowed(policy, str(PUBLIC6))
    assert not allowed(policy, "::1", "v6.example", mapped=True)
    assert allowed(Policy.from_lists([ALL_TRAFFIC], []), str(PUBLIC6))
    only_v6 = Policy.from_lists([], ["::/0"])
    assert not allowed(only_v6, str(PUBLIC6)) and allowed(only_v6, str(PUBLIC))


def test_wildcards_match_subdomains_only() -> None:
    policy = Policy.from_lists(["*.example.com"], [])
    assert policy.check_name("sub.example.com").allowed
    assert policy.check_name("deep.sub.example.com").allowed
    assert not policy.check_name("example.com").allowed
    assert not policy.check_name("badexample.com").allowed
    assert not policy.check_name("example.com.evil.com").allowed


def test_regex_entries_and_case() -> None:
    policy = Policy.from_lists([r"~^api\d\.example\.com$", "API.OpenAI.com."], [])
    assert policy.check_name("api7.example.com").allowed
    assert not policy.check_name("api.example.com").allowed
    assert policy.check_name("api.openai.com").allowed


def test_a_name_no_rule_can_match_is_refused_before_dns() -> None:
    policy = Policy.from_lists(["api.openai.com", "10.0.0.0/8"], [ALL_TRAFFIC])
    decision = policy.check_name("data-123.attacker.example")
    assert not decision.allowed and decision.rule == "not in allow_out"
    assert Policy.from_lists([ALL_TRAFFIC], []).check_name("x.example").allowed


def test_bad_entries_are_refused_with_clear_errors() -> None:
    with pytest.raises(PolicyError, match="deny_out"):
        Policy.from_lists([], ["evil.com"])
    with pytest.raises(PolicyError, match="single-label"):
        Policy.from_lists(["localhost"], [])
    with pytest.raises(PolicyError, match="regular expression"):
        Policy.from_lists(["~("], [])
    with pytest.raises(PolicyError, match="lists"):
        Policy.from_lists("api.openai.com", [])
    with pytest.raises(PolicyError, match="unknown key"):
        Policy.from_create({"allow": ["x.com"]})
    with pytest.raises(PolicyError, match="mask_request_host"):
        Policy.from_create({"allow_out": ["x.com"], "mask_request_host": "y.com"})
    with pytest.raises(PolicyError, match="allow_out must be a list of strings, got int"):
        Policy.from_create({"allow_out": 3})
    with pytest.raises(PolicyError, match="deny_out must be a list of strings, got str"):
        Policy.from_create({"deny_out": "10.0.0.0/8"})


def test_network_as_an_object_with_allow_out() -> None:
    class NetworkPolicy:
        allow_out = ["api.openai.com"]
        deny_out = [ALL_TRAFFIC]

    class SecurityPolicy:
        network = NetworkPolicy()

    assert Policy.from_create(NetworkPolicy()).allow_list
    assert Policy.from_create(None, True, SecurityPolicy()).allow_list
    assert "ALL_TRAFFIC" not in str(Policy.from_lists([], ["ALL_TRAFFIC"]).describe())


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.1.1", "100.64.0.1",
    "198.18.0.1", "240.0.0.1", "0.0.0.0", "0.1.2.3", "224.0.0.1", "255.255.255.255", "192.0.2.1",
    "::", "::1", "fc00::1", "fd12::1", "fe80::1", "fec0::1", "ff02::1", "2001:db8::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1", "64:ff9b::a00:1",
    "2002:7f00:1::", "2002:c0a8:101::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "fe80::1%eth0"])
def test_non_global_addresses_are_denied_by_default(address: str) -> None:
    parsed = parse_address(address)
    assert parsed is not None
    assert non_global_reason(parsed), address
    assert not Policy().check_address(parsed).allowed
    # ...and by an allow_out of everything
    assert not Policy.from_lists([ALL_TRAFFIC, "::/0"], []).check_address(parsed).allowed


def test_private_ranges_are_allowed_only_by_a_cidr_naming_them() -> None:
    assert allowed(Policy.from_lists(["10.0.0.0/8"], []), "10.1.2.3")
    assert not allowed(Policy.from_lists(["internal.example.com"], []), "10.1.2.3",
                       "internal.example.com")
    assert allowed(Policy.from_lists(["127.0.0.1/32"], []), "127.0.0.1")
    assert allowed(Policy.from_lists(["fd00::/8"], []), "fd12::1")


@pytest.mark.parametrize("address", ["169.254.169.254", "::ffff:169.254.169.254",
                                     "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::", "::169.254.169.254",
                                     "fd00:ec2::254", "100.100.100.200", "169.254.170.2"])
def test_metadata_is_denied_always(address: str) -> None:
    parsed = parse_address(address)
    assert parsed is not None and is_metadata(parsed)
    for policy in (Policy(), Policy.from_lists(["169.254.169.254/32", "169.254.0.0/16", ALL_TRAFFIC], []),
                   Policy.from_lists(["fd00::/8"], [])):
        decision = policy.check_address(parsed, "x.example", mapped=True)
        assert not decision.allowed and decision.rule == "metadata"
    assert not Policy().check_name("metadata.google.internal").allowed


@pytest.mark.parametrize("spelling,expected", [
    ("2130706433", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("127.0.1", "127.0.0.1"),
    ("127.000.000.001", "127.0.0.1"), ("0177.0000.0000.0001", "127.0.0.1"), ("127.0.0.1.", "127.0.0.1"),
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254"), ("2852039166", "169.254.169.254"),
    ("0251.0376.0251.0376", "169.254.169.254"), ("[::1]", "::1"),
    ("0:0:0:0:0:ffff:7f00:1", "::ffff:7f00:1"), ("::ffff:127.0.0.1", "::ffff:7f00:1"),
    ("fe80::1%eth0", "fe80::1%eth0"), ("FE80::1%25lo", "fe80::1%25lo")])
def test_every_ip_spelling_is_decoded(spelling: str, expected: str) -> None:
    assert str(parse_address(spelling)) == expected


@pytest.mark.parametrize("bad", ["127.0.0.256", "1.2.3.4.5", "0x1g.0.0.1", "08.0.0.1", "4294967296",
                                 "1.2.3.0x", "::1::"])
def test_numeric_looking_non_addresses_are_errors_not_names(bad: str) -> None:
    with pytest.raises(PolicyError):
        parse_address(bad)


def test_names_are_not_addresses() -> None:
    assert parse_address("example.com") is None
    assert parse_address("1.2.3.com") is None
    assert parse_inet_aton("example") is None


def test_resolve_overrides_parse_curl_style_entries() -> None:
    table = parse_overrides("api.openai.com:443:127.0.0.1:8443,[::1] example.com:*:127.0.0.2;"
                            "b.example:80:10.0.0.1,10.0.0.2")
    assert [str(m.ip) for m in table[("api.openai.com", 443)]] == ["127.0.0.1", "::1"]
    assert table[("api.openai.com", 443)][0].port == 8443
    assert table[("example.com", None)][0].port is None
    assert len(table[("b.example", 80)]) == 2
    with pytest.raises(PolicyError, match="metadata"):
        parse_overrides("x.example:80:169.254.169.254")
    with pytest.raises(PolicyError):
        parse_overrides("nonsense")


def test_fixed_dns_answers_parse_and_keep_what_they_would_judge() -> None:
    table = parse_dns_answers("a.example:[::ffff:0:7f00:1],10.0.0.1 B.Example.:[64:ff9b::a9fe:a9fe];c.example:1.2.3.4")
    assert [str(a) for a in table["a.example"]] == ["::ffff:0:7f00:1", "10.0.0.1"]
    assert [str(a) for a in table["b.example"]] == ["64:ff9b::a9fe:a9fe"]  # metadata: kept, to be refused
    for bad in ("nonsense", "a.example:::1", "a.example:[zz]", "a.example:"):
        with pytest.raises(PolicyError, match="DECLAW_WASM_DNS_ANSWERS"):
            parse_dns_answers(bad)


def _form(form: str, v4: str) -> ipaddress.IPv6Address:
    return ipaddress.IPv6Address(addresses.FORMS[form](v4))


GLOBAL_FORMS = ["mapped", "translated", "nat64", "6to4"]  # public when what they carry is


@pytest.mark.parametrize("case", sorted(addresses.table()))
def test_ipv6_forms_are_judged_by_the_ipv4_address_they_carry(case: str) -> None:
    """The host-side half of test_guest_policy's table: refused by default and by an allow_out of
    everything; a metadata address inside stays refused whatever allows it, by every CIDR that
    could name the form."""
    address, form, kind = addresses.table()[case]
    parsed = ipaddress.IPv6Address(address)
    assert non_global_reason(parsed) or kind == "metadata"
    assert is_metadata(parsed) == (kind == "metadata")
    everything = Policy.from_lists([ALL_TRAFFIC, "::/0"], [])
    for policy in (Policy(), everything):
        decision = policy.check_address(parsed, "x.example")
        assert not decision.allowed and decision.rule == ("metadata" if kind == "metadata" else "non-global")
    if kind == "metadata":
        naming = Policy.from_lists([ALL_TRAFFIC, "169.254.0.0/16", "::ffff:0:0/96", "::ffff:0:0:0/96", "::/96",
                                    "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32"], [])
        assert naming.check_address(parsed, mapped=True).rule == "metadata"


def test_cidr_rules_see_the_ipv4_address_an_ipv6_form_carries() -> None:
    """As a mapped address is judged as its IPv4 address, allow_out and deny_out CIDRs judge every
    form by what it carries: allowed when allow_out CIDRs name all of it, denied when a deny_out
    CIDR names any of it. A local-use NAT64 address, read at several positions, is allowed only
    by an IPv6 CIDR naming it."""
    deny = Policy.from_lists([], ["93.184.216.0/24"])
    allow = Policy.from_lists(["93.184.216.0/24"], [])
    for form in GLOBAL_FORMS:
        assert not deny.check_address(_form(form, str(PUBLIC))).allowed, form
        assert deny.check_address(_form(form, "8.8.8.8")).allowed, form
        assert allow.check_address(_form(form, str(PUBLIC))).allowed, form
        assert not allow.check_address(_form(form, "8.8.8.8")).allowed, form
    private = Policy.from_lists(["10.0.0.0/8"], [])
    for form in [*GLOBAL_FORMS, "compatible"]:
        assert private.check_address(_form(form, "10.1.2.3")).allowed, form
        assert not private.check_address(_form(form, "192.168.1.1")).allowed, form
    teredo = addresses._teredo
    assert private.check_address(ipaddress.IPv6Address(teredo("10.0.0.1", "10.1.2.3"))).allowed
    assert not private.check_address(ipaddress.IPv6Address(teredo(str(PUBLIC), "10.1.2.3"))).allowed
    assert not private.check_address(ipaddress.IPv6Address(teredo("10.1.2.3", str(PUBLIC)))).allowed
    for length in (48, 56, 64, 96):
        local = ipaddress.IPv6Address(addresses._local_nat64("10.1.2.3", length))
        assert not private.check_address(local).allowed, length
        assert Policy.from_lists(["64:ff9b:1::/48"], []).check_address(local).allowed, length
    # an IPv6 CIDR naming the form itself allows it (as before); metadata never
    assert Policy.from_lists(["64:ff9b::/96"], []).check_address(_form("nat64", "10.1.2.3")).allowed
    assert not Policy.from_lists(["64:ff9b::/96"], []).check_address(_form("nat64", "169.254.169.254")).allowed


def test_the_loopback_and_unspecified_ipv6_addresses_carry_no_ipv4() -> None:
    """`::` and `::1` are not IPv4-compatible forms of 0.0.0.0 and 0.0.0.1: a CIDR naming those
    never admits the IPv6 loopback."""
    policy = Policy.from_lists(["0.0.0.0/8"], [])
    for address in ("::", "::1"):
        assert carried_v4(ipaddress.IPv6Address(address)) == ()
        assert not policy.check_address(ipaddress.IPv6Address(address)).allowed


def test_a_secrets_ip_and_cidr_entries_match_requests_made_to_those_addresses() -> None:
    """`Secret(hosts=[...])` takes entries as `allow_out` does: IPs and CIDRs match a request
    made to an address (never a name that resolves to one: the name is what TLS verifies)."""
    from declaw_wasm._egress.secrets import Injection
    from declaw_wasm._egress.policy import parse_rule

    hosts = ("127.0.0.1", "10.0.0.0/8", "::1", "api.x.com")
    inj = Injection("T", "v", "p", [parse_rule(h, "allow_out") for h in hosts])
    assert inj.applies_to("127.0.0.1") and inj.applies_to("10.2.3.4") and inj.applies_to("::1")
    assert inj.applies_to("[::1]") and inj.applies_to("api.x.com")
    assert not inj.applies_to("127.0.0.2") and not inj.applies_to("11.0.0.1") and not inj.applies_to("localhost")
    assert not inj.applies_to("127.0.0.1.nip.io") and not inj.applies_to("x.com")
