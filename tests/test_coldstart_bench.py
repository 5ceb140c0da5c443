"""benchmarks/coldstart.py keeps running: its reduced form (`--smoke`: one fresh process in the
clean venv made from the installed project's own dependency metadata, on the cache as it is)
runs here. It measures nothing (benchmarks/README.md holds the figures): a hand-kept dependency
list once went stale and the benchmark stopped running unnoticed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.guest, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def guest_path() -> str:  # the benchmark's path is the default one (the warm image): run once
    return "warm"


def test_the_coldstart_benchmark_runs_in_a_venv_of_the_projects_own_dependencies() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import coldstart
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    names = {line.split("==")[0].lower().replace("_", "-") for line in coldstart.core_requirements()}
    assert {"wasmtime", "pydantic", "msgpack", "h11"} <= names and "pytest" not in names  # core, no extras
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "coldstart.py"), "--smoke"], capture_output=True,
                          text=True, timeout=840, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("smoke: import "), done.stdout
