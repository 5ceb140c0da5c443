"""Which destinations a guard applies to (`domains` lists).

Entries: an exact host (case-insensitive), `*.suffix` (subdomains only, never the apex), or
`~regex` (RE2, searched in the host name; anchor it yourself). Two readings of "no list", as in
declaw: PII, toxicity, code security and invisible text apply everywhere when `domains` is None
or empty; injection defense and the content gate apply nowhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .._re2 import compile_user_pattern


def normalize_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("["):  # [v6]:port
        return host[1:host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    return compile_user_pattern(pattern)


def host_matches(entry: str, host: str) -> bool:
    entry = entry.strip()
    if entry.startswith("~"):
        return _regex(entry[1:]).search(host) is not None
    entry = entry.lower().rstrip(".")
    if entry.startswith("*."):
        return host.endswith(entry[1:]) and host != entry[2:]
    return host == entry


def in_scope(domains: Sequence[str] | None, host: str, *, empty_means_all: bool) -> bool:
    if not domains:
        return empty_means_all
    h = normalize_host(host)
    return any(host_matches(e, h) for e in domains)
