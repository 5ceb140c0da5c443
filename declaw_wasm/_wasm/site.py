"""The guest's own site-packages: our guest-side shell and the pure-Python libraries it uses.

The shell in the guest is `bash_purepython` (see README, "The shell"), and the door protocol is
msgpack (its pure-Python fallback runs in the guest); the shell's `git` is written over dulwich
(pure Python; its optional Rust speed-ups stay out). All are dependencies of this package, so
pip has already fetched and hash-checked them; here their `.py` files are copied from the host's
installed distributions into `<cache>/runtime/guest-site-<key>/`, each checked against the
distribution's RECORD hashes, with our `guest/declaw_shell` beside them; then a guest
byte-compiles the folder (for the guest's CPython, which the host's may not be) and writes its
bin/ (a stub script per shell program: guest/declaw_shell/binstubs.py), and it is mounted
read-only at /usr/local/lib/declaw-site (bin/ also at /usr/bin and /bin; dev/, an empty file per
device the guest's open() answers, at /dev). Compiled parts
(msgpack's C extension, dulwich's Rust modules) are left out: they are host binaries.

Copying (rather than mounting the host's site-packages) keeps everything else installed on the
host out of the guest's sight; the key covers every file's hash, so an upgrade makes a new
folder and the warm image's key changes with it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from pathlib import Path
from typing import Optional

from .._assets import guest_code_dir
from .._cache import ensure_folder
from ..exceptions import SandboxException
from ..settings import cache_dir
from . import distinfo
from .boot import python_spec
from .engine import Interpreter
from .guest import Guest
from .layout import BIN_STUBS, DEVICES, GUEST_DECLAW, GUEST_LIB, GUEST_SITE, Mount

# distribution name -> top-level packages it puts in the guest
GUEST_DISTRIBUTIONS = {"bash_purepython": ("bash_purepython",), "msgpack": ("msgpack",), "dulwich": ("dulwich",)}
# parts of those distributions the guest's programs never import (dulwich's test suite, its cloud
# object stores, its servers): left out of the site
GUEST_LEFT_OUT = ("dulwich/tests/", "dulwich/contrib/", "dulwich/cloud/", "dulwich/aiohttp/", "dulwich/lfs_server.py",
                  "dulwich/web.py", "dulwich/server.py")
# from guest/
OUR_PACKAGES = ("declaw_shell", "declaw_kernel", "declaw_net", "declaw_posix", "declaw_tools", "pip", "venv")


def guest_site_distributions() -> dict[str, str]:
    """Name → version of the distributions copied into the guest site (they are importable in
    every guest, though the site keeps no metadata for them)."""
    return {name: distinfo.version(name, packages[0]) for name, packages in GUEST_DISTRIBUTIONS.items()}


def _guest_files(name: str, rows: list[tuple[str, Optional[str]]],
                 packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """(relative path, RECORD hash) of the distribution's pure-Python files for the guest."""
    files = []
    for rel, digest in rows:
        top = rel.split("/", 1)[0]
        if top in packages and (rel.endswith(".py") or rel.endswith("py.typed")) \
                and "__pycache__" not in rel and not rel.startswith(GUEST_LEFT_OUT):
            if digest is None or not digest.startswith("sha256="):
                raise SandboxException(f"{name}: no sha256 for {rel} in RECORD")
            files.append((rel, digest[len("sha256="):]))
    if not files:
        raise SandboxException(f"{name} has no files for the guest")
    return sorted(files)


@functools.lru_cache(maxsize=1)
def _plan() -> tuple[str, list[tuple[Path, str, str]]]:
    """The site's key and its files: (source, relative path, sha256 from RECORD or computed).
    Once per process: installed files do not change under a running program."""
    parts, plan = [], []
    for name, packages in GUEST_DISTRIBUTIONS.items():
        try:
            version, base, rows = distinfo.record(name, packages[0])
        except Exception:  # importlib.metadata's PackageNotFoundError, an unreadable RECORD
            raise SandboxException(f"{name} is not installed; reinstall declaw-wasm") from None
        for rel, digest in _guest_files(name, rows, packages):
            parts.append(f"{name}=={version}:{rel}:{digest}")
            plan.append((base / rel, rel, digest))
    interpreter = guest_code_dir()
    for package in OUR_PACKAGES:
        for source in sorted((interpreter / package).rglob("*.py")):
            rel = source.relative_to(interpreter).as_posix()
            digest = _digest(source.read_bytes())
            parts.append(f"ours:{rel}:{digest}")
            plan.append((source, rel, digest))
    parts.append("devices:" + ",".join(DEVICES))  # the folder mounted at /dev (build())
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]
    return key, plan


def _digest(data: bytes) -> str:
    """sha256 as RECORD files write it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


_made: dict[str, Path] = {}


def site_name() -> str:
    """The guest site's folder name (its key), built or not."""
    return f"guest-site-{_plan()[0]}"


def built_site() -> Optional[Path]:
    """The guest site's folder if it is built (None: `ensure_site` would build it)."""
    key, _ = _plan()
    target = cache_dir() / "runtime" / site_name()
    return target if key in _made or (target / "READY").exists() else None


def ensure_site(interpreter: Interpreter) -> Path:
    """The folder to mount at GUEST_SITE: made (and compiled by a guest of `runtime`) on first
    use, then reused."""
    key, plan = _plan()
    if key not in _made:
        def build(staging: Path) -> None:
            for source, rel, digest in plan:
                data = source.read_bytes()
                if _digest(data) != digest:
                    raise SandboxException(f"{source} does not match its RECORD hash: the "
                                           "installed package was modified")
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            devices = staging / "dev"  # what the guest sees at /dev: layout.GUEST_DEVICES
            devices.mkdir()
            for name in DEVICES:
                (devices / name).write_bytes(b"")
            compile_in_guest(interpreter, staging)
            _python_in_guest(interpreter, staging, GUEST_SITE, ["-m", "declaw_shell.binstubs", BIN_STUBS],
                             "writing the shell's /usr/bin")

        target = cache_dir() / "runtime" / f"guest-site-{key}"
        _made[key] = ensure_folder(target, build, "guest-site-*",
                                   "run `declaw-wasm warmup` where it is writable before shipping it")
    return _made[key]


def compile_in_guest(interpreter: Interpreter, folder: Path, guest_path: str = GUEST_SITE) -> None:
    """Byte-compile `folder` (seen at `guest_path`) inside a guest: the .pyc files must be the
    guest CPython's, which the host's may not be. Unchecked-hash pycs: the folder is read-only
    once made, so no stat per import."""
    args = ["-m", "compileall", "-q", "--invalidation-mode", "unchecked-hash", guest_path]
    _python_in_guest(interpreter, folder, guest_path, args, f"byte-compiling {guest_path}")


def _python_in_guest(interpreter: Interpreter, folder: Path, guest_path: str, args: list[str],
                     what: str) -> None:
    """`python3 ARGS` in a guest that sees `folder` (writable) at `guest_path`."""
    files = interpreter.files
    mounts = [Mount(GUEST_LIB, files.lib_dir, False),
              Mount(GUEST_DECLAW, guest_code_dir(), False),
              Mount(guest_path, folder, True)]
    guest = Guest(interpreter, python_spec(interpreter.warm, GUEST_LIB, args, {}, mounts=mounts,
                                           timeout=900))
    guest.start()
    outcome = guest.wait()
    if outcome is None or outcome.exit_code != 0:
        raise SandboxException(f"{what} in a guest failed: "
                               f"{outcome and (outcome.error or outcome.stderr[-1000:])}")
