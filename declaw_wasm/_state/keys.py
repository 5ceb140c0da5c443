"""The state key: what the state store's records are signed with (records.py), held outside the
store, so that whoever can write the store but does not hold the key can neither change, forge
nor move a record unseen.

Where a process gets it, the first that applies:

* a hosted process (a pool's worker, a Ray actor: `host_process`) uses only the key its client
  gives it as a call argument (`give`, as a create's secrets are given), never its environment,
  a file of its machine, Ray's object store or `runtime_env`;
* `DECLAW_WASM_STATE_KEY`: 64 hex digits (32 bytes; `secrets.token_hex(32)` makes one);
* the key file, `DECLAW_WASM_STATE_KEY_FILE` (default: `state.key` in the user config folder):
  32 random bytes, made on first use with mode 0600 (a finished private temp file, then
  `link(2)`: a reader never sees half of one, and two processes making it at once end up with
  the same key). A key file that is not a regular file, not this user's, open to the group or
  others (any of mode 077), or not exactly 32 bytes is refused with an error saying so.

Hosts sharing a store share the key: give each the same `DECLAW_WASM_STATE_KEY`, or the same key
file (docs/state-store.md). Each use costs one `stat` of the key file (a changed file is read
again), so a key rotated or made private takes effect at once.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import hmac
import os
import secrets
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from .._printable import logger
from ..settings import STATE_KEY_ENV as KEY_ENV, STATE_KEY_FILE_ENV as KEY_FILE_ENV, state_key_file, state_key_hex
from .errors import StateKeyError

log = logger("declaw_wasm.state")

KEY_BYTES = 32
_HEX = frozenset("0123456789abcdef")


def key_id_of(secret: bytes) -> str:
    """A key's public name (16 hex digits), written beside each signature: a record signed with
    another key is told apart from one that was changed. It reveals nothing of the key."""
    return hashlib.sha256(b"declaw-wasm state key id\0" + secret).hexdigest()[:16]


@dataclass(frozen=True)
class StateKey:
    """A signing key: its 32 secret bytes (never shown), its id and where it came from."""

    secret: bytes = field(repr=False)
    source: str
    key_id: str = field(init=False)

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_BYTES:
            raise StateKeyError(f"the state key from {self.source} has {len(self.secret)} bytes, not {KEY_BYTES}")
        object.__setattr__(self, "key_id", key_id_of(self.secret))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateKey) and hmac.compare_digest(self.secret, other.secret)

    def __hash__(self) -> int:
        return hash(self.key_id)


def key_from_hex(text: str, source: str = KEY_ENV) -> StateKey:
    """A key written as 64 hex digits (surrounding blanks ignored)."""
    value = text.strip().lower()
    if len(value) != 2 * KEY_BYTES or not set(value) <= _HEX:
        raise StateKeyError(f"{source} must be {2 * KEY_BYTES} hex digits (a 32-byte key: "
                            f"python3 -c 'import secrets; print(secrets.token_hex(32))'), got "
                            f"{len(value)} characters{'' if set(value) <= _HEX else ' that are not all hex digits'}")
    return StateKey(bytes.fromhex(value), source)


@functools.lru_cache(maxsize=8)
def _from_env(text: str) -> StateKey:
    return key_from_hex(text, KEY_ENV)


# -- the key file ---------------------------------------------------------------------------------------
_file_lock = threading.Lock()
_file_cache: dict[str, tuple[tuple[int, ...], StateKey]] = {}


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode, st.st_uid)


def _check_file(path: Path, st: os.stat_result) -> None:
    """Refuse a key file anyone but this user could read or replace."""
    if not stat.S_ISREG(st.st_mode):
        raise StateKeyError(f"the state key file {path} is not a regular file: refused")
    if os.name == "posix":
        uid = os.geteuid()
        if st.st_uid != uid:
            raise StateKeyError(f"the state key file {path} belongs to uid {st.st_uid}, not to this user "
                                f"(uid {uid}): refused (whoever owns it could change the key)")
        if st.st_mode & 0o077:
            raise StateKeyError(
                f"the state key file {path} has mode {stat.S_IMODE(st.st_mode):04o}: the group or others may read "
                f"or change it, so it is refused. Make it private (chmod 600 {path}); if others could read "
                "it, make a new key and re-sign the stores you trust (docs/state-store.md)")
    if st.st_size != KEY_BYTES:
        raise StateKeyError(f"the state key file {path} holds {st.st_size} bytes, not {KEY_BYTES}: damaged, or not "
                            f"a key file (a key written as hex goes in {KEY_ENV})")


def _load(path: Path) -> StateKey:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        _check_file(path, st)
        secret = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(secret) != KEY_BYTES:
        raise StateKeyError(f"the state key file {path} changed while it was read: try again")
    key = StateKey(secret, str(path))
    _file_cache[str(path)] = (_identity(st), key)
    return key


def _write_new(path: Path, secret: bytes, flags: int) -> None:
    fd = os.open(path, flags | os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)  # whatever the umask
        view = memoryview(secret)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _create(path: Path) -> None:
    """Make the key file (32 random bytes, 0600), unless another process makes it first."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    secret = secrets.token_bytes(KEY_BYTES)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}"
    try:
        _write_new(tmp, secret, 0)
        os.link(tmp, path)  # appears whole, or fails with EEXIST: then the other process's key is ours
    except FileExistsError:
        return
    except OSError as exc:  # a file system without hard links: exclusive create of the file itself
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        try:
            _write_new(path, secret, 0)
        except FileExistsError:
            return
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    log.info("declaw-wasm: made the state key file %s (key id %s); hosts sharing a state store need "
             "this same key (docs/state-store.md)", path, key_id_of(secret))


