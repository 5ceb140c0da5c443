"""One face, two calling conventions: every public method of the sync faces has an async twin
with the same parameters (names, order, defaults), as E2B PR #1109's parity test checks for
its SDK. The differences the reference APIs themselves have are listed, reviewed, here."""

from __future__ import annotations

import inspect

import pytest

from declaw_wasm import AsyncSandbox, CommandHandle, Sandbox
from declaw_wasm.async_sandbox import (AsyncCommandHandle, AsyncCommands, AsyncFilesystem, AsyncPty,
                                       AsyncStdio, AsyncStdioProcess)
from declaw_wasm.commands import Commands
from declaw_wasm.files import Filesystem
from declaw_wasm.pty import Pty
from declaw_wasm.stdio import Stdio, StdioProcess

PAIRS = [(Sandbox, AsyncSandbox), (Filesystem, AsyncFilesystem), (Commands, AsyncCommands),
         (Pty, AsyncPty), (CommandHandle, AsyncCommandHandle), (Stdio, AsyncStdio),
         (StdioProcess, AsyncStdioProcess)]
# (async class, method) -> why its parameters differ from the sync twin's
DIFFERENCES = {
    ("AsyncPty", "create"): "E2B's async pty.create takes on_data second: create(size, on_data, ...)",
    ("AsyncPty", "connect"): "E2B's async pty.connect takes on_data (the sync handle binds it later)",
    ("AsyncCommands", "connect"): "E2B's async commands.connect takes on_stdout/on_stderr",
    ("AsyncFilesystem", "watch_dir"): "E2B's async watch_dir takes on_event, on_exit and timeout "
                                      "(events are pushed; the sync handle is polled)",
}
# declaw's AsyncSandbox has flat methods its sync Sandbox lacks (it has no .commands/.files)
DECLAW_FLAT = {"run_command", "list_commands", "kill_command", "connect_command", "send_command_stdin",
               "read_file", "write_file", "write_files", "list_files", "file_exists", "get_file_info",
               "remove_file", "rename_file", "make_dir"}
ASYNC_ONLY = {"__aiter__", "__aenter__", "__aexit__", "stdout", "stderr", "exit_code", "error"} | DECLAW_FLAT
SYNC_ONLY = {"__iter__", "__enter__", "__exit__"}
# async members that are plain methods in the reference APIs
NOT_COROUTINES = {
    "disconnect": "E2B's AsyncCommandHandle.disconnect",
    "list": "E2B's AsyncSandbox.list returns a paginator (awaiting it gives declaw's answer)",
    "connect_command": "declaw's AsyncSandbox.connect_command is a plain method",
    "__aiter__": "the protocol's",
    "download_url": "E2B's AsyncSandbox.download_url builds a URL: a plain method",
    "upload_url": "E2B's AsyncSandbox.upload_url builds a URL: a plain method",
    "get_host": "E2B's AsyncSandbox.get_host builds a host name: a plain method",
}


def _public(cls: type) -> dict[str, object]:
    return {name: member for name, member in vars(cls).items()
            if (callable(member) or isinstance(member, (property, classmethod, staticmethod))
                or hasattr(member, "method"))
            and not name.startswith("_") or name in ("__iter__", "__aiter__", "__enter__", "__exit__",
                                                      "__aenter__", "__aexit__")}


def _parameters(member: object) -> list[tuple[str, object]]:
    function = getattr(member, "method", None) or getattr(member, "__func__", None) or member
    if isinstance(function, property):
        return []
    signature = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.default) for p in signature.parameters.values()]


@pytest.mark.parametrize("sync, twin", PAIRS, ids=[t.__name__ for _, t in PAIRS])
def test_every_method_has_a_twin_with_the_same_parameters(sync: type, twin: type) -> None:
    ours, theirs = _public(sync), _public(twin)
    assert set(ours) - set(theirs) - SYNC_ONLY == set(), "methods without an async twin"
    assert set(theirs) - set(ours) - ASYNC_ONLY == set(), "async methods without a sync twin"
    for name in set(ours) & set(theirs):
        if (twin.__name__, name) in DIFFERENCES:
            continue
        assert _parameters(theirs[name]) == _parameters(ours[name]), f"{twin.__name__}.{name}"


@pytest.mark.parametrize("sync, twin", PAIRS, ids=[t.__name__ for _, t in PAIRS])
def test_async_methods_are_coroutines(sync: type, twin: type) -> None:
    for name, member in _public(twin).items():
        function = getattr(member, "method", None) or getattr(member, "__func__", None) or member
        if callable(function) and not name.startswith("__") and name not in NOT_COROUTINES \
                and not isinstance(member, property) and not isinstance(member, type):
            assert inspect.iscoroutinefunction(function), f"{twin.__name__}.{name} is not async"
