"""Fixtures: the real runtime, real sandboxes. One shared sandbox where isolation allows."""

from __future__ import annotations

from typing import Iterator

import pytest

from declaw_wasm import Sandbox


@pytest.fixture(scope="session")
def sbx() -> Iterator[Sandbox]:
    """A sandbox shared by tests that only add files under their own names."""
    sandbox = Sandbox.create(timeout=3600)
    yield sandbox
    sandbox.kill()


@pytest.fixture
def fresh() -> Iterator[Sandbox]:
    """A sandbox of the test's own, for tests that change or end the sandbox."""
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()
