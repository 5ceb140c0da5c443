"""Every guest of a local sandbox is built in one place (`_local/launcher.py`), and the parts that
run guests (kernel, commands, parking) see a sandbox only through its protocol, `GuestSandbox`:
a part added to guests, or a limit, cannot reach one kind of guest and miss another. (mypy
checks the protocol's use: each of them types its sandbox as `GuestSandbox`.)"""

from __future__ import annotations

import ast
from pathlib import Path

LOCAL = Path(__file__).resolve().parent.parent / "declaw_wasm" / "_local"
BUILDERS = {"Guest", "OutputSink", "shell_spec", "kernel_spec", "park_spec", "ToolDoor", "net_routes"}


def _calls(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
    return names


def test_only_the_launcher_builds_a_guest_or_its_door() -> None:
    builders = {path.name: sorted(_calls(path) & BUILDERS) for path in LOCAL.glob("*.py")}
    elsewhere = {name: found for name, found in builders.items() if found and name != "launcher.py"}
    assert not elsewhere, f"guests (or their sinks, specs, shared routes) built outside launcher.py: {elsewhere}"
    assert set(builders["launcher.py"]) == BUILDERS


def test_kernel_commands_and_parking_see_a_sandbox_only_through_its_protocol() -> None:
    for name in ("kernel.py", "processes.py", "parking.py"):
        tree = ast.parse((LOCAL / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "sandbox" not in imported, f"{name} imports the sandbox module"
        names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
        assert "LocalSandbox" not in names | strings, f"{name} names LocalSandbox (use launcher.GuestSandbox)"
