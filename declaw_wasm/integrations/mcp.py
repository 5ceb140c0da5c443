"""`declaw-wasm mcp`: an MCP server whose tools run in a declaw-wasm sandbox.

Built on the official `mcp` SDK (2.x `MCPServer`; stdio and streamable HTTP) rather than our
own JSON-RPC, so protocol versions, sessions and transports are the SDK's. Tools:

- `run_python_code(python_code, global_variables={})`: pydantic's mcp-run-python tool, same name,
  schema and output (`<status>`/`<output>`/`<return_value>`/`<error>` XML, or its JSON with
  `--return-mode json`), so existing MCP configs can point here instead. Each call gets fresh
  globals (plus `global_variables`), may use top-level `await`, and returns its last
  expression's value as JSON. Here it is CPython 3.15 in Wasm instead of Pyodide.
- `run_code(code, context_id=None)`: a stateful cell (variables carry over), E2B's semantics;
  text plus an `ImageContent` per chart or image. `create_code_context()` makes another context.
- `run_command(command, cwd=None, timeout=None)`, `read_file`, `write_file`, `list_files`.

One sandbox per MCP session, made at its first tool call and killed when the session ends:
over stdio that is the server process (one client); over streamable HTTP it is the
`Mcp-Session-Id` session of a handshake-era client (killed on DELETE or the SDK's idle timeout).
A 2026-07-28 client over HTTP has no session by design, so each of its calls gets a fresh
sandbox. A sandbox idle for `--timeout` seconds also ends (each call renews it).
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import anyio
from pydantic import BaseModel, Field

from .. import AsyncSandbox, Execution, InvalidArgumentException, SandboxException, TimeoutException
from .. import Context as CodeContext
from .._printable import logger
from ..sandbox import create_request
from ._common import missing_extra

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ContentBlock, ImageContent, TextContent
except ImportError as exc:  # the framework is an optional extra
    raise missing_extra("mcp") from exc

log = logger(__name__)
_SANDBOX_KEY = "declaw_wasm.sandbox"
_RESULT_MIME = "application/x-declaw-mcp-run+json"
MAX_READ_BYTES = 10 * 1024 * 1024

RUN_PYTHON_DESCRIPTION = """Tool to execute Python code and return stdout, stderr, and return value.

The code may be async, and the value on the last line will be returned as the return value.

