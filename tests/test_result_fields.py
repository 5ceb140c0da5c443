"""Every result field crosses every backend unchanged: a command's `exit_code`, `error`,
`cpu_instructions_used` and stdout/stderr (written in several pieces, also as callbacks), a
PTY's bytes and end, and a cell's logs, results (text, html, json, png, a matplotlib chart),
error and `execution_count` (also as callbacks), compared field by field with the in-process
backend's. One sandbox per backend runs the same script; the in-process run is the reference.

Timing-dependent values, compared only as noted:
- where a stream's output is cut into pieces (callbacks' chunks, a cell's `logs` list items,
  which a busy reader may receive merged): compared joined;
- a log message's `timestamp`: not compared;
- `cpu_instructions_used` of a cell (matplotlib's and the kernel's work vary from run to run
  by ~0.1%) and of a command whose output is cut at the output limit (how often the guest's
  writes wait depends on its reader): compared as present and > 0; a plain command's exactly,
  as one of the two counts the local backend gives that line: on a fresh guest, and on a
  parked one (which ran a throw-away line before, so its line counts ~7% less: docs/limits.md).
  Which of the two a backend's first command gets depends on whether its sandbox was quiet
  long enough to park before the command came (a loaded Ray worker's often was).

Runs with the fuel build (`Limits(cpu_instructions=...)`, tests/test_fuel.py builds it if the
cache lacks it), on the warm path (the other backends run the same host code on both paths).
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Iterator

import pytest

from declaw_wasm import CommandExitException, Limits, Sandbox
from declaw_wasm._wasm.engine import FUEL_FLAGS
from declaw_wasm._wasm.warm_image import get_interpreter
from declaw_wasm.models import PtySize

from conftest import RAY  # tests/ is on sys.path

pytestmark = [pytest.mark.fuel, pytest.mark.timeout(900)]
BACKENDS = ["local", "served", "processes"] + (["ray"] if RAY else [])
LIMITS = Limits(cpu_instructions=20_000_000_000, output_limit=256 << 10)
COMMAND = "echo out1; echo err1 >&2; printf 'out2 '; printf 'err2\\n' >&2; echo out3; exit 3"
FLOOD = "python3 -c 'print(\"x\" * 300000)'"  # past the output limit: cut, with an error
PTY_INPUT = b"printf 'a\\tb\\n'; exit 5\n"
CELL = """
import sys
print("out1")
print("err1", file=sys.stderr)
print("out2", end="")
print(" and more")

class Rich:
    def _repr_html_(self):
        return "<b>rich</b>"
    def _repr_json_(self):
        return {"a": [1, 2.5, None], "b": "text"}
    def __repr__(self):
        return "Rich()"

