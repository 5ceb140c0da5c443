"""declaw-wasm: run LLM-generated Python in-process, in a Wasmtime sandbox, with declaw's (and
E2B's) API.

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
    **{name: "async_sandbox" for name in ("AsyncCommandHandle", "AsyncSandbox", "AsyncSandboxPaginator",
                                          "AsyncWatchHandle")},
    "Sandbox": "sandbox", "SandboxPaginator": "sandbox",
    "Limits": "limits",
    "FileStream": "files", "WatchHandle": "files",
    **{name: "templates" for name in ("Template", "TemplateBase", "TemplateInfo", "list_templates",
                                      "delete_template")},
    "CommandHandle": "commands",
    "StdioProcess": "stdio", "StdioResult": "stdio",
    **{name: "execution" for name in ("Context", "Execution", "ExecutionError", "Logs", "OutputMessage",
                                      "Result")},
    **{name: "models" for name in (
        "CommandResult", "EntryInfo", "FilesystemEvent", "FilesystemEventType", "FileType", "ProcessInfo",
        "PtySize", "SandboxInfo", "SandboxLifecycle", "SandboxMetrics", "SandboxQuery", "SandboxState",
        "Snapshot", "SnapshotInfo", "WriteEntry", "WriteInfo")},
    **{name: "exceptions" for name in (
        "AuthenticationException", "BuildException", "CommandExitException", "ConflictException",
        "FileNotFoundException", "InvalidArgumentException", "NotEnoughSpaceException",
        "NotFoundException", "RateLimitException", "SandboxError", "SandboxException",
        "SandboxNotFoundException", "SnapshotException", "TemplateException", "TimeoutException",
        "VersionMismatchException")},
    # declaw's security configs
    **{name: "security" for name in (
        "ALL_TRAFFIC", "AuditConfig", "AuditEntry", "CodeSecurityConfig", "ContentGateConfig",
        "CustomPolicyConfig", "EnvSecurityConfig", "InjectionAction", "InjectionDefenseConfig",
        "InjectionJudgeConfig", "InjectionSensitivity", "InvisibleTextConfig", "NetworkPolicy",
        "PIIConfig", "PIIHandler", "PIIType", "RedactionAction", "SandboxNetworkOpts", "SecureEnvVar",
        "SecurityPolicy", "ToxicityConfig", "TransformationRule", "TransformDirection")},
    # declaw's volumes bring the state store and fsspec along
    **{name: "volumes" for name in ("AsyncVolumes", "Volume", "VolumeAttachment", "Volumes")},
    # the network's names bring TLS and HTTP parsing
    # secrets the guest never sees, the vault, audit events (each in its public module)
    **{name: "secrets" for name in ("Secret", "Vault", "VaultEvent", "VaultPreset", "VaultScope",
                                    "VaultSecret")},
    "AuditEvent": "security.audit",
    "VaultClient": "vault",  # this process's vault, or a server's
}

__all__ = [
    "AsyncSandbox", "Sandbox", "SandboxPaginator", "AsyncSandboxPaginator", "Limits", "FileStream",
    "Template", "TemplateBase", "TemplateInfo", "list_templates", "delete_template",
    "CommandHandle", "AsyncCommandHandle", "ProcessInfo", "PtySize", "StdioProcess", "StdioResult",
    "WatchHandle", "AsyncWatchHandle", "FilesystemEvent", "FilesystemEventType",
    "Context", "Execution", "ExecutionError", "Logs", "OutputMessage", "Result",
    "CommandResult", "EntryInfo", "FileType", "SandboxInfo", "SandboxState", "SandboxQuery",
    "SandboxMetrics", "SandboxLifecycle", "Snapshot", "SnapshotInfo", "WriteEntry", "WriteInfo",
    "SandboxError", "SandboxException", "AuthenticationException", "BuildException",
    "CommandExitException", "ConflictException", "FileNotFoundException",
    "InvalidArgumentException", "NotEnoughSpaceException", "NotFoundException",
    "RateLimitException", "SandboxNotFoundException", "SnapshotException", "TemplateException",
    "TimeoutException",
    "VersionMismatchException",
    # declaw's security configs (declaw_wasm.security)
    "SecurityPolicy", "PIIConfig", "PIIType", "RedactionAction", "InjectionDefenseConfig",
    "InjectionJudgeConfig", "InjectionAction", "InjectionSensitivity", "TransformationRule",
    "TransformDirection", "NetworkPolicy", "SandboxNetworkOpts", "ALL_TRAFFIC", "AuditConfig",
    "AuditEntry", "EnvSecurityConfig", "SecureEnvVar", "ToxicityConfig", "CodeSecurityConfig",
    "InvisibleTextConfig", "ContentGateConfig", "CustomPolicyConfig", "PIIHandler",
    # declaw's volumes (declaw_wasm.volumes, imported on first use)
    "Volume", "VolumeAttachment", "Volumes", "AsyncVolumes",
    # secrets, the vault (declaw_wasm.secrets), audit events (declaw_wasm.security.audit)
    "AuditEvent", "Secret", "Vault", "VaultClient", "VaultEvent", "VaultPreset", "VaultScope", "VaultSecret",
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
    from .async_sandbox import AsyncCommandHandle, AsyncSandbox, AsyncSandboxPaginator, AsyncWatchHandle
    from .commands import CommandHandle
    from .exceptions import (AuthenticationException, BuildException, CommandExitException,
                             ConflictException, FileNotFoundException, InvalidArgumentException,
                             NotEnoughSpaceException, NotFoundException, RateLimitException,
                             SandboxError, SandboxException, SandboxNotFoundException,
                             SnapshotException, TemplateException, TimeoutException,
                             VersionMismatchException)
    from .execution import Context, Execution, ExecutionError, Logs, OutputMessage, Result
    from .files import FileStream, WatchHandle
    from .limits import Limits
    from .models import (CommandResult, EntryInfo, FilesystemEvent, FilesystemEventType, FileType,
                         ProcessInfo, PtySize, SandboxInfo, SandboxLifecycle, SandboxMetrics,
                         SandboxQuery, SandboxState, Snapshot, SnapshotInfo, WriteEntry, WriteInfo)
    from .sandbox import Sandbox, SandboxPaginator
    from .secrets import Secret, Vault, VaultEvent, VaultPreset, VaultScope, VaultSecret
    from .security.audit import AuditEvent
    from .security import (ALL_TRAFFIC, AuditConfig, AuditEntry, CodeSecurityConfig, ContentGateConfig,
                           CustomPolicyConfig, EnvSecurityConfig, InjectionAction, InjectionDefenseConfig,
                           InjectionJudgeConfig, InjectionSensitivity, InvisibleTextConfig, NetworkPolicy,
                           PIIConfig, PIIHandler, PIIType, RedactionAction, SandboxNetworkOpts,
                           SecureEnvVar, SecurityPolicy, ToxicityConfig, TransformationRule,
                           TransformDirection)
    from .stdio import StdioProcess, StdioResult
    from .templates import Template, TemplateBase, TemplateInfo, delete_template, list_templates
    from .vault import VaultClient
    from .volumes import AsyncVolumes, Volume, VolumeAttachment, Volumes
