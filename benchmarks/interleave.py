"""Any benchmark script, run against two code trees in alternation (OLD, NEW, OLD, NEW...), so
that both see the same machine load; prints, for every figure the script prints in a Markdown
table, the median of each tree's runs side by side with NEW / OLD.

    python benchmarks/interleave.py OLD NEW --runs 7 -- benchmarks/packages.py --repeat 3
    python benchmarks/interleave.py /work/old . --runs 7 -- benchmarks/egress.py --part net --repeat 10
    python benchmarks/interleave.py /work/old . --old-env DECLAW_WASM_CACHE=/work/cache-old -- ...

The script is the one given (the same file for both trees); each run is a fresh process with
PYTHONPATH set to the tree, so each tree's package is imported. A figure is a number with a
unit (`12.3 ms`, `45 MiB/s`, `2.1×`, `35 %`) in a table cell; cells are matched by their row's
first cell and the column's header, so the script must print the same tables every run.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

FIGURE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)\s*(ms|s|µs|us|MiB/s|MB/s|KiB|MiB|GiB|×|x|%)?\s*$")


def figures(output: str) -> dict[tuple[str, str], tuple[float, str]]:
    """(row label, column header) -> (value, unit) for every numeric cell of every table."""
    found: dict[tuple[str, str], tuple[float, str]] = {}
    header: list[str] = []
    for line in output.splitlines():
        if not line.startswith("|"):
            header = []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if all(set(c) <= set("-: ") for c in cells):
            continue
        if not header:
            header = cells
            continue
        for name, cell in zip(header[1:], cells[1:], strict=False):
            match = FIGURE.match(cell)
            if match:
                found[(cells[0], name)] = (float(match.group(1)), match.group(2) or "")
    return found


def run(tree: str, script: list[str], extra: dict[str, str]) -> str:
    env = {**os.environ, **extra, "PYTHONPATH": str(Path(tree).resolve())}
    done = subprocess.run([sys.executable, *script], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{script[0]} failed in {tree} (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def _assignments(parser: argparse.ArgumentParser, given: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition("=")
        if not sep or not name or name == "PYTHONPATH":
            parser.error(f"--old-env/--new-env take NAME=VALUE (not PYTHONPATH, which is the tree): {item!r}")
        found[name] = value
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--old-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for OLD's runs only (repeatable), e.g. its own "
                             "DECLAW_WASM_CACHE when the trees' guest code differs: each needs its warm image")
    parser.add_argument("--new-env", action="append", default=[], metavar="NAME=VALUE",
                        help="the same for NEW's runs")
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("give the script to run after --")
    at = argv.index("--")
    args, script = parser.parse_args(argv[:at]), argv[at + 1:]
    extra = {side: _assignments(parser, getattr(args, f"{side}_env")) for side in ("old", "new")}
    runs: dict[str, list[dict[tuple[str, str], tuple[float, str]]]] = {"old": [], "new": []}
    for i in range(args.runs):
        for side in ("old", "new"):
            runs[side].append(figures(run(getattr(args, side), script, extra[side])))
            print(f"run {i + 1}/{args.runs} {side} done", file=sys.stderr, flush=True)
    keys = [k for k in runs["new"][0] if all(k in r for r in runs["old"] + runs["new"])]
    print(f"`{' '.join(script)}`, {args.runs} runs each, alternating; medians\n")
    print("| row | column | old | new | new / old |\n|---|---|---|---|---|")
    for key in keys:
        old = statistics.median(r[key][0] for r in runs["old"])
        new = statistics.median(r[key][0] for r in runs["new"])
        unit = runs["new"][0][key][1]
        ratio = f"{new / old:.2f}" if old else "n/a"
        print(f"| {key[0]} | {key[1]} | {old:g} {unit} | {new:g} {unit} | {ratio} |")


if __name__ == "__main__":
    main()
