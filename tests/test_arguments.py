"""Bad arguments are refused the same way wherever the sandbox runs: in this process and through
`declaw-wasm serve` (remote mode), in a process pool and on Ray, the same call raises the same
exception class."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from declaw_wasm import (FileNotFoundException, InvalidArgumentException, NotFoundException, PtySize,
                         Sandbox, SandboxException, SandboxNotFoundException)

pytestmark = [pytest.mark.guest, pytest.mark.served]  # every test here starts guests (tests/conftest.py)

# Each call is wrong on purpose, some in the type of an argument (the `type: ignore`s): the SDK
# checks at run time what a caller without a type checker sends.
CALLS: dict[str, tuple[Callable[[Sandbox], Any], type[Exception]]] = {
    "cmd not a string": (lambda s: s.commands.run(123), InvalidArgumentException),  # type: ignore[arg-type]
    "cmd over 128 KiB": (lambda s: s.commands.run("x" * (128 << 10)), InvalidArgumentException),
    "env name with =": (lambda s: s.commands.run("true", envs={"A=B": "1"}), InvalidArgumentException),
    "env value with NUL": (lambda s: s.commands.run("true", envs={"A": "\0"}), InvalidArgumentException),
    "negative timeout": (lambda s: s.commands.run("true", timeout=-1), InvalidArgumentException),
    "stdin of a bad type": (lambda s: s.commands.run("cat", stdin=3), InvalidArgumentException),  # type: ignore[arg-type]
    "missing cwd": (lambda s: s.commands.run("true", cwd="/no/such/dir"), InvalidArgumentException),
    "empty path": (lambda s: s.files.read(""), InvalidArgumentException),
    "path with NUL": (lambda s: s.files.read("/tmp/a\0b"), InvalidArgumentException),
    "unknown format": (lambda s: s.files.read("/etc/hostname", format="yaml"), InvalidArgumentException),  # type: ignore[call-overload]
    "data of a bad type": (lambda s: s.files.write("/tmp/x", 3), InvalidArgumentException),  # type: ignore[arg-type]
    "missing file": (lambda s: s.files.read("/tmp/no-such-file"), FileNotFoundException),
    "read-only path": (lambda s: s.files.write("/etc/passwd", "x"), Exception),
    "zero-size pty": (lambda s: s.pty.create(PtySize(0, 80)), InvalidArgumentException),
    "code not a string": (lambda s: s.run_code(3), InvalidArgumentException),  # type: ignore[arg-type]
    "unknown language": (lambda s: s.run_code("1", language="r"), InvalidArgumentException),
    "unknown context": (lambda s: s.run_code("1", context="no-such-context"), InvalidArgumentException),  # type: ignore[arg-type]
    "negative lifetime": (lambda s: s.set_timeout(-1), InvalidArgumentException),
    "no such command": (lambda s: s.commands.connect(99999), NotFoundException),
    "metadata key not a token": (lambda s: s.files.write("/tmp/m", "x", metadata={"a b": "c"}),
                                 InvalidArgumentException),
    "metadata value not ASCII": (lambda s: s.files.write("/tmp/m", "x", metadata={"k": "é"}),
                                 InvalidArgumentException),
    "watch a file": (lambda s: s.files.watch_dir("/etc/hostname"), InvalidArgumentException),
    "watch a missing folder": (lambda s: s.files.watch_dir("/tmp/no-such-dir"), FileNotFoundException),
    "write entry without data": (lambda s: s.files.write_files([{"path": "/tmp/w"}]), InvalidArgumentException),
    "stdio cmd not a string": (lambda s: s.stdio.start(3), InvalidArgumentException),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("case", CALLS)
def test_the_same_bad_call_raises_the_same_exception(sbx: Sandbox, case: str) -> None:
    call, expected = CALLS[case]
    with pytest.raises(expected) as raised:
        call(sbx)
    if case == "read-only path":  # the class the in-process backend raises, whatever it is
        assert type(raised.value).__name__ == "SandboxException"


CREATES: dict[str, tuple[dict[str, Any], type[Exception]]] = {
    "misspelt keyword": ({"templat": "base"}, InvalidArgumentException),
    "unknown template": ({"template": "no-such-template"}, InvalidArgumentException),
    "zero lifetime": ({"timeout": 0}, InvalidArgumentException),
    "empty env name": ({"envs": {"": "x"}}, InvalidArgumentException),
    "metadata not strings": ({"metadata": {"a": 1}}, InvalidArgumentException),
    "security not a policy": ({"security": 3}, InvalidArgumentException),
    "policy_json not an object": ({"security": {"policy_json": "[1]"}}, InvalidArgumentException),
    "allow_internet_access not a bool": ({"allow_internet_access": "no"}, InvalidArgumentException),
    "volumes not a list": ({"volumes": "v"}, InvalidArgumentException),
    # E2B's `mcp=` asks for its MCP gateway, which declaw-wasm has not: refused, never ignored
    "an MCP gateway": ({"mcp": {"some_server": {}}}, SandboxException),
    "keep_memory not a bool": ({"lifecycle": {"on_timeout": {"action": "pause", "keep_memory": "x"}}},
                               InvalidArgumentException),
    "keep_memory with kill": ({"lifecycle": {"on_timeout": {"action": "kill", "keep_memory": False}}},
                              InvalidArgumentException),
    "filesystem-only pause with auto_resume": (
        {"lifecycle": {"on_timeout": {"action": "pause", "keep_memory": False}, "auto_resume": True}},
        InvalidArgumentException),
}


@pytest.mark.parametrize("case", CREATES)
def test_the_same_bad_create_raises_the_same_exception(make: Any, case: str) -> None:
    arguments, expected = CREATES[case]
    with pytest.raises(expected):
        make(**arguments).kill()


@pytest.mark.guest
def test_an_unknown_sandbox_is_not_found_both_ways(mode: str, where: Any) -> None:
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect("sbx_" + "0" * 32, **where(mode))
    assert Sandbox.kill("sbx_" + "0" * 32, **where(mode)) is False
