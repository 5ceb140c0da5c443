"""Network rules as declaw 1.7.0 spells them (`NetworkPolicy`, `SandboxNetworkOpts`, `ALL_TRAFFIC`).

Only the config lives here; matching connections against the rules is the egress door's job.
Validation is the door's own parser (network_rules.py `parse_rule`), so a model accepts exactly
what the door enforces: `allow_out` entries are an IP, a CIDR (v4 or v6), a domain, `*.domain`
or `~regex`; `deny_out` entries an IP or CIDR (or `ALL_TRAFFIC`). declaw 1.7.0's own validation
refuses `~regex` entries (its docs and vault scopes use them) and some names the door accepts
(`EXAMPLE.COM.`, `ex_ample.com`); docs/differences.md lists where we differ.
(For the door: `*.x.com` matches subdomains of x.com, not x.com itself.)
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from ._model import ConfigModel
from .network_rules import ALL_TRAFFIC as ALL_TRAFFIC
from .network_rules import PolicyError, parse_rule

_AUTO_DNS = "8.8.8.8"


def is_ip_or_cidr(value: str) -> bool:
    """Whether `value` is an IP or CIDR entry (`ALL_TRAFFIC` included)."""
    return _kind(value, "deny_out") in ("all", "cidr")


def is_domain_rule(value: str) -> bool:
    """Whether `value` is a domain, `*.domain` or `~regex` entry (one the door matches names with)."""
    return _kind(value, "allow_out") in ("domain", "wildcard", "regex")


def _kind(value: Any, where: str) -> str:
    try:
        return parse_rule(value, where).kind
    except PolicyError:
        return ""


def validate_network_entry(entry: Any, *, allow_domains: bool = True) -> str:
    """Return `entry` (as given) if it is a valid rule, else raise ValueError (a `PolicyError`)
    saying what is wrong and what is allowed. `parse_rule` (network_rules.py), the egress door's
    own parser, judges it: `allow_domains` is `allow_out`'s grammar, else `deny_out`'s."""
    parse_rule(entry, "allow_out" if allow_domains else "deny_out")
    return entry


class _NetworkRules(ConfigModel):
    allow_out: list[str] = Field(default_factory=list)
    deny_out: list[str] = Field(default_factory=list)
    allow_public_traffic: bool = True
    mask_request_host: str | None = None

    @field_validator("allow_out")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        return [validate_network_entry(e, allow_domains=True) for e in value]

    @field_validator("deny_out")
    @classmethod
    def _deny(cls, value: list[str]) -> list[str]:
        return [validate_network_entry(e, allow_domains=False) for e in value]

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        if self.allow_out:
            result["allow_out"] = list(self.allow_out)
        if self.deny_out:
            result["deny_out"] = list(self.deny_out)
        if not self.allow_public_traffic:
            result["allow_public_traffic"] = False
        if self.mask_request_host is not None:
            result["mask_request_host"] = self.mask_request_host
        return result

    @classmethod
    def _kwargs(cls, data: dict[str, Any]) -> dict[str, Any]:
        return {"allow_out": data.get("allow_out", []), "deny_out": data.get("deny_out", []),
                "allow_public_traffic": data.get("allow_public_traffic", True),
                "mask_request_host": data.get("mask_request_host")}


class SandboxNetworkOpts(_NetworkRules):
    """`Sandbox.create(network=...)`'s rules."""

    @property
    def has_domain_rules(self) -> bool:
        return any(is_domain_rule(e) for e in self.allow_out)

    @property
    def effective_allow_out(self) -> list[str]:
        """`allow_out` plus 8.8.8.8 when domain rules exist (declaw's resolver; not sent)."""
        result = list(self.allow_out)
        if self.has_domain_rules and _AUTO_DNS not in result:
            result.append(_AUTO_DNS)
        return result

    def to_network_opts(self) -> SandboxNetworkOpts:
        """A copy (for code that calls it on either class)."""
        return SandboxNetworkOpts.from_dict(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SandboxNetworkOpts:
        return cls(**cls._kwargs(data))


class NetworkPolicy(_NetworkRules):
    """`SecurityPolicy(network=...)`'s rules; the same fields as `SandboxNetworkOpts`."""

    def to_network_opts(self) -> SandboxNetworkOpts:
        return SandboxNetworkOpts(allow_out=list(self.allow_out), deny_out=list(self.deny_out),
                                  allow_public_traffic=self.allow_public_traffic,
                                  mask_request_host=self.mask_request_host)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NetworkPolicy:
        return cls(**cls._kwargs(data))
