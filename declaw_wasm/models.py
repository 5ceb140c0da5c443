"""Public data returned by the API: pydantic models with E2B's names and field order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import IO, Any, Iterator, List, Optional, Union

from pydantic import ConfigDict, Field

from ._model import Model


class FileType(str, Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


class WriteInfo(Model):
    """What `files.write` wrote: E2B's fields (`name`, `type`, `path`, `metadata`) and
    declaw's (`path`, `size`)."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: Optional[FileType] = None
    path: str
    size: int = 0
    metadata: Optional[dict[str, str]] = None


class EntryInfo(WriteInfo):
    """A file system entry. For a symlink, `type` is the target's type and `symlink_target`
    the target's absolute path in the sandbox, as in E2B."""

    size: int
    mode: int
    permissions: str
    owner: str
    group: str
    modified_time: datetime
    symlink_target: Optional[str] = None


@dataclass
class WriteEntry:
    """One file for `files.write_files`: declaw's dataclass (`WriteEntry(path, data)`, attribute
    access) that also reads as E2B's TypedDict (`entry["path"]`); plain dicts are accepted too."""

    path: str
    data: Union[str, bytes, IO[Any]]

    def __getitem__(self, key: str) -> Any:
        if key not in ("path", "data"):
            raise KeyError(key)
        return getattr(self, key)

    def keys(self) -> Iterator[str]:
        return iter(("path", "data"))

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "data": self.data}


class CommandResult(Model):
    """The outcome of a finished command. A non-zero `exit_code` is returned, not raised."""

    stderr: str
    stdout: str
    exit_code: int
    error: Optional[str] = None
    # with Limits(cpu_instructions=...): the instructions the command line ran (Wasmtime fuel)
    cpu_instructions_used: Optional[int] = Field(None, exclude_if=lambda v: v is None)  # absent without a limit


class SandboxState(str, Enum):
    """E2B's states (running, paused) and declaw's (also live, creating, killed)."""

    RUNNING = "running"
    PAUSED = "paused"
    LIVE = "live"
    CREATING = "creating"
    KILLED = "killed"


class SandboxInfo(Model):
    sandbox_id: str
    template_id: str
    name: Optional[str] = None
    metadata: dict[str, str] = Field(default_factory=dict)
    started_at: datetime
    end_at: datetime
    state: SandboxState = SandboxState.RUNNING
    cpu_count: int = 1
    memory_mb: int = 1024
    envd_version: Optional[str] = None
    allow_internet_access: Optional[bool] = None
    network: Optional[dict[str, Any]] = None
    lifecycle: Optional[dict[str, Any]] = None

    def __getitem__(self, key: str) -> Any:
        """declaw's `Sandbox.list()` gives raw dicts: `info["sandbox_id"]` works too."""
        return self.model_dump(mode="json")[key]


class SandboxQuery(Model):
    """Filters for `Sandbox.list(query=...)` (E2B's field names; declaw's are the first two):
    every `metadata` pair must match, the state must be one of `state`, the sandbox started at
    or after `started_after` (E2B's: a sandbox's own `started_at` finds it)."""

    metadata: Optional[dict[str, str]] = None
    state: Optional[list[SandboxState]] = None
    started_after: Optional[datetime] = None
    template: Optional[str] = None

    def __init__(self, metadata: Optional[dict[str, str]] = None,
                 state: Optional[list[SandboxState]] = None, **rest: Any) -> None:
        super().__init__(metadata=metadata, state=state, **rest)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)

    def matches(self, info: "SandboxInfo") -> bool:
        if self.metadata and any(info.metadata.get(k) != v for k, v in self.metadata.items()):
            return False
        if self.state is not None and info.state not in self.state:
            return False
        if self.started_after is not None and info.started_at < self.started_after:
            return False
        return self.template is None or self.template in (info.template_id, info.name)


