"""`git` in the sandbox's shell (guest/declaw_shell/git.py) against the host's git 2.39.

- Each script of git_cases.py runs under bash with the host's git and in a sandbox, in an empty
  folder with the same author, committer, dates and an empty $HOME: stdout, stderr and the exit
  status must match (commit ids, patches, status layouts, stat graphs included).
- What the sandbox's git writes is git's: a repository made and changed in the sandbox is checked
  by the host's `git fsck --strict` and reads the same there (log, status, diff of the last commit).
- A hostile repository (a tree naming `../escape`, `.git/config`, a path under a symbolic link)
  is refused at checkout, as git refuses it, and nothing is written outside the working tree.
- The diff engine (gitdiff.py) against `git diff --no-index` on seeded random edits: that part is
  host code (guest/declaw_shell/gitdiff.py imports nothing of the guest) and runs in the fast tier.
"""

from __future__ import annotations

import importlib.util
import io
import os
import random
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from declaw_wasm import Sandbox
from shell.git_cases import SCRIPTS

FOLDER = "/home/user/gitcases"
GUEST = Path(__file__).resolve().parents[2] / "guest" / "declaw_shell"
ENV = {"GIT_CONFIG_NOSYSTEM": "1", "TZ": "UTC", "LANG": "C.UTF-8",
       "GIT_AUTHOR_NAME": "A U Thor", "GIT_AUTHOR_EMAIL": "author@example.com",
       "GIT_COMMITTER_NAME": "C O Mitter", "GIT_COMMITTER_EMAIL": "committer@example.com",
       "GIT_AUTHOR_DATE": "1700000000 +0000", "GIT_COMMITTER_DATE": "1700000000 +0000"}
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs the host's git")


@pytest.fixture(scope="module")
def git_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    yield sandbox
    sandbox.kill()


def _host(script: str, folder: Path) -> tuple[str, str, int]:
    (folder / "home").mkdir(parents=True)
    (folder / "w").mkdir()
    run = subprocess.run(["bash", "-c", script], cwd=folder / "w", capture_output=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(folder / "home"), **ENV})
    out, err = run.stdout.decode(errors="replace"), run.stderr.decode(errors="replace")  # \r\n kept
    return out.replace(str(folder), "<D>"), err.replace(str(folder), "<D>"), run.returncode


def _guest(sbx: Sandbox, script: str, folder: str) -> tuple[str, str, int]:
    sbx.commands.run(f"rm -rf {folder} && mkdir -p {folder}/home {folder}/w")
    run = sbx.commands.run(script, cwd=f"{folder}/w", envs={"HOME": f"{folder}/home", **ENV}, timeout=120)
    return run.stdout.replace(folder, "<D>"), run.stderr.replace(folder, "<D>"), run.exit_code


@needs_git
@pytest.mark.guest
@pytest.mark.parametrize("case", range(len(SCRIPTS)), ids=lambda i: SCRIPTS[i][:60])
def test_as_git(git_sbx: Sandbox, tmp_path: Path, case: int) -> None:
    script = SCRIPTS[case]
    assert _guest(git_sbx, script, f"{FOLDER}/c{case}") == _host(script, tmp_path)


def _download(sbx: Sandbox, folder: str, into: Path) -> None:
    sbx.commands.run(f"tar cf /tmp/repo.tar -C {folder} .")
    data = sbx.files.read("/tmp/repo.tar", format="bytes")
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as archive:
        archive.extractall(into, filter="data")


@needs_git
@pytest.mark.guest
def test_a_repository_made_here_is_gits(git_sbx: Sandbox, tmp_path: Path) -> None:
    folder = f"{FOLDER}/interop"
    script = ("git init -q && mkdir -p src && printf 'print(1)\\n' > src/main.py && echo '*.log' > .gitignore && "
              "git add -A && git commit -qm first && git checkout -q -b feature && echo x >> src/main.py && "
              "git commit -qam second && git tag -a v1 -m 'version 1' && git checkout -q master && "
              "git merge -q feature && git mv src/main.py src/app.py && git commit -qm rename && "
              "echo wip > notes.txt && git add notes.txt && git stash -q && echo dirty >> .gitignore")
    run = git_sbx.commands.run(f"rm -rf {folder} && mkdir -p {folder} && cd {folder} && {script}",
                               envs=ENV, timeout=120)
    assert run.exit_code == 0, run.stderr
    _download(git_sbx, folder, tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **ENV}

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    git("fsck", "--strict", "--no-progress")
    assert git("log", "--format=%s", "--all").split() == ["rename", "second", "first"] or \
        git("log", "--format=%s").split() == ["rename", "second", "first"]
    assert git("status", "--porcelain") == " M .gitignore\n"
    assert git("stash", "list") == "stash@{0}: WIP on master: %s rename\n" % git("rev-parse", "--short", "HEAD").strip()
    assert git("cat-file", "-t", "v1") == "tag\n"
    guest_show = git_sbx.commands.run("git show --stat HEAD", cwd=folder, envs=ENV).stdout
    assert git("show", "--stat", "HEAD") == guest_show


