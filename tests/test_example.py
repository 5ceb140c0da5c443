"""The seed example prints what CPython prints (run as a user would: a separate process)."""

import subprocess
import sys
from pathlib import Path
import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent


def test_code_interpreter_example_output() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "code_interpreter.py")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:6] == [
        "--- snippet 0: exit 0",
        "solution: {x: 13/7, y: 11/7}",
        "--- snippet 1: exit 0",
        "{'APAC': 150, 'EU': 80}",
        "--- snippet 2: exit 0",
        "wrote /tmp/chart.png",
    ]
    size = int(lines[6].split(":")[1].split()[0])
    assert 10_000 < size < 200_000


def test_chart_is_a_real_png(sbx: Sandbox) -> None:
    code = ("import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [3, 1, 2])\nplt.savefig('/tmp/t_chart.png', dpi=120)\n")
    sbx.files.write("/tmp/t_chart.py", code)
    r = sbx.commands.run("python3 /tmp/t_chart.py", timeout=60)
    assert r.exit_code == 0, r.stderr
    png = sbx.files.read("/tmp/t_chart.png", format="bytes")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert sbx.files.get_info("/tmp/t_chart.png").size == len(png) > 10_000
