"""The architecture stays as drawn (docs/architecture.md): no import cycle in declaw_wasm/
(function-level imports included; type-only ones are allowed: import-linter's contracts in
pyproject.toml check the layers, in CI before the tests), and the host and the guest agree on
the door's ops and the guest's paths."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from declaw_wasm._local.door_ops import OPS
from declaw_wasm._wasm import layout

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "declaw_wasm"
GUEST = ROOT / "guest"


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules `name` imports anywhere (not under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text())
    type_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(block.test) for node in ast.walk(block)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in type_only or not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            targets = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        else:
            targets = [alias.name for alias in node.names]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle_in_the_package() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_door_op_the_guest_names_is_declared_on_the_host() -> None:
    named = set()
    for path in GUEST.rglob("*.py"):
        named |= set(re.findall(r"""\b(?:door\.call|call|_door)\(\s*["']([a-z_.]+)["']""", path.read_text()))
    assert named, "no door calls found in the guest code"
    assert named <= set(OPS), f"undeclared door ops: {sorted(named - set(OPS))}"


def test_the_guest_code_uses_the_hosts_paths() -> None:
    boot = (GUEST / "_declaw_boot.py").read_text()
    assert f'GUEST_SITE = "{layout.GUEST_SITE}"' in boot
    pip = (GUEST / "declaw_shell" / "pip.py").read_text()
    assert f'USER_SITE = "{layout.USER_SITE}"' in pip
    shell = (GUEST / "declaw_shell" / "__init__.py").read_text()
    writable = re.search(r"^WRITABLE = (\(.*?\))", shell, re.M)
    assert writable and ast.literal_eval(writable.group(1)) == layout.WRITABLE
    devices = re.search(r"^_DEVICES = frozenset\((\{.*?\})\)", boot, re.M | re.S)
    assert devices and ast.literal_eval(devices.group(1)) == {f"{layout.GUEST_DEVICES}/{name}"
                                                             for name in layout.DEVICES}
    proc = re.search(r"^_PROC_FILES = frozenset\((\{.*?\})\)", boot, re.M | re.S)
    assert proc and ast.literal_eval(proc.group(1)) == {f"{layout.GUEST_PROC}/{name}" for name in layout.PROC_FILES}


def test_every_subpackage_is_in_the_wheel() -> None:
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert found <= listed, f"add to pyproject.toml's packages: {sorted(found - listed)}"
