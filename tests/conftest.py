"""Fixtures: the real runtime, real sandboxes. One shared sandbox where isolation allows.

Every test runs on both guest paths: "warm" (the snapshot, the default) and "cold" (the plain
module, DECLAW_WASM_SNAPSHOT=0), which must behave the same. Tests marked `served` also run
through `declaw-wasm serve` (see "served mode" below).
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

import pytest

from declaw_wasm import testing
from declaw_wasm import Sandbox


@pytest.fixture(scope="session", params=["warm", "cold"])
def guest_path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _on_guest_path(guest_path: str) -> Iterator[None]:
    """Sandboxes created during the test use the test's guest path."""
    before = os.environ.get("DECLAW_WASM_SNAPSHOT")
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1" if guest_path == "warm" else "0"
    yield
    if before is None:
        os.environ.pop("DECLAW_WASM_SNAPSHOT", None)
    else:
        os.environ["DECLAW_WASM_SNAPSHOT"] = before


@pytest.fixture(scope="session")
def local_sbx(guest_path: str) -> Iterator[Sandbox]:
    """A sandbox shared by tests that only add files under their own names."""
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1" if guest_path == "warm" else "0"
    sandbox = Sandbox.create(timeout=3600)
    assert testing.is_warm(sandbox) == (guest_path == "warm")
    yield sandbox
    sandbox.kill()


# -- served mode: the same tests through `declaw-wasm serve` and the remote SDK ------------------
# A test (or module, via `pytestmark`) marked `served` runs twice: on an in-process sandbox and on
# one made through a server running in this process. Served runs use the warm path only: the
# server and the wire are the same host code on both paths.
MODES = ["in-process", "served"]
API_KEY = "test-key-" + os.urandom(8).hex()
UPLOAD_LIMIT = 8 << 20  # the test server's upload limit (tests/test_server.py goes past it)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mode" in metafunc.fixturenames and metafunc.definition.get_closest_marker("served"):
        metafunc.parametrize("mode", MODES, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Served runs on the cold path are deselected (see above)."""
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        cold_served = params.get("mode") == "served" and params.get("guest_path") == "cold"
        (drop if cold_served else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture
def mode(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "in-process"))


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """`declaw-wasm serve` in a thread of this process, on a free loopback port, with a key."""
    from declaw_wasm.server import serve_in_thread

    with serve_in_thread(API_KEY, max_upload=UPLOAD_LIMIT) as url:
        yield url


def served(server_url: str, **create: object) -> Sandbox:
    """A sandbox made through the server (remote mode)."""
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1"
    return Sandbox.create(domain=server_url, api_key=API_KEY, **create)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def make_served(server_url: str) -> Callable[..., Sandbox]:
    """Make a sandbox through the server: `make_served(timeout=..., envs=...)`."""
    return lambda **create: served(server_url, **create)


@pytest.fixture(scope="session")
def served_sbx(server_url: str) -> Iterator[Sandbox]:
    sandbox = served(server_url, timeout=3600)
    yield sandbox
    sandbox.kill()


@pytest.fixture
def sbx(mode: str, request: pytest.FixtureRequest) -> Sandbox:
    """The shared sandbox: in-process, or (for tests marked `served`) through the server too."""
    return request.getfixturevalue("served_sbx" if mode == "served" else "local_sbx")


@pytest.fixture
def fresh() -> Iterator[Sandbox]:
    """A sandbox of the test's own, for tests that change or end the sandbox."""
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()
