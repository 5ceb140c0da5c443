"""Prompt-injection defense config (declaw 1.7.0's `InjectionDefenseConfig` and friends).

Injection scanning is opt-in per destination: with `domains` None or empty nothing is scanned
(the opposite of PII). Entries: an exact host, `*.suffix` (subdomains only), or `~regex`.
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any

from pydantic import field_validator

from ._model import ConfigModel, check_choice, check_member, check_range


class InjectionAction(str, Enum):
    BLOCK = "block"
    LOG_ONLY = "log_only"


class InjectionSensitivity(str, Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


INJECTION_MODES = ("strict", "balanced", "permissive", "agentic-tool", "data-egress-sensitive")


class InjectionJudgeConfig(ConfigModel):
    """The tier-2 LLM judge. declaw-wasm ships no judge model: it needs a registered plug-in."""

    enabled: bool = False
    always: bool = False
    policy: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled}
        if self.always:
            d["always"] = True
        if self.policy:
            d["policy"] = self.policy
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InjectionJudgeConfig:
        return cls(enabled=data.get("enabled", False), always=data.get("always", False),
                   policy=data.get("policy", ""))


class InjectionDefenseConfig(ConfigModel):
    enabled: bool = False
    action: str = InjectionAction.LOG_ONLY.value
    sensitivity: str = InjectionSensitivity.MEDIUM.value
    threshold: float = 0.95
    domains: list[str] | None = None
    judge: InjectionJudgeConfig | None = None
    injection_mode: str | None = None

    @field_validator("action", mode="before")
    @classmethod
    def _action(cls, value: Any) -> Any:
        if value == "audit":  # the 1.0 name, still accepted by declaw with a warning
            warnings.warn("InjectionDefenseConfig action 'audit' is deprecated, use 'log_only' "
                          "instead.", DeprecationWarning, stacklevel=2)
            value = InjectionAction.LOG_ONLY.value
        return check_member("action", value, InjectionAction)

    @field_validator("sensitivity", mode="before")
    @classmethod
    def _sensitivity(cls, value: Any) -> Any:
        return check_member("sensitivity", value, InjectionSensitivity)

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: float) -> float:
        return check_range("threshold", value)

    @field_validator("injection_mode")
    @classmethod
    def _mode(cls, value: str | None) -> str | None:
        if value:  # None or "" = the default posture
            check_choice("injection_mode", value, set(INJECTION_MODES))
        return value

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "enabled": self.enabled,
            "action": self.action,
            "sensitivity": self.sensitivity,
            "threshold": self.threshold,
        }
        if self.domains:
            d["domains"] = list(self.domains)
        if self.judge is not None:
            d["judge"] = self.judge.to_dict()
        if self.injection_mode is not None:
            d["injection_mode"] = self.injection_mode
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InjectionDefenseConfig:
        judge = data.get("judge")
        return cls(
            enabled=data.get("enabled", False),
            action=data.get("action", InjectionAction.LOG_ONLY.value),
            sensitivity=data.get("sensitivity", InjectionSensitivity.MEDIUM.value),
            threshold=data.get("threshold", 0.95),
            domains=data.get("domains"),
            judge=InjectionJudgeConfig.from_dict(judge) if judge else None,
            injection_mode=data.get("injection_mode"),
        )
