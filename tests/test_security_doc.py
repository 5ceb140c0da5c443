"""The threat model's references hold (docs/security.md, SECURITY.md): every test file it names
exists, and every test it names (`file.py::test_name`, or a backticked `test_name`) is a test
function of that file, or of some file under tests/. Pure: it reads files only."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "docs" / "security.md", ROOT / "SECURITY.md"]
FILE = re.compile(r"(tests/[\w/.-]+?\.py)(?:::`?(test_\w+))?")
NAME = re.compile(r"`(test_\w+)`")
SECTION_LINK = re.compile(r"\]\(#([\w-]+)\)")


@cache
def functions_of(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return frozenset(node.name for node in ast.walk(tree)
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"))


def every_test_name() -> frozenset[str]:
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        names |= functions_of(path)
    return frozenset(names)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_every_test_file_and_test_the_threat_model_names_exists() -> None:
    missing = []
    known = every_test_name()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in FILE.finditer(text):
            path, name = ROOT / match.group(1), match.group(2)
            if not path.is_file():
                missing.append(f"{doc.name}: {match.group(1)} (no such file)")
            elif name is not None and name not in functions_of(path):
                missing.append(f"{doc.name}: {match.group(1)}::{name} (no such test in it)")
        for match in NAME.finditer(text):
            if match.group(1) not in known:
                missing.append(f"{doc.name}: {match.group(1)} (no such test under tests/)")
    assert not missing, "\n".join(missing)


def test_every_section_link_of_the_threat_model_leads_to_a_heading() -> None:
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    headings = {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}
    broken = sorted(set(SECTION_LINK.findall(text)) - headings)
    assert not broken, broken
