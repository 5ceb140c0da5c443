"""No second path out: the host's pip reaches the package index for a sandbox only if the
sandbox's policy allows the index's hosts; the wheel cache stays available offline."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from declaw_wasm import testing
from declaw_wasm import ALL_TRAFFIC

from .upstream import Upstreams

FLAGS = ("--quiet --upgrade --no-cache-dir --trusted-host pypi.org "
         "--trusted-host files.pythonhosted.org --timeout 120")


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_pip_under_a_deny_all_policy_uses_the_wheel_cache_only(make: Callable[..., Any],
                                                               up: Upstreams) -> None:
    sbx = make(template="base", network={"deny_out": [ALL_TRAFFIC]})
    got = sbx.commands.run(f"pip install {FLAGS} pytz && python3 -c 'import pytz; print(pytz.utc)'",
                           timeout=300)
    assert got.exit_code == 0, got.stderr
    assert got.stdout.strip().endswith("UTC")
    got = sbx.commands.run("pip install declaw-wasm-no-such-package==1.0", timeout=300)
    assert got.exit_code == 1
    assert "network policy does not allow pypi.org" in got.stderr and "wheel cache" in got.stderr
    pip_events = [e for e in sbx.audit_events() if e.method == "PIP"]
    assert pip_events and all(e.decision == "denied" for e in pip_events)


def test_the_policy_decides_for_the_index(make: Callable[..., Any], up: Upstreams) -> None:
    allowed = make(network={"allow_out": ["pypi.org", "*.pythonhosted.org"], "deny_out": [ALL_TRAFFIC]})
    refusal = testing.egress_of(allowed).index_refusal(["https://pypi.org/simple"], lambda: False)
    assert refusal is None
    denied = make(network={"allow_out": ["api.openai.com"]})
    refusal = testing.egress_of(denied).index_refusal(["https://pypi.org/simple", "file:///opt/local"],
                                                lambda: False)
    assert refusal is not None and "pypi.org" in refusal
    offline = make(allow_internet_access=False)
    assert testing.egress_of(offline).index_refusal(["file:///opt/local/simple"], lambda: False) is None
