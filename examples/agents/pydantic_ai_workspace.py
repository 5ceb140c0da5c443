"""pydantic-ai: an Agent whose workspace is a declaw-wasm sandbox (scripted model: offline)."""
import anyio
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from declaw_wasm.integrations.pydantic_ai import (
    DeclawWasmWorkspace,
    DeclawWasmWorkspaceBackend,
)

replies = [[ToolCallPart("shell", {"command": "echo 'a,b\n1,2' > t.csv; wc -l t.csv"})],
           [TextPart("t.csv has 2 lines.")]]
model = FunctionModel(lambda messages, info: ModelResponse(parts=replies.pop(0)))
agent = Agent(model, capabilities=[DeclawWasmWorkspace()])  # or a real model: 'openai:gpt-5'


@agent.tool
async def shell(ctx: RunContext[None], command: str) -> str:
    """Run a shell command in the workspace."""
    result = await ctx.workspace.run(command, shell=True, timeout=60)
    return f"exit {result.exit_code}\n{result.stdout}{result.stderr}"


result = agent.run_sync("Make a CSV and count its lines.")
print(result.output)
# The sandbox outlives the run: continue with message_history=result.all_messages(), or end it:
ref = result.all_messages()[-1].workspace_ref
anyio.run(DeclawWasmWorkspaceBackend(ref).destroy)
