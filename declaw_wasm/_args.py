"""Argument checks, written once: the faces and the server's routes call them before any backend sees a call.

So every backend rejects the same bad input with the same exception; the server's routes
call them for clients that are not ours."""

from __future__ import annotations

import json
import keyword
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

from .exceptions import InvalidArgumentException, SandboxException
from .limits import MAX_COMMAND_LINE
from .models import PtySize

# E2B keyword arguments of `Sandbox.create` that mean nothing here (declaw's are parameters of
# their own); accepted so code written for E2B runs unchanged. Any other unknown keyword is an
# error (a misspelling).
IGNORED_CREATE_PARAMS = frozenset({
    "debug", "api_url", "sandbox_url", "proxy", "headers", "logger", "mcp", "user", "iam",
    "volume_mounts", "auto_pause"})
ALL_TRAFFIC = "0.0.0.0/0"  # declaw's `ALL_TRAFFIC`
# run_code's languages: Python, and bash (E2B's bash kernel: cells run by the guest's shell)
LANGUAGES = {"python": "python", "py": "python", "python3": "python", "bash": "bash", "sh": "bash"}


def create_params(extra: dict[str, Any]) -> None:
    unknown = set(extra) - IGNORED_CREATE_PARAMS
    if unknown:
        raise InvalidArgumentException(f"unexpected argument(s) to create: {', '.join(sorted(unknown))}")
    if extra.get("mcp"):  # a sandbox without the gateway it was asked for must not start (E2B's rule)
        raise SandboxException("Failed to start MCP gateway: declaw-wasm sandboxes have no MCP gateway "
                               "(E2B's `mcp=`); `declaw-wasm mcp` serves sandboxes over MCP instead")


def config(value: Any, what: str) -> Optional[dict[str, Any]]:
    """A declaw config object (anything with `to_dict()`, or a pydantic model) or a dict, as
    the JSON-able dict declaw's SDK sends; None stays None."""
    if value is None:
        return None
    for method in ("to_dict", "model_dump"):
        if callable(getattr(value, method, None)) and not isinstance(value, dict):
            value = getattr(value, method)()
            break
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InvalidArgumentException(f"{what} must be a dict or a config object with to_dict(), "
                                       f"got {type(value).__name__}")
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        raise InvalidArgumentException(f"{what} must be JSON-serialisable") from None


CHECKPOINT_POLICIES = ("cell",)  # lifecycle.checkpoint (_local/checkpoints.py)


def checkpoint_policy(lifecycle: Any) -> Optional[str]:
    """The checkpoint policy a create's `lifecycle` asks for (None: none)."""
    value = lifecycle.get("checkpoint") if isinstance(lifecycle, dict) else getattr(lifecycle, "checkpoint", None)
    return None if value in (None, "", "none") else str(value)


def lifecycle(value: Any) -> Optional[dict[str, Any]]:
    """declaw's `SandboxLifecycle` (or its dict), with our `checkpoint`: `"cell"` checkpoints a
    sandbox hosted by a pool or Ray after each turn, to restore it when its host is lost
    (_local/checkpoints.py; an in-process backend refuses it)."""
    found = config(value, "lifecycle")
    if found and "on_timeout" in found:
        found = {**found, **_on_timeout(found["on_timeout"])}
        if found.get("keep_memory") is False and found.get("auto_resume"):
            raise InvalidArgumentException("a filesystem-only pause (keep_memory=False) resumes by connect() "
                                           "only: it cannot be combined with auto_resume")
    if found and found.get("checkpoint") not in (None, "none", *CHECKPOINT_POLICIES):
        raise InvalidArgumentException(f"lifecycle.checkpoint must be 'cell' (or None), got {found['checkpoint']!r}")
    if found and found.get("on_timeout", "kill") not in ("kill", "pause"):
        raise InvalidArgumentException(f"lifecycle.on_timeout must be 'kill' or 'pause', got {found['on_timeout']!r}")
    return found


