"""smolagents executor: `DeclawWasmExecutor`, a `RemotePythonExecutor` over `Sandbox.run_code`.

    from smolagents import CodeAgent
    from declaw_wasm.integrations.smolagents import DeclawWasmExecutor

    agent = CodeAgent(tools=[...], model=..., executor=DeclawWasmExecutor([], logger))

The agent's code steps run as cells of one stateful context (variables carry over, as in
smolagents' E2B executor). Its tools (and managed agents) stay on the host: each is a host tool
of the steps' cells (`run_code(tools=)`, declaw_tools), bound to its name in the context, so
the code calls `web_search(query=...)` as usual while the tool runs here, with this process's
network, credentials and packages (`host_tools=False`: smolagents' own `send_tools`, which
re-creates each tool from its source inside the sandbox). `final_answer` always runs in the
sandbox, where it ends a step with smolagents' `FinalAnswerException`, which `run_code` reports
as the cell's error. A step's output is its last expression's value, or, when
it has none, its last image or chart (so `plt.show()` comes back as a `PIL.Image`).
`install_packages` runs the sandbox's own `pip install` (pure-Python wheels, resolved by the
host); names the sandbox already imports are skipped.
"""

from __future__ import annotations

import base64
import io
import json
import shlex
from typing import Any

from .. import Execution, Result, Sandbox, SandboxException, TimeoutException
from ._common import missing_extra

try:
    from smolagents.local_python_executor import CodeOutput
    from smolagents.monitoring import LogLevel
    from smolagents.remote_executors import RemotePythonExecutor
    from smolagents.utils import AgentError
except ImportError as exc:  # the framework is an optional extra
    raise missing_extra("smolagents") from exc

# smolagents' import names that differ from their distributions' names.
_DISTRIBUTIONS = {"PIL": "pillow", "sklearn": "scikit-learn", "bs4": "beautifulsoup4",
                  "yaml": "pyyaml", "dateutil": "python-dateutil", "docx": "python-docx"}


