"""The host's pip starts no process, reaches no host but its indexes, uses no file but its
folders, and its memory is bounded, whatever its inputs say (declaw_wasm/_packages/pip_guard.py):
the second guard behind parsing and wheel checks. These tests hand pip inputs no guest request
can produce any more (a constraints file asking for source builds, a requirement naming a URL or
a host path, a wheel with a huge METADATA), to show the guard alone holds."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from declaw_wasm._packages.pip import (GUARD_FILE, GUARD_MARK, GUARD_NETWORK, GUARD_REFUSAL,
                                       PIP_GUEST_TARGET, PackageError, pip_command, run_pip)

from .conftest import Hits, Index
from wheels import make_wheel, stuffed_wheel

pytestmark = pytest.mark.heavy  # each runs the host's real pip or fills a cache: seconds each


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
    (tmp_path / "run").mkdir()
    command = pip_command(args, tmp_path / "run")
    status, err = run_pip(args, timeout=120)
    assert status != 0 and GUARD_MARK not in err, err
    # the same pip without --no-input would start the keyring program: the guard refuses it
    interactive = [part for part in command if part != "--no-input"]
    got = subprocess.run(interactive, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                         env={**os.environ, "TMPDIR": str(tmp_path / "run")})
    assert f"{GUARD_MARK}process subprocess.Popen" in got.stderr, got.stderr
    assert not (tmp_path / "keyring-ran").exists()


def test_the_guard_runs_pip_exactly_as_python_m_pip(tmp_path: Path) -> None:
    got = subprocess.run(pip_command(["--version"]), capture_output=True, text=True, timeout=60)
    native = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60)
    assert got.returncode == 0 and got.stdout == native.stdout


def test_the_hosts_pip_reaches_no_host_but_its_indexes(sdist_index: Index, hits: Hits, tmp_path: Path) -> None:
    """A URL in a requirement (what a guest wheel's `Requires-Dist: x @ URL` would hand pip) is
    not fetched: not with no index at all, not with an index on the same address (another port),
    and a host that is no index is not even looked up. The index itself is reached."""
    got = str(tmp_path / "got")
    url = f"http://127.0.0.1:{hits.port}/from-the-guard-test/dep-1.0-py3-none-any.whl"
    for source in (["--no-index"], ["--index-url", sdist_index.url]):
        with pytest.raises(PackageError) as refused:
            run_pip(["download", "--no-deps", "-d", got, *source, f"dep @ {url}"])
        assert str(refused.value) == GUARD_NETWORK
    with pytest.raises(PackageError) as refused:
        run_pip(["download", "--no-deps", "-d", got, "--no-index",
                 "dep @ http://metadata.google.internal/computeMetadata/v1/dep-1.0-py3-none-any.whl"])
    assert str(refused.value) == GUARD_NETWORK
    assert hits.paths == []
    status, err = run_pip(["download", "--no-deps", *PIP_GUEST_TARGET, "-d", got, "--index-url",
                           sdist_index.url, "goodpkg"])
    assert (status, GUARD_MARK in err) == (0, False), err
    assert [p.name for p in (tmp_path / "got").iterdir()] == ["goodpkg-1.0-py3-none-any.whl"]


def test_the_hosts_pip_uses_no_file_outside_its_folders(tmp_path: Path) -> None:
    """A `file:` URL in a requirement (a file, a wheel, an sdist, a project whose build would
    write a marker, a missing path) opens nothing outside the folders pip was given: one refusal
    for all, and nothing built. (Whether a folder exists pip learns by stat, which no audit event
    sees: what keeps such URLs from pip at all is that no guest wheel may name one.)"""
    outside = tmp_path / "outside"
    (outside / "project").mkdir(parents=True)
    marker = tmp_path / "BUILT"
    (outside / "project" / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "b"\nbackend-path = ["."]\n')
    (outside / "project" / "b.py").write_text(f"open({str(marker)!r}, 'w')\n")
    for name in ("secret.txt", "dep-1.0-py3-none-any.whl", "dep-1.0.tar.gz"):
        (outside / name).write_text("secret")
    for name in ("secret.txt", "dep-1.0-py3-none-any.whl", "dep-1.0.tar.gz", "project", "missing"):
        with pytest.raises(PackageError) as refused:
            run_pip(["download", "--no-deps", "-d", str(tmp_path / "got"), "--no-index",
                     f"dep @ file://{outside / name}"])
        assert str(refused.value) == GUARD_FILE, name
    assert not marker.exists()
    assert not (tmp_path / "got").exists() or list((tmp_path / "got").iterdir()) == []


def test_pips_own_paths_stay_inside_its_folders(sdist_index: Index, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What pip legitimately touches is allowed (no refusal printed at all): its code, the
    stdlib, its configuration, the index, find-links, its cache, the report, the download folder,
    its temporary folder."""
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    wheel = make_wheel(tmp_path / "house", "quietpkg", "1.0", requires=("goodpkg",))
    status, err = run_pip(["install", "--dry-run", "--ignore-installed", "--report", str(tmp_path / "r.json"),
                           *PIP_GUEST_TARGET, "--target", str(tmp_path / "t"), "--index-url", sdist_index.url,
                           "--find-links", str(wheel.parent), "quietpkg"])
    assert (status, GUARD_MARK in err) == (0, False), err
    assert (tmp_path / "r.json").stat().st_size > 0
    status, err = run_pip(["download", *PIP_GUEST_TARGET, "-d", str(tmp_path / "got"), "--index-url",
                           sdist_index.url, "--find-links", str(wheel.parent), "quietpkg"])
    assert (status, GUARD_MARK in err) == (0, False), err
    assert sorted(p.name for p in (tmp_path / "got").iterdir()) == ["goodpkg-1.0-py3-none-any.whl", wheel.name]


def test_the_hosts_pip_runs_in_bounded_memory(tmp_path: Path) -> None:
    """pip parses what it reads (a wheel's METADATA at ~16x its size): bounded by RLIMIT_AS, a
    clear error rather than the host's memory. (pip.py refuses such a wheel from a guest before
    pip sees it; here pip is handed one directly, under a 256 MiB bound.)"""
    wheel = stuffed_wheel(tmp_path / "house", "bigmeta", "METADATA",
                          b"Metadata-Version: 2.1\nName: bigmeta\nVersion: 1.0\n\n", 48 << 20)
    assert wheel.stat().st_size < 64 << 10
    with pytest.raises(PackageError, match=r"pip ran out of the memory it may use on the host \(256 MiB\)"):
        run_pip(["install", "--dry-run", "--ignore-installed", "--report", str(tmp_path / "r.json"),
                 *PIP_GUEST_TARGET, "--target", str(tmp_path / "t"), "--no-index", "--find-links",
                 str(wheel.parent), "bigmeta"], memory=256 << 20)
