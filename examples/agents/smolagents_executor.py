"""smolagents: a CodeAgent whose code steps run in declaw-wasm (scripted model: offline)."""
from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model
from smolagents.monitoring import AgentLogger, LogLevel, TokenUsage

from declaw_wasm.integrations.smolagents import DeclawWasmExecutor


@tool
def fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit.

    Args:
        celsius: degrees Celsius
    """
    return celsius * 9 / 5 + 32


class Scripted(Model):  # replace with a real model, e.g. InferenceClientModel()
    steps = iter(("<code>\nhot = [fahrenheit(c) for c in readings if c > 30]\nprint(hot)\n</code>",
                  "<code>\nfinal_answer(f'{len(hot)} hot readings, max {max(hot)} F')\n</code>"))

    def generate(self, messages, stop_sequences=None, **kwargs):
        return ChatMessage(role=MessageRole.ASSISTANT, content=next(self.steps),
                           token_usage=TokenUsage(input_tokens=0, output_tokens=0))


logger = AgentLogger(level=LogLevel.OFF)
agent = CodeAgent(tools=[fahrenheit], model=Scripted(model_id="scripted"), verbosity_level=0,
                  executor=DeclawWasmExecutor([], logger))
try:
    print(agent.run("How many hot readings?", additional_args={"readings": [12, 31, 35, 29]}))
finally:
    agent.cleanup()
