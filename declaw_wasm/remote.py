"""Remote mode: `Sandbox` and `AsyncSandbox` talking to `declaw-wasm serve` over HTTP (httpx).

With `DECLAW_DOMAIN` set, or `domain=` given to `create`/`connect`/`list` (and `api_key=` or
`DECLAW_API_KEY` for the key), the classes return the objects below: subclasses of the in-process
ones (`RemoteSandbox` is a `Sandbox`, its handles are `CommandHandle`s, its streams
`FileStream`s), with the same methods and the same exceptions, which the server reports by class
name (wire.py). `api_key=` alone keeps a sandbox in-process, as before (E2B code passes it).

`DECLAW_DOMAIN` is `host:port` or a URL; without a scheme it is http on loopback, https elsewhere.
Streams (command output, cells, file reads and writes) are consumed as they arrive.
`AsyncSandbox` uses the same blocking client in worker threads, as it does for in-process work.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional, Union
from urllib.parse import quote, urlsplit

import httpx

from .async_sandbox import (AsyncCommands, AsyncFilesystem, AsyncPty, AsyncSandbox, _in_thread)
from .charts import deserialize_chart
from .commands import CommandHandle, Commands, StdinArg
from .exceptions import (InvalidArgumentException, NotFoundException, SandboxException,
                         SandboxNotFoundException, TimeoutException)
from .execution import Context, Execution, ExecutionError, OutputMessage, Result
from .files import FileStream, Filesystem
from .filesystem import CHUNK, WriteData
from .limits import Limits
from .models import (CommandResult, EntryInfo, ProcessInfo, PtySize, SandboxInfo, WriteEntry,
                     WriteInfo)
from .process import Event, EventLog, _check_size
from .pty import Pty
from .sandbox import Sandbox, SandboxPaginator
from .wire import API_KEY_HEADER, exception_from

REQUEST_TIMEOUT = 60.0
CONNECT_TIMEOUT = 10.0


def base_url(domain: str) -> str:
    """`host:port` or a URL -> the server's base URL (http on loopback, https elsewhere)."""
    domain = domain.strip().rstrip("/")
    if "://" in domain:
        parts = urlsplit(domain)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgumentException(f"DECLAW_DOMAIN must be host:port or an http(s) URL, got {domain!r}")
        return domain
    host = urlsplit("//" + domain).hostname or ""
    if not host:
        raise InvalidArgumentException(f"DECLAW_DOMAIN must be host:port or an http(s) URL, got {domain!r}")
    return f"{'http' if _loopback(host) else 'https'}://{domain}"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Connection:
    """One server: a pooled httpx client with the API key, and error mapping."""

    _cache: dict[tuple[str, Optional[str]], "Connection"] = {}
    _cache_lock = threading.Lock()

    def __init__(self, url: str, api_key: Optional[str]) -> None:
        self.url = url
        self.auth_headers = {API_KEY_HEADER: api_key} if api_key else {}
        self.client = httpx.Client(base_url=url, headers=self.auth_headers,
                                   timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=CONNECT_TIMEOUT),
                                   limits=httpx.Limits(max_connections=None, max_keepalive_connections=64))

    @classmethod
    def get(cls, domain: str, api_key: Optional[str]) -> "Connection":
        key = (base_url(domain), api_key)
        with cls._cache_lock:
            conn = cls._cache.get(key)
            if conn is None:
                conn = cls._cache[key] = Connection(*key)
            return conn

    def _check(self, response: httpx.Response) -> httpx.Response:
        if response.status_code >= 400:
            response.read()
            try:
                body: Any = response.json()
            except ValueError:
                body = response.text
            raise exception_from(body, response.status_code)
        return response

    def request(self, method: str, path: str, timeout: Optional[float] = None, **kw: Any) -> Any:
        try:
            response = self.client.request(method, path, timeout=_timeout(timeout), **kw)
        except httpx.TimeoutException as exc:
            raise TimeoutException(f"request to the declaw server timed out: {exc}") from None
        except httpx.TransportError as exc:
            raise SandboxException(f"cannot reach the declaw server at {self.url}: {exc}") from None
        self._check(response)
        return response.json() if response.content else None

    def open(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """A streamed response (checked); the caller closes it."""
        try:
            request = self.client.build_request(method, path, timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT), **kw)
            response = self.client.send(request, stream=True)
        except httpx.TransportError as exc:
            raise SandboxException(f"cannot reach the declaw server at {self.url}: {exc}") from None
        try:
            return self._check(response)
        except BaseException:
            response.close()
            raise


