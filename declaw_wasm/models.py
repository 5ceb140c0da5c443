"""Public data returned by the API: pydantic models with E2B's names and field order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Optional, TypedDict, Union, IO

from pydantic import ConfigDict, Field

from ._model import Model


class FileType(str, Enum):
    FILE = "file"
    DIR = "dir"
    SYMLINK = "symlink"


class WriteInfo(Model):
    """What `files.write` wrote."""

    model_config = ConfigDict(frozen=True)

    name: str
    type: Optional[FileType] = None
    path: str


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


class WriteEntry(TypedDict):
    path: str
    data: Union[str, bytes, IO]


class CommandResult(Model):
    """The outcome of a finished command. A non-zero `exit_code` is returned, not raised."""

    stderr: str
    stdout: str
    exit_code: int
    error: Optional[str] = None
    # with Limits(cpu_instructions=...): the instructions the command line ran (Wasmtime fuel)
    cpu_instructions_used: Optional[int] = None


class SandboxState(str, Enum):
    RUNNING = "running"
    PAUSED = "paused"


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


class ProcessInfo(Model):
    """A running command or PTY (E2B's `ProcessInfo`)."""

    pid: int
    tag: Optional[str] = None
    cmd: str
    args: list[str] = Field(default_factory=list)
    envs: dict[str, str] = Field(default_factory=dict)
    cwd: Optional[str] = None


@dataclass(frozen=True)
class PtySize:
    """A terminal's size. Field order rows, cols, as E2B's (`PtySize(24, 80)`)."""

    rows: int
    cols: int


class TemplateInfo(Model):
    """A built template, as `list_templates()` and `Template.build()` report it."""

    name: str
    base: str
    packages: list[str]  # what was installed, NAME==VERSION
    envs: dict[str, str]
    commands: list[str]
    built_at: datetime
    size_bytes: int
