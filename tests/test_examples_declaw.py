"""The seed's two listings verbatim with declaw's own SDKs (PyPI `declaw` 1.7.0, npm `@declaw/sdk`
1.3.0) against `declaw-wasm serve`: each run as its users run it, a separate process configured by
DECLAW_API_KEY and DECLAW_DOMAIN, printing what the in-process example prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import API_KEY  # noqa: E402 (tests/ is on sys.path)

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

HERE = Path(__file__).resolve().parent.parent / "examples" / "declaw-sdk"
EXPECTED = ["--- snippet 0: exit 0", "solution: {x: 13/7, y: 11/7}", "--- snippet 1: exit 0",
            "{'APAC': 150, 'EU': 80}", "--- snippet 2: exit 0", "wrote /tmp/chart.png"]


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"


def _env(server_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECLAW_")}
    return {**env, "DECLAW_API_KEY": API_KEY, "DECLAW_DOMAIN": server_url.split("//", 1)[1]}


def _check(stdout: str) -> None:
    lines = stdout.splitlines()
    assert lines[:6] == EXPECTED, stdout
    assert 10_000 < int(lines[6].split(":")[1].split()[0]) < 200_000


def test_the_python_listing_with_declaws_sdk(server_url: str) -> None:
    pytest.importorskip("declaw")
    done = subprocess.run([sys.executable, str(HERE / "code_interpreter.py")], env=_env(server_url),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _check(done.stdout)


def test_the_typescript_listing_with_declaws_sdk(server_url: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("Node.js is not installed")
    if not (HERE / "node_modules" / "@declaw" / "sdk").is_dir():
        installed = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HERE, capture_output=True,
                                   text=True, timeout=600)
        assert installed.returncode == 0, installed.stderr
    done = subprocess.run([str(HERE / "node_modules" / ".bin" / "tsx"), "code_interpreter.ts"], cwd=HERE,
                          env=_env(server_url), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    _check(done.stdout)
