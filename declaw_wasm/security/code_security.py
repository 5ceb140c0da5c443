"""Code security scanning config (declaw 1.7.0's `CodeSecurityConfig`). Enforced only through a
plug-in."""

from __future__ import annotations

from typing import Any

from ._model import ScoredGuardConfig


class CodeSecurityConfig(ScoredGuardConfig):
    enabled: bool = False
    threshold: float = 0.6
    excluded_languages: list[str] | None = None
    action: str = "log_only"
    domains: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled, "threshold": self.threshold,
                             "action": self.action}
        if self.excluded_languages is not None:
            d["excluded_languages"] = list(self.excluded_languages)
        if self.domains is not None:
            d["domains"] = list(self.domains)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodeSecurityConfig:
        return cls(enabled=data.get("enabled", False), threshold=data.get("threshold", 0.6),
                   excluded_languages=data.get("excluded_languages"),
                   action=data.get("action", "log_only"), domains=data.get("domains"))
