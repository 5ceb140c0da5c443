"""What travels between `declaw-wasm serve` (server/) and the remote SDKs (_remote/, sdk-ts/):
every request body and every streamed message, as pydantic models. The server encodes them, the
Python client decodes them, `/openapi.json` carries them all (the streamed ones under
`components.schemas`), and sdk-ts/src/wire.ts is generated from that document
(sdk-ts/scripts/gen_wire.py; a test fails when it is stale).

The request bodies are also the backend contract's arguments (_backend.py). The responses reuse
the public models (`SandboxInfo`, `EntryInfo`, `WriteInfo`, `ProcessInfo`, `Context`, `Result`,
`ExecutionError`): the JSON the server sends is what the SDK returns.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter

from . import exceptions
from .charts import deserialize_chart
from .exceptions import AuthenticationException, SandboxException, TimeoutException
from .execution import ExecutionError, Result
from .limits import Limits

API_KEY_HEADER = "X-API-Key"
# Exceptions the server reports by name; the SDK raises the same class.
EXCEPTIONS: dict[str, type[Exception]] = {
    name: cls for name, cls in vars(exceptions).items()
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == exceptions.__name__
}
STATUS = {  # HTTP status per exception (E2B's envd codes where it has one)
    "InvalidArgumentException": 400, "AuthenticationException": 401,
    "NotFoundException": 404, "FileNotFoundException": 404, "SandboxNotFoundException": 404,
    "RateLimitException": 429, "TimeoutException": 504, "NotEnoughSpaceException": 507,
    "TemplateException": 400, "SandboxException": 500,
}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSandbox(_Body):
    template: Optional[str] = None
    timeout: Optional[float] = None
    metadata: Optional[dict[str, str]] = None
    envs: Optional[dict[str, str]] = None
    limits: Optional[Limits] = None
    volumes: Optional[list[dict[str, Any]]] = Field(
        None, description="declaw's VolumeAttachment dicts: volume_id, mount_path, mode, subpath")
    network: Optional[dict[str, list[str]]] = Field(
        None, description="E2B's / declaw's network policy: allow_out and deny_out lists")
    allow_internet_access: Optional[bool] = None
    # In-process arguments that never travel (secret values, the vault, policy objects): the faces
    # put them here for the local backend; a remote backend refuses them (docs/egress.md).
    _host_only: dict[str, Any] = PrivateAttr(default_factory=dict)


class SetTimeout(_Body):
    timeout: float


class Connect(_Body):
    timeout: Optional[float] = None


class Killed(BaseModel):
    killed: bool


class Exists(BaseModel):
    exists: bool


class Created(BaseModel):
    created: bool


class Rename(_Body):
    old_path: str
    new_path: str


class MakeDir(_Body):
    path: str


class RunCommand(_Body):
    cmd: str
    envs: Optional[dict[str, str]] = None
    cwd: Optional[str] = None
    timeout: Optional[float] = Field(60.0, description="seconds; 0 or null: none")
    stdin: Union[bool, str, None] = Field(None, description="true: keep stdin open for /stdin; "
                                                            "a string: that input, then end of input")
    background: bool = Field(False, description="false: the command is killed if the client "
                                                "disconnects before it ends")
    tag: Optional[str] = None


class Stdin(_Body):
    data: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


class CreatePty(_Body):
    rows: int = Field(24, gt=0, le=10000)
    cols: int = Field(80, gt=0, le=10000)
    cwd: Optional[str] = None
    envs: Optional[dict[str, str]] = None
    timeout: Optional[float] = Field(60.0, description="seconds; 0 or null: none")


class Resize(_Body):
    rows: int = Field(gt=0, le=10000)
    cols: int = Field(gt=0, le=10000)


class Pid(BaseModel):
    pid: int


class RunCode(_Body):
    code: str
    language: Optional[str] = None
    context_id: Optional[str] = None
    envs: Optional[dict[str, str]] = None
    timeout: Optional[float] = Field(300.0, description="seconds; 0 or null: none")


class CreateContext(_Body):
    cwd: Optional[str] = None
    language: Optional[str] = None


class ErrorBody(BaseModel):
    """Every error response: the SDK exception's class name and message (a command's timeout
    also carries the output so far)."""

    error: str
    message: str
    stdout: Optional[str] = None
    stderr: Optional[str] = None


# -- streamed messages ---------------------------------------------------------------------------
class _Message(BaseModel):
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
    """Last line of a command's stream (or a PTY's last text frame)."""

    type: Literal["end"] = "end"
    exit_code: int
    error: Optional[str] = None


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
    type: Literal["number_of_executions"] = "number_of_executions"
    execution_count: Optional[int] = None


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


# POST /sandboxes/{id}/commands and GET .../commands/{pid}/events (NDJSON): a start line, output
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

COMMAND_LINES: TypeAdapter[Any] = TypeAdapter(CommandLine)
CELL_LINES: TypeAdapter[Any] = TypeAdapter(CellLine)
PTY_CONTROL: TypeAdapter[Any] = TypeAdapter(PtyControl)
PTY_END: TypeAdapter[Any] = TypeAdapter(PtyEnd)
STREAMED = [StartLine, OutputLine, PtyLine, EndLine, ExceptionLine, CellLogLine, CellResultLine,
            CellErrorLine, ExecutionCountLine, EndOfExecutionLine, ResizeMessage, StdinMessage]


def line(message: BaseModel) -> bytes:
    """One NDJSON line."""
    return message.model_dump_json(exclude_none=True).encode() + b"\n"


def exception_line(exc: BaseException) -> ExceptionLine:
    return ExceptionLine(**error_body(exc).model_dump())


def error_body(exc: BaseException) -> ErrorBody:
    name = type(exc).__name__ if type(exc).__name__ in EXCEPTIONS else "SandboxException"
    body = ErrorBody(error=name, message=str(exc))
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
        return TimeoutException(message, body.get("stdout") or "", body.get("stderr") or "")
    return cls(message)