def _commit(store: object, tree: bytes, message: bytes) -> bytes:
    from dulwich.objects import Commit

    commit = Commit()
    commit.tree = tree
    commit.author = commit.committer = b"Evil <e@x>"
    commit.author_time = commit.commit_time = 1700000000
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message
    store.add_object(commit)  # type: ignore[attr-defined]
    return bytes(commit.id)


def _evil_repository(top: Path) -> None:
    """A repository whose branch `evil0` holds `../escape` and `evil1` holds `.git/x`, as a hostile
    upload would hold them (objects written with dulwich; git itself refuses to make such trees)."""
    from dulwich.objects import Blob, ObjectID, Tree
    from dulwich.refs import Ref
    from dulwich.repo import Repo

    repo = Repo.init(str(top), mkdir=True)
    store = repo.object_store
    blob = Blob.from_string(b"pwned\n")
    store.add_object(blob)
    for number, (folder, name) in enumerate(((b"..", b"escape"), (b".git", b"x"))):
        inner = Tree()
        inner.add(name, 0o100644, blob.id)
        store.add_object(inner)
        outer = Tree()
        outer.add(folder, 0o40000, inner.id)
        store.add_object(outer)
        repo.refs[Ref(b"refs/heads/evil%d" % number)] = ObjectID(_commit(store, outer.id, b"evil\n"))
    base = Tree()
    base.add(b"ok", 0o100644, blob.id)
    store.add_object(base)
    repo.refs[Ref(b"refs/heads/master")] = ObjectID(_commit(store, base.id, b"base\n"))


@pytest.mark.guest
def test_a_hostile_repository_is_refused(git_sbx: Sandbox, tmp_path: Path) -> None:
    _evil_repository(tmp_path / "evil")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        tar.add(tmp_path / "evil", arcname="evil")
    git_sbx.files.write("/tmp/evil.tar", archive.getvalue())
    run = git_sbx.commands.run("rm -rf /home/user/ev && mkdir -p /home/user/ev && cd /home/user/ev && "
                               "tar xf /tmp/evil.tar && cd evil && git reset -q --hard && "
                               "for b in evil0 evil1; do git checkout -q $b; echo \"$b=$?\"; done; "
                               "ls /home/user/ev; ls .git; cat /home/user/ev/escape .git/x 2>&1", envs=ENV)
    assert "evil0=128" in run.stdout and "evil1=128" in run.stdout, run
    assert "error: invalid path '../escape'" in run.stderr
    assert "error: invalid path '.git/x'" in run.stderr
    assert "pwned" not in run.stdout


def _gitdiff() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gitdiff_under_test", GUEST / "gitdiff.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@needs_git
def test_the_diff_engine_is_xdiffs(tmp_path: Path) -> None:
    """Hunks byte for byte as `git diff --no-index` on 150 seeded random edits of files whose lines
    repeat (where Myers' choices, the sliding and the indent heuristic show)."""
    gitdiff = _gitdiff()
    rng = random.Random(2039)
    alphabets = [["a\n", "b\n", "c\n", "\n", "  x\n", "}\n"], [f"l{i}\n" for i in range(40)],
                 ["def f():\n", "    x\n", "    y\n", "\n", "    return\n", "}\n", "{\n"]]
    for case in range(150):
        alphabet = rng.choice(alphabets)
        old = [rng.choice(alphabet) for _ in range(rng.randint(0, 60))]
        new = list(old)
        for _ in range(rng.randint(1, 8)):
            at = rng.randint(0, len(new))
            roll = rng.random()
            if roll < 0.4:
                new[at:at] = [rng.choice(alphabet) for _ in range(rng.randint(1, 5))]
            elif roll < 0.8 and new:
                del new[at:at + rng.randint(1, 4)]
            elif new:
                new[min(at, len(new) - 1)] = rng.choice(alphabet)
        old_bytes, new_bytes = "".join(old).encode(), "".join(new).encode()
        if rng.random() < 0.1:
            new_bytes = new_bytes[:-1]
        (tmp_path / "o").write_bytes(old_bytes)
        (tmp_path / "n").write_bytes(new_bytes)
        done = subprocess.run(["git", "diff", "--no-index", "--no-color", "o", "n"], cwd=tmp_path,
                              capture_output=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                                        "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)})
        parts = re.split(rb"\n\+\+\+ (?:b/n|/dev/null)\n", done.stdout, maxsplit=1)
        expected = parts[1] if len(parts) > 1 else b""
        ours = b"".join(gitdiff.unified(gitdiff.split_lines(old_bytes), gitdiff.split_lines(new_bytes)))
        assert ours == expected, (case, old_bytes, new_bytes)
