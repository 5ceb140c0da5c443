"""The shell against real bash: each line of cases.py (and awk_cases.py, gap_cases.py,
array_cases.py, sed_cases.py) runs under the host's `bash -c` in a temporary folder and through
`commands.run` in a folder of the sandbox, both holding the same files; stdout and the exit
status must match. Expectations are generated here, never typed by hand. Lines in KNOWN_GAPS
differ for a reason the README lists.

Runs on the warm path only (tests/shell/conftest.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import Sandbox
from hostbash import HOST_BASH, host_bash  # tests/ is on sys.path

from .array_cases import ARRAY_CASES
from .awk_cases import AWK_CASES
from .cases import CASES, FIXTURE
from .gap_cases import GAP_CASES
from .sed_cases import SED_CASES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

ALL_CASES = CASES + [case for case in AWK_CASES if case not in CASES]
ALL_CASES += [case for case in GAP_CASES if case not in ALL_CASES]
ALL_CASES += [case for case in ARRAY_CASES if case not in ALL_CASES]
ALL_CASES += [case for case in SED_CASES if case not in ALL_CASES]

# line -> why it differs (README, "The shell: known gaps")
KNOWN_GAPS: dict[str, str] = {
    "yes | awk 'NR==3{exit} {print NR}'":
        "awk and python3 read a pipe's input whole before they start: an endless producer never ends",
}



def _case_id(index: int) -> str:
    return f"c{index:03d}"


@pytest.fixture(scope="module")
def shell_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=3600)
    # the fixture once, then a copy per case in one guest command (a write per file and case
    # would check the disk quota over a growing tree ~1500 times)
    sandbox.files.write_files([{"path": f"/home/user/conf/_fixture/{name}", "data": content}
                               for name, content in FIXTURE.items()])
    copies = " ".join(_case_id(i) for i in range(len(ALL_CASES)))
    made = sandbox.commands.run(f"cd /home/user/conf && for d in {copies}; do cp -r _fixture $d; done", timeout=600)
    assert made.exit_code == 0, made.stderr
    yield sandbox
    sandbox.kill()


def _host_bash(line: str, folder: Path) -> tuple[str, int]:
    for name, content in FIXTURE.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/home/user", "LANG": "C.UTF-8",
           "USER": "user"}
    done = host_bash(["-c", line], cwd=folder, env=env, capture_output=True, timeout=60)
    return done.stdout.decode("utf-8", "replace"), done.returncode


@pytest.mark.skipif(HOST_BASH is None, reason="needs bash on the host")
@pytest.mark.parametrize("index", range(len(ALL_CASES)), ids=[_case_id(i) for i in range(len(ALL_CASES))])
def test_line_matches_bash(shell_sbx: Sandbox, tmp_path: Path, index: int) -> None:
    line = ALL_CASES[index]
    if line in KNOWN_GAPS:
        pytest.xfail(KNOWN_GAPS[line])
    guest_dir = f"/home/user/conf/{_case_id(index)}"
    host_dir = tmp_path / _case_id(index)  # same folder name: `basename $(pwd)` agrees
    host_dir.mkdir()
    expected_out, expected_code = _host_bash(line, host_dir)
    expected_out = expected_out.replace(str(host_dir), guest_dir)
    result = shell_sbx.commands.run(line, cwd=guest_dir, timeout=60)
    assert (result.stdout, result.exit_code) == (expected_out, expected_code), \
        f"{line!r}\nstderr: {result.stderr[-2000:]}"
