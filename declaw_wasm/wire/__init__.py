"""What travels between `declaw-wasm serve` and the remote SDKs, as pydantic models.

Between server/ and _remote/, sdk-ts/: every request body and every streamed message. The server encodes them, the
Python client decodes them, `/openapi.json` carries them all (the streamed ones under
`components.schemas`), and sdk-ts/src/wire.ts is generated from that document
(sdk-ts/scripts/gen_wire.py; a test fails when it is stale).

The request bodies are also the backend contract's arguments (_backend.py). The responses reuse
the public models (`SandboxInfo`, `EntryInfo`, `WriteInfo`, `ProcessInfo`, `Context`, `Result`,
`ExecutionError`): the JSON the server sends is what the SDK returns.

One home in two modules, so that a sandbox that never meets a server pays only for what it
sends its backend: `bodies.py`, the request bodies the faces make for every backend (loaded with
this package), and `protocol.py`, the rest of the HTTP protocol (responses, streamed lines,
errors; with them the public models of `run_code`'s results and charts), loaded the first time
one of its names is read here (PEP 562). Import either name from `declaw_wasm.wire`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .bodies import (API_KEY_HEADER, PREFIX, CreateContext, CreatePty, CreateSandbox, ResumeSandbox, RunCode,
                     RunCommand, SecretValue, TerminalSize)

if TYPE_CHECKING:
    from .protocol import *  # noqa: F403 -- the names `__getattr__` gives, for the type checker

__all__ = ["API_KEY_HEADER", "PREFIX", "CreateContext", "CreatePty", "CreateSandbox", "ResumeSandbox", "RunCode",
           "RunCommand", "SecretValue", "TerminalSize"]


def __getattr__(name: str) -> Any:
    """A name of protocol.py, imported on first use and kept here."""
    if name.startswith("__") or name in ("bodies", "protocol"):  # (submodules: the import system's)
        raise AttributeError(name)
    protocol = importlib.import_module(f"{__name__}.protocol")
    try:
        value = getattr(protocol, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
