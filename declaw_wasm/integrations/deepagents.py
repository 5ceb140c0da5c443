"""LangChain Deep Agents backend: `DeclawWasmSandbox`, a `deepagents.backends.sandbox.BaseSandbox`.

    from deepagents import create_deep_agent
    from declaw_wasm.integrations.deepagents import DeclawWasmSandbox

    agent = create_deep_agent(model=..., backend=DeclawWasmSandbox())

`BaseSandbox` builds `ls`, `read`, `write`, `edit` and `glob` from `execute` (small `python3`
scripts, which run in the sandbox's CPython) and `upload_files`/`download_files` (our files API).
`grep` is ours: deepagents' default (`grep -rHnFZ ... 2>/dev/null || true`) works in the sandbox
too, but hides grep's errors, so a missing path is silently "no match"; ours reports it. Ours is
a short `python3` script emitting the same `path\\0line:text` records, parsed by deepagents' own
parser. Globs containing `/` keep deepagents' own (Python) route.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
from typing import Any

from .. import FileNotFoundException, Sandbox, SandboxException, TimeoutException
from ._common import missing_extra

try:
    from deepagents.backends.protocol import (
        ExecuteResponse,
        FileDownloadResponse,
        FileUploadResponse,
        GrepResult,
    )
    from deepagents.backends.sandbox import BaseSandbox, _parse_grep_output
except ImportError as exc:  # the framework is an optional extra
    raise missing_extra("deepagents") from exc

# Literal search (GNU `grep -rF` semantics for a literal): records are `path\0line:text`.
_GREP_SCRIPT = r"""
import base64, fnmatch, os, sys
pattern, root, include, excluded = (base64.b64decode(a).decode() for a in sys.argv[1:5])
excluded = set(filter(None, excluded.split("\0")))
limit = int(sys.argv[5])
count = 0
def search(path):
    global count
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if pattern in line:
            sys.stdout.write(path + "\0" + str(number) + ":" + line + "\n")
            count += 1
            if 0 <= limit < count:
                sys.exit(0)
if os.path.isdir(root):
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in excluded)
        for name in sorted(files):
            if not include or fnmatch.fnmatchcase(name, include):
                search(os.path.join(folder, name))
elif os.path.exists(root):
    search(root)
else:
    sys.stderr.write(root + ": No such file or directory\n")
    sys.exit(2)
"""


class DeclawWasmSandbox(BaseSandbox):
    """A Deep Agents sandbox backend over a declaw-wasm `Sandbox`.

    Args:
        sandbox: an existing sandbox to use (then `close` leaves it running); else one is made
            with `template`, `timeout` and `create_kwargs`.
        command_timeout: the default limit for `execute` when the caller gives none.
    """

    def __init__(self, sandbox: Sandbox | None = None, *, template: str | None = None,
                 timeout: float = 3600, command_timeout: float = 300,
                 **create_kwargs: Any) -> None:
        self._owns = sandbox is None
        self.sandbox = sandbox or Sandbox.create(template=template, timeout=timeout,
                                                 **create_kwargs)
        self.command_timeout = command_timeout

    @property
    def id(self) -> str:
        return self.sandbox.sandbox_id

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        limit = timeout if timeout else self.command_timeout
        try:
            result = self.sandbox.commands.run(command, timeout=limit)
        except TimeoutException as exc:
            partial = _combine(getattr(exc, "stdout", "") or "", getattr(exc, "stderr", "") or "")
            return ExecuteResponse(output=f"{partial}\n[timed out after {limit:g}s]".lstrip("\n"),
                                   exit_code=124)
        except SandboxException as exc:
            return ExecuteResponse(output=f"Error: {exc}", exit_code=None)
        truncated = bool(result.error and "truncat" in result.error)
        return ExecuteResponse(output=_combine(result.stdout, result.stderr),
                               exit_code=result.exit_code, truncated=truncated)

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        responses = []
        for path, content in files:
            if not posixpath.isabs(path):
                responses.append(FileUploadResponse(path=path, error="invalid_path"))
                continue
            try:
                self.sandbox.files.write(path, content)
                responses.append(FileUploadResponse(path=path, error=None))
            except SandboxException as exc:
                responses.append(FileUploadResponse(path=path, error=_error_code(exc)))
        return responses

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        responses = []
        for path in paths:
            if not posixpath.isabs(path):
                responses.append(FileDownloadResponse(path=path, content=None,
                                                      error="invalid_path"))
                continue
            try:
                data = self.sandbox.files.read(path, format="bytes")
                responses.append(FileDownloadResponse(path=path, content=bytes(data), error=None))
            except SandboxException as exc:
                responses.append(FileDownloadResponse(path=path, content=None,
                                                      error=_error_code(exc)))
        return responses

    def grep(self, pattern: str, path: str | None = None, glob: str | None = None, *,
             max_count: int | None = None) -> GrepResult:
        if glob and "/" in glob:  # deepagents' own route: a Python glob, no `grep -Z`
            return super().grep(pattern, path, glob, max_count=max_count)
        root = path or "."
        excluded = "\0".join(d for d in self.grep_exclude_dirs
                             if d != posixpath.basename(posixpath.normpath(root)))
        args = [base64.b64encode(a.encode()).decode() for a in (pattern, root, glob or "", excluded)]
        limit = -1 if max_count is None else int(max_count)
        command = f"python3 -c {shlex.join([_GREP_SCRIPT, *args, str(limit)])}"
        result = self.execute(command)
        if result.exit_code == 2:
            return GrepResult(error=f"Path '{root}': {result.output.strip()}")
        return _parse_grep_output(result, path, max_count)

    async def agrep(self, pattern: str, path: str | None = None, glob: str | None = None, *,
                    max_count: int | None = None) -> GrepResult:
        import anyio

        return await anyio.to_thread.run_sync(
            lambda: self.grep(pattern, path, glob, max_count=max_count))

    def close(self) -> None:
        """Kill the sandbox (unless it was handed in)."""
        if self._owns:
            self.sandbox.kill()
            self._owns = False


def _combine(stdout: str, stderr: str) -> str:
    if stdout and stderr and not stdout.endswith("\n"):
        return f"{stdout}\n{stderr}"
    return stdout + stderr


def _error_code(exc: SandboxException) -> str:
    text = str(exc)
    if isinstance(exc, FileNotFoundException):
        return "invalid_path" if "not a directory" in text else "file_not_found"
    if "is a directory" in text:
        return "is_directory"
    if "read-only" in text:
        return "permission_denied"
    return text


__all__ = ["DeclawWasmSandbox"]