class DeclawWasmExecutor(RemotePythonExecutor):
    """Runs a smolagents `CodeAgent`'s code in a declaw-wasm sandbox.

    Args:
        additional_imports: modules the agent may import; the missing ones are pip-installed.
        logger: smolagents' `AgentLogger`.
        allow_pickle: smolagents' switch for pickled final answers (off: JSON only).
        sandbox: an existing `Sandbox` to use (not killed by `cleanup`); else one is made with
            `template`, `timeout` and `create_kwargs` (any `Sandbox.create` keyword: `security`,
            `network`, `volumes`, `secrets`, `envs`, `backend`...).
        code_timeout: seconds one code step may run, tool calls included (a longer one raises
            `AgentError`).
        host_tools: call the agent's tools on the host (default); False sends their source
            into the sandbox, as smolagents' other remote executors do.
    """

    def __init__(self, additional_imports: list[str], logger: Any, allow_pickle: bool = False,
                 *, sandbox: Sandbox | None = None, template: str | None = None,
                 timeout: float = 600, code_timeout: float = 120, host_tools: bool = True,
                 **create_kwargs: Any) -> None:
        super().__init__(additional_imports, logger, allow_pickle)
        self._owns_sandbox = sandbox is None
        self.sandbox = sandbox or Sandbox.create(template=template, timeout=timeout,
                                                 **create_kwargs)
        self.code_timeout = code_timeout
        self.host_tools = host_tools
        self.tools: dict[str, Any] = {}  # the host tools every step's cell gets
        self.installed_packages = self.install_packages(additional_imports)
        self.logger.log("declaw-wasm sandbox is running", level=LogLevel.INFO)

    def send_tools(self, tools: dict[str, Any]) -> None:
        """Make the agent's tools callable from its code: `final_answer` as source in the sandbox
        (smolagents' way), the others as host tools bound to their names in the context."""
        if not self.host_tools:
            super().send_tools(tools)
            return
        inside = {name: tool for name, tool in tools.items() if name == "final_answer"}
        if inside:
            super().send_tools(inside)
        self.tools = {name: _host_tool(tool) for name, tool in tools.items() if name not in inside}
        if self.tools:
            self.run_code_raise_errors(f"from declaw_tools import {', '.join(self.tools)}")

    def run_code_raise_errors(self, code: str) -> CodeOutput:
        try:
            execution = self.sandbox.run_code(code, timeout=self.code_timeout, tools=self.tools or None)
        except TimeoutException as exc:
            raise AgentError(f"Code execution timed out after {self.code_timeout:g}s: {exc}",
                             self.logger) from exc
        except SandboxException as exc:
            raise AgentError(f"The sandbox failed: {exc}", self.logger) from exc
        logs = "".join(execution.logs.stdout)
        error = execution.error
        if error is not None:
            if error.name == RemotePythonExecutor.FINAL_ANSWER_EXCEPTION:
                value = self._deserialize_final_answer(error.value, self.allow_pickle)
                return CodeOutput(output=value, logs=logs, is_final_answer=True)
            raise AgentError(f"{logs}\nExecuting code yielded an error:\n{error.name}\n"
                             f"{error.value}\n{error.traceback}", self.logger)
        return CodeOutput(output=step_output(execution), logs=logs, is_final_answer=False)

    def install_packages(self, additional_imports: list[str]) -> list[str]:
        """pip-install what the sandbox cannot import yet; returns the names asked for."""
        modules = sorted({name.split(".")[0] for name in additional_imports
                          if name.split(".")[0] not in ("", "*")})
        if not modules:
            return additional_imports
        probe = self.sandbox.run_code(
            "import importlib.util, json\n"
            f"json.dumps([m for m in {modules!r} if importlib.util.find_spec(m) is None])")
        missing = json.loads(probe.text or "[]") if probe.error is None else modules
        if missing:
            names = [_DISTRIBUTIONS.get(m, m) for m in missing]
            result = self.sandbox.commands.run(f"pip install {shlex.join(names)}", timeout=300)
            self.logger.log(result.stdout + result.stderr, level=LogLevel.INFO)
            if result.exit_code != 0:
                raise AgentError(f"pip install {' '.join(names)} failed in the sandbox:\n"
                                 f"{result.stderr or result.stdout}", self.logger)
            # The context's import system cached "not found" for the probe above (and the
            # site-packages folder may be new): make it look again.
            self.sandbox.run_code("import importlib as _il; _il.invalidate_caches(); del _il")
        return additional_imports

    def cleanup(self) -> None:
        """Kill the sandbox (unless it was handed in)."""
        if self._owns_sandbox and getattr(self, "sandbox", None) is not None:
            try:
                self.sandbox.kill()
            except SandboxException as exc:
                self.logger.log_error(f"Error killing the sandbox: {exc}")
        self._owns_sandbox = False


def _host_tool(tool: Any) -> Any:
    """A smolagents tool (or managed agent) as a host tool: called as the local executor calls
    it, its agent-typed output (`AgentText`, ...) as the raw value."""
    def call(*args: Any, **kwargs: Any) -> Any:
        value = tool(*args, **kwargs)
        to_raw = getattr(value, "to_raw", None)
        return to_raw() if callable(to_raw) and not isinstance(value, (str, bytes)) else value

    call.__name__ = str(getattr(tool, "name", None) or getattr(tool, "__name__", "tool"))
    call.__doc__ = getattr(tool, "description", None) or getattr(tool, "__doc__", None)
    return call


def step_output(execution: Execution) -> Any:
    """What a code step returns: the main result's richest format, else the last display's
    image (a `PIL.Image`), else None."""
    main = next((r for r in execution.results if r.is_main_result), None)
    if main is not None:
        return _result_value(main)
    for result in reversed(execution.results):
        image = _image(result)
        if image is not None:
            return image
    return None


def _image(result: Result) -> Any:
    data = result.png or result.jpeg
    if data is None:
        return None
    import PIL.Image

    return PIL.Image.open(io.BytesIO(base64.b64decode(data)))


def _result_value(result: Result) -> Any:
    image = _image(result)
    if image is not None:
        return image
    for name in ("chart", "data", "html", "javascript", "json", "latex", "markdown", "pdf",
                 "svg", "text"):
        value = getattr(result, name, None)
        if value is not None:
            return value
    return None


__all__ = ["DeclawWasmExecutor", "step_output"]
