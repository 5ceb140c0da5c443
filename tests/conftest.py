"""Fixtures: the real runtime, real sandboxes. One shared sandbox where isolation allows.

Two tiers. A test that starts a guest is a `guest` test: marked `guest` by hand, or found to be
one because it uses a fixture that makes sandboxes (`GUEST_FIXTURES`). It runs on both guest
paths: "warm" (the warm image, the default) and "cold" (the plain module,
DECLAW_WASM_WARM_IMAGE=0), which must behave the same, unless its folder's conftest pins the path.
Every other test is pure host code: it runs once and needs no runtime, so `pytest -m "not guest"`
runs without a warmup. A test not marked `guest` that starts a guest fails, saying so, so the
marker stays true. A pure test that takes seconds (hundreds of property examples, a bound measured
on large inputs, the host's real pip) is marked `heavy`: it runs in the second tier, beside the
guest tests (`-m guest` selects it, `-m "not guest"` leaves it out), so the fast tier stays under a
minute; it still needs no runtime and runs once. Tests marked `served` also run through
`declaw-wasm serve`, in a process pool and on a Ray cluster (see "backends" below).
"""

from __future__ import annotations

import atexit
import importlib.util
import inspect
import itertools
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import pytest

if not os.environ.get("DECLAW_WASM_STATE"):  # snapshots, pauses and volumes of a test run stay
    _STATE = tempfile.mkdtemp(prefix="declaw-wasm-test-state-")  # out of the user's state folder
    os.environ["DECLAW_WASM_STATE"] = _STATE
    atexit.register(shutil.rmtree, _STATE, True)
if not os.environ.get("DECLAW_WASM_STATE_KEY") and not os.environ.get("DECLAW_WASM_STATE_KEY_FILE"):
    _KEYS = tempfile.mkdtemp(prefix="declaw-wasm-test-key-")  # the state key of a test run stays out of
    os.environ["DECLAW_WASM_STATE_KEY_FILE"] = os.path.join(_KEYS, "state.key")  # the user's config folder
    atexit.register(shutil.rmtree, _KEYS, True)

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox  # noqa: E402


# -- tiers: which tests start guests -------------------------------------------------------------
GUEST_PATHS = ["warm", "cold"]
# Fixtures that make sandboxes (or clusters of them): a test using one starts guests.
GUEST_FIXTURES = frozenset({"local_sbx", "fresh", "sbx", "make", "make_served", "served_sbx", "pool_sbx",
                            "ray_sbx", "ray_cluster", "box"})


def is_guest_test(item: Any) -> bool:
    """A test that starts guests: marked `guest`, asking for `guest_path` itself, or using a
    fixture that makes sandboxes."""
    if item.get_closest_marker("guest") is not None:
        return True
    function = getattr(item, "function", None)
    if function is not None and "guest_path" in inspect.signature(function).parameters:
        return True
    return not GUEST_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


@pytest.fixture(scope="session")
def guest_path(request: pytest.FixtureRequest) -> str:
    """The test's guest path: parametrised (warm, cold) for guest tests by
    `pytest_generate_tests`; "warm" for the rest. Folders that run one path override this."""
    return str(getattr(request, "param", "warm"))


@pytest.fixture(autouse=True)
def _on_guest_path(request: pytest.FixtureRequest, guest_path: str) -> Iterator[None]:
    """Sandboxes created during a guest test use the test's guest path."""
    if not is_guest_test(request.node):
        yield
        return
    before = os.environ.get("DECLAW_WASM_WARM_IMAGE")
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1" if guest_path == "warm" else "0"
    yield
    if before is None:
        os.environ.pop("DECLAW_WASM_WARM_IMAGE", None)
    else:
        os.environ["DECLAW_WASM_WARM_IMAGE"] = before


class GuestInPureTest(RuntimeError):
    pass


