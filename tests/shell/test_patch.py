"""`patch` (guest/declaw_shell/patch.py) against GNU patch: each case's files and diff are laid out
in a host folder and in a sandbox folder, `patch ARGS < the.diff` (or with -i) runs in both, and
stdout, stderr, the exit status and the resulting files (FILE.orig, FILE.rej, created and deleted
files included) must match. The diffs come from the host's `diff -u` (or are git's, as typed),
never from the code under test. A seeded random run adds edits, targets that drifted from the
diff's original (offsets, fuzz, failures, reversed patches) and option sets; there the .rej
file's header and the "FAILED at" line are left out (GNU numbers a rejected hunk from the context
it fuzzed away; the hunk itself is the same)."""

from __future__ import annotations

import os
import random
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from declaw_wasm import Sandbox

pytestmark = [pytest.mark.guest,  # every test here starts guests (tests/conftest.py)
              pytest.mark.skipif(shutil.which("patch") is None or shutil.which("diff") is None,
                                 reason="needs GNU patch and diff on the host")]

Files = dict[str, str]


def udiff(a: str, b: str, old: str = "a/f.txt", new: str = "b/f.txt", context: int = 3) -> str:
    """`diff -U context` of two texts, under the given names (the host's diff)."""
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"udiff-{os.getpid()}"
    work.mkdir(exist_ok=True)
    (work / "x").write_text(a)
    (work / "y").write_text(b)
    out = subprocess.run(["diff", f"-U{context}", "x", "y"], capture_output=True, text=True, cwd=work).stdout
    return f"--- {old}\n+++ {new}\n" + "".join(out.splitlines(keepends=True)[2:])


N = "".join(f"{i}\n" for i in range(1, 31))
M = N.replace("5\n", "five\n", 1).replace("\n25\n", "\n25a\n25b\n")
D = udiff(N, M)
TOP2 = "0\n0\n" + N
GIT = """diff --git a/keep.txt b/keep.txt
index b77b4eb..7061c57 100644
--- a/keep.txt
+++ b/keep.txt
@@ -1,2 +1,2 @@
 x
-y
+Y
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..07f33c4
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+new
+file
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 286c5f5..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
"""
MULTI = udiff(N, M) + udiff("a\nb\nc\n", "a\nB\nc\n", "a/g.txt", "b/g.txt")

