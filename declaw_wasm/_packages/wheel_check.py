"""A wheel checked with bounded cost before the host's pip, `installer` or zipfile's member list
sees it (docs/security.md, "`pip install`").

A guest supplies wheels; the host's pip reads their metadata while it resolves (every file of the
`.dist-info` folder, into memory: `pip._internal.metadata.importlib._dists.WheelDistribution`),
and the host process installs them (`installer` reads WHEEL, RECORD and entry_points.txt whole,
writes a script per entry point, and unpacks every member). So before any of that:

- **The member list is bounded before it is built.** `zipfile.ZipFile` parses the whole central
  directory when it opens a file (a ZipInfo of ~400 bytes per entry, however small the entry), so
  `_count_members` first finds the central directory exactly as zipfile does (zipfile's own
  end-of-central-directory reader), refuses one larger than `MAX_CD_BYTES`, and walks its fixed
  46-byte headers, counting, without keeping anything: more than `MAX_MEMBERS` entries is refused
  before zipfile builds a list. (zipfile offers no bounded way to open an archive, hence the walk.)
- **Sizes are bounded as declared and as they can be.** Every member's declared size counts toward
  the room the caller gives (`max_unpacked`: the sandbox's quota), and may not exceed what its
  compressed bytes can produce (stored: equal; deflated: `DEFLATE_MAX_RATIO`, deflate's ceiling):
  a larger declared size is a lie, refused before anything is unpacked. Only stored and deflated
  members (PEP 427) are accepted: bzip2 and LZMA decoders choose their own memory (an LZMA stream
  names its dictionary size). What is read is held to the declared size by zipfile itself (it
  stops there and checks the CRC), in this process, in pip and in `installer` alike.
- **The `.dist-info` folder is bounded file by file and in all** (`DIST_INFO_BYTES`, and
  `FILE_BYTES` for METADATA, WHEEL, RECORD, entry_points.txt), since pip reads all of it.
- **The metadata pip acts on is re-parsed** (`guest=True`, for wheels a guest supplies), as pip
  parses it (the stdlib's e-mail parser, UTF-8): Name and Version must be the file name's; every
  `Requires-Dist` goes through `packaging`'s `Requirement`, and one naming a URL or a path (`@`) is
  refused: pip would fetch it, from the host's network, or open it on the host's disks, whatever
  `--no-index` and `--only-binary` say. `Requires-Python` must parse. pip's fallbacks for
  metadata (`PKG-INFO`, `requires.txt` in the `.dist-info` folder) are refused outright.
- **What installing makes is counted**: members, plus the scripts `entry_points.txt` makes
  (parsed by `installer`'s own parser, at most `MAX_SCRIPTS`), against `max_files`.
"""

from __future__ import annotations

import email.parser
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..exceptions import SandboxException

MAX_MEMBERS = 20_000  # the largest pure-Python wheels have ~8 000; ~8 MiB of ZipInfos at the cap
MAX_CD_BYTES = 8 << 20  # the central directory zipfile reads whole (20 000 entries of ~400 bytes)
DIST_INFO_BYTES = 8 << 20  # the .dist-info folder, in all (pip reads it into memory)
FILE_BYTES = {"METADATA": 1 << 20, "WHEEL": 64 << 10, "RECORD": 4 << 20, "entry_points.txt": 256 << 10}
MAX_SCRIPTS = 1000  # console and GUI scripts (a file each)
MAX_REQUIRES = 1000  # Requires-Dist lines
MAX_FIELD = 1000  # characters of one Requires-Dist or Requires-Python
DEFLATE_MAX_RATIO = 1032  # the most bytes deflate can make of one compressed byte
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll", ".wasm")
FALLBACKS = ("PKG-INFO", "requires.txt")  # read by pip when METADATA lacks what they hold
CD_ENTRY = struct.Struct("<4s4B4HL2L5H2L")  # a central directory entry's fixed 46 bytes
CD_SIGNATURE = b"PK\x01\x02"
# zipfile's own reader of the end records and its constants: private, unchanged since Python 2,
# and exactly what zipfile itself will read (no second parser of those records to disagree)
_ZIP: Any = zipfile
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, RuntimeError, NotImplementedError,
              ValueError, KeyError, struct.error)


