"""The host's pip starts no process, whatever its inputs say (declaw_wasm/_packages/pip_guard.py):
the second guard behind parsing. These tests hand pip inputs no guest request can produce any
more (a constraints file asking for source builds), to show the guard alone holds."""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from declaw_wasm._packages.pip import (GUARD_MARK, GUARD_REFUSAL, PIP_GUEST_TARGET, PackageError,
                                       pip_command, run_pip)

from .conftest import Index
from wheels import make_wheel


def _resolve_args(tmp: Path, constraints: Path, index: str, requirement: str) -> list[str]:
    """What resolve() hands pip, with a constraints file of the test's choosing."""
    return ["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(tmp / "report.json"),
            *PIP_GUEST_TARGET, "--target", str(tmp / "target"), "-c", str(constraints),
            "--index-url", index, requirement]


def test_no_source_build_runs_on_the_host_whatever_pips_inputs_say(sdist_index: Index, tmp_path: Path) -> None:
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("--no-binary :all:\n")
    args = _resolve_args(tmp_path, constraints, sdist_index.url, "evilpkg")
    # without the guard, this input builds evilpkg on the host (its backend writes the marker)
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args],
                   capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    assert sdist_index.marker.exists(), "the test's sdist must run its code when pip builds it"
    sdist_index.marker.unlink()
    # under the guard, pip cannot start the build: a clear error, and the backend never ran
    with pytest.raises(PackageError) as refused:
        run_pip(args)
    assert str(refused.value) == GUARD_REFUSAL
    assert not sdist_index.marker.exists()


def test_pips_wheel_only_paths_start_no_process(tmp_path: Path) -> None:
    """Resolving and downloading wheels start no process but pip's User-Agent probes, which the
    guard refuses without a word (a refusal anywhere else would print GUARD_MARK)."""
    wheel = make_wheel(tmp_path / "house", "quietpkg", "1.0")
    status, err = run_pip(["install", "--dry-run", "--ignore-installed", "--report", str(tmp_path / "r.json"),
                           *PIP_GUEST_TARGET, "--target", str(tmp_path / "t"), "--no-index",
                           "--find-links", str(wheel.parent), "quietpkg"])
    assert (status, GUARD_MARK in err) == (0, False), err
    lock = tmp_path / "lock.txt"
    lock.write_text(f"quietpkg==1.0 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n")
    status, err = run_pip(["download", "--no-deps", "--require-hashes", *PIP_GUEST_TARGET, "-d",
                           str(tmp_path / "got"), "-r", str(lock), "--no-index", "--find-links",
                           str(wheel.parent)])
    assert (status, GUARD_MARK in err) == (0, False), err
    assert (tmp_path / "got" / wheel.name).read_bytes() == wheel.read_bytes()


class _NeedsLogin(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="index"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def login_index() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NeedsLogin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://user@127.0.0.1:{server.server_address[1]}/simple"  # a user, no password
    server.shutdown()
    server.server_close()


def test_pip_asks_no_keyring_when_run_without_input(login_index: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An index that asks for a login makes pip look for credentials; with --no-input (which
    pip_command always passes) it consults no keyring, so it starts no `keyring` program."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    keyring = bin_dir / "keyring"
    keyring.write_text(f"#!/bin/sh\ntouch {tmp_path / 'keyring-ran'}\n")
    keyring.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    args = ["download", "--no-deps", "-d", str(tmp_path / "got"), "--index-url", login_index, "anything"]
    command = pip_command(args)
    status, err = run_pip(args, timeout=120)
    assert status != 0 and GUARD_MARK not in err, err
    # the same pip without --no-input would start the keyring program: the guard refuses it
    interactive = [part for part in command if part != "--no-input"]
    got = subprocess.run(interactive, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert f"{GUARD_MARK}subprocess.Popen" in got.stderr, got.stderr
    assert not (tmp_path / "keyring-ran").exists()


def test_the_guard_runs_pip_exactly_as_python_m_pip(tmp_path: Path) -> None:
    got = subprocess.run(pip_command(["--version"]), capture_output=True, text=True, timeout=60)
    native = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and got.stdout == native.stdout