class SandboxMetrics(Model):
    """declaw's `SandboxMetrics` (one sample): CPU use of the sandbox's guests over the time
    since the previous sample, their linear memory now, its disk use; plus the guests' CPU time
    since the sandbox started (`cpu_time_seconds`) and, with `Limits(cpu_instructions=...)`, the
    instructions its finished command lines and cells ran (`cpu_instructions_used`, Wasmtime
    fuel). E2B's names follow: the host's CPUs (the guests' threads may use all of them) and the
    share of them used, bytes of memory and disk in use and allowed (one guest's
    `Limits.memory_limit`, `Limits.disk_bytes`)."""

    timestamp: datetime
    cpu_usage_percent: float = 0.0
    memory_usage_mb: float = 0.0
    disk_usage_mb: float = 0.0
    cpu_time_seconds: float = 0.0
    cpu_instructions_used: Optional[int] = Field(None, exclude_if=lambda v: v is None)  # absent without a limit
    cpu_count: int = 1
    cpu_used_pct: float = 0.0
    mem_used: int = 0
    mem_total: int = 0
    disk_used: int = 0
    disk_total: int = 0

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class SnapshotInfo(Model):
    """declaw's (and E2B's) `SnapshotInfo`: what `create_snapshot()` returns."""

    snapshot_id: str
    sandbox_id: str
    created_at: Optional[datetime] = None
    names: List[str] = Field(default_factory=list)  # E2B's: the names given at create_snapshot(name=)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class Snapshot(Model):
    """declaw's `Snapshot`: a stored snapshot of a sandbox (`snapshot()`, `list_snapshots()`).
    `source`: "pause", "periodic" or "manual". `mem_blob_key` and `vmstate_blob_key` name its first
    context image and its manifest in the state store; `mem_size_bytes` is the contexts' linear
    memory; `size_bytes` (ours) what the snapshot takes in the store."""

    snapshot_id: str
    sandbox_id: str
    source: str = "manual"
    mem_blob_key: str = ""
    vmstate_blob_key: str = ""
    mem_size_bytes: Optional[int] = None
    pause_duration_ms: Optional[int] = None
    created_at: str = ""
    size_bytes: Optional[int] = None
    names: List[str] = Field(default_factory=list)

    def info(self) -> SnapshotInfo:
        return SnapshotInfo(snapshot_id=self.snapshot_id, sandbox_id=self.sandbox_id,
                            created_at=datetime.fromisoformat(self.created_at) if self.created_at else None,
                            names=list(self.names))

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


@dataclass
class SandboxLifecycle:
    """declaw's lifecycle settings: `on_timeout="kill"` (default) or `"pause"` (the sandbox is
    paused to the state store at the end of its lifetime, docs/state.md); `auto_resume`: a
    paused sandbox resumes when it is used (in the process that paused it). Ours:
    `checkpoint="cell"`, a sandbox on a process pool or Ray checkpointed after each turn and
    restored on another host when its own is lost (docs/scale.md)."""

    on_timeout: str = "kill"
    auto_resume: bool = False
    checkpoint: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"on_timeout": self.on_timeout, "auto_resume": self.auto_resume}
        if self.checkpoint is not None:  # declaw's own fields alone otherwise
            found["checkpoint"] = self.checkpoint
        return found


class ProcessInfo(Model):
    """A running command or PTY (E2B's `ProcessInfo`)."""

    pid: int
    tag: Optional[str] = None
    cmd: str
    args: list[str] = Field(default_factory=list)
    envs: dict[str, str] = Field(default_factory=dict)
    cwd: Optional[str] = None
    is_pty: bool = False


@dataclass(frozen=True)
class PtySize:
    """A terminal's size: E2B's field order (rows, cols: `PtySize(24, 80)`) with declaw's
    defaults (`PtySize()` is 80 columns by 24 rows; `PtySize(cols=120, rows=40)` works as in
    declaw). declaw's own order is cols first, so only its *positional* calls differ."""

    rows: int = 24
    cols: int = 80

    def to_dict(self) -> dict[str, int]:
        return {"cols": self.cols, "rows": self.rows}


class FilesystemEventType(str, Enum):
    CHMOD = "chmod"
    CREATE = "create"
    REMOVE = "remove"
    RENAME = "rename"
    WRITE = "write"


class FilesystemEvent(Model):
    """A change in a watched folder: E2B's `name` (relative to the watched folder) and `type`,
    `entry` with `include_entry=True`; declaw's `path` (absolute, in the sandbox) and
    `timestamp` (seconds since the epoch)."""

    name: str
    type: FilesystemEventType
    path: str = ""
    entry: Optional["EntryInfo"] = None
    timestamp: Optional[float] = None


class TemplateInfo(Model):
    """A built template, as `list_templates()` and `Template.build()` report it."""

    name: str
    base: str
    packages: list[str]  # what was installed, NAME==VERSION
    envs: dict[str, str]
    commands: list[str]
    built_at: datetime
    size_bytes: int
