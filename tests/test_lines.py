"""The one stream protocol's readers (declaw_wasm/_lines.py), pure: what they make of lines out of
place, of a stream that ends early and of bad terminal data; every line crosses the pool's codec.
(tests/test_result_fields.py runs real streams through every backend.)"""

from __future__ import annotations

import base64
from datetime import datetime, timezone
from typing import Any

import pytest

from declaw_wasm import SandboxException, TimeoutException
from declaw_wasm._lines import CellReader, LineProcess, cell_lines
from declaw_wasm._pool.codec import pack, unpack
from declaw_wasm.models import PtySize
from declaw_wasm.execution import Execution, ExecutionError, OutputMessage, Result
from declaw_wasm.wire import (CellErrorLine, CellLogLine, CellResultLine, EndLine, EndOfExecutionLine,
                              ExceptionLine, ExecutionCountLine, OutputLine, PtyLine, StartLine)

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)


class Calls:
    """A sandbox's control calls, recorded (what a command's copy asks of its sandbox)."""

    def __init__(self) -> None:
        self.made: list[tuple[Any, ...]] = []

    def kill_process(self, pid: int) -> bool:
        self.made.append(("kill_process", pid))
        return True

    def send_stdin(self, pid: int, data: bytes) -> None:
        self.made.append(("send_stdin", pid, data))

    def close_stdin(self, pid: int) -> None:
        self.made.append(("close_stdin", pid))

    def resize_pty(self, pid: int, size: PtySize) -> None:
        self.made.append(("resize_pty", pid, size.rows, size.cols))


def _process(lines: list[Any]) -> LineProcess:
    process = LineProcess(Calls(), 1, "cmd", {})
    process.pump(iter(lines), inline=True)
    return process


def test_a_commands_lines_make_its_result_and_its_callbacks() -> None:
    seen: list[Any] = []
    process = LineProcess(Calls(), 1, "cmd", {"stdout": seen.append, "pty": seen.append})
    process.pump(iter([OutputLine(type="stdout", data="a"), OutputLine(type="stderr", data="b"),
                       PtyLine(data=base64.b64encode(b"\x00t").decode()), OutputLine(type="stdout", data="c"),
                       EndLine(exit_code=3, error="e", cpu_instructions_used=7)]), inline=True)
    result = process.result()
    assert (result.stdout, result.stderr, result.exit_code, result.error, result.cpu_instructions_used) == \
        ("ac", "b", 3, "e", 7)
    assert seen == ["a", b"\x00t", "c"]


def test_a_line_out_of_place_ends_the_command_with_an_error_naming_it() -> None:
    with pytest.raises(SandboxException, match="sent a CellLogLine in a command's stream"):
        _process([CellLogLine(type="stdout", text="x", timestamp=NOW)]).result()


def test_a_command_stream_that_ends_early_says_so() -> None:
    with pytest.raises(SandboxException, match="ended the command's stream early"):
        _process([OutputLine(type="stdout", data="x")]).result()


def test_terminal_data_that_is_not_base64_is_an_error() -> None:
    with pytest.raises(SandboxException, match="not base64"):
        _process([PtyLine(data="!!not base64!!")]).result()


def test_a_timeout_carries_the_output_streamed_so_far() -> None:
    with pytest.raises(TimeoutException) as raised:
        _process([OutputLine(type="stdout", data="so far"),
                  ExceptionLine(error="TimeoutException", message="late")]).result()
    assert raised.value.stdout == "so far"


def test_a_cells_lines_make_its_execution_and_its_callbacks() -> None:
    seen: list[Any] = []
    execution = Execution(execution_count=4, cpu_instructions_used=9)
    items = [("log", OutputMessage(line="out", timestamp=NOW)), ("log", OutputMessage(line="err", error=True)),
             ("result", Result(text="42", is_main_result=True)),
             ("error", ExecutionError(name="E", value="v", traceback="t")), ("done", execution)]
    lines, finished = cell_lines(items)
    assert finished and isinstance(lines[-1], EndOfExecutionLine)
    reader = CellReader(on_stdout=seen.append, on_result=seen.append, on_error=seen.append)
    got = reader.read(lines)
    assert got.logs.stdout == ["out"] and got.logs.stderr == ["err"] and got.text == "42"
    assert got.error == ExecutionError(name="E", value="v", traceback="t") and type(got.error) is ExecutionError
    assert (got.execution_count, got.cpu_instructions_used) == (4, 9)
    assert [type(s).__name__ for s in seen] == ["OutputMessage", "Result", "ExecutionError"]


def test_a_line_out_of_place_in_a_cell_is_an_error_naming_it() -> None:
    with pytest.raises(SandboxException, match="sent a OutputLine in a cell's stream"):
        CellReader().read([OutputLine(type="stdout", data="x")])
    with pytest.raises(SandboxException, match="ended the cell's stream early"):
        CellReader().read([CellLogLine(type="stdout", text="x", timestamp=NOW)])


LINES = [StartLine(pid=1), OutputLine(type="stdout", data="x\udcff"), PtyLine(data="AA=="),
         EndLine(exit_code=1, cpu_instructions_used=5), ExceptionLine(error="SandboxException", message="m"),
         CellLogLine(type="stderr", text="t", timestamp=NOW), CellResultLine(html="<b>", is_main_result=True),
         CellErrorLine(name="E", value="v", traceback="t"), ExecutionCountLine(execution_count=2),
         EndOfExecutionLine()]


def test_every_line_crosses_the_pool_codec() -> None:
    assert unpack(pack([LINES])) == [LINES]


def test_a_commands_control_goes_to_its_sandbox_naming_its_pid() -> None:
    calls = Calls()
    process = LineProcess(calls, 7, "cmd", {})
    assert process.kill() is True
    process.send_stdin(b"x")
    process.close_stdin()
    process.resize(PtySize(rows=3, cols=4))
    assert calls.made == [("kill_process", 7), ("send_stdin", 7, b"x"), ("close_stdin", 7), ("resize_pty", 7, 3, 4)]
