"""`run_code(language="bash")` and bash contexts (E2B code-interpreter's bash kernel): cells run
through the guest's shell in one session kept across cells (variables, functions, cwd), the
sandbox's environment in it, `envs` for one cell only, a non-zero status as the cell's error."""

from __future__ import annotations

from typing import Iterator

import anyio
import pytest

from declaw_wasm import AsyncSandbox, InvalidArgumentException, Sandbox


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def box(guest_path: str) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600, envs={"SANDBOX_WIDE": "everywhere"})
    yield sandbox
    sandbox.kill()


def test_bash_cells_keep_state_across_cells(box: Sandbox) -> None:
    first = box.run_code("X=41; f() { echo \"f:$1\"; }; cd /tmp; echo start", language="bash")
    assert first.logs.stdout == ["start\n"] and first.error is None
    later = box.run_code("echo $((X + 1)); f ok; pwd", language="bash")
    assert "".join(later.logs.stdout) == "42\nf:ok\n/tmp\n"
    # the default Python context is another context: its state is its own
    assert box.run_code("import os; print(os.getcwd())").logs.stdout == ["/home/user\n"]


def test_bash_cell_environment_and_per_cell_envs(box: Sandbox) -> None:
    assert box.run_code("echo $SANDBOX_WIDE", language="bash").logs.stdout == ["everywhere\n"]
    over = box.run_code("echo $SANDBOX_WIDE $ONLY_HERE; printenv ONLY_HERE", language="bash",
                        envs={"SANDBOX_WIDE": "overridden", "ONLY_HERE": "yes"})
    assert "".join(over.logs.stdout) == "overridden yes\nyes\n"
    after = box.run_code("echo $SANDBOX_WIDE ${ONLY_HERE:-gone}", language="bash")
    assert after.logs.stdout == ["everywhere gone\n"]


def test_bash_cell_status_stderr_and_programs(box: Sandbox) -> None:
    failed = box.run_code("echo out; echo err >&2; false", language="bash")
    assert failed.logs.stdout == ["out\n"] and failed.logs.stderr == ["err\n"]
    assert failed.error is not None and failed.error.value == "1"
    error = box.run_code("ls /nope", language="bash").error
    assert error is not None and error.value == "2"
    piped = box.run_code("printf 'b\\na\\n' | sort | python3 -c 'import sys; print(sys.stdin.read().split())'",
                         language="bash")
    assert piped.logs.stdout == ["['a', 'b']\n"] and piped.error is None
    # `exit` ends the session: the next cell starts a fresh one, the context lives on
    error = box.run_code("Y=1; exit 3", language="bash").error
    assert error is not None and error.value == "3"
    assert box.run_code("echo ${Y:-fresh}; pwd", language="bash").logs.stdout == ["fresh\n", "/home/user\n"]


def test_bash_context_with_cwd(box: Sandbox) -> None:
    box.commands.run("mkdir -p /home/user/bashctx")
    context = box.create_code_context(cwd="/home/user/bashctx", language="bash")
    assert context.language == "bash"
    assert box.run_code("pwd; Z=here", context=context).logs.stdout == ["/home/user/bashctx\n"]
    assert box.run_code("echo $Z", context=context).logs.stdout == ["here\n"]
    # `!cmd` in a Python cell stays a one-off shell line
    assert box.run_code("!pwd").logs.stdout == ["/home/user\n"]


def test_async_bash_cell(guest_path: str) -> None:
    async def main() -> None:
        sandbox = await AsyncSandbox.create(timeout=120)
        try:
            result = await sandbox.run_code("echo hi; pwd", language="bash")
            assert result.logs.stdout == ["hi\n", "/home/user\n"]
        finally:
            await sandbox.kill()

    anyio.run(main)


@pytest.mark.served
def test_bash_cells_on_every_backend(sbx: Sandbox) -> None:
    """Through `declaw-wasm serve`, a process pool and Ray, the language travels with the cell."""
    assert sbx.run_code("BACKEND_VAR=7; echo $((BACKEND_VAR * 6))", language="bash").logs.stdout == ["42\n"]
    assert sbx.run_code("echo $BACKEND_VAR", language="bash").logs.stdout == ["7\n"]
    with pytest.raises(InvalidArgumentException, match="only python and bash"):
        sbx.run_code("1", language="r")
