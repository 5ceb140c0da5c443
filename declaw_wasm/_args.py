"""Argument checks, written once: the faces call them before any backend sees a call (so every
backend rejects the same bad input with the same exception), and the server's routes call
them for clients that are not ours."""

from __future__ import annotations

from typing import Any, Optional

from .exceptions import InvalidArgumentException
from .limits import MAX_COMMAND_LINE
from .models import PtySize

# E2B and declaw keyword arguments of `Sandbox.create` that mean nothing here; accepted so code
# written for them runs unchanged. Any other unknown keyword is an error (a misspelling).
IGNORED_CREATE_PARAMS = frozenset({
    "api_key", "domain", "debug", "request_timeout", "secure", "allow_internet_access", "api_url",
    "sandbox_url", "proxy", "headers", "logger", "mcp", "network", "lifecycle", "user"})
LANGUAGES = {"python": "python", "py": "python", "python3": "python"}


def create_params(extra: dict[str, Any]) -> None:
    unknown = set(extra) - IGNORED_CREATE_PARAMS
    if unknown:
        raise InvalidArgumentException(f"unexpected argument(s) to create: {', '.join(sorted(unknown))}")
    lifecycle = extra.get("lifecycle")
    if (lifecycle.get("checkpoint") if isinstance(lifecycle, dict) else getattr(lifecycle, "checkpoint", None)):
        raise InvalidArgumentException("lifecycle={'checkpoint': ...} (node-loss checkpointing) needs sandbox "
                                       "snapshots and a shared state store, not built yet (_ray/checkpoint.py)")


def lifetime(timeout: Any) -> float:
    """A sandbox's lifetime: a positive number of seconds."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise InvalidArgumentException(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def timeout(value: Any) -> Optional[float]:
    """A command's or cell's timeout: seconds >= 0 (0 or None: none)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidArgumentException(f"timeout must be a number of seconds >= 0, got {value!r}")
    return float(value) or None


def string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise InvalidArgumentException(f"{what} must be a dict of str to str")
    return dict(value)


def envs(value: Any) -> dict[str, str]:
    """`envs` as a guest environment: names a C environment can hold (non-empty, no `=`, no
    NUL), values without NUL, all valid UTF-8 (WASI passes the environment as UTF-8)."""
    result = string_map(value, "envs")
    for name, text in result.items():
        if not name or "=" in name or "\x00" in name:
            raise InvalidArgumentException(f"envs: invalid variable name {name!r} (empty, or has '=' or NUL)")
        if "\x00" in text:
            raise InvalidArgumentException(f"envs: the value of {name!r} contains a NUL byte")
        try:
            name.encode("utf-8")
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgumentException(f"envs: {name!r} or its value is not valid UTF-8 "
                                           "(lone surrogate)") from None
    return result


def path(value: Any) -> str:
    """A path in the sandbox: a non-empty string the guest's WASI can name (no NUL, valid UTF-8)."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentException(f"path must be a non-empty string, got {value!r}")
    if "\x00" in value:
        raise InvalidArgumentException(f"path contains a NUL byte: {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the guest's WASI could not read the name back
        raise InvalidArgumentException(f"path is not valid UTF-8 (lone surrogate): {value!r}") from None
    return value


def write_data(data: Any) -> None:
    if not isinstance(data, (str, bytes, bytearray, memoryview)) and not hasattr(data, "read"):
        raise InvalidArgumentException(
            f"data must be str, bytes or a file-like object, got {type(data).__name__}")


def template(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentException(f"template must be a string, got {value!r}")
    return value


def command(cmd: Any) -> str:
    """A command line: a string shorter than Linux's MAX_ARG_STRLEN (what `bash -c` takes)."""
    if not isinstance(cmd, str):
        raise InvalidArgumentException(f"cmd must be a string, got {type(cmd).__name__}")
    size = len(cmd.encode("utf-8", "surrogatepass"))
    if size >= MAX_COMMAND_LINE:
        raise InvalidArgumentException(
            f"command line of {size} bytes: Argument list too long (bash -c takes at most "
            f"{MAX_COMMAND_LINE - 1}, Linux's MAX_ARG_STRLEN); put long data in a file with files.write")
    return cmd


def stdin(value: Any) -> None:
    if value is not None and not isinstance(value, (bool, str, bytes)):
        raise InvalidArgumentException("stdin must be a bool (keep stdin open), str or bytes")


def stdin_data(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentException(f"stdin data must be str or bytes, got {type(data).__name__}")
    return bytes(data)


def pty_size(size: Any) -> PtySize:
    if not isinstance(size, PtySize) or not (0 < size.rows <= 10000 and 0 < size.cols <= 10000):
        raise InvalidArgumentException(f"size must be a PtySize with positive rows and cols, got {size!r}")
    return size


def code(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentException(f"code must be a string, got {type(value).__name__}")
    return value


def language(value: Optional[str]) -> str:
    name = LANGUAGES.get((value or "python").lower()) if isinstance(value, (str, type(None))) else None
    if name is None:
        raise InvalidArgumentException(f"language {value!r} is not available here; only python")
    return name


def context_id(context: Any) -> Optional[str]:
    """A `Context` or its id (None: the default context)."""
    found = getattr(context, "id", context)
    if found is not None and (not isinstance(found, str) or not found):
        raise InvalidArgumentException(f"context must be a Context or its id, got {context!r}")
    return found
