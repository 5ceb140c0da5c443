"""The remote backend: the backend contract (_backend.py) as calls to a `declaw-wasm serve`.

One HTTP call per contract method (the routes are in server/routes/), at declaw's paths for
everything declaw has (so a server that speaks declaw's wire serves both); what declaw lacks is
under `wire.PREFIX`: command output and cells arrive as our NDJSON streams of wire/'s messages,
read as they come (commands on a thread of their own, so that a handle fills while the caller
does other work), a PTY's output over its WebSocket, a watch's events. Errors come back as the
exception class the server names.
"""

from __future__ import annotations

import base64
import gzip as gzip_module
import json
import zlib
from typing import Any, Iterator, List, Optional, Sequence, Union

import httpx
from pydantic import ValidationError

from .._backend import Callback, WriteData, tools_unreachable
from .._egress.create import secrets_of
from .._lines import CellReader, LineProcess
from .._webguard import is_loopback
from ..exceptions import InvalidArgumentException, NotFoundException, SandboxException
from ..execution import Context, Execution
from ..models import (EntryInfo, FilesystemEvent, ProcessInfo, PtySize, SandboxInfo,
                      SandboxMetrics, Snapshot, WriteInfo)
from ..wire import (CELL_LINES, COMMAND_LINES, PREFIX, PTY_END, CreateContext, CreatePty, CreateSandbox,
                    ExceptionLine, Forked, PtyLine, ResumeSandbox, RunCode, RunCommand, SandboxList, SnapshotList,
                    StartLine, exception_from)
from .connection import CONNECT_TIMEOUT, Connection, lines, segment

CHUNK = 1 << 20
BATCH_BYTES = 1 << 20  # text per `POST /files/batch` (JSON-escaped, it stays under the server's body limit)
BATCH_FILES = 1000
SERVED = "a declaw-wasm server (served mode)"


class RemoteSandboxes:
    """The sandboxes of one server."""

    def __init__(self, domain: str, api_key: Optional[str]) -> None:
        self.conn = Connection.get(domain, api_key)

    def create(self, request: CreateSandbox) -> "RemoteSandbox":
        """POST /sandboxes. The policy object travels as its JSON (`security`); secret values in
        `secrets`, only to a server on loopback or over TLS; `vault_refs` name secrets in the
        server's vault (a `Vault` object of this process cannot be used there)."""
        if request._host_only.get("tools") is not None:
            raise tools_unreachable(SERVED)
        if request._host_only.get("journal") is not None:
            raise InvalidArgumentException(
                "journal=: a folder of this process cannot be written by a declaw-wasm server; the server "
                "journals its sandboxes with its own DECLAW_WASM_JOURNAL, and sbx.events() reads them")
        if request._host_only.get("guard_plugins"):
            raise InvalidArgumentException(
                "guard_plugins: callables of this process cannot run on a declaw-wasm server; create "
                "the sandbox in-process (docs/guardrails.md)")
        if request._host_only.get("vault") is not None:
            raise InvalidArgumentException(
                "vault=: a Vault object stays in its process; a server resolves vault_refs in its own "
                "vault (create secrets there with VaultClient(domain=...))")
        body = request.model_dump(mode="json", exclude_none=True, exclude={"secrets"})
        secrets = secrets_of(request)
        if secrets:
            self.conn.check_private("secrets")
            body["secrets"] = {name: {"value": s.reveal(), "hosts": list(s.hosts)} for name, s in secrets.items()}
        info = SandboxInfo.model_validate(self.conn.request("POST", "/sandboxes", json=body))
        return RemoteSandbox(self.conn, info.sandbox_id)

    def connect(self, sandbox_id: str, timeout: Optional[float] = None) -> "RemoteSandbox":
        params = {} if timeout is None else {"timeout": timeout}
        self.conn.request("GET", f"/sandboxes/{segment(sandbox_id)}", params=params)
        return RemoteSandbox(self.conn, sandbox_id)

    def list(self) -> List[SandboxInfo]:
        return SandboxList.model_validate(self.conn.request("GET", "/sandboxes")).sandboxes

    def restore(self, sandbox_id: str, snapshot_id: Optional[str], request: ResumeSandbox) -> "RemoteSandbox":
        _refuse_secrets(request)
        params = {} if snapshot_id is None else {"snapshot_id": snapshot_id}
        self.conn.request("POST", f"/sandboxes/{segment(sandbox_id)}/restore", params=params,
                          json=request.model_dump(mode="json", exclude_none=True))
        return RemoteSandbox(self.conn, sandbox_id)

    def list_snapshots(self, sandbox_id: Optional[str] = None) -> List[Snapshot]:
        params = {} if sandbox_id is None else {"sandbox_id": sandbox_id}
        return SnapshotList.model_validate(self.conn.request("GET", "/snapshots", params=params)).snapshots

    def delete_snapshot(self, sandbox_id: str, snapshot_id: str) -> bool:
        path = f"/sandboxes/{segment(sandbox_id)}/snapshots/{segment(snapshot_id)}"
        return bool(self.conn.request("DELETE", path)["deleted"])


