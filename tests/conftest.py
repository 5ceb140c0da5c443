"""Fixtures: the real runtime, real sandboxes. One shared sandbox where isolation allows.

Every test runs on both guest paths: "warm" (the snapshot, the default) and "cold" (the plain
module, DECLAW_WASM_SNAPSHOT=0), which must behave the same.
"""

from __future__ import annotations

import os
from typing import Iterator

import pytest

from declaw_wasm import Sandbox


@pytest.fixture(scope="session", params=["warm", "cold"])
def guest_path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _on_guest_path(guest_path: str) -> Iterator[None]:
    """Sandboxes created during the test use the test's guest path."""
    before = os.environ.get("DECLAW_WASM_SNAPSHOT")
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1" if guest_path == "warm" else "0"
    yield
    if before is None:
        os.environ.pop("DECLAW_WASM_SNAPSHOT", None)
    else:
        os.environ["DECLAW_WASM_SNAPSHOT"] = before


@pytest.fixture(scope="session")
def sbx(guest_path: str) -> Iterator[Sandbox]:
    """A sandbox shared by tests that only add files under their own names."""
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1" if guest_path == "warm" else "0"
    sandbox = Sandbox.create(timeout=3600)
    assert sandbox._core.runtime.warm == (guest_path == "warm")
    yield sandbox
    sandbox.kill()


@pytest.fixture
def fresh() -> Iterator[Sandbox]:
    """A sandbox of the test's own, for tests that change or end the sandbox."""
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()