class WheelError(SandboxException):
    """A wheel refused: what is wrong with it, in the guest's terms."""


@dataclass(frozen=True)
class WheelFacts:
    """What a checked wheel will cost: declared bytes unpacked, files installing it makes
    (members and scripts), and the bytes of its `.dist-info` folder."""

    unpacked: int
    files: int
    dist_info: int


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def member_ok(name: str) -> bool:
    """A wheel member path that stays where it is unpacked: relative, no '..', printable."""
    parts = name.rstrip("/").split("/")
    return bool(name) and name.isprintable() and not name.startswith("/") and "\\" not in name \
        and all(part not in ("", ".", "..") for part in parts)


def _count_members(f: BinaryIO, shown: str) -> int:
    """The entries zipfile would parse when it opens `f`, counted without keeping any; refused
    past MAX_MEMBERS or MAX_CD_BYTES. The central directory is found by zipfile's own reader of
    the end records (so that what is counted is what zipfile reads), its entries walked by their
    fixed headers, as zipfile walks them (it goes by the directory's size, not its count)."""
    end_record = _ZIP._EndRecData(f)
    if end_record is None:
        raise zipfile.BadZipFile("no end of central directory")
    size, offset, location = (end_record[_ZIP._ECD_SIZE], end_record[_ZIP._ECD_OFFSET],
                              end_record[_ZIP._ECD_LOCATION])
    if size > MAX_CD_BYTES:
        raise WheelError(f"{shown} is not accepted: its list of members is {size} bytes, more than "
                         f"{MAX_CD_BYTES} (at most {MAX_MEMBERS} members)")
    start = location - size  # as zipfile: where the directory ends is where the end records begin
    if end_record[_ZIP._ECD_SIGNATURE] == _ZIP.stringEndArchive64:
        start -= _ZIP.sizeEndCentDir64 + _ZIP.sizeEndCentDir64Locator
    if start < 0 or offset < 0:
        raise zipfile.BadZipFile("bad offset for central directory")
    f.seek(start)
    directory = f.read(size)
    at = count = 0
    while at < size:
        if at + CD_ENTRY.size > len(directory):
            raise zipfile.BadZipFile("truncated central directory")
        fields = CD_ENTRY.unpack_from(directory, at)
        if fields[0] != CD_SIGNATURE:
            raise zipfile.BadZipFile("bad magic number for central directory")
        at += CD_ENTRY.size + fields[12] + fields[13] + fields[14]  # name, extra, comment lengths
        count += 1
        if count > MAX_MEMBERS:
            raise WheelError(f"{shown} is not accepted: more than {MAX_MEMBERS} members")
    return count


def check_wheel(path: Path, name: str, version: str, *, max_unpacked: Optional[int] = None,
                max_files: Optional[int] = None, guest: bool = False) -> WheelFacts:
    """Refuse the wheel at `path` (of `name` `version`, as its file name says and the host parsed
    it) unless it is a pure-Python wheel whose every cost is bounded: see the module's docstring.
    `max_unpacked`/`max_files`: the room it may take (None: no limit); `guest`: a wheel a guest
    supplied, whose metadata is checked as pip would act on it."""
    shown = path.name
    try:
        with open(path, "rb") as f:
            _count_members(f, shown)
            f.seek(0)
            with zipfile.ZipFile(f) as wheel:
                return _check_open(wheel, shown, name, version, max_unpacked, max_files, guest)
    except ZIP_ERRORS as exc:
        raise WheelError(f"{shown} is not a valid wheel ({type(exc).__name__}: "
                         f"{_shown(str(exc))})") from None


