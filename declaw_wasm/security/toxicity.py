"""Toxicity scanning config (declaw 1.7.0's `ToxicityConfig`). Enforced only through a plug-in."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from ._model import ConfigModel, check_choice, check_range


class ToxicityConfig(ConfigModel):
    enabled: bool = False
    threshold: float = 0.9
    action: str = "block"
    domains: list[str] | None = None

    @field_validator("action")
    @classmethod
    def _action(cls, value: str) -> str:
        return check_choice("action", value, {"block", "log_only"})

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: float) -> float:
        return check_range("threshold", value)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled, "threshold": self.threshold,
                             "action": self.action}
        if self.domains is not None:
            d["domains"] = list(self.domains)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToxicityConfig:
        return cls(enabled=data.get("enabled", False), threshold=data.get("threshold", 0.9),
                   action=data.get("action", "block"), domains=data.get("domains"))