def _refuse_secrets(request: ResumeSandbox) -> None:
    if request._host_only:
        raise InvalidArgumentException(f"{', '.join(sorted(request._host_only))}: secrets never travel to a "
                                       "declaw-wasm server (served mode); resume the sandbox in-process")


class RemoteChunks:
    """A file's bytes as they arrive from the server."""

    def __init__(self, response: httpx.Response) -> None:
        self._response: Optional[httpx.Response] = response
        self._chunks = response.iter_bytes(CHUNK)

    def __iter__(self) -> "RemoteChunks":
        return self

    def __next__(self) -> bytes:
        try:
            return next(self._chunks)
        except StopIteration:
            self.close()
            raise
        except httpx.TransportError as exc:
            self.close()
            raise SandboxException(f"the connection to the declaw server broke: {exc}") from None

    def close(self) -> None:
        if self._response is not None:
            response, self._response = self._response, None
            response.close()


def _gzipped(body: Union[bytes, Iterator[bytes]]) -> Union[bytes, Iterator[bytes]]:
    if isinstance(body, bytes):
        return gzip_module.compress(body, 6)

    def chunks() -> Iterator[bytes]:
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)
        for chunk in body:
            out = packer.compress(chunk)
            if out:
                yield out
        yield packer.flush()
    return chunks()


class RemoteWatcher:
    """A watch on the server: its events read on demand, as E2B's `get_new_events` polls."""

    def __init__(self, sandbox: "RemoteSandbox", watcher_id: str) -> None:
        self.sandbox = sandbox
        self.watcher_id = watcher_id
        self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def events(self) -> List[FilesystemEvent]:
        if self._stopped:
            raise SandboxException("The watcher is already stopped")
        found = self.sandbox.conn.request("GET", self.sandbox._ours(f"/watchers/{segment(self.watcher_id)}"))
        return [FilesystemEvent.model_validate(e) for e in found]

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self.sandbox.conn.request("DELETE", self.sandbox._ours(f"/watchers/{segment(self.watcher_id)}"))


def _upload(data: WriteData) -> Union[bytes, Iterator[bytes]]:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    reader: Any = data

    def chunks() -> Iterator[bytes]:
        while True:
            chunk = reader.read(CHUNK)
            if not chunk:
                return
            yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
    return chunks()


class RemoteProcess(LineProcess):
    """The client's copy of a server-side command or PTY: its lines as they arrive (read by
    `pump`, _lines.py), how it ended, and control as HTTP calls."""

    source = "the declaw server"

    def __init__(self, sandbox: "RemoteSandbox", pid: int, cmd: str, callbacks: dict[str, Callback]) -> None:
        super().__init__(sandbox, pid, cmd, callbacks)
        self.sandbox = sandbox


def _command_messages(texts: Iterator[str]) -> Iterator[Any]:
    for text in texts:
        try:
            yield COMMAND_LINES.validate_json(text)
        except ValidationError:
            raise SandboxException(f"unexpected line from the declaw server: {text[:200]!r}") from None


