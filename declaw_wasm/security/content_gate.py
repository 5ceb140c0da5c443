"""Content gate config (declaw 1.7.0's `ContentGateConfig`): declaw's OPA model/endpoint
allow-list over listed hosts (None or empty = none). Enforced only through a plug-in."""

from __future__ import annotations

from typing import Any

from ._model import ConfigModel


class ContentGateConfig(ConfigModel):
    enabled: bool = False
    domains: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"enabled": self.enabled}
        if self.domains is not None:
            d["domains"] = list(self.domains)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ContentGateConfig:
        return cls(enabled=data.get("enabled", False), domains=data.get("domains"))
