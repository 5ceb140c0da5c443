"""Waiting for something a sandbox does in its own time (a background job, a server, a host)."""

from __future__ import annotations

import time
from typing import Callable


def until(condition: Callable[[], object], seconds: float = 30.0) -> None:
    """Look every 50 ms until `condition()` is true; fail the test after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
