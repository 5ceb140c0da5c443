"""The adapters are host code over the public API: one guest path (warm) is enough here, and
the async tests run on anyio's asyncio backend."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