The code will be executed with Python 3.15 (CPython on WASI, in a declaw-wasm sandbox).
"""

# The guest half of run_python_code: fresh globals, top-level await, last expression's value as
# JSON (mcp-run-python's rules), the traceback from "main.py" down. It reports through a display
# result with our own MIME type, never by printing, so user output cannot forge it.
_RUNNER = textwrap.dedent('''
    def __declaw_mcp_run(__src, __globals_json, __always_json):
        import ast, asyncio, dataclasses, datetime, inspect, json, linecache, sys, traceback

        class __Report:
            def __init__(self, data):
                self.data = data

            def _repr_mimebundle_(self, include=None, exclude=None):
                return {__MIME__: self.data, "text/plain": ""}

        def fallback(value):
            module = type(value).__module__
            if module == "numpy":
                return value.tolist() if hasattr(value, "tolist") else value.item()
            if isinstance(value, (set, frozenset, tuple)):
                return list(value)
            if isinstance(value, (datetime.date, datetime.time)):
                return value.isoformat()
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            if dataclasses.is_dataclass(value) and not isinstance(value, type):
                return dataclasses.asdict(value)
            if hasattr(value, "model_dump"):
                return value.model_dump(mode="json")
            return repr(value)

        ns = json.loads(__globals_json)
        ns["__name__"] = "__main__"
        flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
        linecache.cache["main.py"] = (len(__src), None, __src.splitlines(True), "main.py")
        try:
            tree = ast.parse(__src, "main.py")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            body = compile(tree, "main.py", "exec", flags=flags)
            tail = compile(last, "main.py", "eval", flags=flags) if last is not None else None

            is_async = [c is not None and bool(c.co_flags & inspect.CO_COROUTINE)
                        for c in (body, tail)]

            async def main():
                await eval(body, ns) if is_async[0] else eval(body, ns)
                if tail is not None:
                    return await eval(tail, ns) if is_async[1] else eval(tail, ns)

            if any(is_async):  # an event loop only for code that awaits
                value = asyncio.run(main())
            else:
                eval(body, ns)
                value = eval(tail, ns) if tail is not None else None
        except BaseException as exc:
            tb = exc.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != "main.py":
                tb = tb.tb_next
            text = "".join(traceback.format_exception(type(exc), exc, tb))
            if tb is None and not isinstance(exc, SyntaxError):
                text = "".join(traceback.format_exception_only(type(exc), exc))
            sys.stdout.flush(); sys.stderr.flush()
            display(__Report({"status": "run-error", "error": text.rstrip("\\n")}))
            return
        if value is None:
            dumped = None
        elif isinstance(value, str) and not __always_json:
            dumped = value
        else:
            dumped = json.dumps(value, indent=2, default=fallback, ensure_ascii=False)
        sys.stdout.flush(); sys.stderr.flush()
        display(__Report({"status": "success", "return_value_json": dumped}))
''').replace("__MIME__", repr(_RESULT_MIME))


def runner_cell(code: str, globals_json: str, always_json: bool) -> str:
    """The cell for one run_python_code call: defines the runner in its context once (again
    after a restart), then calls it."""
    return (f"if '__declaw_mcp_run' not in globals():\n    exec({_RUNNER!r})\n"
            f"__declaw_mcp_run({code!r}, {globals_json!r}, {always_json!r})")


class ServerOptions(BaseModel):
    """The sandbox policy every session of this server gets (set on the command line)."""

    template: str | None = None
    """sandbox template (default: code-interpreter)"""
    timeout: Annotated[float, Field(gt=0)] = 300
    """idle lifetime of a session's sandbox, seconds (each call renews it)"""
    call_timeout: Annotated[float, Field(gt=0)] = 60
    """longest single tool call, seconds"""
    return_mode: Literal["xml", "json"] = "xml"
    """run_python_code's output format"""
    allow_internet_access: bool = True
    """False: sandboxes reach no network at all"""
    network: dict[str, Any] | None = None
    """declaw's network policy for every sandbox (`{"allow_out": [...], "deny_out": [...]}`)"""
    security: dict[str, Any] | None = None
    """declaw's SecurityPolicy as JSON (PII redaction, injection defense, audit...)"""
    volumes: list[dict[str, Any]] | None = None
    """declaw's volumes to attach to every sandbox"""

    def create_options(self) -> dict[str, Any]:
        """The `AsyncSandbox.create` keywords for a session's sandbox."""
        given = {"network": self.network, "security": self.security, "volumes": self.volumes}
        return {"allow_internet_access": self.allow_internet_access,
                **{k: v for k, v in given.items() if v is not None}}


