"""`sbx.pty`: an interactive shell on a pseudo-terminal (E2B's `Pty`).

There is no kernel tty here: the in-guest shell does a tty's work itself (guest/declaw_shell:
echo, line editing, ^C/^D, the prompt, `python3` giving the REPL) and the host turns output
newlines into CRLF. Output is one byte stream (stdout and stderr together), as on a terminal.
The size is the host's to set; `$COLUMNS`/`$LINES` follow it before each prompt, `tput` at once.
"""

from __future__ import annotations

from typing import Callable, Optional

from . import _args
from ._backend import SandboxBackend
from .commands import CommandHandle
from .models import PtySize
from .wire import CreatePty, TerminalSize

DEFAULT_TIMEOUT = 60.0
DEFAULT_SIZE = PtySize()  # 80 columns by 24 rows (declaw's default)


class Pty:
    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    def create(self, size: PtySize = DEFAULT_SIZE, user: Optional[str] = None, cwd: Optional[str] = None,
               envs: Optional[dict[str, str]] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
               request_timeout: Optional[float] = None,
               on_data: Optional[Callable[[bytes], None]] = None) -> CommandHandle:
        """Start `bash -i -l` on a terminal of `size`; read its output with
        `handle.wait(on_pty=...)`, iteration, or `on_data`. `timeout` (seconds, 0: none) ends it."""
        size = _args.pty_size(size)
        request = CreatePty(size=TerminalSize(rows=size.rows, cols=size.cols), envs=_args.envs(envs),
                            cwd=_args.path(cwd) if cwd is not None else None,
                            timeout=_args.timeout(timeout))
        return CommandHandle(self._backend.start(request, on_pty=on_data), self._backend.sandbox_id)

    def send_stdin(self, pid: int, data: bytes, request_timeout: Optional[float] = None) -> None:
        self._backend.send_stdin(pid, _args.stdin_data(data))

    def resize(self, pid: int, size: PtySize, request_timeout: Optional[float] = None) -> None:
        self._backend.resize_pty(pid, _args.pty_size(size))

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return self._backend.kill_process(pid)

    def connect(self, pid: int, timeout: Optional[float] = DEFAULT_TIMEOUT,
                request_timeout: Optional[float] = None) -> CommandHandle:
        return CommandHandle(self._backend.process(pid, pty=True), self._backend.sandbox_id)
