"""Anthropic helpers: sandbox results as the content blocks Anthropic's tools return, and a
shell session whose `cd` and `export` carry over between calls.

No dependency on the `anthropic` package: the blocks are plain dicts with the field names and
literals of its `*BlockParam` types (anthropic 2.x), ready to put in a `messages` list.

- `code_execution_result(execution_or_result, tool_use_id)`: a `code_execution_tool_result`
  block (stdout, stderr, return_code), or its `code_execution_tool_result_error`.
- `bash_code_execution_result(result, tool_use_id)`: a `bash_code_execution_tool_result` block.
- `tool_result(execution_or_result, tool_use_id)`: a client tool's `tool_result` (text, plus an
  `image` block per chart/PNG of a cell), for your own tools or the `bash_20250124` tool.
- `PersistentShell(sandbox)`: what the bash tool expects of a shell (state carries over).

Why the persistent shell tracks state rather than keeping a PTY open: the blocks above carry
stdout, stderr and the exit code *separately*, and a terminal merges the two streams, echoes
input, rewrites newlines and gives no exit code without in-band sentinels that a command's own
output can forge. Instead each call is an ordinary `commands.run` (separate streams, exact exit
code, the sandbox's own timeout), started in the tracked working directory with the tracked
environment; after the command the same shell writes its `cwd` and exported environment as JSON
to a file that we read through the files API (never parsed from output). What does not carry
over: unexported variables, functions, aliases and background jobs (a PTY would keep them, at
the costs above); a command that calls `exit` keeps the previous state.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from typing import Any

from .. import CommandResult, Execution, Sandbox, SandboxException, TimeoutException

MAX_STATE_BYTES = 1 << 20
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STATE_SCRIPT = ("import json, os, sys; sys.stdout.write(json.dumps("
                 "{'cwd': os.getcwd(), 'env': dict(os.environ)}))")


def _streams(source: Execution | CommandResult) -> tuple[str, str, int]:
    """stdout, stderr and a return code for either kind of result. A cell's last value is
    shown after its output, as a REPL would; its error goes to stderr with return code 1."""
    if isinstance(source, CommandResult):
        return source.stdout, source.stderr, source.exit_code
    stdout = "".join(source.logs.stdout)
    stderr = "".join(source.logs.stderr)
    main = next((r for r in source.results if r.is_main_result and r.text is not None), None)
    if main is not None:
        stdout += ("" if not stdout or stdout.endswith("\n") else "\n") + f"{main.text}\n"
    if source.error is not None:
        stderr += source.error.traceback or f"{source.error.name}: {source.error.value}\n"
    return stdout, stderr, 1 if source.error is not None else 0


def code_execution_result(source: Execution | CommandResult | BaseException, tool_use_id: str,
                          *, file_ids: list[str] | None = None) -> dict[str, Any]:
    """A `code_execution_tool_result` block; a TimeoutException becomes the
    `execution_time_exceeded` error block, any other exception `unavailable`."""
    if isinstance(source, BaseException):
        code = "execution_time_exceeded" if isinstance(source, TimeoutException) else "unavailable"
        content: dict[str, Any] = {"type": "code_execution_tool_result_error", "error_code": code}
    else:
        stdout, stderr, code_ = _streams(source)
        content = {"type": "code_execution_result", "stdout": stdout, "stderr": stderr,
                   "return_code": code_,
                   "content": [{"type": "code_execution_output", "file_id": f}
                               for f in file_ids or []]}
    return {"type": "code_execution_tool_result", "tool_use_id": tool_use_id, "content": content}


def bash_code_execution_result(source: CommandResult | BaseException, tool_use_id: str,
                               *, file_ids: list[str] | None = None) -> dict[str, Any]:
    """A `bash_code_execution_tool_result` block (the 2025-08-25 code-execution tool's bash)."""
    if isinstance(source, BaseException):
        code = "execution_time_exceeded" if isinstance(source, TimeoutException) else "unavailable"
        content: dict[str, Any] = {"type": "bash_code_execution_tool_result_error",
                                   "error_code": code}
    else:
        content = {"type": "bash_code_execution_result", "stdout": source.stdout,
                   "stderr": source.stderr, "return_code": source.exit_code,
                   "content": [{"type": "bash_code_execution_output", "file_id": f}
                               for f in file_ids or []]}
    return {"type": "bash_code_execution_tool_result", "tool_use_id": tool_use_id,
            "content": content}


def tool_result(source: Execution | CommandResult | BaseException, tool_use_id: str
                ) -> dict[str, Any]:
    """A client tool's `tool_result` block: the output as text (a non-zero exit code noted
    after it), then an `image` block per PNG/JPEG a cell displayed. `is_error` is set when the
    code raised or the call failed (a timeout, a dead sandbox), not for a non-zero exit."""
    if isinstance(source, BaseException):
        return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True,
                "content": [{"type": "text", "text": f"{type(source).__name__}: {source}"}]}
    stdout, stderr, code = _streams(source)
    text = stdout + stderr
    if isinstance(source, CommandResult) and code != 0:
        text += ("" if not text or text.endswith("\n") else "\n") + f"[exit code {code}]"
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text or "(no output)"}]
    if isinstance(source, Execution):
        for result in source.results:
            data, media = (result.png, "image/png") if result.png else (result.jpeg, "image/jpeg")
            if data:
                blocks.append({"type": "image", "source": {"type": "base64", "media_type": media,
                                                           "data": data}})
    is_error = isinstance(source, Execution) and source.error is not None
    return {"type": "tool_result", "tool_use_id": tool_use_id, "content": blocks,
            "is_error": is_error}