class _Session:
    """A session's sandbox and the context `run_python_code` uses."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self.sandbox = sandbox
        self.runner: CodeContext | None = None
        self.lock = anyio.Lock()


class DeclawMcpServer:
    """The server: an `MCPServer` (the `mcp` attribute) plus the sessions' sandboxes."""

    def __init__(self, options: ServerOptions | None = None, *, shared: bool = False) -> None:
        self.options = options or ServerOptions()
        self._shared = shared  # stdio: the process is the session
        self._shared_session: _Session | None = None
        self._create_lock = anyio.Lock()
        self._live: set[AsyncSandbox] = set()
        self.mcp: MCPServer[Any] = MCPServer(
            name="declaw-wasm", version=_version(), lifespan=self._lifespan,
            instructions="Python (and a bash-like shell) in a declaw-wasm sandbox. "
                         "Call run_python_code for one-off code, run_code for stateful cells.")
        self._register()

    @asynccontextmanager
    async def _lifespan(self, _: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Kill every sandbox this server made (at exit)."""
        for sbx in list(self._live):
            await self._kill(sbx)
        self._shared_session = None

    async def _kill(self, sbx: AsyncSandbox) -> None:
        self._live.discard(sbx)
        with anyio.CancelScope(shield=True):
            try:
                await sbx.kill()
            except Exception as exc:  # noqa: BLE001 - best effort at teardown
                log.debug("killing sandbox %s: %s", sbx.sandbox_id, exc)

    async def _new_session(self) -> _Session:
        sbx = await AsyncSandbox.create(template=self.options.template, timeout=self.options.timeout,
                                        **self.options.create_options())
        self._live.add(sbx)
        return _Session(sbx)

    async def session(self, ctx: Context[Any, Any]) -> _Session:
        """The calling session's sandbox, made on first use (or again if it expired)."""
        session: _Session | None
        if self._shared:
            async with self._create_lock:
                session = self._shared_session
                if session is None or not await session.sandbox.is_running():
                    if session is not None:  # it expired (idle past --timeout)
                        self._live.discard(session.sandbox)
                    session = self._shared_session = await self._new_session()
        else:
            connection = _connection(ctx)
            lock = connection.state.setdefault(_SANDBOX_KEY + ".lock", anyio.Lock())
            async with lock:
                session = connection.state.get(_SANDBOX_KEY)
                if session is None or not await session.sandbox.is_running():
                    if session is not None:
                        self._live.discard(session.sandbox)
                    session = await self._new_session()
                    connection.state[_SANDBOX_KEY] = session
                    connection.exit_stack.push_async_callback(self._kill, session.sandbox)
        await session.sandbox.set_timeout(self.options.timeout)
        return session

    def http_app(self, path: str = "/mcp", allowed_hosts: Sequence[str] = ()) -> Any:
        """The streamable-HTTP endpoint as an ASGI app, behind the checks all our listeners share
        (`_webguard.py`): a loopback Host (or one of `allowed_hosts`), else 421; no page of
        another origin or site, else 403. The `mcp` SDK's own Host/Origin check is replaced by
        ours (one implementation for every listener); its rule that a POST is JSON stays."""
        from mcp.server.transport_security import TransportSecuritySettings

        from .._webguard import HostPolicy, WebGuard

        hosts = HostPolicy.of(allowed_hosts)
        app = self.mcp.streamable_http_app(
            streamable_http_path=path,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        return WebGuard(app, hosts, bodies=False)  # the SDK refuses a POST that is not JSON itself

    # -- tools ------------------------------------------------------------------------------

    def _register(self) -> None:
        tool = self.mcp.tool

        @tool(name="run_python_code", title="Run Python code", description=RUN_PYTHON_DESCRIPTION,
              structured_output=False)
        async def run_python_code(
            ctx: Context[Any, Any],
            python_code: Annotated[str, Field(description="Python code to run")],
            global_variables: Annotated[dict[str, Any], Field(
                description="Map of global variables in context when the code is executed")] = {},  # noqa: B006 - never mutated; the schema's default is {}
        ) -> str:
            return await self.run_python_code(ctx, python_code, global_variables)

        @tool(name="run_code", structured_output=False)
        async def run_code(ctx: Context[Any, Any], code: str, context_id: str | None = None) -> list[ContentBlock]:
            """Run a Python cell in a stateful context: variables and imports carry over between
            calls with the same context_id (the default context when omitted). Returns the output,
            the last expression's value, and charts/images as images."""
            session = await self.session(ctx)
            context = await _find_context(session.sandbox, context_id)
            execution = await _guard(session.sandbox.run_code(
                code, context=context, timeout=self.options.call_timeout))
            return execution_content(execution)

        @tool(name="create_code_context", structured_output=False)
        async def create_code_context(ctx: Context[Any, Any], cwd: str | None = None) -> str:
            """Create a new, empty stateful context for run_code and return its context_id."""
            session = await self.session(ctx)
            context = await _guard(session.sandbox.create_code_context(cwd=cwd))
            return context.id

        @tool(name="run_command", structured_output=False)
        async def run_command(ctx: Context[Any, Any], command: str, cwd: str | None = None,
                              timeout: float | None = None) -> str:
            """Run a shell command line (bash syntax, coreutils, python3) in the sandbox and
            return its exit code, stdout and stderr. A non-zero exit code is not an error."""
            session = await self.session(ctx)
            limit = min(timeout or self.options.call_timeout, self.options.call_timeout)
            result = await _guard(session.sandbox.commands.run(command, cwd=cwd, timeout=limit))
            return _command_text(result.exit_code, result.stdout, result.stderr, result.error)

        @tool(name="read_file", structured_output=False)
        async def read_file(ctx: Context[Any, Any], path: str) -> str:
            """Read a UTF-8 text file from the sandbox."""
            session = await self.session(ctx)
            info = await _guard(session.sandbox.files.get_info(path))
            if info.size > MAX_READ_BYTES:
                raise ToolError(f"{path} is {info.size} bytes; read_file returns at most "
                                f"{MAX_READ_BYTES} (use run_command with head/tail)")
            data = await _guard(session.sandbox.files.read(path, format="bytes"))
            try:
                return bytes(data).decode("utf-8")
            except UnicodeDecodeError:
                raise ToolError(f"{path} is not UTF-8 text ({len(data)} bytes)") from None

        @tool(name="write_file", structured_output=False)
        async def write_file(ctx: Context[Any, Any], path: str, content: str) -> str:
            """Write a text file in the sandbox (parent folders are created)."""
            session = await self.session(ctx)
            info = await _guard(session.sandbox.files.write(path, content))
            return f"wrote {len(content.encode('utf-8'))} bytes to {info.path}"

        @tool(name="list_files", structured_output=False)
        async def list_files(ctx: Context[Any, Any], path: str = "/home/user", depth: int = 1) -> str:
            """List a folder of the sandbox: one entry a line, folders ending in '/'."""
            session = await self.session(ctx)
            entries = await _guard(session.sandbox.files.list(path, depth=max(1, min(depth, 10))))
            lines = [f"{e.path}{'/' if e.type is not None and e.type.value == 'dir' else ''}"
                     f"\t{e.size}" for e in sorted(entries, key=lambda e: e.path)]
            return "\n".join(lines) or "(empty)"

    async def run_python_code(self, ctx: Context[Any, Any], python_code: str,
                              global_variables: dict[str, Any]) -> str:
        """mcp-run-python's tool over a context of this session's sandbox."""
        session = await self.session(ctx)
        try:
            globals_json = json.dumps(global_variables)
        except (TypeError, ValueError) as exc:
            raise ToolError(f"global_variables must be JSON: {exc}") from None
        lines: list[str] = []
        cell = runner_cell(python_code, globals_json, self.options.return_mode == "json")
        async with session.lock:
            if session.runner is None:
                session.runner = await _guard(session.sandbox.create_code_context())
            try:
                execution = await session.sandbox.run_code(
                    cell, context=session.runner, timeout=self.options.call_timeout,
                    on_stdout=lambda m: lines.append(m.line), on_stderr=lambda m: lines.append(m.line))
                report = _report(execution)
            except TimeoutException:
                report = {"status": "run-error",
                          "error": f"TimeoutError: the code ran for more than "
                                   f"{self.options.call_timeout:g} seconds"}
            except SandboxException as exc:
                raise ToolError(str(exc)) from None
        output = "".join(lines).splitlines()
        return as_json(report, output) if self.options.return_mode == "json" else as_xml(report, output)


def _report(execution: Execution) -> dict[str, Any]:
    """The runner's report: the last display of our MIME type (the runner displays it after the
    user's code has finished, so anything the code displayed itself comes earlier)."""
    for result in reversed(execution.results):
        if result.extra and _RESULT_MIME in result.extra:
            data = result.extra[_RESULT_MIME]
            if isinstance(data, dict):
                return data
    if execution.error is not None:  # the runner itself failed (e.g. the context was restarted)
        return {"status": "run-error", "error": f"{execution.error.name}: {execution.error.value}"}
    return {"status": "run-error", "error": "the code ended the interpreter"}


def _escape_closing(tag: str, text: str) -> str:
    """mcp-run-python's escaping: `<tag>`/`</tag ...>` inside a section become &lt;...&gt;."""
    import re

    pattern = re.compile(rf"</?\s*{tag}(?:.*?>)?", re.IGNORECASE)
    return pattern.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), text)


