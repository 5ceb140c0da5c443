"""Fixtures for volumes and the state store: a fresh store per test, on a local folder or
`memory://` (both real fsspec backends). The guest tests run on the warm path only: volumes
are host-side mounts, the same on both paths."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Iterator, Literal, Mapping, Optional

import pytest

from declaw_wasm._state import StateStore


@pytest.fixture(scope="session")
def guest_path() -> str:  # overrides tests/conftest.py's warm/cold parametrisation
    return "warm"


@pytest.fixture(params=["local", "memory"])
def state_url(request: pytest.FixtureRequest, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """DECLAW_WASM_STATE pointing at a fresh store of each kind."""
    url = str(tmp_path / "state") if request.param == "local" else f"memory://declaw-{uuid.uuid4().hex}"
    monkeypatch.setenv("DECLAW_WASM_STATE", url)
    yield url
    if request.param == "memory":
        StateStore(url).delete_tree("volumes")


@pytest.fixture
def local_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = str(tmp_path / "state")
    monkeypatch.setenv("DECLAW_WASM_STATE", url)
    return url


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def s3_options() -> Iterator[dict[str, object]]:
    """Storage options for s3fs against moto's S3 server (a subprocess on a free port), with a
    bucket `declaw-state`. Skipped when s3fs or moto are not installed ('.[test-s3]')."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    options: dict[str, object] = {"key": "testing", "secret": "testing",
                                  "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}"}}
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.time() > deadline:
                    pytest.skip("moto server did not start")
                time.sleep(0.1)
        import s3fs

        s3fs.S3FileSystem(**options).mkdir("declaw-state")
        yield options
    finally:
        proc.terminate()
        proc.wait(10)


TarWriteMode = Literal["w", "w:gz", "w:bz2", "w:xz"]


def make_tar(files: Mapping[str, Optional[bytes]], *, mode: TarWriteMode = "w:gz",
             extra: Optional[list[tarfile.TarInfo]] = None) -> bytes:
    """A tar.gz of `files` (None: a folder), plus raw `extra` members."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode, format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.mtime = 1_700_000_000
            if data is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info)
    return buf.getvalue()


def tar_names(data: bytes) -> dict[str, Optional[bytes]]:
    out: dict[str, Optional[bytes]] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar:
            f = tar.extractfile(member) if member.isreg() else None
            out[member.name] = f.read() if f is not None else None
    return out


def host_tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def environ_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}
