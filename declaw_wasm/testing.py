"""For tests and benchmarks: a look behind an in-process sandbox. Not for applications.

Its host folder, mounts, limits, guest path, so that tests never reach into private
attributes."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Optional

from ._local.sandbox import LocalSandbox
from ._wasm.engine import Interpreter
from ._wasm.layout import Mount
from .limits import Limits


def local(sbx: Any) -> LocalSandbox:
    """The in-process backend of a `Sandbox` or `AsyncSandbox`."""
    backend = getattr(getattr(sbx, "_sync", sbx), "_backend", None)
    if not isinstance(backend, LocalSandbox):
        raise TypeError(f"{sbx!r} is not an in-process sandbox")
    return backend


def host_folder(sbx: Any) -> Path:
    """The sandbox's private host folder (deleted on kill)."""
    return local(sbx).fs.base


def host_root(sbx: Any) -> Path:
    """The host folder behind the guest's `/`."""
    return local(sbx).fs.root


def host_path(sbx: Any, guest_path: str) -> Optional[Path]:
    """Where a guest path lives on the host (None outside the sandbox's own folders)."""
    return local(sbx).fs.host_path(guest_path)


def mounts(sbx: Any) -> list[Mount]:
    return list(local(sbx).fs.mounts)


def limits_of(sbx: Any) -> Limits:
    return local(sbx).limits


def interpreter_of(sbx: Any) -> Interpreter:
    return local(sbx).interpreter


runtime_of = interpreter_of  # (old name), kept as an alias


def is_warm(sbx: Any) -> bool:
    """Whether the sandbox's guests start from the warm image."""
    return interpreter_of(sbx).warm


def is_local(sbx: Any) -> bool:
    """Whether the sandbox runs in this process (not on a server)."""
    return isinstance(getattr(getattr(sbx, "_sync", sbx), "_backend", None), LocalSandbox)


def finished(handle: Any) -> bool:
    """Whether a `CommandHandle`'s command has ended (without waiting)."""
    return bool(getattr(handle, "_handle", handle)._process.done)


def park(sbx: Any, timeout: float = 60.0) -> None:
    """Give the sandbox a parked guest now and wait until it has parked (warm path only)."""
    import time

    from ._local.parking import parking

    backend = local(sbx)
    deadline = time.monotonic() + timeout
    while not parking.is_parked(backend):
        parking.park(backend)  # again if another sandbox's parking evicted it meanwhile
        if time.monotonic() > deadline:
            raise TimeoutError("no parked guest")
        time.sleep(0.005)


def unpark(sbx: Any) -> None:
    """Stop the sandbox's parked guest, so its next command starts a fresh one."""
    from ._local.parking import parking

    parking.drop(local(sbx))


def parked_hits() -> int:
    """Commands that found a parked guest, in this process so far."""
    from ._local.parking import parking

    return parking.hits


def egress_of(sbx: Any) -> Any:
    """The sandbox's egress session (its network: resolver, connections, guard hook, audit)."""
    return local(sbx).egress


class Door(NamedTuple):
    """A running guest's door, host side: the guest, its dispatcher (what the transport calls
    with each decoded request: `answer(guest, request)`) and its routes (op name -> the
    declaration and the handler)."""

    guest: Any
    answer: Any
    routes: dict[str, Any]


def command_door(handle: Any) -> Door:
    """The door of a running command's guest (`handle`: a background `CommandHandle`)."""
    process = getattr(handle, "_handle", handle)._process
    return Door(process.guest, process._door, process._routes)


def context_door(sbx: Any, context_id: Optional[str] = None) -> Door:
    """The door of a code context's guest (the default context's unless given; started)."""
    kernel = local(sbx).code._kernel(context_id)
    if kernel.guest is None:
        raise RuntimeError("the context has no guest yet: run a cell first")
    return Door(kernel.guest, kernel._door, kernel._routes)
