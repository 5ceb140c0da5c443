"""Exceptions, named and arranged as in E2B's SDK so that `except` clauses carry over."""

from __future__ import annotations


class SandboxException(Exception):
    """Base class for every sandbox error."""


class TimeoutException(SandboxException):
    """A command, cell or sandbox ran past its timeout.

    For a command, `stdout` and `stderr` hold what the guest wrote before it was stopped.
    """

    def __init__(self, message: str, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout = stdout
        self.stderr = stderr


class InvalidArgumentException(SandboxException):
    """An argument was not acceptable (the message names it)."""


class NotEnoughSpaceException(SandboxException):
    """The sandbox's disk quota is used up."""


class NotFoundException(SandboxException):
    """Something asked for does not exist."""


class FileNotFoundException(NotFoundException):
    """A path in the sandbox does not exist."""


class SandboxNotFoundException(NotFoundException):
    """No live sandbox has this id (never created, killed, or timed out)."""


class TemplateException(SandboxException):
    """The template is unknown or cannot do what was asked."""


class RateLimitException(SandboxException):
    """Too many sandboxes or commands at once."""


class AuthenticationException(Exception):
    """Bad or missing API key (remote mode)."""


class ConflictException(SandboxException):
    """A conflict (declaw's HTTP 409): a volume file changed since the `if_version` read, or a
    volume lock is held by someone else / not held by the caller."""


# declaw's name for a failed compare-and-set write: the same class.
VersionMismatchException = ConflictException
