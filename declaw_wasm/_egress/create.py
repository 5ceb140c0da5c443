"""`Sandbox.create`'s network arguments, checked once, turned into each sandbox's session.

`network=` (E2B's dict or declaw's NetworkPolicy/SandboxNetworkOpts), `allow_internet_access=`,
`secrets=` ({name: Secret}), `vault_refs=` ({name: vault secret name}) and `vault=` (a Vault;
default: the process's) are taken out of create's keyword arguments here; from `security=`
(declaw's SecurityPolicy, when given) this reads `network` (used if `network=` is not),
`audit` and `env_security.mask_patterns`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..exceptions import InvalidArgumentException
from ..limits import Limits
from .audit import DEFAULT_MASK_PATTERNS
from .guard import ContentGuard
from .policy import Policy, PolicyError
from .secrets import SecretBook
from .session import EgressSession

EGRESS_PARAMS = ("network", "allow_internet_access", "secrets", "vault_refs", "vault")


@dataclass
class EgressPlan:
    """A sandbox's network settings, checked."""

    policy: Policy = field(default_factory=Policy)
    secrets: SecretBook = field(default_factory=SecretBook)
    audit_enabled: bool = True
    mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS
    guard: Optional[ContentGuard] = None

    def guest_env(self) -> dict[str, str]:
        """Variables the guest gets for the secrets (placeholders, never values)."""
        return self.secrets.guest_env()

    def session(self, limits: Limits, env: dict[str, str]) -> EgressSession:
        return EgressSession(self.policy, limits, self.secrets, self.guard, env,
                             self.audit_enabled, self.mask_patterns)


def plan_from_create(params: dict[str, Any], security: Any = None) -> EgressPlan:
    """The plan for create's network arguments (`params`: those named in EGRESS_PARAMS)."""
    try:
        policy = Policy.from_create(params.get("network"), params.get("allow_internet_access", True),
                                    security)
        book = SecretBook.build(params.get("secrets"), params.get("vault_refs"), params.get("vault"))
    except PolicyError as exc:
        raise InvalidArgumentException(str(exc)) from None
    audit = getattr(security, "audit", True) if security is not None else True
    enabled = bool(getattr(audit, "enabled", audit))
    env_security = getattr(security, "env_security", None)
    patterns = tuple(getattr(env_security, "mask_patterns", None) or DEFAULT_MASK_PATTERNS)
    return EgressPlan(policy, book, enabled, patterns)


def security_policy(value: Any) -> Any:
    """declaw's SecurityPolicy from what `create` was given (a policy object, its dict) or what
    the wire carries (`{"policy_json": "..."}`); None for none."""
    if value is None or hasattr(value, "to_dict"):
        return value
    from ..security import SecurityPolicy

    if isinstance(value, dict) and set(value) == {"policy_json"}:
        value = json.loads(value["policy_json"])
    try:
        return SecurityPolicy.from_dict(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentException(f"security: {exc}") from None


def network_dict(network: Any) -> Optional[dict[str, list[str]]]:
    """`network=` (E2B's dict or declaw's NetworkPolicy / SandboxNetworkOpts) as the wire's dict."""
    if network is None:
        return None
    get = network.get if isinstance(network, dict) else lambda key: getattr(network, key, None)
    found = {key: [str(entry) for entry in (get(key) or [])] for key in ("allow_out", "deny_out")}
    return {key: value for key, value in found.items() if value}


HOST_ONLY = ("secrets", "vault_refs", "vault", "security")


def refuse_served(params: dict[str, Any]) -> None:
    """Served mode does not carry the network arguments yet: refuse them rather than run the
    sandbox with a policy other than the one asked for."""
    given = [k for k in HOST_ONLY if params.get(k) is not None]
    if given:
        raise InvalidArgumentException(f"{', '.join(given)}: not supported on a declaw-wasm server yet "
                                       "(served mode); create the sandbox in-process")
