"""The HTTP protocol's responses, streamed lines and errors: the wire beyond the request bodies.

Part of the wire (its package docstring says why it is two modules); loaded the first time one
of these names is read from `declaw_wasm.wire`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, SecretStr, TypeAdapter

from .._model import Model

from .. import exceptions
from ..charts import deserialize_chart
from ..exceptions import AuthenticationException, SandboxException, TimeoutException
from ..execution import ExecutionError, Result
from ..models import SandboxInfo, Snapshot
from .bodies import TerminalSize, _Body

# Exceptions the server reports by name; the SDK raises the same class.
EXCEPTIONS: dict[str, type[Exception]] = {
    name: cls for name, cls in vars(exceptions).items()
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == exceptions.__name__
}
# HTTP status per exception: the codes declaw's SDKs map back to the same exceptions (400/422
# InvalidArgument, 401/403 Authentication, 404 NotFound, 408 Timeout, 409 Conflict, 413
# NotEnoughSpace, 429 RateLimit). 5xx only for what is unexpected: declaw's clients retry 5xx.
STATUS = {
    "InvalidArgumentException": 400, "TemplateException": 400, "BuildException": 400,
    "CommandExitException": 400, "AuthenticationException": 401,
    "NotFoundException": 404, "FileNotFoundException": 404, "SandboxNotFoundException": 404,
    "TimeoutException": 408, "ConflictException": 409, "SnapshotException": 409, "NotEnoughSpaceException": 413,
    "RateLimitException": 429, "SandboxException": 500,
}


class SetTimeout(_Body):
    timeout: float


class ForkSandbox(_Body):
    """`POST /declaw-wasm/sandboxes/{id}/fork`: `count` copies of the sandbox."""

    count: int = Field(1, ge=1, le=64)


class Forked(Model):
    sandboxes: list[SandboxInfo]


class Paused(Model):
    """A pause's answer: False if the sandbox was paused already."""

    paused: bool


class SnapshotList(Model):
    """`GET /sandboxes/{id}/snapshots` and `GET /snapshots` (declaw's shape), newest first."""

    snapshots: list[Snapshot]
    next_token: Optional[str] = None


class Killed(Model):
    """A kill's answer: `killed` (done), and declaw's `queued` for `?async=true` (here a kill
    is done before the answer, so both say the same)."""

    killed: bool
    queued: Optional[bool] = None


class KillMany(_Body):
    sandbox_ids: list[str] = Field(max_length=10_000)


class KillManyResults(Model):
    """Per id: `{"killed": true}` (or `{"queued": true}` for `?async=true`) or `{"error": ...}`."""

    results: dict[str, dict[str, Any]]


class Status(Model):
    is_running: bool


class SandboxList(Model):
    """`GET /sandboxes`: declaw's page shape (one page holds every match here)."""

    sandboxes: list[SandboxInfo]
    next_token: Optional[str] = None


class Exists(Model):
    exists: bool


class Created(Model):
    created: bool


class Rename(_Body):
    old_path: str
    new_path: str


class MakeDir(_Body):
    path: str


class WriteText(_Body):
    """`POST /sandboxes/{id}/files` (declaw's text write): `data` is the file's text (or, with
    `encoding` "base64", its bytes)."""

    path: str
    data: str
    encoding: Literal["utf-8", "base64"] = "utf-8"
    metadata: Optional[dict[str, str]] = None


class BatchEntry(_Body):
    path: str
    data: str


class WriteBatch(_Body):
    """`POST /sandboxes/{id}/files/batch`: text files, written in order."""

    files: list[BatchEntry] = Field(max_length=10_000)
    metadata: Optional[dict[str, str]] = None


class Watch(_Body):
    path: str
    recursive: bool = False
    include_entry: bool = False


class Watching(Model):
    """A watch's id: its events come from `GET {PREFIX}/sandboxes/{id}/watchers/{watcher_id}`."""

    watcher_id: str


class Stdin(_Body):
    data: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


class Resize(_Body):
    """`PATCH /sandboxes/{id}/pty/{pid}`."""

    size: TerminalSize


class StartStdio(_Body):
    """`POST /sandboxes/{id}/stdio`: a process with an open stdin pipe (MCP/LSP servers)."""

    cmd: str
    envs: Optional[dict[str, str]] = None
    cwd: Optional[str] = None


class StdioStarted(Model):
    cmd_id: str


class StdioStdin(_Body):
    data: str = Field(description="base64")


class Pid(Model):
    pid: int


class ErrorBody(Model):
    """Every error response: the SDK exception's class name (`error`, which our SDKs raise), its
    message and declaw's machine-readable `code` (declaw's SDKs read `message` and `code`); a
    command's timeout also carries the output so far."""

    error: str
    message: str
    code: str = ""
    stdout: Optional[str] = None
    stderr: Optional[str] = None


