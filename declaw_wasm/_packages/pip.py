"""Pure-Python packages for the guest: resolved and fetched on the host, checked, installed.

The guest has no network and can only load Python code (compiled extensions are host
binaries), so every package it gets is a pure-Python wheel chosen and downloaded here:

- **Resolution** is pip's own resolver (`pip install --dry-run --report`), told the guest's
  Python (3.15) and a platform that no compiled wheel carries (`any`), with
  `--only-binary :all:` so that no source distribution is ever built (building one would run
  the package's setup code on the host). Environment markers (a requirement's, a dependency's)
  are judged for the guest too (`sys_platform == "wasi"`...), never for the host (pip_guard.py
  hands pip the guest's marker environment). What the guest already has (the runtime's compiled
  stack, the bundle, earlier installs) is handed to pip as tiny stub wheels pinned by
  constraints, so pip resolves around them instead of looking for numpy for WASI.
  pip follows the host's own configuration (index URL, proxies, pip.conf), plus
  `DECLAW_WASM_WHEELHOUSE` (folders of wheels, `os.pathsep`-separated) and
  `DECLAW_WASM_OFFLINE=1` (no index at all).
- **pip never starts a process, reaches no host but its indexes, reads no file but its own**:
  it runs under pip_guard.py, an audit hook that refuses every process start, every connection
  but to the configured indexes, every file outside the folders pip was given, with its memory
  and file sizes bounded: even if pip's inputs asked for a source build or named a URL, nothing
  would run, be fetched or be read.
- **A wheel a guest supplies is checked before pip sees it** (wheel_check.py), with bounded
  cost: its member count (before zipfile builds a list), sizes, `.dist-info` files, and the
  metadata pip acts on (`Requires-Dist` with a URL or a path is refused: pip would fetch it).
- **What the guest sends is parsed, and only re-serialised values go on**: names, versions and
  requirements through `packaging` (`project_name`, `version_text`, `guest_requirement`), paths
  checked before the confined files API sees them, and a name becomes a file name only through
  `wheel_file` (a fixed alphabet, in a folder the host made).
- **Wheels** the host downloaded (from the index or the wheelhouse) are kept in the wheel cache
  (`<cache>/wheel-cache/`): each with a record of its SHA-256 written before the wheel is
  published (hard-linked, never replacing a file), checked on every use, and evicted least
  recently used past `DECLAW_WASM_WHEEL_CACHE_BYTES`. The cache is also one of pip's
  `--find-links`, so a second sandbox installing the same wheel neither downloads it again nor
  needs the index. A wheel a guest supplies is used for that one request, from the request's
  temporary folder, and never cached: content from one sandbox never reaches another.
- **Installation** is pypa's `installer` (the reference wheel installer, small and kept by the
  packaging authority) into a host folder; callers copy that into a sandbox through its
  confined files API.

Why pip rather than a resolver of our own: indexes, credentials, markers and version ranges
are exactly pip's job, and pip is on every host that has Python.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Mapping, Optional, Protocol
from urllib.parse import urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .._cache import publish_new, writable
from .._hostfs.walk import counted_bytes
from .._wasm.artifacts import file_sha256
from .._wasm.layout import USER_BIN, USER_SITE
from .._wasm.site import guest_site_distributions
from ..exceptions import InvalidArgumentException, SandboxException
from ..limits import Limits
from ..models import FileType
from ..settings import cache_dir, offline, pip_hosts, wheel_cache_max_bytes, wheelhouses
from .install_op import MAX_FIND_LINKS, MAX_GUEST_WHEELS, MAX_PRESENT, MAX_REQUIREMENTS, PIP_INSTALL
from .pip_guard import FILE_BYTES as PIP_FILE_BYTES
from .pip_guard import GUEST_MARKERS
from .pip_guard import MARK as GUARD_MARK
from .pip_guard import MEMORY_BYTES as PIP_MEMORY_BYTES
from .standins import HELD, STAND_INS, constraint_lines
from .wheel_check import WheelError, check_wheel


class Writer(Protocol):
    def write(self, data: bytes, /) -> int: ...


class GuestFiles(Protocol):
    """What `pip install` in a sandbox needs of its files: list a find-links folder (at most
    `limit` entries), copy out the wheels the guest names (at most `limit` bytes each), the room
    its disk quota has left, write the installed trees (the sandbox's confined files API), and
    the quota itself (`limits`), which bounds what one request copies out."""

    limits: Optional[Limits]

    def entries(self, path: str, limit: int) -> list[tuple[str, FileType]]: ...
    def read_into(self, path: str, out: Writer, limit: int) -> int: ...
    def room(self) -> Optional[tuple[int, int]]: ...
    def write_trees(self, trees: list[tuple[Path, str]]) -> int: ...


class IndexGate(Protocol):
    """The sandbox's network policy, asked whether the host's pip may reach the package index
    for it (the egress session): why not, or None."""

    def index_refusal(self, urls: list[str], should_stop: Callable[[], bool]) -> Optional[str]: ...

GUEST_PYTHON_VERSION = GUEST_MARKERS["python_version"]
GUEST_INTERPRETER = "/usr/local/bin/python3"
# Only wheels that fit any platform and no ABI: pure Python. (A compiled wheel always names a
# platform.) These set the tags pip accepts; the markers it judges are the guest's too
# (pip_guard.GUEST_MARKERS).
PIP_GUEST_TARGET = ["--only-binary", ":all:", "--platform", "any", "--python-version",
                    GUEST_PYTHON_VERSION, "--implementation", "cp", "--abi", "none"]
PIP_TIMEOUT_S = 600.0


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
    return canonicalize_name(name)


# -- what crosses from the guest (or an index): parsed, and re-serialised by us ---------------------

NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")  # PEP 508's name
VERSION_RE = re.compile(r"[A-Za-z0-9.+!_-]{1,64}")  # what PEP 440 versions are written with
# a requirement as we write it: name, [extras], specifiers, "; " markers (quoted values)
# what a requirement is written back as: its name canonical (lower case), a marker's quoted values
# as the guest wrote them (`platform_system == "Linux"`)
REQUIREMENT_RE = re.compile(r"[a-z0-9][a-zA-Z0-9 ._\-\[\],<>=!~*+;()'\"]{0,999}")
TAG_RE = re.compile(r"[a-z0-9_]{1,32}")
SHA256_RE = re.compile(r"[0-9a-f]{64}")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and n % (1 << 20) == 0 else f"{n} bytes"


def _bad(field: str, value: object, why: str) -> PackageError:
    return PackageError(f"bad install request: {field} {_shown(value)}: {why}")


def project_name(text: object, field: str = "name") -> str:
    """A project name (PEP 508's alphabet), canonical (PEP 503): lower case, runs of `-_.` as
    one `-`. Anything else is refused."""
    if not isinstance(text, str) or not NAME_RE.fullmatch(text):
        raise _bad(field, text, "not a package name (letters, digits, '.', '_', '-')")
    return canonicalize_name(text)


def version_text(text: object, field: str = "version") -> str:
    """A PEP 440 version, as `packaging` writes it back."""
    if not isinstance(text, str) or not VERSION_RE.fullmatch(text):
        raise _bad(field, text, "not a version (PEP 440)")
    try:
        return str(Version(text))
    except InvalidVersion:
        raise _bad(field, text, "not a version (PEP 440)") from None


def guest_requirement(text: object, field: str = "requirement") -> str:
    """A requirement the guest may ask for, as we write it back: a name with optional extras,
    version specifiers and markers. URLs and paths are refused (the host would fetch whatever
    the guest names), and so is `===` (arbitrary strings)."""
    if not isinstance(text, str) or not 0 < len(text) <= 1000:
        raise _bad(field, text, "not a requirement")
    if not all(" " <= char <= "~" for char in text):
        raise _bad(field, text, "not a requirement (control characters or non-ASCII)")
    try:
        req = Requirement(text)
    except (InvalidRequirement, SyntaxError, ValueError) as exc:  # markers go through literal_eval
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise _bad(field, text, f"not a valid requirement ({why})") from None
    if req.url:
        raise _bad(field, text, "installing from a URL is not supported (give a name and version; "
                   "the host's index or wheelhouse provides the file)")
    if any(spec.operator == "===" for spec in req.specifier):
        raise _bad(field, text, "arbitrary equality (===) is not supported")
    name = project_name(req.name, field)
    extras = sorted(project_name(extra, field) for extra in req.extras)
    out = name + (f"[{','.join(extras)}]" if extras else "") + \
        ",".join(sorted(str(spec) for spec in req.specifier)) + (f"; {req.marker}" if req.marker else "")
    if not REQUIREMENT_RE.fullmatch(out):
        raise _bad(field, text, "only names, extras, version specifiers and markers are accepted")
    return out


def guest_path(text: object, field: str) -> str:
    """A guest path for the sandbox's files API: absolute, normalised, printable."""
    if not isinstance(text, str) or not 0 < len(text) <= 4096 or not text.isprintable() \
            or not text.startswith("/") or posixpath.normpath(text) != text:
        raise _bad(field, text, "not an absolute, normalised path (no '..', no control characters)")
    return text


def _pure_interpreters(tags: Iterable[Tag]) -> Optional[list[str]]:
    """The Python tags of a pure-Python wheel's tag set (`py3`, `py2.py3`...), or None if it
    names an ABI or a platform (compiled code) or is not a product of them."""
    found = sorted({tag.interpreter for tag in tags})
    if not found or any(tag.abi != "none" or tag.platform != "any" for tag in tags) \
            or not all(TAG_RE.fullmatch(t) for t in found):
        return None
    return found


def wheel_file(folder: Path, name: str, version: str, interpreters: Iterable[str] = ("py3",)) -> Path:
    """The one place a package name becomes a path: `folder` (one the host made) / the wheel's
    file name, written by us from the canonical name and the parsed version in a fixed alphabet
    (`[a-z0-9_]-[a-z0-9.+!]-TAGS-none-any.whl`)."""
    stem = canonicalize_name(name).replace("-", "_")
    try:
        ver = str(Version(version))
    except InvalidVersion:
        raise PackageError(f"{name}: not a version: {_shown(version)}") from None
    tags = sorted(set(interpreters))
    if not re.fullmatch(r"[a-z0-9_]{1,128}", stem) or not re.fullmatch(r"[a-z0-9.+!]{1,64}", ver) \
            or not tags or not all(TAG_RE.fullmatch(t) for t in tags):
        raise PackageError(f"not a wheel file name: {_shown((name, version, tags))}")
    return folder / f"{stem}-{ver}-{'.'.join(tags)}-none-any.whl"


# -- the host's pip ------------------------------------------------------------------------------

StopCheck = Callable[[], bool]
# `python -c BOOT pip_guard.py POLICY ARGS`: run the guard as a file (not `-m`, which would import
# declaw_wasm, and not as a script, which would put this folder, with its pip.py, on sys.path)
BOOT = "import runpy, sys; runpy.run_path(sys.argv.pop(1), run_name='__main__')"
GUARD_REFUSAL = ("pip tried to start a program on the host (to build a package from source or run "
                 "its setup code), which is never allowed: only pure-Python wheels are installed, "
                 "and nothing is built or run on the host")
GUARD_NETWORK = ("pip tried to reach a host that is not one of the host's configured package "
                 "indexes, which is never allowed (hosts an index serves its files from can be "
                 "added with DECLAW_WASM_PIP_HOSTS)")
GUARD_FILE = ("pip tried to use a file on the host outside the folders it was given, which is never "
              "allowed")
REPORT_BYTES = 64 << 20  # pip's --report (every resolved package's metadata)


def pip_command(args: list[str], tmp: Optional[Path] = None, memory: int = PIP_MEMORY_BYTES,
                file_size: int = PIP_FILE_BYTES) -> list[str]:
    """The command line that runs the host's pip under the guard (pip_guard.py): `tmp`, the
    run's own temporary folder (the caller makes it and passes it as TMPDIR), hosts the
    operator added, pip's memory and file-size bounds."""
    policy = json.dumps({"tmp": str(tmp) if tmp is not None else None, "hosts": pip_hosts(),
                         "memory": memory, "file_size": file_size})
    return [sys.executable, "-c", BOOT, str(Path(__file__).with_name("pip_guard.py")), policy,
            "--disable-pip-version-check", "--no-input", *args]


def run_pip(args: list[str], should_stop: Optional[StopCheck] = None,
            timeout: float = PIP_TIMEOUT_S, memory: int = PIP_MEMORY_BYTES,
            stdout: bool = False) -> tuple[int, str]:
    """Run the host's pip (under the guard, with a temporary folder of its own); (exit status,
    stderr, and stdout too if `stdout`: the last MiB of it). Stops early when `should_stop()`
    says so. A failure the guard caused, or pip's memory bound, raises PackageError saying so."""
    with tempfile.TemporaryDirectory(prefix="declaw-pip-run-") as tmp, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(pip_command(args, Path(tmp), memory), stdin=subprocess.DEVNULL,
                                stdout=err if stdout else subprocess.DEVNULL, stderr=err,
                                env={**os.environ, "TMPDIR": tmp})
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
        err.seek(max(0, err.seek(0, os.SEEK_END) - (1 << 20)))
        text = err.read(1 << 20).decode("utf-8", "replace")  # what pip says last, bounded
    if status != 0:
        for kind, message in (("process", GUARD_REFUSAL), ("network", GUARD_NETWORK),
                              ("file", GUARD_FILE)):
            if f"{GUARD_MARK}{kind} " in text:
                raise PackageError(message)
        if "MemoryError" in text:
            raise PackageError(f"pip ran out of the memory it may use on the host ({_size(memory)})")
        if "[Errno 27]" in text:  # EFBIG: RLIMIT_FSIZE
            raise PackageError(f"pip tried to write a file larger than {_size(PIP_FILE_BYTES)} on the host")
    return status, text


def index_args(find_links: Iterable[Path] = (), no_index: bool = False, cache: bool = True) -> list[str]:
    """pip's source options: the host's configuration, DECLAW_WASM_WHEELHOUSE and
    DECLAW_WASM_OFFLINE, folders of wheels the caller adds, and the wheel cache (`cache`)."""
    args: list[str] = []
    cached = [wheel_cache()] if cache and wheel_cache().is_dir() else []
    for folder in [*wheelhouses(), *find_links, *cached]:
        args += ["--find-links", str(folder)]
    if no_index or offline():
        args.append("--no-index")
    return args


@functools.lru_cache(maxsize=1)
def _pip_config() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(index-url, extra-index-url values) of the host's pip configuration (files and PIP_*)."""
    try:
        with tempfile.TemporaryDirectory(prefix="declaw-pip-run-") as tmp:
            out = subprocess.run(pip_command(["config", "list"], Path(tmp)), capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL,
                                 env={**os.environ, "TMPDIR": tmp}).stdout
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
    extra-index-urls, and the hosts DECLAW_WASM_PIP_HOSTS adds (where they serve files from)."""
    index, extra = _pip_config()
    return [*(index[-1:] or ["https://pypi.org/simple"]), *extra, *(f"https://{h}/" for h in pip_hosts())]


def _write_stubs(folder: Path, present: Mapping[str, str]) -> Path:
    """Stub wheels (metadata only) for what the guest already has (and the compiled projects
    that have stand-ins, standins.py), and constraints pinning them: pip then resolves
    dependencies on them to the versions the guest holds. `present` holds canonical names and
    versions as `packaging` wrote them (parse_request), so each constraint line is
    `name==version` and nothing else; the held-back lines (`pydantic<2`...) are the host's own."""
    folder.mkdir(parents=True, exist_ok=True)
    constraints = folder / "constraints.txt"
    lines = []
    for name, version in sorted(present.items()):
        path = wheel_file(folder, name, version)
        stem = path.name.split("-py3-", 1)[0]
        with zipfile.ZipFile(path, "w") as wheel:
            wheel.writestr(f"{stem}.dist-info/METADATA",
                           f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
            wheel.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: declaw-wasm\n"
                           "Root-Is-Purelib: true\nTag: py3-none-any\n")
            wheel.writestr(f"{stem}.dist-info/RECORD", "")
        lines.append(f"{name}=={version}")
    lines += [line for line in constraint_lines() if line.split("<", 1)[0] not in present]
    constraints.write_text("\n".join(lines) + "\n")
    return constraints


def resolve(requirements: list[str], present: Mapping[str, str], *, find_links: Iterable[Path] = (),
            no_index: bool = False, no_deps: bool = False,
            should_stop: Optional[StopCheck] = None) -> list[Pin]:
    """The wheels to add so that `requirements` import in a guest that already has `present`
    (name → version). Raises PackageError naming what cannot be had, and why. Requirements,
    names and versions are parsed and written back by us before pip sees them."""
    present = {project_name(name): version_text(version, f"the version of {name}")
               for name, version in present.items()}
    requirements = [guest_requirement(text) for text in requirements]
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(dict(GUEST_MARKERS)):
            continue  # not for the guest's environment: pip skips it too
        have = present.get(canonical(req.name))
        standin = STAND_INS.get(canonical(req.name))
        if have is None and standin is not None and req.specifier and \
                not req.specifier.contains(standin.provides, prereleases=True):
            raise PackageError(f"{req.name} is compiled code; the sandbox installs its pure-Python "
                               f"stand-in {standin.project} {standin.version} instead, presented as "
                               f"{standin.name} {standin.provides}, which does not satisfy {text!r}")
        if have is not None and req.specifier and not req.specifier.contains(have, prereleases=True):
            raise PackageError(f"{req.name} is part of the sandbox at version {have} and cannot be "
                               f"replaced by {text!r} (it is compiled into the runtime or "
                               "preinstalled by the template)")
    stand_ins = {name: s.provides for name, s in STAND_INS.items() if name not in present}
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        constraints = _write_stubs(Path(tmp) / "stubs", {**stand_ins, **present})
        report = Path(tmp) / "report.json"
        args = ["install", "--dry-run", "--ignore-installed", "--report", str(report),
                *PIP_GUEST_TARGET, "--target", str(Path(tmp) / "target"),
                "--find-links", str(constraints.parent), "-c", str(constraints),
                *(["--no-deps"] if no_deps else []), *index_args(find_links, no_index), *requirements]
        status, err = run_pip([*args, "--quiet"], should_stop)
        if status != 0 and "ResolutionImpossible" in err:  # again, for pip's account of the conflict
            status, err = run_pip(args, should_stop, stdout=True)
        if status != 0:
            raise PackageError(_explain(err, present, find_links, no_index, should_stop))
        items = _report_items(report)
    pins: list[Pin] = []
    for item in items:
        meta, info = item.get("metadata"), item.get("download_info")
        if not isinstance(meta, dict) or not isinstance(info, dict):
            raise PackageError("pip's report is not what pip writes")
        shown = meta.get("name")
        name = project_name(shown, "a resolved package's name")  # shown is checked as well
        if name in present:
            continue
        if name in stand_ins:  # the compiled project's stub: its stand-in is what gets installed
            standin = STAND_INS[name]
            if canonical(standin.project) not in present and \
                    all(canonical(pin.name) != canonical(standin.project) for pin in pins):
                pins.append(Pin(standin.project, standin.version, standin.sha256))
            continue
        url = info.get("url")
        if item.get("is_direct") or not isinstance(url, str) or \
                urlsplit(url).scheme not in ("file", "http", "https"):
            raise PackageError(f"{name}: pip chose it from a direct link, not from an index or a "
                               "wheelhouse, which is never used")
        digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not isinstance(digest, str) or not SHA256_RE.fullmatch(digest):
            raise PackageError(f"{name}: the index gave no SHA-256 for its wheel")
        pins.append(Pin(str(shown), version_text(meta.get("version"), f"the version of {name}"), digest))
    return sorted(pins, key=lambda pin: canonical(pin.name))


def _report_items(report: Path) -> list[dict]:
    """The `install` items of pip's --report, read with a bound."""
    with open(report, "rb") as f:
        data = f.read(REPORT_BYTES + 1)
    if len(data) > REPORT_BYTES:
        raise PackageError(f"pip's report of the resolution is more than {_size(REPORT_BYTES)}")
    try:
        items = json.loads(data)["install"]
    except (ValueError, KeyError, TypeError):
        raise PackageError("pip's report is not what pip writes") from None
    if not isinstance(items, list):
        raise PackageError("pip's report is not what pip writes")
    return items


def _explain(err: str, present: Mapping[str, str], find_links: Iterable[Path], no_index: bool,
             should_stop: Optional[StopCheck]) -> str:
    """pip's failure, said in the guest's terms: which package, and why it cannot be had."""
    missing = re.findall(r"No matching distribution found for (\S+)", err)
    name = None
    if missing:
        try:
            name = canonical(Requirement(missing[-1]).name)
        except InvalidRequirement:
            pass
    if name is not None:
        if name in present:
            return (f"{name} is part of the sandbox at version {present[name]} and "
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
    held = _held_back(causes)
    if held:
        return held
    if "ResolutionImpossible" in err or causes:
        return "the requirements conflict with each other or with the sandbox's packages:\n  " + \
            "\n  ".join(no_host_paths(cause) for cause in causes[:12] or [_last_error(err)])
    return _last_error(err)


def _held_back(causes: list[str]) -> Optional[str]:
    """The reason, if pip's conflict is a package needing a line the guest is held below
    (standins.HELD: pydantic 2...)."""
    for cause in causes:
        match = re.fullmatch(r"(?:(\S+ \S+) depends on|The user requested) ([A-Za-z0-9._-]+)(\S*)", cause)
        if not match or canonical(match.group(2)) not in HELD:
            continue
        held = HELD[canonical(match.group(2))]
        try:
            req = Requirement(match.group(2) + match.group(3))
        except InvalidRequirement:
            continue
        floors = [spec.version.removesuffix(".*") for spec in req.specifier
                  if spec.operator in (">=", ">", "==", "~=")]
        try:
            newer = any(Version(floor) >= Version(held.below) for floor in floors)
        except InvalidVersion:
            continue
        if newer:
            who = no_host_paths(match.group(1)) if match.group(1) else "the request"
            return (f"{who} needs {held.name}{no_host_paths(match.group(3))}, which cannot go into "
                    f"the sandbox: {held.why}")
    return None


# a host path or file URL in pip's words: `/` starting a word (not inside a URL's `//host/path`)
HOST_PATH_RE = re.compile(r"\bfile:[^\s'\"`,;()<>\[\]{}]*|(?<![\w.:/~-])/[^\s'\"`,;()<>\[\]{}]*")


def no_host_paths(text: str) -> str:
    """`text` with every host path and `file:` URL replaced by `<path>`: what pip says reaches the
    guest, and neither the host's folders nor what is in them (an oracle) may."""
    return HOST_PATH_RE.sub("<path>", text)


def _last_error(err: str) -> str:
    lines = [line[len("ERROR: "):] for line in err.splitlines() if line.startswith("ERROR: ")]
    text = "; ".join(lines[-3:]) or err.strip()[-500:] or "pip failed"
    return no_host_paths(text)


def _compiled_wheel(name: str, find_links: Iterable[Path], no_index: bool,
                    should_stop: Optional[StopCheck]) -> Optional[str]:
    """The file name of a wheel of `name` (canonical) for the host's own platform, if that one
    is compiled."""
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        report = Path(tmp) / "report.json"
        status, _ = run_pip(["install", "--dry-run", "--ignore-installed", "--no-deps", "--quiet",
                             "--only-binary", ":all:", "--report", str(report), "--target",
                             str(Path(tmp) / "target"), *index_args(find_links, no_index),
                             project_name(name)], should_stop)
        if status != 0:
            return None
        for item in _report_items(report):
            filename = str(item.get("download_info", {}).get("url", "")).rsplit("/", 1)[-1]
            if not filename.endswith("-none-any.whl"):
                return re.sub(r"[^A-Za-z0-9._+!-]", "?", filename)[:200]
    return None


# -- wheels: fetched once, recorded, checked on every use -------------------------------------------
# <cache>/wheel-cache/wheels/NAME-VERSION-TAGS-none-any.whl   pip's --find-links (only published wheels)
# <cache>/wheel-cache/records/SHA256                            the wheel's file name, written first
# A record's mtime is the wheel's last use (least recently used wheels are evicted first).

RECORD_BYTES = 512  # a record holds one wheel file name


def _wheel_cache_root() -> Path:
    return cache_dir() / "wheel-cache"


def wheel_cache() -> Path:
    """The wheel cache's folder of wheels (what pip gets as `--find-links`)."""
    return _wheel_cache_root() / "wheels"


def _record(sha256: str) -> Path:
    return _wheel_cache_root() / "records" / sha256


def _read_record(path: Path) -> Optional[str]:
    try:
        with open(path, "rb") as f:
            return f.read(RECORD_BYTES).decode("ascii", "replace").strip()
    except OSError:
        return None


def _pin_file(folder: Path, pin: Pin, filename: str) -> Optional[Path]:
    """Where a wheel of `pin` named `filename` (by an index, a record...) goes in `folder`, if
    that name is a pure-Python wheel of `pin`."""
    try:
        name, version, _, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    interpreters = _pure_interpreters(tags)
    if interpreters is None or canonical(name) != canonical(pin.name) or version != Version(pin.version):
        return None
    return wheel_file(folder, pin.name, pin.version, interpreters)


def _copy_hashed(source: Path, out: BinaryIO, limit: int) -> str:
    """Copy at most `limit` bytes of `source` to `out`; their SHA-256 (one pass, one open)."""
    digest = hashlib.sha256()
    with open(source, "rb") as f:
        left = limit
        while left > 0:
            block = f.read(min(1 << 20, left))
            if not block:
                break
            digest.update(block)
            out.write(block)
            left -= len(block)
    return digest.hexdigest()


def _from_cache(pin: Pin, into: Path) -> Optional[Path]:
    """A copy in `into` of the cached wheel of `pin`, if the cache has one whose bytes match the
    hash: the copy is what gets installed, so the check holds for what is used."""
    record = _record(pin.sha256)
    filename = _read_record(record)
    if filename is None:
        return None
    cached = _pin_file(wheel_cache(), pin, filename)
    if cached is None or cached.name != filename:
        return None
    dest = _pin_file(into, pin, filename)
    assert dest is not None
    try:
        with open(dest, "xb") as out:
            digest = _copy_hashed(cached, out, wheel_cache_max_bytes())
    except FileNotFoundError:
        dest.unlink(missing_ok=True)
        return None
    if digest != pin.sha256:  # altered since it was recorded: out of the cache with it
        dest.unlink()
        _drop(pin, filename)
        return None
    try:
        os.utime(record)  # used now (least recently used wheels are evicted first)
    except OSError:
        pass
    return dest


def _drop(pin: Pin, filename: str) -> None:
    """Delete a cached wheel that does not match its record, and the record (under the cache's
    lock, checking again: a publish in progress holds it)."""
    from filelock import FileLock, Timeout

    try:
        with FileLock(str(_wheel_cache_root() / ".lock"), timeout=60):
            cached = wheel_cache() / filename
            if _read_record(_record(pin.sha256)) == filename and file_sha256(cached) != pin.sha256:
                cached.unlink()
                _record(pin.sha256).unlink()
    except (OSError, Timeout):
        pass


def fetch(pins: list[Pin], into: Path, *, local: Mapping[str, Path] = {}, no_index: bool = False,
          should_stop: Optional[StopCheck] = None) -> list[Path]:
    """The wheel file of every pin, checked against its hash, in `into` (a folder the caller
    made): a wheel the caller supplies (`local`: SHA-256 → a file in a folder of the caller's,
    used as it is and never cached), else a copy from the wheel cache, else downloaded by hash
    from the index or the wheelhouse (never from the cache or a caller's folder) and published
    to the cache."""
    into.mkdir(parents=True, exist_ok=True)
    found: dict[Pin, Path] = {}
    for pin in pins:
        if pin.sha256 in local:
            found[pin] = local[pin.sha256]
        else:
            cached = _from_cache(pin, into)
            if cached is not None:
                found[pin] = cached
    missing = [pin for pin in pins if pin not in found]
    if missing:
        got = into / ".download"
        lock = into / ".lock.txt"
        lock.write_text("".join(pin.line() + "\n" for pin in missing))
        status, err = run_pip(["download", "--quiet", "--no-deps", "--require-hashes",
                               *PIP_GUEST_TARGET, "-d", str(got), "-r", str(lock),
                               *index_args((), no_index, cache=False)], should_stop)
        if status != 0:
            raise PackageError("downloading wheels failed: " + _last_error(err))
        by_hash = {file_sha256(path): path for path in got.iterdir() if path.is_file()}
        for pin in missing:
            source = by_hash.get(pin.sha256)
            dest = _pin_file(into, pin, source.name) if source is not None else None
            if source is None or dest is None:
                raise PackageError(f"{pin.name} {pin.version}: no downloaded wheel has the "
                                   f"expected SHA-256 {pin.sha256}")
            os.replace(source, dest)  # both in `into`: the caller's own folder
            _keep(dest, pin)
            found[pin] = dest
        shutil.rmtree(got, ignore_errors=True)
    return [found[pin] for pin in pins]


def _keep(path: Path, pin: Pin) -> None:
    """Publish a wheel the host downloaded (and checked against `pin`) into the wheel cache:
    first its record, then the wheel, hard-linked into place so that readers see it whole or
    not at all and an existing file is never replaced. Then evict past the size cap. Best
    effort: a read-only cache, or one that cannot take it, is left as it is."""
    root = _wheel_cache_root()
    cap = wheel_cache_max_bytes()
    if path.stat().st_size > cap or not writable(root):
        return
    from filelock import FileLock, Timeout

    target = _pin_file(wheel_cache(), pin, path.name)
    if target is None:
        return
    record = _record(pin.sha256)
    try:
        record.parent.mkdir(exist_ok=True)
        target.parent.mkdir(exist_ok=True)
        with FileLock(str(root / ".lock"), timeout=60):
            if not publish_new(record, lambda out: _write_name(out, target.name)) and \
                    _read_record(record) != target.name:
                return  # these bytes are cached under another name already
            if not publish_new(target, lambda out: _copy_into(path, out, pin.sha256)) and \
                    file_sha256(target) != pin.sha256:
                record.unlink()  # another wheel holds that name: ours is not cached
                return
            _evict(cap)
    except (OSError, Timeout):
        return


def _write_name(out: BinaryIO, name: str) -> None:
    out.write(name.encode("ascii") + b"\n")


def _copy_into(path: Path, out: BinaryIO, sha256: str) -> None:
    if _copy_hashed(path, out, wheel_cache_max_bytes()) != sha256:
        raise OSError(f"{path.name} changed while it was being cached")


def _evict(cap: int) -> None:
    """Under the cache's lock: delete wheels no record names (nothing of ours makes one), records
    of missing wheels, and the least recently used wheels until the cache holds at most `cap`
    bytes. Wheels are listed before records are read: a record is written before its wheel."""
    sizes = {}
    for entry in os.scandir(wheel_cache()):
        if entry.name.endswith(".whl") and entry.is_file(follow_symlinks=False):
            sizes[entry.name] = entry.stat(follow_symlinks=False).st_size
    used: list[tuple[float, str, Path]] = []
    named: set[str] = set()
    for entry in os.scandir(_wheel_cache_root() / "records"):
        if not SHA256_RE.fullmatch(entry.name):
            continue
        filename = _read_record(Path(entry.path))
        if filename in sizes:
            named.add(filename)
            used.append((entry.stat().st_mtime, filename, Path(entry.path)))
        else:
            Path(entry.path).unlink(missing_ok=True)
    for filename in set(sizes) - named:
        (wheel_cache() / filename).unlink(missing_ok=True)
    total = sum(sizes[name] for name in named)
    for _, filename, record in sorted(used):
        if total <= cap:
            break
        if filename in named:
            (wheel_cache() / filename).unlink(missing_ok=True)
            named.discard(filename)
            total -= sizes[filename]
        record.unlink(missing_ok=True)


def _wheel_of(path: Path) -> tuple[str, str]:
    """(canonical name, version) of a wheel by its file name (one the host wrote: wheel_file)."""
    try:
        name, version, _, _ = parse_wheel_filename(path.name)
    except (InvalidWheelFilename, InvalidVersion):
        raise PackageError(f"not a wheel file name: {_shown(path.name)}") from None
    return canonical(name), str(version)


class _Room:
    """What an install may still write on the host: bytes and files as a disk quota counts them
    (each file's and folder's allocated blocks, `counted_bytes`, and an entry each), taken as it
    writes; None: no bound. Past either, the install stops, naming the quota."""

    def __init__(self, max_bytes: Optional[int], max_files: Optional[int]) -> None:
        self.bytes, self.files = max_bytes, max_files

    def take(self, paths: Iterable[Path], what: str) -> None:
        for path in paths:
            if self.files is not None:
                self.files -= 1
            if self.bytes is not None:
                self.bytes -= counted_bytes(os.lstat(path))
        if (self.bytes is not None and self.bytes < 0) or (self.files is not None and self.files < 0):
            raise PackageError(f"installing {what} needs more room than the sandbox's disk quota has "
                               "left (Limits.disk_bytes, Limits.disk_files)")


def _destination(scheme: dict[str, str], room: _Room, what: str) -> Any:
    """`installer`'s destination for `scheme`, counting what it writes against `room`."""
    from installer.destinations import SchemeDictionaryDestination
    from installer.records import RecordEntry
    from installer.utils import Scheme

    class Counted(SchemeDictionaryDestination):
        def write_to_fs(self, scheme: Scheme, path: str, stream: BinaryIO,
                        is_executable: bool) -> RecordEntry:
            target = Path(os.path.abspath(os.path.join(self.scheme_dict[scheme], path)))
            made = []
            parent = target.parent
            while not parent.exists():
                made.append(parent)
                parent = parent.parent
            if room.files is not None and room.files < 1 + len(made):
                room.take([], what)
            record = super().write_to_fs(scheme, path, stream, is_executable)
            room.take([*made, target], what)
            return record

    return Counted(scheme, GUEST_INTERPRETER, "posix")


def install(wheels: list[Path], site: Path, scripts: Path, max_bytes: Optional[int] = None,
            max_files: Optional[int] = None) -> list[tuple[str, str]]:
    """Unpack the wheels into `site` (scripts into `scripts`); (name, version) of each. Each is
    checked first (wheel_check.py: bounded members, sizes, .dist-info files, scripts), and what
    they write on the host is counted as a disk quota counts it while it is written: at most
    `max_bytes` bytes and `max_files` files in all (None: no limit), or refused."""
    from installer import install as install_wheel
    from installer.sources import WheelFile

    done = []
    room = _Room(max_bytes, max_files)
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        scheme = {"purelib": str(site), "platlib": str(site), "scripts": str(scripts),
                  "headers": str(Path(tmp) / "headers"), "data": str(Path(tmp) / "data")}
        for path in wheels:
            name, version = _wheel_of(path)
            try:
                check_wheel(path, name, version, max_unpacked=room.bytes, max_files=room.files)
            except WheelError as exc:
                raise PackageError(str(exc)) from None
            destination = _destination(scheme, room, path.name)
            try:
                with WheelFile.open(path) as source:
                    install_wheel(source, destination, {"INSTALLER": b"declaw-wasm\n"})
            except PackageError:
                raise
            except Exception as exc:  # installer's errors (and its asserts), zipfile's, OSError
                why = (str(exc).splitlines() or [type(exc).__name__])[0]
                raise PackageError(f"{path.name} cannot be installed: {no_host_paths(why)[:300]}") from None
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

# (the door's declaration of the request, checked before this parser runs: install_op.py)
MAX_GUEST_WHEEL_BYTES = 256 << 20  # bytes of them, in all (and at most the sandbox's disk quota)
GUEST_DIST_INFO_BYTES = 16 << 20  # their .dist-info folders, in all (pip reads them into memory)
MAX_LISTED = 10_000  # entries of one find_links folder looked at
REQUEST_FIELDS = frozenset({"op", *PIP_INSTALL.fields})


@dataclass(frozen=True)
class InstallRequest:
    """A `pip_install` door request, parsed: every string re-serialised by us."""

    requirements: list[str]
    wheels: list[str]
    find_links: list[str]
    present: dict[str, str]  # canonical name -> version
    no_index: bool
    no_deps: bool


def _list(request: dict, field: str, limit: int) -> list:
    value = request.get(field, [])
    if not isinstance(value, list):
        raise _bad(field, value, "not a list")
    if len(value) > limit:
        raise PackageError(f"bad install request: {field}: more than {limit} entries")
    return value


def parse_request(request: object) -> InstallRequest:
    """The door's `pip_install` request, every field checked and written back by us; a bad one
    is refused naming the field."""
    if not isinstance(request, dict):
        raise PackageError("bad install request: not a mapping")
    unknown = sorted(str(key) for key in request if key not in REQUEST_FIELDS)
    if unknown:
        raise _bad("field", unknown[0], "unknown field")
    requirements = [guest_requirement(text, f"requirements[{i}]")
                    for i, text in enumerate(_list(request, "requirements", MAX_REQUIREMENTS))]
    wheels = [guest_path(path, f"wheels[{i}]")
              for i, path in enumerate(_list(request, "wheels", MAX_GUEST_WHEELS))]
    folders = [guest_path(path, f"find_links[{i}]")
               for i, path in enumerate(_list(request, "find_links", MAX_FIND_LINKS))]
    given = request.get("present", {})
    if not isinstance(given, dict):
        raise _bad("present", given, "not a mapping of names to versions")
    if len(given) > MAX_PRESENT:
        raise PackageError(f"bad install request: present: more than {MAX_PRESENT} entries")
    present = {}
    for key, value in given.items():
        name = project_name(key, "present: the name")
        present[name] = version_text(value, f"present[{_shown(key)}]")
    flags = {}
    for field in ("no_index", "no_deps"):
        flags[field] = request.get(field, False)
        if not isinstance(flags[field], bool):
            raise _bad(field, flags[field], "not true or false")
    return InstallRequest(requirements, wheels, folders, present, flags["no_index"], flags["no_deps"])


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


class _Hashing:
    """A file being written, and the SHA-256 of what was written to it."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.sha256 = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        return self.out.write(data)


class _GuestWheels:
    """The wheels a request copies out of the sandbox, into the request's own folder: counted,
    bounded in bytes (the sandbox's disk quota, at most MAX_GUEST_WHEEL_BYTES in all), hashed,
    and each checked (wheel_check.py, as a guest's) before pip sees it, their `.dist-info`
    folders together at most GUEST_DIST_INFO_BYTES (pip reads them all into memory)."""

    def __init__(self, fs: GuestFiles, folder: Path) -> None:
        self.fs = fs
        self.folder = folder
        quota = fs.limits.disk_bytes if fs.limits is not None else MAX_GUEST_WHEEL_BYTES
        self.budget = self.left = min(MAX_GUEST_WHEEL_BYTES, quota)
        self.room = fs.room()  # what one wheel may unpack to (bytes, files), None: no quota
        self.dist_info_left = GUEST_DIST_INFO_BYTES
        self.by_hash: dict[str, Path] = {}  # SHA-256 -> the copy (what fetch may use)
        self.seen: set[str] = set()
        self.count = 0

    def copy(self, path: str, field: str) -> str:
        """Copy the wheel at guest `path` out (never opened in place) and check it; its exact
        requirement."""
        filename = path.rsplit("/", 1)[-1]
        try:
            _, version, _, tags = parse_wheel_filename(filename)
        except (InvalidWheelFilename, InvalidVersion):
            raise _bad(field, path, "not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)") from None
        name = project_name(filename.split("-", 1)[0], field)
        interpreters = _pure_interpreters(tags)
        if interpreters is None:
            raise PackageError(f"{field} {_shown(path)}: contains compiled code (its tags name an "
                               "ABI or a platform), which cannot run inside the WebAssembly sandbox")
        requirement = f"{name}=={version}"
        if path in self.seen:
            return requirement
        self.seen.add(path)
        self.count += 1
        if self.count > MAX_GUEST_WHEELS:
            raise PackageError(f"bad install request: more than {MAX_GUEST_WHEELS} wheels to copy "
                               "out of the sandbox")
        dest = wheel_file(self.folder, name, str(version), interpreters)
        part = dest.with_name(dest.name + ".part")
        try:
            with open(part, "xb") as out:
                hashing = _Hashing(out)
                self.left -= self.fs.read_into(path, hashing, self.left)
        except SandboxException as exc:
            part.unlink(missing_ok=True)
            if isinstance(exc, InvalidArgumentException):  # too large, or not a regular file
                raise PackageError(f"{field}: {exc} (one install copies at most {_size(self.budget)} "
                                   "of wheels out of the sandbox, in all: its disk quota, at most "
                                   f"{_size(MAX_GUEST_WHEEL_BYTES)})") from None
            raise PackageError(f"{field}: {exc}") from None
        digest = hashing.sha256.hexdigest()
        if dest.exists():
            part.unlink()
            if digest not in self.by_hash:
                raise _bad(field, path, f"a second, different wheel of {name} {version}")
            return requirement
        os.rename(part, dest)
        room_bytes, room_files = self.room if self.room is not None else (None, None)
        try:
            facts = check_wheel(dest, name, str(version), max_unpacked=room_bytes,
                                max_files=room_files, guest=True)
        except WheelError as exc:
            dest.unlink()
            raise PackageError(f"{field}: {exc}") from None
        self.dist_info_left -= facts.dist_info
        if self.dist_info_left < 0:
            dest.unlink()
            raise PackageError(f"{field}: the wheels of one install may hold at most "
                               f"{_size(GUEST_DIST_INFO_BYTES)} of metadata (.dist-info folders) in all")
        self.by_hash[digest] = dest
        return requirement

    def copy_folder(self, folder: str, field: str) -> None:
        """Copy out the wheels in a find-links folder, looking at no more than MAX_LISTED of its
        entries (names only, as they come)."""
        try:
            listed = self.fs.entries(folder, MAX_LISTED)
        except SandboxException as exc:
            raise PackageError(f"{field}: {exc}") from None
        for name, kind in listed:
            if name.endswith(".whl") and kind in (FileType.FILE, FileType.SYMLINK):
                self.copy(guest_path(f"{folder.rstrip('/')}/{name}", field), field)


def _install_for_guest(fs: GuestFiles, request: dict, should_stop: StopCheck,
                       egress: Optional[IndexGate] = None) -> str:
    parsed = parse_request(request)
    present = {**parsed.present, **{project_name(name): version_text(version)
                                    for name, version in guest_site_distributions().items()}}
    requirements = list(parsed.requirements)
    with tempfile.TemporaryDirectory(prefix="declaw-pip-") as tmp:
        links = Path(tmp) / "links"
        links.mkdir()
        # wheels the guest supplies: copied out through the files API, used for this request only
        guest = _GuestWheels(fs, links)
        for i, path in enumerate(parsed.wheels):
            requirements.append(guest.copy(path, f"wheels[{i}]"))
        for i, folder in enumerate(parsed.find_links):
            guest.copy_folder(folder, f"find_links[{i}]")
        no_index = parsed.no_index
        refusal = None if no_index or egress is None else egress.index_refusal(index_urls(), should_stop)
        if refusal:
            no_index = True
        try:
            pins = resolve(requirements, present, find_links=[links], no_index=no_index,
                           no_deps=parsed.no_deps, should_stop=should_stop)
        except PackageError as exc:
            if refusal:
                raise PackageError(f"{exc}\n(the package index was not used: {refusal}; only wheels "
                                   "in the local wheel cache or wheelhouse were available)") from None
            raise
        if not pins:
            return "".join(f"Requirement already satisfied: {r}\n" for r in requirements)
        paths = fetch(pins, Path(tmp) / "wheels", local=guest.by_hash, no_index=no_index,
                      should_stop=should_stop)
        # laid out as the guest's folders are, so that each RECORD names a console script by its
        # path from the site as the guest sees it (../../../bin/NAME): `pip uninstall` removes it
        site, scripts = Path(tmp) / "root" / USER_SITE.lstrip("/"), Path(tmp) / "root" / USER_BIN.lstrip("/")
        room = fs.room()
        install(paths, site, scripts, *(room if room is not None else (None, None)))
        fs.write_trees([(site, USER_SITE), *([(scripts, USER_BIN)] if scripts.is_dir() else [])])
    return ("".join(f"Collecting {pin.name}=={pin.version}\n" for pin in pins) +
            "Successfully installed " + " ".join(f"{pin.name}-{pin.version}" for pin in pins) + "\n")
