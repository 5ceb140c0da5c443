"""A wheel the host did not make is checked with bounded cost before the host's pip, `installer`
or zipfile's member list sees it (declaw_wasm/_packages/wheel_check.py), and installing one
writes on the host no more than the room it is given, counted as a disk quota counts it. Pure
host tests: the checks and the installer run here, on wheels made on the spot; the guest-driven
versions of these attacks are in test_pip_hostile.py."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm._packages.pip import PackageError, install, no_host_paths
from declaw_wasm._packages.wheel_check import (DIST_INFO_BYTES, FILE_BYTES, MAX_MEMBERS, MAX_SCRIPTS,
                                               WheelError, check_wheel)

from wheels import make_wheel, many_members_zip, stuffed_wheel
from tracing import Peak

pytestmark = pytest.mark.traces_memory  # tracemalloc stays on after them (tracing.py)

MIB = 1 << 20


@pytest.fixture
def traced() -> Iterator[Peak]:
    yield Peak()  # tracing stays on once started (tracing.py says why)


def refused(path: Path, *words: str, max_files: int | None = None) -> str:
    """check_wheel's refusal of `path` (a guest's wheel of its file name's project, 1.0), which
    names `words`."""
    with pytest.raises(WheelError) as got:
        check_wheel(path, path.name.split("-")[0], "1.0", guest=True, max_files=max_files)
    for word in words:
        assert word in str(got.value), str(got.value)
    return str(got.value)


def test_a_wheels_member_list_is_bounded_before_it_is_built(tmp_path: Path, traced: Peak) -> None:
    """The central directory is walked, counted and refused past MAX_MEMBERS before zipfile
    builds a ZipInfo (~400 bytes) per entry: a 4.7 MB zip of 100 000 one-letter entries costs
    the check about its directory's bytes, not ~40 MiB; a 19 MB one is refused by the size of
    its directory alone."""
    for count, words in ((100_000, ("more than", str(MAX_MEMBERS), "members")), (400_000, ("list of members",))):
        path = tmp_path / f"many{count}-1.0-py3-none-any.whl"
        path.write_bytes(many_members_zip(count))
        traced.reset()
        refused(path, *words)
        assert traced.now() < 8 * MIB, traced.now()
    # what zipfile parses goes by the directory's size, not the count the end record states
    data = bytearray(many_members_zip(30_000))
    at = data.rfind(b"PK\x06\x06")
    struct.pack_into("<2Q", data, at + 24, 3, 3)  # the zip64 end record says: 3 entries
    lying = tmp_path / "lying-1.0-py3-none-any.whl"
    lying.write_bytes(bytes(data))
    refused(lying, f"more than {MAX_MEMBERS} members")


def test_a_wheels_metadata_files_are_bounded(tmp_path: Path) -> None:
    """pip reads the whole `.dist-info` folder into memory and installer reads WHEEL, RECORD and
    entry_points.txt whole: each is bounded by its declared size before anything is read (the
    wheels are a few KB each)."""
    for member, cap in FILE_BYTES.items():
        head = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n" if member == "WHEEL" else b""
        path = stuffed_wheel(tmp_path / member, "big", member, head, cap + 1)
        assert path.stat().st_size < 64 << 10
        refused(path, member, f"more than {cap}")
    path = stuffed_wheel(tmp_path / "license", "big", "LICENSE", b"", DIST_INFO_BYTES)
    refused(path, ".dist-info folder unpacks to", str(DIST_INFO_BYTES))


def _set_size(path: Path, member: str, size: int) -> None:
    """Make the central directory say `member` unpacks to `size` bytes."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + name_length] == member.encode():
            struct.pack_into("<L", data, at + 24, size)
            break
        at = data.find(b"PK\x01\x02", at + 4)
    else:
        raise AssertionError(member)
    path.write_bytes(bytes(data))


def test_a_declared_size_its_compressed_bytes_cannot_hold_is_refused(tmp_path: Path) -> None:
    """A member says how large it unpacks: more than deflate can make of its compressed bytes
    (1032:1), or more than a stored member holds, is a lie, refused before anything is unpacked;
    what is read is held to the declared size by zipfile (its CRC check) wherever it is read."""
    deflated = make_wheel(tmp_path / "d", "liar", files={"liar/__init__.py": "x = 1\n"})
    _set_size(deflated, "liar/__init__.py", 100_000)
    refused(deflated, "liar/__init__.py", "100000", "compressed bytes can hold")
    stored = make_wheel(tmp_path / "s", "liar", files={"liar/__init__.py": "x = 1\n"})  # ZIP_STORED
    _set_size(stored, "liar/__init__.py", 7)
    refused(stored, "liar/__init__.py", "compressed bytes can hold")


@pytest.mark.parametrize("method", [zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA])
def test_only_stored_and_deflated_members_are_accepted(tmp_path: Path, method: int) -> None:
    """bzip2 and LZMA decoders choose their own memory (an LZMA stream names its dictionary's
    size); a wheel uses stored or deflated members (PEP 427)."""
    path = stuffed_wheel(tmp_path, "packed", "METADATA",
                         b"Metadata-Version: 2.1\nName: packed\nVersion: 1.0\n", method=method)
    refused(path, f"method {method}", "PEP 427")


