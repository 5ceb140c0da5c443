"""benchmarks/README.md is the results page of every benchmark script: each script in
benchmarks/ has a section (a heading naming it), and every link to a note under
benchmarks/notes/ or to a heading of the page resolves. Pure: it reads files only."""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
README = BENCHMARKS / "README.md"
NOTE_LINK = re.compile(r"\]\((notes/[^)#\s]+)\)")
SECTION_LINK = re.compile(r"\]\(#([\w-]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def headings(text: str) -> list[str]:
    """The page's Markdown headings (outside fenced code blocks)."""
    found, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.append(line.lstrip("#").strip())
    return found


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def scripts() -> list[str]:
    # _common.py, _tree.py: the scripts' helpers, not benchmarks
    return sorted(path.name for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))


def test_the_benchmarks_folder_has_scripts() -> None:
    # guards the test below against passing vacuously (a moved folder, a changed glob)
    assert "startup.py" in scripts()


def test_every_benchmark_script_has_a_section_of_its_own() -> None:
    titles = headings(README.read_text(encoding="utf-8"))
    missing = [name for name in scripts() if not any(name in title for title in titles)]
    assert not missing, f"benchmarks/README.md has no heading naming {missing}"


def test_every_note_the_results_page_links_to_exists() -> None:
    links = NOTE_LINK.findall(README.read_text(encoding="utf-8"))
    assert links, "benchmarks/README.md links to no note"
    broken = sorted({link for link in links if not (link.endswith("/") or (BENCHMARKS / link).is_file())})
    assert not broken, f"benchmarks/README.md links to notes that do not exist: {broken}"


def test_every_note_is_dated_and_linked_from_the_results_page() -> None:
    text = README.read_text(encoding="utf-8")
    notes = sorted(path.name for path in (BENCHMARKS / "notes").glob("*.md"))
    undated = [name for name in notes if not re.match(r"\d{4}-\d{2}-\d{2}-[\w.-]+\.md$", name)]
    unlinked = [name for name in notes if f"](notes/{name})" not in text]
    assert not undated, f"notes not named YYYY-MM-DD-topic.md: {undated}"
    assert not unlinked, f"notes no section of benchmarks/README.md links to: {unlinked}"


def test_every_section_link_of_the_results_page_leads_to_a_heading() -> None:
    text = README.read_text(encoding="utf-8")
    known = {anchor(title) for title in headings(text)}
    broken = sorted(set(SECTION_LINK.findall(text)) - known)
    assert not broken, broken
