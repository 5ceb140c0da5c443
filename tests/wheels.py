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
