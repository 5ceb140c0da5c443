"""Fixtures for snapshots, pause/resume and fork: a fresh local state store per test (a real
folder through fsspec), sandboxes on the warm path (the cold path's base image is the plain
module's: tests/state/test_snapshots.py checks it once)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import Sandbox

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def guest_path() -> str:  # overrides tests/conftest.py's warm/cold parametrisation
    return "warm"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """DECLAW_WASM_STATE: a fresh folder."""
    url = str(tmp_path / "state")
    monkeypatch.setenv("DECLAW_WASM_STATE", url)
    return url


@pytest.fixture
def sandbox(state: str) -> Iterator[Sandbox]:
    """A sandbox of the test's own (killed at the end, if it is still running)."""
    sbx = Sandbox.create(timeout=600)
    yield sbx
    sbx.kill()


def run_python(code: str, *, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`code` in a new Python process with this process's environment (the state store, the
    cache), this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict[str, object]]:
    """moto's S3 server on a free loopback port, a bucket `declaw-state`, and fsspec's options
    for it. Skipped without s3fs and moto ('.[test-s3]')."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options: dict[str, object] = {"key": "testing", "secret": "testing",
                                  "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline:
                    pytest.skip("moto server did not start")
                time.sleep(0.1)
        import s3fs

        s3fs.S3FileSystem(**options).mkdir("declaw-state")
        yield options
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def s3_state(s3_server: dict[str, object], monkeypatch: pytest.MonkeyPatch) -> str:
    """DECLAW_WASM_STATE on S3 (moto), configured the way users do: fsspec's environment."""
    url = f"s3://declaw-state/{uuid.uuid4().hex}"
    monkeypatch.setenv("DECLAW_WASM_STATE", url)
    monkeypatch.setenv("FSSPEC_S3", json.dumps(s3_server))
    import fsspec.config

    fsspec.config.set_conf_env(fsspec.config.conf)  # fsspec reads its environment at import
    return url
