"""What crosses a worker's pipe: msgpack, with the wire's and the API's pydantic models as
extension types rebuilt from an allow-list.

Why msgpack and not pickle (which `multiprocessing` would use by default): a worker hosts
hostile guests. Were one ever to escape Wasmtime it would own its worker, and a pickle from the
worker would then run its code in the agent's process; a msgpack message can only be data, and
every model in it is validated by pydantic on arrival. msgpack is already a dependency (the
guest's door speaks it). Strings keep lone surrogates (`surrogatepass`): file names listed from a
guest may hold them, as they do in-process.
"""

from __future__ import annotations

from typing import Any, Callable

import msgpack
from pydantic import BaseModel

from ..execution import Context, Execution, ExecutionError, Logs, OutputMessage, Result
from ..limits import Limits
from .._egress.audit import AuditEvent
from ..models import (CommandResult, EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                     SandboxMetrics, Snapshot, WriteInfo)
from ..wire import (CellResultLine, CreateContext, CreatePty, CreateSandbox, EndLine, ErrorBody,
                    ResumeSandbox, RunCode, RunCommand)

MODEL = 1  # the one extension type: [name, fields]
MODELS: dict[str, type[BaseModel]] = {cls.__name__: cls for cls in (
    CreateSandbox, RunCommand, CreatePty, RunCode, CreateContext, Limits, SandboxInfo, EntryInfo,
    WriteInfo, ProcessInfo, Context, CommandResult, OutputMessage, ExecutionError, ErrorBody,
    EndLine, AuditEvent, SandboxMetrics, FilesystemEvent, Snapshot, ResumeSandbox)}


def _result(fields: Any) -> Result:
    return CellResultLine.model_validate(fields).to_result()  # rebuilds the chart's class


def _execution(fields: Any) -> Execution:
    return Execution(results=[_result(r) for r in fields.get("results", [])],
                     logs=Logs.model_validate(fields.get("logs", {})),
                     error=None if fields.get("error") is None else ExecutionError.model_validate(fields["error"]),
                     execution_count=fields.get("execution_count"))


SPECIAL: dict[str, Callable[[Any], Any]] = {
    "Result": _result,
    "Execution": _execution,
    "PtySize": lambda fields: PtySize(rows=int(fields[0]), cols=int(fields[1])),
}


def _default(obj: Any) -> msgpack.ExtType:
    if isinstance(obj, PtySize):
        name, fields = "PtySize", [obj.rows, obj.cols]
    elif isinstance(obj, (Result, Execution)) or type(obj).__name__ in MODELS:
        name, fields = type(obj).__name__, obj.model_dump(mode="json")
    else:
        raise TypeError(f"cannot send a {type(obj).__name__} to or from a worker")
    return msgpack.ExtType(MODEL, pack([name, fields]))


def _ext(code: int, data: bytes) -> Any:
    if code != MODEL:
        raise ValueError(f"unknown extension type {code} in a worker message")
    name, fields = unpack(data)
    if name in SPECIAL:
        return SPECIAL[name](fields)
    cls = MODELS.get(name)
    if cls is None:
        raise ValueError(f"unexpected type {name!r} in a worker message")
    return cls.model_validate(fields)


def pack(message: Any) -> bytes:
    return msgpack.packb(message, default=_default, use_bin_type=True, unicode_errors="surrogatepass")


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext, raw=False, unicode_errors="surrogatepass",
                           strict_map_key=False)
