"""declaw-wasm: run LLM-generated Python in-process, in a Wasmtime sandbox, with E2B's API.

    from declaw_wasm import Sandbox
    with Sandbox.create() as sbx:
        sbx.files.write("/tmp/x.py", "print(6 * 7)")
        print(sbx.commands.run("python3 /tmp/x.py").stdout)
"""

from .async_sandbox import AsyncSandbox
from .exceptions import (AuthenticationException, FileNotFoundException, InvalidArgumentException,
                         NotEnoughSpaceException, NotFoundException, RateLimitException,
                         SandboxException, SandboxNotFoundException, TemplateException,
                         TimeoutException)
from .commands import CommandHandle
from .execution import Context, Execution, ExecutionError, Logs, OutputMessage, Result
from .files import FileStream
from .limits import Limits
from .models import (CommandResult, EntryInfo, FileType, ProcessInfo, PtySize, SandboxInfo,
                     SandboxState, WriteEntry, WriteInfo)
from .sandbox import Sandbox, SandboxPaginator
from .templates import Template, TemplateInfo, delete_template, list_templates
from ._egress import (ALL_TRAFFIC, AuditEvent, Secret, Vault, VaultClient, VaultPreset, VaultScope,
                      VaultSecret)

__version__ = "0.1.0"

__all__ = [
    "AsyncSandbox", "Sandbox", "SandboxPaginator", "Limits", "FileStream",
    "Template", "TemplateInfo", "list_templates", "delete_template",
    "CommandHandle", "ProcessInfo", "PtySize",
    "Context", "Execution", "ExecutionError", "Logs", "OutputMessage", "Result",
    "CommandResult", "EntryInfo", "FileType", "SandboxInfo", "SandboxState", "WriteEntry",
    "WriteInfo", "AuthenticationException", "FileNotFoundException", "InvalidArgumentException",
    "NotEnoughSpaceException", "NotFoundException", "RateLimitException", "SandboxException",
    "SandboxNotFoundException", "TemplateException", "TimeoutException",
    "ALL_TRAFFIC", "AuditEvent", "Secret", "Vault", "VaultClient", "VaultPreset", "VaultScope",
    "VaultSecret",
]