class RemoteSandbox:
    """A sandbox on a declaw-wasm server (the remote `SandboxBackend`)."""

    def __init__(self, conn: Connection, sandbox_id: str) -> None:
        self.conn = conn
        self.sandbox_id = sandbox_id

    def _path(self, tail: str = "") -> str:
        return f"/sandboxes/{segment(self.sandbox_id)}{tail}"

    def _ours(self, tail: str) -> str:
        return f"{PREFIX}/sandboxes/{segment(self.sandbox_id)}{tail}"

    # -- lifetime ------------------------------------------------------------------------------------
    def info(self) -> SandboxInfo:
        return SandboxInfo.model_validate(self.conn.request("GET", self._path()))

    def is_running(self) -> bool:
        try:
            return bool(self.conn.request("GET", self._path("/status"))["is_running"])
        except SandboxException:
            return False

    def set_timeout(self, timeout: float) -> None:
        self.conn.request("PATCH", self._path("/timeout"), json={"timeout": timeout})

    def kill(self) -> bool:
        return bool(self.conn.request("DELETE", self._path())["killed"])

    def audit_events(self) -> List[Any]:
        from ..security.audit import AuditEvent

        return [AuditEvent.model_validate(e) for e in self.conn.request("GET", self._ours("/audit"))]

    def events(self, since: int = 0) -> List[Any]:
        from ..events import parse_event

        return [parse_event(e) for e in self.conn.request("GET", self._ours("/events"), params={"since": since})]

    def metrics(self) -> SandboxMetrics:
        return SandboxMetrics.model_validate(self.conn.request("GET", self._path("/metrics"))[-1])

    def get_host(self, port: int) -> str:
        """`<port>-<sandbox id>.localhost:<serve port>` (a loopback server: browsers resolve every
        `*.localhost` name to loopback), or `<port>-<sandbox id>.<server name>[:port]`: the
        server answers preview names itself (server/previews.py)."""
        url = httpx.URL(self.conn.url)
        name = url.host or "localhost"
        if is_loopback(name):
            name = "localhost"
        default = {"http": 80, "https": 443}.get(url.scheme)
        suffix = "" if url.port is None or url.port == default else f":{url.port}"
        return f"{port}-{self.sandbox_id.lower()}.{name}{suffix}"

    def traffic_access_token(self) -> Optional[str]:
        found = self.conn.request("GET", self._ours("/traffic-access-token"))
        token = found.get("traffic_access_token") if isinstance(found, dict) else None
        return token if isinstance(token, str) else None

    # -- state ---------------------------------------------------------------------------------------
    def create_snapshot(self, name: Optional[str] = None) -> Snapshot:
        params = {} if name is None else {"name": name}
        return Snapshot.model_validate(self.conn.request("POST", self._path("/snapshot"), json={}, params=params))

    def list_snapshots(self) -> List[Snapshot]:
        return SnapshotList.model_validate(self.conn.request("GET", self._path("/snapshots"))).snapshots

    def delete_snapshot(self, snapshot_id: str) -> bool:
        return bool(self.conn.request("DELETE", self._path(f"/snapshots/{segment(snapshot_id)}"))["deleted"])

    def pause(self, keep_memory: bool = True) -> bool:
        params = {} if keep_memory else {"keep_memory": "false"}
        return bool(self.conn.request("POST", self._path("/pause"), params=params)["paused"])

    def resume(self, request: ResumeSandbox) -> None:
        _refuse_secrets(request)
        self.conn.request("POST", self._path("/resume"), json=request.model_dump(mode="json", exclude_none=True))

    def fork(self, count: int) -> List["RemoteSandbox"]:
        forked = Forked.model_validate(self.conn.request("POST", self._ours("/fork"), json={"count": count}))
        return [RemoteSandbox(self.conn, info.sandbox_id) for info in forked.sandboxes]

    # -- files -----------------------------------------------------------------------------------------
    def read(self, path: str, gzip: bool = False) -> RemoteChunks:
        """The bytes as they arrive (gzip on the wire if asked; httpx decodes it)."""
        headers = {"accept-encoding": "gzip" if gzip else "identity"}
        return RemoteChunks(self.conn.open("GET", self._path("/files"), params={"path": path}, headers=headers))

    def write_files(self, entries: Sequence[tuple[str, WriteData]],
                    metadata: Optional[dict[str, str]] = None, gzip: bool = False,
                    octet_stream: Optional[bool] = None) -> List[WriteInfo]:
        """Text files by `POST /files/batch` (one request per ~1 MiB of text); anything else one
        `write` each."""
        if gzip or octet_stream or not all(isinstance(data, str) for _, data in entries):
            return [self.write(path, data, metadata, gzip, octet_stream) for path, data in entries]
        done: List[WriteInfo] = []
        group: List[dict[str, Any]] = []
        size = 0
        for index, (path, data) in enumerate(entries):
            group.append({"path": path, "data": data})
            size += len(path) + len(str(data)) + 32
            if size >= BATCH_BYTES or len(group) >= BATCH_FILES or index == len(entries) - 1:
                answer = self.conn.request("POST", self._path("/files/batch"),
                                           json={"files": group, "metadata": metadata})
                done.extend(WriteInfo.model_validate(info) for info in answer)
                group, size = [], 0
        return done

    def write(self, path: str, data: WriteData, metadata: Optional[dict[str, str]] = None,
              gzip: bool = False, octet_stream: Optional[bool] = None) -> WriteInfo:
        """Raw bytes by `PUT /files/raw` (gzip-encoded if asked); text as declaw's JSON
        `POST /files` when `octet_stream` is False."""
        if octet_stream is False and isinstance(data, str) and not gzip:
            return WriteInfo.model_validate(self.conn.request(
                "POST", self._path("/files"), json={"path": path, "data": data, "metadata": metadata}))
        body = _upload(data)
        if gzip:
            body = _gzipped(body)
        headers = {"content-type": "application/octet-stream", **({"content-encoding": "gzip"} if gzip else {})}
        params = {"path": path, **({"metadata": json.dumps(metadata)} if metadata is not None else {})}
        if isinstance(body, bytes):
            return WriteInfo.model_validate(self.conn.request(
                "PUT", self._path("/files/raw"), params=params, content=body, headers=headers))
        response = self.conn.open("PUT", self._path("/files/raw"), params=params, content=body,
                                  headers=headers)
        try:
            response.read()
            return WriteInfo.model_validate(response.json())
        finally:
            response.close()

    def file_url(self, path: str, write: bool, user: Optional[str], expires_in: Optional[int]) -> str:
        """declaw's download/upload URL (`.../files/raw`), which the server serves to its API
        key: signed keyless URLs are made by in-process sandboxes only."""
        if expires_in is not None:
            raise InvalidArgumentException("signed file URLs (use_signature_expiration) are made by in-process "
                                           "sandboxes; a server's files/raw URL takes its API key")
        from urllib.parse import urlencode

        query = urlencode({"path": path, "username": user or "user"})
        return f"{self.conn.url.rstrip('/')}{self._path('/files/raw')}?{query}"

    def watch(self, path: str, recursive: bool, include_entry: bool) -> "RemoteWatcher":
        found = self.conn.request("POST", self._path("/files/watch"), json={
            "path": path, "recursive": recursive, "include_entry": include_entry})
        return RemoteWatcher(self, str(found["watcher_id"]))

    def list(self, path: str, depth: int = 1) -> List[EntryInfo]:
        return [EntryInfo.model_validate(e) for e in self.conn.request(
            "GET", self._path("/files/list"), params={"path": path, "depth": depth})]

    def get_info(self, path: str) -> EntryInfo:
        return EntryInfo.model_validate(self.conn.request("GET", self._path("/files/info"),
                                                          params={"path": path}))

    def exists(self, path: str) -> bool:
        return bool(self.conn.request("GET", self._path("/files/exists"), params={"path": path})["exists"])

    def remove(self, path: str) -> None:
        self.conn.request("DELETE", self._path("/files"), params={"path": path})

    def rename(self, old_path: str, new_path: str) -> EntryInfo:
        return EntryInfo.model_validate(self.conn.request(
            "PATCH", self._path("/files"), json={"old_path": old_path, "new_path": new_path}))

    def make_dir(self, path: str) -> bool:
        return bool(self.conn.request("POST", self._path("/files/mkdir"), json={"path": path})["created"])

    # -- commands and PTYs --------------------------------------------------------------------------
    def start(self, request: Union[RunCommand, CreatePty], on_stdout: Callback = None,
              on_stderr: Callback = None, on_pty: Callback = None) -> RemoteProcess:
        if isinstance(request, CreatePty):
            pid = self.conn.request("POST", self._path("/pty"), json=request.model_dump(mode="json"))["pid"]
            return self._attach_pty(int(pid), on_pty)
        response = self.conn.open("POST", self._ours("/commands"), json=request.model_dump(mode="json"))
        return self._attach(response, request.cmd, {"stdout": on_stdout, "stderr": on_stderr})

    def _attach(self, response: httpx.Response, cmd: str, callbacks: dict[str, Callback]) -> RemoteProcess:
        try:
            messages = _command_messages(lines(response))
            first = next(messages, None)
            if isinstance(first, ExceptionLine):
                raise exception_from(first.model_dump())
            if not isinstance(first, StartLine):
                raise SandboxException(f"unexpected first line from the declaw server: {first!r}")
            process = RemoteProcess(self, first.pid, cmd, callbacks)
        except BaseException:
            response.close()
            raise
        process.pump(messages, response.close)
        return process

    def _attach_pty(self, pid: int, on_data: Callback) -> RemoteProcess:
        from websockets.exceptions import ConnectionClosed, InvalidStatus
        from websockets.sync.client import connect

        url = self.conn.url.replace("http", "ws", 1) + self._ours(f"/pty/{pid}")
        try:
            # entered as a context manager (websockets >= 17 warns otherwise); closed by the pump
            socket = connect(url, additional_headers=self.conn.auth_headers,
                             max_size=None, open_timeout=CONNECT_TIMEOUT).__enter__()
        except InvalidStatus as exc:
            raise NotFoundException(f"no running PTY with pid {pid} in sandbox {self.sandbox_id} "
                                    f"({exc})") from None
        except (OSError, TimeoutError) as exc:
            raise SandboxException(f"cannot reach the declaw server at {self.conn.url}: {exc}") from None
        process = RemoteProcess(self, pid, "", {"pty": on_data})

        def messages() -> Iterator[Any]:
            try:
                for frame in socket:
                    if isinstance(frame, bytes):
                        yield PtyLine(data=base64.b64encode(frame).decode())
                    else:
                        yield PTY_END.validate_json(frame)
            except ConnectionClosed as exc:
                raise SandboxException(f"the PTY's connection to the declaw server closed: {exc}") from None
            except ValidationError:
                raise SandboxException("unexpected message on the PTY's connection") from None

        process.pump(messages(), socket.close)
        return process

    def process(self, pid: int, pty: bool = False) -> RemoteProcess:
        if pty:
            return self._attach_pty(int(pid), None)
        return self._attach(self.conn.open("GET", self._ours(f"/commands/{int(pid)}/events")), "", {})

    def processes(self) -> List[ProcessInfo]:
        return [ProcessInfo.model_validate(p) for p in self.conn.request("GET", self._path("/commands"))]

    def kill_process(self, pid: int) -> bool:
        return bool(self.conn.request("DELETE", self._path(f"/commands/{int(pid)}"))["killed"])

    def send_stdin(self, pid: int, data: bytes) -> None:
        self.conn.request("POST", self._path(f"/commands/{int(pid)}/stdin"),
                          json={"data": base64.b64encode(data).decode(), "encoding": "base64"})

    def close_stdin(self, pid: int) -> None:
        self.conn.request("POST", self._ours(f"/commands/{int(pid)}/stdin/close"))

    def resize_pty(self, pid: int, size: PtySize) -> None:
        self.conn.request("PATCH", self._path(f"/pty/{int(pid)}"), json={"size": size.to_dict()})

    # -- code contexts ------------------------------------------------------------------------------------
    def run_code(self, request: RunCode, on_stdout: Callback = None, on_stderr: Callback = None,
                 on_result: Callback = None, on_error: Callback = None) -> Execution:
        if request._host_only.get("tools") is not None:
            raise tools_unreachable(SERVED)
        reader = CellReader(on_stdout, on_stderr, on_result, on_error, source="the declaw server")
        response = self.conn.open("POST", self._ours("/execute"), json=request.model_dump(mode="json"))
        try:
            return reader.read(CELL_LINES.validate_json(text) for text in lines(response))
        except ValidationError:
            raise SandboxException("unexpected line in the cell's stream from the declaw server") from None
        finally:
            response.close()

    def create_context(self, request: CreateContext) -> Context:
        return Context.model_validate(self.conn.request("POST", self._ours("/contexts"),
                                                        json=request.model_dump(mode="json")))

    def list_contexts(self) -> List[Context]:
        return [Context.model_validate(c) for c in self.conn.request("GET", self._ours("/contexts"))]

    def restart_context(self, context_id: str) -> None:
        self.conn.request("POST", self._ours(f"/contexts/{segment(context_id)}/restart"))

    def remove_context(self, context_id: str) -> None:
        self.conn.request("DELETE", self._ours(f"/contexts/{segment(context_id)}"))
