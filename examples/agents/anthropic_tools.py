"""Anthropic: answer bash / code-execution tool calls from a declaw-wasm sandbox."""
import json

from declaw_wasm import Sandbox
from declaw_wasm.integrations.anthropic import PersistentShell, code_execution_result

with Sandbox.create() as sbx:
    shell = PersistentShell(sbx)  # for the bash_20250124 tool: cd/export carry over
    for tool_input in ({"command": "mkdir -p /tmp/job && cd /tmp/job && export N=7"},
                       {"command": "pwd; echo $((N * 6))"}):
        block = shell.bash_tool(tool_input, tool_use_id="toolu_1")
        print(block["content"][0]["text"], end="")  # goes back as a tool_result block
    execution = sbx.run_code("import statistics\nstatistics.mean([1, 2, 3, 4])")
    print(json.dumps(code_execution_result(execution, "srvtoolu_1"), indent=1))
