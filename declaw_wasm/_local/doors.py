"""Every request a guest may make through the door, declared once, and the one dispatcher that
answers them.

A guest calls `_host.call(msgpack({"op": name, **fields}))` (guest side:
runtime/declaw_shell/door.py's `call(op, **fields)`); the host answers on the guest's thread
(_wasm/shims.py's `DoorTransport` reads the frame). Which ops a guest may use depends on what it
is: a command's guest (`_local/processes.py`) and a code context's guest (`_local/kernel.py`)
each hand `dispatch` the handlers they answer; any other op is refused. The network ops
(`net.*`) are declared in `_egress/ops.py`, beside the session that answers them, and listed here. tests/test_layers.py
checks that every op the guest-side code names is declared here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from .._egress.ops import OPS as NET_OPS
from .._wasm.guest import Guest

Handler = Callable[[Guest, dict[str, Any]], Any]


@dataclass(frozen=True)
class Op:
    name: str
    request: tuple[str, ...]  # the fields besides "op"
    reply: str
    doc: str


OPS: dict[str, Op] = {op.name: op for op in [
    Op("exit", ("code",), "nil",
       "the exit status before os._exit (WASI's proc_exit carries 0..125 only); answered by "
       "the transport itself (_wasm/shims.py), for every guest"),
    Op("stdin", ("n", "wait"), "bytes | nil",
       "up to n bytes of the command's live stdin, waiting for some (at most `wait` seconds if "
       "given: nil when none came); b'' at end of input"),
    Op("winsize", (), "[rows, cols]", "the terminal's size"),
    Op("sysinfo", (), "{pid, mem_total, mem_used, uptime, cpus, processes: [{pid, cmd, args, cwd, tty, "
       "started, cpu, memory}]}",
       "what `free`, `ps`, `uptime` show: the sandbox's memory limit and its guests' use (as "
       "get_metrics), its running commands (as commands.list(); `pid` is the asker's)"),
    Op("pip_install", ("requirements", "wheels", "find_links", "present", "no_index", "no_deps"),
       "{status, stdout, stderr}", "`pip install` in the sandbox, resolved and fetched by the host "
       "(every field parsed and written back first: _packages/pip.py's parse_request)"),
    Op("stdout", ("text",), "nil", "a cell's output"),
    Op("stderr", ("text",), "nil", "a cell's error output"),
    Op("result", ("data", "main"), "nil", "a cell's rich result (MIME bundle; main: the cell's value)"),
    Op("error", ("name", "value", "traceback"), "nil", "a cell's uncaught exception"),
    # host tools ("code mode", runtime/declaw_tools): functions of the program that made the
    # sandbox, answered by _local/tools.py. `payload` is msgpack bytes of [args, kwargs]; a call's
    # reply is {"result": value} or {"error": {"type", "message", "builtin"}}.
    Op("tools.list", (), "{tools: [{name, doc}], limit}",
       "the host tools this guest may call now (the cell's and the sandbox's) and the door's "
       "size limit for arguments and results"),
    Op("tools.call", ("name", "payload"), "{result} | {error}",
       "call a host tool and wait for it (on an executor: the wait honours the cell's timeout "
       "and kill())"),
    Op("tools.start", ("name", "payload"), "{id} | {error}",
       "start a host tool call without waiting (async code: asyncio.gather runs calls at once)"),
    Op("tools.wait", ("id",), "{result} | {error}", "wait for a call `tools.start` began"),
    # the guest's network: sockets and TLS through the host (_egress/ops.py declares each)
    *(Op(op.name, op.request, "{" + ", ".join(op.reply) + "}", op.doc) for op in NET_OPS.values()),
]}


def net_handlers(egress: Any) -> dict[str, Handler]:
    """The network ops, answered by the sandbox's egress session (any guest may use them)."""
    return {name: egress.handle for name in NET_OPS}


def dispatch(handlers: Mapping[str, Handler], guest: Guest, request: Any) -> Any:
    """Answer one request with the handler for its op; unknown or unoffered ops raise (the
    transport then answers the guest with an error)."""
    op = request.get("op") if isinstance(request, dict) else None
    handler = handlers.get(op) if isinstance(op, str) and op in OPS else None
    if handler is None:
        raise ValueError(f"unknown door request {op!r}")
    return handler(guest, request)
