"""Routed BLAS calls exist in the warm image only (the plain module is the runtime's own, for the
cold path): these tests run on the warm path."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
