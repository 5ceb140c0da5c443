"""The hostile-input corpus runs once, on the default (warm snapshot) path: the cold path runs
the same host code and the same guest code, a second slower per case.

`box` is one sandbox per test module, for cases that cannot damage it; destructive cases take
`fresh` (tests/conftest.py), a sandbox of their own.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from declaw_wasm import testing
from declaw_wasm import Sandbox


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"


@pytest.fixture(scope="module")
def box(guest_path: str) -> Iterator[Sandbox]:
    """A sandbox shared by one module's cases that only add files under their own names."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DECLAW_WASM_SNAPSHOT", "1")
        sandbox = Sandbox.create(timeout=900)
    assert testing.is_warm(sandbox)
    yield sandbox
    sandbox.kill()
