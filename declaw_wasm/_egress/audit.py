"""The audit log: every name lookup, connection and HTTP request a sandbox makes, and every
host tool its code calls (kind "tool", method "TOOL", url "tool:<name>"), as events.

Fields are declaw's `AuditEntry` (timestamp, method, url, status_code, pii_redactions,
injection_blocks, transformations_applied, direction) plus what declaw keeps server-side only:
the decision (allowed/denied and the rule that decided), the destination, bytes each way and
the duration; with `security=`, what each content guard found and did (counts, the guard that
blocked, notes), and `kind="guard"` events for guards the policy names but nothing enforces.
`Sandbox.audit_events()` returns them (declaw has no client API for this).

Nothing secret is recorded: URLs are the guest's (placeholders, never injected values), secret
values are scrubbed from every text field, and values of the sandbox's environment variables
whose names match `EnvSecurityConfig.mask_patterns` are masked as `***`. The log is bounded
(oldest events dropped first, and counted).
"""

from __future__ import annotations

import fnmatch
import threading
from collections import deque
from datetime import datetime, timezone
from typing import Literal, Optional

from pydantic import Field

from .._model import Model  # built on first use (a cold start pays for what it uses)

DEFAULT_MASK_PATTERNS = ("*_KEY", "*_SECRET", "*_TOKEN", "*_PASSWORD", "*_CREDENTIALS", "API_KEY",
                         "SECRET_KEY")
MAX_EVENTS = 10_000


class AuditEvent(Model):
    """One outbound event of a sandbox."""

    timestamp: datetime
    method: str = ""  # the HTTP method; "DNS", "CONNECT" (a TCP connection), "TLS" otherwise
    url: str = ""
    status_code: int = 0
    pii_redactions: int = 0
    injection_blocks: int = 0
    transformations_applied: int = 0
    direction: Literal["outbound"] = "outbound"
    kind: Literal["dns", "connection", "request", "guard", "tool"] = "request"  # "tool": a host tool call
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


def now() -> datetime:
    return datetime.now(timezone.utc)


class AuditLog:
    """A sandbox's events, bounded; masks secrets in every string it records."""

    def __init__(self, secret_values: list[str], env: dict[str, str],
                 mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS, enabled: bool = True,
                 limit: int = MAX_EVENTS) -> None:
        masked = [v for k, v in env.items() if len(v) >= 4 and
                  any(fnmatch.fnmatch(k.upper(), p) for p in mask_patterns)]
        self._hide = sorted({v for v in [*secret_values, *masked] if v}, key=len, reverse=True)
        self.enabled = enabled
        self._events: deque[AuditEvent] = deque(maxlen=limit)
        self.dropped = 0
        self._lock = threading.Lock()

    def mask(self, text: str) -> str:
        for value in self._hide:
            if value in text:
                text = text.replace(value, "***")
        return text

    def record(self, event: AuditEvent) -> None:
        if not self.enabled:
            return
        for name in ("url", "reason", "error", "host"):
            value = getattr(event, name)
            if value:
                setattr(event, name, self.mask(value))
        if event.guard_notes:
            event.guard_notes = [self.mask(n) for n in event.guard_notes]
        with self._lock:
            if len(self._events) == self._events.maxlen:
                self.dropped += 1
            self._events.append(event)

    def events(self, since: Optional[datetime] = None) -> list[AuditEvent]:
        with self._lock:
            return [e.model_copy() for e in self._events if since is None or e.timestamp >= since]