def _on_timeout(value: Any) -> dict[str, Any]:
    """E2B's forms of `on_timeout`: None (untyped: kill, as if missing), a name, or
    `{"action": "pause", "keep_memory": bool | None}` (False: a filesystem-only pause)."""
    if value is None:
        return {"on_timeout": "kill"}
    if isinstance(value, dict):
        found: dict[str, Any] = {"on_timeout": value.get("action") or "kill"}
        if value.get("keep_memory") is not None:
            if found["on_timeout"] != "pause":
                raise InvalidArgumentException("lifecycle.on_timeout.keep_memory goes with action 'pause' only")
            found["keep_memory"] = keep_memory(value["keep_memory"])
        return found
    return {"on_timeout": value}


def snapshot_id(value: Any, what: str = "snapshot_id") -> str:
    """A snapshot's (or sandbox's) id, as the state store spells them."""
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}", value):
        raise InvalidArgumentException(f"{what} must be an id such as 'snap_...', got {str(value)[:200]!r}")
    return value


def fork_count(value: Any) -> int:
    """How many forks (1-64; None: one)."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
        raise InvalidArgumentException(f"count must be a whole number from 1 to 64, got {value!r}")
    return value


def security(value: Any) -> Optional[dict[str, Any]]:
    """A security policy as declaw sends it: `{"policy_json": "<the policy's JSON>"}`."""
    if isinstance(value, dict) and set(value) == {"policy_json"}:
        if not isinstance(value["policy_json"], str):
            raise InvalidArgumentException("security.policy_json must be a JSON string")
        try:
            parsed = json.loads(value["policy_json"])
        except ValueError:
            raise InvalidArgumentException("security.policy_json is not valid JSON") from None
        if not isinstance(parsed, dict):
            raise InvalidArgumentException("security.policy_json must be a JSON object")
        return dict(value)
    policy = config(value, "security")
    return None if policy is None else {"policy_json": json.dumps(policy)}


def network(value: Any, allow_internet_access: Any, policy: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """declaw's rule: `allow_internet_access=False` denies all egress (and wins); else
    `network`, else the security policy's own `network` section."""
    if not isinstance(allow_internet_access, bool):
        raise InvalidArgumentException(f"allow_internet_access must be a bool, got {allow_internet_access!r}")
    if not allow_internet_access:
        return {"deny_out": [ALL_TRAFFIC]}
    found = config(value, "network")
    if found is None and policy is not None:
        found = config(json.loads(policy["policy_json"]).get("network"), "security.network")
    return found


def volumes(value: Any) -> Optional[list[dict[str, Any]]]:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise InvalidArgumentException(f"volumes must be a list, got {type(value).__name__}")
    return [config(v, "volumes[]") or {} for v in value]


def list_params(extra: dict[str, Any]) -> None:
    unknown = set(extra) - IGNORED_CREATE_PARAMS - {"request_timeout"}
    if unknown:
        raise InvalidArgumentException(f"unexpected argument(s) to list: {', '.join(sorted(unknown))}")


def page_limit(value: Any) -> Optional[int]:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InvalidArgumentException(f"limit must be a positive int, got {value!r}")
    return value


def lifetime(timeout: Any, now: bool = False) -> float:
    """A sandbox's lifetime: a positive number of seconds (`now`: 0 too, the end now)."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0 \
            or (timeout == 0 and not now):
        raise InvalidArgumentException(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def keep_memory(value: Any) -> bool:
    """E2B's `pause(keep_memory=)`: None or True keep the code contexts, False the files alone."""
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentException(f"keep_memory must be True, False or None, got {value!r}")
    return value is not False


def snapshot_name(value: Any) -> Optional[str]:
    """A snapshot's name (E2B's `create_snapshot(name=)`): up to 128 printable characters."""
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= 128 or not value.isprintable():
        raise InvalidArgumentException(f"a snapshot name must be 1-128 printable characters, got {str(value)[:200]!r}")
    return value


