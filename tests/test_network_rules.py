"""The network-rule grammar has one parser (declaw_wasm/security/network_rules.py `parse_rule`):
the declaw config models, the egress door's policy, a `Secret`'s hosts and a vault scope judge
every entry alike, and no entry any of them accepts is one the door can never match. Pure: no
guest."""

from __future__ import annotations

from typing import Any

import pytest

from declaw_wasm import Secret
from declaw_wasm._egress.policy import Policy, parse_address
from declaw_wasm.security import NetworkPolicy, SandboxNetworkOpts, validate_network_entry
from declaw_wasm.security.network_policy import is_domain_rule, is_ip_or_cidr
from declaw_wasm.security.network_rules import PolicyError, parse_rule
from declaw_wasm.vault import VaultScope

# Every shape the grammar has, and its near misses.
ENTRIES: list[Any] = [
    # addresses and networks, v4 and v6
    "1.2.3.4", "10.0.0.0/8", "1.2.3.4/8", "0.0.0.0/0", "ALL_TRAFFIC", "all_traffic", "1.2.3.4/33",
    "256.1.1.1", "1.2.3.4:80", "::1", "::/0", "2001:db8::/32", "[::1]", "fe80::1%eth0", "::ffff:1.2.3.4",
    " 10.0.0.0/8 ", "127.1", "1.2.3", "2130706433", "0x7f.1",
    # names
    "example.com", "EXAMPLE.COM", "example.com.", "  example.com  ", "api.openai.com", "a.b", "x.c",
    "ex_ample.com", "xn--p1ai.xn--p1ai", "123.com", "example.123", "example.0x1f", "example.c0m",
    "-a.com", "a-.com", "a..com", ".example.com", "example..", "foo bar.com", "é.com",
    "localhost", "metadata", "a" * 64 + ".com", "a." * 127 + "com", "http://example.com",
    "example.com/path", "example.com:443",
    # wildcards
    "*.example.com", "*.EXAMPLE.com", "*.example.com.", "*.com", "*", "*.", "*.*.com", "**.x.com",
    "*example.com", "a.*.com", "*.1.2.3",
    # regular expressions
    "~^x\\.com$", "~api", "~(", "~", " ~ ", "~[a-z]+\\.example\\.com", "~(?i)X",
    # not entries
    "", " ", None, 1, 1.5, b"example.com", ["example.com"], {"a": 1},
]
WHERE = ["allow_out", "deny_out"]


def _kind(entry: Any, where: str) -> str:
    try:
        return parse_rule(entry, where).kind
    except PolicyError:
        return ""


def _accepts(judge: Any) -> bool:
    try:
        judge()
    except ValueError:  # PolicyError, pydantic's ValidationError
        return False
    return True


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("entry", ENTRIES, ids=repr)
def test_every_network_entry_is_judged_by_one_parser(entry: Any, where: str) -> None:
    kind = _kind(entry, where)
    allow = where == "allow_out"
    model_kwargs: dict[str, Any] = {where: [entry]}
    verdicts = {
        "validate_network_entry": _accepts(lambda: validate_network_entry(entry, allow_domains=allow)),
        "NetworkPolicy": _accepts(lambda: NetworkPolicy(**model_kwargs)),
        "SandboxNetworkOpts": _accepts(lambda: SandboxNetworkOpts(**model_kwargs)),
        "Policy.from_lists": _accepts(lambda: Policy.from_lists(**model_kwargs)),
        "Policy.from_create": _accepts(lambda: Policy.from_create(network=model_kwargs)),
    }
    if allow:
        verdicts["Secret"] = _accepts(lambda: Secret("v", hosts=[entry]))
        verdicts["VaultScope"] = _accepts(lambda: VaultScope(domain_regex=entry).checked())
    expected = {judge: bool(kind) for judge in verdicts}
    if isinstance(entry, bytes):  # pydantic's lax mode decodes bytes before the parser sees them
        coerced = bool(_kind(entry.decode(), where))
        expected.update({model: coerced for model in ("NetworkPolicy", "SandboxNetworkOpts", "VaultScope")
                         if model in expected})
    assert verdicts == expected, (entry, where, kind)
    if isinstance(entry, str):
        assert is_ip_or_cidr(entry) == (_kind(entry, "deny_out") in ("all", "cidr"))
        assert is_domain_rule(entry) == (_kind(entry, "allow_out") in ("domain", "wildcard", "regex"))
    if kind:
        assert validate_network_entry(entry, allow_domains=allow) == entry  # kept as given


@pytest.mark.parametrize("entry", ENTRIES, ids=repr)
def test_no_accepted_name_entry_is_one_the_door_cannot_match(entry: Any) -> None:
    """A domain or wildcard entry names a host the door reads as a name (not an address, not an
    error), and the door's policy allows that name: an accepted entry never silently matches
    nothing."""
    kind = _kind(entry, "allow_out")
    if kind not in ("domain", "wildcard"):
        return
    rule = parse_rule(entry, "allow_out")
    host = rule.text if kind == "domain" else "sub" + rule.text[1:]
    assert parse_address(host) is None
    assert Policy.from_lists([entry]).check_name(host).allowed


@pytest.mark.parametrize("entry, where, words", [
    ("~", "allow_out", "needs a pattern"),
    ("~(", "allow_out", "not a valid regular expression"),
    ("~api", "deny_out", "only allow_out"),
    ("example.com", "deny_out", "not an IP address or CIDR"),
    ("localhost", "allow_out", "single-label"),
    ("127.1", "allow_out", "dotted-quad"),
    ("example.123", "allow_out", "last label is numeric"),
    ("a..com", "allow_out", r"not an IP, CIDR, domain or \*\.domain"),
    (None, "allow_out", "non-empty strings"),
])
def test_a_refused_entry_is_named_with_what_was_wrong(entry: Any, where: str, words: str) -> None:
    with pytest.raises(PolicyError, match=words) as caught:
        validate_network_entry(entry, allow_domains=where == "allow_out")
    assert repr(entry) in str(caught.value)


def test_a_regex_rule_matches_in_time_linear_in_the_guests_host_name() -> None:
    """A `~regex` entry is the user's, the host names it meets are the guest's: it runs on RE2,
    so a backtracking pattern cannot be made to stall the host (with `re`, `^(a+)+$` against 30
    a's and a '!' takes seconds); what RE2 lacks is refused when the rule is built."""
    import time

    from declaw_wasm.security.network_rules import PolicyError, parse_rule

    rule = parse_rule("~^(a+)+$", "allow_out")
    started = time.perf_counter()
    assert not rule.matches_name("a" * 250 + "!")
    assert time.perf_counter() - started < 0.5
    assert rule.matches_name("aaa")
    with pytest.raises(PolicyError, match="backreferences"):
        parse_rule(r"~(a)\1", "allow_out")
