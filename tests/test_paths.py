"""Path calls with trailing slashes (and their neighbours) answer in the guest as on Linux.

One table of path operations runs natively (this machine's Python, in a temporary folder) and in
a sandbox; each operation starts from the same fresh fixture in a folder of its own, and the
outcome (result or errno name) and the folder's state afterwards must be the same. Found by a
pandas task whose `os.rmdir("dir/")` raised EINVAL only in the sandbox (declaw_wasm/_wasm/paths.py).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

TABLE = r'''
import errno, json, os, shutil


def fixture():
    for folder in ("d", "empty", "empty2", "full/sub", "tree/a/b"):
        os.makedirs(folder)
    for name in ("f", "g", "full/x", "tree/a/b/c.txt"):
        with open(name, "w") as out:
            out.write("x")
    os.symlink("empty", "ln_dir")
    os.symlink("f", "ln_file")
    os.symlink("missing", "ln_dangling")

def opened(path, flags=os.O_RDONLY):
    os.close(os.open(path, flags))

CASES = {
    "rmdir empty/": lambda: os.rmdir("empty/"),
    "rmdir empty//": lambda: os.rmdir("empty//"),
    "rmdir empty/.": lambda: os.rmdir("empty/."),
    "rmdir full/": lambda: os.rmdir("full/"),
    "rmdir f/": lambda: os.rmdir("f/"),
    "rmdir missing/": lambda: os.rmdir("missing/"),
    "rmdir ln_dir/": lambda: os.rmdir("ln_dir/"),
    "rmdir ln_dangling/": lambda: os.rmdir("ln_dangling/"),
    "rmdir d/../empty/": lambda: os.rmdir("d/../empty/"),
    "rmtree tree/": lambda: shutil.rmtree("tree/"),
    "rmtree full//": lambda: shutil.rmtree("full//"),
    "unlink f/": lambda: os.unlink("f/"),
    "unlink empty/": lambda: os.unlink("empty/"),
    "unlink ln_dir/": lambda: os.unlink("ln_dir/"),
    "unlink ln_file/": lambda: os.unlink("ln_file/"),
    "unlink missing/": lambda: os.unlink("missing/"),
    "unlink ln_dir": lambda: os.unlink("ln_dir"),
    "unlink f": lambda: os.unlink("f"),
    "rename empty/ moved": lambda: os.rename("empty/", "moved"),
    "rename empty moved/": lambda: os.rename("empty", "moved/"),
    "rename empty/ empty2/": lambda: os.rename("empty/", "empty2/"),
    "rename empty/ full/": lambda: os.rename("empty/", "full/"),
    "rename f/ h": lambda: os.rename("f/", "h"),
    "rename f h/": lambda: os.rename("f", "h/"),
    "replace d/ d2/": lambda: os.replace("d/", "d2/"),
    "mkdir new/": lambda: os.mkdir("new/"),
    "mkdir new//": lambda: os.mkdir("new//"),
    "mkdir d/": lambda: os.mkdir("d/"),
    "mkdir f/": lambda: os.mkdir("f/"),
    "mkdir ln_file/": lambda: os.mkdir("ln_file/"),
    "makedirs a/b/c/": lambda: os.makedirs("a/b/c/"),
    "stat d/": lambda: os.stat("d/").st_nlink >= 1,
    "stat f/": lambda: os.stat("f/"),
    "stat ln_dir/": lambda: os.stat("ln_dir/").st_nlink >= 1,
    "stat ln_file/": lambda: os.stat("ln_file/"),
    "lstat ln_dir/": lambda: os.path.isdir("ln_dir/"),
    "exists f/": lambda: os.path.exists("f/"),
    "isdir d//": lambda: os.path.isdir("d//"),
    "open d/": lambda: opened("d/"),
    "open f/": lambda: opened("f/"),
    "open new/ for writing": lambda: open("new/", "w"),
    "open f/ for writing": lambda: open("f/", "w"),
    "listdir full/": lambda: os.listdir("full/"),
    "scandir full//": lambda: sorted(e.name for e in os.scandir("full//")),
    "chdir d/": lambda: os.chdir("d/") or os.chdir(".."),
    "utime d/": lambda: os.utime("d/"),
    "readlink ln_dir/": lambda: os.readlink("ln_dir/"),
    "readlink ln_dir": lambda: os.readlink("ln_dir"),
    "symlink f s/": lambda: os.symlink("f", "s/"),
    "link f l/": lambda: os.link("f", "l/"),
}

def state(root="."):
    found = []
    for top, folders, files in os.walk(root):
        for name in sorted(folders + files):
            path = os.path.join(top, name)
            kind = "link" if os.path.islink(path) else "dir" if os.path.isdir(path) else "file"
            found.append(f"{path[len(root) + 1:]}:{kind}")
        folders.sort()
    return sorted(found)

results = {}
for i, (name, case) in enumerate(CASES.items()):
    os.makedirs(f"case{i}")
    os.chdir(f"case{i}")
    fixture()
    try:
        value = case()
        outcome = ["ok", value if isinstance(value, (bool, int, str, list, type(None))) else type(value).__name__]
    except OSError as exc:
        outcome = ["error", errno.errorcode.get(exc.errno, exc.errno)]
    results[name] = [outcome, state()]
    os.chdir("..")
print(json.dumps(results))
'''


@pytest.fixture(scope="module")
def native_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[object]]:
    if not sys.platform.startswith("linux"):
        pytest.skip("the table compares with Linux")
    work = tmp_path_factory.mktemp("native-paths")
    done = subprocess.run([sys.executable, "-c", TABLE], cwd=work, capture_output=True, text=True,
                          check=True, timeout=60)
    return json.loads(done.stdout)


def test_path_calls_answer_as_on_linux(local_sbx: Sandbox, native_outcomes: dict[str, list[object]]) -> None:
    local_sbx.files.write("/tmp/paths/table.py", TABLE)
    run = local_sbx.commands.run("cd /tmp/paths && mkdir -p work && cd work && python3 ../table.py")
    assert run.exit_code == 0, run.stderr
    guest = json.loads(run.stdout)
    assert guest.keys() == native_outcomes.keys()
    differ = {name: {"native": native_outcomes[name], "guest": guest[name]}
              for name in native_outcomes if native_outcomes[name] != guest[name]}
    assert not differ, json.dumps(differ, indent=1)


def test_the_shell_removes_folders_named_with_a_slash(local_sbx: Sandbox) -> None:
    r = local_sbx.commands.run("cd /tmp && mkdir -p sl1/x sl2 && touch sl1/x/f && rm -r sl1/ && rmdir sl2/ "
                               "&& ls -d sl1 sl2 2>&1; rmdir /tmp/nothere/; echo $?")
    assert "No such file" in r.stdout and r.stdout.rstrip().endswith("1"), r
