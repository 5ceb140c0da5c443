"""pytest plugin for running E2B's test suites against declaw_wasm (loaded by run.py with `-p`).

It installs the import alias (shim.py) before E2B's conftest imports `e2b`, and watches the
event loop: async code must never block it (a blocked loop stalls every other task of the
program), so a thread pings the session's loop while a test runs it and records, per test, the
longest time the loop took to answer and where it was stuck. run.py reports tests whose loop
was blocked for more than `--loop-threshold` seconds (a property in the JUnit XML), whether
they passed or not. No fixture of E2B's is replaced: its templates ("base",
"code-interpreter-v1") are declaw_wasm's names, and no test here needs an API key.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shim  # noqa: E402

shim.install()

_current: dict[str, Optional[str]] = {"test": None}
_stalls: dict[str, tuple[float, str]] = {}  # test id -> (worst lag in s, where the loop was)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--loop-threshold", type=float, default=1.0,
                     help="report async tests whose event loop stalled longer than this (s)")


class LoopWatchdog(threading.Thread):
    """Pings `loop` every 0.2 s while it runs; a ping answered late is a stall."""

    def __init__(self, loop: asyncio.AbstractEventLoop, loop_thread: int, threshold: float) -> None:
        super().__init__(name="loop-watchdog", daemon=True)
        self.loop, self.loop_thread, self.threshold = loop, loop_thread, threshold
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.2):
            if self.loop.is_running() and not self.loop.is_closed():
                self._ping()

    def _ping(self) -> None:
        answered = threading.Event()
        test = _current["test"]
        start = time.monotonic()
        try:
            self.loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # closed meanwhile
            return
        where = ""
        while not answered.wait(0.05):
            if not self.loop.is_running() or self.stopped.is_set():
                break
            if not where and time.monotonic() - start > self.threshold:
                where = self._where()
        lag = time.monotonic() - start
        if test and lag > self.threshold and lag > _stalls.get(test, (0.0, ""))[0]:
            _stalls[test] = (lag, where or self._where())

    def _where(self) -> str:
        """Where the loop's thread is: the innermost declaw_wasm frame, else "test code: " and
        the innermost frame (E2B's async tests call `time.sleep` themselves in places)."""
        frame = sys._current_frames().get(self.loop_thread)
        if frame is None:
            return "?"
        stack = traceback.extract_stack(frame)
        ours = [f for f in stack if "declaw_wasm" in f.filename]
        pick = (ours or stack)[-1]
        return f"{'' if ours else 'test code: '}{Path(pick.filename).name}:{pick.lineno} {pick.name}"


@pytest_asyncio.fixture(scope="session", loop_scope="session", autouse=True)
async def _loop_watchdog(request: pytest.FixtureRequest) -> Any:
    threshold = request.config.getoption("--loop-threshold")
    dog = LoopWatchdog(asyncio.get_running_loop(), threading.get_ident(), threshold)
    dog.start()
    yield dog
    dog.stopped.set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Optional[pytest.Item]) -> Iterator[None]:
    _current["test"] = item.nodeid
    yield
    _current["test"] = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    if call.when == "teardown" and item.nodeid in _stalls:
        lag, where = _stalls[item.nodeid]
        item.user_properties.append(("loop_blocked", f"{lag:.1f}s at {where}"))
    yield
