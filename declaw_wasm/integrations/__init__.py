"""Agent-framework adapters and the MCP server, each in its own module over the public API.

Nothing here is imported by `declaw_wasm` itself, and each module imports its framework when it
is imported, so the core install never needs them. Install the extra a module names:

| module | extra | what it gives |
|---|---|---|
| `declaw_wasm.integrations.openai_agents` | `declaw-wasm[openai-agents]` | `DeclawWasmSandboxClient` |
| `declaw_wasm.integrations.smolagents` | `declaw-wasm[smolagents]` | `DeclawWasmExecutor` |
| `declaw_wasm.integrations.pydantic_ai` | `declaw-wasm[pydantic-ai]` | `DeclawWasmWorkspace` |
| `declaw_wasm.integrations.deepagents` | `declaw-wasm[deepagents]` | `DeclawWasmSandbox` |
| `declaw_wasm.integrations.mcp` | `declaw-wasm[mcp]` | `declaw-wasm mcp` |
| `declaw_wasm.integrations.anthropic` | none | content blocks and a persistent shell |

The adapters use only what `from declaw_wasm import Sandbox, AsyncSandbox` offers (files,
commands, pty, run_code, contexts), so they work in-process and in remote mode alike.
"""
