"""Blocking work awaited from an event loop, and callbacks carried back to it: how the async
faces and the server stay off the loop. One limiter for both: waiting threads are cheap, and
anyio's default of 40 would queue the 41st running command behind the others."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

T = TypeVar("T")
_waiters = anyio.CapacityLimiter(10_000)


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` in a worker thread, awaited. A cancelled await (a timeout around it)
    returns at once and leaves the thread to finish on its own: waiting for a blocked call, say
    a command waiting for input that never comes, would hang the caller's cancellation."""
    return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs), limiter=_waiters,
                                          abandon_on_cancel=True)


def from_loop(handler: Optional[Callable[[Any], Any]]) -> Optional[Callable[[Any], None]]:
    """A sync callback for other threads that runs `handler` (sync or a coroutine function) on
    the calling event loop."""
    if handler is None:
        return None
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
    return anyio.lowlevel.current_token()