# (files, diff, arguments, the diff on stdin (else it is the file the.diff, named by the arguments))
CASES: list[tuple[Files, str, list[str], bool]] = [
    ({"f.txt": N}, D, ["-p1"], True),
    ({"f.txt": TOP2}, D, ["-p1"], True),  # offset: FILE.orig kept
    ({"f.txt": M}, D, ["-p1"], True),  # already applied: reversed, no terminal to ask
    ({"f.txt": M}, D, ["-p1", "-N"], True),
    ({"f.txt": M}, D, ["-p1", "-t"], True),
    ({"f.txt": M}, D, ["-p1", "-f"], True),
    ({"f.txt": M}, D, ["-R", "-p1"], True),
    ({"f.txt": M}, D, ["-Rp1"], True),
    ({"f.txt": N.replace("3\n", "THREE\n", 1)}, D, ["-p1"], True),  # fuzz 1
    ({"f.txt": N.replace("2\n", "TWO\n", 1)}, D, ["-p1"], True),  # fuzz 2
    ({"f.txt": N.replace("4\n", "FOUR\n", 1)}, D, ["-p1"], True),  # FAILED: FILE.rej
    ({"f.txt": N.replace("3\n", "THREE\n", 1)}, D, ["-p1", "-F0"], True),
    ({"f.txt": N.replace("7\n", "SEVEN\n", 1)}, D, ["-p1", "--fuzz=1"], True),
    ({"f.txt": N.replace("24\n", "X\n", 1)}, D, ["-p1"], True),
    ({}, D, ["-p1"], True),  # no file to patch
    ({"f.txt": N}, D, [], True),  # no -p: the names' last parts
    ({"f.txt": N}, D, ["-p0"], True),
    ({"sub/f.txt": N}, udiff(N, M, "a/sub/f.txt", "b/sub/f.txt"), ["-p1"], True),
    ({"sub/f.txt": N}, udiff(N, M, "a/sub/f.txt", "b/sub/f.txt"), ["-d", "sub", "-p2"], True),
    ({"f.txt": N}, D, ["-p1", "--dry-run"], True),
    ({"f.txt": TOP2}, D, ["-p1", "--dry-run"], True),
    ({"f.txt": N.replace("4\n", "FOUR\n", 1)}, D, ["-p1", "--dry-run"], True),
    ({"f.txt": N}, D, ["-p1", "-s"], True),
    ({"f.txt": N}, D, ["-p1", "-b"], True),
    ({"f.txt": TOP2}, D, ["-p1", "--no-backup-if-mismatch"], True),
    ({"f.txt": N}, D, ["-p1", "-i", "the.diff"], False),
    ({"f.txt": N}, D, ["--strip=1", "--input=the.diff"], False),
    ({"g.txt": N}, D, ["g.txt"], True),  # ORIGFILE
    ({"g.txt": N}, D, ["g.txt", "the.diff"], False),
    ({"f.txt": N}, "garbage\n", ["-p1"], True),
    ({"f.txt": N}, "", ["-p1"], True),
    ({"f.txt": N}, udiff(N, M, context=0), ["-p1"], True),
    ({"f.txt": "0\n" + N}, udiff(N, M, context=0), ["-p1"], True),
    ({"f.txt": N}, udiff(N, M, context=1), ["-p1"], True),
    ({"f.txt": "a\nb"}, udiff("a\nb", "a\nc"), ["-p1"], True),  # no newline at the end
    ({"f.txt": "a\nb\n"}, udiff("a\nb\n", "a\nb"), ["-p1"], True),
    ({"f.txt": "a\nb"}, udiff("a\nb", "a\nb\nc\n"), ["-p1"], True),
    ({"keep.txt": "x\ny\n", "old.txt": "gone\n"}, GIT, ["-p1"], True),  # git: new and deleted files
    ({"keep.txt": "x\nY\n", "new.txt": "new\nfile\n"}, GIT, ["-p1", "-R"], True),
    ({"keep.txt": "x\ny\n"}, GIT, ["-p1"], True),  # deleting a file that is not there
    ({"f.txt": N, "g.txt": "a\nb\nc\n"}, MULTI, ["-p1"], True),
    ({"f.txt": N, "g.txt": "a\nX\nc\n"}, MULTI, ["-p1"], True),
    ({"f.txt": N}, D.replace("+five", "+five\n+more"), ["-p1"], True),  # malformed
    ({"f.txt": N}, D, ["-p1", "-Q"], True),
    ({"f.txt": N}, D, ["-p"], True),
    ({"f.txt": N}, D, ["-p1", "--bogus"], True),
    ({"f.txt": N}, D, ["-p1", "-d", "nowhere"], True),
    ({"f.txt": N}, D, ["-p1", "-i", "missing.diff"], False),
]


