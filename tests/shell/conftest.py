"""The conformance table runs on the warm path only: the cold path runs the same shell code
(tests/test_shell.py and the rest cover both paths), a second slower per line."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
