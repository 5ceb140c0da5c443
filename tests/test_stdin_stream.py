"""Live stdin, the host and door side: every chunk sent reaches the guest program as soon as it
is sent (no waiting for a newline or for more bytes), and the async API never blocks its event
loop while commands wait for input."""

from __future__ import annotations

import queue
import time
from typing import Callable

import anyio

import pytest

from declaw_wasm import AsyncSandbox, Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

READ_ONE_AT_A_TIME = ("python3 -c 'import sys\nfor _ in range(3):\n"
                      "    print(repr(sys.stdin.read(1)), flush=True)\nprint(repr(sys.stdin.read()))'")


def _each_line_into(lines: "queue.Queue[str]") -> Callable[[str], None]:
    def put(text: str) -> None:
        for line in text.splitlines():
            lines.put(line)
    return put


def _next(lines: "queue.Queue[str]", timeout: float = 10.0) -> str:
    return lines.get(timeout=timeout)


def test_each_chunk_reaches_the_program_as_soon_as_it_is_sent(local_sbx: Sandbox) -> None:
    lines: "queue.Queue[str]" = queue.Queue()
    handle = local_sbx.commands.run(READ_ONE_AT_A_TIME, background=True, stdin=True,
                                    on_stdout=_each_line_into(lines))
    for chunk in ("H", "é", "\n"):  # no newline to wait for: read(1) returns each at once
        handle.send_stdin(chunk)
        assert _next(lines) == repr(chunk)
    handle.send_stdin("rest, no newline")
    handle.close_stdin()
    assert _next(lines) == repr("rest, no newline")
    assert handle.wait().exit_code == 0


def test_a_chunk_without_newline_reaches_input_readers(local_sbx: Sandbox) -> None:
    """os.read on fd-less stdin and sys.stdin.buffer.read1 get partial input too."""
    lines: "queue.Queue[str]" = queue.Queue()
    code = "python3 -c 'import sys; print(sys.stdin.buffer.read1(100), flush=True); print(sys.stdin.read())'"
    handle = local_sbx.commands.run(code, background=True, stdin=True,
                                    on_stdout=_each_line_into(lines))
    handle.send_stdin(b"Hello, World!")
    assert _next(lines) == repr(b"Hello, World!")
    handle.send_stdin("more")
    handle.close_stdin()
    assert _next(lines) == "more"
    assert handle.wait().exit_code == 0


def test_async_stdin_never_blocks_the_event_loop() -> None:
    """The async stdin cases under a loop watchdog: the loop must answer within a tick all along,
    and a timeout around a command stuck on its input must end the wait at once."""
    gaps: list[float] = []

    async def watchdog() -> None:
        while True:
            before = time.monotonic()
            await anyio.sleep(0.01)
            gaps.append(time.monotonic() - before)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(watchdog)
            async with await AsyncSandbox.create() as sbx:
                seen: list[str] = []
                arrived = anyio.Event()

                async def on_stdout(text: str) -> None:
                    seen.extend(text.splitlines())
                    arrived.set()

                handle = await sbx.commands.run(READ_ONE_AT_A_TIME, background=True, stdin=True,
                                                on_stdout=on_stdout)
                for chunk in ("a", "b", "c"):
                    arrived = anyio.Event()
                    await handle.send_stdin(chunk)
                    with anyio.fail_after(10):
                        await arrived.wait()
                    assert seen[-1] == repr(chunk)
                await handle.send_stdin("end")
                await handle.close_stdin()
                assert (await handle.wait()).exit_code == 0

                # a command waiting for input that never comes: a timeout around the wait ends it
                stuck = await sbx.commands.run("python3 -c 'import sys; sys.stdin.read()'",
                                               background=True, stdin=True)
                start = time.monotonic()
                with anyio.move_on_after(0.3):
                    await stuck.wait()
                assert time.monotonic() - start < 2.0
                with anyio.move_on_after(0.3):  # and iterating its output, the same
                    async for _ in stuck:
                        pass
                assert time.monotonic() - start < 4.0
                assert await stuck.kill() is True
            tasks.cancel_scope.cancel()

    anyio.run(main)
    assert gaps and max(gaps) < 0.5, f"the event loop was blocked for {max(gaps):.2f} s"
