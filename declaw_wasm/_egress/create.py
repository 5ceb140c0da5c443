"""`Sandbox.create`'s network arguments, checked once, turned into each sandbox's session.

`network=` (E2B's dict or declaw's NetworkPolicy/SandboxNetworkOpts), `allow_internet_access=`,
`secrets=` ({name: Secret}), `vault_refs=` ({name: vault secret name}), `vault=` (a Vault;
default: the process's) and `guard_plugins=` (engines for guards declaw-wasm does not ship) are
taken out of create's keyword arguments here. From `security=` (declaw's SecurityPolicy, when
given) this reads `network` (used if `network=` is not: declaw's rule, see Policy.from_create),
`audit`, `env_security.mask_patterns`, and the content guards, built into the sandbox's
`GuardPipeline` (declaw_wasm/_guard: the relay's `ContentGuard`) with its own PII token map.
A guard switched on explicitly
without an engine is refused here, at create; one declaw's defaults switch on implicitly is
accepted, warned about once, and recorded in the audit as "not enforced".

Secrets beyond this process: a served client sends `secrets` as values on the wire (the server
reads them with `secrets_of`); a pool worker or Ray actor gets them, with the vault refs
resolved where the vault is, as a call argument of the create (`hosted_secrets`, then
`host_only_of` in the worker). Never through an environment variable or a file.
"""

from __future__ import annotations

import json
from secrets import token_urlsafe
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from .._guard.contract import ContentGuard
from ..exceptions import InvalidArgumentException
from ..limits import Limits
from .audit import DEFAULT_MASK_PATTERNS, AuditEvent, now
from .policy import Policy, PolicyError
from .secrets import Secret, SecretBook
from .session import EgressSession

if TYPE_CHECKING:
    from ..security import SecurityPolicy

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
    # `network={"allow_public_traffic": False}`: inbound connections need this token (inbound.py)
    traffic_token: Optional[str] = None

    def guest_env(self) -> dict[str, str]:
        """Variables the guest gets for the secrets (placeholders, never values)."""
        return self.secrets.guest_env()

    def session(self, limits: Limits, env: dict[str, str]) -> EgressSession:
        apply_limits = getattr(self.guard, "apply_limits", None)  # the GuardPipeline's (security=)
        if apply_limits is not None:
            apply_limits(limits)
        session = EgressSession(self.policy, limits, self.secrets, self.guard, env,
                                self.audit_enabled, self.mask_patterns, self.traffic_token)
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
    if not public_traffic(params.get("network"), security):
        plan.traffic_token = token_urlsafe(24)
    plugins = params.get("guard_plugins")
    if security is not None:  # the guard engine is imported only for a sandbox with a policy
        from .._guard.pipeline import GuardPipeline

        placeholders = frozenset(i.placeholder for i in book.injections)
        guard = GuardPipeline(as_policy(security), secret_placeholders=placeholders, plugins=plugins)
        plan.guard_notes = guard.create_notes
        if guard.enforces_anything:
            plan.guard = guard
    elif plugins is not None:
        raise InvalidArgumentException("guard_plugins: given without security= (nothing to enforce)")
    return plan


def public_traffic(network: Any, security: Any = None) -> bool:
    """`allow_public_traffic` of create's `network=` (E2B's dict, or declaw's objects; else
    `security.network`'s): True unless it is False."""
    if network is None and security is not None:
        network = getattr(security, "network", None)
    value = network.get("allow_public_traffic", True) if isinstance(network, dict) else \
        getattr(network, "allow_public_traffic", True)
    if not isinstance(value, bool):
        raise InvalidArgumentException(f"network: allow_public_traffic must be True or False, got {value!r}")
    return value


def security_policy(value: Any) -> Any:
    """declaw's SecurityPolicy from what `create` was given (a policy object, its dict) or what
    the wire carries (`{"policy_json": "..."}`); None for none."""
    if value is None or hasattr(value, "to_dict"):
        return value
    if isinstance(value, dict) and set(value) == {"policy_json"}:
        value = json.loads(value["policy_json"])
    return as_policy(value)


