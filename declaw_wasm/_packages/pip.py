"""Pure-Python packages for the guest: resolved and fetched on the host, checked, installed.

The guest has no network and can only load Python code (compiled extensions are host
binaries), so every package it gets is a pure-Python wheel chosen and downloaded here:

- **Resolution** is pip's own resolver (`pip install --dry-run --report`), told the guest's
  Python (3.15) and a platform that no compiled wheel carries (`any`), with
  `--only-binary :all:` so that no source distribution is ever built (building one would run
  the package's setup code on the host). What the guest already has (the runtime's compiled
  stack, the bundle, earlier installs) is handed to pip as tiny stub wheels pinned by
  constraints, so pip resolves around them instead of looking for numpy for WASI.
  pip follows the host's own configuration (index URL, proxies, pip.conf), plus
  `DECLAW_WASM_WHEELHOUSE` (folders of wheels, `os.pathsep`-separated) and
  `DECLAW_WASM_OFFLINE=1` (no index at all).
- **Wheels** are kept in `<cache>/wheels/`, checked against the hash pip reported or the lock
  gives on every use; the folder is also one of pip's `--find-links`, so a second sandbox
  installing the same wheel neither downloads it again nor needs the index.
- **Installation** is pypa's `installer` (the reference wheel installer, small and kept by the
  packaging authority) into a host folder; callers copy that into a sandbox through its
  confined files API.

Why pip rather than a resolver of our own: indexes, credentials, markers and version ranges
are exactly pip's job, and pip is on every host that has Python.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Protocol

from packaging.requirements import InvalidRequirement, Requirement

from .._wasm.artifacts import file_sha256
from .._wasm.layout import USER_BIN, USER_SITE
from .._wasm.site import guest_site_distributions
from ..exceptions import SandboxException
from ..models import EntryInfo, FileType
from ..settings import cache_dir, offline, wheelhouses


class GuestFiles(Protocol):
    """What `pip install` in a sandbox needs of its files: read the wheels the guest names,
    write the installed tree (the sandbox's confined files API)."""

    def list(self, path: str, depth: int = 1) -> list[EntryInfo]: ...
    def get_info(self, path: str) -> EntryInfo: ...
    def read_bytes(self, path: str) -> bytes: ...
    def write_tree(self, source: Path, dest: str) -> int: ...


class IndexGate(Protocol):
    """The sandbox's network policy, asked whether the host's pip may reach the package index
    for it (the egress session): why not, or None."""

    def index_refusal(self, urls: list[str], should_stop: Callable[[], bool]) -> Optional[str]: ...

GUEST_PYTHON_VERSION = "3.15"
GUEST_INTERPRETER = "/usr/local/bin/python3"
# Only wheels that fit any platform: pure Python. (A compiled wheel always names a platform.)
PIP_GUEST_TARGET = ["--only-binary", ":all:", "--platform", "any", "--python-version",
                    GUEST_PYTHON_VERSION, "--implementation", "cp"]
PIP_TIMEOUT_S = 600.0
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll", ".wasm")


class PackageError(SandboxException):
    """A package cannot go into the guest: not found, compiled, conflicting, or a bad request."""


@dataclass(frozen=True)
class Pin:
    """One exact wheel: name, version and the SHA-256 of the file."""

    name: str
    version: str
    sha256: str

    def line(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"

    @classmethod
    def parse(cls, line: str) -> "Pin":
        match = re.fullmatch(r"\s*([A-Za-z0-9._-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})\s*", line)
        if not match:
            raise PackageError(f"not a lock line (NAME==VERSION --hash=sha256:HEX): {line!r}")
        return cls(*match.groups())


def canonical(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(text: str) -> Requirement:
    """A requirement the guest may ask for: a name with optional extras, version range and
    markers. URLs and paths are refused: the host would fetch whatever the guest names."""
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        raise PackageError(f"invalid requirement {text!r}: {exc}") from None
    if req.url:
        raise PackageError(f"{text!r}: installing from a URL is not supported (give a name and "
                           "version; the host's index or wheelhouse provides the file)")
    return req


# -- the host's pip ------------------------------------------------------------------------------

StopCheck = Callable[[], bool]


def _pip(args: list[str], should_stop: Optional[StopCheck] = None,
         timeout: float = PIP_TIMEOUT_S) -> tuple[int, str]:
    """Run the host's pip; (exit status, stderr). Stops early when `should_stop()` says so."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        deadline = time.monotonic() + timeout
        while True:
            try:
                status = proc.wait(0.1)
                break
            except subprocess.TimeoutExpired:
                if (should_stop is not None and should_stop()) or time.monotonic() > deadline:
                    proc.kill()
                    proc.wait()
                    raise PackageError("pip was stopped before it finished") from None
        err.seek(0)
        return status, err.read().decode("utf-8", "replace")


def index_args(find_links: Iterable[Path] = (), no_index: bool = False) -> list[str]:
    """pip's source options: the host's configuration, DECLAW_WASM_WHEELHOUSE and
    DECLAW_WASM_OFFLINE, folders of wheels the caller adds, and the wheel cache."""
    args: list[str] = []
    cached = [wheel_cache()] if wheel_cache().is_dir() else []
    for folder in [*wheelhouses(), *find_links, *cached]:
        args += ["--find-links", str(folder)]
    if no_index or offline():
        args.append("--no-index")
    return args


@functools.lru_cache(maxsize=1)
def _pip_config() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(index-url, extra-index-url values) of the host's pip configuration (files and PIP_*)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.SubprocessError):
        return (), ()
    index: list[str] = []
    extra: list[str] = []
    for line in out.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]
        if name in ("index-url", "extra-index-url"):
            (index if name == "index-url" else extra).extend(value.strip().strip("'\"").split())
    return tuple(index), tuple(extra)


def index_urls() -> list[str]:
    """The package indexes the host's pip would use: its index-url (PyPI unless configured) and
    extra-index-urls."""
    index, extra = _pip_config()
    return [*(index[-1:] or ["https://pypi.org/simple"]), *extra]


def _write_stubs(folder: Path, present: dict[str, str]) -> Path:
    """Stub wheels (metadata only) for what the guest already has, and constraints pinning them:
    pip then resolves dependencies on them to the versions the guest holds."""
    folder.mkdir(parents=True, exist_ok=True)
    constraints = folder / "constraints.txt"
    lines = []
    for name, version in sorted(present.items()):
        stem = f"{re.sub(r'[-.]+', '_', name)}-{version}"
        with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as wheel:
            wheel.writestr(f"{stem}.dist-info/METADATA",
                           f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
            wheel.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: declaw-wasm\n"
                           "Root-Is-Purelib: true\nTag: py3-none-any\n")
            wheel.writestr(f"{stem}.dist-info/RECORD", "")
        lines.append(f"{name}=={version}")
    constraints.write_text("\n".join(lines) + "\n")
    return constraints


def resolve(requirements: list[str], present: dict[str, str], *, find_links: Iterable[Path] = (),
            no_index: bool = False, no_deps: bool = False,
            should_stop: Optional[StopCheck] = None) -> list[Pin]:
    """The wheels to add so that `requirements` import in a guest that already has `present`
    (name → version). Raises PackageError naming what cannot be had, and why."""
    present = {canonical(name): version for name, version in present.items()}
    for text in requirements:
        req = requirement(text)
        have = present.get(canonical(req.name))
        if have is not None and req.specifier and not req.specifier.contains(have, prereleases=True):
            raise PackageError(f"{req.name} is part of the sandbox at version {have} and cannot be "
                               f"replaced by {text!r} (it is compiled into the runtime or "
                               "preinstalled by the template)")
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        constraints = _write_stubs(Path(tmp) / "stubs", present)
        report = Path(tmp) / "report.json"
        status, err = _pip(["install", "--dry-run", "--ignore-installed", "--quiet", "--report",
                            str(report), *PIP_GUEST_TARGET, "--target", str(Path(tmp) / "target"),
                            "--find-links", str(constraints.parent), "-c", str(constraints),
                            *(["--no-deps"] if no_deps else []), *index_args(find_links, no_index),
                            *requirements], should_stop)
        if status != 0:
            raise PackageError(_explain(err, present, find_links, no_index, should_stop))
        items = json.loads(report.read_text())["install"]
    pins = []
    for item in items:
        meta, info = item["metadata"], item["download_info"]
        if canonical(meta["name"]) in present:
            continue
        digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not digest:
            raise PackageError(f"{meta['name']}: the index gave no SHA-256 for its wheel")
        pins.append(Pin(meta["name"], meta["version"], digest))
    return sorted(pins, key=lambda pin: canonical(pin.name))


def _explain(err: str, present: dict[str, str], find_links: Iterable[Path], no_index: bool,
             should_stop: Optional[StopCheck]) -> str:
    """pip's failure, said in the guest's terms: which package, and why it cannot be had."""
    missing = re.findall(r"No matching distribution found for (\S+)", err)
    if missing:
        name = requirement(missing[-1]).name
        if canonical(name) in present:
            return (f"{name} is part of the sandbox at version {present[canonical(name)]} and "
                    "cannot be replaced (it is compiled into the runtime or preinstalled)")
        compiled = _compiled_wheel(name, find_links, no_index, should_stop)
        if compiled:
            return (f"{name} has no pure-Python wheel: its wheels contain compiled code "
                    f"(e.g. {compiled}), which cannot run inside the WebAssembly sandbox")
        return (f"no pure-Python wheel of {name} was found (the package may not exist, may only "
                "ship source code, which is never built on the host, or may not be in the "
                "configured index or wheelhouse)")
    causes = [line.strip() for line in err.splitlines() if " depends on " in line
              or line.strip().startswith("The user requested")]
    if "ResolutionImpossible" in err or causes:
        return "the requirements conflict with each other or with the sandbox's packages:\n  " + \
            "\n  ".join(causes[:12] or [_last_error(err)])
    return _last_error(err)


def _last_error(err: str) -> str:
    lines = [line[len("ERROR: "):] for line in err.splitlines() if line.startswith("ERROR: ")]
    text = "; ".join(lines[-3:]) or err.strip()[-500:] or "pip failed"
    return re.sub(r"/(?:tmp|var)/\S*declaw-pip-\S*", "<tmp>", text)  # no host paths to the guest


def _compiled_wheel(name: str, find_links: Iterable[Path], no_index: bool,
                    should_stop: Optional[StopCheck]) -> Optional[str]:
    """The file name of a wheel of `name` for the host's own platform, if that one is compiled."""
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        report = Path(tmp) / "report.json"
        status, _ = _pip(["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                          "--only-binary", ":all:", "--report", str(report), "--target",
                          str(Path(tmp) / "target"), *index_args(find_links, no_index), name],
                         should_stop)
        if status != 0:
            return None
        for item in json.loads(report.read_text())["install"]:
            filename = item["download_info"]["url"].rsplit("/", 1)[-1]
            if not filename.endswith("-none-any.whl"):
                return filename
    return None


# -- wheels: fetched once, checked ---------------------------------------------------------------

def wheel_cache() -> Path:
    return cache_dir() / "wheels"


def _cached_wheel(pin: Pin) -> Optional[Path]:
    """The cached wheel of `pin` whose hash matches, if any."""
    folder = wheel_cache()
    for path in folder.glob("*.whl") if folder.is_dir() else ():
        name, version = path.name.split("-")[:2]
        if canonical(name) == canonical(pin.name) and version == pin.version \
                and file_sha256(path) == pin.sha256:
            return path
    return None


def fetch(pins: list[Pin], *, find_links: Iterable[Path] = (), no_index: bool = False,
          should_stop: Optional[StopCheck] = None) -> list[Path]:
    """The wheel file of every pin, from the cache or downloaded (by hash) into it."""
    missing = [pin for pin in pins if _cached_wheel(pin) is None]
    if missing:
        with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
            lock = Path(tmp) / "lock.txt"
            lock.write_text("".join(pin.line() + "\n" for pin in missing))
            status, err = _pip(["download", "--quiet", "--no-deps", "--require-hashes",
                                *PIP_GUEST_TARGET, "-d", str(Path(tmp) / "got"), "-r", str(lock),
                                *index_args(find_links, no_index)], should_stop)
            if status != 0:
                raise PackageError("downloading wheels failed: " + _last_error(err))
            by_hash = {file_sha256(path): path for path in (Path(tmp) / "got").glob("*.whl")}
            for pin in missing:
                got = by_hash.get(pin.sha256)
                if got is None:
                    raise PackageError(f"{pin.name} {pin.version}: no downloaded wheel has the "
                                       f"expected SHA-256 {pin.sha256}")
                _keep(got)
    paths = []
    for pin in pins:
        path = _cached_wheel(pin)
        if path is None or file_sha256(path) != pin.sha256:
            raise PackageError(f"{pin.name} {pin.version}: cached wheel missing or altered")
        paths.append(path)
    return paths


def _keep(path: Path) -> None:
    """Move a verified wheel into the cache (atomically: readers see it whole or not at all)."""
    folder = wheel_cache()
    folder.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".wheel-", dir=folder)
    os.close(fd)
    shutil.copyfile(path, staging)
    os.replace(staging, folder / path.name)


def check_pure(path: Path) -> None:
    """Refuse a wheel that holds compiled code: the guest could not load it."""
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        info = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/WHEEL")), None)
        meta = wheel.read(info).decode("utf-8", "replace") if info else ""
    tags = re.findall(r"^Tag:\s*(\S+)", meta, re.M)
    compiled = [n for n in names if n.lower().endswith(COMPILED_SUFFIXES)]
    if "Root-Is-Purelib: true" not in meta or not tags or \
            not all(tag.endswith("-none-any") for tag in tags) or compiled:
        what = compiled[0] if compiled else f"tags {', '.join(tags) or 'none'}"
        raise PackageError(f"{path.name} contains compiled code ({what}), which cannot run "
                           "inside the WebAssembly sandbox")


def install(wheels: list[Path], site: Path, scripts: Path) -> list[tuple[str, str]]:
    """Unpack the wheels into `site` (scripts into `scripts`); (name, version) of each."""
    from installer import install as install_wheel
    from installer.destinations import SchemeDictionaryDestination
    from installer.sources import WheelFile

    done = []
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        scheme = {"purelib": str(site), "platlib": str(site), "scripts": str(scripts),
                  "headers": str(Path(tmp) / "headers"), "data": str(Path(tmp) / "data")}
        destination = SchemeDictionaryDestination(scheme, GUEST_INTERPRETER, "posix")
        for path in wheels:
            check_pure(path)
            with WheelFile.open(path) as source:
                install_wheel(source, destination, {"INSTALLER": b"declaw-wasm\n"})
            name, version = path.name.split("-")[:2]
            done.append((name, version))
    return done


# -- what the runtime already has ----------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def runtime_distributions(stdlib_zip: Path) -> dict[str, str]:
    """Name → version of every distribution inside the runtime's library zip."""
    found = {}
    with zipfile.ZipFile(stdlib_zip) as archive:
        for entry in archive.namelist():
            if entry.count("/") == 1 and entry.endswith(".dist-info/METADATA"):
                meta = archive.read(entry).decode("utf-8", "replace")
                name = re.search(r"^Name:\s*(.+)$", meta, re.M)
                version = re.search(r"^Version:\s*(.+)$", meta, re.M)
                if name and version:
                    found[name.group(1).strip()] = version.group(1).strip()
    return found


@functools.lru_cache(maxsize=4)
def runtime_top_levels(stdlib_zip: Path) -> tuple[str, ...]:
    """Top-level import names in the runtime's zip that may be third-party (what `base` hides).
    The zip keeps no RECORDs, so this is every top-level name but private ones; the guest takes
    out its own `sys.stdlib_module_names` (the host's Python may know a different list)."""
    names: set[str] = set()
    with zipfile.ZipFile(stdlib_zip) as archive:
        for entry in archive.namelist():
            top = re.sub(r"\.pyc?$", "", entry.split("/", 1)[0])
            if top.isidentifier() and not top.startswith("_") and top not in sys.stdlib_module_names:
                names.add(top)
    return tuple(sorted(names))


# -- `pip install` from inside a sandbox -----------------------------------------------------------

WHEEL_FILE_RE = re.compile(r"[A-Za-z0-9_.]+-[A-Za-z0-9_.!+]+(-[0-9][^-]*)?-[^-]+-[^-]+-[^-]+\.whl")
MAX_REQUIREMENTS = 200
MAX_GUEST_WHEEL_BYTES = 256 << 20


def _strings(value: object, limit: int, what: str) -> list[str]:
    if not isinstance(value, list) or len(value) > limit or \
            not all(isinstance(v, str) and 0 < len(v) <= 4096 for v in value):
        raise PackageError(f"bad {what} in the install request")
    return value


def install_for_guest(fs: GuestFiles, request: dict, should_stop: StopCheck,
                      egress: Optional[IndexGate] = None) -> dict:
    """The door's `pip_install` (from declaw_shell/pip.py in the guest): resolve, fetch and
    check on the host, then write into the sandbox's user site-packages through the confined
    files API. Answers {"status", "stdout", "stderr"} as pip would print them.

    No second path out: the host's pip goes to the package index only if the sandbox's network
    policy (`egress`) allows the index's hosts; otherwise it runs with `--no-index`, and the
    wheel cache and wheelhouse (local files) are all it has."""
    try:
        return {"status": 0, "stderr": "", "stdout": _install_for_guest(fs, request, should_stop, egress)}
    except SandboxException as exc:  # PackageError, quota, missing guest files...
        return {"status": 1, "stdout": "", "stderr": f"ERROR: {exc}\n"}


def _install_for_guest(fs: GuestFiles, request: dict, should_stop: StopCheck,
                       egress: Optional[IndexGate] = None) -> str:
    requirements = list(_strings(request.get("requirements", []), MAX_REQUIREMENTS, "requirements"))
    wheels = _strings(request.get("wheels", []), MAX_REQUIREMENTS, "wheel paths")
    folders = _strings(request.get("find_links", []), 16, "find-links folders")
    present = request.get("present", {})
    if not isinstance(present, dict) or len(present) > 20000 or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in present.items()):
        raise PackageError("bad list of installed packages in the install request")
    present = {**present, **guest_site_distributions()}
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        links = Path(tmp) / "links"
        links.mkdir()
        # wheels the guest supplies are copied out through the files API (never opened in place)
        for path in wheels:
            requirements.append(_copy_guest_wheel(fs, path, links))
        for folder in folders:
            for entry in fs.list(folder):
                if entry.name.endswith(".whl") and entry.type == FileType.FILE:
                    _copy_guest_wheel(fs, entry.path, links)
        no_index = bool(request.get("no_index"))
        refusal = None if no_index or egress is None else egress.index_refusal(index_urls(), should_stop)
        if refusal:
            no_index = True
        try:
            pins = resolve(requirements, present, find_links=[links], no_index=no_index,
                           no_deps=bool(request.get("no_deps")), should_stop=should_stop)
        except PackageError as exc:
            if refusal:
                raise PackageError(f"{exc}\n(the package index was not used: {refusal}; only wheels "
                                   "in the local wheel cache or wheelhouse were available)") from None
            raise
        if not pins:
            return "".join(f"Requirement already satisfied: {r}\n" for r in requirements)
        paths = fetch(pins, find_links=[links], no_index=no_index, should_stop=should_stop)
        site, scripts = Path(tmp) / "site", Path(tmp) / "bin"
        install(paths, site, scripts)
        fs.write_tree(site, USER_SITE)
        if scripts.is_dir():
            fs.write_tree(scripts, USER_BIN)
    return ("".join(f"Collecting {pin.name}=={pin.version}\n" for pin in pins) +
            "Successfully installed " + " ".join(f"{pin.name}-{pin.version}" for pin in pins) + "\n")


def _copy_guest_wheel(fs: GuestFiles, path: str, links: Path) -> str:
    """Copy a wheel out of the sandbox for pip's `--find-links`; its exact requirement."""
    name = path.rsplit("/", 1)[-1]
    if not WHEEL_FILE_RE.fullmatch(name):
        raise PackageError(f"{path}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    info = fs.get_info(path)
    if info.size > MAX_GUEST_WHEEL_BYTES:
        raise PackageError(f"{path}: larger than {MAX_GUEST_WHEEL_BYTES >> 20} MiB")
    (links / name).write_bytes(fs.read_bytes(path))
    check_pure(links / name)
    project, version = name.split("-")[:2]
    return f"{project}=={version}"
