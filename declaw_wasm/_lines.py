"""A command's and a cell's stream as wire/'s line models, written once each way.

Every backend that is not in this process sends the same lines: `declaw-wasm serve` as NDJSON
(server/streams.py), a pool's worker and a Ray actor as msgpack (_pool/host.py, _pool/codec.py).
They are made here, from what the in-process backend reports (`event_line`, `end_line`,
`start_cell` and `cell_lines`), and read here, by the one client-side handle of a command
(`LineProcess`, which the pool's, Ray's and the remote client's process handles are) and of a
cell (`CellReader`). A result field travels in its line by name: `EndLine` carries
`CommandResult`'s fields but the output, `ExecutionCountLine` `Execution`'s scalar fields
(tests/test_result_fields.py checks both lists and runs every field through every backend).

What each channel bounds stays its own: the pool's credit window and codec budget, the NDJSON
line limit (_remote/connection.py); a client may hold a hosted stream to its sandbox's output
limit (`Budget`, the pool's `OutputBudget`). A line that does not belong in its stream is an
error naming it; how a broken channel reads (a lost host, a closed connection) is the handle's
`broken`.
"""

from __future__ import annotations

import base64
import binascii
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, Protocol, Union

from ._backend import Callback, CellNews, Event, EventLog, Stream
from .exceptions import SandboxException, TimeoutException
from .execution import Execution, ExecutionError, OutputMessage, Result
from .models import CommandResult, PtySize
from .wire import (CellErrorLine, CellLogLine, CellResultLine, EndLine, EndOfExecutionLine, ErrorBody,
                   ExceptionLine, ExecutionCountLine, OutputLine, PtyLine, StartLine, exception_line)

CommandEnd = Union[EndLine, ErrorBody]  # an ExceptionLine is an ErrorBody
# The fields that travel apart from a result's end line: a command's output (its output lines),
# a cell's logs, results and error (their own lines).
STREAMED_COMMAND_FIELDS = frozenset({"stdout", "stderr"})
STREAMED_CELL_FIELDS = frozenset({"results", "logs", "error"})


# -- made once: the server and the pool's and Ray's hosts ------------------------------------------
def event_line(event: Event) -> Union[OutputLine, PtyLine]:
    if event.stream == "pty":
        return PtyLine(data=base64.b64encode(event.data).decode())
    return OutputLine(type=event.stream, data=event.data)


def end_line(process: Any, output: bool = True) -> Union[EndLine, ExceptionLine]:
    """A finished command's last line: its result's fields but the output, or the exception its
    result raised (with the output so far if `output`: the client has it from the stream, but
    the TypeScript SDK reads a timeout's output from the line)."""
    try:
        result: CommandResult = process.result()
    except SandboxException as exc:
        return _exception(exc, output)
    return EndLine(**_carried(EndLine, result))


def _exception(exc: BaseException, output: bool) -> ExceptionLine:
    """The exception line that ends a stream, with the output so far only if `output`."""
    line = exception_line(exc)
    if not output:
        line.stdout = line.stderr = None
    return line


def _carried(line: type[Any], result: Any) -> dict[str, Any]:
    """The fields an end line carries of a result, by name (all of the line's but its type)."""
    return {name: getattr(result, name) for name in line.model_fields if name != "type"}


def start_cell(run_code: Callable[..., Execution], request: Any,
               after: Optional[Callable[[], None]] = None) -> CellNews:
    """Run a cell on a thread of its own, its reports gathered in a `CellNews` (which never makes
    the cell wait: a reader that is behind gets later logs joined); `after` runs once the cell
    is done, before its end is reported (a checkpoint)."""
    news = CellNews()

    def work() -> None:
        try:
            execution = run_code(request, on_stdout=lambda m: news.log("log", m),
                                 on_stderr=lambda m: news.log("log", m),
                                 on_result=lambda r: news.put("result", r), on_error=lambda e: news.put("error", e))
            if after is not None:
                after()
            news.put("done", execution)
        except BaseException as exc:  # reported to the reader as an exception line
            news.put("exception", exc)

    threading.Thread(target=work, name="declaw-cell", daemon=True).start()
    return news


