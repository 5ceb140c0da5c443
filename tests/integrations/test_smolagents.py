"""smolagents' CodeAgent with `DeclawWasmExecutor`: a scripted model (no LLM) drives a
multi-step task with a tool sent into the sandbox, variables passed in, a chart coming back as a
PIL image, and a final answer."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("smolagents", reason="pip install 'declaw-wasm[smolagents]'")

import PIL.Image
from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import AgentLogger, LogLevel, TokenUsage
from smolagents.utils import AgentError

from declaw_wasm import Sandbox
from declaw_wasm.integrations.smolagents import DeclawWasmExecutor

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


class ScriptedModel(Model):
    def __init__(self, replies: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.replies = list(replies)

    def generate(self, messages: Any, stop_sequences: Any = None, response_format: Any = None,
                 tools_to_call_from: Any = None, **kwargs: Any) -> ChatMessage:
        return ChatMessage(role=MessageRole.ASSISTANT, content=self.replies.pop(0),
                           token_usage=TokenUsage(input_tokens=0, output_tokens=0))


@tool
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature.

    Args:
        celsius: degrees Celsius
    """
    return celsius * 9 / 5 + 32


def _step(code: str) -> str:
    return f"Thought: next.\n<code>\n{code}\n</code>"


def test_code_agent_runs_a_multi_step_task_in_the_sandbox() -> None:
    model = ScriptedModel([
        _step("temps = [celsius_to_fahrenheit(c) for c in readings]\nprint(temps)"),
        _step("import matplotlib.pyplot as plt\nplt.plot(readings, temps)\n"
              "plt.title('conversion')\nplt.show()"),
        _step("import sys\nfinal_answer({'max_f': max(temps), 'where': sys.platform})"),
    ])
    logger = AgentLogger(level=LogLevel.OFF)
    executor = DeclawWasmExecutor([], logger)
    agent = CodeAgent(tools=[celsius_to_fahrenheit], model=model, executor=executor,
                      additional_authorized_imports=["matplotlib.pyplot"], max_steps=5)
    try:
        answer = agent.run("Convert the readings and plot them.",
                           additional_args={"readings": [0, 37.5, 100]})
        assert answer == {"max_f": 212.0, "where": "wasi"}  # ran in the guest, not here
        steps = [s for s in agent.memory.steps if getattr(s, "code_action", None)]
        assert "[32.0, 99.5, 212.0]" in steps[0].observations
        chart = steps[1].action_output if hasattr(steps[1], "action_output") else None
        assert isinstance(chart, PIL.Image.Image) and chart.size[0] > 100
    finally:
        agent.cleanup()
    assert executor.sandbox.sandbox_id not in {i.sandbox_id for i in Sandbox.list().next_items()}


def test_errors_are_agent_errors_and_state_carries_over() -> None:
    sbx = Sandbox.create()
    try:
        executor = DeclawWasmExecutor([], AgentLogger(level=LogLevel.OFF), sandbox=sbx)
        assert executor.run_code_raise_errors("x = 40").output is None
        assert executor.run_code_raise_errors("x + 2").output == "42"
        with pytest.raises(AgentError, match="ZeroDivisionError"):
            executor.run_code_raise_errors("1 / 0")
        image = executor.run_code_raise_errors(
            "from PIL import Image\nImage.new('RGB', (8, 4))").output
        assert isinstance(image, PIL.Image.Image) and image.size == (8, 4)
        executor.cleanup()  # a sandbox handed in is not ours to kill
        assert sbx.is_running()
    finally:
        sbx.kill()


def test_install_packages_uses_pip_in_the_sandbox(tmp_path: Any, monkeypatch: Any) -> None:
    """A module the sandbox lacks is pip-installed there (from a local wheelhouse: no index)."""
    import zipfile

    wheel = tmp_path / "declawprobe-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("declawprobe/__init__.py", "VALUE = 7\n")
        z.writestr("declawprobe-1.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: declawprobe\nVersion: 1.0\n")
        z.writestr("declawprobe-1.0.dist-info/WHEEL",
                   "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("declawprobe-1.0.dist-info/RECORD", "")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(tmp_path))
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    executor = DeclawWasmExecutor(["declawprobe", "numpy.*"], AgentLogger(level=LogLevel.OFF))
    try:
        assert executor.run_code_raise_errors("import declawprobe\ndeclawprobe.VALUE").output == "7"
    finally:
        executor.cleanup()


def test_tools_run_on_the_host_and_count_against_the_step() -> None:
    """The agent's tools are host tools: called from the step's code, they run in this process
    (here: they see this process's pid and record their calls); `final_answer` still ends the
    step inside the sandbox. With `host_tools=False` they are sent as source instead."""
    import os

    calls: list[str] = []

    @tool
    def lookup(key: str) -> str:
        """Look a key up in the host's table.

        Args:
            key: the key
        """
        calls.append(key)
        return f"{key}={os.getpid()}"

    model = ScriptedModel([
        _step("import asyncio\nfound = [lookup(k) for k in ('a', 'b')]\nprint(found)"),
        _step("final_answer(found)"),
    ])
    executor = DeclawWasmExecutor([], AgentLogger(level=LogLevel.OFF))
    agent = CodeAgent(tools=[lookup], model=model, executor=executor, max_steps=3)
    try:
        assert agent.run("look up a and b") == [f"a={os.getpid()}", f"b={os.getpid()}"]
        assert calls == ["a", "b"]
        assert [e.url for e in executor.sandbox.audit_events() if e.kind == "tool"] == ["tool:lookup"] * 2
    finally:
        agent.cleanup()

    source = DeclawWasmExecutor([], AgentLogger(level=LogLevel.OFF), host_tools=False)
    try:
        source.send_tools({"celsius_to_fahrenheit": celsius_to_fahrenheit})
        assert source.run_code_raise_errors("celsius_to_fahrenheit(100)").output == "212.0"
        assert source.tools == {}  # nothing lent: the tool's source runs in the sandbox
    finally:
        source.cleanup()
