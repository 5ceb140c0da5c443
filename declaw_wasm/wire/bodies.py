"""The request bodies the faces make for every backend: the backend contract's arguments.

Part of the wire (its package docstring says why it is two modules). Only pydantic, the model
base and `Limits`: a sandbox made and used in this process loads nothing of the HTTP protocol.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import ConfigDict, Field, PrivateAttr, SecretStr, StrictBool

from .._model import construct
from .._model import Model
from ..limits import Limits

API_KEY_HEADER = "X-API-Key"
# What only our own clients use (our NDJSON streams of commands and cells, code contexts, the
# PTY's WebSocket, a watch's events) lives under this prefix; everything declaw's SDKs call is
# at declaw's own paths. A prefix naming the project cannot collide with a route declaw adds
# later (its routes are top-level nouns: /sandboxes, /volumes, /templates, /teams, ...) and says
# in any log line whose route it is.
PREFIX = "/declaw-wasm"


class _Body(Model):
    """A request body: unknown fields are ignored, as declaw's server does (its SDKs send
    fields such as `user` and `secure` that mean nothing here)."""

    model_config = ConfigDict(extra="ignore")


class SecretValue(_Body):
    """One secret of `CreateSandbox.secrets`: the value (write-only: never sent back, never
    logged) and where it may be sent (entries as in `allow_out`)."""

    value: SecretStr
    hosts: list[str] = Field(min_length=1, max_length=256)


class CreateSandbox(_Body):
    """declaw's `POST /sandboxes` body (its field names and JSON shapes) plus our `limits`.
    `network`, `security`, `lifecycle`, `volumes` and `vault_refs` travel to the backend as
    data; docs/differences.md says which of them are enforced."""

    template: Optional[str] = None
    timeout: Optional[float] = None
    metadata: Optional[dict[str, str]] = None
    envs: Optional[dict[str, str]] = None
    limits: Optional[Limits] = None
    secure: bool = True
    allow_internet_access: Optional[StrictBool] = None  # "no" or 0 is refused, as the SDK refuses it
    network: Optional[dict[str, Any]] = Field(None, description="declaw's SandboxNetworkOpts as JSON "
                                              "(allow_out, deny_out, ...)")
    security: Optional[dict[str, Any]] = Field(None, description='{"policy_json": "<SecurityPolicy JSON>"}')
    lifecycle: Optional[dict[str, Any]] = Field(None, description="{on_timeout, auto_resume, checkpoint}")
    volumes: Optional[list[dict[str, Any]]] = None
    vault_refs: Optional[dict[str, str]] = None
    secrets: Optional[dict[str, SecretValue]] = Field(
        None, description="ours: {ENV_NAME: {value, hosts}}; the guest sees a placeholder, the server "
                          "injects the value for `hosts` only (docs/egress.md). Send only over TLS or loopback.")
    snapshot: Optional[str] = Field(None, description="a snapshot id: the new sandbox starts as that "
                                    "snapshot (its files and code contexts; docs/state.md)")
    # In-process arguments that never travel as such (`Secret` objects, a Vault object, the
    # security policy object): the faces put them here for the backend. The remote backend sends
    # secret values in `secrets` above (only over TLS or to loopback); the server turns them
    # back into `Secret`s here and clears `secrets`; a pool or Ray sends them beside the request
    # as a call argument (_egress/create.py). The policy object travels as `security`'s JSON.
    _host_only: dict[str, Any] = PrivateAttr(default_factory=dict)


class ResumeSandbox(_Body):
    """Resume a paused sandbox (`POST /sandboxes/{id}/resume`, or a `connect`): `timeout` is its
    new lifetime (default: the one it was made with). Secrets never travel (in-process only,
    `_host_only`: a sandbox made with secrets resumes in another process only in-process)."""

    timeout: Optional[float] = None
    _host_only: dict[str, Any] = PrivateAttr(default_factory=dict)


class RunCommand(_Body):
    """`POST /sandboxes/{id}/commands` (declaw's: JSON `CommandResult`, or `{pid}` with
    `background`), `POST .../commands/stream` (SSE) and `POST {PREFIX}/sandboxes/{id}/commands`
    (our NDJSON stream). declaw's `user` and `stream` fields are accepted and ignored."""

    cmd: str
    envs: Optional[dict[str, str]] = None
    cwd: Optional[str] = None
    timeout: Optional[float] = Field(60.0, description="seconds; 0 or null: none")
    stdin: Union[bool, str, None] = Field(None, description="true: keep stdin open for /stdin; "
                                                            "a string: that input, then end of input")
    background: bool = Field(False, description="false: the command is killed if the client "
                                                "disconnects before it ends")
    tag: Optional[str] = None


class TerminalSize(_Body):
    cols: int = Field(80, gt=0, le=10000)
    rows: int = Field(24, gt=0, le=10000)


class CreatePty(_Body):
    """`POST /sandboxes/{id}/pty` (declaw's shape)."""

    size: TerminalSize = construct(TerminalSize)  # the defaults, built without a first validation
    cwd: Optional[str] = None
    envs: Optional[dict[str, str]] = None
    timeout: Optional[float] = Field(60.0, description="seconds; 0 or null: none")


class RunCode(_Body):
    code: str
    language: Optional[str] = None
    context_id: Optional[str] = None
    envs: Optional[dict[str, str]] = None
    timeout: Optional[float] = Field(300.0, description="seconds; 0 or null: none")
    # In-process arguments that never travel: the cell's host tools (`tools=`, a ToolSpec).
    _host_only: dict[str, Any] = PrivateAttr(default_factory=dict)


class CreateContext(_Body):
    cwd: Optional[str] = None
    language: Optional[str] = None