class PersistentShell:
    """A bash-tool session on a sandbox: `cd` and `export` carry over between `run` calls.

        shell = PersistentShell(sbx)
        shell.run("cd /tmp && export MODE=fast")
        shell.run("pwd; echo $MODE").stdout  # "/tmp\\nfast\\n"
    """

    def __init__(self, sandbox: Sandbox, *, cwd: str = "/home/user",
                 envs: dict[str, str] | None = None) -> None:
        self.sandbox = sandbox
        self._initial = (cwd, dict(envs or {}))
        self._state = f"/tmp/.declaw-shell-{secrets.token_hex(8)}.json"
        self.cwd, self.env = cwd, dict(envs or {})

    def run(self, command: str, timeout: float | None = 60) -> CommandResult:
        """Run a command line in the session's directory and environment, then remember where
        it left them. Raises TimeoutException as `commands.run` does (state unchanged)."""
        line = (f"{command}\n__declaw_status=$?\n"
                f"python3 -c {shlex.quote(_STATE_SCRIPT)} > {self._state}\n"
                f"exit $__declaw_status")
        result = self.sandbox.commands.run(line, cwd=self.cwd, envs=self.env or None,
                                           timeout=timeout)
        try:
            # The file is the guest's to write: bounded, and only well-formed state is taken.
            if self.sandbox.files.get_info(self._state).size > MAX_STATE_BYTES:
                raise ValueError("state too large")
            state = json.loads(self.sandbox.files.read(self._state))
        except (SandboxException, ValueError):
            return result  # the command ended the shell (`exit`): keep the previous state
        finally:
            self.sandbox.files.remove(self._state)
        if isinstance(state, dict) and isinstance(state.get("cwd"), str) and \
                isinstance(state.get("env"), dict):
            self.cwd = state["cwd"]
            self.env = {k: v for k, v in state["env"].items()
                        if isinstance(k, str) and isinstance(v, str) and _ENV_NAME.fullmatch(k)
                        and "\x00" not in v and k != "PWD"}
        return result

    def restart(self) -> None:
        """Back to the starting directory and environment (the bash tool's `restart`)."""
        self.cwd, self.env = self._initial[0], dict(self._initial[1])

    def bash_tool(self, tool_input: dict[str, Any], tool_use_id: str) -> dict[str, Any]:
        """Answer one `bash_20250124` tool_use (`{"command": ...}` or `{"restart": true}`)
        with its `tool_result` block."""
        if tool_input.get("restart"):
            self.restart()
            return {"type": "tool_result", "tool_use_id": tool_use_id,
                    "content": [{"type": "text", "text": "tool has been restarted."}],
                    "is_error": False}
        command = tool_input.get("command")
        if not isinstance(command, str) or not command.strip():
            return tool_result(ValueError("no command given"), tool_use_id)
        try:
            return tool_result(self.run(command), tool_use_id)
        except SandboxException as exc:
            return tool_result(exc, tool_use_id)


__all__ = ["PersistentShell", "bash_code_execution_result", "code_execution_result",
           "tool_result"]
