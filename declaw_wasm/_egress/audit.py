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
whose names match `EnvSecurityConfig.mask_patterns` are masked as `***`.

The log is bounded, in events and in bytes (oldest events dropped first, and counted): each
text field is cut to `MAX_TEXT` characters once masked (a guest's 60 KiB request target keeps
its first 2000, and says how much was cut), an event keeps at most `MAX_NOTES` guard notes of
`MAX_NOTE` characters, and a sandbox's log at most `MAX_EVENTS` events and `MAX_LOG_BYTES` of
them (each counted as its text plus `EVENT_BYTES` for the object itself). All the process's logs
together are counted too: once they hold `PROCESS_LOG_BYTES`, a log that grows drops its oldest
events until they are back under it or it is down to `LOG_FLOOR`, so the process holds at most
that cap plus a floor (and one event) per sandbox.
"""

from __future__ import annotations

import fnmatch
import threading
from collections import deque
from datetime import datetime, timezone
from typing import Callable, Optional

from .._budget import ProcessBytes
from ..security.audit import AuditEvent as AuditEvent  # its public home

from . import DEFAULT_MASK_PATTERNS as DEFAULT_MASK_PATTERNS  # noqa: E402 -- (its home: the package's)
MAX_EVENTS = 10_000
MAX_LOG_BYTES = 16 << 20  # one sandbox's events together (as `_size` counts them)
MAX_TEXT = 2000  # characters of one text field (url, reason, error...), once masked
MAX_NOTES = 32  # guard notes per event
MAX_NOTE = 500  # characters of one guard note
EVENT_BYTES = 1024  # what one event costs beside its text (the model object, its fields)
TEXT_FIELDS = ("method", "url", "rule", "reason", "host", "address", "error", "guard")
PROCESS_LOG_BYTES = 256 << 20  # all the process's logs together, before each keeps its floor
LOG_FLOOR = 256 << 10  # what a log keeps while the process's logs are over their cap


PROCESS_LOGS = ProcessBytes()  # bytes of all the process's audit logs


def now() -> datetime:
    return datetime.now(timezone.utc)


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters cut)"


def _size(event: AuditEvent) -> int:
    """What an event costs the log (its text and a fixed part), roughly in bytes."""
    text = sum(len(getattr(event, name)) for name in TEXT_FIELDS)
    return EVENT_BYTES + text + sum(len(n) + 64 for n in [*event.guard_notes, *event.secrets_injected])


class AuditLog:
    """A sandbox's events, bounded in number and bytes; masks secrets in every string it
    records, then cuts each to its bound (module docstring)."""

    def __init__(self, secret_values: list[str], env: dict[str, str],
                 mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS, enabled: bool = True,
                 limit: int = MAX_EVENTS, max_bytes: int = MAX_LOG_BYTES) -> None:
        masked = [v for k, v in env.items() if len(v) >= 4 and
                  any(fnmatch.fnmatch(k.upper(), p) for p in mask_patterns)]
        self._hide = sorted({v for v in [*secret_values, *masked] if v}, key=len, reverse=True)
        self.enabled = enabled
        self.limit = limit
        self.max_bytes = max_bytes
        self._events: deque[tuple[int, AuditEvent]] = deque()
        self._counted = PROCESS_LOGS.share(self)  # what the events kept cost, as `_size` counts
        self.dropped = 0
        self._lock = threading.Lock()
        # the sandbox's event recorder (_local/recording.py): each event as recorded, masked and cut
        self.listener: Optional[Callable[[AuditEvent], None]] = None

    @property
    def bytes(self) -> int:
        return self._counted.bytes

    def mask(self, text: str) -> str:
        for value in self._hide:
            if value in text:
                text = text.replace(value, "***")
        return text

    def text(self, value: str) -> str:
        """`value` as a text field of an event: masked, then cut (for fields set after `record`)."""
        return cut(self.mask(value))

    def record(self, event: AuditEvent) -> None:
        if not self.enabled:
            return
        for name in TEXT_FIELDS:
            value = getattr(event, name)
            if value:
                setattr(event, name, cut(self.mask(value)))
        if event.guard_notes:
            notes = event.guard_notes
            kept = [cut(self.mask(n), MAX_NOTE) for n in notes[:MAX_NOTES]]
            if len(notes) > MAX_NOTES:
                kept.append(f"... ({len(notes) - MAX_NOTES} more notes cut)")
            event.guard_notes = kept
        size = _size(event)
        with self._lock:
            self._events.append((size, event))
            self._counted.add(size)
            while len(self._events) > self.limit or (len(self._events) > 1 and self._over()):
                gone, _ = self._events.popleft()
                self._counted.add(-gone)
                self.dropped += 1
        listener = self.listener
        if listener is not None:
            listener(event)

    def _over(self) -> bool:
        """Past its own byte bound, or past its floor while the process's logs are over theirs."""
        mine = self._counted.bytes
        return mine > self.max_bytes or (mine > LOG_FLOOR and PROCESS_LOGS.bytes > PROCESS_LOG_BYTES)

    def events(self, since: Optional[datetime] = None) -> list[AuditEvent]:
        with self._lock:
            return [e.model_copy() for _, e in self._events if since is None or e.timestamp >= since]
