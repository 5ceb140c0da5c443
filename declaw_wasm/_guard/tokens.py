"""The per-sandbox token map: one `[REDACTED_<TYPE>_<n>]` per distinct value, and back.

The map is the only place original values live on the host. It is owned by the sandbox (every
connection of one sandbox shares it, so a value sent to two hosts gets one token and an answer
from either is rehydrated), is thread-safe, bounded (`max_entries`: past it new values still get
redacted, with a numberless token that is never rehydrated), and serialises to a plain dict so a
snapshot can persist it. That dict holds the original values: store it like a secret.
"""

from __future__ import annotations

import re
import threading
from typing import Any

#: A complete token. `<TYPE>` is a PIIType value upper-cased.
TOKEN_RE = re.compile(r"\[REDACTED_([A-Z][A-Z_]*?)_(\d{1,9})\]")
TOKEN_RE_BYTES = re.compile(rb"\[REDACTED_([A-Z][A-Z_]*?)_(\d{1,9})\]")
#: The longest token we ever write: "[REDACTED_" + "CREDIT_CARD" + "_" + 9 digits + "]".
MAX_TOKEN_LEN = 40

DEFAULT_MAX_ENTRIES = 100_000


class TokenMap:
    """value <-> token for one sandbox.

    `tokenize(type, value, rehydrate=False)` makes a token that `lookup` never resolves (card
    verification codes: PCI-DSS forbids keeping them once used).
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._by_value: dict[tuple[str, str], str] = {}
        self._by_token: dict[str, tuple[str, str, bool]] = {}  # token -> (type, value, rehydrate)
        self._counters: dict[str, int] = {}
        self.overflowed = False

    def __len__(self) -> int:
        return len(self._by_token)

    def tokenize(self, pii_type: str, value: str, *, rehydrate: bool = True) -> str:
        key = (pii_type, value)
        token = self._by_value.get(key)
        if token is not None:
            return token
        with self._lock:
            token = self._by_value.get(key)
            if token is not None:
                return token
            label = pii_type.upper()
            if len(self._by_token) >= self.max_entries:
                self.overflowed = True
                return f"[REDACTED_{label}]"
            n = self._counters.get(label, 0) + 1
            self._counters[label] = n
            token = f"[REDACTED_{label}_{n}]"
            self._by_token[token] = (pii_type, value, rehydrate)
            self._by_value[key] = token
            return token

    def lookup(self, token: str) -> str | None:
        """The original value of a rehydratable token, else None."""
        entry = self._by_token.get(token)
        if entry is None or not entry[2]:
            return None
        return entry[1]

    def is_known(self, token: str) -> bool:
        return token in self._by_token

    def mapping(self) -> dict[str, str]:
        """{token: original} for every rehydratable token (`PIIHandler`'s redaction map)."""
        with self._lock:
            return {t: v for t, (_, v, r) in self._by_token.items() if r}

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            entries = [[t, ty, v, r] for t, (ty, v, r) in self._by_token.items()]
            return {"version": 1, "max_entries": self.max_entries, "entries": entries}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TokenMap:
        if data.get("version") != 1:
            raise ValueError(f"unknown token map version: {data.get('version')!r}")
        tm = cls(max_entries=int(data.get("max_entries", DEFAULT_MAX_ENTRIES)))
        for token, pii_type, value, rehydrate in data.get("entries", []):
            m = TOKEN_RE.fullmatch(token)
            if m is None or not isinstance(value, str):
                raise ValueError(f"bad token map entry: {token!r}")
            tm._by_token[token] = (pii_type, value, bool(rehydrate))
            tm._by_value[(pii_type, value)] = token
            label, n = m.group(1), int(m.group(2))
            tm._counters[label] = max(tm._counters.get(label, 0), n)
        return tm

    def load(self, data: dict[str, Any]) -> None:
        """Replace this map's entries by those of `to_dict()`'s output (a restored sandbox's
        guard keeps its own map object; its tokens come back from the snapshot)."""
        other = TokenMap.from_dict(data)
        with self._lock:
            self._by_value, self._by_token = other._by_value, other._by_token
            self._counters, self.max_entries = other._counters, other.max_entries

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenMap) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # never print the values
        return f"TokenMap({len(self)} tokens)"
