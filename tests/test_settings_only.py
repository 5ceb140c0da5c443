"""Settings are read in `declaw_wasm/settings.py` only, and docs/configuration.md lists them all.

Every module of declaw_wasm is parsed (`ast`); outside settings.py, a read of the environment
(`os.environ.get(...)`, `os.environ[...]`, `... in os.environ`, `os.getenv(...)`,
`os.environ.setdefault/pop(...)`) must name a variable of someone else by a literal (`RAY_USE_TLS`,
`PIP_CONFIG_FILE`), never one of ours (`DECLAW_...`, spelled out or by a constant), nor a name
computed at run time (which could be one). No module but settings.py spells one of our names as a
bare string either: a module that writes a child's environment names it by settings.py's constant.
Copying the whole environment (`os.environ.items()`, `dict(os.environ)`) is not a read of one
setting and is allowed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Iterator, Optional

import pytest

from declaw_wasm import settings
from declaw_wasm.exceptions import InvalidArgumentException

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "declaw_wasm"
SETTINGS = PACKAGE / "settings.py"
CONFIG_DOC = ROOT / "docs" / "configuration.md"
OURS = re.compile(r"DECLAW_[A-Z0-9_]+")
READ_METHODS = {"get", "setdefault", "pop", "__getitem__", "__contains__"}
WRITE_METHODS = {"setdefault", "pop"}  # these also write: with a name computed at run time, allowed


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module-level `NAME = "DECLAW_..."` constants of a module."""
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and OURS.fullmatch(node.value.value)):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _is_environ(node: ast.AST) -> bool:
    """`os.environ` (or `environ` imported from os)."""
    return ((isinstance(node, ast.Attribute) and node.attr == "environ"
             and isinstance(node.value, ast.Name) and node.value.id == "os")
            or (isinstance(node, ast.Name) and node.id == "environ"))


def _reads(tree: ast.Module) -> Iterator[tuple[int, Optional[ast.expr], bool]]:
    """(line, key, whether it also writes) of every read of one environment variable in `tree`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in READ_METHODS and _is_environ(func.value):
                yield node.lineno, node.args[0] if node.args else None, func.attr in WRITE_METHODS
            elif ((isinstance(func, ast.Attribute) and func.attr == "getenv"
                   and isinstance(func.value, ast.Name) and func.value.id == "os")
                  or (isinstance(func, ast.Name) and func.id == "getenv")):
                yield node.lineno, node.args[0] if node.args else None, False
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _is_environ(node.value):
            yield node.lineno, node.slice, False
        elif isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
            yield node.lineno, node.left, False


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring nodes of `tree` (prose may name our variables)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def offences(source: str, ours: dict[str, str]) -> list[tuple[int, str]]:
    """(line, what) for each way `source` (a module other than settings.py) reads or spells one of
    our settings. `ours`: settings.py's constants (name -> variable)."""
    tree = ast.parse(source)
    names = {**ours, **_constants(tree)}
    found = []
    for line, key, writes in _reads(tree):
        if key is None:
            found.append((line, "reads the environment without a name"))
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            if OURS.match(key.value):
                found.append((line, f"reads {key.value} (call settings.py instead)"))
        elif isinstance(key, ast.Name) and key.id in names:
            found.append((line, f"reads {names[key.id]} through {key.id} (call settings.py instead)"))
        elif isinstance(key, ast.Attribute) and key.attr in names:
            found.append((line, f"reads {names[key.attr]} through {key.attr} (call settings.py instead)"))
        elif not writes:
            found.append((line, f"reads an environment variable named at run time ({ast.unparse(key)}): "
                                "read ours in settings.py, others by a literal name"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                and OURS.fullmatch(node.value)):
            found.append((node.lineno, f"spells {node.value} (use settings.py's constant)"))
    return sorted(set(found))


def _settings_constants() -> dict[str, str]:
    return _constants(ast.parse(SETTINGS.read_text()))


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != SETTINGS)


def test_no_module_but_settings_reads_a_setting() -> None:
    ours = _settings_constants()
    bad = [f"{path.relative_to(ROOT)}:{line}: {what}"
           for path in _modules() for line, what in offences(path.read_text(), ours)]
    assert not bad, "settings are read in declaw_wasm/settings.py only:\n" + "\n".join(bad)


@pytest.mark.parametrize("source, expected", [
    ('import os\nos.environ.get("DECLAW_WASM_X")\n', "reads DECLAW_WASM_X"),
    ('import os\nos.getenv("DECLAW_DOMAIN", "")\n', "reads DECLAW_DOMAIN"),
    ('import os\nX = "DECLAW_WASM_X"\nos.environ[X]\n', "reads DECLAW_WASM_X through X"),
    ('import os\nfrom . import settings\n"y" if settings.STATE_ENV in os.environ else "n"\n',
     "reads DECLAW_WASM_STATE through STATE_ENV"),
    ('from os import environ\nfrom .settings import STATE_ENV\nenviron.setdefault(STATE_ENV, "")\n',
     "reads DECLAW_WASM_STATE through STATE_ENV"),
    ('import os\nfor n in names:\n    os.environ.get(n)\n', "named at run time"),
    ('env = {"DECLAW_WASM_STATE": "x"}\n', "spells DECLAW_WASM_STATE"),
    ('import os\nfrom .settings import STATE_ENV\nos.environ.pop(STATE_ENV, None)\n', "through STATE_ENV"),
])
def test_the_check_finds_each_kind_of_read(source: str, expected: str) -> None:
    found = offences(source, _settings_constants())
    assert any(expected in what for _, what in found), found