display(Rich())
import matplotlib.pyplot as plt
plt.figure(); plt.plot([1, 2, 3], [4, 5, 6], label="up"); plt.title("first")
6 * 7
"""
FAILING_CELL = "print('before')\nraise ValueError('bad value')"


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the served, pool and Ray backends run the same host code on both paths


@pytest.fixture(scope="module")
def fuel() -> None:
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    get_interpreter(FUEL_FLAGS, build=True)


def _command(sbx: Sandbox) -> dict[str, Any]:
    chunks: dict[str, list[str]] = {"stdout": [], "stderr": []}
    result = sbx.commands.run(COMMAND, on_stdout=chunks["stdout"].append, on_stderr=chunks["stderr"].append)
    plain = sbx.commands.run(COMMAND)
    flood = sbx.commands.run(FLOOD)
    background = sbx.commands.run(COMMAND, background=True)
    with pytest.raises(CommandExitException) as exited:
        background.wait()
    return {
        "result": result.model_dump(), "plain": plain.model_dump(),
        "callbacks": {name: "".join(parts) for name, parts in chunks.items()},
        "flood": {**flood.model_dump(), "stdout": len(flood.stdout)},
        "background": {name: getattr(exited.value, name) for name in ("exit_code", "stdout", "stderr", "error")},
    }


def _pty(sbx: Sandbox) -> dict[str, Any]:
    data: list[bytes] = []
    got = threading.Event()

    def on_data(chunk: bytes) -> None:
        data.append(chunk)
        got.set()

    handle = sbx.pty.create(PtySize(rows=24, cols=80), on_data=on_data)
    got.wait(30)  # the prompt: the shell reads its input from now on
    sbx.pty.send_stdin(handle.pid, PTY_INPUT)
    with pytest.raises(CommandExitException) as exited:
        handle.wait()
    output = b"".join(data)
    assert b"a\tb" in output
    return {"bytes": output, "exit_code": exited.value.exit_code, "error": exited.value.error}


def _cell(sbx: Sandbox) -> dict[str, Any]:
    seen: dict[str, list[Any]] = {"stdout": [], "stderr": [], "results": [], "errors": []}
    execution = sbx.run_code(CELL, on_stdout=lambda m: seen["stdout"].append(m.line),
                             on_stderr=lambda m: seen["stderr"].append(m.line),
                             on_result=seen["results"].append, on_error=seen["errors"].append)
    plain = sbx.run_code(CELL)
    failed = sbx.run_code(FAILING_CELL, on_error=seen["errors"].append)
    failed_plain = sbx.run_code(FAILING_CELL)

    def fields(execution: Any) -> dict[str, Any]:
        dumped = execution.model_dump(mode="json")
        dumped["logs"] = {name: "".join(lines) for name, lines in dumped["logs"].items()}
        return dumped

    return {
        "execution": fields(execution), "plain": fields(plain), "failed": fields(failed),
        "failed_plain": fields(failed_plain),
        "callbacks": {"stdout": "".join(seen["stdout"]), "stderr": "".join(seen["stderr"]),
                      "results": [r.model_dump(mode="json") for r in seen["results"]],
                      "result_types": [type(r.chart).__name__ for r in seen["results"]],
                      "errors": [e.model_dump(mode="json") for e in seen["errors"]]},
        "chart_types": [type(r.chart).__name__ for r in execution.results],
    }


def _fields(sbx: Sandbox) -> dict[str, Any]:
    return {"command": _command(sbx), "pty": _pty(sbx), "cell": _cell(sbx)}


@pytest.fixture(scope="module")
def outcomes(fuel: None, where: Callable[[str], dict[str, Any]]) -> Iterator[Callable[[str], dict[str, Any]]]:
    """Each backend's fields, measured once (the local reference first)."""
    done: dict[str, dict[str, Any]] = {}

    def of(backend: str) -> dict[str, Any]:
        if backend not in done:
            place = {} if backend == "local" else where(backend)
            with Sandbox.create(timeout=600, limits=LIMITS, **place) as sbx:
                done[backend] = _fields(sbx)
                if backend == "local":
                    done[backend]["command_counts"] = _counts_on_both_paths(sbx)
        return done[backend]
    yield of


def _counts_on_both_paths(sbx: Sandbox) -> set[int]:
    """COMMAND's `cpu_instructions_used` on a fresh guest and on a parked one."""
    from declaw_wasm import testing

    counts = set()
    for prepare in (testing.unpark, testing.park):
        prepare(sbx)
        used = sbx.commands.run(COMMAND).cpu_instructions_used
        assert used is not None
        counts.add(used)
    assert len(counts) == 2, counts  # if the paths ever count alike, compare exactly again
    return counts


