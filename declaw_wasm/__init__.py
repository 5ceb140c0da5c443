"""declaw-wasm: run LLM-generated Python in-process, in a Wasmtime sandbox, with E2B's API.

    from declaw_wasm import Sandbox
    with Sandbox.create() as sbx:
        sbx.files.write("/tmp/x.py", "print(6 * 7)")
        print(sbx.commands.run("python3 /tmp/x.py").stdout)

Names are imported when first used (a module `__getattr__`): `import declaw_wasm` costs
nothing, and a serverless function that only creates sandboxes never imports the server, the
template builder or the async face.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_WHERE = {
    "AsyncSandbox": "async_sandbox",
    "Sandbox": "sandbox", "SandboxPaginator": "sandbox",
    "Limits": "limits",
    "FileStream": "files",
    "Template": "templates", "TemplateInfo": "templates", "list_templates": "templates",
    "delete_template": "templates",
    "CommandHandle": "commands",
    "Context": "execution", "Execution": "execution", "ExecutionError": "execution", "Logs": "execution",
    "OutputMessage": "execution", "Result": "execution",
    **{name: "models" for name in ("CommandResult", "EntryInfo", "FileType", "ProcessInfo", "PtySize",
                                   "SandboxInfo", "SandboxState", "WriteEntry", "WriteInfo")},
    **{name: "exceptions" for name in (
        "AuthenticationException", "FileNotFoundException", "InvalidArgumentException",
        "NotEnoughSpaceException", "NotFoundException", "RateLimitException", "SandboxException",
        "SandboxNotFoundException", "TemplateException", "TimeoutException")},
}

__all__ = [
    "AsyncSandbox", "Sandbox", "SandboxPaginator", "Limits", "FileStream",
    "Template", "TemplateInfo", "list_templates", "delete_template",
    "CommandHandle", "ProcessInfo", "PtySize",
    "Context", "Execution", "ExecutionError", "Logs", "OutputMessage", "Result",
    "CommandResult", "EntryInfo", "FileType", "SandboxInfo", "SandboxState", "WriteEntry",
    "WriteInfo", "AuthenticationException", "FileNotFoundException", "InvalidArgumentException",
    "NotEnoughSpaceException", "NotFoundException", "RateLimitException", "SandboxException",
    "SandboxNotFoundException", "TemplateException", "TimeoutException",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'declaw_wasm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


if TYPE_CHECKING:
    from .async_sandbox import AsyncSandbox
    from .commands import CommandHandle
    from .exceptions import (AuthenticationException, FileNotFoundException, InvalidArgumentException,
                             NotEnoughSpaceException, NotFoundException, RateLimitException,
                             SandboxException, SandboxNotFoundException, TemplateException,
                             TimeoutException)
    from .execution import Context, Execution, ExecutionError, Logs, OutputMessage, Result
    from .files import FileStream
    from .limits import Limits
    from .models import (CommandResult, EntryInfo, FileType, ProcessInfo, PtySize, SandboxInfo,
                         SandboxState, WriteEntry, WriteInfo)
    from .sandbox import Sandbox, SandboxPaginator
    from .templates import Template, TemplateInfo, delete_template, list_templates
