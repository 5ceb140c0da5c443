"""Fixtures for snapshots, pause/resume and fork: a fresh local state store per test (a real
folder through fsspec), sandboxes on the warm path (the cold path's base image is the plain
module's: tests/state/test_snapshots.py checks it once)."""

from __future__ import annotations

import os
import subprocess
import sys
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