def cell_lines(items: Iterable[tuple[str, Any]], output: bool = True) -> tuple[list[Any], bool]:
    """A cell's reports (`CellNews.take`) as lines, and whether the cell's stream ends with them."""
    out: list[Any] = []
    for kind, value in items:
        if kind == "log":
            message: OutputMessage = value
            out.append(CellLogLine(type="stderr" if message.error else "stdout", text=message.line,
                                   timestamp=message.timestamp))
        elif kind == "result":
            out.append(CellResultLine.model_validate(value.model_dump(mode="json")))
        elif kind == "error":
            out.append(CellErrorLine(**value.model_dump()))
        elif kind == "done":
            execution: Execution = value
            out += [ExecutionCountLine(**_carried(ExecutionCountLine, execution)), EndOfExecutionLine()]
            return out, True
        else:
            out.append(_exception(value, output))
            return out, True
    return out, False


# -- read once: the remote client and the pool's and Ray's clients -----------------------------------
class Budget(Protocol):
    """What a client keeps of a stream's output (the pool's `OutputBudget`)."""

    cut: list[str]

    def take(self, stream: str, data: Any, cost: int = 0) -> Any: ...
    def log(self, stream: str, text: str) -> Optional[str]: ...
    def result(self, result: Result) -> bool: ...
    def close(self, execution: Execution) -> None: ...


def call(callback: Callback, value: Any) -> None:
    """A caller's callback; its bug never breaks the stream (as in-process)."""
    if callback is not None:
        try:
            callback(value)
        except Exception:
            pass


class Controls(Protocol):
    """What a command's client copy asks of the sandbox that runs it (the backend's calls)."""

    def kill_process(self, pid: int) -> bool: ...

    def send_stdin(self, pid: int, data: bytes) -> None: ...

    def close_stdin(self, pid: int) -> None: ...

    def resize_pty(self, pid: int, size: PtySize) -> None: ...


class LineProcess(EventLog):
    """The client's copy of a command or PTY that runs elsewhere: its output as the lines come
    (`pump` reads them on a thread of their own), how it ended, and a `CommandResult` from its
    end line; control (kill, stdin, resize) goes through the sandbox's calls. `source` names the
    sender in errors; `budget`, if any, bounds what is kept of each stream."""

    source = "the host"

    def __init__(self, controls: Controls, pid: int, cmd: str, callbacks: dict[str, Callback],
                 budget: Optional[Budget] = None) -> None:
        self.controls = controls
        self.pid = pid
        self.cmd = cmd
        self._cond = threading.Condition()
        self._callbacks = {k: v for k, v in callbacks.items() if v is not None}
        self._end: Optional[CommandEnd] = None
        self._budget = budget

    @property
    def done(self) -> bool:
        return self._end is not None

    def kill(self) -> bool:
        return self.controls.kill_process(self.pid)

    def send_stdin(self, data: bytes) -> None:
        self.controls.send_stdin(self.pid, data)

    def close_stdin(self) -> None:
        self.controls.close_stdin(self.pid)

    def resize(self, size: PtySize) -> None:
        self.controls.resize_pty(self.pid, size)

    def take(self, line: Any) -> bool:
        """One line of the stream; True when it is the last."""
        stream: Stream
        data: Any
        if isinstance(line, OutputLine):
            stream, data = line.type, line.data
        elif isinstance(line, PtyLine):
            try:
                stream, data = "pty", base64.b64decode(line.data, validate=True)
            except binascii.Error:
                raise SandboxException(f"{self.source} sent terminal output that is not base64") from None
        elif isinstance(line, (EndLine, ErrorBody)):
            self._finish(line)
            return True
        else:
            raise SandboxException(f"{self.source} sent a {type(line).__name__} in a command's stream")
        if self._budget is not None:
            data = self._budget.take(stream, data)
        if data:
            self._emit(stream, data)
        return False

    def broken(self, exc: Exception) -> ErrorBody:
        """How the command ends when its stream broke with `exc`."""
        if isinstance(exc, SandboxException):
            return ErrorBody(error=type(exc).__name__, message=str(exc))
        return ErrorBody(error="SandboxException", message=f"the command's stream broke: {exc}")

    def pump(self, lines: Iterator[Any], close: Optional[Callable[[], None]] = None, inline: bool = False) -> None:
        """Read the command's lines until its end, on a thread of its own (`inline`: here, now,
        when they are all there already); `close` the channel after."""
        def run() -> None:
            try:
                for line in lines:
                    if self.take(line):
                        return
                self._finish(ErrorBody(error="SandboxException",
                                       message=f"{self.source} ended the command's stream early"))
            except Exception as exc:  # whatever broke the stream, the command's waiters hear of it
                self._finish(self.broken(exc))
            finally:
                if close is not None:
                    close()

        if inline:
            run()
        else:
            threading.Thread(target=run, name=f"declaw-lines-{self.pid}", daemon=True).start()

    def _finish(self, end: CommandEnd) -> None:
        with self._cond:
            if self._end is None:
                self._end = end
            self._cond.notify_all()

    def result(self) -> CommandResult:
        with self._cond:
            while self._end is None:
                self._cond.wait(0.5)
            end = self._end
        if not isinstance(end, EndLine):
            exc = exception_of(end)
            if isinstance(exc, TimeoutException):  # the output so far, as in-process
                exc.stdout, exc.stderr = self.text("stdout"), self.text("stderr")
            raise exc
        fields = end.model_dump(exclude={"type"})
        cut = self._budget.cut if self._budget is not None else []
        if cut and not fields.get("error"):  # more than an honest sender sends: cut here, said as in-process
            fields["error"] = f"{' and '.join(cut)} truncated at the sandbox's output limit"
        return CommandResult(stdout=self.text("stdout"), stderr=self.text("stderr"), **fields)


