"""Audit config and record (declaw 1.7.0's `AuditConfig`, `AuditEntry`)."""

from __future__ import annotations

import datetime
from typing import Any

from ._model import ConfigModel


class AuditConfig(ConfigModel):
    """Per-sandbox audit logging on/off. No body is ever logged."""

    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"enabled": self.enabled}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditConfig:
        return cls(enabled=data.get("enabled", True))


class AuditEntry(ConfigModel):
    """One outbound call as declaw records it."""

    timestamp: datetime.datetime
    method: str
    url: str
    status_code: int = 0
    pii_redactions: int = 0
    injection_blocks: int = 0
    transformations_applied: int = 0
    direction: str = "outbound"

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp.isoformat(),
            "method": self.method,
            "url": self.url,
            "status_code": self.status_code,
            "pii_redactions": self.pii_redactions,
            "injection_blocks": self.injection_blocks,
            "transformations_applied": self.transformations_applied,
            "direction": self.direction,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuditEntry:
        return cls(
            timestamp=datetime.datetime.fromisoformat(data["timestamp"]),
            method=data["method"],
            url=data["url"],
            status_code=data.get("status_code", 0),
            pii_redactions=data.get("pii_redactions", 0),
            injection_blocks=data.get("injection_blocks", 0),
            transformations_applied=data.get("transformations_applied", 0),
            direction=data.get("direction", "outbound"),
        )
