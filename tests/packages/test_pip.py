"""`pip` inside a sandbox: the host resolves and fetches, the sandbox keeps what was installed.

Offline cases use wheels made on the spot (a wheelhouse inside the sandbox, or the host's
DECLAW_WASM_WHEELHOUSE with DECLAW_WASM_OFFLINE=1); two cases ask the package index the host is
configured with, as a user's `pip install` would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import Sandbox
from declaw_wasm._packages.pip import wheel_cache

from wheels import make_wheel

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=900)
    yield sandbox
    sandbox.kill()


def _upload(sbx: Sandbox, wheel: Path, folder: str = "/home/user/wheels") -> str:
    dest = f"{folder}/{wheel.name}"
    sbx.files.write(dest, wheel.read_bytes())
    return dest


def test_install_from_a_wheelhouse_persists_across_commands_and_cells(box: Sandbox, tmp_path: Path) -> None:
    _upload(box, make_wheel(tmp_path, "tinypkg", "1.2", requires=("tinydep>=1",)))
    _upload(box, make_wheel(tmp_path, "tinydep", "1.0"))
    r = box.commands.run("pip install --no-index --find-links /home/user/wheels tinypkg", timeout=120)
    assert r.exit_code == 0, r.stderr
    assert "Successfully installed tinydep-1.0 tinypkg-1.2" in r.stdout
    r = box.commands.run("python3 -c 'import tinypkg, tinydep; print(tinypkg.__version__, tinydep.NAME)'")
    assert (r.exit_code, r.stdout) == (0, "1.2 tinydep\n")
    assert box.run_code("import tinypkg; tinypkg.__version__").text == "1.2"
    assert "tinypkg==1.2" in box.commands.run("pip freeze").stdout
    show = box.commands.run("pip show tinypkg").stdout
    assert "Version: 1.2" in show and "Requires: tinydep" in show
    assert "Location: /home/user/.local/lib/python3.15/site-packages" in show
    again = box.commands.run("pip install --no-index -f /home/user/wheels tinypkg", timeout=120)
    assert again.exit_code == 0 and "already satisfied" in again.stdout


def test_pip_in_a_cell_and_the_pip_magic(box: Sandbox, tmp_path: Path) -> None:
    _upload(box, make_wheel(tmp_path, "cellpkg", "3.0"))
    e = box.run_code("%pip install --no-index --find-links /home/user/wheels cellpkg\n"
                     "import cellpkg\ncellpkg.__version__", timeout=120)
    assert e.error is None, e.error
    assert e.text == "3.0"
    assert "Successfully installed cellpkg-3.0" in "".join(e.logs.stdout)
    assert box.commands.run("python3 -m pip list").stdout.count("cellpkg") == 1


def test_install_a_wheel_file_and_a_requirements_file_then_uninstall(box: Sandbox, tmp_path: Path) -> None:
    path = _upload(box, make_wheel(tmp_path, "filepkg", "0.5"), "/tmp/w")
    assert box.commands.run(f"pip install {path}", timeout=120).exit_code == 0
    _upload(box, make_wheel(tmp_path, "reqpkg", "2.0"), "/tmp/w")
    box.files.write("/home/user/requirements.txt", "# deps\nreqpkg==2.0  # pinned\n")
    r = box.commands.run("pip install --no-index -f /tmp/w -r requirements.txt", timeout=120)
    assert r.exit_code == 0, r.stderr
    r = box.commands.run("pip uninstall -y filepkg reqpkg")
    assert r.exit_code == 0 and "Successfully uninstalled filepkg-0.5" in r.stdout
    r = box.commands.run("python3 -c 'import filepkg'")
    assert r.exit_code == 1 and "No module named 'filepkg'" in r.stderr
    assert not box.files.exists("/home/user/.local/lib/python3.15/site-packages/reqpkg")


def test_an_installed_console_script_runs_by_name(box: Sandbox, tmp_path: Path) -> None:
    """`pip install black && black .`: the wheel's console scripts land in ~/.local/bin, which is
    on PATH first (as Debian's ~/.profile puts it), and the shell runs a file it finds on PATH
    by name; `which`, `command -v` and `type` find it there; uninstalling removes it."""
    wheel = make_wheel(tmp_path, "greeter", "1.0", files={
        "greeter/__init__.py": "import sys\ndef main():\n    print('hello', *sys.argv[1:])\n    return 3\n",
        "greeter-1.0.dist-info/entry_points.txt": "[console_scripts]\ngreet = greeter:main\n"})
    path = _upload(box, wheel, "/tmp/cli")
    assert box.commands.run(f"pip install {path}", timeout=120).exit_code == 0
    r = box.commands.run("greet world; echo status $?; which greet; command -v greet; type greet; "
                         "x=$(greet piped | tr a-z A-Z); echo $x; echo $PATH")
    assert r.stdout.splitlines() == ["hello world", "status 3", "/home/user/.local/bin/greet",
                                     "/home/user/.local/bin/greet", "greet is /home/user/.local/bin/greet",
                                     "HELLO PIPED", "/home/user/.local/bin:/usr/local/bin:/usr/bin:/bin"], r
    # a script of the user's on a folder of PATH, and a name on no folder
    r = box.commands.run("mkdir -p ~/bin && printf '#!/bin/bash\\necho mine $1\\n' > ~/bin/mine && "
                         "PATH=~/bin:$PATH mine a; mine b; echo $?")
    assert r.stdout == "mine a\n127\n" and "bash: mine: command not found" in r.stderr, r
    assert box.commands.run("pip uninstall -y greeter").exit_code == 0
    r = box.commands.run("greet again")
    assert r.exit_code == 127 and "greet: command not found" in r.stderr


def test_runtime_packages_cannot_be_uninstalled_or_replaced(box: Sandbox) -> None:
    r = box.commands.run("pip uninstall -y numpy")
    assert r.exit_code == 1 and "Cannot uninstall numpy" in r.stderr
    r = box.commands.run("pip install --no-index numpy==1.26.4", timeout=120)
    assert r.exit_code == 1
    assert "numpy is part of the sandbox at version 2.5.2" in r.stderr
    assert box.commands.run("python3 -c 'import numpy; print(numpy.__version__)'").stdout == "2.5.2\n"


def test_compiled_wheels_are_refused_by_name(box: Sandbox, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    house = tmp_path / "house"
    make_wheel(house, "fastthing", "1.0", tag="py3-none-manylinux1_x86_64")
    make_wheel(house, "fastthing", "1.0", tag="py3-none-manylinux2014_aarch64")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(house))
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    r = box.commands.run("pip install fastthing", timeout=120)
    assert r.exit_code == 1
    assert "fastthing has no pure-Python wheel" in r.stderr and "compiled code" in r.stderr
    # a compiled wheel handed over directly is refused too
    path = _upload(box, house / "fastthing-1.0-py3-none-manylinux1_x86_64.whl", "/tmp/c")
    r = box.commands.run(f"pip install {path}", timeout=120)
    assert r.exit_code == 1 and "contains compiled code" in r.stderr
    r = box.commands.run("pip install nosuchpkg-declaw", timeout=120)
    assert r.exit_code == 1 and "no pure-Python wheel of nosuchpkg-declaw was found" in r.stderr


def test_host_wheelhouse_offline_and_the_wheel_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    house = tmp_path / "house"
    wheel = make_wheel(house, "housepkg", "4.1")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(house))
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    for _ in range(2):  # the second sandbox takes the wheel from the host's cache
        with Sandbox.create(timeout=300) as sbx:
            r = sbx.commands.run("pip install housepkg && python3 -c 'import housepkg; print(housepkg.__version__)'",
                                 timeout=120)
            assert (r.exit_code, r.stdout.splitlines()[-1]) == (0, "4.1"), r.stderr
        wheel.unlink(missing_ok=True)  # gone from the wheelhouse: only the cache has it
        cached = list(wheel_cache().glob("housepkg-4.1-py3-none-any.whl"))
        assert cached


def test_the_guest_cannot_point_the_host_at_urls(box: Sandbox) -> None:
    r = box.commands.run("pip install --index-url http://127.0.0.1:9/simple requests")
    assert r.exit_code == 1 and "no network" in r.stderr
    r = box.commands.run("pip install 'evil @ http://127.0.0.1:9/evil-1.0-py3-none-any.whl'")
    assert r.exit_code == 1 and "from a URL is not supported" in r.stderr
    r = box.commands.run("pip install -e /home/user")
    assert r.exit_code == 1 and "editable" in r.stderr


def test_install_from_the_index_and_a_compiled_package_refused(box: Sandbox) -> None:
    """Against the host's configured index (PyPI or its mirror), as a user would."""
    r = box.commands.run("pip install pyjokes", timeout=300)
    assert r.exit_code == 0, r.stderr
    r = box.commands.run("python3 -c 'import pyjokes; print(type(pyjokes.get_joke()).__name__)'")
    assert (r.exit_code, r.stdout) == (0, "str\n"), r.stderr
    r = box.commands.run("pip install orjson", timeout=300)
    assert r.exit_code == 1
    assert "orjson has no pure-Python wheel" in r.stderr and "compiled code" in r.stderr
