"""Package installs and template builds: host code (pip, the wheel cache, installer) plus the
guest's pip; they run on the warm path only (the cold path starts guests the same way,
tests/test_bundle.py covers it).

`sdist_index` serves a real PEP 503 index over HTTP on loopback: `goodpkg` (a pure-Python wheel)
and `evilpkg` (a source distribution only, whose build backend writes a marker file: a test
asserts the marker never appears, so no build ran on the host)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

from wheels import make_sdist, make_wheel, write_index


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass(frozen=True)
class Index:
    url: str  # the simple index: http://127.0.0.1:PORT/simple
    marker: Path  # written if evilpkg's build backend (or setup.py) ever runs


@contextlib.contextmanager
def serve_index(root: Path, dist: list[Path]) -> Iterator[str]:
    """A PEP 503 index of `dist` (in `root/served`) over HTTP on loopback: its simple URL."""
    write_index(root / "served", dist)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(root / "served")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def sdist_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("index")
    marker = root / "BUILT-ON-THE-HOST"
    dist = [make_sdist(root / "dist", "evilpkg", "1.0", marker),
            make_wheel(root / "dist", "goodpkg", "1.0",
                       files={"goodpkg/__init__.py": "ORIGIN = 'index'\n"})]
    with serve_index(root, dist) as url:
        yield Index(url, marker)


@pytest.fixture
def on_index(sdist_index: Index, monkeypatch: pytest.MonkeyPatch) -> Index:
    """The host's pip uses the test's index only (as PIP_INDEX_URL and PIP_EXTRA_INDEX_URL)."""
    monkeypatch.setenv("PIP_INDEX_URL", sdist_index.url)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", sdist_index.url)
    monkeypatch.delenv("DECLAW_WASM_OFFLINE", raising=False)
    return sdist_index


class Hits:
    """A loopback HTTP server that answers 404 to everything and records each request's path:
    where the host's pip must not go."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        hits = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.paths.append(self.path)
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_HEAD = do_GET

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hits() -> Iterator[Hits]:
    server = Hits()
    try:
        yield server
    finally:
        server.close()


class HostTmp:
    """The host's temporary folder for the test (tempfile.tempdir and TMPDIR: a pool's worker
    started afterwards inherits it), and the peak of what is allocated under it (blocks and
    entries), sampled while a block runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.peak_bytes = 0
        self.peak_files = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def allocated(self) -> tuple[int, int]:
        total = count = 0
        for folder, dirs, files in os.walk(self.root):
            for name in dirs + files:
                try:
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
                    count += 1
                except OSError:
                    pass
        return total, count

    def _sample(self) -> None:
        while not self._stop.is_set():
            size, count = self.allocated()
            self.peak_bytes = max(self.peak_bytes, size)
            self.peak_files = max(self.peak_files, count)
            time.sleep(0.05)

    def __enter__(self) -> "HostTmp":
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="test-tmp-peak")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join()


@pytest.fixture
def host_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> HostTmp:
    root = tmp_path / "host-tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return HostTmp(root)


class ChildPeak:
    """The peak RSS (VmHWM) of the children of process `pid` whose command line holds `needle`
    (the host's pip runs as `python -c BOOT .../pip_guard.py ...`), sampled while a block runs;
    `seen`: how many there were."""

    def __init__(self, pid: int, needle: str = "pip_guard.py") -> None:
        self.pid = pid
        self.needle = needle
        self.peak = 0
        self.seen = 0
        self._stop = threading.Event()
        self._pids: set[int] = set()

    def _children(self) -> list[int]:
        found = []
        for task in os.listdir(f"/proc/{self.pid}/task"):
            try:
                with open(f"/proc/{self.pid}/task/{task}/children") as f:
                    found += [int(p) for p in f.read().split()]
            except OSError:
                pass
        return found

    def _sample(self) -> None:
        while not self._stop.is_set():
            for pid in self._children():
                try:
                    with open(f"/proc/{pid}/cmdline") as f:
                        if self.needle not in f.read():
                            continue
                    with open(f"/proc/{pid}/status") as f:
                        status = f.read()
                except OSError:
                    continue
                self._pids.add(pid)
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak = max(self.peak, int(line.split()[1]) * 1024)
            time.sleep(0.005)

    def __enter__(self) -> "ChildPeak":
        self._thread = threading.Thread(target=self._sample, daemon=True, name="test-child-peak")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.seen = len(self._pids)
