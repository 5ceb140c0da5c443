"""The hostile-input corpus runs once, on the default (warm image) path: the cold path runs
the same host code and the same guest code, a second slower per case.

`box` is one sandbox per test module (and backend), for cases that cannot damage it;
destructive cases take `fresh`, a sandbox of their own.

**On every backend.** The cases whose data crosses a channel — door frames and traps (handled in
the process hosting the guest), outputs, files, bombs, kill during everything (`ON_EVERY_BACKEND`)
— run in this process, in a process pool's worker (`processes`), on a Ray cluster's host actor
(`ray`, when Ray is installed) and through `declaw-wasm serve` (`served`): `box`, `fresh` and
`make` follow the test's `mode`, `assert_host_fine` makes its new sandbox there, and `PeakRSS()`
measures every process that hosts sandboxes for this one (this process, the pool's workers, the
Ray hosts: support.py). The other cases test this process's own host code and run here only.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest
from conftest import POOL, RAY  # tests/ is on sys.path

from declaw_wasm import testing
from declaw_wasm import Sandbox, SandboxException

from . import support

BACKENDS = ["in-process", "processes", "served"] + (["ray"] if RAY else [])
ON_EVERY_BACKEND = frozenset({
    # door frames and guest traps: handled in the process that hosts the guest
    "test_door_garbage_frames", "test_door_huge_frames", "test_threads_are_refused_and_aborts_end_only_the_guest",
    # outputs: every byte crosses the channel
    "test_invalid_utf8_in_output", "test_output_bomb_is_capped_at_the_output_limit",
    "test_endless_output_flood_is_capped_and_stopped", "test_tiny_and_huge_writes_cost_the_host_the_output_limit",
    "test_a_cells_logs_and_results_share_the_output_limit", "test_a_cells_results_cost_the_host_what_they_hold",
    "test_a_cells_tiny_writes_cost_the_host_the_output_limit_however_slowly_they_are_read",
    # files and bombs
    "test_huge_files_through_the_files_api", "test_memory_bomb_in_run_code", "test_cpu_bomb_is_stopped_by_its_timeout",
    "test_zip_bombs_in_the_shell",
    # kill during everything
    "test_kill_while_everything_runs", "test_every_call_on_a_killed_sandbox_raises_promptly",
})


# Backends a case skips. 200 MB of files: through `serve`, over the test server's upload limit
# (8 MiB; reads through serve are in test_quota_exports.py); on Ray, 64 KiB chunks take ~14 s and
# Ray's own buffers (~150 MB, the same for 600 MB) swamp the measure (its chunking is
# tests/test_ray.py's).
SKIPS = {"test_huge_files_through_the_files_api": {"served", "ray"}}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    name = metafunc.function.__name__
    if name in ON_EVERY_BACKEND and "mode" in metafunc.fixturenames:
        metafunc.parametrize("mode", [b for b in BACKENDS if b not in SKIPS.get(name, ())], indirect=True)


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"


def _host_pids(mode: str) -> Callable[[], list[int]]:
    """The processes other than this one that host the backend's sandboxes."""
    if mode == "processes":
        from declaw_wasm._pool.pool import pool_for

        pool = pool_for(int(POOL.split(":")[1]))

        def workers() -> list[int]:  # those hosting a sandbox (a spare one's work is not the case's)
            return [w.pid for w in pool.workers if w.dead is None and w.sandboxes]
        return workers
    if mode == "ray":
        from declaw_wasm._ray.sandboxes import ray_sandboxes

        def actors() -> list[int]:
            pids = []
            for link in ray_sandboxes()._own():
                try:
                    pids.append(int(link.answer(link.handle.ready.remote(), 30, "ready")["pid"]))
                except SandboxException:
                    continue
            return pids
        found = actors()

        def hosts() -> list[int]:
            return found
        return hosts
    return support.no_hosts


@pytest.fixture(autouse=True)
def _on_backend(request: pytest.FixtureRequest, mode: str) -> Iterator[None]:
    """For a case on every backend, where support.py's new sandboxes go and whose memory
    `PeakRSS()` measures."""
    if getattr(request.node, "originalname", "") not in ON_EVERY_BACKEND or mode == "in-process":
        yield
        return
    where: Callable[[str], dict[str, Any]] = request.getfixturevalue("where")
    support.BACKEND.update(where(mode))
    support.HOSTS = _host_pids(mode)
    try:
        yield
    finally:
        support.BACKEND.clear()
        support.HOSTS = support.no_hosts


@pytest.fixture(scope="module")
def _boxes() -> Iterator[dict[str, Sandbox]]:
    made: dict[str, Sandbox] = {}
    yield made
    for sandbox in made.values():
        try:
            sandbox.kill()
        except SandboxException:
            pass


@pytest.fixture
def box(mode: str, _boxes: dict[str, Sandbox], where: Callable[[str], dict[str, Any]]) -> Sandbox:
    """A sandbox shared by one module's cases (on the test's backend) that only add files under
    their own names."""
    if mode not in _boxes or not _boxes[mode].is_running():
        with pytest.MonkeyPatch.context() as env:
            env.setenv("DECLAW_WASM_WARM_IMAGE", "1")
            _boxes[mode] = Sandbox.create(timeout=900, **where(mode))
        if mode == "in-process":
            assert testing.is_warm(_boxes[mode])
    return _boxes[mode]


@pytest.fixture
def fresh(mode: str, where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    """A sandbox of the test's own (on the test's backend), for cases that change or end it."""
    sandbox = Sandbox.create(timeout=600, **where(mode))
    yield sandbox
    try:
        sandbox.kill()
    except SandboxException:
        pass
