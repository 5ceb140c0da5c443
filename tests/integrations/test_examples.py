"""Each `examples/agents/` program runs offline (scripted models) and prints its answer."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
CASES = {  # example -> (module it needs, text its output must contain)
    "openai_agents_sandbox.py": ("agents.sandbox", "The sum is 5050."),
    "smolagents_executor.py": ("smolagents", "2 hot readings, max 95.0 F"),
    "pydantic_ai_workspace.py": ("pydantic_ai.workspaces", "t.csv has 2 lines."),
    "deepagents_backend.py": ("deepagents.backends.sandbox", "hello, sandbox"),
    "mcp_client.py": ("mcp", "3628800"),
    "anthropic_tools.py": ("declaw_wasm", "/tmp/job\n42\n"),
    "code_mode.py": ("declaw_wasm", "3 products, total 23.75\n4 tool calls audited: tool:search, "),
    # needs an api.openai.com: tests/egress/test_llm_clients.py runs it against the local one
    "agent_in_sandbox.py": ("declaw_wasm", ""),
}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(CASES)
    for path in EXAMPLES.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 40, path.name


@pytest.mark.guest
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name: str) -> None:
    module, expected = CASES[name]
    if not expected:
        pytest.skip("run with the egress tests' local upstreams (tests/egress/test_llm_clients.py)")
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        pytest.skip(f"{module} is not installed (pip install 'declaw-wasm[integrations]')")
    run = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True,
                         timeout=180, env={**os.environ}, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    assert expected in run.stdout, run.stdout[-3000:]
