"""Customer OPA/Rego policy config (declaw 1.7.0's `CustomPolicyConfig`). declaw-wasm has no Rego
evaluator: it is enforced only through a plug-in."""

from __future__ import annotations

from typing import Any

from ._model import ConfigModel

#: The governance pack `SecurityPolicy.full_injection_defense()` switches on.
INJECTION_PACK = "prompt-injection@v3"


class CustomPolicyConfig(ConfigModel):
    enabled: bool = False
    inline_rego: str | None = None
    inline_modules: list[str] | None = None
    policy_ref: str | None = None
    default_deny: bool = False

    @property
    def is_injection_pack(self) -> bool:
        """The exact config `full_injection_defense()` makes (also after a wire round trip)."""
        return (self.policy_ref == INJECTION_PACK and not self.inline_rego
                and not self.inline_modules and not self.default_deny)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled, "inline_rego": self.inline_rego,
                             "policy_ref": self.policy_ref, "default_deny": self.default_deny}
        if self.inline_modules is not None:
            d["inline_modules"] = list(self.inline_modules)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CustomPolicyConfig:
        return cls(enabled=data.get("enabled", False), inline_rego=data.get("inline_rego"),
                   inline_modules=data.get("inline_modules"), policy_ref=data.get("policy_ref"),
                   default_deny=data.get("default_deny", False))
