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
