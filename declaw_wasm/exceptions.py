"""Exceptions, named and arranged so that the `except` clauses of E2B and declaw code carry over.

The classes carry E2B's names (`*Exception`); declaw's names (`*Error`: `SandboxError`,
`TimeoutError`, `CommandExitError`, ...) are aliases of the same classes, as declaw's own
`*Exception` names are aliases of its `*Error` classes. Where the two differ, declaw's
arrangement wins: every class derives from `SandboxException` (E2B's `AuthenticationException`
does not) and carries declaw's `.code` (machine-readable, "" when none) and `.sandbox_id`. The
top-level package exports the `*Exception` names only (and `SandboxError`), as declaw's does:
`from declaw_wasm.exceptions import TimeoutError` would shadow Python's own.
"""

from __future__ import annotations

from typing import Optional


class SandboxException(Exception):
    """Base class for every sandbox error (declaw's `SandboxError`)."""

    code: str = ""  # declared on the class, so every instance has it (declaw's rule)

    def __init__(self, message: str = "", *, sandbox_id: Optional[str] = None, code: str = "") -> None:
        super().__init__(message)
        self.sandbox_id = sandbox_id
        self.code = code or type(self).code


class TimeoutException(SandboxException):
    """A command, cell or sandbox ran past its timeout, or the sandbox was killed while a call
    was in flight (E2B's messages: "the sandbox was killed or reached its end of life" for a
    command, "the sandbox was killed while the request was in progress" for a cell).

    For a command, `stdout` and `stderr` hold what the guest wrote before it was stopped.
    """

    code = "timeout"

    def __init__(self, message: str = "", stdout: str = "", stderr: str = "", *,
                 sandbox_id: Optional[str] = None, code: str = "") -> None:
        super().__init__(message, sandbox_id=sandbox_id, code=code)
        self.stdout = stdout
        self.stderr = stderr


class InvalidArgumentException(SandboxException):
    """An argument was not acceptable (the message names it)."""

    code = "invalid_argument"


class NotEnoughSpaceException(SandboxException):
    """The sandbox's disk quota is used up."""

    code = "not_enough_space"


class NotFoundException(SandboxException):
    """Something asked for does not exist."""

    code = "not_found"


class FileNotFoundException(NotFoundException):
    """A path in the sandbox does not exist."""


class SandboxNotFoundException(NotFoundException):
    """No live sandbox has this id (never created, killed, or timed out)."""


class TemplateException(SandboxException):
    """The template is unknown or cannot do what was asked."""

    code = "template"


class BuildException(TemplateException):
    """A template build failed (declaw's `BuildError`)."""

    code = "build_failed"


class RateLimitException(SandboxException):
    """Too many sandboxes, commands or watches at once."""

    code = "rate_limit"


class ConflictException(SandboxException):
    """The request conflicts with the state of a resource (HTTP 409; declaw's `ConflictError`):
    a volume file changed since the `if_version` read, a volume lock is held by someone else."""

    code = "conflict"


class SnapshotException(SandboxException):
    """A snapshot that cannot be taken, resumed or restored here: damaged or tampered with, made
    with another runtime or engine, or a sandbox state that cannot be carried (the message says
    what is needed)."""


class AuthenticationException(SandboxException):
    """Bad or missing API key (remote mode), or a call the sandbox's policy refuses."""

    code = "authentication"


class CommandExitException(SandboxException):
    """A background command's `wait()` found a non-zero exit (declaw's and E2B's rule; a
    foreground `commands.run` returns the result instead). Carries the result's fields."""

    code = "command_exit"

    def __init__(self, message: str = "", *, exit_code: int = 1, stdout: str = "", stderr: str = "",
                 sandbox_id: Optional[str] = None, error: Optional[str] = None) -> None:
        super().__init__(message or f"Command exited with code {exit_code} and error:\n{stderr}",
                         sandbox_id=sandbox_id)
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.error = error


# declaw's names for the same classes
SandboxError = SandboxException
TimeoutError = TimeoutException  # noqa: A001 (declaw's name; not exported at the top level)
InvalidArgumentError = InvalidArgumentException
NotEnoughSpaceError = NotEnoughSpaceException
NotFoundError = NotFoundException
TemplateError = TemplateException
BuildError = BuildException
RateLimitError = RateLimitException
ConflictError = ConflictException
VersionMismatchError = VersionMismatchException = ConflictException
AuthenticationError = AuthenticationException
CommandExitError = CommandExitException