def as_policy(security: Any) -> "SecurityPolicy":
    """Our SecurityPolicy for what `create` carries: ours, its dict, or any object with declaw's
    `to_dict()` (declaw's own classes), through its wire form."""
    from ..security import SecurityPolicy

    if isinstance(security, SecurityPolicy):
        return security
    try:
        return SecurityPolicy.from_dict(security.to_dict() if hasattr(security, "to_dict") else security)
    except (TypeError, ValueError, AttributeError) as exc:
        raise InvalidArgumentException(f"security: {exc}") from None


def network_dict(network: Any) -> Optional[dict[str, list[str]]]:
    """`network=` (E2B's dict or declaw's NetworkPolicy / SandboxNetworkOpts) as the wire's dict."""
    if network is None:
        return None
    get = network.get if isinstance(network, dict) else lambda key: getattr(network, key, None)
    found = {key: [str(entry) for entry in (get(key) or [])] for key in ("allow_out", "deny_out")}
    return {key: value for key, value in found.items() if value}



# -- secrets beyond this process --------------------------------------------------------------------
MAX_HOSTED = 64 << 10  # bytes of secret values and scopes sent to one worker or actor


def secrets_of(request: Any) -> Optional[dict[str, Secret]]:
    """A create request's secrets as `Secret`s: the face's (`_host_only["secrets"]`) or the
    wire's (`request.secrets`, values as `SecretStr`: a served client's). Both at once is refused."""
    given = getattr(request, "_host_only", {}).get("secrets")
    wired = getattr(request, "secrets", None)
    if given is not None and wired:
        raise InvalidArgumentException("secrets given twice (as Secret objects and on the wire)")
    if not wired:
        return given
    return {name: Secret(item.value.get_secret_value(), item.hosts) for name, item in wired.items()}


def hosted_secrets(request: Any) -> Optional[dict[str, Any]]:
    """What a worker process or Ray actor needs to give the sandbox its secrets, as plain data
    sent as a call argument (never through the environment or a file): each secret's value and
    hosts, and each vault ref resolved here, in the process that holds the vault (the worker has
    none). None when there are none."""
    secrets = secrets_of(request)
    refs = getattr(request, "vault_refs", None) or {}
    if not secrets and not refs:
        return None
    from .vault import Vault

    vault = getattr(request, "_host_only", {}).get("vault")
    store = vault if isinstance(vault, Vault) else Vault.default()
    vaulted: dict[str, Any] = {}
    for ref in refs.values():  # a missing name: PolicyError (an InvalidArgumentException)
        value, scopes = store.resolve(ref)
        vaulted[ref] = {"value": value, "scopes": [s.model_dump() for s in scopes]}
    payload = {"secrets": {name: {"value": s.reveal(), "hosts": list(s.hosts)} for name, s in (secrets or {}).items()},
               "vault": vaulted}
    size = len(json.dumps(payload))
    if size > MAX_HOSTED:
        raise InvalidArgumentException(f"secrets and vault refs of {size} bytes: at most {MAX_HOSTED} "
                                       "may go to a worker with one sandbox")
    return payload


def host_only_of(payload: Any) -> dict[str, Any]:
    """The worker's side of `hosted_secrets`: the `Secret`s, and a private in-memory vault
    holding just the resolved refs (the request's `vault_refs` name them)."""
    from .vault import VAULT_URI, Vault

    if not isinstance(payload, dict):
        raise InvalidArgumentException("bad secrets argument")
    try:
        secrets = {str(name): Secret(str(item["value"]), [str(h) for h in item["hosts"]])
                   for name, item in dict(payload.get("secrets") or {}).items()}
        vault = Vault()
        for ref, item in dict(payload.get("vault") or {}).items():
            match = VAULT_URI.match(ref)
            name = match.group(1) if match else ref
            if name not in {s.name for s in vault.list_secrets()}:
                vault.create_secret(str(item["value"]), name=name, scopes=list(item["scopes"]))
    except (KeyError, TypeError) as exc:
        raise InvalidArgumentException(f"bad secrets argument: {exc}") from None
    return {"secrets": secrets, "vault": vault}
