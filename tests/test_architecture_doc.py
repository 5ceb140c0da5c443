"""docs/architecture.md's table lists every package and module directly under declaw_wasm/, each
in its import-linter layer (pyproject.toml's "Layers" contract, numbered from the top) and with
its one job: the first line of its docstring, a sentence of its own."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "declaw_wasm"
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\|\s*`([A-Za-z_][A-Za-z0-9_]*)(/|\.py)`\s*\|\s*(\d+)\s*\|\s*(.*?)\s*\|\s*$")


def _entries() -> dict[str, Path]:
    """Every package and module directly under declaw_wasm/ (name -> the file with its docstring),
    but the package's own `__init__.py`."""
    found = {}
    for path in PACKAGE.iterdir():
        if path.is_dir() and (path / "__init__.py").is_file():
            found[path.name] = path / "__init__.py"
        elif path.suffix == ".py" and path.name != "__init__.py":
            found[path.stem] = path
    return found


def _contract() -> dict[str, int]:
    """import-linter's layers: name -> its layer, 1 at the top."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers"]
    assert contract["containers"] == ["declaw_wasm"]
    layers = {}
    for number, layer in enumerate(contract["layers"], 1):
        for name in layer.split("|"):
            layers[name.strip().strip("()")] = number
    return layers


def _table() -> dict[str, tuple[bool, int, str]]:
    """The table's rows: name -> (is a package, layer, job)."""
    rows: dict[str, tuple[bool, int, str]] = {}
    for line in DOC.read_text().splitlines():
        match = ROW.match(line)
        if match:
            name, kind, layer, job = match.groups()
            assert name not in rows, f"docs/architecture.md lists {name} twice"
            rows[name] = (kind == "/", int(layer), job.replace("\\|", "|"))
    assert rows, "docs/architecture.md has no table of packages and modules"
    return rows


def _job(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path.relative_to(ROOT)} has no docstring (its first line is its one job)"
    lines = doc.splitlines()
    assert len(lines) == 1 or not lines[1].strip(), \
        f"{path.relative_to(ROOT)}: the docstring's first line is its one job, then a blank line"
    return lines[0].strip()


def test_the_table_lists_every_package_and_module_and_no_other() -> None:
    table, entries = _table(), _entries()
    assert not set(entries) - set(table), f"docs/architecture.md's table lacks {sorted(set(entries) - set(table))}"
    assert not set(table) - set(entries), f"docs/architecture.md's table lists {sorted(set(table) - set(entries))}, " \
                                          "which are not under declaw_wasm/"
    wrong = [name for name, (package, _, _) in table.items() if package != entries[name].name.endswith("__init__.py")]
    assert not wrong, f"shown as a package when a module, or the other way round: {wrong}"


def test_every_package_and_module_has_its_layer_in_the_contract() -> None:
    layers, entries = _contract(), _entries()
    assert not set(entries) - set(layers), f"pyproject.toml's layers lack {sorted(set(entries) - set(layers))}"
    assert not set(layers) - set(entries), f"pyproject.toml's layers name {sorted(set(layers) - set(entries))}, " \
                                           "which are not under declaw_wasm/"


def test_each_layer_in_the_table_is_the_contracts() -> None:
    layers = _contract()
    wrong = [f"{name}: table {layer}, contract {layers.get(name)}"
             for name, (_, layer, _) in _table().items() if layers.get(name) != layer]
    assert not wrong, "docs/architecture.md's layers differ from pyproject.toml's:\n" + "\n".join(wrong)


@pytest.mark.parametrize("name", sorted(_entries()))
def test_each_job_is_the_first_line_of_its_docstring(name: str) -> None:
    path = _entries()[name]
    job = _job(path)
    assert job.endswith("."), f"{path.relative_to(ROOT)}: the first line of its docstring should be a sentence"
    listed = _table().get(name)
    assert listed and listed[2] == job, f"docs/architecture.md's job for {name} is not its docstring's first line"
