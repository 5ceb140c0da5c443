"""One meaning per word (docs/architecture.md, "Words"): the renames stay done.

"runtime" is the downloaded artifact only, "warm image" the pre-initialised module, "snapshot" a
user's snapshot, `guest/` the guest code. So no module of ours names the interpreter `Runtime` or
`runtime`, imports `_wasm.snapshot`, or reads `DECLAW_WASM_SNAPSHOT` but settings.py's alias; and
no page or docstring calls the warm image a snapshot. Old spellings kept as aliases sit on lines
that say "(old name)". Python names are checked token by token (strings and comments apart), so
`RuntimeError`, `runtime_dir` or a user's `snapshot_id` are not caught.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from declaw_wasm import settings

ROOT = Path(__file__).resolve().parent.parent
KEEP = "(old name)"
# Old Python names -> what they are called now.
OLD_NAMES = {
    "Runtime": "Interpreter", "runtime": "interpreter", "get_runtime": "get_interpreter",
    "load_plain_runtime": "load_plain_interpreter", "load_warm_runtime": "load_warm_interpreter",
    "load_built_warm_runtime": "load_built_warm_interpreter", "runtime_for": "interpreter_for",
    "runtime_of": "interpreter_of", "guest_runtime_dir": "guest_code_dir", "snapshot_key": "warm_image_key",
    "snapshot_enabled": "warm_image_enabled",
}
# Old spellings in any text (code, docstrings, comments, pages) -> what to write instead.
OLD_TEXT = {
    re.compile(r"\b_wasm[./]snapshot\b"): "_wasm.warm_image (the warm image's module)",
    re.compile(r"\bDECLAW_WASM_SNAPSHOT\b"): "DECLAW_WASM_WARM_IMAGE",
    re.compile(r"\b[Ww]arm snapshot"): "warm image",
    re.compile(r"(?<![\w.>/-])runtime/(?=_declaw_boot|declaw_|pip/|venv/|[`\s):,']|$)"): "guest/ (the guest code)",
    re.compile(r"\btests/test_snapshot\.py\b"): "tests/test_warm_image.py",
}
THIS = Path(__file__).resolve()


def _python_files() -> list[Path]:
    return [path for folder in ("declaw_wasm", "tests", "benchmarks")
            for path in sorted((ROOT / folder).rglob("*.py")) if path.resolve() != THIS]


def _text_files() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "SECURITY.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "benchmarks").rglob("*.md")), *sorted((ROOT / "packages-bundle").glob("*.txt"))]
    code = [*_python_files(), *sorted((ROOT / "guest").rglob("*.py"))]
    return [path for path in pages + code if path.is_file()]


def _old_names(source: str) -> list[tuple[int, str]]:
    lines = source.splitlines()
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string in OLD_NAMES and KEEP not in lines[tok.start[0] - 1]:
            found.append((tok.start[0], tok.string))
    return found


def test_the_check_of_names_finds_an_old_name_but_not_a_longer_one_or_a_string() -> None:
    source = ('runtime = get_runtime()\nraise RuntimeError("runtime")  # runtime\nruntime_dir = 1\n'
              f"runtime_of = interpreter_of  # {KEEP}\n")
    assert _old_names(source) == [(1, "runtime"), (1, "get_runtime")]


def test_no_module_of_ours_uses_an_old_name() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {name} (now {OLD_NAMES[name]})"
             for path in _python_files() for line, name in _old_names(path.read_text())]
    assert not found, "\n".join(found)


def test_no_page_or_module_spells_an_old_name_for_the_warm_image_or_the_guest_code() -> None:
    found = []
    for path in _text_files():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if KEEP in line:
                continue
            found += [f"{path.relative_to(ROOT)}:{number}: {m.group()!r} (now {new})"
                      for pattern, new in OLD_TEXT.items() for m in pattern.finditer(line)]
    assert not found, "\n".join(found)


def test_the_old_folders_and_modules_are_gone() -> None:
    assert (ROOT / "guest" / "_declaw_boot.py").is_file()
    assert not (ROOT / "runtime").exists()
    assert not (ROOT / "declaw_wasm" / "_wasm" / "snapshot.py").exists()
    assert (ROOT / "declaw_wasm" / "_wasm" / "warm_image.py").is_file()


@pytest.mark.parametrize("new, old, warm", [
    (None, None, True), ("0", None, False), ("1", None, True), (None, "0", False), (None, "1", True),
    ("1", "0", True), ("0", "1", False),  # both set: the new name wins
])
def test_the_warm_image_setting_is_read_under_both_names_and_the_new_one_wins(
        monkeypatch: pytest.MonkeyPatch, new: str | None, old: str | None, warm: bool) -> None:
    for name, value in (("DECLAW_WASM_WARM_IMAGE", new), ("DECLAW_WASM_SNAPSHOT", old)):  # (old name)
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert settings.warm_image_enabled() is warm


def test_the_old_public_spellings_are_aliases() -> None:
    from declaw_wasm import testing

    assert testing.runtime_of is testing.interpreter_of  # (old name)
    assert settings.SNAPSHOT_ENV == "DECLAW_WASM_SNAPSHOT"  # (old name)
    assert settings.snapshot_enabled is settings.warm_image_enabled  # (old name)