def _timeout(request_timeout: Optional[float]) -> Any:
    if request_timeout is None:
        return httpx.USE_CLIENT_DEFAULT
    return httpx.Timeout(request_timeout or None, connect=CONNECT_TIMEOUT)


def connection(params: dict[str, Any]) -> Optional[Connection]:
    """The server to talk to, from `domain=`/`api_key=` or DECLAW_DOMAIN/DECLAW_API_KEY; None
    means in-process. Removes the two keys from `params`."""
    domain = params.pop("domain", None) or os.environ.get("DECLAW_DOMAIN")
    api_key = params.pop("api_key", None)
    if not domain:
        return None
    return Connection.get(domain, api_key or os.environ.get("DECLAW_API_KEY") or None)


def _lines(response: httpx.Response) -> Iterator[dict[str, Any]]:
    try:
        for line in response.iter_lines():
            if line:
                yield json.loads(line)
    except httpx.TransportError as exc:
        raise SandboxException(f"the connection to the declaw server broke: {exc}") from None


# -- sandboxes ---------------------------------------------------------------------------------------
class RemoteSandbox(Sandbox):
    """A sandbox on a declaw-wasm server; the same API as an in-process `Sandbox`."""

    def __init__(self, conn: Connection, sandbox_id: str) -> None:  # noqa: super not called
        self._conn = conn
        self._id = sandbox_id
        self.files = RemoteFilesystem(self)
        self.commands = RemoteCommands(self)
        self.pty = RemotePty(self)

    def _path(self, tail: str = "") -> str:
        return f"/sandboxes/{quote(self._id, safe='')}{tail}"

    @classmethod
    def create_on(cls, conn: Connection, template: Optional[str], timeout: Optional[float],
                  metadata: Optional[dict[str, str]], envs: Optional[dict[str, str]],
                  limits: Optional[Limits]) -> "RemoteSandbox":
        body = {"template": template, "timeout": timeout, "metadata": metadata, "envs": envs,
                "limits": limits.model_dump() if isinstance(limits, Limits) else limits}
        info = SandboxInfo.model_validate(conn.request("POST", "/sandboxes", json=body))
        return cls(conn, info.sandbox_id)

    @classmethod
    def connect_on(cls, conn: Connection, sandbox_id: str, timeout: Optional[float]) -> "RemoteSandbox":
        conn.request("POST", f"/sandboxes/{quote(sandbox_id, safe='')}/connect", json={"timeout": timeout})
        return cls(conn, sandbox_id)

    @staticmethod
    def list_on(conn: Connection) -> SandboxPaginator:
        return SandboxPaginator([SandboxInfo.model_validate(i) for i in conn.request("GET", "/sandboxes")])

    @property
    def sandbox_id(self) -> str:
        return self._id

    def kill(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> bool:  # type: ignore[override]
        return bool(self._conn.request("DELETE", self._path(), request_timeout)["killed"])

    def set_timeout(self, timeout: float, request_timeout: Optional[float] = None,  # type: ignore[override]
                    **e2b_params: Any) -> None:
        self._conn.request("POST", self._path("/timeout"), request_timeout, json={"timeout": timeout})

    def get_info(self, request_timeout: Optional[float] = None, **e2b_params: Any) -> SandboxInfo:  # type: ignore[override]
        return SandboxInfo.model_validate(self._conn.request("GET", self._path(), request_timeout))

    def is_running(self, request_timeout: Optional[float] = None) -> bool:
        try:
            self.get_info(request_timeout)
        except (NotFoundException, TimeoutException, SandboxException):
            return False
        return True

    # -- the code interpreter ------------------------------------------------------------------
    def run_code(self, code: str, language: Optional[str] = None,
                 context: Optional[Context] = None,
                 on_stdout: Optional[Callable[[Any], Any]] = None,
                 on_stderr: Optional[Callable[[Any], Any]] = None,
                 on_result: Optional[Callable[[Any], Any]] = None,
                 on_error: Optional[Callable[[Any], Any]] = None,
                 envs: Optional[dict[str, str]] = None,
                 timeout: Optional[float] = 300.0,
                 request_timeout: Optional[float] = None) -> Execution:
        if not isinstance(code, str):
            raise InvalidArgumentException(f"code must be a string, got {type(code).__name__}")
        context_id = context.id if isinstance(context, Context) else context
        body = {"code": code, "language": language, "context_id": context_id, "envs": envs,
                "timeout": timeout}
        execution = Execution()
        response = self._conn.open("POST", self._path("/execute"), json=body)
        try:
            for line in _lines(response):
                kind = line.pop("type", None)
                if kind in ("stdout", "stderr"):
                    text = str(line.get("text", ""))
                    getattr(execution.logs, kind).append(text)
                    stamp = line.get("timestamp")
                    message = OutputMessage(line=text, error=kind == "stderr",
                                            timestamp=stamp or datetime.now(timezone.utc))
                    _call(on_stdout if kind == "stdout" else on_stderr, message)
                elif kind == "result":
                    chart = line.pop("chart", None)
                    result = Result(**line)
                    result.chart = deserialize_chart(chart) if chart else None
                    execution.results.append(result)
                    _call(on_result, result)
                elif kind == "error":
                    execution.error = ExecutionError(**line)
                    _call(on_error, execution.error)
                elif kind == "number_of_executions":
                    execution.execution_count = line.get("execution_count")
                elif kind == "end_of_execution":
                    return execution
                elif kind == "exception":
                    raise exception_from(line)
        finally:
            response.close()
        raise SandboxException("the declaw server ended the cell's stream early (was it stopped?)")

    def create_code_context(self, cwd: Optional[str] = None, language: Optional[str] = None,
                            request_timeout: Optional[float] = None) -> Context:
        return Context.model_validate(self._conn.request(
            "POST", self._path("/contexts"), request_timeout, json={"cwd": cwd, "language": language}))

    def list_code_contexts(self, request_timeout: Optional[float] = None) -> list[Context]:
        return [Context.model_validate(c) for c in self._conn.request("GET", self._path("/contexts"),
                                                                      request_timeout)]

    def restart_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._conn.request("POST", self._path(f"/contexts/{_context_id(context)}/restart"), request_timeout)

    def remove_code_context(self, context: Any, request_timeout: Optional[float] = None) -> None:
        self._conn.request("DELETE", self._path(f"/contexts/{_context_id(context)}"), request_timeout)

    def __repr__(self) -> str:
        return f"<Sandbox {self._id} on {self._conn.url}>"


def _context_id(context: Any) -> str:
    context_id = context.id if isinstance(context, Context) else context
    if not isinstance(context_id, str) or not context_id:
        raise InvalidArgumentException(f"context must be a Context or its id, got {context!r}")
    return quote(context_id, safe="")


def _call(callback: Optional[Callable[[Any], Any]], value: Any) -> None:
    if callback is not None:
        try:
            callback(value)
        except Exception:  # the caller's bug must not break the stream (as in-process)
            pass


# -- files -------------------------------------------------------------------------------------------
class RemoteFileStream(FileStream):
    """A file's bytes as they arrive from the server; close it, or use `with`."""

    def __init__(self, response: httpx.Response) -> None:  # noqa: super not called
        self._response: Optional[httpx.Response] = response
        self._chunks = response.iter_bytes(CHUNK)

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


def _upload(data: WriteData) -> Union[bytes, Iterator[bytes]]:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        def chunks() -> Iterator[bytes]:
            while True:
                chunk = data.read(CHUNK)  # type: ignore[union-attr]
                if not chunk:
                    return
                yield chunk.encode("utf-8") if isinstance(chunk, str) else bytes(chunk)
        return chunks()
    raise InvalidArgumentException(
        f"data must be str, bytes or a file-like object, got {type(data).__name__}")


class RemoteFilesystem(Filesystem):
    def __init__(self, sbx: RemoteSandbox) -> None:  # noqa: super not called
        self._sbx = sbx
        self._conn = sbx._conn

    def _files(self, tail: str = "") -> str:
        return self._sbx._path("/files" + tail)

    def read(self, path: str, format: str = "text", user: Optional[str] = None,  # type: ignore[override]
             request_timeout: Optional[float] = None) -> Union[str, bytearray, FileStream]:
        if format not in ("text", "bytes", "stream"):
            raise InvalidArgumentException(f"format must be 'text', 'bytes' or 'stream', got {format!r}")
        stream = RemoteFileStream(self._conn.open("GET", self._files(), params={"path": path}))
        if format == "stream":
            return stream
        with stream:
            data = bytearray().join(stream)
        return data.decode("utf-8", "replace") if format == "text" else data

    def write(self, path: str, data: WriteData, user: Optional[str] = None,
              request_timeout: Optional[float] = None) -> WriteInfo:
        body = _upload(data)
        if isinstance(body, bytes):
            return WriteInfo.model_validate(self._conn.request(
                "PUT", self._files(), request_timeout, params={"path": path}, content=body,
                headers={"content-type": "application/octet-stream"}))
        response = self._conn.open("PUT", self._files(), params={"path": path}, content=body,
                                   headers={"content-type": "application/octet-stream"})
        try:
            response.read()
            return WriteInfo.model_validate(response.json())
        finally:
            response.close()

    def write_files(self, files: list[WriteEntry], user: Optional[str] = None,
                    request_timeout: Optional[float] = None) -> list[WriteInfo]:
        for entry in files:
            if not isinstance(entry, dict) or "path" not in entry or "data" not in entry:
                raise InvalidArgumentException(f"each entry needs 'path' and 'data', got {entry!r}")
        return [self.write(entry["path"], entry["data"], request_timeout=request_timeout) for entry in files]

    def list(self, path: str, depth: Optional[int] = 1, user: Optional[str] = None,
             request_timeout: Optional[float] = None) -> list[EntryInfo]:
        params = {"path": path, "depth": depth if depth is not None else 1}
        return [EntryInfo.model_validate(e) for e in
                self._conn.request("GET", self._files("/list"), request_timeout, params=params)]

    def exists(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> bool:
        return bool(self._conn.request("GET", self._files("/exists"), request_timeout,
                                       params={"path": path})["exists"])

    def get_info(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> EntryInfo:
        return EntryInfo.model_validate(self._conn.request("GET", self._files("/info"), request_timeout,
                                                           params={"path": path}))

    def remove(self, path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> None:
        self._conn.request("DELETE", self._files(), request_timeout, params={"path": path})

    def rename(self, old_path: str, new_path: str, user: Optional[str] = None,
               request_timeout: Optional[float] = None) -> EntryInfo:
        return EntryInfo.model_validate(self._conn.request(
            "POST", self._files("/rename"), request_timeout, json={"old_path": old_path, "new_path": new_path}))

    def make_dir(self, path: str, user: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> bool:
        return bool(self._conn.request("POST", self._files("/mkdir"), request_timeout,
                                       json={"path": path})["created"])


# -- commands ----------------------------------------------------------------------------------------
class _RemoteProcess(EventLog):
    """The client's copy of a server-side command: its output events as they arrive, and how it
    ended. What `CommandHandle`, `AsyncCommandHandle` and iteration read."""

    def __init__(self, pid: int, cmd: str, callbacks: dict[str, Optional[Callable[[Any], None]]]) -> None:
        self.pid = pid
        self.cmd = cmd
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._callbacks = callbacks
        self._end: Optional[dict[str, Any]] = None

    @property
    def done(self) -> bool:
        return self._end is not None

    def pump(self, lines: Iterator[dict[str, Any]]) -> None:
        """Read the server's lines until the end (or the connection's)."""
        try:
            for line in lines:
                kind = line.get("type")
                if kind in ("stdout", "stderr"):
                    self._emit(kind, str(line.get("data", "")))
                elif kind == "pty":
                    self._emit("pty", base64.b64decode(line.get("data", "")))
                elif kind in ("end", "exception"):
                    self._finish(line)
                    return
            self._finish({"type": "exception", "error": "SandboxException",
                          "message": "the declaw server ended the command's stream early"})
        except SandboxException as exc:
            self._finish({"type": "exception", "error": type(exc).__name__, "message": str(exc)})

    def _emit(self, stream: str, data: Any) -> None:
        with self._cond:
            self._events.append(Event(stream, data))  # type: ignore[arg-type]
            self._cond.notify_all()
        _call(self._callbacks.get(stream), data)

    def _finish(self, end: dict[str, Any]) -> None:
        with self._cond:
            self._end = end
            self._cond.notify_all()


    def result(self) -> CommandResult:
        with self._cond:
            while self._end is None:
                self._cond.wait(0.5)
            end = self._end
        if end.get("type") == "exception":
            raise exception_from(end)
        return CommandResult(stdout=self.text("stdout"), stderr=self.text("stderr"),
                             exit_code=int(end["exit_code"]), error=end.get("error"))


class RemoteCommandHandle(CommandHandle):
    """A command running on the server (E2B's `CommandHandle`)."""

    def __init__(self, sbx: RemoteSandbox, process: _RemoteProcess) -> None:  # noqa: super not called
        self._sbx = sbx
        self._process = process  # type: ignore[assignment]
        self._disconnected = False

    def wait(self, on_pty: Optional[Callable[[bytes], None]] = None,
             on_stdout: Optional[Callable[[str], None]] = None,
             on_stderr: Optional[Callable[[str], None]] = None) -> CommandResult:
        callbacks = {"stdout": on_stdout, "stderr": on_stderr, "pty": on_pty}
        if any(callbacks.values()):
            for event in self._process.events():
                callback = callbacks[event.stream]
                if callback is not None:
                    callback(event.data)
        return self._process.result()  # type: ignore[attr-defined]

    def kill(self) -> bool:
        return self._sbx.commands.kill(self.pid)

    def send_stdin(self, data: Union[str, bytes], request_timeout: Optional[float] = None) -> None:
        self._sbx.commands.send_stdin(self.pid, data, request_timeout)

    def close_stdin(self, request_timeout: Optional[float] = None) -> None:
        self._sbx.commands.close_stdin(self.pid, request_timeout)


class RemoteCommands(Commands):
    def __init__(self, sbx: RemoteSandbox) -> None:  # noqa: super not called
        self._sbx = sbx
        self._conn = sbx._conn

    def _commands(self, tail: str = "") -> str:
        return self._sbx._path("/commands" + tail)

    def run(self, cmd: str, background: bool = False, envs: Optional[dict[str, str]] = None,
            user: Optional[str] = None, cwd: Optional[str] = None,
            on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None,
            stdin: StdinArg = None, timeout: Optional[float] = 60.0,
            request_timeout: Optional[float] = None, tag: Optional[str] = None) -> Any:
        if not isinstance(cmd, str):
            raise InvalidArgumentException(f"cmd must be a string, got {type(cmd).__name__}")
        if stdin is not None and not isinstance(stdin, (bool, str, bytes)):
            raise InvalidArgumentException("stdin must be a bool (keep stdin open), str or bytes")
        wire_stdin = True if isinstance(stdin, bytes) else stdin
        body = {"cmd": cmd, "envs": envs, "cwd": cwd, "timeout": timeout, "stdin": wire_stdin,
                "background": background, "tag": tag}
        response = self._conn.open("POST", self._commands(), json=body)
        try:
            handle = self._attach(response, cmd, {"stdout": on_stdout, "stderr": on_stderr}, background)
            if isinstance(stdin, bytes):
                handle.send_stdin(stdin)
                handle.close_stdin()
        except BaseException:
            response.close()
            raise
        return handle if background else handle.wait()

    def _attach(self, response: httpx.Response, cmd: str,
                callbacks: dict[str, Optional[Callable[[Any], None]]], background: bool) -> RemoteCommandHandle:
        lines = _lines(response)
        first = next(lines, None)
        if first is None or first.get("type") != "start":
            raise SandboxException(f"unexpected first line from the declaw server: {first!r}")
        process = _RemoteProcess(int(first["pid"]), cmd, callbacks)

        def pump() -> None:
            try:
                process.pump(lines)
            finally:
                response.close()

        if background:
            threading.Thread(target=pump, name=f"declaw-remote-{process.pid}", daemon=True).start()
        else:
            pump()
        return RemoteCommandHandle(self._sbx, process)

    def list(self, request_timeout: Optional[float] = None) -> list[ProcessInfo]:
        return [ProcessInfo.model_validate(p) for p in
                self._conn.request("GET", self._commands(), request_timeout)]

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return bool(self._conn.request("DELETE", self._commands(f"/{int(pid)}"), request_timeout)["killed"])

    def connect(self, pid: int, timeout: Optional[float] = 60.0,
                request_timeout: Optional[float] = None) -> CommandHandle:
        response = self._conn.open("GET", self._commands(f"/{int(pid)}/events"))
        try:
            return self._attach(response, "", {}, background=True)
        except BaseException:
            response.close()
            raise

    def send_stdin(self, pid: int, data: Union[str, bytes],
                   request_timeout: Optional[float] = None) -> None:
        if isinstance(data, str):
            body = {"data": data, "encoding": "utf-8"}
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = {"data": base64.b64encode(bytes(data)).decode(), "encoding": "base64"}
        else:
            raise InvalidArgumentException(f"stdin data must be str or bytes, got {type(data).__name__}")
        self._conn.request("POST", self._commands(f"/{int(pid)}/stdin"), request_timeout, json=body)

    def close_stdin(self, pid: int, request_timeout: Optional[float] = None) -> None:
        self._conn.request("POST", self._commands(f"/{int(pid)}/close-stdin"), request_timeout)


class RemotePty(Pty):
    """PTYs on the server: created over HTTP, output read from a WebSocket
    (`/sandboxes/{id}/pty/{pid}`); stdin, resizes and kills are HTTP calls."""

    def __init__(self, sbx: RemoteSandbox) -> None:  # noqa: super not called
        self._sbx = sbx
        self._conn = sbx._conn

    def create(self, size: PtySize, user: Optional[str] = None, cwd: Optional[str] = None,
               envs: Optional[dict[str, str]] = None, timeout: Optional[float] = 60.0,
               request_timeout: Optional[float] = None,
               on_data: Optional[Callable[[bytes], None]] = None) -> CommandHandle:
        size = _check_size(size)
        pid = self._conn.request("POST", self._sbx._path("/pty"), request_timeout, json={
            "rows": size.rows, "cols": size.cols, "cwd": cwd, "envs": envs, "timeout": timeout})["pid"]
        return self._attach(int(pid), on_data)

    def _attach(self, pid: int, on_data: Optional[Callable[[bytes], None]]) -> CommandHandle:
        from websockets.exceptions import ConnectionClosed, InvalidStatus
        from websockets.sync.client import connect

        url = self._conn.url.replace("http", "ws", 1) + self._sbx._path(f"/pty/{pid}")
        try:
            # entered as a context manager (websockets >= 17 warns otherwise); closed by pump()
            socket = connect(url, additional_headers=self._conn.auth_headers,
                             max_size=None, open_timeout=CONNECT_TIMEOUT).__enter__()
        except InvalidStatus as exc:
            raise NotFoundException(f"no running PTY with pid {pid} in sandbox {self._sbx.sandbox_id} "
                                    f"({exc})") from None
        except (OSError, TimeoutError) as exc:
            raise SandboxException(f"cannot reach the declaw server at {self._conn.url}: {exc}") from None
        process = _RemoteProcess(pid, "", {"pty": on_data})

        def lines() -> Iterator[dict[str, Any]]:
            try:
                for message in socket:
                    if isinstance(message, bytes):
                        yield {"type": "pty", "data": base64.b64encode(message).decode()}
                    else:
                        yield json.loads(message)
            except ConnectionClosed as exc:
                raise SandboxException(f"the PTY's connection to the declaw server closed: {exc}") from None

        def pump() -> None:
            try:
                process.pump(lines())
            finally:
                socket.close()

        threading.Thread(target=pump, name=f"declaw-remote-pty-{pid}", daemon=True).start()
        return RemoteCommandHandle(self._sbx, process)

    def send_stdin(self, pid: int, data: bytes, request_timeout: Optional[float] = None) -> None:
        self._sbx.commands.send_stdin(pid, data, request_timeout)

    def resize(self, pid: int, size: PtySize, request_timeout: Optional[float] = None) -> None:
        size = _check_size(size)
        self._conn.request("POST", self._sbx._path(f"/pty/{int(pid)}/resize"), request_timeout,
                           json={"rows": size.rows, "cols": size.cols})

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return self._sbx.commands.kill(pid, request_timeout)

    def connect(self, pid: int, timeout: Optional[float] = 60.0,
                request_timeout: Optional[float] = None) -> CommandHandle:
        return self._attach(int(pid), None)


# -- async ---------------------------------------------------------------------------------------------
class RemoteAsyncSandbox(AsyncSandbox):
    """`AsyncSandbox` on a server: the remote sandbox's calls, awaited in worker threads."""

    def __init__(self, remote: RemoteSandbox) -> None:  # noqa: super not called
        self._remote = remote
        self._sync = remote
        self.files = AsyncFilesystem(remote.files)
        self.commands = AsyncCommands(remote.commands)
        self.pty = AsyncPty(remote.pty)

    @property
    def sandbox_id(self) -> str:
        return self._remote.sandbox_id

    async def kill(self, **kw: Any) -> bool:
        return await _in_thread(self._remote.kill)

    async def set_timeout(self, timeout: float, **kw: Any) -> None:
        await _in_thread(self._remote.set_timeout, timeout)

    async def get_info(self, **kw: Any) -> SandboxInfo:
        return await _in_thread(self._remote.get_info)

    async def is_running(self, **kw: Any) -> bool:
        return await _in_thread(self._remote.is_running)

    def __repr__(self) -> str:
        return f"<AsyncSandbox {self.sandbox_id} on {self._remote._conn.url}>"


__all__ = ["Connection", "RemoteSandbox", "RemoteAsyncSandbox", "connection", "base_url",
           "SandboxNotFoundException"]
