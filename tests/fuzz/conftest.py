"""The door fuzzer runs once, on the warm snapshot path (its sandboxes say so themselves): the
cold path answers the door with the same host code."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
