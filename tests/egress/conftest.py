"""Egress tests: real guests, real host-side egress, upstream servers on loopback only.

No test here ever sends a packet off this machine, by two fences:

1. A network namespace with only loopback: before any test of this folder runs, the test
   process's main thread moves into a new network namespace (`unshare(CLONE_NEWNET)`, then `lo`
   up), and every thread made after that (guests, their DNS lookups, the upstream servers)
   inherits it; the main thread moves back when the folder is done, so the rest of the suite
   (pip against the index, say) keeps the real network. Plain `python3 -m pytest -q` does this;
   it needs CAP_SYS_ADMIN (root, as on the development and CI machines). Where it is not
   available (not root, not Linux), the tests still run, with fence 2 only, and say so once.
2. `DECLAW_WASM_EGRESS_LOOPBACK_ONLY=1`: the host refuses every real DNS query and every
   connection to a non-loopback address, whatever the policy says. A policy bug then shows as a
   refusal with the hook's message, which the tests tell apart from the policy's own.

Public names (api.openai.com, evil.com...) are mapped to the local servers with
DECLAW_WASM_RESOLVE; the servers' certificates come from a CA made here (DECLAW_WASM_CA_BUNDLE).
Names with fixed DNS answers (DECLAW_WASM_DNS_ANSWERS, judged like real answers): every IPv6
form of addresses.py's table, as `<case>.forms.example`.

Tests that take `mode` run on the process-pool backend too (`mode="processes"`): a pool of two
workers started inside the namespace, with the environment above (the session-wide test pool
may predate the switch, so it is not used here).

Egress tests make their own sandboxes: a guest started before the namespace switch (a shared
session sandbox's code context) would still be outside it. For the same reason no guest is
parked and no standby sandbox is made here (DECLAW_WASM_PARKED=0, DECLAW_WASM_STANDBY=0): both
start their guests from threads made before the switch (the lifetime timer's, the standby
maker's), outside the namespace. tests/test_parking.py checks that a parked guest's network
goes through its sandbox's door.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from declaw_wasm import Sandbox

from . import addresses
from . import upstream as upstream_module

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
NAMES = ["api.openai.com", "api.anthropic.com", "example.com", "sub.example.com",
         "deep.sub.example.com", "other.example.com", "postman-echo.com", "pypi.org",
         "files.pythonhosted.org", "evil.com", "attacker.example.com", "data.example.org"]


def _enter_loopback_namespace() -> tuple[int, str]:
    """Move this thread into a new network namespace with `lo` up; (fd of the old one, "") or
    (-1, why not)."""
    if not sys.platform.startswith("linux"):
        return -1, "not Linux"
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        old = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    except OSError as exc:
        return -1, f"cannot open /proc/thread-self/ns/net: {exc}"
    if libc.unshare(CLONE_NEWNET) != 0:
        os.close(old)
        return -1, f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())} (needs root)"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sh22x", b"lo", 0))[:18])[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))
    return old, ""


def _interfaces() -> list[str]:
    lines = Path("/proc/thread-self/net/dev").read_text().splitlines()[2:]
    return [line.split(":", 1)[0].strip() for line in lines]


def _ready_offline() -> None:
    """Whatever the first sandbox fetches or builds (runtime artifacts, the guest site, the
    packages bundle, the ai-agent template's packages; both guest paths) is made before the
    namespace is entered: a fresh machine runs this folder first, and would otherwise try to
    download them with no network."""
    from declaw_wasm._packages.bundle import ensure_agent_site
    from declaw_wasm._wasm.warm_image import get_interpreter

    before = os.environ.get("DECLAW_WASM_WARM_IMAGE")
    ensure_agent_site(get_interpreter())
    try:
        for snapshot in ("1", "0"):
            os.environ["DECLAW_WASM_WARM_IMAGE"] = snapshot
            Sandbox.create(timeout=120).kill()
    finally:
        if before is None:
            os.environ.pop("DECLAW_WASM_WARM_IMAGE", None)
        else:
            os.environ["DECLAW_WASM_WARM_IMAGE"] = before


@pytest.fixture(scope="package", autouse=True)
def loopback_only_network(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[bool]:
    """Fences 1 and 2 (module docstring) for the whole folder; True inside a namespace."""
    background = {k: os.environ.get(k) for k in ("DECLAW_WASM_PARKED", "DECLAW_WASM_STANDBY")}
    os.environ.update({k: "0" for k in background})
    if any(item.get_closest_marker("guest") for item in request.session.items):
        _ready_offline()  # (a run of pure tests only starts no guest)
    old, why = _enter_loopback_namespace()
    in_namespace = old >= 0
    if in_namespace:
        assert _interfaces() == ["lo"], _interfaces()
    else:
        warnings.warn(f"egress tests run without a network namespace ({why}); only the "
                      "DECLAW_WASM_EGRESS_LOOPBACK_ONLY fence applies", stacklevel=1)
    saved = {k: os.environ.get(k) for k in ("DECLAW_WASM_EGRESS_LOOPBACK_ONLY", "DECLAW_WASM_RESOLVE",
                                            "DECLAW_WASM_CA_BUNDLE", "DECLAW_WASM_OFFLINE",
                                            "DECLAW_WASM_DNS_ANSWERS")}
    saved.update(background)
    os.environ["DECLAW_WASM_EGRESS_LOOPBACK_ONLY"] = "1"
    try:
        yield in_namespace
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if in_namespace:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(old, CLONE_NEWNET) != 0:
                raise RuntimeError(f"setns back failed: {os.strerror(ctypes.get_errno())}")
            os.close(old)


@pytest.fixture(scope="package")
def upstreams(loopback_only_network: bool,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[upstream_module.Upstreams]:
    servers = upstream_module.start(NAMES, tmp_path_factory.mktemp("egress-ca"))
    os.environ["DECLAW_WASM_RESOLVE"] = servers.resolve_env()
    os.environ["DECLAW_WASM_CA_BUNDLE"] = str(servers.ca_path)
    os.environ["DECLAW_WASM_DNS_ANSWERS"] = addresses.dns_answers()
    yield servers
    servers.stop()


@pytest.fixture
def up(upstreams: upstream_module.Upstreams) -> upstream_module.Upstreams:
    """The upstreams, with this test's records only."""
    upstreams.clear()
    return upstreams


@pytest.fixture(scope="package")
def egress_pool(upstreams: upstream_module.Upstreams) -> Iterator[Any]:
    """A process pool whose workers start inside the namespace, with this folder's environment."""
    from declaw_wasm._pool.pool import ProcessPool

    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    pool = ProcessPool(2)
    yield pool
    pool.close()


@pytest.fixture
def make(upstreams: upstream_module.Upstreams, mode: str,
         request: pytest.FixtureRequest) -> Iterator[Callable[..., Sandbox]]:
    """`make(**create)`: a sandbox of the test's own (killed after it), on the test's backend
    (`mode`: "in-process", or "processes" for the pool above)."""
    made: list[Sandbox] = []
    if mode not in ("in-process", "processes"):
        raise ValueError(f"egress tests run in-process or in a process pool, not {mode!r}")
    where = {"backend": request.getfixturevalue("egress_pool")} if mode == "processes" else {}

    def create(**kwargs: Any) -> Sandbox:
        sandbox = Sandbox.create(timeout=600, **where, **kwargs)
        made.append(sandbox)
        return sandbox

    yield create
    for sandbox in made:
        sandbox.kill()


def run(sbx: Sandbox, code: str, timeout: float = 120) -> str:
    """Run `code` with python3 in the sandbox; its stdout (fails the test on a non-zero exit)."""
    sbx.files.write("/tmp/egress_test.py", code)
    result = sbx.commands.run("python3 /tmp/egress_test.py", timeout=timeout)
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def outcome(sbx: Sandbox, code: str, timeout: float = 120) -> Any:
    """Run `code`, which prints one JSON value (mostly an object) last; that value."""
    import json

    out = run(sbx, code, timeout)
    return json.loads(out.strip().splitlines()[-1])


# Guest-side helper: `attempt(fn)` -> {"ok", "value"} or {"ok": False, "type", "msg", "oserror"}.
PROBE = """
import json, socket, ssl, errno
def attempt(fn):
    try:
        value = fn()
        plain = isinstance(value, (str, int, float, list, dict, type(None)))
        return {"ok": True, "value": value if plain else repr(value)}
    except BaseException as exc:
        return {"ok": False, "type": type(exc).__name__, "msg": str(exc),
                "oserror": isinstance(exc, OSError)}
def connect(host, port, timeout=10):
    s = socket.create_connection((host, port), timeout=timeout)
    s.close()
    return "connected"
def connect_addr(host, port, timeout=10):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host, port))
    finally:
        s.close()
    return "connected"
def get(url, **kw):
    import urllib.request
    with urllib.request.urlopen(url, timeout=kw.pop("timeout", 20), **kw) as r:
        return [r.status, r.read().decode("utf-8", "replace")]
"""
