"""run_code's IPython escapes (`%magic`, `%%magic`, `!cmd`, `x = !cmd`, `obj?`): one table of
cells run in one guest context and in IPython itself (an InteractiveShell in a host process,
its `!` piped as ipykernel's is), outputs, errors and results compared."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

CELLS = [
    "%%writefile notes.txt\nhello\nworld\n",
    "%%writefile notes.txt\nhello\nworld\n",
    "%%writefile -a notes.txt\nmore\n",
    "lines = !cat notes.txt\nprint(lines, lines.s, lines.n.count('\\n'), len(lines), lines.grep('o'))",
    "name = 'there'\n!echo hello {name} $name {len(name) * 2}",
    "!echo {not_defined} stays as written",
    "def shout(word):\n    !echo {word.upper()}\nshout('inside')",
    "text = '''\n!not a command\n%not a magic\n'''\nprint(text.strip())",
    "total = (1 +\n    2)\nprint(total % 2)",
    "%env GREETING=hi\nimport os\nprint(os.environ['GREETING'])",
    "g = %env GREETING\nprint(g)",
    "%env NOT_SET_ANYWHERE",
    "%%bash\necho from bash\necho to stderr >&2",
    "%%bash\nexit 3",
    "%%capture captured\nprint('hidden')",
    "print(repr(captured.stdout))",
    "%%writefile script.py\nimport sys\nprint('args', sys.argv[1:])\nresult = 6 * 7\n",
    "%run script.py a 'b c'\nprint(result)",
    "%run missing.py",
    "os.makedirs('sub', exist_ok=True)\n%cd sub",
    "print(os.path.basename(os.getcwd()))\n%cd -",
    "%time x = sum(range(10))",
    "%time 6 * 7",
    "%timeit -n 3 -r 2 sum(range(10))",
    "%%timeit -n 2 -r 1\nsum(range(5))",
    "%%time\ny = 2\nprint(y)",
    "%nosuchmagic",
    "%%nosuchmagic\nbody",
    "%reset -f\n%who",
    "a_var = 1\nimport json\n%who",
    "%load_ext autoreload\n%autoreload 2\nprint('reload')",
    "%pwd",
    "!!echo listed",
    "%%html\n<b>bold</b>",
]

# IPython in a host process, as ipykernel runs it: `!` piped into sys.stdout, no colours
RUNNER = r"""
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
InteractiveShell.system = InteractiveShell.system_piped
shell = InteractiveShell.instance(colors="NoColor")
rows = []
for cell in json.load(sys.stdin):
    with capture_output() as cap:
        run = shell.run_cell(cell)
    error = run.error_in_exec or run.error_before_exec
    results = [o.data for o in cap.outputs]
    if run.result is not None:
        results.append(shell.display_formatter.format(run.result)[0])
    stdout = cap.stdout if error is None else cap.stdout.split("-" * 75)[0]  # not its traceback
    rows.append({"stdout": stdout, "stderr": cap.stderr if error is None else "",
                 "error": type(error).__name__ if error is not None else None, "results": results})
print(json.dumps(rows))
"""


def _normal(text: str, cwd: str) -> str:
    text = re.sub(r"^Out\[\d+\]: .*\n", "", text.replace(cwd, "<cwd>"), flags=re.M)
    # %timeit's warning when its runs differ widely: timing, printed by either side on a loaded machine
    text = re.sub(r"^The slowest run took .*\n(?:.*cached\.\n)?", "", text, flags=re.M)
    text = text.replace("+-", "±").replace("\r\n", "\n")
    return re.sub(r"\d[\d.]*(e[+-]?\d+)?\s?(ns|µs|us|ms|s)\b", "T", text)


def _unquoted(text: str) -> str:
    """E2B's SDK strips one pair of quotes from a result's text/plain (Result.text), as ours does."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _row(stdout: str, stderr: str, error: str | None, results: list[dict[str, Any]], cwd: str) -> dict[str, Any]:
    return {"stdout": _normal(stdout, cwd), "stderr": _normal(stderr, cwd), "error": error,
            "results": [{k: _normal(_unquoted(str(v)) if k == "text/plain" else str(v), cwd)
                         for k, v in r.items() if k in ("text/plain", "text/html")} for r in results]}


def test_cells_behave_as_in_ipython(fresh: Sandbox, tmp_path: Path) -> None:
    pytest.importorskip("IPython")
    native = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(CELLS), cwd=tmp_path,
                            capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert native.returncode == 0, native.stderr
    expected = [_row(**row, cwd=str(tmp_path)) for row in json.loads(native.stdout.splitlines()[-1])]

    got = []
    for cell in CELLS:
        run = fresh.run_code(cell, timeout=120)
        results = [{"text/plain": r.text or "", **({"text/html": r.html} if r.html else {})} for r in run.results]
        got.append(_row("".join(run.logs.stdout), "".join(run.logs.stderr) if run.error is None else "",
                        run.error.name if run.error else None, results, "/home/user"))
    mismatched = [(cell, want, have) for cell, want, have in zip(CELLS, expected, got, strict=True) if want != have]
    assert not mismatched, "\n".join("%r\n  IPython: %s\n  guest:   %s" % m for m in mismatched)


def test_guest_specifics(fresh: Sandbox) -> None:
    """What the table cannot compare: `!` inside `%%capture` (ipykernel pipes it into the cell's
    streams, as here), `obj?`, `get_ipython()`, an unknown magic's message, `%%script`."""
    run = fresh.run_code("%%capture cap\n!echo piped\nprint('printed')")
    assert run.error is None and run.logs.stdout == []
    assert fresh.run_code("cap.stdout").text == "piped\\nprinted\\n"
    run = fresh.run_code("%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\n"
                         "import matplotlib.pyplot as plt\nplt.plot([1, 2])")
    assert run.error is None and sum(r.png is not None for r in run.results) == 1, run
    run = fresh.run_code("len?")
    assert "Signature: len(obj, /)" in "".join(run.logs.stdout)
    run = fresh.run_code("get_ipython().run_line_magic('env', 'VIA=shell')\nimport os\nos.environ['VIA']")
    assert run.text == "shell"
    run = fresh.run_code("%nosuch 1")
    assert run.error is not None and (run.error.name, run.error.value) == (
        "UsageError", "Line magic function `%nosuch` not found.")
    run = fresh.run_code("%%script python3\nimport sys\nprint(sys.argv[0] or 'stdin', 2 ** 10)")
    assert "".join(run.logs.stdout) == "stdin 1024\n", run
    run = fresh.run_code("if True:\n    files = !ls /\nprint('home' in files, type(files).__name__)")
    assert "".join(run.logs.stdout) == "True SList\n"


def test_os_times_counts_seconds(fresh: Sandbox) -> None:
    """`%time` reads `os.times()`, whose WASI units were not seconds (user time grew ~10^7 a
    second): the boot gives the process's CPU time and the monotonic clock, as Linux does."""
    run = fresh.run_code("import os, time\nbefore = os.times()\nsum(range(300_000))\nafter = os.times()\n"
                         "(0 <= after.user - before.user < 5, abs(after.elapsed - time.monotonic()) < 1)")
    assert run.error is None and run.text == "(True, True)", run
