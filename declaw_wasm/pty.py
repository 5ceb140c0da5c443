"""`sbx.pty`: an interactive shell on a pseudo-terminal (E2B's `Pty`).

There is no kernel tty here: the in-guest shell does a tty's work itself (runtime/declaw_shell:
echo, line editing, ^C/^D, the prompt, `python3` giving the REPL) and the host turns output
newlines into CRLF. Output is one byte stream (stdout and stderr together), as on a terminal.
The size is the host's to set; `$COLUMNS`/`$LINES` follow it before each prompt, `tput` at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from .commands import CommandHandle
from .exceptions import NotFoundException
from .models import PtySize
from .process import Process, _check_size

if TYPE_CHECKING:
    from .sandbox import SandboxCore

DEFAULT_TIMEOUT = 60.0


class Pty:
    def __init__(self, core: "SandboxCore") -> None:
        self._core = core

    def create(self, size: PtySize, user: Optional[str] = None, cwd: Optional[str] = None,
               envs: Optional[dict[str, str]] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
               request_timeout: Optional[float] = None,
               on_data: Optional[Callable[[bytes], None]] = None) -> CommandHandle:
        """Start `bash -i -l` on a terminal of `size`; read its output with
        `handle.wait(on_pty=...)`, iteration, or `on_data`. `timeout` (seconds, 0: none) ends it."""
        process = self._core.spawn("", envs=envs, cwd=cwd, timeout=timeout, pty=_check_size(size),
                                   stdin=True, on_pty=on_data)
        return CommandHandle(process)

    def send_stdin(self, pid: int, data: bytes, request_timeout: Optional[float] = None) -> None:
        self._running(pid).send_stdin(data)

    def resize(self, pid: int, size: PtySize, request_timeout: Optional[float] = None) -> None:
        self._running(pid).resize(size)

    def kill(self, pid: int, request_timeout: Optional[float] = None) -> bool:
        return self._core.kill_process(pid)

    def connect(self, pid: int, timeout: Optional[float] = DEFAULT_TIMEOUT,
                request_timeout: Optional[float] = None) -> CommandHandle:
        return CommandHandle(self._running(pid))

    def _running(self, pid: int) -> Process:
        process = self._core.process(pid)
        if process is None or process.pty_size is None:
            raise NotFoundException(f"no running PTY with pid {pid} in sandbox {self._core.sandbox_id}")
        return process
