"""CPU limits: `Limits(cpu_instructions=N)` gives each command line and each cell a budget of N
instructions (Wasmtime fuel), whatever the wall clock says; the use is reported.

They need the runtime compiled with fuel (`declaw-wasm warmup --fuel`): the `fuel_interpreter`
fixture builds it once if the cache lacks it (about 3 minutes of compiling on a quiet 2-core
machine, more on a loaded one). Warm path only: the cold path's fuel module is another build.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys
from typing import Any, Iterator

import pytest

from declaw_wasm import Limits, Sandbox, testing
from declaw_wasm._wasm.engine import FUEL_FLAGS
from declaw_wasm._wasm.warm_image import get_interpreter
from declaw_wasm.settings import cache_dir

from cache_copy import linked_copy  # tests/ is on sys.path

pytestmark = [pytest.mark.fuel, pytest.mark.timeout(900)]  # the first test may compile the fuel build
LOOP = "python3 -c 'n = 0\nwhile True:\n    n += 1'"


@pytest.fixture(scope="module")
def fuel_interpreter(guest_path: str) -> None:
    if guest_path != "warm":
        pytest.skip("fuel is built for the warm image")
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    get_interpreter(FUEL_FLAGS, build=True)


@pytest.fixture(scope="module")
def budget_sbx(fuel_interpreter: None) -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600, limits=Limits(cpu_instructions=2_000_000_000))
    yield sandbox
    sandbox.kill()


@pytest.mark.guest
def test_a_busy_command_is_stopped_at_its_budget_whatever_its_timeout(budget_sbx: Sandbox) -> None:
    result = budget_sbx.commands.run(LOOP, timeout=0)  # no wall-clock limit at all
    assert result.exit_code == 152  # bash's status for a child past its CPU limit (SIGXCPU)
    assert "2,000,000,000 instructions (Limits.cpu_instructions)" in (result.error or "")
    assert result.cpu_instructions_used is not None and result.cpu_instructions_used >= 2_000_000_000
    # the sandbox goes on, and each command has a budget of its own
    again = budget_sbx.commands.run("python3 -c 'print(sum(range(1000)))'")
    assert again.stdout == "499500\n" and again.exit_code == 0
    assert 0 < (again.cpu_instructions_used or 0) < 2_000_000_000


@pytest.mark.guest
def test_the_use_is_reported_and_grows_with_the_work(budget_sbx: Sandbox) -> None:
    small = budget_sbx.commands.run("python3 -c 'sum(range(10**4))'").cpu_instructions_used
    big = budget_sbx.commands.run("python3 -c 'sum(range(10**6))'").cpu_instructions_used
    assert small and big and big > small + 10**7  # ~tens of instructions per step


@pytest.mark.guest
def test_a_cell_has_its_budget_and_the_context_restarts_after_it(budget_sbx: Sandbox) -> None:
    ok = budget_sbx.run_code("x = sum(range(1000)); x")
    assert ok.text == "499500" and ok.error is None
    assert ok.cpu_instructions_used is not None and ok.cpu_instructions_used > 0
    spent = budget_sbx.run_code("while True:\n    pass", timeout=0)
    assert spent.error is not None and spent.error.name == "CpuLimitExceeded"
    assert "2,000,000,000 instructions" in spent.error.value
    after = budget_sbx.run_code("'x' in globals()")
    assert after.text == "False"  # the context started afresh
    assert any("CPU budget" in line for line in after.logs.stderr)


@pytest.mark.guest
def test_the_metrics_add_up_the_use(budget_sbx: Sandbox) -> None:
    before = budget_sbx.get_metrics()[-1].cpu_instructions_used or 0
    command = budget_sbx.commands.run("python3 -c 'sum(range(10**5))'").cpu_instructions_used or 0
    cell = budget_sbx.run_code("sum(range(10**5))").cpu_instructions_used or 0
    after = budget_sbx.get_metrics()[-1].cpu_instructions_used or 0
    assert command > 0 and cell > 0 and after - before == command + cell


@pytest.mark.served
def test_the_use_reaches_the_caller_on_every_backend(fuel_interpreter: None, make: Any) -> None:
    """A command's instruction count crosses every backend's stream (the pool's and Ray's end
    line once dropped it)."""
    sandbox = make(timeout=300, limits=Limits(cpu_instructions=2_000_000_000))
    try:
        result = sandbox.commands.run("python3 -c 'print(sum(range(1000)))'")
        assert (result.exit_code, result.stdout) == (0, "499500\n")
        assert 0 < (result.cpu_instructions_used or 0) < 2_000_000_000
        handle = sandbox.commands.run("python3 -c 'print(2)'", background=True)
        assert 0 < (handle.wait().cpu_instructions_used or 0) < 2_000_000_000
    finally:
        sandbox.kill()


def test_sandboxes_without_a_cpu_limit_report_no_use(local_sbx: Sandbox) -> None:
    assert local_sbx.commands.run("true").cpu_instructions_used is None
    assert local_sbx.get_metrics()[-1].cpu_instructions_used is None


@pytest.mark.guest
def test_a_parked_guest_runs_its_line_on_the_lines_budget(budget_sbx: Sandbox) -> None:
    testing.park(budget_sbx)  # the park turn's own work is not counted against the line
    hits = testing.parked_hits()
    result = budget_sbx.commands.run("true")
    assert testing.parked_hits() == hits + 1
    assert result.exit_code == 0 and 0 < (result.cpu_instructions_used or 0) < 10**9


@pytest.mark.guest
def test_a_lines_python_jobs_run_on_its_budget(budget_sbx: Sandbox) -> None:
    """Defends the budget against `python3 ... &`, which elsewhere runs in a guest of its own
    (with a budget of its own, a line could run any number of budgets in turn): under a CPU
    limit the host refuses the `spawn` op, and the job's program runs in the line's guest."""
    result = budget_sbx.commands.run(LOOP + " & wait; echo $?", timeout=0)
    assert result.exit_code == 152 and result.stdout == "", result  # the line's budget ran out
    forged = budget_sbx.commands.run(
        "python3 -c \"import _host, msgpack; print(msgpack.unpackb(_host.call(msgpack.packb("
        "{'op': 'spawn', 'args': [], 'cwd': '/', 'env': {}})), raw=False)['error']['message'])\"")
    assert "the sandbox has a CPU limit (Limits.cpu_instructions)" in forged.stdout, forged
    assert not budget_sbx.commands.list()


@pytest.mark.guest
def test_without_the_fuel_build_a_clear_error_names_the_command(tmp_path: Path) -> None:
    """A cache without the fuel build: creating a CPU-limited sandbox fails at once."""
    copy = tmp_path / "cache"
    linked_copy(cache_dir(), copy)
    for path in copy.glob("compiled/python-warmfuel-*"):
        path.unlink()
    code = ("from declaw_wasm import Sandbox, Limits, SandboxException\n"
            "try:\n    Sandbox.create(limits=Limits(cpu_instructions=10**9))\n"
            "except SandboxException as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DECLAW_WASM_CACHE": str(copy), "DECLAW_WASM_WARM_IMAGE": "1"})
    assert "declaw-wasm warmup --fuel" in done.stdout, (done.stdout, done.stderr)


def test_cpu_instructions_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Limits(cpu_instructions=0)


@pytest.mark.guest
def test_the_jpeg_codecs_instructions_are_paid_from_the_budget(budget_sbx: Sandbox) -> None:
    """The host's JPEG codec (declaw_wasm/_media) counts its instructions against the guest's
    budget: a loop of decodes ends at the limit (152) instead of running free on the host, and a
    decode's instructions show in the command's use."""
    import io

    Image = pytest.importorskip("PIL.Image")
    out = io.BytesIO()
    Image.new("RGB", (2000, 1500), (90, 140, 200)).save(out, "JPEG", quality=90)
    budget_sbx.files.write("/tmp/big.jpg", out.getvalue())
    budget_sbx.files.write("/tmp/loop.py", "from PIL import Image\nfor i in range(10000):\n"
                                           "    Image.open('/tmp/big.jpg').load()\n    print(i, flush=True)\n")
    done = budget_sbx.commands.run("python3 /tmp/loop.py", timeout=240)
    assert done.exit_code == 152, (done.exit_code, done.stderr[-1000:])
    loops = len(done.stdout.split())
    assert 0 < loops < 200, loops
    once = budget_sbx.commands.run("python3 -c 'from PIL import Image; Image.open(\"/tmp/big.jpg\").load()'")
    bare = budget_sbx.commands.run("python3 -c 'from PIL import Image; Image.open(\"/tmp/big.jpg\")'")
    assert once.exit_code == 0 and bare.exit_code == 0, once.stderr
    # 3 million samples decoded: tens of millions of the codec's instructions at least
    assert (once.cpu_instructions_used or 0) - (bare.cpu_instructions_used or 0) > 10_000_000
