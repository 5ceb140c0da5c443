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
