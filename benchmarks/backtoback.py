"""Issue 27's two creates rows alone: a new sandbox + `python3 -c 'print(1)'` (create, run,
kill; in-process, the runtime loaded) back to back and 0.2 s apart, against a clean venv's
`python3 -c 'print(1)'` subprocess, interleaved in rounds so both sides see the same load.
The same rows as `startup.py`'s first two, in a few seconds (for `interleave.py`; the notes:
benchmarks/notes/2026-12-02-back-to-back.md), and the same command in one running sandbox
(a loop of an agent's commands; notes/2026-12-02-parking.md).

    python benchmarks/backtoback.py --repeat 21 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from _common import clean_python

from declaw_wasm import Sandbox


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    python = str(clean_python())

    def native() -> None:
        subprocess.run([python, "-c", "print(1)"], check=True, capture_output=True)

    def ours() -> None:
        with Sandbox.create() as sbx:
            assert sbx.commands.run("python3 -c 'print(1)'").stdout == "1\n"

    running = Sandbox.create(timeout=3600)

    def same() -> None:
        assert running.commands.run("python3 -c 'print(1)'").stdout == "1\n"

    def timed(fn: object, gap: float) -> float:
        if gap:
            time.sleep(gap)
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        return time.perf_counter() - start

    Sandbox.create().kill()  # the runtime loaded
    for _ in range(3):
        ours()
        native()
    found: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for gap, label in ((0.0, "back to back"), (args.gap, f"{args.gap:g} s apart")):
            for side, fn in (("native", native), ("ours", ours), ("same", same)):
                found.setdefault((label, side), []).extend(timed(fn, gap) for _ in range(args.repeat))
    running.kill()
    print("| `python3 -c 'print(1)'` | native CPython | declaw-wasm, new sandbox | ratio, new sandbox | "
          "declaw-wasm, one sandbox | ratio, one sandbox |")
    print("|---|---|---|---|---|---|")
    for label in ("back to back", f"{args.gap:g} s apart"):
        n, o, r = (statistics.median(found[(label, side)]) for side in ("native", "ours", "same"))
        print(f"| {label} | {n * 1e3:.1f} ms | {o * 1e3:.1f} ms | {o / n:.2f}× | {r * 1e3:.1f} ms | {r / n:.2f}× |")


if __name__ == "__main__":
    main()
