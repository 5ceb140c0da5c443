"""Host tools ("code mode"): call functions of the program that made this sandbox.

    from declaw_tools import search
    hits = search(q="wasm")          # waits for the host's answer
    hits = await search(q="wasm")    # in async code: a top-level `await` in a cell, `async def`

A tool is a function the host passed as `Sandbox.create(tools=...)` or `run_code(tools=...)`;
it runs on the host, and this module asks for it through the door (declaw_wasm/_local/doors.py
declares the ops, declaw_wasm/_local/tools.py answers them). Called from plain code it waits
and returns the value. Called from async code — a coroutine's own frame: an `async def`, or a
cell that awaits anywhere at its top level, which runs as one coroutine — it behaves as an
async function: it returns a coroutine to await, and the host starts the call at once, so
`asyncio.gather(search(q="a"), search(q="b"))` runs both calls at the same time.

Arguments and results cross as msgpack: None, bool, int, float, str, bytes, lists and dicts
(tuples and sets arrive as lists; numpy values as Python numbers and lists), at most the door's
size limit each way. An exception raised by the host function is raised here with its message
only (never a host traceback or path): as itself when it is a built-in class (ValueError,
KeyError, ...), else as `ToolError` (its `type_name` names the host's class).
"""

from __future__ import annotations

import builtins as _builtins
import sys as _sys

from declaw_net import _wire

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    from collections.abc import Callable
    from types import FrameType
    from typing import Any

__all__ = ["ToolError", "available"]

_ASYNC_CODE = 0x80 | 0x200  # inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_INLINE = frozenset({"<genexpr>", "<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>"})
_state = {"limit": 16 << 20}  # the door's size limit, as the host last said


class ToolError(Exception):
    """A host tool failed (with an exception of a class this sandbox does not have), or the
    call could not be made (no such tool, arguments too large or not msgpack)."""

    def __init__(self, message: str, type_name: str = "") -> None:
        super().__init__(message)
        self.type_name = type_name


def _door(op: str, **fields: Any) -> Any:
    import _host

    fields["op"] = op
    return _wire.unpack(_host.call(_wire.pack(fields)))


def _tools() -> dict[str, str]:
    """name -> description of the tools this code may call now."""
    reply = _door("tools.list")
    _state["limit"] = int(reply.get("limit") or _state["limit"])
    return {str(t["name"]): str(t.get("doc") or "") for t in reply.get("tools") or []}


def available() -> list[str]:
    """The names of the host tools this code may call now."""
    return sorted(_tools())


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return ["ToolError", "available", *available()]
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    tools = _tools()
    if name not in tools:
        names = ", ".join(sorted(tools)) or "none"
        raise AttributeError("no host tool named %r in this sandbox (tools: %s)" % (name, names))
    return _tool(name, tools[name])


def __dir__() -> list[str]:
    return ["ToolError", "available", *available()]


def _tool(name: str, doc: str) -> Callable[..., Any]:
    def tool(*args: Any, **kwargs: Any) -> Any:
        return _invoke(name, args, kwargs, _sys._getframe(1))

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc or None
    tool.__module__ = __name__
    return tool


def _invoke(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], caller: FrameType) -> Any:
    payload = _payload(name, args, kwargs)
    if _async_caller(caller):
        reply = _door("tools.start", name=name, payload=payload)
        if "error" in reply:
            raise _error(reply["error"])
        coroutine = _later(reply["id"])
        # "coroutine 'search' was never awaited"; a coroutine object's names are writable (types.CoroutineType)
        coroutine.__name__ = coroutine.__qualname__ = name  # type: ignore[attr-defined]
        return coroutine
    return _outcome(_door("tools.call", name=name, payload=payload))


async def _later(call_id: int) -> Any:
    return _outcome(_door("tools.wait", id=call_id))


def _async_caller(frame: FrameType | None) -> bool:
    """Whether the code calling the tool is a coroutine's (past generator expressions and
    lambdas, which run inside it)."""
    while frame is not None and frame.f_code.co_name in _INLINE:
        frame = frame.f_back
    return frame is not None and bool(frame.f_code.co_flags & _ASYNC_CODE)


def _payload(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    try:
        payload = _wire.pack([list(args), kwargs])
    except (TypeError, OverflowError):
        try:
            payload = _wire.pack([_plain(list(args)), _plain(kwargs)])
        except (TypeError, OverflowError, RecursionError) as exc:
            raise ToolError("the arguments of host tool %r cannot cross to the host: %s "
                            "(msgpack carries None, bool, int, float, str, bytes, lists and "
                            "dicts)" % (name, exc), "TypeError") from None
    if len(payload) > _state["limit"]:
        raise ToolError("the arguments of host tool %r are %d bytes; the door carries at most %d"
                        % (name, len(payload), _state["limit"]), "ValueError")
    return payload


def _plain(value: object, depth: int = 0) -> Any:
    """`value` as the types msgpack carries (numpy values, tuples, sets, str and float
    subclasses converted); anything else raises TypeError."""
    if depth > 500:
        raise TypeError("nested too deeply")
    if value is None or type(value) in (bool, int, float, str, bytes):
        return value
    if isinstance(value, dict):
        return {_plain(k, depth + 1): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars, pandas objects
    if callable(tolist):
        return _plain(tolist(), depth + 1)
    raise TypeError("a %s" % type(value).__name__)


def _outcome(reply: dict[str, Any]) -> Any:
    if "error" in reply:
        raise _error(reply["error"])
    return reply.get("result")


def _error(error: dict[str, Any]) -> Exception:
    kind = str(error.get("type") or "")
    message = str(error.get("message") or "")
    cls = getattr(_builtins, kind, None) if error.get("builtin") else None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:
            pass
    return ToolError(message, kind)
