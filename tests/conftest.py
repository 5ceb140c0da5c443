"""Fixtures: the real runtime, real sandboxes. One shared sandbox where isolation allows.

Every test runs on both guest paths: "warm" (the snapshot, the default) and "cold" (the plain
module, DECLAW_WASM_SNAPSHOT=0), which must behave the same. Tests marked `served` also run
through `declaw-wasm serve`, in a process pool and on a Ray cluster (see "backends" below).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import tempfile
from typing import Any, Callable, Iterator

import pytest

if not os.environ.get("DECLAW_WASM_STATE"):  # snapshots, pauses and volumes of a test run stay
    _STATE = tempfile.mkdtemp(prefix="declaw-wasm-test-state-")  # out of the user's state folder
    os.environ["DECLAW_WASM_STATE"] = _STATE
    atexit.register(shutil.rmtree, _STATE, True)

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox  # noqa: E402


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


# -- backends: the same tests through `declaw-wasm serve`, a process pool and Ray --------------
# A test (or module, via `pytestmark`) marked `served` runs on every backend: in-process, through
# a server running in this process (remote mode), in a pool of two worker processes, and on a
# two-node Ray cluster started here (when Ray is installed: `pip install -e '.[test,ray]'`).
# Those runs use the warm path only: the server, the pool and Ray are the same host code on both.
RAY = importlib.util.find_spec("ray") is not None
MODES = ["in-process", "served", "processes"] + (["ray"] if RAY else [])
POOL = "processes:2"
API_KEY = "test-key-" + os.urandom(8).hex()
UPLOAD_LIMIT = 8 << 20  # the test server's upload limit (tests/test_server.py goes past it)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mode" in metafunc.fixturenames and metafunc.definition.get_closest_marker("served"):
        metafunc.parametrize("mode", MODES, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs on other backends on the cold path are deselected (see above)."""
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        cold_elsewhere = params.get("mode", "in-process") != "in-process" and params.get("guest_path") == "cold"
        (drop if cold_elsewhere else keep).append(item)
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


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A two-node Ray cluster on this machine (`ray.cluster_utils.Cluster`), two logical CPUs a
    node, with one sandbox host (actor) per node; this process is its driver. Every Ray address
    stays on loopback (Ray's switch for single-machine clusters)."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from declaw_wasm._ray.sandboxes import keep_wasm_traps, ray_sandboxes

    keep_wasm_traps()  # guests trap in this process too (docs/scale.md)

    os.environ["DECLAW_WASM_SNAPSHOT"] = "1"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    ray_sandboxes(None, hosts=2)  # the backend `backend="ray"` names from now on
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="session")
def where(request: pytest.FixtureRequest) -> Callable[[str], dict[str, Any]]:
    """The keyword arguments that put a sandbox (or a by-id call) on a mode's backend."""
    def arguments(mode: str) -> dict[str, Any]:
        if mode == "served":
            return {"domain": request.getfixturevalue("server_url"), "api_key": API_KEY}
        if mode == "processes":
            return {"backend": POOL}
        if mode == "ray":
            request.getfixturevalue("ray_cluster")
            return {"backend": "ray"}
        return {}
    return arguments


@pytest.fixture
def make(mode: str, where: Callable[[str], dict[str, Any]]) -> Callable[..., Sandbox]:
    """Make a sandbox on the test's backend: `make(timeout=..., envs=...)`."""
    def create(**arguments: Any) -> Sandbox:
        if mode != "in-process":
            os.environ["DECLAW_WASM_SNAPSHOT"] = "1"
        return Sandbox.create(**where(mode), **arguments)
    return create


@pytest.fixture(scope="session")
def pool_sbx(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1"
    sandbox = Sandbox.create(timeout=3600, **where("processes"))
    yield sandbox
    sandbox.kill()


@pytest.fixture(scope="session")
def ray_sbx(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    os.environ["DECLAW_WASM_SNAPSHOT"] = "1"
    sandbox = Sandbox.create(timeout=3600, **where("ray"))
    yield sandbox
    sandbox.kill()


SHARED = {"in-process": "local_sbx", "served": "served_sbx", "processes": "pool_sbx", "ray": "ray_sbx"}


@pytest.fixture
def sbx(mode: str, request: pytest.FixtureRequest) -> Sandbox:
    """The shared sandbox: in-process, or (for tests marked `served`) on every backend."""
    return request.getfixturevalue(SHARED[mode])


@pytest.fixture
def fresh() -> Iterator[Sandbox]:
    """A sandbox of the test's own, for tests that change or end the sandbox."""
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()
