"""The state store (private): blobs, signed records and leases over fsspec.

See store.py, lease.py, records.py and keys.py (the signing key), and docs/state-store.md for which
stores are lease-safe and who may do what."""

from .errors import StateKeyError, UntrustedRecord
from .ids import check_id, check_key, new_id
from .keys import StateKey
from .lease import LeaseHeld, LeaseInfo, LeaseLost, Leases, LeaseStatus
from .store import (
                    STATE_ENV,
                    BlobRef,
                    BlobWriter,
                    IntegrityError,
                    RecordNotFound,
                    StateError,
                    StateStore,
                    UnsafeStoreError,
                    VerifiedReader,
                    default_state_url,
                    default_store,
                    iter_chunks,
                    sha256_hex,
)

__all__ = [
    "STATE_ENV", "BlobRef", "BlobWriter", "IntegrityError", "LeaseHeld", "LeaseInfo", "LeaseLost",
    "LeaseStatus", "Leases", "RecordNotFound", "StateError", "StateKey", "StateKeyError", "StateStore",
    "UnsafeStoreError", "UntrustedRecord",
    "VerifiedReader", "check_id", "check_key", "default_state_url", "default_store", "iter_chunks",
    "new_id", "sha256_hex",
]