@pytest.mark.parametrize("requirement", [
    "dep @ http://127.0.0.1:9/dep-1.0-py3-none-any.whl", "dep@https://example.com/dep.whl",
    "dep @ file:///etc/passwd", "dep[x] @ git+https://example.com/dep", "dep @ file:/work/main",
    "dep ; python_version >= '3' @ http://x/", "dep @ ./relative", "dep (>=1.0) @ http://x/",
])
def test_a_guest_wheels_dependencies_are_names_never_links(tmp_path: Path, requirement: str) -> None:
    """pip follows a wheel's `Requires-Dist: x @ URL` from any find-links wheel, whatever
    --no-index and --only-binary say: a guest's wheel may name dependencies, never where they
    come from."""
    path = make_wheel(tmp_path, "front", requires=(requirement,))
    message = refused(path, "front-1.0-py3-none-any.whl is not accepted")
    assert "URL or a path" in message or "not a valid requirement" in message, message
    check_wheel(path, "front", "1.0")  # (an index's wheel: pip refuses what PyPI's name; the guard the rest)


def test_a_guest_wheels_metadata_is_what_its_file_name_says(tmp_path: Path) -> None:
    """Only METADATA speaks for a guest's wheel, and it names the file's project and version:
    pip's fallbacks (PKG-INFO, requires.txt in the .dist-info folder, which pip reads when
    METADATA has no Requires-Dist) are refused, as are two .dist-info folders or a foreign one."""
    fine = make_wheel(tmp_path / "fine", "front", requires=("dep>=1.0", 'other[x]; extra == "y"'))
    check_wheel(fine, "front", "1.0", guest=True)
    meta = b"Metadata-Version: 2.1\nName: front\nVersion: 1.0\n"
    for member, body in (("requires.txt", b"dep @ http://127.0.0.1:9/x\n"), ("PKG-INFO", meta)):
        path = stuffed_wheel(tmp_path / member, "front", member, body)
        refused(path, member)
    other = stuffed_wheel(tmp_path / "other", "front", "METADATA",
                          b"Metadata-Version: 2.1\nName: numpy\nVersion: 1.0\n")
    refused(other, "names 'numpy'")
    newer = stuffed_wheel(tmp_path / "newer", "front", "METADATA",
                          b"Metadata-Version: 2.1\nName: front\nVersion: 2.0\n")
    refused(newer, "'2.0'")
    two = stuffed_wheel(tmp_path / "two", "front", "METADATA", meta, extra={"evil-1.0.dist-info/METADATA": meta})
    refused(two, "2 .dist-info folders")
    python = stuffed_wheel(tmp_path / "python", "front", "METADATA", meta + b"Requires-Python: >=3.8; rm\n")
    refused(python, "Requires-Python")


def test_a_wheels_scripts_are_counted(tmp_path: Path) -> None:
    """Each console or GUI script becomes a file (and a disk block) where it is installed:
    counted with the members against the room given, and at most MAX_SCRIPTS."""
    lines = b"[console_scripts]\n" + b"".join(b"s%05d=m:f\n" % i for i in range(MAX_SCRIPTS + 1))
    refused(stuffed_wheel(tmp_path / "many", "scripts", "entry_points.txt", lines),
            f"more than {MAX_SCRIPTS} scripts")
    few = stuffed_wheel(tmp_path / "few", "scripts", "entry_points.txt", b"[console_scripts]\na=m:f\nb=m:g\n")
    facts = check_wheel(few, "scripts", "1.0", guest=True)
    assert facts.files == 2 + 1 + 5 + 2  # scripts and their folder, five files and their folders
    refused(few, "installs 10 files", max_files=9)


def test_installing_writes_on_the_host_no_more_than_the_room_given(tmp_path: Path) -> None:
    """What installer writes is counted as a quota counts it (blocks and entries) while it is
    written: 400 one-byte modules declare 400 bytes but take ~1.6 MB of blocks; with room for
    less the install stops, naming the quota."""
    files = {f"tiny/m{i:03d}.py": "x" for i in range(400)}
    wheel = make_wheel(tmp_path / "w", "tiny", files={"tiny/__init__.py": "", **files})
    with pytest.raises(PackageError, match="disk quota"):
        install([wheel], tmp_path / "site", tmp_path / "bin", max_bytes=400 * 1024, max_files=10_000)
    with pytest.raises(PackageError, match="disk quota"):
        install([wheel], tmp_path / "site2", tmp_path / "bin2", max_bytes=64 * MIB, max_files=100)
    assert install([wheel], tmp_path / "site3", tmp_path / "bin3", max_bytes=64 * MIB, max_files=10_000) \
        == [("tiny", "1.0")]


def test_a_hosts_pip_error_names_no_host_path() -> None:
    """pip's words reach the guest without the host's paths or file URLs in them."""
    said = ("Cannot determine archive format of /tmp/pip-req-build-x1; Directory '/work/main' is "
            "not installable; file:///etc/hostname; No such file or directory: '/nonexistent'")
    assert no_host_paths(said) == ("Cannot determine archive format of <path>; Directory '<path>' "
                                   "is not installable; <path>; No such file or directory: '<path>'")
    kept = "foo ~=1.0 (from versions: none); HTTP 404 at http://127.0.0.1:9/simple/foo/"
    assert no_host_paths(kept) == kept
