"""Environment markers are judged for the guest, never for the host: the host's pip resolves a
sandbox's `pip install` with the guest's marker environment (pip_guard.GUEST_MARKERS, what the
guest's CPython reports), so `; sys_platform == "wasi"` installs, and which requirements get
installed says nothing of the host's platform, machine or kernel (attack report 3, finding 6:
a guest read the host's kernel release through `"6." in platform_release` probes)."""

from __future__ import annotations

import contextlib
import json
import platform
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from packaging.markers import Marker

from declaw_wasm import Sandbox
from declaw_wasm._pool.pool import ProcessPool
from declaw_wasm._packages.pip import PIP_GUEST_TARGET, PackageError, guest_requirement, resolve, run_pip
from declaw_wasm._packages.pip_guard import GUEST_MARKERS

from .conftest import serve_index
from wheels import make_wheel


def host_markers() -> dict[str, str]:
    """Markers only the host's environment makes true (what an oracle would probe for)."""
    release = platform.release()
    version = platform.python_version_tuple()
    return {
        "hostplatform": f'sys_platform == "{sys.platform}"',
        "hostsystem": f'platform_system == "{platform.system()}"',
        "hostmachine": f'platform_machine == "{platform.machine()}"',
        "hostrelease": f'platform_release == "{release}"',
        "hostkernel": f'"{release[:2]}" in platform_release',  # the attacker's substring probe
        "hostpython": f'python_version == "{version[0]}.{version[1]}"',
        "notwasi": 'sys_platform != "wasi"',
    }


GUEST_SIDE = {
    "wasi": 'sys_platform == "wasi"',
    "guestsystem": 'platform_system == "wasi"',
    "wasm": 'platform_machine == "wasm32"',
    "guestrelease": 'platform_release == "0.0.0"',
    "guestpython": 'python_version >= "3.15"',
}


def every_marker() -> dict[str, str]:
    return {**host_markers(), **GUEST_SIDE}


def requested() -> dict[str, str]:
    """The markers a guest's requirement may carry (the host takes lower case only: pip.py's
    REQUIREMENT_RE); the others are tried in a dependency's metadata."""
    return {name: marker for name, marker in every_marker().items() if marker == marker.lower()}


def test_the_host_really_differs_from_the_guest() -> None:
    """The property below means something only if the host's own environment makes the host
    markers true (and the guest's false): pip judging for the host would install them."""
    for marker in host_markers().values():
        if marker.startswith("sys_platform !="):
            continue
        assert Marker(marker).evaluate(), marker
        assert not Marker(marker).evaluate(dict(GUEST_MARKERS)), marker


def test_pip_is_told_the_guests_marker_environment_and_nothing_of_the_hosts(tmp_path: Path) -> None:
    """pip's own view of the environment (its --report writes it) is GUEST_MARKERS, with no
    value of the host's release, version or node name."""
    make_wheel(tmp_path / "house", "quietpkg", "1.0")
    report = tmp_path / "r.json"
    status, err = run_pip(["install", "--dry-run", "--ignore-installed", "--report", str(report),
                           *PIP_GUEST_TARGET, "--target", str(tmp_path / "t"), "--no-index",
                           "--find-links", str(tmp_path / "house"), "quietpkg"])
    assert status == 0, err
    environment = json.loads(report.read_text())["environment"]
    assert environment == GUEST_MARKERS
    shown = json.dumps(environment)
    for host_value in (platform.release(), platform.version(), platform.node(), platform.machine()):
        assert host_value not in shown


def test_a_requirement_for_another_environment_does_not_meet_the_sandboxs_packages() -> None:
    """A requirement whose markers are false for the guest is skipped before anything else,
    as pip skips it: not refused for conflicting with what the sandbox has."""
    assert resolve(['msgpack>=999; sys_platform == "linux"'], {"msgpack": "1.1.0"}, no_index=True) == []


def test_a_markers_values_keep_their_case() -> None:
    """An honest requirement's marker may name an upper-case value (`platform_system` is
    "Linux", "Windows"...): written back as the guest wrote it, never refused; the name stays
    canonical and nothing but a requirement gets through."""
    assert guest_requirement('PyWin32>=300; platform_system == "Windows"') == \
        'pywin32>=300; platform_system == "Windows"'
    with pytest.raises(PackageError):
        guest_requirement('x; platform_system == "Linux\n--no-binary :all:"')


@pytest.fixture(scope="module")
def marker_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An index with a package per marker (`mk<name>`), a dependency per marker (`dk<name>`),
    and `mkparent`, which requires every `dk<name>` under its marker."""
    root = tmp_path_factory.mktemp("marker-index")
    every = every_marker()
    dist = [make_wheel(root / "dist", f"{kind}{name}") for name in every for kind in ("mk", "dk")]
    dist.append(make_wheel(root / "dist", "mkparent",
                           requires=tuple(f"dk{name}; {marker}" for name, marker in every.items())))
    with serve_index(root, dist) as url:
        yield url


GUEST_CHECK = """
import importlib.util, json
from packaging.markers import Marker, default_environment
markers = json.load(open("/home/user/markers.json"))
names = ["mkparent", *("mk" + m for m in markers), *("dk" + m for m in markers)]
print(json.dumps({"environment": default_environment(),
                  "judged": {name: Marker(marker).evaluate() for name, marker in markers.items()},
                  "installed": sorted(n for n in names if importlib.util.find_spec(n) is not None)}))
"""


@pytest.mark.guest
@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_requirement_markers_are_judged_for_the_guest_never_the_host(
        mode: str, marker_index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install` in a sandbox, of requirements whose markers name the guest's environment
    or the host's (sys_platform, platform_machine, platform_release and a substring of it,
    python_version), and of a package whose dependencies carry them: what is installed is
    exactly what the guest's own `packaging` says of each marker, and nothing the host's
    environment alone makes true."""
    monkeypatch.setenv("PIP_INDEX_URL", marker_index)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", marker_index)
    monkeypatch.delenv("DECLAW_WASM_OFFLINE", raising=False)
    direct, every = requested(), every_marker()
    # on the process-pool backend, a pool started now (its worker gets the test's index), whose
    # worker runs the host's pip for the sandbox
    pool = ProcessPool(1) if mode == "processes" else None
    backend: dict[str, Any] = {"backend": pool} if pool else {}
    with contextlib.ExitStack() as stack:
        if pool is not None:
            stack.callback(pool.close)
        sbx = stack.enter_context(Sandbox.create(timeout=600, **backend))
        sbx.files.write("/home/user/requirements.txt",
                        "".join(f"mk{name}; {marker}\n" for name, marker in direct.items()) + "mkparent\n")
        sbx.files.write("/home/user/markers.json", json.dumps(every))
        sbx.files.write("/home/user/check.py", GUEST_CHECK)
        r = sbx.commands.run("pip install -r /home/user/requirements.txt", timeout=300)
        assert r.exit_code == 0, r.stderr
        r = sbx.commands.run("python3 /home/user/check.py", timeout=60)
        assert r.exit_code == 0, r.stderr
        seen = json.loads(r.stdout)
    assert seen["environment"] == GUEST_MARKERS  # the guest reports what the host's pip is told
    judged = seen["judged"]
    assert all(judged[name] for name in GUEST_SIDE)
    assert not any(judged[name] for name in host_markers())
    wanted = sorted(["mkparent", *(f"mk{name}" for name in direct if judged[name]),
                     *(f"dk{name}" for name in every if judged[name])])
    assert seen["installed"] == wanted