def test_the_check_allows_what_is_not_a_read_of_ours() -> None:
    source = ('"""Set DECLAW_WASM_STATE."""\nimport os\nos.environ.get("RAY_USE_TLS")\n'
              'env = dict(os.environ)\nitems = os.environ.items()\nos.environ["X"] = "1"\n'
              'message = f"DECLAW_WASM_WHEEL={1} is not a file"\n')
    assert offences(source, _settings_constants()) == []


def test_settings_spells_each_name_once() -> None:
    """settings.py names each variable by its constant, so the constants are the whole list."""
    tree = ast.parse(SETTINGS.read_text())
    defined = {id(node.value) for node in tree.body if isinstance(node, ast.Assign)}
    skip = _docstrings(tree)
    spelled = [node.lineno for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
               and id(node) not in defined and OURS.fullmatch(node.value)]
    assert not spelled, f"settings.py lines {spelled}: name the variable by its constant"
    values = list(_settings_constants().values())
    assert len(values) == len(set(values)), "two constants name the same variable"


def _documented() -> list[str]:
    """The variables in docs/configuration.md's table (its first column)."""
    return [m.group(1) for line in CONFIG_DOC.read_text().splitlines()
            if (m := re.match(r"^\|\s*`(DECLAW_[A-Z0-9_]+)`", line))]


def test_the_configuration_page_lists_every_setting() -> None:
    documented = _documented()
    defined = set(_settings_constants().values())
    assert len(documented) == len(set(documented)), "a variable has two rows in docs/configuration.md"
    assert not defined - set(documented), f"docs/configuration.md lacks {sorted(defined - set(documented))}"
    assert not set(documented) - defined, f"docs/configuration.md lists {sorted(set(documented) - defined)}, " \
                                          "which settings.py does not define"


def test_every_setting_is_read_by_a_function_of_settings() -> None:
    """Each constant is used by settings.py's code (a read, or the list of what a child gets)."""
    tree = ast.parse(SETTINGS.read_text())
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    unused = sorted(name for name in _settings_constants() if name not in used)
    assert not unused, f"settings.py defines but never reads {unused}"


@pytest.mark.parametrize("name, value, call", [
    ("DECLAW_WASM_MAX_SANDBOXES", "many", settings.max_sandboxes),
    ("DECLAW_WASM_PARKED", "1.5", settings.parked_guests),
    ("DECLAW_WASM_STANDBY", "x", settings.standby_size),
    ("DECLAW_WASM_WHEEL_CACHE_BYTES", "0", settings.wheel_cache_max_bytes),
    ("DECLAW_WASM_PIP_HOSTS", "a/b", settings.pip_hosts),
    ("DECLAW_WASM_STATE_NAMESPACE", "../up", settings.state_namespace),
    ("DECLAW_WASM_LEASE_GRACE", "soon", settings.lease_grace),
    ("DECLAW_WASM_LEASE_GRACE", "inf", settings.lease_grace),
    ("DECLAW_WASM_VOLUME_MAX_BYTES", "-1", settings.volume_max_bytes),
    ("DECLAW_WASM_VOLUME_MAX_FILES", "lots", settings.volume_max_files),
    ("DECLAW_WASM_VOLUME_MAX_UPLOAD", "1e9", settings.volume_max_upload),
    ("DECLAW_WASM_BACKEND", "cloud", settings.backend),
    ("DECLAW_LOG_LEVEL", "loud", settings.log_level),
])
def test_a_bad_value_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str,
                                                    call: object) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises((ValueError, InvalidArgumentException), match=name):
        call()  # type: ignore[operator]


def test_defaults_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _settings_constants().values():
        monkeypatch.delenv(name, raising=False)
    assert settings.max_sandboxes() == 1000
    assert settings.parked_guests() == 32
    assert settings.standby_size() == 2
    assert settings.wheel_cache_max_bytes() == 2 << 30
    assert settings.lease_grace() == 1.0
    assert (settings.volume_max_bytes(), settings.volume_max_files(), settings.volume_max_upload()) == \
        (1 << 30, 100_000, 500 << 20)
    assert settings.log_level() == "warning"
    assert settings.warm_image_enabled() and not settings.offline() and not settings.unsafe_leases()
    assert not settings.egress_loopback_only() and not settings.state_given()
    assert settings.backend() is None and settings.state_namespace() is None
    assert settings.state_store_env() == {}
    assert (settings.ca_bundle(), settings.resolve_overrides(), settings.dns_answers()) == ("", "", "")
