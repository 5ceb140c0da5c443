"""The repository's own commands: CI runs exactly what the README tells a developer to run, and
that command lints the whole tree (host package, tests, the guest code and the benchmark scripts)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_test_command() -> str:
    lines = (ROOT / "README.md").read_text().splitlines()
    start = lines.index("Run the tests on a fresh machine:")
    return next(line.strip() for line in lines[start + 1:] if line.strip())


def test_ci_runs_exactly_the_readme_test_command_which_lints_the_guest_code_tests_and_benchmarks() -> None:
    command = _readme_test_command()
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert ci == [command]
    assert " ruff check declaw_wasm tests guest benchmarks && mypy && lint-imports && " in command


def test_mypy_with_no_arguments_checks_the_host_package_the_guest_code_the_benchmarks_and_the_tests() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    files = [entry.removeprefix("$MYPY_CONFIG_FILE_DIR/") for entry in config["files"]]
    assert files == ["declaw_wasm", "guest", "benchmarks", "tests"]
    assert all((ROOT / entry).is_dir() for entry in files)
    # the tests by the names pytest imports them by (tests/ on its sys.path: `from conftest import`)
    assert "$MYPY_CONFIG_FILE_DIR/tests" in config["mypy_path"] and config["explicit_package_bases"]
