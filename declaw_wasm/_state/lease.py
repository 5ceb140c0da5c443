"""Leases: at most one holder of a name at a time, across processes and machines, with a TTL.

A lease is a series of generation objects `<name>/g000000000001.json`, `g...2`, ... The holder
is whoever wrote the highest generation, until it expires or is released. To take a lease, a
process reads the highest generation, and if that one has lapsed it *creates* the next one with
the store's atomic exclusive create (store.py): of two processes racing for generation n+1,
exactly one succeeds. Generations are never reused, so the holder never has to delete anything
(deleting would race with a taker re-creating the same name); old ones are pruned well below
the top. After creating, the taker lists again: a higher generation (possible only when its
view was stale) means it lost, and it steps aside.

Time: expiries are wall-clock (`time.time()`) so other machines can judge them. The holder may
renew only before its lease expires; others may break it only `grace` seconds after (default
1 s, `DECLAW_WASM_LEASE_GRACE`), which absorbs clock skew and the latency of the renewing write.
This is the usual lease contract: a holder that pauses past its TTL has lost the lease and is
told so on its next renew.

Each generation is a signed record (records.py): a generation that fails its check is refused,
never read as released or as anyone's (see `_read`).
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Optional

from .ids import check_key
from ..settings import lease_grace
from .errors import IntegrityError, RecordNotFound, StateError

if TYPE_CHECKING:
    from .store import StateStore

RECORD = "lease"  # a generation's record kind (records.py)
MAX_TTL = 7 * 24 * 3600.0
KEEP_GENERATIONS = 8
_ATTEMPTS = 16


class LeaseHeld(StateError):
    """Someone else holds the lease (`expires_in`: seconds until it lapses, if known)."""

    def __init__(self, message: str, expires_in: float = 0.0) -> None:
        super().__init__(message)
        self.expires_in = expires_in


class LeaseLost(StateError):
    """The caller is not (or no longer) the lease's holder."""


@dataclass(frozen=True)
class LeaseInfo:
    name: str
    token: str
    generation: int
    expires_at: float  # time.time() seconds
    ttl: float
    owner: str = ""

    @property
    def expires_in(self) -> float:
        return max(0.0, self.expires_at - time.time())


@dataclass(frozen=True)
class LeaseStatus:
    held: bool
    expires_in: float
    owner: str = ""
    generation: int = 0


def _grace() -> float:
    return lease_grace()


def _check_ttl(ttl: float) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl <= MAX_TTL:
        raise StateError(f"lease ttl must be a number of seconds in (0, {MAX_TTL:.0f}], got {ttl!r}")
    return float(ttl)


