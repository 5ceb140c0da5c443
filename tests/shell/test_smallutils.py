"""`install`, `chown`/`chgrp`, `envsubst`, `factor`, `expand`, `unexpand` in the sandbox's shell
(guest/declaw_shell/smallutils.py) against GNU's: each case of smallutil_cases.py runs under the
host's program and in a sandbox, in a fresh folder holding FILES and an empty `dir/`: stdout, the
exit status, stderr and what the folder holds afterwards must match. `chown`/`chgrp` are checked in
the guest only (the host's users are not the sandbox's)."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from declaw_wasm import Sandbox
from shell.smallutil_cases import CASES, FILES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

FOLDER = "/home/user/smallutils"


@pytest.fixture(scope="module")
def su_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    sandbox.files.write_files([{"path": f"{FOLDER}/_fixture/{name}", "data": text} for name, text in FILES.items()])
    sandbox.commands.run(f"mkdir -p {FOLDER}/_fixture/dir")
    yield sandbox
    sandbox.kill()


# what a folder holds, as (path, content or None for a folder), the same in both places
TREE = ("import json, os\n"
        "print(json.dumps(sorted((os.path.relpath(os.path.join(r, n)), None if n in ds else "
        "open(os.path.join(r, n)).read()) for r, ds, fs in os.walk('.') for n in ds + fs)))")


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: " ".join([CASES[i][0], *CASES[i][1]])[:50])
def test_as_gnu(su_sbx: Sandbox, tmp_path: Path, case: int) -> None:
    program, args, stdin, env = CASES[case]
    real = shutil.which(program)
    if real is None:
        pytest.skip(f"needs {program} on the host")
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "dir").mkdir()
    host = subprocess.run([program, *args], executable=real, input=stdin, capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env})
    folder = f"{FOLDER}/c{case}"
    su_sbx.commands.run(f"rm -rf {folder} && cp -r {FOLDER}/_fixture {folder}")
    su_sbx.files.write(f"{FOLDER}/c{case}.stdin", stdin)
    run = su_sbx.commands.run(shlex.join([program, *args]) + f" < ../c{case}.stdin", cwd=folder, envs=env,
                              timeout=60)
    tree = su_sbx.commands.run(f"python3 -c {shlex.quote(TREE)}", cwd=folder).stdout
    host_tree = subprocess.run(["python3", "-c", TREE], cwd=tmp_path, capture_output=True, text=True).stdout
    assert (run.stdout, run.exit_code, run.stderr) == (host.stdout, host.returncode, host.stderr)
    assert tree == host_tree


def test_chown_checks_and_keeps(su_sbx: Sandbox) -> None:
    run = su_sbx.commands.run("cd /tmp && touch f && mkdir -p d/e && chown user f && chown -R root:root d && "
                              "chown user:user f d && chgrp user f && chown 0:0 f && echo ok; "
                              "chown bob f; echo s=$?; chown user nope; echo s=$?; chgrp nogroup f; echo s=$?; "
                              "set -e; chown -R user:user /tmp/d; echo still")
    assert run.stdout == "ok\ns=1\ns=1\ns=1\nstill\n", run.stderr
    assert "invalid user: \u2018bob\u2019" in run.stderr
    assert "cannot access 'nope': No such file or directory" in run.stderr