def exception_of(body: ErrorBody) -> Exception:
    from .wire import exception_from

    return exception_from(body.model_dump())


class CellReader:
    """A cell's lines as its `Execution`, its callbacks called as they come (on the reading
    thread); `budget`, if any, bounds what is kept and handed on."""

    def __init__(self, on_stdout: Callback = None, on_stderr: Callback = None, on_result: Callback = None,
                 on_error: Callback = None, budget: Optional[Budget] = None, source: str = "the host") -> None:
        self.execution = Execution()
        self._callbacks = {"stdout": on_stdout, "stderr": on_stderr, "result": on_result, "error": on_error}
        self._budget = budget
        self._source = source

    def take(self, line: Any) -> Optional[Execution]:
        """One line; the `Execution` when it is the last (an exception line raises)."""
        execution = self.execution
        if isinstance(line, CellLogLine):
            text: Optional[str] = line.text
            if self._budget is not None:
                text = self._budget.log(line.type, line.text)
            if text is not None:
                getattr(execution.logs, line.type).append(text)
                call(self._callbacks[line.type], OutputMessage(line=text, error=line.type == "stderr",
                                                               timestamp=line.timestamp))
        elif isinstance(line, CellResultLine):
            result = line.to_result()
            if self._budget is None or self._budget.result(result):
                execution.results.append(result)
                call(self._callbacks["result"], result)
        elif isinstance(line, CellErrorLine):
            if execution.error is None:  # a cell raises once
                execution.error = ExecutionError(**line.model_dump(exclude={"type"}))
                call(self._callbacks["error"], execution.error)
        elif isinstance(line, ExecutionCountLine):
            for name, value in line.model_dump(exclude={"type"}).items():
                setattr(execution, name, value)
        elif isinstance(line, EndOfExecutionLine):
            if self._budget is not None:
                self._budget.close(execution)
            return execution
        elif isinstance(line, ErrorBody):
            raise exception_of(line)
        else:
            raise SandboxException(f"{self._source} sent a {type(line).__name__} in a cell's stream")
        return None

    def read(self, lines: Iterable[Any]) -> Execution:
        for line in lines:
            execution = self.take(line)
            if execution is not None:
                return execution
        raise SandboxException(f"{self._source} ended the cell's stream early")


__all__ = ["CellReader", "LineProcess", "StartLine", "cell_lines", "end_line", "event_line", "start_cell"]
