"""The top-level security config (declaw 1.7.0's `SecurityPolicy`), wire format included.

`to_dict()` is byte-for-byte declaw's (the server reads `json.dumps(policy.to_dict())` as
`security.policy_json`), and `from_dict()` reads what declaw writes, so a policy written for
declaw loads unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator

from ._model import ConfigModel
from .audit import AuditConfig
from .code_security import CodeSecurityConfig
from .content_gate import ContentGateConfig
from .custom_policy import INJECTION_PACK, CustomPolicyConfig
from .env import EnvSecurityConfig
from .injection import InjectionDefenseConfig, InjectionJudgeConfig
from .invisible_text import InvisibleTextConfig
from .network_policy import NetworkPolicy, SandboxNetworkOpts
from .pii import PIIConfig
from .toxicity import ToxicityConfig
from .transformations import TransformationRule


class SecurityPolicy(ConfigModel):
    pii: PIIConfig = Field(default_factory=PIIConfig)
    injection_defense: bool | InjectionDefenseConfig = False
    transformations: list[TransformationRule] = Field(default_factory=list)
    network: NetworkPolicy | None = None
    audit: bool | AuditConfig = True
    env_security: EnvSecurityConfig = Field(default_factory=EnvSecurityConfig)
    toxicity: ToxicityConfig | None = None
    code_security: CodeSecurityConfig | None = None
    invisible_text: InvisibleTextConfig | None = None
    content_gate: ContentGateConfig | None = None
    custom_policy: CustomPolicyConfig | None = None

    @field_validator("network", mode="before")
    @classmethod
    def _network(cls, value: Any) -> Any:
        # declaw also takes a raw dict here (and then skips validation); we validate it.
        if isinstance(value, dict):
            return NetworkPolicy.from_dict(value)
        if isinstance(value, SandboxNetworkOpts):
            return NetworkPolicy.from_dict(value.to_dict())
        return value

    def __eq__(self, other: object) -> bool:
        # `audit=True` and `audit=AuditConfig()` (likewise `injection_defense`) are the same
        # policy and write the same wire dict; compare what would be sent.
        if not isinstance(other, SecurityPolicy):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @property
    def injection_config(self) -> InjectionDefenseConfig:
        if isinstance(self.injection_defense, bool):
            return InjectionDefenseConfig(enabled=self.injection_defense)
        return self.injection_defense

    @property
    def audit_config(self) -> AuditConfig:
        if isinstance(self.audit, bool):
            return AuditConfig(enabled=self.audit)
        return self.audit

    @property
    def requires_tls_interception(self) -> bool:
        return bool(
            self.pii.enabled
            or self.injection_config.enabled
            or self.transformations
            or (self.toxicity is not None and self.toxicity.enabled)
            or (self.code_security is not None and self.code_security.enabled)
            or (self.invisible_text is not None and self.invisible_text.enabled)
        )

    @classmethod
    def full_injection_defense(
        cls,
        *,
        mode: str = "balanced",
        agent_policy: str | None = None,
        action: str = "block",
        always_judge: bool = False,
        domains: list[str] | None = None,
        threshold: float = 0.95,
    ) -> SecurityPolicy:
        """declaw's "whole injection cascade" helper.

        As in declaw, `domains=None` scans nothing: pass the hosts to scan. The judge and the
        `prompt-injection@v3` pack it switches on need plug-ins here; without them the local
        tier runs and the guard pipeline warns once and audits them as not enforced.
        """
        return cls(
            injection_defense=InjectionDefenseConfig(
                enabled=True, action=action, threshold=threshold, domains=domains,
                injection_mode=mode,
                judge=InjectionJudgeConfig(enabled=True, always=always_judge,
                                           policy=agent_policy or ""),
            ),
            custom_policy=CustomPolicyConfig(enabled=True, policy_ref=INJECTION_PACK,
                                             default_deny=False),
        )

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "pii": self.pii.to_dict(),
            "injection_defense": self.injection_config.to_dict(),
            "transformations": [t.to_dict() for t in self.transformations],
            "audit": self.audit_config.to_dict(),
            "env_security": self.env_security.to_dict(),
        }
        for name in ("network", "toxicity", "code_security", "invisible_text", "content_gate",
                     "custom_policy"):
            value = getattr(self, name)
            if value is not None:
                result[name] = value.to_dict()
        return result

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SecurityPolicy:
        inj = data.get("injection_defense", False)
        audit = data.get("audit", True)

        def optional(name: str, model: Any) -> Any:
            value = data.get(name)
            return model.from_dict(value) if value is not None else None

        return cls(
            pii=PIIConfig.from_dict(data.get("pii", {})),
            injection_defense=inj if isinstance(inj, bool) else InjectionDefenseConfig.from_dict(inj),
            transformations=[TransformationRule.from_dict(t) for t in data.get("transformations", [])],
            network=optional("network", NetworkPolicy),
            audit=audit if isinstance(audit, bool) else AuditConfig.from_dict(audit),
            env_security=EnvSecurityConfig.from_dict(data.get("env_security", {})),
            toxicity=optional("toxicity", ToxicityConfig),
            code_security=optional("code_security", CodeSecurityConfig),
            invisible_text=optional("invisible_text", InvisibleTextConfig),
            content_gate=optional("content_gate", ContentGateConfig),
            custom_policy=optional("custom_policy", CustomPolicyConfig),
        )

    @classmethod
    def from_json(cls, text: str) -> SecurityPolicy:
        return cls.from_dict(json.loads(text))
