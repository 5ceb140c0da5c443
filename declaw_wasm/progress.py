"""Progress on stderr for the slow one-time steps (download, unpack, compile)."""

from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, TextIO


class Progress:
    """Prints one-line status messages, and a ticking timer around long blocking calls."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet

    def say(self, message: str) -> None:
        if not self.quiet:
            print(f"declaw-wasm: {message}", file=self.stream, flush=True)

    @contextmanager
    def timed(self, what: str, expected_s: float) -> Iterator[None]:
        """Show `what` with elapsed seconds while the body runs (it may hold no GIL-free hook)."""
        if self.quiet:
            yield
            return
        done = threading.Event()
        tty = getattr(self.stream, "isatty", lambda: False)()
        start = time.monotonic()

        def tick() -> None:
            every = 1.0 if tty else 15.0
            while not done.wait(every):
                elapsed = time.monotonic() - start
                frac = min(elapsed / expected_s, 0.99)
                bar = "#" * int(frac * 20)
                line = f"declaw-wasm: {what} [{bar:<20}] {elapsed:4.0f}s (about {expected_s:.0f}s)"
                if tty:
                    print("\r" + line, end="", file=self.stream, flush=True)
                else:
                    print(line, file=self.stream, flush=True)

        self.say(f"{what} (one time, about {expected_s:.0f}s on this machine)")
        ticker = threading.Thread(target=tick, name="declaw-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join()
            if tty:
                print(file=self.stream)
            self.say(f"{what}: done in {time.monotonic() - start:.0f}s")
