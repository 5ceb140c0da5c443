"""The one dispatcher of door requests, and the list of every op a guest may ask for.

A guest calls `_host.call(msgpack({"op": name, **fields}))` (guest side:
guest/declaw_shell/door.py's `call(op, **fields)`); the host answers on the guest's thread
(_wasm/shims.py's `DoorTransport` reads the frame within _wasm/door.py's bounds). Every op is
declared once, beside its handler, as an `Op` (_wasm/door.py: each request field's type,
length or count, characters or range, required or not, None allowed or not):

- `exit`: _wasm/shims.py, and `timer`: _wasm/timers.py (answered by the transport itself, for
  every guest);
- `stdin`, `winsize`, `sysinfo`: _local/processes.py (a command's guest);
- `stdout`, `stderr`, `result`, `error`: _local/kernel.py (a code context's guest);
- `pip_install`: _packages/install_op.py (its parser, _packages/pip.py's `parse_request`, is
  the deeper check);
- `tools.*`: _local/tools.py (host tools);
- `net.*`: _egress/ops.py (the guest's network, answered by the sandbox's egress session).

Which ops a guest may use depends on what it is: a command's guest (processes.py) and a code
context's guest (kernel.py) each hand `dispatch` their routes, an `Op` and its handler per
name. `dispatch` checks the request against the op's declaration before the handler runs: an
unknown or unoffered op, an unknown field, a wrong type, an over-long value, too many items or
a disallowed character is answered with an error naming the op and the field, and the handler
never sees the request. A handler gets a dict of the declared fields only (without "op").
door_ops.py's `OPS` lists every declaration; tests/test_layers.py checks that every op the
guest-side code names is declared, tests/test_door_ops.py that every route has its declaration
and that no handler reads a field its op does not declare.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .._wasm.door import Op, RequestError, shown
from .._wasm.guest import Guest

Handler = Callable[[Guest, dict[str, Any]], Any]
Route = tuple[Op, Handler]
Routes = dict[str, Route]


def routes(*pairs: Route) -> Routes:
    """Routes from (declaration, handler) pairs: a handler cannot be offered without one."""
    table: Routes = {}
    for op, handler in pairs:
        assert isinstance(op, Op) and op.name not in table, op
        table[op.name] = (op, handler)
    return table


def dispatch(table: Mapping[str, Route], guest: Guest, request: Any) -> Any:
    """Answer one request: check it against its op's declaration, then run its handler. A
    refused request (unknown op, bad fields) is answered with the error reply naming the op and
    the field; a frame that is not a request at all (no map, no op name) raises, and the
    transport answers the guest with its own error."""
    op = request.get("op") if type(request) is dict else None
    if type(op) is not str:
        raise ValueError(f"not a door request (a map with an op name): {shown(request)}")
    route = table.get(op)
    if route is None:
        return RequestError(op[:40], "", f"not an op this guest may use (its ops: "
                            f"{', '.join(sorted(table))})").reply()
    declared, handler = route
    try:
        fields = declared.check(request)
    except RequestError as exc:
        return declared.refused(exc)
    return handler(guest, fields)


def net_routes(egress: Callable[[], Any]) -> list[Route]:
    """The network ops, answered by the sandbox's egress session, `egress()`: built at a guest's
    first network op (any guest may use them)."""
    from .._egress.ops import OPS as NET_OPS

    def answer(name: str) -> Handler:
        return lambda guest, fields: egress().answer(guest, name, fields)

    return [(op, answer(name)) for name, op in NET_OPS.items()]
