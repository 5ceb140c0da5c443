"""Templates and packages: start-up per template, bundle imports against native CPython, and
`pip install` inside a sandbox (first install vs one served from the host's wheel cache).

    python benchmarks/packages.py [--repeat 5]

Native baselines import the same packages in a host subprocess when the host has them
(`pip install plotly ipython requests`); otherwise that column says "n/a".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _common import HEADER, median_s, native, row  # noqa: E402

from declaw_wasm import Sandbox, Template, delete_template  # noqa: E402
from wheels import make_wheel  # noqa: E402

# module -> what a clean native venv needs to import it
IMPORTS = {"plotly.express": ["plotly", "pandas"], "IPython": ["ipython"], "requests": ["requests"],
           "rich": ["rich"]}


def start_print_kill(template: str) -> Callable[[], None]:
    def once() -> None:
        with Sandbox.create(template=template) as s:
            s.commands.run("python3 -c 'print(1)'")
    return once


def run_in(sbx: Sandbox, code: str) -> Callable[[], object]:
    return lambda: sbx.commands.run(f"python3 -c '{code}'")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    Sandbox.create().kill()  # load the runtime and the bundle once

    print("| template | create + `python3 -c 'print(1)'` + kill (median) |\n|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data.bin"
        data.write_bytes(os.urandom(1 << 20))
        Template.build(Template().from_template("code-interpreter").copy(data, "/home/user/data.bin"),
                       alias="bench-custom")
    try:
        for template in ("base", "code-interpreter", "bench-custom"):
            label = template + (" (1 MiB of template files)" if template == "bench-custom" else "")
            print(f"| {label} | {median_s(start_print_kill(template), repeat) * 1000:.1f} ms |")
    finally:
        delete_template("bench-custom")

    print("\n" + HEADER)
    with Sandbox.create(timeout=3600) as sbx:
        for module, needs in IMPORTS.items():
            code = f"import {module}"
            guest = median_s(run_in(sbx, code), repeat)
            print(row(f"`{code}` (bundle)", median_s(native(["-c", code], needs), repeat), guest))

    print("\n| `pip install` inside a sandbox (offline wheelhouse, 1 small wheel) | time |\n|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        # a version of its own each run: the wheel cache never replaces a cached file by another
        # with the same name and other bytes (make_wheel's differ run to run), so a reused
        # version would be downloaded from the wheelhouse every time, never taken from the cache
        make_wheel(Path(tmp), "benchpkg", f"1.0.{time.time_ns()}")
        os.environ["DECLAW_WASM_WHEELHOUSE"] = tmp
        os.environ["DECLAW_WASM_OFFLINE"] = "1"
        for label in ("first sandbox (wheel copied into the cache)", "second sandbox (from the cache)"):
            with Sandbox.create() as s:
                start = time.perf_counter()
                r = s.commands.run("pip install benchpkg", timeout=300)
                took = time.perf_counter() - start
                assert r.exit_code == 0, r.stderr
            print(f"| {label} | {took * 1000:.0f} ms |")
        native_s = median_s(lambda: subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--find-links", tmp,
             "--quiet", "benchpkg"], check=True, capture_output=True), 3)
        print(f"| (host pip alone, `install --dry-run` of the same wheel) | {native_s * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
