"""What the host holds for a sandbox's connections, counted per sandbox and per process.

Two kinds of bytes (docs/security.md, "Upstream servers and the relay"):

* **Window bytes** (`Budget.add`): bytes in flight, which the host stops taking more of once a
  connection's window is full (connection.py). The budget for them is soft: once a sandbox's
  or the process's is `spent`, each connection's windows shrink to a floor, so the totals stay
  bounded while no connection stalls for another's sake.
* **Kept bytes** (`Budget.keep`, through a connection's `Hold`): what cannot wait for the guest
  to read — a body's decoder windows and state, a request body a content guard must see whole
  (raw, then decoded), an answer held back for an injection scan. These cannot shrink, and
  waiting for room could deadlock (the room is held by a connection the guest reads later),
  so the budget for them is hard: past it the request or answer is refused with a 503 that
  names the bound (a 413 or 502 when it is over its own per-exchange bound instead: those are
  the request's or the upstream's doing, a 503 is the host's state and passes). The two caps are
  apart: kept bytes do not shrink the windows (two large downloads being decoded would otherwise
  crawl at the floor), so a sandbox holds at most its kept cap plus its windows' bound.

One `Budget` per sandbox (its session's, `SANDBOX_ROOM` and `SANDBOX_KEEP`), under one for the
process (`PROCESS_BUDGET`).
"""

from __future__ import annotations

import threading
from typing import Optional

from ..limits import Limits
from .._codings import DECODER_BYTES, size_text

MiB = 1 << 20
SANDBOX_ROOM = 32 * MiB  # window bytes one sandbox's connections hold together before they shrink
PROCESS_ROOM = 1 << 30  # window bytes all the process's connections hold before they shrink
SANDBOX_KEEP = 64 * MiB  # kept bytes of one sandbox's connections (at least one largest exchange)
PROCESS_KEEP = 1 << 30  # kept bytes of all the process's connections


class HoldRefused(Exception):
    """A budget cannot keep what a connection needs: the guest gets a 503 naming the bound."""


class Budget:
    """Bytes held by many connections together (a sandbox's, or the whole process's): window
    bytes against a soft `cap`, kept bytes against a hard `keep_cap` (module docstring).
    Connections report what they hold after each move (`add` takes the change)."""

    def __init__(self, cap: int, parent: Optional["Budget"] = None, keep_cap: int = PROCESS_KEEP,
                 name: str = "the process") -> None:
        self.cap = cap
        self.parent = parent
        self.keep_cap = keep_cap
        self.name = name
        self.held = 0  # window bytes
        self.kept = 0  # kept bytes
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.held += n
        if self.parent is not None:
            self.parent.add(n)

    def spent(self) -> bool:
        """Window bytes at the soft cap, here or in a parent: windows shrink to their floor."""
        return self.held >= self.cap or (self.parent is not None and self.parent.spent())

    def keep(self, n: int) -> None:
        """Keep `n` more bytes here and in every parent, or none anywhere (raises
        HoldRefused naming the budget that is full); `n` < 0 gives bytes back."""
        if n <= 0:
            self._give_back(-n)
            return
        with self._lock:
            if self.kept + n > self.keep_cap:
                raise HoldRefused(
                    f"{self.name}'s egress keeps {size_text(self.kept)} already for decoding and "
                    f"content guards, and {size_text(n)} more would pass its "
                    f"{size_text(self.keep_cap)}")
            self.kept += n
        if self.parent is not None:
            try:
                self.parent.keep(n)
            except HoldRefused:
                with self._lock:
                    self.kept -= n
                raise

    def _give_back(self, n: int) -> None:
        if n:
            with self._lock:
                self.kept -= n
            if self.parent is not None:
                self.parent._give_back(n)


PROCESS_BUDGET = Budget(PROCESS_ROOM, keep_cap=PROCESS_KEEP, name="this process")


def sandbox_keep(limits: Limits) -> int:
    """A sandbox's cap on kept bytes: `SANDBOX_KEEP`, or more if its limits make one largest
    exchange need more (a request body a guard holds raw and decoded, with its decoders, and
    an answer's decoders and scan hold), so that every exchange its limits admit can happen."""
    largest = 2 * limits.net_guard_body_bytes + DECODER_BYTES + limits.net_guard_scan_bytes
    return max(SANDBOX_KEEP, largest)


class Hold:
    """What one connection keeps, by purpose ("decoders", "guard request body"...), charged to
    its sandbox's budget (None: counted here only, as for a relay made without a session)."""

    def __init__(self, budget: Optional[Budget] = None) -> None:
        self.budget = budget
        self.parts: dict[str, int] = {}
        self.closed = False  # the connection is closed: nothing is kept any more
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def set(self, what: str, n: int) -> None:
        """Keep `n` bytes for `what` from now on (raises HoldRefused: then nothing changed)."""
        with self._lock:
            if self.closed:
                return
            old = self.parts.get(what, 0)
            if n == old:
                return
            if self.budget is not None:
                try:
                    self.budget.keep(n - old)
                except HoldRefused as exc:
                    raise HoldRefused(f"{exc} ({what}: {size_text(n)})") from None
            if n:
                self.parts[what] = n
            else:
                self.parts.pop(what, None)

    def clear(self, closing: bool = False) -> None:
        """Give everything back (the exchange is over; `closing`: the connection too)."""
        with self._lock:
            if self.budget is not None:
                self.budget.keep(-self.total)
            self.parts.clear()
            self.closed = self.closed or closing
