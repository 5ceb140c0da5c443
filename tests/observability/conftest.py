"""Events, journal, OpenTelemetry, metrics, webhooks and the console: what is recorded is the
host's, the same on either guest path, so these run on the warm image only."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"
