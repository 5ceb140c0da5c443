"""The peak of Python allocations while a block runs (tracemalloc), safe beside other threads.

CPython before 3.12.9 / 3.13.2 can crash in `tracemalloc.stop()` while another thread allocates
or frees raw memory without the GIL (gh-128679) — a thread ending does, and guests, pool readers
and servers start and end threads all the time: three full runs died of it. So tracing starts
once per test process and is never stopped; a measurement resets the peak and reports what was
allocated above the level at its start. Tracing slows every allocation (a guest test file ran
2× slower), so the tests that trace are marked `traces_memory` and run after all the others
(tests/conftest.py).
"""

from __future__ import annotations

import tracemalloc
from contextlib import contextmanager
from typing import Iterator


class Peak:
    """Bytes of Python allocations above the level when it was made (or last `reset`)."""

    def __init__(self) -> None:
        self.base = 0
        self.reset()

    def reset(self) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start()
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]

    def now(self) -> int:
        """The peak so far, above the base."""
        return max(0, tracemalloc.get_traced_memory()[1] - self.base)


@contextmanager
def traced() -> Iterator[Peak]:
    yield Peak()