def _check_open(wheel: zipfile.ZipFile, shown: str, name: str, version: str,
                max_unpacked: Optional[int], max_files: Optional[int], guest: bool) -> WheelFacts:
    members = wheel.infolist()
    names = _check_members(members, shown)
    unpacked = sum(m.file_size for m in members)
    if max_unpacked is not None and unpacked > max_unpacked:
        raise WheelError(f"{shown} unpacks to {unpacked} bytes, more than the {max_unpacked} the "
                         "sandbox has room for (its disk quota)")
    info = _dist_info(names, shown, name, version)
    dist_info = [m for m in members if m.filename.startswith(info + "/")]
    total = sum(m.file_size for m in dist_info)
    if total > DIST_INFO_BYTES:
        raise WheelError(f"{shown} is not accepted: its {info} folder unpacks to {total} bytes, more "
                         f"than {DIST_INFO_BYTES}")
    for member in dist_info:
        file = member.filename[len(info) + 1:]
        cap = FILE_BYTES.get(file)
        if cap is not None and member.file_size > cap:
            raise WheelError(f"{shown} is not accepted: its {file} is {member.file_size} bytes, more "
                             f"than {cap}")
        if file in FALLBACKS:
            raise WheelError(f"{shown} is not accepted: it holds {info}/{file} (a wheel's metadata is "
                             "its METADATA file alone)")
    _check_pure(_read_text(wheel, f"{info}/WHEEL", shown), names, shown)
    scripts = 0
    if f"{info}/entry_points.txt" in names:
        scripts = _count_scripts(_read_text(wheel, f"{info}/entry_points.txt", shown), shown)
    regular = [n for n in names if not n.endswith("/")]
    folders = {parent for n in regular for parent in _parents(n)}
    files = len(regular) + len(folders) + scripts + (1 if scripts else 0)
    if max_files is not None and files > max_files:
        raise WheelError(f"{shown} installs {files} files (members and scripts), more than the "
                         f"{max_files} the sandbox has room for (its disk quota)")
    if guest:
        _check_metadata(_read_text(wheel, f"{info}/METADATA", shown), shown, name, version)
    return WheelFacts(unpacked, files, total)


def _check_members(members: list[zipfile.ZipInfo], shown: str) -> set[str]:
    """Each member's path, compression and declared size; their names."""
    names: set[str] = set()
    for member in members:
        if not member_ok(member.filename):
            raise WheelError(f"{shown} is not a valid wheel: it names the path {_shown(member.filename)}")
        if member.filename in names:
            raise WheelError(f"{shown} is not a valid wheel: it holds {_shown(member.filename)} twice")
        names.add(member.filename)
        if member.flag_bits & 0x1:
            raise WheelError(f"{shown} is not a valid wheel: {_shown(member.filename)} is encrypted")
        if member.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise WheelError(f"{shown} is not a valid wheel: {_shown(member.filename)} is compressed "
                             f"with method {member.compress_type} (only stored and deflated, PEP 427)")
        most = member.compress_size if member.compress_type == zipfile.ZIP_STORED else \
            max(member.compress_size, 1) * DEFLATE_MAX_RATIO
        if member.file_size > most:
            raise WheelError(f"{shown} is not a valid wheel: {_shown(member.filename)} says it unpacks "
                             f"to {member.file_size} bytes, more than its {member.compress_size} "
                             "compressed bytes can hold")
    return names


def _dist_info(names: set[str], shown: str, name: str, version: str) -> str:
    """The one `.dist-info` folder (pip and installer refuse several), `name`'s `version`'s."""
    info_dirs = {top for top in (n.split("/", 1)[0] for n in names) if top.endswith(".dist-info")}
    if len(info_dirs) != 1:
        raise WheelError(f"{shown} is not a valid wheel: it holds {len(info_dirs)} .dist-info "
                         "folders, not one")
    info = info_dirs.pop()
    stem, _, info_version = info[:-len(".dist-info")].rpartition("-")
    try:
        same = canonicalize_name(stem) == canonicalize_name(name) and Version(info_version) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        raise WheelError(f"{shown} is not a valid wheel: its folder {_shown(info)} is not "
                         f"{name}'s {version}")
    return info


