"""The packages bundle and the built-in templates, as a user of a fresh sandbox sees them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from declaw_wasm import testing
from declaw_wasm import Sandbox
from declaw_wasm._packages.bundle import TABLE_END, TABLE_START, ensure_bundle, package_table, read_lock
from declaw_wasm._packages.pip import canonical

# The seed's promise ("jupyter" is the kernel: run_code)
SEED = ["numpy", "pandas", "matplotlib.pyplot", "plotly.express", "scipy", "sklearn", "PIL.Image",
        "sympy", "IPython", "IPython.display"]
# In the bundle as dependencies of IPython, but they drive real terminals (termios, pty forks)
NOT_IMPORTABLE = {"pexpect": "needs termios/pty", "ptyprocess": "needs termios/pty"}

IMPORT_ALL = """
import importlib, json, sys
failed = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(failed))
"""


def _bundle_modules(sbx: Sandbox) -> list[str]:
    folder = ensure_bundle(testing.interpreter_of(sbx))
    names = set()
    for entry in folder.iterdir():
        stem = entry.name[:-3] if entry.name.endswith(".py") else entry.name
        if stem.isidentifier() and (entry.is_dir() or entry.name.endswith(".py")) \
                and stem not in ("bin", "__pycache__"):
            names.add(stem)
    return sorted(names)


def test_seed_and_bundle_packages_import_cold_in_a_command(sbx: Sandbox) -> None:
    modules = _bundle_modules(sbx)
    assert {"plotly", "IPython", "requests", "pytz", "rich", "nltk", "xarray"} <= set(modules)
    sbx.files.write("/tmp/import_all.py", IMPORT_ALL)
    r = sbx.commands.run("python3 /tmp/import_all.py " + " ".join(SEED + modules), timeout=300)
    assert r.exit_code == 0, r.stderr
    failed = json.loads(r.stdout)
    assert set(failed) <= set(NOT_IMPORTABLE), failed


def test_plotly_and_ipython_display_in_run_code(sbx: Sandbox) -> None:
    e = sbx.run_code(
        "import plotly.express as px\n"
        "from IPython.display import display, HTML, Markdown, Image\n"
        "display(HTML('<b>bold</b>'))\n"
        "display(Markdown('# Title'))\n"
        "px.line(x=[1, 2, 3], y=[2, 4, 8])", timeout=120)
    assert e.error is None, e.error
    assert e.results[0].html == "<b>bold</b>"
    assert e.results[1].markdown == "# Title"
    assert "plotly" in (e.results[2].html or "") and e.results[2].is_main_result


@pytest.mark.guest
def test_base_template_is_stdlib_only() -> None:
    with Sandbox.create(template="base", timeout=120) as base:
        r = base.commands.run("python3 -c 'import numpy'")
        assert r.exit_code == 1
        assert "ModuleNotFoundError: No module named 'numpy'" in r.stderr
        assert "_declaw_boot" not in r.stderr  # the import system's own failure
        # the guest's own stand-ins for what WASI's CPython lacks are stdlib-only too
        r = base.commands.run("python3 -c 'import json, sqlite3, asyncio, csv, zoneinfo, pwd, grp, resource, "
                              "fcntl, socket, ssl, shutil, os; shutil.disk_usage(\"/\"); os.statvfs(\"/\"); "
                              "pwd.getpwuid(0); print(42)'")
        assert (r.exit_code, r.stdout) == (0, "42\n")
        r = base.commands.run("python3 -c 'import plotly'")
        assert r.exit_code == 1
        listed = base.commands.run("pip list --format=freeze").stdout
        assert "numpy" not in listed and "plotly" not in listed
        e = base.run_code("import pandas")
        assert e.error is not None and e.error.name == "ModuleNotFoundError"
        assert base.run_code("sum(range(10))").text == "45"


def test_code_interpreter_is_the_default_template(sbx: Sandbox) -> None:
    assert sbx.get_info().template_id == "code-interpreter"
    listed = sbx.commands.run("pip list --format=json").stdout
    names = {canonical(item["name"]) for item in json.loads(listed)}
    assert {"numpy", "pandas", "plotly", "ipython", "requests"} <= names


def test_lock_pins_every_wheel_by_hash() -> None:
    pins = read_lock()
    assert len(pins) > 20
    assert all(re.fullmatch(r"[0-9a-f]{64}", pin.sha256) for pin in pins)
    requested = Path(__file__).resolve().parent.parent / "packages-bundle" / "requirements.in"
    locked = {canonical(pin.name) for pin in pins}
    for line in requested.read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            assert canonical(name) in locked, name


def test_package_table_is_generated_from_the_lock(sbx: Sandbox) -> None:
    readme = (Path(__file__).resolve().parent.parent / "docs" / "templates-and-packages.md").read_text()
    section = readme.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0].strip()
    table = package_table(testing.interpreter_of(sbx).files.lib_dir / "python315.zip")
    assert section == table.strip(), "the package table is stale: run python packages-bundle/lock.py --table"
