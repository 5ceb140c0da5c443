"""Toxicity scanning config (declaw 1.7.0's `ToxicityConfig`). Enforced only through a plug-in."""

from __future__ import annotations

from typing import Any

from ._model import ScoredGuardConfig


class ToxicityConfig(ScoredGuardConfig):
    enabled: bool = False
    threshold: float = 0.9
    action: str = "block"
    domains: list[str] | None = None

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
