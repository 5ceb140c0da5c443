"""Audit config and record (declaw 1.7.0's `AuditConfig`, `AuditEntry`), and `AuditEvent`.

`AuditEvent` is what `Sandbox.audit_events()` returns: declaw's `AuditEntry` fields plus what declaw
keeps server-side (declaw_wasm/_egress/audit.py records them, bounded and masked).
"""

from __future__ import annotations

import datetime
from typing import Any, Literal

from pydantic import Field

from .._model import Model  # built on first use (a cold start pays for what it uses)
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


class AuditEvent(Model):
    """One outbound event of a sandbox."""

    timestamp: datetime.datetime
    method: str = ""  # the HTTP method; "DNS", "CONNECT" (a TCP connection), "TLS" otherwise
    url: str = ""
    status_code: int = 0
    pii_redactions: int = 0
    injection_blocks: int = 0
    transformations_applied: int = 0
    direction: Literal["outbound", "inbound"] = "outbound"  # "inbound": a connection to a server in the sandbox
    kind: Literal["dns", "connection", "request", "guard", "tool", "inbound"] = "request"  # "tool": a host tool call
    decision: Literal["allowed", "denied"] = "allowed"
    rule: str = ""  # the policy entry (or check) that decided
    reason: str = ""
    host: str = ""  # the name the connection is bound to (or the literal address)
    address: str = ""
    port: int = 0
    tls: bool = False
    bytes_out: int = 0
    bytes_in: int = 0
    duration_ms: float = 0.0
    secrets_injected: list[str] = Field(default_factory=list)  # variable names, never values
    error: str = ""
    # content guards (security=): what was found whatever the action, and what was done
    pii_detections: int = 0
    pii_rehydrations: int = 0
    injection_detections: int = 0
    invisible_chars: int = 0
    guard: str = ""  # the guard that blocked the request or response, or cut the response
    guard_notes: list[str] = Field(default_factory=list)
