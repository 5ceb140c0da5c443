"""Tiny wheels made on the spot, for installs that need no index (offline tests)."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(folder: Path, name: str, version: str = "1.0", files: dict[str, str] | None = None,
               tag: str = "py3-none-any", requires: tuple[str, ...] = ()) -> Path:
    """A wheel of `name` (importable as `name`) whose module says its name and version."""
    files = files or {f"{name}/__init__.py": f"NAME = {name!r}\n__version__ = {version!r}\n"}
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: test package {name}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    pure = "true" if tag.endswith("-any") else "false"
    contents = {**files, f"{info}/METADATA": meta,
                f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: {pure}\nTag: {tag}\n"}
    record = "".join(f"{path},{_record_hash(data.encode())},{len(data.encode())}\n"
                     for path, data in contents.items()) + f"{info}/RECORD,,\n"
    path = folder / f"{name}-{version}-{tag}.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in contents.items():
            wheel.writestr(member, data)
        wheel.writestr(f"{info}/RECORD", record)
    return path


def make_sdist(folder: Path, name: str, version: str, marker: Path) -> Path:
    """A source distribution of `name` whose build writes `marker` (its build backend does, when
    it is imported: any build, metadata preparation or legacy `setup.py` run on the host)."""
    import io
    import tarfile

    root = f"{name}-{version}"
    write = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('built')\n"
    backend = write + ("def get_requires_for_build_wheel(config_settings=None):\n    return []\n\n"
                       "def prepare_metadata_for_build_wheel(directory, config_settings=None):\n"
                       "    raise RuntimeError('never reached in a test that passes')\n")
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        "backend.py": backend,
        "setup.py": write + "from setuptools import setup\nsetup()\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
    }
    path = folder / f"{root}.tar.gz"
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{root}/{member}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def write_index(root: Path, files: list[Path]) -> Path:
    """A PEP 503 simple index in `root/simple` for `files` (copied to `root/files`)."""
    import html
    import re
    import shutil

    projects: dict[str, list[Path]] = {}
    for path in files:
        name = re.sub(r"[-_.]+", "-", path.name.split("-")[0]).lower()
        projects.setdefault(name, []).append(path)
    (root / "files").mkdir(parents=True, exist_ok=True)
    for name, paths in projects.items():
        links = []
        for path in paths:
            shutil.copyfile(path, root / "files" / path.name)
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            links.append(f'<a href="../../files/{html.escape(path.name)}#sha256={digest}">'
                         f"{html.escape(path.name)}</a><br>")
        (root / "simple" / name).mkdir(parents=True, exist_ok=True)
        (root / "simple" / name / "index.html").write_text(
            "<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>")
    (root / "simple" / "index.html").write_text(
        "<!DOCTYPE html><html><body>" + "".join(f'<a href="{n}/">{n}</a>' for n in projects) + "</body></html>")
    return root / "simple"


def stuffed_wheel(folder: Path, name: str, member: str, head: bytes, filler: int = 0,
                  extra: dict[str, bytes] | None = None, method: int = zipfile.ZIP_DEFLATED) -> Path:
    """A pure-Python wheel of `name` 1.0 whose `.dist-info` file `member` (METADATA, WHEEL,
    entry_points.txt...) is `head` then `filler` spaces, deflated to a few KB; `extra`: more
    members (paths in the wheel)."""
    info = f"{name}-1.0.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: x\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{name}/__init__.py": b"", **(extra or {})}
    files[f"{info}/{member}"] = head
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-1.0-py3-none-any.whl"
    record = "".join(f"{p},,\n" for p in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", method, compresslevel=9 if method == zipfile.ZIP_DEFLATED else None) as wheel:
        for member_path, data in files.items():
            if member_path != f"{info}/{member}":
                wheel.writestr(member_path, data)
        with wheel.open(f"{info}/{member}", "w", force_zip64=True) as f:
            f.write(head)
            block = b" " * (1 << 20)
            for _ in range(filler >> 20):
                f.write(block)
            f.write(b" " * (filler & ((1 << 20) - 1)))
        if member != "RECORD":
            wheel.writestr(f"{info}/RECORD", record)
    return path


def many_members_zip(count: int) -> bytes:
    """A zip of `count` entries named `a` (one local header, `count` central-directory entries
    pointing at it): ~47 bytes an entry, each a ZipInfo (~400 bytes) in whoever opens it."""
    import struct

    name = b"a"
    local = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, 0, 0, 0, len(name), 0) + name
    entry = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, len(name),
                        0, 0, 0, 0, 0, 0) + name
    directory = entry * count
    z64 = len(local) + len(directory)
    return (local + directory
            + struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(directory), len(local))
            + struct.pack("<4sLQL", b"PK\x06\x07", 0, z64, 1)
            + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0))
