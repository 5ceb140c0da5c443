"""Batch evaluation on Ray Data: run a dataset of snippets, or (code, tests) pairs, through
sandboxes — for evals and RL rollouts — with each row's stdout, stderr, exit code and time.

    import ray
    from declaw_wasm.batch import run_batch

    rows = ray.data.from_items([{"code": "print(1 + 1)"}, {"code": "def f(): ...", "tests": "assert f() is None"}])
    for row in run_batch(rows, tests_column="tests", concurrency=4).iter_rows():
        print(row["exit_code"], row["stdout"], row["seconds"])

It is `Dataset.map_batches` with a callable class (`SandboxRunner`): Ray Data starts
`concurrency` actors, each makes one in-process sandbox when it starts and runs its batches'
rows one command at a time, each row in a folder of its own that is removed afterwards (or, with
`fresh=True`, each row in a sandbox of its own: nothing a row leaves behind can reach the next).
The data never leaves Ray Data's own pipeline: no sandbox host actors are involved. The runner
drives its sandbox through the backend contract (requests built here, well-formed), so it sits
beside the other backends rather than above the faces.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from .._local.sandbox import LocalSandbox, LocalSandboxes
from ..exceptions import TimeoutException
from ..limits import Limits
from ..wire import CreateSandbox, RunCommand

LIFETIME = 24 * 3600.0  # an actor's sandbox lives as long as the actor (Ray ends it)


class SandboxRunner:
    """Ray Data callable class: one sandbox per actor, a command per row."""

    def __init__(self, code_column: str = "code", tests_column: Optional[str] = None,
                 timeout: float = 30.0, template: Optional[str] = None,
                 limits: Optional[Limits] = None, fresh: bool = False) -> None:
        self.code_column = code_column
        self.tests_column = tests_column
        self.timeout = timeout
        self.fresh = fresh
        self._request = CreateSandbox(template=template, timeout=LIFETIME, limits=limits)
        self.sandbox: Optional[LocalSandbox] = None if fresh else self._make()
        self.rows = 0

    def _make(self) -> LocalSandbox:
        return LocalSandboxes().create(self._request)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        codes = list(batch[self.code_column])
        tests = list(batch[self.tests_column]) if self.tests_column else [None] * len(codes)
        outcomes = [self.run(str(code), None if t is None else str(t)) for code, t in zip(codes, tests, strict=True)]
        out = dict(batch)
        for name in ("stdout", "stderr", "exit_code", "seconds", "error"):
            out[name] = [o[name] for o in outcomes]
        return out

    def run(self, code: str, tests: Optional[str]) -> dict[str, Any]:
        """One row: its program (code, then tests) as `python3 main.py` in a folder of its own."""
        self.rows += 1
        folder = f"/tmp/rows/{self.rows}"
        sandbox = self._make() if self.fresh else self.sandbox
        assert sandbox is not None
        start = time.perf_counter()
        try:
            sandbox.write(f"{folder}/main.py", code + ("\n\n" + tests + "\n" if tests else "\n"))
            result = sandbox.start(RunCommand(cmd="python3 main.py", cwd=folder, timeout=self.timeout)).result()
            outcome = {"stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code,
                       "error": result.error}
        except TimeoutException as exc:
            outcome = {"stdout": exc.stdout, "stderr": exc.stderr, "exit_code": -1,
                       "error": f"timed out after {self.timeout:g} s"}
        finally:
            seconds = time.perf_counter() - start
            if self.fresh:
                sandbox.kill()
            else:
                sandbox.remove(folder)
        return {**outcome, "seconds": seconds}

    def __del__(self) -> None:
        if self.sandbox is not None:
            try:
                self.sandbox.kill()
            except Exception:  # the actor is going away anyway
                pass


def run_batch(dataset: Any, code_column: str = "code", tests_column: Optional[str] = None,
              concurrency: int = 2, batch_size: int = 16, timeout: float = 30.0,
              template: Optional[str] = None, limits: Optional[Limits] = None, fresh: bool = False,
              num_cpus: float = 1.0) -> Any:
    """`dataset` (a `ray.data.Dataset` with a `code_column`, and a `tests_column` if given) with
    each row run in a sandbox: columns `stdout`, `stderr`, `exit_code` (-1: timed out),
    `seconds` and `error` are added. Lazy, as Ray Data is: consume it (`iter_rows`,
    `take_all`, `write_parquet`...)."""
    return dataset.map_batches(
        SandboxRunner, concurrency=concurrency, batch_size=batch_size, num_cpus=num_cpus,
        fn_constructor_kwargs={"code_column": code_column, "tests_column": tests_column,
                               "timeout": timeout, "template": template, "limits": limits,
                               "fresh": fresh})