def event_seq(value: Any) -> int:
    """`events(since=)`: a sequence number, a whole number >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentException(f"since must be a whole number >= 0 (an event's seq), got {value!r}")
    return value


def journal(value: Any) -> Any:
    """`create(journal=)`: None (the setting), False (none), or a folder (str or os.PathLike)
    the journal is written in; returned as a `Path`, or None/False."""
    if value is None or value is False:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise InvalidArgumentException(f"journal must be a folder (str or Path) or False, got {value!r}")
    folder = Path(os.fspath(value)).expanduser()
    if "\x00" in str(folder):
        raise InvalidArgumentException(f"journal contains a NUL byte: {value!r}")
    if folder.exists() and not folder.is_dir():
        raise InvalidArgumentException(f"journal: {folder} is not a folder")
    return folder


def signature_expiration(value: Any) -> Optional[int]:
    """E2B's `use_signature_expiration`: whole seconds from now (negative: already expired)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 10 * 365 * 86400:
        raise InvalidArgumentException(f"use_signature_expiration must be whole seconds, got {value!r}")
    return value


def is_snapshot_id(value: str) -> bool:
    """Whether `value` has the form of the state store's snapshot ids (`snap_` + hex)."""
    return re.fullmatch(r"snap_[0-9a-f]{8,64}", value) is not None


def moment(value: Any, what: str) -> datetime:
    """A point in time, aware (a naive datetime is local time, as `datetime.now()` gives)."""
    if not isinstance(value, datetime):
        raise InvalidArgumentException(f"{what} must be a datetime, got {type(value).__name__}")
    return value if value.tzinfo is not None else value.astimezone()


def port(value: Any) -> int:
    """A port of the sandbox: a whole number from 1 to 65535."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise InvalidArgumentException(f"port must be a whole number from 1 to 65535, got {value!r}")
    return value


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


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP token (RFC 9110), E2B's rule for keys
MAX_METADATA = 2048  # bytes of keys and values per file: fits one ext4 block of extended attributes


def metadata(value: Any) -> Optional[dict[str, str]]:
    """A file's metadata, E2B's rules: keys are HTTP tokens, values printable ASCII."""
    if value is None:
        return None
    found = string_map(value, "metadata")
    for key, text in found.items():
        if not _TOKEN.fullmatch(key):
            raise InvalidArgumentException(f"metadata key {key!r} is not an HTTP token")
        if not all(" " <= c <= "~" for c in text):
            raise InvalidArgumentException(f"metadata value of {key!r} must be printable ASCII")
    if sum(len(k) + len(v) for k, v in found.items()) > MAX_METADATA:
        raise InvalidArgumentException(f"metadata holds more than {MAX_METADATA} bytes")
    return found


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


def tag(value: Any) -> Optional[str]:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentException(f"tag must be a string, got {type(value).__name__}")
    return value


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
        raise InvalidArgumentException(f"language {value!r} is not available here; only python and bash")
    return name


def context_id(context: Any) -> Optional[str]:
    """A `Context` or its id (None: the default context)."""
    found = getattr(context, "id", context)
    if found is not None and (not isinstance(found, str) or not found):
        raise InvalidArgumentException(f"context must be a Context or its id, got {context!r}")
    return found


MAX_TOOLS = 256
RESERVED_TOOL_NAMES = frozenset({"ToolError", "available"})  # declaw_tools' own names


def tools(value: Any) -> Optional[dict[str, Any]]:
    """Host tools (`tools=`): a mapping of name to callable, or a list of callables named by
    their `__name__`. Names are Python identifiers the guest imports (`from declaw_tools import
    name`); None or empty: no tools."""
    if value is None:
        return None
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(getattr(fn, "__name__", None), fn) for fn in value]
    else:
        raise InvalidArgumentException("tools must be a dict of name -> callable or a list of "
                                       f"functions, got {type(value).__name__}")
    found: dict[str, Any] = {}
    for name, fn in items:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or len(name) > 100 or \
                name in RESERVED_TOOL_NAMES or (name.startswith("__") and name.endswith("__")):
            raise InvalidArgumentException(f"tool name {name!r}: must be a Python identifier (not a keyword, at "
                                           "most 100 characters, not a dunder name, ToolError or available)")
        if not callable(fn):
            raise InvalidArgumentException(f"tool {name!r} is not callable ({type(fn).__name__})")
        if name in found:
            raise InvalidArgumentException(f"tool {name!r} is given twice")
        found[name] = fn
    if len(found) > MAX_TOOLS:
        raise InvalidArgumentException(f"{len(found)} tools: at most {MAX_TOOLS}")
    return found or None
