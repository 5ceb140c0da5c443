"""Start-up and the seed's snippets: native CPython subprocesses vs. sandbox commands, side by side.

    python benchmarks/startup.py [--repeat N]

Prints a Markdown table of medians (paste it into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import HEADER, median_s, native, row  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm.paths import examples_dir  # noqa: E402


def seed_snippets() -> list[str]:
    namespace: dict[str, object] = {}
    source = (examples_dir() / "code_interpreter.py").read_text()
    exec(compile(source, "code_interpreter.py", "exec"), namespace)
    return list(namespace["SNIPPETS"])  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat

    start = time.perf_counter()
    Sandbox.create().kill()  # loads the runtime (compiled module from the cache)
    print(f"first Sandbox.create in this process (runtime load): {(time.perf_counter() - start) * 1000:.0f} ms\n")

    print(HEADER)

    def fresh_print1() -> None:
        with Sandbox.create() as s:
            s.commands.run("python3 -c 'print(1)'")

    print(row("`python3 -c 'print(1)'` on a new sandbox (create + run + kill)",
              median_s(native(["-c", "print(1)"]), repeat), median_s(fresh_print1, repeat)))
    with Sandbox.create(timeout=3600) as sbx:
        print(row("`python3 -c 'print(1)'` (sandbox already up)",
                  median_s(native(["-c", "print(1)"]), repeat),
                  median_s(lambda: sbx.commands.run("python3 -c 'print(1)'"), repeat)))
        print(row("`python3 -c 'import pandas'`", median_s(native(["-c", "import pandas"]), repeat),
                  median_s(lambda: sbx.commands.run("python3 -c 'import pandas'"), repeat)))
        with tempfile.TemporaryDirectory() as tmp:
            for i, code in enumerate(seed_snippets()):
                local = Path(tmp) / f"snip_{i}.py"
                local.write_text(code.replace("/tmp/chart.png", os.path.join(tmp, "chart.png")))
                sbx.files.write(f"/tmp/snip_{i}.py", code)
                label = ["sympy solve", "pandas groupby", "matplotlib savefig"][i]
                print(row(f"seed snippet {i} ({label})", median_s(native([str(local)]), repeat),
                          median_s(lambda: sbx.commands.run(f"python3 /tmp/snip_{i}.py"), repeat)))


if __name__ == "__main__":
    main()
