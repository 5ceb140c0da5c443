"""Helpers of the hostile-input corpus: is the host still fine, bounded waits, host memory."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from declaw_wasm import testing
from declaw_wasm import CommandResult, Sandbox

GUEST_THREAD = "declaw-guest"
# The backend of a case running on every backend (conftest.py `ON_EVERY_BACKEND`): the keyword
# arguments that put a sandbox there, and the processes besides this one that host its sandboxes.
BACKEND: dict[str, Any] = {}


def no_hosts() -> list[int]:
    return []


def copies() -> int:
    """How many processes hold a case's output: this one (in-process); the one making it and
    this one (a pool, `serve`); on Ray also Ray's own buffers in its processes, which stay at
    a level of their own (measured: ~80 MB in the driver and ~150 MB in an actor after moving
    200 MB or 600 MB alike)."""
    return 1 if not BACKEND else 3 if BACKEND.get("backend") == "ray" else 2


HOSTS: Callable[[], list[int]] = no_hosts


def guest_threads() -> int:
    """How many guest threads this process has (each running guest has one)."""
    return sum(1 for t in threading.enumerate() if t.name == GUEST_THREAD)


def wait_guest_threads(at_most: int, within: float = 5.0) -> int:
    """Wait until at most `at_most` guest threads remain; the count at the end."""
    deadline = time.monotonic() + within
    while guest_threads() > at_most and time.monotonic() < deadline:
        time.sleep(0.02)
    return guest_threads()


def echo_ok(sandbox: Sandbox) -> None:
    r = sandbox.commands.run("echo ok", timeout=15)
    assert (r.exit_code, r.stdout) == (0, "ok\n"), r


def assert_host_fine(*sandboxes: Sandbox) -> None:
    """The host survived: every sandbox still alive runs `echo ok`, and so does a new one (on
    the case's backend)."""
    for sandbox in sandboxes:
        if sandbox.is_running():
            echo_ok(sandbox)
    with Sandbox.create(timeout=60, **BACKEND) as other:
        echo_ok(other)


def run_py(sandbox: Sandbox, code: str, **kwargs: Any) -> CommandResult:
    """Run `code` as `python3 FILE` in the sandbox's shell."""
    path = f"/tmp/prog-{uuid.uuid4().hex}.py"
    sandbox.files.write(path, code)
    return sandbox.commands.run(f"python3 {path}", **kwargs)


def deep_tree(sandbox: Sandbox, where: str, levels: int = 1040) -> CommandResult:
    """The guest makes `levels` nested folders `d/d/d/...` under `where` (WASI's path limit stops
    it near 1048 levels); the result says how many it made."""
    code = (f"import os\nos.makedirs({where!r}, exist_ok=True)\nos.chdir({where!r})\nmade = 0\n"
            f"try:\n    for _ in range({levels}):\n        os.mkdir('d')\n        os.chdir('d')\n"
            "        made += 1\nexcept OSError as e:\n    print(type(e).__name__)\nprint(made)\n")
    r = run_py(sandbox, code, timeout=60)
    assert r.exit_code == 0, r
    return r


class Bounded:
    """Run `fn` on a daemon thread; `wait()` says whether it ended within the bound."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self._done = threading.Event()
        self.elapsed = 0.0

        def body() -> None:
            start = time.monotonic()
            try:
                self.result = fn()
            except BaseException as exc:  # reported to the test
                self.error = exc
            finally:
                self.elapsed = time.monotonic() - start
                self._done.set()

        threading.Thread(target=body, daemon=True, name="security-bounded").start()

    def wait(self, seconds: float) -> bool:
        return self._done.wait(seconds)


def rss(pid: Optional[int] = None) -> int:
    """This process's resident memory (or process `pid`'s: a pool worker's), bytes."""
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _total(pids: list[int]) -> int:
    """The resident memory of processes `pids` (one that has ended counts nothing)."""
    total = 0
    for pid in pids:
        try:
            total += rss(pid)
        except (OSError, AssertionError):  # ended meanwhile (a worker killed by its guest's fault)
            continue
    return total


def host_rss() -> int:
    """The resident memory of this process and of every process hosting the case's sandboxes."""
    return _total([os.getpid()] + HOSTS())


class PeakRSS:
    """`with PeakRSS() as m:` ... `m.growth`: how far the host's RSS — this process's and its
    sandbox hosts' (`HOSTS`, taken once at the start), or process `pid`'s — rose above the start.

    The start waits (at most SETTLE_S) until that RSS holds still for QUIET_S: what the host
    does in the background after the case's last call — a pool worker refilling its standby
    sandboxes and parked guests after a create, tens of MB and slower on a loaded machine — is
    not the measured work's (it put one full run's pool 9 MB past a 64 MiB bound)."""

    SETTLE_S = 10.0
    QUIET_S = 0.3
    STILL = 1 << 20  # bytes: "holds still"

    def __init__(self, pid: Optional[int] = None) -> None:
        self.pid = pid

    def __enter__(self) -> "PeakRSS":
        self.pids = [self.pid] if self.pid is not None else [os.getpid()] + HOSTS()
        self.start = self._settled()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="security-rss")
        self._thread.start()
        return self

    def _settled(self) -> int:
        deadline = time.monotonic() + self.SETTLE_S
        level, since = self._rss(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self._rss()
            if abs(now - level) > self.STILL:
                level, since = now, time.monotonic()
            elif time.monotonic() - since >= self.QUIET_S:
                return now
        return self._rss()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._rss())
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    def _rss(self) -> int:
        return _total(self.pids)

    @property
    def growth(self) -> int:
        return self.peak - self.start


def tree_signature(folder: Path) -> dict[str, tuple[int, int, int, str]]:
    """Every file below `folder`: size, mtime, link count, and a hash of its first MiB."""
    out: dict[str, tuple[int, int, int, str]] = {}
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            st = path.lstat()
            with open(path, "rb") as f:
                head = hashlib.sha256(f.read(1 << 20)).hexdigest()
            # a cache folder's READY marker: the host touches it whenever a process uses the folder
            # (_cache.py, least recently used first), another test's process too: its content counts
            mtime = 0 if name == "READY" and Path(root) == folder else st.st_mtime_ns
            out[str(path.relative_to(folder))] = (st.st_size, mtime, st.st_nlink, head)
    return out


def read_only_mounts(sandbox: Sandbox) -> dict[str, Path]:
    """The shared read-only mounts (stdlib, boot code, shell code, matplotlib data): guest
    path -> host folder."""
    return {m.guest: m.host for m in testing.mounts(sandbox) if not m.writable and m.guest != "/"}


def inside(path: Path | None, folder: Path) -> bool:
    """Whether `path` is within `folder` (None, a guest path with no host folder, is not)."""
    if path is None:
        return False
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except ValueError:
        return False
