"""pydantic-ai's own conformance suite (`WorkspaceBackendSuite`) against a declaw-wasm sandbox,
and an `Agent` using the `DeclawWasmWorkspace` capability with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

pytest.importorskip("pydantic_ai.workspaces", reason="pip install 'declaw-wasm[pydantic-ai]'")

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, ModelResponsePart, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceBackend, WorkspaceRef
from pydantic_ai.workspaces.conformance import WorkspaceBackendSuite

from declaw_wasm.integrations.pydantic_ai import (
    DeclawWasmCodeMode,
    DeclawWasmWorkspace,
    DeclawWasmWorkspaceBackend,
)

pytestmark = [pytest.mark.guest, pytest.mark.anyio]  # every test here starts guests (tests/conftest.py)


@pytest.mark.guest
class TestDeclawWasmWorkspaceBackend(WorkspaceBackendSuite):
    @pytest.fixture
    async def backend(self) -> AsyncIterator[WorkspaceBackend]:
        backend = DeclawWasmWorkspaceBackend(timeout=600)
        yield backend
        if backend.ref is not None:
            await backend.destroy()

    @pytest.fixture
    def fresh_backend(self) -> Callable[[], WorkspaceBackend]:
        return lambda: DeclawWasmWorkspaceBackend(timeout=120)

    @pytest.fixture
    def attach_backend(self) -> Callable[[WorkspaceRef], WorkspaceBackend]:
        return lambda ref: DeclawWasmWorkspaceBackend(ref)

    @pytest.fixture
    def destroy_environment(self) -> Callable[[WorkspaceBackend], Awaitable[None]]:
        async def destroy(backend: WorkspaceBackend) -> None:
            assert isinstance(backend, DeclawWasmWorkspaceBackend)
            await backend.destroy()
        return destroy

    @pytest.fixture
    def filesystem_honors_shell_permissions(self) -> bool:
        return False  # WASI keeps no permission bits: `chmod 000` cannot make a file unreadable


@pytest.mark.guest
async def test_agent_uses_the_capability_and_continues_by_ref() -> None:
    script: list[list[ModelResponsePart]]
    script = [[ToolCallPart("execute", {"command": "echo kept > note.txt; python3 -c 'print(6*7)'"})],
              [TextPart("first done")],
              [ToolCallPart("execute", {"command": "cat note.txt"})],
              [TextPart("second done")]]
    seen: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=script.pop(0))

    agent = Agent(FunctionModel(model), capabilities=[DeclawWasmWorkspace(timeout=120)])

    @agent.tool
    async def execute(ctx: RunContext[None], command: str) -> str:
        result = await ctx.workspace.run(command, shell=True, timeout=30)
        seen.append(result.stdout)
        return result.stdout

    first = await agent.run("go")
    ref = first.all_messages()[-1].workspace_ref  # type: ignore[union-attr]
    assert ref is not None and ref.provider == "declaw-wasm"
    second = await agent.run("again", message_history=first.all_messages())
    assert second.output == "second done"
    assert seen == ["42\n", "kept\n"]  # the second run continued in the same sandbox
    await DeclawWasmWorkspaceBackend(ref).destroy()



@pytest.mark.guest
async def test_code_mode_folds_the_tools_into_run_code() -> None:
    """`DeclawWasmCodeMode`: the model sees one `run_code` tool listing the agent's tools as
    Python functions; its code calls them (awaited at once with gather) on the host, through
    pydantic-ai's own validation; a failing cell comes back to the model as a retry."""
    code = ("import asyncio\n"
            "paris, tokyo = await asyncio.gather(weather(city='Paris'), weather(city='Tokyo'))\n"
            "{c['city']: round((c['temp_f'] - 32) * 5 / 9, 1) for c in (paris, tokyo)}")
    script: list[list[ModelResponsePart]]
    script = [[ToolCallPart("run_code", {"code": "weather(city=3)"})],  # fails validation
              [ToolCallPart("run_code", {"code": code})],
              [TextPart("done")]]
    seen: list[Any] = []
    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        seen.append(messages[-1].parts[-1])
        return ModelResponse(parts=script.pop(0))

    mode = DeclawWasmCodeMode()
    agent = Agent(FunctionModel(model), capabilities=[mode])
    calls: list[str] = []

    @agent.tool_plain
    def weather(city: str) -> dict[str, Any]:
        """The weather in a city."""
        calls.append(city)
        return {"city": city, "temp_f": 72 if city == "Paris" else 59}

    try:
        result = await agent.run("weather in Paris and Tokyo, Celsius")
    finally:
        await mode.destroy()
    assert result.output == "done"
    assert offered[0] == ["run_code"]
    assert sorted(calls) == ["Paris", "Tokyo"]  # ran here, on the host
    retry, answer = seen[1], seen[2]
    assert getattr(retry, "outcome", None) == "retried"  # the model is asked to fix its code
    assert "1 validation error for weather" in str(retry.content) and "city" in str(retry.content)
    assert "{'Paris': 22.2, 'Tokyo': 15.0}" in str(answer.content)


@pytest.mark.guest
async def test_sandbox_options_reach_a_new_sandbox() -> None:
    """The capability's declaw options (`network` here) go to `AsyncSandbox.create`."""
    capability = DeclawWasmWorkspace(network={"deny_out": ["0.0.0.0/0"]}, timeout=120)
    backend = capability.get_workspace(None, ref=None)
    assert isinstance(backend, DeclawWasmWorkspaceBackend)
    try:
        info = await (await backend.sandbox()).get_info()
        assert info.network == {"deny_out": ["0.0.0.0/0"]}
    finally:
        await backend.destroy()
