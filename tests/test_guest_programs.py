"""Programs agents run in a sandbox, beside their own code: pytest, `python3 -m json.tool` in a
pipeline, a missing module's error. Each was broken in the guest (fd capture needs os.dup,
json.tool closes stdout, CPython's -S hint), and each is compared with what Linux prints."""

from __future__ import annotations

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

TESTS = '''
def test_passes():
    print("printed by a passing test")
    assert 1 + 1 == 2

def test_fails():
    print("printed by a failing test")
    assert [1, 2] == [1, 3]
'''


def test_pytest_runs_and_captures_output(fresh: Sandbox) -> None:
    fresh.files.write("/home/user/proj/test_sample.py", TESTS)
    for command in ("python3 -m pytest -q test_sample.py", "pytest -q test_sample.py", "pytest -q -s test_sample.py"):
        run = fresh.commands.run(f"cd /home/user/proj && {command}", timeout=120)
        assert run.exit_code == 1, (command, run.stdout, run.stderr)
        assert "1 failed, 1 passed" in run.stdout, (command, run.stdout)
        assert "assert [1, 2] == [1, 3]" in run.stdout
        captured = "printed by a failing test" in run.stdout
        passing_shown = "printed by a passing test" in run.stdout
        # captured: only the failing test's output is reported; -s: both are printed as they run
        assert (captured, passing_shown) == ((True, True) if "-s" in command else (True, False)), run.stdout


def test_json_tool_in_a_pipeline(fresh: Sandbox) -> None:
    fresh.files.write("/home/user/j.json", '{"b": [1, 2], "a": null}')
    for command in ("cat j.json | python3 -m json.tool", "python3 -m json.tool < j.json",
                    "python3 -m json.tool j.json | head -3", "python3 -m json.tool --sort-keys j.json | cat"):
        run = fresh.commands.run(command, cwd="/home/user", timeout=60)
        assert run.exit_code == 0, (command, run.stderr)
        assert run.stdout.startswith("{\n    \""), (command, run.stdout)
    assert fresh.commands.run("python3 -m json.tool --sort-keys j.json | head -2", cwd="/home/user").stdout == \
        '{\n    "a": null,\n'


def test_a_missing_module_says_only_that(fresh: Sandbox) -> None:
    run = fresh.commands.run("python3 -c 'import no_such_module_here'", timeout=60)
    assert run.exit_code == 1
    assert run.stderr.rstrip().endswith("ModuleNotFoundError: No module named 'no_such_module_here'"), run.stderr
    execution = fresh.run_code("import no_such_module_either")
    assert execution.error is not None and execution.error.value == "No module named 'no_such_module_either'"


def test_pbkdf2_hmac_matches_cpython(fresh: Sandbox) -> None:
    """The guest's CPython has no OpenSSL, so hashlib lacked pbkdf2_hmac: the boot's is RFC 8018's."""
    import hashlib

    cases = [("sha256", b"pw", b"salt", 1000, None), ("sha1", b"password", b"salt", 2, 20),
             ("sha512", b"p", b"s", 3, 100), ("md5", b"", b"", 1, 7)]
    code = "import hashlib\nprint([hashlib.pbkdf2_hmac(*case).hex() for case in %r])" % (cases,)
    run = fresh.run_code(code)
    assert run.error is None, run.error
    assert "".join(run.logs.stdout).strip() == str([hashlib.pbkdf2_hmac(*case).hex() for case in cases])
    run = fresh.run_code("hashlib.pbkdf2_hmac('sha256', b'pw', b'salt', 0)")
    assert run.error is not None and run.error.name == "ValueError"