class _PureRun:
    """A run of pure tests only (`-m "not guest"`) proves they need no runtime: it gets an empty
    cache with no way to fetch the runtime (in worker processes too), and starting a guest in this
    process fails naming the test that should be marked `guest`."""

    current = "this test"

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        if any(is_guest_test(item) for item in items):
            return
        empty = tempfile.mkdtemp(prefix="declaw-wasm-test-nocache-")
        atexit.register(shutil.rmtree, empty, True)
        os.environ["DECLAW_WASM_CACHE"] = empty
        os.environ["DECLAW_WASM_WHEEL"] = os.path.join(empty, "no-runtime-in-the-fast-tier.whl")
        from declaw_wasm._wasm import artifacts, engine, guest, warm_image

        def refused(*args: Any, **kwargs: Any) -> Any:
            raise GuestInPureTest(f"{self.current} starts a guest (or loads the runtime) but is not a guest "
                                  "test: mark it `@pytest.mark.guest` (tests/conftest.py)")

        module: Any
        for module in (artifacts, engine, warm_image):
            module.ensure_artifacts = refused
        guest.Guest.__init__ = refused  # type: ignore[method-assign]  # on purpose: no guest in this tier

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.current = nodeid


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_PureRun(), "declaw-pure-run")


# -- the door fuzzer's hypothesis profiles (tests/fuzz/support.py applies them to its tests only) --
def _register_fuzz_profiles() -> None:
    """`ci` (the default for tests/fuzz/): fixed examples, no deadline, reproducible, under 3
    minutes for the folder; `nightly`: ten times the examples, random seeds. Picked with
    HYPOTHESIS_PROFILE=nightly or `--hypothesis-profile nightly` (registered here, before
    hypothesis's plugin reads that option)."""
    from hypothesis import HealthCheck, settings

    quiet = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
             HealthCheck.function_scoped_fixture, HealthCheck.large_base_example]
    settings.register_profile("ci", max_examples=300, deadline=None, derandomize=True, database=None,
                              suppress_health_check=quiet, print_blob=True)
    settings.register_profile("nightly", max_examples=3000, deadline=None, suppress_health_check=quiet,
                              print_blob=True)
    # every other property test: hypothesis's defaults, but the machine's load is no failure (a
    # shared 2-core machine once took 31 s over one draw)
    settings.register_profile("declaw-wasm", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    if os.environ.get("HYPOTHESIS_PROFILE") is None:
        settings.load_profile("declaw-wasm")


_register_fuzz_profiles()


@pytest.fixture
def no_background_guests(monkeypatch: pytest.MonkeyPatch) -> None:
    """For cases that measure this process's RSS: no guest is parked and no standby sandbox is
    made meanwhile. Each such guest maps pages of the warm image's memory (counted in RSS,
    though shared with the page cache) and is bounded on its own (DECLAW_WASM_PARKED; see
    tests/test_parking.py); it is not the measured work's."""
    monkeypatch.setenv("DECLAW_WASM_PARKED", "0")
    monkeypatch.setenv("DECLAW_WASM_STANDBY", "0")


@pytest.fixture(scope="session")
def local_sbx(guest_path: str) -> Iterator[Sandbox]:
    """A sandbox shared by tests that only add files under their own names."""
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1" if guest_path == "warm" else "0"
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
    if is_guest_test(metafunc.definition):
        # both paths, where this file's `guest_path` is the one in effect (folders and modules
        # that pin one path override the fixture)
        defs = metafunc._arg2fixturedefs.get("guest_path", ())
        if defs and defs[-1].baseid == _root_baseid(metafunc.config):
            metafunc.parametrize("guest_path", GUEST_PATHS, indirect=True, scope="session")


_GUEST_MODULE = re.compile(r"^pytestmark = \[?(?:pytest\.mark\.\w+, )*pytest\.mark\.guest\b", re.MULTILINE)
_MARK_NAME = re.compile(r"\b(?!and\b|or\b|not\b)[A-Za-z_]\w*")


def _selects_no_guest_test(markexpr: str) -> bool:
    """Whether `-m markexpr` is false for every test marked `guest`, whatever other markers it has
    (each assignment of the markers the expression names, with `guest` set, is tried)."""
    from _pytest.mark.expression import Expression  # what pytest itself evaluates `-m` with

    names = sorted(set(_MARK_NAME.findall(markexpr)) - {"guest"})
    if not markexpr or "(" in markexpr or len(names) > 8:  # marker arguments: not judged here
        return False
    expression = Expression.compile(markexpr)
    for bits in itertools.product((False, True), repeat=len(names)):
        present = frozenset({"guest", *(name for name, bit in zip(names, bits, strict=True) if bit)})
        # pytest's matcher takes marker arguments too: expressions with some are not judged (above)
        if expression.evaluate(present.__contains__):  # type: ignore[arg-type]
            return False
    return True


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> Optional[bool]:
    """A module that declares every test of it a guest test (`pytestmark = pytest.mark.guest`) is
    not even imported when `-m` selects no guest test: the fast tier then imports neither Ray nor
    the agent frameworks those modules need."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if not _selects_no_guest_test(str(config.option.markexpr or "")):
        return None
    try:
        source = collection_path.read_text(encoding="utf-8")
    except OSError:
        return None
    return True if _GUEST_MODULE.search(source) else None


def _root_baseid(config: pytest.Config) -> str:
    """The node id prefix of this conftest's folder (what its fixtures' `baseid` is)."""
    return Path(__file__).parent.relative_to(config.rootpath).as_posix()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Guest tests carry the `guest` marker (`-m "not guest"` is the fast tier); runs on other
    backends on the cold path are deselected (see above)."""
    for item in items:
        if is_guest_test(item) and item.get_closest_marker("guest") is None:
            item.add_marker(pytest.mark.guest)
        elif item.get_closest_marker("heavy") is not None and item.get_closest_marker("guest") is None:
            item.add_marker(pytest.mark.guest)  # the second tier's (see the module's docstring)
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        cold_elsewhere = params.get("mode", "in-process") != "in-process" and params.get("guest_path") == "cold"
        (drop if cold_elsewhere else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    # tests that trace allocations leave tracemalloc on (tests/tracing.py says why): last; the Ray
    # backend's just before them, so that a worker that takes them takes nothing but traced ones after
    items.sort(key=_place)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(worker_group(item)))