def _from_file(path: Path) -> StateKey:
    with _file_lock:
        for _ in range(3):
            try:
                st = os.stat(path)
            except OSError as missing:
                if not isinstance(missing, (FileNotFoundError, NotADirectoryError)):
                    raise StateKeyError(f"the state key file {path} cannot be read "
                                        f"({missing.strerror or missing})") from None
                try:
                    _create(path)
                except OSError as exc:
                    raise StateKeyError(
                        f"no state key: {KEY_ENV} is unset and the key file {path} cannot be made "
                        f"({exc.strerror or exc}); set {KEY_ENV} (64 hex digits) or {KEY_FILE_ENV} "
                        "(docs/state-store.md)") from None
                continue
            cached = _file_cache.get(str(path))
            if cached is not None and cached[0] == _identity(st):
                return cached[1]
            try:
                return _load(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StateKeyError(f"the state key file {path} cannot be read ({exc.strerror or exc})") from None
        raise StateKeyError(f"the state key file {path} keeps changing: try again")


# -- this process's key -------------------------------------------------------------------------------
_hosted: Optional[str] = None  # set in a pool's worker or a Ray actor: the key comes from its client
_given: Union[StateKey, str, None] = None  # the key a client gave, or why it had none


def current() -> StateKey:
    """The key this process signs and checks records with (StateKeyError if it has none)."""
    if _hosted is not None:
        given = _given
        if isinstance(given, StateKey):
            return given
        if isinstance(given, str):
            raise StateKeyError(f"{_hosted} has no state key: its client has none ({given})")
        raise StateKeyError(f"{_hosted} was given no state key by its client (it takes none from "
                            "its environment or files)")
    text = state_key_hex()
    if text is not None:
        return _from_env(text)
    return _from_file(state_key_file())


def host_process(label: str) -> None:
    """This process hosts sandboxes for a client (a pool's worker, a Ray actor): from now on it
    uses only the key the client gives with its calls."""
    global _hosted
    _hosted = label


def give(value: object) -> None:
    """The key a client sent with a call (`for_host`): its 32 bytes, or why it had none."""
    global _given
    if isinstance(value, (bytes, bytearray, memoryview)):
        secret = bytes(value)
        current_key = _given
        if isinstance(current_key, StateKey) and hmac.compare_digest(current_key.secret, secret):
            return
        _given = StateKey(secret, f"the client of {_hosted or 'this host'}")
    elif isinstance(value, str):
        _given = value[:1000]
    else:
        raise StateKeyError(f"a malformed state key from the client ({type(value).__name__})")


def for_host() -> Union[bytes, str]:
    """What a client sends a host with a call: this process's key, or (when it has none) why,
    so that the host fails with that reason only if it needs the key."""
    try:
        return current().secret
    except StateKeyError as exc:
        return str(exc)