class Leases:
    """The leases of one store."""

    def __init__(self, store: "StateStore", grace: Optional[float] = None) -> None:
        self.store = store
        self._grace = grace

    @property
    def grace(self) -> float:
        return _grace() if self._grace is None else self._grace

    # -- generations ---------------------------------------------------------------------------------
    @staticmethod
    def _key(name: str, gen: int) -> str:
        return f"{name}/g{gen:012d}.json"

    def _generations(self, name: str) -> list[int]:
        gens = []
        for entry in self.store.names(name):
            if len(entry) == 18 and entry[0] == "g" and entry.endswith(".json") and entry[1:13].isdigit():
                gens.append(int(entry[1:13]))
        return sorted(gens)

    def _read(self, name: str, gen: int) -> Optional[dict[str, Any]]:
        """A generation's record; None if it vanished. One that fails its signature check (changed,
        forged or moved by someone without the state key, or written before records were signed)
        is refused: `UntrustedRecord`, and the lease can be neither taken nor renewed until the
        record is put right (deleted, or the store re-signed), since treating it as released
        would let whoever wrote it take the lease from its holder."""
        try:
            body = self.store.get_json(self._key(name, gen), kind=RECORD)
        except RecordNotFound:
            return None
        if not isinstance(body, dict) or not isinstance(body.get("expires_at"), (int, float)):
            raise IntegrityError(f"lease {name}: generation {gen} is malformed")
        return body

    def _top(self, name: str) -> tuple[int, Optional[dict[str, Any]]]:
        gens = self._generations(name)
        return (gens[-1], self._read(name, gens[-1])) if gens else (0, None)

    def _live(self, record: Optional[dict[str, Any]], now: float) -> bool:
        """Whether the record still excludes others (its expiry plus the grace not yet past)."""
        return record is not None and not record.get("released") and now <= float(record["expires_at"]) + self.grace

    # -- the API -------------------------------------------------------------------------------------
    def take(self, name: str, ttl: float, owner: str = "", breaking: str = "") -> LeaseInfo:
        """Take the lease for `ttl` seconds; `LeaseHeld` if someone holds it. `breaking`: the
        owner of a holder the caller *knows* is dead (its process or node is gone, as Ray or the
        pool reported): its lease is taken over without waiting for it to lapse."""
        check_key(name)
        ttl = _check_ttl(ttl)
        for _ in range(_ATTEMPTS):
            top, record = self._top(name)
            now = time.time()
            if top and record is None:
                continue  # vanished between list and read: look again
            dead = bool(breaking) and record is not None and record.get("owner") == breaking
            if top and self._live(record, now) and not dead:
                assert record is not None
                left = max(0.0, float(record["expires_at"]) - now)
                raise LeaseHeld(f"lease {name} is held" + (f" by {record['owner']}" if record.get("owner") else "")
                                + f" for {left:.1f} s more", left)
            mine = top + 1
            token = secrets.token_hex(16)
            body = {"token": token, "owner": owner, "expires_at": now + ttl, "released": False,
                    "host": socket.gethostname(), "pid": os.getpid()}
            try:
                self.store.create_json(self._key(name, mine), body, kind=RECORD)
            except FileExistsError:
                continue  # another process took generation `mine` first
            if any(g > mine for g in self._generations(name)):
                self._write(name, mine, {**body, "released": True})  # our view was stale: step aside
                continue
            self._prune(name, mine)
            return LeaseInfo(name, token, mine, now + ttl, ttl, owner)
        raise LeaseHeld(f"lease {name} is contended; try again")

    def renew(self, name: str, token: str, ttl: float) -> LeaseInfo:
        """Extend the caller's lease to `ttl` seconds from now; `LeaseLost` if it is not theirs
        or has expired."""
        check_key(name)
        ttl = _check_ttl(ttl)
        top, record = self._holder(name, token)
        now = time.time()
        if now >= float(record["expires_at"]):
            raise LeaseLost(f"lease {name} expired {now - float(record['expires_at']):.1f} s ago; take it again")
        body = {**record, "expires_at": now + ttl}
        self._write(name, top, body)
        if any(g > top for g in self._generations(name)):
            raise LeaseLost(f"lease {name} was taken by someone else")
        return LeaseInfo(name, token, top, body["expires_at"], ttl, str(record.get("owner", "")))

    def release(self, name: str, token: str) -> bool:
        """Give the lease up: True if it was still valid, False if it had already expired;
        `LeaseLost` if it is not the caller's."""
        check_key(name)
        top, record = self._holder(name, token)
        valid = time.time() < float(record["expires_at"])
        self._write(name, top, {**record, "released": True})
        return valid

    def status(self, name: str) -> LeaseStatus:
        check_key(name)
        top, record = self._top(name)
        now = time.time()
        if not top or record is None or not self._live(record, now):
            return LeaseStatus(False, 0.0, generation=top)
        return LeaseStatus(True, max(0.0, float(record["expires_at"]) - now),
                           str(record.get("owner", "")), top)

    @contextmanager
    def hold(self, name: str, ttl: float = 30.0, wait: float = 30.0, owner: str = "") -> Iterator[LeaseInfo]:
        """The lease as a mutex: wait up to `wait` seconds for it, release it at the end."""
        deadline = time.monotonic() + wait
        delay = 0.002
        while True:
            try:
                info = self.take(name, ttl, owner)
                break
            except LeaseHeld:
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.1)
        try:
            yield info
        finally:
            try:
                self.release(name, info.token)
            except (LeaseLost, RecordNotFound):
                pass  # expired meanwhile, or the record holding it was deleted

    # -- helpers -------------------------------------------------------------------------------------
    def _holder(self, name: str, token: str) -> tuple[int, dict[str, Any]]:
        top, record = self._top(name)
        if (not top or record is None or record.get("released") or not isinstance(token, str)
                or not hmac.compare_digest(str(record.get("token", "")), token)):
            raise LeaseLost(f"lease {name}: the token does not hold it")
        return top, record

    def _write(self, name: str, gen: int, body: dict[str, Any]) -> None:
        self.store.put_json(self._key(name, gen), body, kind=RECORD)

    def _prune(self, name: str, mine: int) -> None:
        for gen in self._generations(name):
            if gen >= mine - KEEP_GENERATIONS:
                break
            try:
                self.store.delete(self._key(name, gen))
            except OSError:
                pass