def as_xml(report: dict[str, Any], output: Sequence[str]) -> str:
    """mcp-run-python's XML return format."""
    xml = [f"<status>{report['status']}</status>"]
    if output:
        xml += ["<output>", *(_escape_closing("output", line) for line in output), "</output>"]
    if report["status"] == "success":
        if report.get("return_value_json"):
            xml += ["<return_value>", _escape_closing("return_value", report["return_value_json"]),
                    "</return_value>"]
    else:
        xml += ["<error>", _escape_closing("error", report.get("error", "")), "</error>"]
    return "\n".join(xml)


def as_json(report: dict[str, Any], output: Sequence[str]) -> str:
    """mcp-run-python's JSON return format (`--return-mode json`)."""
    data: dict[str, Any] = {"status": report["status"], "output": list(output)}
    if report["status"] == "success":
        raw = report.get("return_value_json")
        data["return_value"] = json.loads(raw) if raw else None
    else:
        data["error"] = report.get("error", "")
    return json.dumps(data)


def execution_content(execution: Execution) -> list[ContentBlock]:
    """An `Execution` as MCP content: one text block, then an image block per PNG/JPEG."""
    parts: list[str] = []
    if execution.logs.stdout:
        parts.append("".join(execution.logs.stdout).rstrip("\n"))
    if execution.logs.stderr:
        parts.append("[stderr]\n" + "".join(execution.logs.stderr).rstrip("\n"))
    images: list[ContentBlock] = []
    for result in execution.results:
        if result.png:
            images.append(ImageContent(type="image", data=result.png, mime_type="image/png"))
        elif result.jpeg:
            images.append(ImageContent(type="image", data=result.jpeg, mime_type="image/jpeg"))
        if result.is_main_result and result.text is not None:
            parts.append(f"[result]\n{result.text}")
        elif result.chart is not None:
            parts.append(f"[chart: {result.chart.type.value}] {result.chart.title or ''}".rstrip())
    if execution.error is not None:
        parts.append(f"[error]\n{execution.error.traceback or execution.error.name}".rstrip("\n"))
    text = "\n".join(parts) if parts else "(no output)"
    return [TextContent(type="text", text=text), *images]