def _parents(member: str) -> list[str]:
    """The folders unpacking `member` makes: `a/b/c.py` -> `a`, `a/b`."""
    parts = member.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _read_text(wheel: zipfile.ZipFile, member: str, shown: str) -> str:
    """A `.dist-info` file (its size already bounded), as pip and installer read it: UTF-8."""
    try:
        data = wheel.read(member)
    except KeyError:
        raise WheelError(f"{shown} is not a valid wheel: it has no {member}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise WheelError(f"{shown} is not a valid wheel: {member} is not UTF-8") from None


def _check_pure(meta: str, names: set[str], shown: str) -> None:
    """Refuse compiled code (the guest could not load it) and a WHEEL pip would not take."""
    parsed = email.parser.Parser().parsestr(meta)
    wheel_version = (parsed.get("Wheel-Version") or "").strip()
    if not re.fullmatch(r"1(\.\d{1,9})?", wheel_version):
        raise WheelError(f"{shown} is not a valid wheel: Wheel-Version {_shown(wheel_version)}")
    tags = [str(tag).strip() for tag in parsed.get_all("Tag") or []]
    compiled = sorted(n for n in names if n.lower().endswith(COMPILED_SUFFIXES))
    pure = str(parsed.get("Root-Is-Purelib") or "").strip().lower() == "true"
    if not pure or not tags or not all(tag.endswith("-none-any") for tag in tags) or compiled:
        what = compiled[0] if compiled else f"tags {', '.join(tags) or 'none'}"
        raise WheelError(f"{shown} contains compiled code ({_shown(what)}), which cannot run inside "
                         "the WebAssembly sandbox")


def _count_scripts(text: str, shown: str) -> int:
    """The scripts `installer` will write for `entry_points.txt`, parsed by its own parser."""
    from installer.utils import parse_entrypoints

    try:
        count = 0
        for _ in parse_entrypoints(text):
            count += 1
            if count > MAX_SCRIPTS:
                raise WheelError(f"{shown} is not accepted: more than {MAX_SCRIPTS} scripts in its "
                                 "entry_points.txt")
        return count
    except WheelError:
        raise
    except Exception as exc:  # configparser's errors, and installer's asserts
        raise WheelError(f"{shown} is not a valid wheel: its entry_points.txt cannot be read "
                         f"({type(exc).__name__})") from None


def _check_metadata(text: str, shown: str, name: str, version: str) -> None:
    """METADATA as pip acts on it (`importlib.metadata` parses it with `email`; pip reads Name,
    Version, Requires-Dist, Requires-Python, Provides-Extra): the file name's project and
    version, requirements on names only."""
    meta = email.parser.Parser().parsestr(text)
    if not meta.get("Metadata-Version"):
        raise WheelError(f"{shown} is not a valid wheel: its METADATA has no Metadata-Version")
    given_name = str(meta.get("Name") or "").strip()
    given_version = str(meta.get("Version") or "").strip()
    try:
        same = canonicalize_name(given_name) == canonicalize_name(name) and \
            Version(given_version) == Version(version)
    except InvalidVersion:
        same = False
    if not same:
        raise WheelError(f"{shown} is not a valid wheel: its METADATA names "
                         f"{_shown(given_name)} {_shown(given_version)}, not {name} {version}")
    requires = [str(value) for value in meta.get_all("Requires-Dist") or []]
    if len(requires) > MAX_REQUIRES:
        raise WheelError(f"{shown} is not accepted: more than {MAX_REQUIRES} Requires-Dist")
    for requirement in requires:
        _dependency(requirement, shown)
    python = meta.get_all("Requires-Python") or []
    for value in python:
        try:
            if len(str(value)) > MAX_FIELD:
                raise InvalidSpecifier(str(value)[:80])
            SpecifierSet(str(value))
        except InvalidSpecifier:
            raise WheelError(f"{shown} is not a valid wheel: Requires-Python {_shown(str(value))}") from None


def _dependency(text: str, shown: str) -> None:
    """One Requires-Dist: a name with extras, specifiers and markers; never a URL or a path."""
    if len(text) > MAX_FIELD or not text.isprintable():
        raise WheelError(f"{shown} is not accepted: Requires-Dist {_shown(text)} is not a requirement")
    try:
        req = Requirement(text)
    except (InvalidRequirement, SyntaxError, ValueError):
        raise WheelError(f"{shown} is not accepted: Requires-Dist {_shown(text)} is not a valid "
                         "requirement") from None
    if req.url or "@" in text:
        raise WheelError(f"{shown} is not accepted: it depends on {_shown(text)}, a URL or a path "
                         "(the host installs dependencies from its package index or wheelhouse only, "
                         "never from a link a wheel names)")
    if any(spec.operator == "===" for spec in req.specifier):
        raise WheelError(f"{shown} is not accepted: Requires-Dist {_shown(text)} uses arbitrary "
                         "equality (===)")