def _check_reference(fields: dict[str, Any]) -> None:
    """The local backend's fields are what the script makes (so the comparison means something)."""
    command = fields["command"]["result"]
    assert command["stdout"] == "out1\nout2 out3\n" and command["stderr"] == "err1\nerr2\n"
    assert command["exit_code"] == 3 and command["error"] is None
    assert command["cpu_instructions_used"] in fields["command_counts"]
    assert fields["command"]["callbacks"] == {"stdout": command["stdout"], "stderr": command["stderr"]}
    flood = fields["command"]["flood"]
    assert flood["exit_code"] == 0 and "truncated" in flood["error"] and flood["stdout"] <= LIMITS.output_limit
    assert fields["pty"]["exit_code"] == 5
    cell = fields["cell"]["execution"]
    assert cell["logs"] == {"stdout": "out1\nout2 and more\n", "stderr": "err1\n"}
    kinds = [(r["html"] is not None, r["json"] is not None, r["png"] is not None, r["chart"] is not None,
              r["is_main_result"]) for r in cell["results"]]
    assert kinds == [(True, True, False, False, False), (False, False, False, False, True),
                     (False, False, True, True, False)], kinds
    assert fields["cell"]["chart_types"][2] == "LineChart"
    assert cell["error"] is None and cell["execution_count"] and cell["cpu_instructions_used"] > 0
    failed = fields["cell"]["failed"]
    assert failed["error"]["name"] == "ValueError" and failed["logs"]["stdout"] == "before\n"
    assert fields["cell"]["callbacks"]["errors"] == [failed["error"]]


def _differences(reference: Any, other: Any, path: str = "") -> list[str]:
    if isinstance(reference, dict) and isinstance(other, dict):
        return [d for key in sorted(set(reference) | set(other), key=str)
                for d in _differences(reference.get(key, "<absent>"), other.get(key, "<absent>"), f"{path}.{key}")]
    if isinstance(reference, list) and isinstance(other, list) and len(reference) == len(other):
        pairs = enumerate(zip(reference, other, strict=True))
        return [d for i, (a, b) in pairs for d in _differences(a, b, f"{path}[{i}]")]
    return [] if reference == other else [f"{path}: {str(reference)[:200]!r} != {str(other)[:200]!r}"]


def _timing_free(fields: dict[str, Any], reference_counts: set[int]) -> dict[str, Any]:
    """The fields with the timing-dependent values (named in the module's docstring) replaced
    by what is compared of them (`reference_counts`: the local backend's counts of COMMAND)."""
    def used(value: Any) -> Any:
        return "> 0" if isinstance(value, int) and value > 0 else value

    def counted(value: Any) -> Any:
        return "one of the local paths' counts" if value in reference_counts else value

    command = {name: {**value} if isinstance(value, dict) else value for name, value in fields["command"].items()}
    command["flood"]["cpu_instructions_used"] = used(command["flood"].get("cpu_instructions_used"))
    for name in ("result", "plain"):
        command[name]["cpu_instructions_used"] = counted(command[name].get("cpu_instructions_used"))
    cell = {name: {**value, "cpu_instructions_used": used(value.get("cpu_instructions_used"))}
            if name in ("execution", "plain", "failed", "failed_plain") else value
            for name, value in fields["cell"].items()}
    return {**{k: v for k, v in fields.items() if k != "command_counts"}, "command": command, "cell": cell}


def test_the_end_lines_carry_every_field_of_a_result() -> None:
    """What the stream does not carry in lines of their own travels in its end line, by name:
    a field added to `CommandResult` or `Execution` and not to `EndLine` or `ExecutionCountLine`
    fails here (the test below then runs it through every backend)."""
    from declaw_wasm._lines import STREAMED_CELL_FIELDS, STREAMED_COMMAND_FIELDS
    from declaw_wasm.execution import Execution
    from declaw_wasm.models import CommandResult
    from declaw_wasm.wire import EndLine, ExecutionCountLine

    assert set(EndLine.model_fields) - {"type"} == set(CommandResult.model_fields) - STREAMED_COMMAND_FIELDS
    assert set(ExecutionCountLine.model_fields) - {"type"} == set(Execution.model_fields) - STREAMED_CELL_FIELDS


@pytest.mark.guest
@pytest.mark.parametrize("backend", BACKENDS)
def test_every_result_field_is_the_same_on_every_backend(backend: str,
                                                          outcomes: Callable[[str], dict[str, Any]]) -> None:
    reference = outcomes("local")
    _check_reference(reference)
    counts = reference["command_counts"]
    differences = _differences(_timing_free(reference, counts), _timing_free(outcomes(backend), counts))
    assert not differences, f"{backend} differs from the local backend:\n" + "\n".join(differences)
