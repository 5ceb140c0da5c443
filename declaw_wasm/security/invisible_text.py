"""Hidden-Unicode config (declaw 1.7.0's `InvisibleTextConfig`): strip, block or log format
(Cf), private-use (Co) and tag characters in outbound request bodies."""

from __future__ import annotations

from typing import Any

from pydantic import field_validator

from ._model import ConfigModel, check_choice


class InvisibleTextConfig(ConfigModel):
    enabled: bool = False
    action: str = "strip"
    domains: list[str] | None = None

    @field_validator("action")
    @classmethod
    def _action(cls, value: str) -> str:
        return check_choice("action", value, {"block", "strip", "log_only"})

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled, "action": self.action}
        if self.domains is not None:
            d["domains"] = list(self.domains)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InvisibleTextConfig:
        return cls(enabled=data.get("enabled", False), action=data.get("action", "strip"),
                   domains=data.get("domains"))
