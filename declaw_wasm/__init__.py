"""declaw-wasm: run LLM-generated Python in-process, in a Wasmtime sandbox, with declaw's (and
E2B's) API.

    from declaw_wasm import Sandbox
    with Sandbox.create() as sbx:
        sbx.files.write("/tmp/x.py", "print(6 * 7)")
        print(sbx.commands.run("python3 /tmp/x.py").stdout)
"""

from .async_sandbox import AsyncCommandHandle, AsyncSandbox, AsyncSandboxPaginator, AsyncWatchHandle
from .exceptions import (AuthenticationException, BuildException, CommandExitException,
                         ConflictException, FileNotFoundException, InvalidArgumentException,
                         NotEnoughSpaceException, NotFoundException, RateLimitException,
                         SandboxError, SandboxException, SandboxNotFoundException,
                         SnapshotException, TemplateException, TimeoutException,
                         VersionMismatchException)
from .commands import CommandHandle
from .execution import Context, Execution, ExecutionError, Logs, OutputMessage, Result
from .files import FileStream, WatchHandle
from .limits import Limits
from .models import (CommandResult, EntryInfo, FilesystemEvent, FilesystemEventType, FileType,
                     ProcessInfo, PtySize, SandboxInfo, SandboxLifecycle, SandboxMetrics,
                     SandboxQuery, SandboxState, Snapshot, SnapshotInfo, WriteEntry, WriteInfo)
from .sandbox import Sandbox, SandboxPaginator
from .security import (ALL_TRAFFIC, AuditConfig, AuditEntry, CodeSecurityConfig, ContentGateConfig,
                       CustomPolicyConfig, EnvSecurityConfig, InjectionAction, InjectionDefenseConfig,
                       InjectionJudgeConfig, InjectionSensitivity, InvisibleTextConfig, NetworkPolicy,
                       PIIConfig, PIIHandler, PIIType, RedactionAction, SandboxNetworkOpts,
                       SecureEnvVar, SecurityPolicy, ToxicityConfig, TransformationRule,
                       TransformDirection)
from .stdio import StdioProcess, StdioResult
from .templates import Template, TemplateBase, TemplateInfo, delete_template, list_templates

# Imported on first use: declaw's volumes bring the state store and fsspec along; the network's
# names bring TLS and HTTP parsing.
_VOLUMES = ("AsyncVolumes", "Volume", "VolumeAttachment", "Volumes")
_EGRESS = ("AuditEvent", "Secret", "Vault", "VaultPreset", "VaultScope", "VaultSecret")


def __getattr__(name: str) -> object:
    if name in _VOLUMES:
        from . import volumes

        return getattr(volumes, name)
    if name in _EGRESS:
        from . import _egress

        return getattr(_egress, name)
    if name == "VaultClient":  # this process's vault, or a server's (vault.py)
        from .vault import VaultClient

        return VaultClient
    raise AttributeError(f"module 'declaw_wasm' has no attribute {name!r}")


__version__ = "0.1.0"

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
    # the network (declaw_wasm._egress): secrets, the vault, audit events
    "AuditEvent", "Secret", "Vault", "VaultClient", "VaultPreset", "VaultScope", "VaultSecret",
]
