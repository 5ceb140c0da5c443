"""The shell: command lines through `commands.run` vs. native `bash -c`, side by side.

    python benchmarks/shell.py [--repeat N]

Both run on the same files (a small project tree); native is a `bash -c` subprocess in a
temporary folder, declaw-wasm a guest per command line, each after `--gap` seconds of quiet
(default 0.2 s, untimed: an agent's pace), so that the sandbox's next guest is parked. Prints a
Markdown table of medians (paste it into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path
from typing import Callable

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from _common import after_gap, clean_python, median_s  # noqa: E402

from declaw_wasm import testing  # noqa: E402
from declaw_wasm import Sandbox  # noqa: E402

TREE = {f"src/mod{i}.py": "".join(f"def f{j}():\n    return {j}  # TODO {j}\n" for j in range(40))
        for i in range(20)}
TREE["data.csv"] = "name,n\n" + "".join(f"row{i},{i % 97}\n" for i in range(2000))

LINES = [
    ("`echo hi`", "echo hi"),
    ("`ls -la | wc -l`", "ls -la | wc -l"),
    ("`grep -rn TODO src | wc -l` (20 files)", "grep -rn TODO src | wc -l"),
    ("`cut | sort | uniq -c | sort -rn | head` (2000 rows)",
     "cut -d, -f2 data.csv | sort | uniq -c | sort -rn | head -n 3"),
    ("`awk` sum over 2000 rows", "awk -F, 'NR>1 {s+=$2} END {print s}' data.csv"),
    ("`python3 -c 'print(1)' | wc -c`", "python3 -c 'print(1)' | wc -c"),
    ("`python3 -c 'print(1)' > out.txt && cat out.txt`", "python3 -c 'print(1)' > out.txt && cat out.txt"),
    ("`for i in $(seq 100); do echo $i; done | tail -n 1`",
     "for i in $(seq 100); do echo $i; done | tail -n 1"),
    ("`{ for i in $(seq 100); do echo $i; echo e >&2; done; } > log 2>&1; wc -l < log`",
     "{ for i in $(seq 100); do echo $i; echo e >&2; done; } > log 2>&1; wc -l < log"),
    # git (guest/declaw_shell/git.py, over dulwich) in the 21-file repository SETUP makes
    ("`git status --porcelain`", "git status --porcelain"),
    ("`git diff --stat`", "git diff --stat"),
    ("`git log --oneline | wc -l`", "git log --oneline | wc -l"),
    ("`git add -A && git commit -q && git reset -q --soft HEAD~1`",
     "git add -A && git commit -qm change && git reset -q --soft HEAD~1"),
]
# the repository the git lines use, made the same way in both places (same ids, same dates)
SETUP = "git init -q && git add -A && git commit -qm base && echo '# changed' >> src/mod3.py"
GIT_ENV = {"GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com", "GIT_COMMITTER_NAME": "Bench",
           "GIT_COMMITTER_EMAIL": "bench@example.com", "GIT_AUTHOR_DATE": "1700000000 +0000",
           "GIT_COMMITTER_DATE": "1700000000 +0000", "GIT_CONFIG_NOSYSTEM": "1", "TZ": "UTC"}


def natively(line: str, host: Path, env: dict[str, str]) -> Callable[[], object]:
    return lambda: subprocess.run(["bash", "-c", line], cwd=host, env=env, capture_output=True)


def in_sandbox(sbx: Sandbox, line: str) -> Callable[[], object]:  # the git lines' identity and dates
    return lambda: sbx.commands.run(line, cwd="/home/user/bench", envs=GIT_ENV)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    repeat, gap = args.repeat, args.gap
    host = Path(tempfile.mkdtemp(prefix="shell-bench-"))
    for name, content in TREE.items():
        (host / name).parent.mkdir(parents=True, exist_ok=True)
        (host / name).write_text(content)
    sbx = Sandbox.create(timeout=3600)
    sbx.files.write_files([{"path": f"/home/user/bench/{n}", "data": c} for n, c in TREE.items()])
    # `python3` in native lines: a clean venv's (a pyenv shim or a development venv starts 5-20× slower)
    env = {"PATH": f"{clean_python().parent}:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(host), **GIT_ENV}
    subprocess.run(["bash", "-c", SETUP], cwd=host, env=env, check=True)
    sbx.commands.run(SETUP, cwd="/home/user/bench", envs=GIT_ENV)
    print(f"guest path: {'warm image' if testing.is_warm(sbx) else 'cold'}")
    print("| command line | native `bash -c` | declaw-wasm | ratio |\n|---|---|---|---|")
    for label, line in LINES:
        expected = subprocess.run(["bash", "-c", line], cwd=host, env=env, capture_output=True).stdout
        got = sbx.commands.run(line, cwd="/home/user/bench", envs=GIT_ENV).stdout
        assert got == expected.decode(), (line, got, expected)
        native_s = median_s(natively(line, host, env), repeat)
        sandbox_s = after_gap(in_sandbox(sbx, line), repeat, gap)
        print(f"| {label} | {native_s * 1000:.1f} ms | {sandbox_s * 1000:.1f} ms | "
              f"{sandbox_s / native_s:.1f}× |")
    sbx.kill()


if __name__ == "__main__":
    main()