# -- the vault (declaw's `VaultClient` routes: /teams/..., /vault/presets) --------------------------
class Team(Model):
    """declaw's hidden tenancy: a server has one team, "default" (its id is "default" too)."""

    team_id: str
    name: str
    created_at: str


class TeamList(Model):
    teams: list[Team]


class NewTeam(_Body):
    name: str


class Environment(Model):
    """One environment, "prod" (declaw's only one)."""

    env_id: str
    name: str


class EnvironmentList(Model):
    environments: list[Environment]


class NewVaultSecret(_Body):
    """`POST /teams/{team_id}/vault/secrets`: the value is write-only (never returned, never
    logged); `provider` (a preset's key) or `scopes` say where it may be sent. `name` defaults
    to the provider's key."""

    value: SecretStr
    environment: str = "prod"
    name: Optional[str] = Field(None, max_length=255)
    provider: Optional[str] = None
    scopes: Optional[list[dict[str, Any]]] = Field(None, max_length=64)
    rotation_interval_days: int = Field(0, ge=0)


class RotateVaultSecret(_Body):
    value: SecretStr


class VaultScopes(_Body):
    """`POST .../vault/secrets/{id}/scopes`: the new scopes; `value` (ours: declaw's SDK never
    sends it) is needed to add a host, and replaces the stored value (write-only, as create's)."""

    scopes: list[dict[str, Any]] = Field(min_length=1, max_length=64)
    value: Optional[SecretStr] = None


# -- volumes (declaw's `Volumes` routes: /volumes/..., /sandboxes/{id}/volumes/...) ------------------
# (the lists of `Volume`s and `FileEntry`s are server/routes/volumes.py's: the models live in _volumes)
class VolumePath(Model):
    """A path written or made in a volume."""

    path: str


class Renamed(Model):
    old_path: str
    new_path: str


class LockAcquire(_Body):
    path: str
    ttl_seconds: Optional[Union[int, float]] = None


class LockToken(_Body):
    path: str
    token: str
    ttl_seconds: Optional[Union[int, float]] = None


class LockHeld(Model):
    """An acquired or renewed lock."""

    token: str
    ttl_seconds: Union[int, float]
    expires_at: str


class LockStatus(Model):
    held: bool
    expires_in_ms: int


class Released(Model):
    released: bool


# -- streamed messages ---------------------------------------------------------------------------
class _Message(Model):
    model_config = ConfigDict(extra="ignore")


class StartLine(_Message):
    """First line of a command's stream."""

    type: Literal["start"] = "start"
    pid: int


class OutputLine(_Message):
    type: Literal["stdout", "stderr"]
    data: str


class PtyLine(_Message):
    """Terminal output (in NDJSON streams; a PTY's WebSocket sends it as binary frames)."""

    type: Literal["pty"] = "pty"
    data: str = Field(description="base64")


class EndLine(_Message):
    """Last line of a command's stream (or a PTY's last text frame): the `CommandResult`'s
    fields but its output (which came in output lines)."""

    type: Literal["end"] = "end"
    exit_code: int
    error: Optional[str] = None
    cpu_instructions_used: Optional[int] = None


class ExceptionLine(ErrorBody):
    """Last line of a stream whose call failed (timeout, killed sandbox...)."""

    model_config = ConfigDict(extra="ignore")
    type: Literal["exception"] = "exception"


class CellLogLine(_Message):
    type: Literal["stdout", "stderr"]
    text: str
    timestamp: datetime


class CellResultLine(Result):
    """A `Result`'s fields; `chart` as its JSON (the client rebuilds the chart class)."""

    model_config = ConfigDict(extra="ignore", arbitrary_types_allowed=True)
    type: Literal["result"] = "result"
    chart: Optional[dict[str, Any]] = None  # type: ignore[assignment]

    def to_result(self) -> Result:
        fields = self.model_dump(exclude={"type", "chart"})
        return Result(**fields, chart=deserialize_chart(self.chart) if self.chart else None)


class CellErrorLine(ExecutionError):
    model_config = ConfigDict(extra="ignore")
    type: Literal["error"] = "error"


class ExecutionCountLine(_Message):
    """A cell's `Execution` fields other than its logs, results and error (which come in lines
    of their own), before its end."""

    type: Literal["number_of_executions"] = "number_of_executions"
    execution_count: Optional[int] = None
    cpu_instructions_used: Optional[int] = None


class EndOfExecutionLine(_Message):
    type: Literal["end_of_execution"] = "end_of_execution"


class ResizeMessage(_Message):
    """A PTY WebSocket's text frame from the client."""

    type: Literal["resize"] = "resize"
    rows: int = Field(gt=0, le=10000)
    cols: int = Field(gt=0, le=10000)


class StdinMessage(_Message):
    """A PTY WebSocket's text frame from the client (binary frames are raw stdin)."""

    type: Literal["stdin"] = "stdin"
    data: str