def _on_ray(item: pytest.Item) -> bool:
    """A test on the Ray backend, or one starting a Ray of its own (all of tests/test_ray.py)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return ("ray" in params.values() or not {"ray_cluster", "ray_sbx"}.isdisjoint(getattr(item, "fixturenames", ()))
            or item.path.name == "test_ray.py")


def _on_wheel_cache(item: pytest.Item) -> bool:
    """A test of tests/packages/: they fill, corrupt and compare the one wheel cache."""
    return item.nodeid.startswith("tests/packages/")


def _place(item: pytest.Item) -> int:
    traced = item.get_closest_marker("traces_memory") is not None
    if _on_ray(item):
        return 3 if traced else 2
    return 4 if traced else 0 if _on_wheel_cache(item) else 1


def worker_group(item: pytest.Item) -> str:
    """Which tests share a worker process when the guest tier runs in several (`-n 2 --dist
    loadgroup`, pytest-xdist: the guest tier alone keeps about one of two cores busy, much of it
    waiting on guests, servers and timeouts). A module's tests stay together, in order, with its
    module fixtures; every test on the Ray backend runs in one worker, so that the machine holds
    one Ray cluster; the tests of the wheel cache (tests/packages/) run one at a time, first, so
    that none fills or corrupts it while another compares it; the tests that trace allocations
    (tracemalloc then stays on in their process) come last, a group for each test function (or
    at the end of Ray's; the wheel cache's one group), so that both workers share them once
    nothing else is left."""
    if _on_ray(item):
        return "ray"
    traced = item.get_closest_marker("traces_memory") is not None
    if _on_wheel_cache(item):
        return "traces_memory packages" if traced else "packages"
    if traced:  # a group a test: the workers share them
        return "traces_memory " + item.nodeid.split("[", 1)[0]
    return item.nodeid.split("::", 1)[0]


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
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
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

    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    ray_sandboxes(None, hosts=2)  # the backend `backend="ray"` names from now on
    yield cluster
    ray.shutdown()
    cluster.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A real headless browser: Debian's `chromium` (`apt-get install chromium`), driven by
    Playwright (the `test` extra) pointed at that binary, so no browser is downloaded. Skips,
    saying why, where either is missing. Tests open their own pages (`browser.new_page()`).
    One per test module: Playwright's sync API runs an event loop on this thread while it is
    started, so it is stopped before other modules' tests (`asyncio.run` refuses to run then)."""
    playwright = pytest.importorskip("playwright.sync_api", reason="no Playwright (the `test` extra)")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    with playwright.sync_playwright() as p:
        chrome = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        yield chrome
        chrome.close()


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
            os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
        return Sandbox.create(**where(mode), **arguments)
    return create


@pytest.fixture(scope="session")
def pool_sbx(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    sandbox = Sandbox.create(timeout=3600, **where("processes"))
    yield sandbox
    sandbox.kill()


@pytest.fixture(scope="session")
def ray_sbx(where: Callable[[str], dict[str, Any]]) -> Iterator[Sandbox]:
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
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
