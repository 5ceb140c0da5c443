"""The test tiers themselves (tests/conftest.py): which `-m` expressions let the fast tier skip
importing modules of guest tests, that `heavy` pure tests run in the second tier, and that a
module's markers are declared once (a second
`pytestmark = ...` silently replaces the first: a module of guest tests that trace memory lost its
`traces_memory` marker that way, so tracing started before tests that measure RSS)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import _GUEST_MODULE, _selects_no_guest_test  # tests/ is on sys.path

TESTS = Path(__file__).parent


@pytest.mark.parametrize(("markexpr", "skips"), [
    ("not guest", True), ("not guest and not served", True), ("served and not guest", True),
    ("", False), ("guest", False), ("not served", False), ("not guest or served", False),
    ("guest and served and not traces_memory", False),
])
def test_only_an_expression_no_guest_test_can_satisfy_skips_guest_modules(markexpr: str, skips: bool) -> None:
    assert _selects_no_guest_test(markexpr) is skips


def test_a_guest_module_is_recognised_by_its_declaration() -> None:
    assert _GUEST_MODULE.search("x = 1\npytestmark = pytest.mark.guest  # why\n")
    assert _GUEST_MODULE.search("pytestmark = [pytest.mark.guest, pytest.mark.timeout(600)]\n")
    assert _GUEST_MODULE.search("pytestmark = [pytest.mark.traces_memory, pytest.mark.guest]\n")
    assert not _GUEST_MODULE.search("pytestmark = pytest.mark.served\n")
    assert not _GUEST_MODULE.search("pytestmark = pytest.mark.guests\n")
    assert not _GUEST_MODULE.search("# pytestmark = pytest.mark.guest\n")


def test_every_module_declares_its_markers_once_at_its_top_level() -> None:
    """One `pytestmark` per module, an assignment of the module itself (a line spelled like one
    inside a string, such as a guest program, is no declaration: the tiers would miss it)."""
    wrong = []
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        declared = [node for node in ast.parse(source).body if isinstance(node, ast.Assign)
                    and any(isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets)]
        spelled = re.findall(r"^pytestmark\s*=", source, re.MULTILINE)
        if len(declared) > 1 or len(spelled) != len(declared):
            wrong.append(str(path.relative_to(TESTS)))
    assert wrong == []


@pytest.mark.heavy
def test_heavy_pure_tests_run_in_the_second_tier_and_nowhere_twice() -> None:
    """`-m "not guest"` (the fast tier) leaves out a module's `heavy` tests and keeps its others;
    `-m guest` takes them (beside the module's guest tests), and no test is in both."""
    def collected(markexpr: str) -> set[str]:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:randomly",
                               "-m", markexpr, str(TESTS / "test_door_ops.py")],
                              capture_output=True, text=True, timeout=120, cwd=TESTS.parent,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert done.returncode == 0, done.stdout + done.stderr
        return {line for line in done.stdout.splitlines() if "::" in line}

    source = (TESTS / "test_door_ops.py").read_text(encoding="utf-8")
    heavy = {node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
             and any("heavy" in ast.unparse(d) for d in node.decorator_list)}
    fast, second = collected("not guest"), collected("guest")
    assert heavy and fast and not fast & second
    assert heavy <= {test.split("::")[1].split("[")[0] for test in second}
    assert not {test.split("::")[1].split("[")[0] for test in fast} & heavy


ORDER_PLUGIN = '''
import json, os

def pytest_collection_finish(session):
    rows = [(item.nodeid, item.get_closest_marker("xdist_group").args[0],
             item.get_closest_marker("traces_memory") is not None) for item in session.items]
    with open(os.environ["DECLAW_ORDER_OUT"], "w") as out:
        json.dump(rows, out)
'''


@pytest.mark.heavy
def test_the_guest_tier_splits_over_workers_keeping_ray_together_and_traced_tests_last(tmp_path: Path) -> None:
    """The groups `-n 2 --dist loadgroup` deals out (tests/conftest.py, `worker_group`): every
    test has one; every test on Ray is in one group (one cluster on the machine); the traced
    tests come after every other (a worker that takes one takes nothing untraced after it)."""
    (tmp_path / "order_plugin.py").write_text(ORDER_PLUGIN, encoding="utf-8")
    out = tmp_path / "order.json"
    files = [str(TESTS / name) for name in ("test_files.py", "test_channels.py", "test_ray.py", "test_tiers.py",
                                             "packages/test_pip.py", "packages/test_pip_hostile.py")]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "order_plugin",
                           "-m", "guest", *files], capture_output=True, text=True, timeout=300, cwd=TESTS.parent,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "DECLAW_ORDER_OUT": str(out),
                               "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text(encoding="utf-8"))
    on_ray = [group for nodeid, group, _ in rows if "[ray" in nodeid or "-ray" in nodeid or "test_ray.py" in nodeid]
    assert on_ray and set(on_ray) == {"ray"}
    traced = [index for index, (_, _, tracing) in enumerate(rows) if tracing]
    assert traced and traced == list(range(len(rows) - len(traced), len(rows)))
    assert all(group.startswith(("traces_memory ", "ray")) for _, group, tracing in rows if tracing)
    packages = {group for nodeid, group, _ in rows if nodeid.startswith("tests/packages/")}
    assert packages == {"packages", "traces_memory packages"}  # one at a time: they share the wheel cache
    assert rows[0][0].startswith("tests/packages/")  # and first
    plain = [(nodeid, group) for nodeid, group, tracing in rows if not tracing and group not in ("ray", "packages")]
    assert plain and all(group == nodeid.split("::")[0] for nodeid, group in plain)
