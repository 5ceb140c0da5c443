"""Sandbox lifetimes (and other delayed work): one timer thread for every sandbox of the process.

A `threading.Timer` per sandbox made 2 000 idle sandboxes 2 000 threads (and a thread start,
~0.1 ms, per `create` and per `set_timeout`). Here every deadline is an entry in one heap,
watched by one thread that sleeps until the earliest; changing a deadline cancels the old entry
(left in the heap, skipped when it comes up) and pushes a new one.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable, Optional


class Alarm:
    """One scheduled call; `cancel()` before it fires and it never does."""

    __slots__ = ("when", "action", "cancelled", "inline", "_owner")

    def __init__(self, when: float, action: Callable[[], object], owner: "Lifetimes", inline: bool) -> None:
        self.when = when
        self.action = action
        self.cancelled = False
        self.inline = inline
        self._owner = owner

    def cancel(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self._owner._cancelled()

    def _fire(self) -> None:
        if not self.cancelled:
            try:
                self.action()
            except Exception:  # one action's failure must not stop the timer
                pass


class Lifetimes:
    """A heap of alarms and the thread that fires them (started on first use)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Alarm]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._garbage = 0  # cancelled alarms still in the heap

    def _cancelled(self) -> None:
        with self._cond:
            self._garbage += 1
            if self._garbage > 64 and self._garbage * 2 > len(self._heap):  # compact
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._garbage = 0

    def schedule(self, delay: float, action: Callable[[], object], inline: bool = False) -> Alarm:
        """Call `action()` `delay` seconds from now, on a thread of its own (it may block), or
        with `inline` on the timer's thread (it must be quick)."""
        alarm = Alarm(time.monotonic() + delay, action, self, inline)
        with self._cond:
            heapq.heappush(self._heap, (alarm.when, next(self._seq), alarm))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="declaw-lifetimes", daemon=True)
                self._thread.start()
            if self._heap[0][2] is alarm:
                self._cond.notify()
        return alarm

    def pending(self) -> int:
        with self._cond:
            return sum(1 for _, _, a in self._heap if not a.cancelled)

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                    self._garbage = max(0, self._garbage - 1)
                if not self._heap:
                    self._cond.wait()
                    continue
                left = self._heap[0][0] - time.monotonic()
                if left > 0:
                    self._cond.wait(min(left, 3600.0))  # huge timeouts overflow a wait
                    continue
                alarm = heapq.heappop(self._heap)[2]
            if alarm.inline:
                alarm._fire()
            else:  # a sandbox's end waits for its guests to stop: not on this thread, which serves all
                threading.Thread(target=alarm._fire, name="declaw-lifetime-end", daemon=True).start()


lifetimes = Lifetimes()