def _command_text(exit_code: int, stdout: str, stderr: str, error: str | None) -> str:
    text = f"exit_code: {exit_code}\n"
    if stdout:
        text += f"[stdout]\n{stdout}" + ("" if stdout.endswith("\n") else "\n")
    if stderr:
        text += f"[stderr]\n{stderr}" + ("" if stderr.endswith("\n") else "\n")
    if error:
        text += f"[error] {error}\n"
    return text.rstrip("\n")


async def _guard(awaitable: Any) -> Any:
    """Expected sandbox failures become tool errors the model can read."""
    try:
        return await awaitable
    except (SandboxException, ValueError, OSError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}") from None


async def _find_context(sbx: AsyncSandbox, context_id: str | None) -> CodeContext | None:
    if context_id is None:
        return None
    contexts: Any = await sbx.list_code_contexts()  # (mypy reads `list` as AsyncSandbox.list)
    for context in contexts:
        if context.id == context_id:
            return context
    raise ToolError(f"no code context {context_id!r} (create one with create_code_context)")


def _connection(ctx: Context[Any, Any]) -> Any:
    """The per-client `mcp.server.connection.Connection` (its `state` and `exit_stack` are the
    SDK's documented per-connection hooks). MCPServer's tool `Context` reaches it only through
    the request's `ServerSession`, which keeps it as `_connection` in mcp 2.3."""
    connection = getattr(ctx.request_context.session, "_connection", None)
    if connection is None or not hasattr(connection, "exit_stack"):
        raise ToolError("this mcp version does not expose the session's connection")
    return connection


