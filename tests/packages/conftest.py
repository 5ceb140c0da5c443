"""Package installs and template builds: host code (pip, the wheel cache, installer) plus the
guest's pip; they run on the warm path only (the cold path starts guests the same way,
tests/test_bundle.py covers it)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
