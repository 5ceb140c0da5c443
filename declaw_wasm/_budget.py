"""Bytes one kind of bounded store holds in this process, and each holder's share of them.

The sandboxes' event rings (_journal/) and their egress audit logs (_egress/audit.py) each bound
what one holder keeps and what all of them keep together in the process: a holder adds and
takes back through its `Share`, which counts in the kind's `ProcessBytes` too, and a holder that
is collected gives its share back (`weakref.finalize`), so a dropped sandbox's bytes never stay
counted against the others.
"""

from __future__ import annotations

import threading
import weakref


class ProcessBytes:
    """Bytes held by all the holders of one kind in this process."""

    def __init__(self) -> None:
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.bytes += n

    def share(self, holder: object) -> Share:
        """A new holder's share, given back when `holder` is collected."""
        share = Share(self)
        weakref.finalize(holder, share.release)
        return share


class Share:
    """One holder's bytes, counted in its kind's total too. The holder serialises its own calls
    (under its lock); the total takes its own."""

    __slots__ = ("bytes", "total")

    def __init__(self, total: ProcessBytes) -> None:
        self.total = total
        self.bytes = 0

    def add(self, n: int) -> None:
        self.bytes += n
        self.total.add(n)

    def release(self) -> None:
        """Give everything back (the holder is gone)."""
        self.total.add(-self.bytes)
        self.bytes = 0
