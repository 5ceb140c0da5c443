"""The state store's errors (public exception classes underneath)."""

from __future__ import annotations

from ..exceptions import NotFoundException, SandboxException


class StateError(SandboxException):
    """The state store cannot do what was asked (the message says why)."""


class IntegrityError(StateError):
    """Something read from the state store is truncated, damaged or tampered with."""


class RecordNotFound(NotFoundException):
    """No record (or blob) at this key in the state store."""


class UnsafeStoreError(StateError):
    """The store has no atomic exclusive create, so a lease there could be held twice."""


class StateKeyError(StateError):
    """The state store's signing key cannot be had or used (a malformed `DECLAW_WASM_STATE_KEY`,
    a key file others may read, a hosted process given none): the message says which."""


class UntrustedRecord(IntegrityError):
    """A record of the state store that fails its signature check: changed or moved by someone
    without the state key, signed with another key, or written before records were signed.
    Nothing of it is used. `reason`: "unsigned", "other-key", "kind", "mismatch", "malformed"."""

    def __init__(self, message: str, reason: str = "mismatch") -> None:
        super().__init__(message)
        self.reason = reason
