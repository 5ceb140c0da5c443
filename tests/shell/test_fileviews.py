"""`hexdump`, `hd`, `strings` and `split` in the sandbox's shell (guest/declaw_shell/fileviews.py)
against util-linux 2.38's hexdump, GNU binutils' strings and GNU coreutils' split.

Each case of fileview_cases.py runs as `PROGRAM ARGS < .stdin` under the host's program and in a
sandbox, each in a fresh folder holding the same files: stdout, the exit status, stderr (but for
a usage text, whose list of targets is the host's binutils') and the files `split` writes must
match."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from declaw_wasm import Sandbox
from shell.fileview_cases import CASES, FILES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

FOLDER = "/home/user/fileviews"


@pytest.fixture(scope="module")
def fv_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    sandbox.files.write_files([{"path": f"{FOLDER}/_fixture/{name}", "data": data} for name, data in FILES.items()])
    yield sandbox
    sandbox.kill()


def _written(listing: dict[str, bytes]) -> dict[str, bytes]:
    return {name: data for name, data in listing.items() if name not in FILES and name != ".stdin"}


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: " ".join([CASES[i][0], *CASES[i][1]])[:50])
def test_as_the_real_program(fv_sbx: Sandbox, tmp_path: Path, case: int) -> None:
    program, args, stdin = CASES[case]
    real = shutil.which(program)
    if real is None:
        pytest.skip(f"needs {program} on the host")
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    host = subprocess.run([program, *args], executable=real, input=stdin, capture_output=True, cwd=tmp_path,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    host_files = _written({path.name: path.read_bytes() for path in tmp_path.iterdir()})

    folder = f"{FOLDER}/c{case}"
    fv_sbx.commands.run(f"rm -rf {folder} && cp -r {FOLDER}/_fixture {folder}")
    fv_sbx.files.write(f"{folder}/.stdin", stdin)
    run = fv_sbx.commands.run(shlex.join([program, *args]) + " < .stdin", cwd=folder, timeout=60)
    guest_files = _written({entry.name: bytes(fv_sbx.files.read(entry.path, format="bytes"))
                            for entry in fv_sbx.files.list(folder)})

    assert (run.stdout, run.exit_code) == (host.stdout.decode("utf-8", "replace"), host.returncode)
    assert guest_files == host_files
    host_err = host.stderr.decode("utf-8", "replace")
    if "Usage: strings" in host_err:
        assert run.stderr.split("\n")[:4] == host_err.split("\n")[:4]
    else:
        assert run.stderr == host_err


def test_in_the_shell(fv_sbx: Sandbox) -> None:
    run = fv_sbx.commands.run("which hexdump hd strings split; printf '\\x89PNG\\r\\n' | hd | head -1; "
                              "python3 -c \"open('b.bin', 'wb').write(b'\\\\0' * 9 + b'secret-key' + b'\\\\1')\"; "
                              "strings b.bin; seq 1 7 | split -l 3 - part.; cat part.ac; ls part.* | wc -l",
                              cwd=FOLDER)
    assert run.stdout == ("/usr/bin/hexdump\n/usr/bin/hd\n/usr/bin/strings\n/usr/bin/split\n"
                          "00000000  89 50 4e 47 0d 0a                                 |.PNG..|\n"
                          "secret-key\n7\n3\n"), run.stderr
