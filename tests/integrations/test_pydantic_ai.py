"""pydantic-ai's own conformance suite (`WorkspaceBackendSuite`) against a declaw-wasm sandbox,
and an `Agent` using the `DeclawWasmWorkspace` capability with a scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

pytest.importorskip("pydantic_ai.workspaces", reason="pip install 'declaw-wasm[pydantic-ai]'")

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.workspaces import WorkspaceBackend, WorkspaceRef
from pydantic_ai.workspaces.conformance import WorkspaceBackendSuite

from declaw_wasm.integrations.pydantic_ai import (
    DeclawWasmWorkspace,
    DeclawWasmWorkspaceBackend,
)

pytestmark = pytest.mark.anyio


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


async def test_agent_uses_the_capability_and_continues_by_ref() -> None:
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