# -- Server-Sent Events (declaw's streams): `event: <name>` and `data: <one of these as JSON>` --
class StreamOutput(_Message):
    """`POST /sandboxes/{id}/commands/stream`: one line of output, without its newline
    (events `stdout`/`stderr`), then `StreamExit` (event `exit`) or `StreamError` (`error`)."""

    type: Literal["stdout", "stderr"]
    data: str


class StreamExit(_Message):
    exit_code: int


class StreamError(_Message):
    error: str


class PtyData(_Message):
    """`GET /sandboxes/{id}/pty/{pid}/stream`: event `data` (the terminal's bytes, base64),
    then event `exit` (`StreamExit`)."""

    data: str


class StdioChunk(_Message):
    """`GET /sandboxes/{id}/stdio/{cmd_id}/stream[?last_entry_id=]`: events `stdout`/`stderr`
    (`entry_id` counts from 1; a stream resumes after `last_entry_id`), then event `exit`."""

    entry_id: int
    data: str


# POST {PREFIX}/sandboxes/{id}/commands and GET {PREFIX}/.../commands/{pid}/events (NDJSON): a start line, output
# lines, then an end or exception line.
CommandLine = Annotated[Union[StartLine, OutputLine, PtyLine, EndLine, ExceptionLine],
                        Field(discriminator="type")]
# POST /sandboxes/{id}/execute (NDJSON, E2B's /execute in spirit): logs, results and the error as
# they happen, then number_of_executions and end_of_execution, or an exception line.
CellLine = Annotated[Union[CellLogLine, CellResultLine, CellErrorLine, ExecutionCountLine,
                           EndOfExecutionLine, ExceptionLine], Field(discriminator="type")]
# WebSocket /sandboxes/{id}/pty/{pid}: binary frames are the terminal's bytes both ways; text
# frames are these (client -> server) and an end or exception line last (server -> client).
PtyControl = Annotated[Union[ResizeMessage, StdinMessage], Field(discriminator="type")]
PtyEnd = Annotated[Union[EndLine, ExceptionLine], Field(discriminator="type")]

_DEFERRED = ConfigDict(defer_build=True)  # built on first use, as every model here (_model.py)
COMMAND_LINES: TypeAdapter[Any] = TypeAdapter(CommandLine, config=_DEFERRED)
CELL_LINES: TypeAdapter[Any] = TypeAdapter(CellLine, config=_DEFERRED)
PTY_CONTROL: TypeAdapter[Any] = TypeAdapter(PtyControl, config=_DEFERRED)
PTY_END: TypeAdapter[Any] = TypeAdapter(PtyEnd, config=_DEFERRED)
STREAMED = [StartLine, OutputLine, PtyLine, EndLine, ExceptionLine, CellLogLine, CellResultLine,
            CellErrorLine, ExecutionCountLine, EndOfExecutionLine, ResizeMessage, StdinMessage,
            StreamOutput, StreamExit, StreamError, PtyData, StdioChunk]


def line(message: BaseModel) -> bytes:
    """One NDJSON line."""
    return message.model_dump_json(exclude_none=True).encode() + b"\n"


def sse(event: str, message: BaseModel) -> bytes:
    """One Server-Sent Event."""
    return f"event: {event}\ndata: {message.model_dump_json(exclude_none=True)}\n\n".encode()


def exception_line(exc: BaseException) -> ExceptionLine:
    return ExceptionLine(**error_body(exc).model_dump())


def error_body(exc: BaseException) -> ErrorBody:
    # the nearest class the SDKs know (a subclass such as the egress's PolicyError reads as its base)
    name = next((c.__name__ for c in type(exc).__mro__ if EXCEPTIONS.get(c.__name__) is c), "SandboxException")
    code = getattr(exc, "code", "") if isinstance(exc, SandboxException) else ""
    body = ErrorBody(error=name, message=str(exc), code=code or "sandbox_error")
    if isinstance(exc, TimeoutException):
        body.stdout, body.stderr = exc.stdout, exc.stderr
    return body


def status_of(name: str) -> int:
    return STATUS.get(name, 500)


def exception_from(body: Any, status: int = 500) -> Exception:
    """The SDK exception a server error stands for (same class, same message)."""
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        if status == 401:
            return AuthenticationException(f"{status}: {body}")
        return SandboxException(f"{status}: {body}")
    cls = EXCEPTIONS.get(body["error"])
    message = str(body.get("message", ""))
    if cls is None:
        return SandboxException(f"{body['error']}: {message}")
    if cls is TimeoutException:
        exc: Exception = TimeoutException(message, body.get("stdout") or "", body.get("stderr") or "")
    else:
        exc = cls(message)
    if isinstance(exc, SandboxException) and isinstance(body.get("code"), str) and body["code"]:
        exc.code = body["code"]
    return exc

