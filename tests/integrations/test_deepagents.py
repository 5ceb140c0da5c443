"""Deep Agents' `BaseSandbox` file tools (ls, read, write, edit, glob, grep) and execute, run
against a declaw-wasm sandbox through `DeclawWasmSandbox`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("deepagents.backends.sandbox", reason="pip install 'declaw-wasm[deepagents]'")

from deepagents.backends.sandbox import BaseSandbox

from declaw_wasm.integrations.deepagents import DeclawWasmSandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

ROOT = "/home/user/proj"


@pytest.fixture(scope="module")
def backend() -> Iterator[DeclawWasmSandbox]:
    sandbox = DeclawWasmSandbox(timeout=600)
    assert sandbox.write(f"{ROOT}/src/app.py", "def main():\n    return 'hello: world'\n").error is None
    assert sandbox.write(f"{ROOT}/src/util.py", "HELLO = 1\n").error is None
    assert sandbox.write(f"{ROOT}/README.md", "# hello\nsay hello\n").error is None
    yield sandbox
    sandbox.close()


def test_is_a_base_sandbox_and_executes(backend: DeclawWasmSandbox) -> None:
    assert isinstance(backend, BaseSandbox) and backend.id.startswith("sbx")
    result = backend.execute("echo out; echo err >&2; exit 3")
    assert (result.output, result.exit_code) == ("out\nerr\n", 3)
    timed = backend.execute("sleep 5", timeout=1)
    assert timed.exit_code == 124 and "timed out" in timed.output


def test_ls_read_write(backend: DeclawWasmSandbox) -> None:
    listing = backend.ls(ROOT)
    assert listing.error is None and listing.entries is not None
    assert sorted((e["path"], e["is_dir"]) for e in listing.entries) == [
        (f"{ROOT}/README.md", False), (f"{ROOT}/src", True)]
    read = backend.read(f"{ROOT}/README.md")
    assert read.error is None and read.file_data is not None
    assert "say hello" in read.file_data["content"]
    page = backend.read(f"{ROOT}/README.md", offset=1, limit=1)
    assert page.file_data is not None and page.file_data["content"].strip().endswith("say hello")
    assert backend.read(f"{ROOT}/missing.txt").error is not None
    assert backend.ls(f"{ROOT}/missing").error is not None


def test_edit(backend: DeclawWasmSandbox) -> None:
    backend.write(f"{ROOT}/edit.txt", "one two two\n")
    assert backend.edit(f"{ROOT}/edit.txt", "one", "1").error is None
    assert backend.edit(f"{ROOT}/edit.txt", "two", "2").error is not None  # ambiguous
    result = backend.edit(f"{ROOT}/edit.txt", "two", "2", replace_all=True)
    assert result.error is None and result.occurrences == 2
    downloaded = backend.download_files([f"{ROOT}/edit.txt"])[0]
    assert downloaded.content == b"1 2 2\n"
    assert backend.edit(f"{ROOT}/edit.txt", "absent", "x").error is not None


def test_glob(backend: DeclawWasmSandbox) -> None:
    found = backend.glob("**/*.py", path=ROOT)
    assert found.error is None and found.matches is not None
    assert sorted(m["path"] for m in found.matches) == [f"{ROOT}/src/app.py", f"{ROOT}/src/util.py"]
    assert [m["path"] for m in backend.glob("*.md", path=ROOT).matches or []] == \
        [f"{ROOT}/README.md"]


def test_grep(backend: DeclawWasmSandbox) -> None:
    result = backend.grep("hello", path=ROOT)
    assert result.error is None and result.matches is not None
    found = sorted((m["path"], m["line"], m["text"]) for m in result.matches)
    assert found == [(f"{ROOT}/README.md", 1, "# hello"), (f"{ROOT}/README.md", 2, "say hello"),
                     (f"{ROOT}/src/app.py", 2, "    return 'hello: world'")]
    only_py = backend.grep("hello", path=ROOT, glob="*.py")
    assert [m["path"] for m in only_py.matches or []] == [f"{ROOT}/src/app.py"]
    nested = backend.grep("HELLO", path=ROOT, glob="src/*.py")  # deepagents' own route
    assert [m["path"] for m in nested.matches or []] == [f"{ROOT}/src/util.py"]
    capped = backend.grep("hello", path=ROOT, max_count=1)
    assert capped.truncated and len(capped.matches or []) == 1
    assert backend.grep("hello", path=f"{ROOT}/nope").error is not None


def test_upload_and_download_errors(backend: DeclawWasmSandbox) -> None:
    up = backend.upload_files([("relative.txt", b"x"), (f"{ROOT}/src", b"x"), ("/etc/x", b"x")])
    assert [u.error for u in up] == ["invalid_path", "is_directory", "permission_denied"]
    down = backend.download_files([f"{ROOT}/nope", f"{ROOT}/src"])
    assert [d.error for d in down] == ["file_not_found", "is_directory"]


def test_deepagents_own_grep_route(backend: DeclawWasmSandbox) -> None:
    """deepagents' default `grep -rHnFZ` pipeline works too (ours replaces it to report errors)."""
    result = BaseSandbox.grep(backend, "hello", path=ROOT)
    assert len(result.matches or []) == 3