def _random_cases(seed: int, count: int) -> list[tuple[Files, str, list[str], bool]]:
    rng = random.Random(seed)
    words = ["x", "y", "z", "1", "2", "", "a b"]

    def edit(lines: list[str], times: int) -> list[str]:
        lines = list(lines)
        for _ in range(times):
            i = rng.randrange(len(lines) + 1)
            roll = rng.random()
            if roll < 0.4 and lines:
                del lines[min(i, len(lines) - 1)]
            elif roll < 0.7:
                lines.insert(i, rng.choice(words) + str(rng.randrange(9)) + "\n")
            elif lines:
                lines[min(i, len(lines) - 1)] = "E" + str(rng.randrange(99)) + "\n"
        return lines

    cases: list[tuple[Files, str, list[str], bool]] = []
    while len(cases) < count:
        base = [rng.choice(words) + "\n" for _ in range(rng.randrange(3, 40))]
        new = edit(base, rng.randrange(1, 6))
        if new == base:
            continue
        diff = udiff("".join(base), "".join(new), context=rng.choice([0, 1, 3, 3, 3]))
        target = edit(base, rng.randrange(0, 3)) if rng.random() < 0.6 else base
        args = rng.choice([["-p1"], ["-p1", "-N"], ["-p1", "-t"], ["-p1", "-F1"], ["-p1", "--dry-run"], ["-p1", "-f"]])
        cases.append(({"f.txt": "".join(target)}, diff, args, True))
    return cases


RANDOM = _random_cases(20261203, 60)
FAILED_AT = re.compile(r"^(Hunk #\d+ FAILED at )\d+", re.M)


def _command(args: list[str], stdin: bool) -> str:
    return "patch " + " ".join(shlex.quote(a) for a in args) + (" < the.diff" if stdin else "")


def _lay_out(folder: Path, files: Files, diff: str) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    (folder / "the.diff").write_text(diff)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _host(folder: Path, args: list[str], stdin: bool) -> tuple[str, str, int]:
    done = subprocess.run(["bash", "-c", _command(args, stdin)], cwd=folder, capture_output=True, text=True,
                          timeout=30, stdin=subprocess.DEVNULL, start_new_session=True)  # no terminal
    return done.stdout, done.stderr, done.returncode


@pytest.fixture(scope="module")
def patch_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    yield sandbox
    sandbox.kill()


def _run_both(sandbox: Sandbox, tmp_path: Path, name: str, case: tuple[Files, str, list[str], bool],
              ) -> tuple[tuple[str, str, int, dict[str, bytes]], tuple[str, str, int, dict[str, bytes]]]:
    files, diff, args, stdin = case
    host_dir = tmp_path / name
    host_dir.mkdir()
    _lay_out(host_dir, files, diff)
    out, err, code = _host(host_dir, args, stdin)
    host = (out, err, code, _tree(host_dir))
    guest_dir = f"/home/user/patch/{name}"
    writes = [{"path": f"{guest_dir}/{n}", "data": t} for n, t in {**files, "the.diff": diff}.items()]
    sandbox.files.write_files(writes)
    run = sandbox.commands.run(_command(args, stdin), cwd=guest_dir, timeout=60)
    local = tmp_path / f"{name}-guest"
    local.mkdir()
    for entry in sandbox.files.list(guest_dir, depth=10):
        if entry.type is not None and entry.type.value == "file":
            target = local / os.path.relpath(entry.path, guest_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(sandbox.files.read(entry.path, format="bytes"))
    return host, (run.stdout, run.stderr, run.exit_code, _tree(local))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[f"p{i:02d}" for i in range(len(CASES))])
def test_patch_matches_gnu_patch(patch_sbx: Sandbox, tmp_path: Path, index: int) -> None:
    host, guest = _run_both(patch_sbx, tmp_path, f"p{index:02d}", CASES[index])
    assert guest == host, (CASES[index][2], CASES[index][1])


def test_patch_matches_gnu_patch_on_random_edits(patch_sbx: Sandbox, tmp_path: Path) -> None:
    mismatched = []
    for index, case in enumerate(RANDOM):
        host, guest = _run_both(patch_sbx, tmp_path, f"r{index:02d}", case)

        def plain(result: tuple[str, str, int, dict[str, bytes]]) -> tuple[object, ...]:
            out, err, code, tree = result
            return (FAILED_AT.sub(r"\1N", out), err, code, {k: v for k, v in tree.items() if not k.endswith(".rej")})

        if plain(host) != plain(guest):
            mismatched.append((case[2], case[1], host, guest))
    assert not mismatched, "\n\n".join(map(repr, mismatched[:3]))
