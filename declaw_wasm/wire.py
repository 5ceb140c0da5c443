"""What travels between `declaw-wasm serve` (server.py) and the remote SDKs (remote.py, sdk-ts/):
the request bodies and the streamed NDJSON lines, as pydantic models both sides import.

The responses reuse the public models (`SandboxInfo`, `EntryInfo`, `WriteInfo`, `ProcessInfo`,
`Context`, `Result`, `ExecutionError`): the JSON the server sends is what the SDK returns.
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from . import exceptions
from .exceptions import AuthenticationException, SandboxException, TimeoutException
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


# -- NDJSON lines -------------------------------------------------------------------------------
# POST /sandboxes/{id}/commands and GET .../commands/{pid}/events:
#   {"type": "start", "pid": 1}
#   {"type": "stdout" | "stderr", "data": "text"}      {"type": "pty", "data": "<base64>"}
#   {"type": "end", "exit_code": 0, "error": null}      or an "exception" line (ErrorBody fields)
# WebSocket /sandboxes/{id}/pty/{pid}: binary frames are the terminal's bytes (server -> client:
#   output from the PTY's start; client -> server: stdin); text frames are JSON: from the client
#   {"type": "resize", "rows": 40, "cols": 120} or {"type": "stdin", "data": "text"}; from the
#   server, last, {"type": "end", "exit_code": 0, "error": null} or an "exception" line.
# POST /sandboxes/{id}/execute (E2B's /execute in spirit):
#   {"type": "stdout" | "stderr", "text": "...", "timestamp": "..."}
#   {"type": "result", ...Result fields}   {"type": "error", "name", "value", "traceback"}
#   {"type": "number_of_executions", "execution_count": 3}   {"type": "end_of_execution"}
#   or an "exception" line (ErrorBody fields) when the call itself failed (timeout, killed)


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
