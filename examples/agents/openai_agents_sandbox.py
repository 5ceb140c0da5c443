"""OpenAI Agents SDK: a SandboxAgent whose shell runs in declaw-wasm (scripted model: offline)."""
import asyncio
import json

from agents import Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.run import RunConfig
from agents.sandbox import SandboxAgent, SandboxRunConfig
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall as Call
from openai.types.responses import ResponseOutputMessage as Message
from openai.types.responses import ResponseOutputText as Text

from declaw_wasm.integrations import openai_agents as dw


class Scripted(Model):  # replace with a real model, e.g. model="gpt-5"
    turns = iter(({"cmd": "python3 -c 'print(sum(range(101)))' | tee sum.txt"}, "The sum is 5050."))

    async def get_response(self, *args, **kwargs):
        turn = next(self.turns)
        if isinstance(turn, str):
            content = [Text(text=turn, type="output_text", annotations=[])]
            item = Message(id="m", role="assistant", status="completed", type="message",
                           content=content)
        else:
            item = Call(id="f", call_id="c", type="function_call", name="exec_command",
                        arguments=json.dumps(turn), status="completed")
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


config = RunConfig(tracing_disabled=True, sandbox=SandboxRunConfig(
    client=dw.DeclawWasmSandboxClient(), options=dw.DeclawWasmSandboxClientOptions()))
result = asyncio.run(Runner.run(SandboxAgent(name="dev", model=Scripted()), "Add 1..100.",
                                run_config=config))
print(result.final_output)