def _version() -> str:
    from .. import __version__

    return __version__


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="declaw-wasm mcp", description=__doc__.split("\n\n")[0])
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default) or streamable HTTP")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default loopback)")
    p.add_argument("--port", type=int, default=3001, help="HTTP: port (default 3001)")
    p.add_argument("--path", default="/mcp", help="HTTP: endpoint path (default /mcp)")
    p.add_argument("--public", action="store_true",
                   help="HTTP: allow a non-loopback --host (the endpoint has no authentication)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="HTTP: also answer requests whose Host is NAME (besides localhost, 127.0.0.1, "
                        "[::1] and a specific --host); repeatable; DECLAW_WASM_ALLOWED_HOSTS adds more")
    p.add_argument("--template", default=None, help="sandbox template (default code-interpreter)")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds a session's sandbox lives after its last call (default 300)")
    p.add_argument("--call-timeout", type=float, default=60.0,
                   help="longest single tool call in seconds (default 60)")
    p.add_argument("--return-mode", choices=["xml", "json"], default="xml",
                   help="run_python_code's output format, as mcp-run-python's (default xml)")
    p.add_argument("--network", type=_json_object, default=None, metavar="JSON",
                   help='network policy for every sandbox, e.g. \'{"allow_out": ["pypi.org"]}\'')
    p.add_argument("--security", type=_json_object, default=None, metavar="JSON",
                   help="declaw SecurityPolicy (as JSON) for every sandbox")
    p.add_argument("--no-internet", action="store_true", help="sandboxes reach no network")
    return p


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    options = ServerOptions(template=args.template, timeout=args.timeout,
                            call_timeout=args.call_timeout, return_mode=args.return_mode,
                            network=args.network, security=args.security,
                            allow_internet_access=not args.no_internet)
    try:  # a bad policy is refused now, not at the first tool call
        create_request(options.template, options.timeout, None, None, options.create_options(), {})
    except (InvalidArgumentException, TypeError, ValueError) as exc:
        print(f"declaw-wasm mcp: bad sandbox options: {exc}", file=sys.stderr)
        return 2
    if args.transport == "stdio":
        DeclawMcpServer(options, shared=True).mcp.run("stdio")
        return 0
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.public:
        print(f"declaw-wasm mcp: refusing to serve on {args.host}: the MCP endpoint has no "
              "authentication, so anyone who reaches it could run code in sandboxes; bind a "
              "loopback address (behind your own authenticating proxy) or pass --public",
              file=sys.stderr)
        return 2
    import uvicorn

    from ..settings import allowed_hosts

    names = [*allowed_hosts(), *args.allowed_host]
    if args.host not in ("0.0.0.0", "::", ""):  # the address or name the operator bound is the server's
        names.append(args.host)
    elif not names:
        print("declaw-wasm mcp: listening on every address; requests are answered only for Host "
              "localhost and loopback addresses: name the others clients use with --allowed-host",
              file=sys.stderr)
    server = DeclawMcpServer(options)
    try:
        app = server.http_app(args.path, names)
    except ValueError as exc:
        print(f"declaw-wasm mcp: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level=server.mcp.settings.log_level.lower())
    return 0


__all__ = ["DeclawMcpServer", "ServerOptions", "as_json", "as_xml", "execution_content", "main",
           "parser"]
