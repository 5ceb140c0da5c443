"""Blocking work awaited from an event loop, and callbacks carried back to it.

How the async faces and the server stay off the loop. One limiter for both: waiting threads are cheap, and
anyio's default of 40 would queue the 41st running command behind the others.

And `ThreadCap`: threads started on a guest's behalf (name lookups, host tool calls), capped
per sandbox and per process, abandoned ones included."""

from __future__ import annotations

import functools
import inspect
import threading
from typing import TYPE_CHECKING, Any, Callable, Hashable, Optional, TypeVar

if TYPE_CHECKING:
    import anyio

# anyio (and with it asyncio, ~15 ms) is imported by the functions that use it, from an event
# loop: ThreadCap, which sync sandboxes use, needs neither.

T = TypeVar("T")
_waiters: Optional["anyio.CapacityLimiter"] = None


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a worker thread, awaited. A cancelled await (a timeout around it)
    returns at once and leaves the thread to finish on its own: waiting for a blocked call, say
    a command waiting for input that never comes, would hang the caller's cancellation."""
    import anyio.to_thread

    global _waiters
    if _waiters is None:  # (two loops racing here could make one each: it only bounds waiting threads)
        _waiters = anyio.CapacityLimiter(10_000)
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_waiters,
                                          abandon_on_cancel=True)


def from_loop(handler: Optional[Callable[[Any], Any]]) -> Optional[Callable[[Any], None]]:
    """A sync callback for other threads that runs `handler` (sync or a coroutine function) on
    the calling event loop."""
    if handler is None:
        return None
    import anyio.from_thread
    import anyio.lowlevel

    token = anyio.lowlevel.current_token()
    if inspect.iscoroutinefunction(handler):
        async_handler = handler

        def call_async(value: Any) -> None:
            anyio.from_thread.run(async_handler, value, token=token)

        return call_async
    sync_handler = handler

    def call_sync(value: Any) -> None:
        anyio.from_thread.run_sync(sync_handler, value, token=token)

    return call_sync


def loop_token() -> Any:
    """The calling event loop's anyio token (what `anyio.from_thread.run` takes)."""
    import anyio.lowlevel

    return anyio.lowlevel.current_token()


class CapReached(RuntimeError):
    """No thread was started: the owner or the process has as many as its cap allows."""


class ThreadCap:
    """Threads started on guests' behalf for one kind of work: at most `per_owner` alive for
    one owner (a sandbox), at most `total` in this process. A thread counts from its start to
    the end of its work, whether or not anyone still waits for it: a guest that gives up on a
    name lookup that never returns (or a tool call that never does) still holds its thread, so
    abandoned threads are counted too, and a guest cannot pile them up."""

    def __init__(self, what: str, per_owner: int, total: int) -> None:
        self.what = what
        self.per_owner = per_owner
        self.total = total
        self._lock = threading.Lock()
        self._alive: dict[Hashable, int] = {}
        self._count = 0

    def start(self, owner: Hashable, target: Callable[[], Any], name: str) -> None:
        """Run `target()` on a new daemon thread counted against `owner`; CapReached (saying
        which cap) if that would pass either."""
        with self._lock:
            mine = self._alive.get(owner, 0)
            if mine >= self.per_owner:
                raise CapReached(f"{mine} {self.what} of this sandbox are still running, abandoned "
                                 f"ones included (at most {self.per_owner}); wait for some to end")
            if self._count >= self.total:
                raise CapReached(f"{self._count} {self.what} are running in this process (at most "
                                 f"{self.total}); try again later")
            self._alive[owner] = mine + 1
            self._count += 1

        def run() -> None:
            try:
                target()
            finally:
                self._release(owner)

        try:
            threading.Thread(target=run, name=name, daemon=True).start()
        except BaseException:
            self._release(owner)
            raise

    def _release(self, owner: Hashable) -> None:
        with self._lock:
            left = self._alive.get(owner, 1) - 1
            if left > 0:
                self._alive[owner] = left
            else:
                self._alive.pop(owner, None)
            self._count -= 1

    def alive(self, owner: Optional[Hashable] = None) -> int:
        """Threads alive for `owner` (None: in this process)."""
        with self._lock:
            return self._count if owner is None else self._alive.get(owner, 0)
