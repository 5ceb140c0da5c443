"""Package installs and template builds: host code (pip, the wheel cache, installer) plus the
guest's pip; they run on the warm path only (the cold path starts guests the same way,
tests/test_bundle.py covers it).

`sdist_index` serves a real PEP 503 index over HTTP on loopback: `goodpkg` (a pure-Python wheel)
and `evilpkg` (a source distribution only, whose build backend writes a marker file: a test
asserts the marker never appears, so no build ran on the host)."""

from __future__ import annotations

import functools
import http.server
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

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


@pytest.fixture(scope="module")
def sdist_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    root = tmp_path_factory.mktemp("index")
    marker = root / "BUILT-ON-THE-HOST"
    dist = [make_sdist(root / "dist", "evilpkg", "1.0", marker),
            make_wheel(root / "dist", "goodpkg", "1.0",
                       files={"goodpkg/__init__.py": "ORIGIN = 'index'\n"})]
    write_index(root / "served", dist)
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(root / "served")))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Index(f"http://127.0.0.1:{server.server_address[1]}/simple", marker)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def on_index(sdist_index: Index, monkeypatch: pytest.MonkeyPatch) -> Index:
    """The host's pip uses the test's index only (as PIP_INDEX_URL and PIP_EXTRA_INDEX_URL)."""
    monkeypatch.setenv("PIP_INDEX_URL", sdist_index.url)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", sdist_index.url)
    monkeypatch.delenv("DECLAW_WASM_OFFLINE", raising=False)
    return sdist_index
