"""`Sandbox.create`'s network arguments, checked once, turned into each sandbox's session.

`network=` (E2B's dict or declaw's NetworkPolicy/SandboxNetworkOpts), `allow_internet_access=`,
`secrets=` ({name: Secret}), `vault_refs=` ({name: vault secret name}), `vault=` (a Vault;
default: the process's) and `guard_plugins=` (engines for guards declaw-wasm does not ship) are
taken out of create's keyword arguments here. From `security=` (declaw's SecurityPolicy, when
given) this reads `network` (used if `network=` is not: declaw's rule, see Policy.from_create),
`audit`, `env_security.mask_patterns`, and the content guards, built into the sandbox's
`PipelineGuard` (guardrails.py) with its own PII token map. A guard switched on explicitly
without an engine is refused here, at create; one declaw's defaults switch on implicitly is
accepted, warned about once, and recorded in the audit as "not enforced".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..exceptions import InvalidArgumentException
from ..limits import Limits
from .audit import DEFAULT_MASK_PATTERNS, AuditEvent, now
from .guard import ContentGuard
from .guardrails import PipelineGuard, enforces_anything
from .policy import Policy, PolicyError
from .secrets import SecretBook
from .session import EgressSession

EGRESS_PARAMS = ("network", "allow_internet_access", "secrets", "vault_refs", "vault", "guard_plugins")


@dataclass
class EgressPlan:
    """A sandbox's network settings, checked."""

    policy: Policy = field(default_factory=Policy)
    secrets: SecretBook = field(default_factory=SecretBook)
    audit_enabled: bool = True
    mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS
    guard: Optional[ContentGuard] = None
    guard_notes: list[str] = field(default_factory=list)  # guards named but not enforced

    def guest_env(self) -> dict[str, str]:
        """Variables the guest gets for the secrets (placeholders, never values)."""
        return self.secrets.guest_env()

    def session(self, limits: Limits, env: dict[str, str]) -> EgressSession:
        if isinstance(self.guard, PipelineGuard):
            self.guard.apply_limits(limits)
        session = EgressSession(self.policy, limits, self.secrets, self.guard, env,
                                self.audit_enabled, self.mask_patterns)
        for note in self.guard_notes:
            session.audit.record(AuditEvent(timestamp=now(), kind="guard", method="GUARD",
                                            guard=note.split(":", 1)[0], reason=note,
                                            guard_notes=[note]))
        return session


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
    plan = EgressPlan(policy, book, enabled, patterns)
    plugins = params.get("guard_plugins")
    if security is not None:
        placeholders = frozenset(i.placeholder for i in book.injections)
        guard = PipelineGuard.build(security, placeholders, plugins)
        plan.guard_notes = guard.create_notes
        if enforces_anything(guard.pipeline.policy):
            plan.guard = guard
    elif plugins is not None:
        raise InvalidArgumentException("guard_plugins: given without security= (nothing to enforce)")
    return plan


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


#: create arguments that never leave this process (values, objects, callables); `security`
#: travels as its JSON and the server builds the same guards from it.
HOST_ONLY = ("secrets", "vault", "guard_plugins")
