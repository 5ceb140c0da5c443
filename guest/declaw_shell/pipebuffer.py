"""A pipeline stage whose reader stopped early gets 141 (SIGPIPE) only if it wrote after that,
as on Linux, where a writer is ahead of its reader by up to a pipe's buffer (64 KiB).

The library's stages run lazily, as their reader pulls: a reader that ended early (`head -1`,
`true`) marked the stage before it 141 however little it had left to write. So `seq 3 | head
-1` and `cat small.txt | head -1` gave 141 where bash gives 0 — and under `set -o pipefail`, the
`set -euo pipefail` agents open scripts with, the script stopped there — and `(exit 3) | true`
gave 141, not 3. Now a stream closed early first runs its producer on for up to a pipe's buffer
of output (kept nowhere) and 0.1 s: a producer that ends within them keeps its own status; one
that writes more gets 141, as `yes | head -1`'s does, and so does one still going after 0.1 s
(`tail -f f | head -3`, which waits for the file to grow, ends then, as GNU tail's does once its
reader is gone).
"""

from __future__ import annotations

import asyncio
import time

from bash_purepython import streams

PIPE_BUFFER = 65536  # characters a writer may be ahead of its reader (Linux's default pipe, in bytes)
AHEAD_S = 0.1  # and the time it may have had to get there: a producer still going after this (`tail -f`,
# `sleep 5`) is cut off as before

_library_aclose = streams.TextStream.aclose


async def _aclose(self: streams.TextStream) -> None:
    if self.finished:
        return
    written, deadline = 0, time.monotonic() + AHEAD_S
    try:
        while written <= PIPE_BUFFER:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            written += len(await asyncio.wait_for(self._source.__anext__(), left))
    except StopAsyncIteration:  # it ended within the buffer: its own status stands
        self.finished = True
        await self._close_upstream()
        return
    except (asyncio.TimeoutError, Exception):  # noqa: BLE001 - still going (`tail -f`), or failing as
        pass  # it is cut off: 141, as before
    await _library_aclose(self)  # 141, the producer stopped


def install() -> None:
    streams.TextStream.aclose = _aclose
