"""The door fuzzer runs once, on the warm image path (its sandboxes say so themselves): the
cold path answers the door with the same host code."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
