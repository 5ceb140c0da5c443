"""Filesystem escapes: `..` and absolute paths through every files-API call, symlinks and hard
links made by the guest (used by the guest and through the host API), a symlink swapped in
while the host walks a path, symlink loops, and writes into the read-only runtime mounts.

Every host target is under the test's tmp_path; nothing else on the host is ever written to.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from declaw_wasm._wasm.layout import DEVICES
from declaw_wasm import testing
from declaw_wasm import FileNotFoundException, Sandbox, SandboxException

from .support import assert_host_fine, inside, read_only_mounts, run_py, tree_signature

SECRET = "HOST-SECRET-do-not-leak"
OPS = ["read", "write", "write_files", "list", "get_info", "exists", "remove", "rename_src",
       "rename_dst", "make_dir"]


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def _host_target(tmp_path: Path) -> tuple[Path, Path, set[str]]:
    """A host folder with a secret file and a marker file that no sandbox may ever name."""
    folder = tmp_path / "host-folder"
    folder.mkdir()
    secret = folder / "secret.txt"
    secret.write_text(SECRET)
    (folder / f"host-only-{uuid.uuid4().hex}.txt").write_text(SECRET)
    return folder, secret, set(os.listdir(folder))


def _hostile(host_path: Path) -> list[str]:
    """Ways of naming a host path from the sandbox: absolute, `..` runs from every mount,
    doubled slashes, relative to the home folder."""
    text = str(host_path).lstrip("/")
    up = "../" * 24
    return [f"/{text}", f"//{text}", f"{up}{text}", f"./{up}{text}", f"/home/user/{up}{text}",
            f"/tmp/{up}{text}", f"/etc/{up}{text}", f"/usr/local/lib/declaw/{up}{text}",
            f"/usr/local/lib/../../../../../../{text}/."]


def _no_leak(value: object) -> None:
    assert SECRET not in repr(value)


@pytest.mark.parametrize("op", OPS)
def test_dotdot_and_absolute_paths_in_every_files_call(box: Sandbox, tmp_path: Path, op: str) -> None:
    """Defends against `..`/absolute paths that name a host file through any files-API call."""
    folder, secret, names = _host_target(tmp_path)
    base = testing.host_folder(box)
    for i, path in enumerate(_hostile(secret)):
        folder_path = path[: -len("/.")] if path.endswith("/.") else path
        parent = folder_path.rsplit("/", 1)[0] or "/"
        try:
            if op == "read":
                for fmt in ("text", "bytes"):
                    _no_leak(box.files.read(path, format=fmt))
                with box.files.read(path, format="stream") as stream:
                    _no_leak(b"".join(stream))
            elif op == "write":
                info = box.files.write(path, f"PWNED {i}")
                assert inside(testing.host_path(box, info.path), base)
            elif op == "write_files":
                infos = box.files.write_files([{"path": path, "data": b"PWNED"},
                                               {"path": parent + "/second.txt", "data": "PWNED"}])
                assert all(inside(testing.host_path(box, w.path), base) for w in infos)
            elif op == "list":
                for depth in (1, 3):
                    entries = box.files.list(parent, depth=depth)
                    assert not {e.name for e in entries} & (names - {"secret.txt"})
                    assert all(e.size != len(SECRET) for e in entries if e.name == "secret.txt")
            elif op == "get_info":
                with pytest.raises(FileNotFoundException):
                    box.files.get_info(path)
            elif op == "exists":
                assert box.files.exists(path) is False
            elif op == "remove":
                box.files.remove(path)
                box.files.remove(parent)
            elif op == "rename_src":
                with pytest.raises(FileNotFoundException):
                    box.files.rename(path, f"/tmp/stolen-{uuid.uuid4().hex}")
            elif op == "rename_dst":
                payload = f"/home/user/payload-{uuid.uuid4().hex}"
                box.files.write(payload, "PWNED")
                info = box.files.rename(payload, path)
                assert inside(testing.host_path(box, info.path), base)
            elif op == "make_dir":
                box.files.make_dir(parent + f"/made-{i}")
        except SandboxException as exc:  # FileNotFoundException and the other refusals
            assert str(base) not in str(exc)  # errors name guest paths, never the host's
        assert secret.read_text() == SECRET
        assert set(os.listdir(folder)) == names, f"{op} {path!r} changed the host folder"
    assert_host_fine(box)


def test_host_paths_outside_tmp_are_not_readable(box: Sandbox) -> None:
    """Defends against the files API reading the host's checkout, home and system files."""
    readme = Path(__file__).resolve().parents[2] / "README.md"
    assert readme.exists()
    for path in (str(readme), "../../../../" + str(readme).lstrip("/"), "/root/.bashrc",
                 "/etc/shadow", "/etc/hostname/../../" + str(readme).lstrip("/")):
        with pytest.raises(FileNotFoundException):
            box.files.read(path)
    for folder in ("/work", "/root/.cache", "/proc/self", "/proc/1", "/sys", "/dev/shm", "/dev/mem",
                   "/home/user/../../../root/.cache"):
        assert not box.files.exists(folder)
        with pytest.raises(FileNotFoundException):
            box.files.list(folder)
    assert box.files.list("/root") == []  # the guest's own /root (as on Linux), never the host's
    # the guest's own /proc: the sandbox's boot id, and the empty files its open() answers with the
    # sandbox's figures (tests/test_guest_posix.py), never the host's
    assert [e.path for e in box.files.list("/proc", depth=4)] == [
        "/proc/cpuinfo", "/proc/meminfo", "/proc/sys", "/proc/sys/kernel", "/proc/sys/kernel/random",
        "/proc/sys/kernel/random/boot_id"]
    assert box.files.read("/proc/meminfo") == "" and box.files.read("/proc/cpuinfo") == ""
    # the guest's own /dev: an empty file per device its open() answers, never the host's devices
    assert sorted((e.name, e.size) for e in box.files.list("/dev")) == [(name, 0) for name in sorted(DEVICES)]
    assert box.files.read("/dev/urandom") == "" and box.files.read("/dev/zero", format="bytes") == b""
    assert box.files.read("/etc/hostname").strip() != Path("/etc/hostname").read_text().strip()
    assert_host_fine(box)


def test_guest_cannot_create_absolute_symlinks(box: Sandbox) -> None:
    """Defends against a guest planting an absolute symlink toward host folders."""
    r = box.commands.run("cd /tmp && ln -s /etc etc-link; echo rc=$?; ln -s / root-link; echo rc=$?")
    assert r.stdout == "rc=1\nrc=1\n" and "Operation not permitted" in r.stderr
    r = run_py(box, "import os\nfor t in ('/etc', '/', '/root', '/work'):\n"
                    "    try:\n        os.symlink(t, '/tmp/abs-' + t.strip('/'))\n        print('made', t)\n"
                    "    except OSError as e:\n        print(type(e).__name__)\n")
    assert r.stdout == "PermissionError\n" * 4
    assert_host_fine(box)


def test_guest_relative_symlink_to_exact_host_path(box: Sandbox, tmp_path: Path) -> None:
    """Defends against a guest symlink whose relative target reaches a host folder on disk."""
    folder, secret, names = _host_target(tmp_path)
    home = testing.host_root(box) / "home" / "user"
    link = f"esc-{uuid.uuid4().hex}"
    target = os.path.relpath(folder, home)  # resolves to the host folder if followed on the host
    code = f"""
import os
os.symlink({target!r}, '/home/user/{link}')
for f in (lambda: open('/home/user/{link}/secret.txt').read(),
          lambda: os.listdir('/home/user/{link}'),
          lambda: open('/home/user/{link}/new.txt', 'w').write('x')):
    try:
        print('LEAK', f())
    except OSError as e:
        print(type(e).__name__)
"""
    r = run_py(box, code)
    assert "LEAK" not in r.stdout and SECRET not in r.stdout and r.stdout.count("\n") == 3
    # The host API resolves the link in the guest's namespace, where `..` stops at "/".
    with pytest.raises(FileNotFoundException):
        box.files.read(f"/home/user/{link}/secret.txt")
    assert not box.files.exists(f"/home/user/{link}/secret.txt")
    with pytest.raises(SandboxException):
        box.files.list(f"/home/user/{link}")
    try:
        box.files.write(f"/home/user/{link}/new.txt", "PWNED")
    except SandboxException:
        pass
    with pytest.raises(SandboxException):
        box.files.make_dir(f"/home/user/{link}/made")
    info = box.files.get_info(f"/home/user/{link}")  # described in the guest's namespace
    assert info.symlink_target != str(folder) and str(testing.host_folder(box)) not in str(info.symlink_target)
    box.files.remove(f"/home/user/{link}")  # removes the link only
    assert secret.read_text() == SECRET and set(os.listdir(folder)) == names
    assert_host_fine(box)


def test_guest_hard_links_to_read_only_and_runtime_files_are_refused(box: Sandbox) -> None:
    """Defends against hard links from the shared runtime files into a writable folder."""
    mounts = read_only_mounts(box)
    before = {guest: tree_signature(host) for guest, host in mounts.items()}
    sources = ["/usr/local/lib/python315.zip", "/usr/local/lib/declaw/_declaw_boot.py",
               "/usr/local/lib/declaw-site/declaw_shell/__init__.py", "/etc/passwd"]
    code = ("import os\nfor i, src in enumerate(%r):\n    for dst in ('/home/user/hl%%d' %% i, '/tmp/hl%%d' %% i):\n"
            "        try:\n            os.link(src, dst)\n            print('LINKED', src, dst)\n"
            "        except OSError as e:\n            print(type(e).__name__)\n" % sources)
    r = run_py(box, code)
    assert "LINKED" not in r.stdout and r.stdout.count("PermissionError") == 2 * len(sources)
    r = box.commands.run("ln /usr/local/lib/declaw/_declaw_boot.py /tmp/boot; echo rc=$?")
    assert "rc=1" in r.stdout
    for i in range(len(sources)):
        assert not box.files.exists(f"/home/user/hl{i}") and not box.files.exists(f"/tmp/hl{i}")
    # Links inside the writable folders stay there: writing through one touches only the sandbox.
    r = box.commands.run("echo inside > /tmp/hl-src && ln /tmp/hl-src /home/user/hl-dst && cat /home/user/hl-dst")
    assert r.stdout == "inside\n"
    box.files.write("/home/user/hl-dst", "changed")
    assert box.files.read("/tmp/hl-src") == "changed"
    assert {guest: tree_signature(host) for guest, host in mounts.items()} == before
    assert_host_fine(box)


def test_api_through_guest_symlink_into_runtime_mounts_cannot_write(box: Sandbox) -> None:
    """Defends against using a guest symlink to reach the read-only runtime code via the API."""
    mounts = read_only_mounts(box)
    before = {guest: tree_signature(host) for guest, host in mounts.items()}
    r = box.commands.run("cd /home/user && ln -s ../../usr/local/lib/declaw rt && "
                         "ln -s ../../usr/local/lib/declaw-site site && ln -s ../../usr/local/lib lib && echo made")
    assert r.stdout == "made\n"
    attempts = [
        lambda: box.files.write("/home/user/rt/_declaw_boot.py", "raise SystemExit('pwned')"),
        lambda: box.files.write("/home/user/site/declaw_shell/__init__.py", "pwned"),
        lambda: box.files.write("/home/user/lib/python315.zip", b"PK"),
        lambda: box.files.write_files([{"path": "/home/user/rt/evil.py", "data": "x"}]),
        lambda: box.files.remove("/home/user/rt/_declaw_boot.py"),
        lambda: box.files.remove("/home/user/lib/python315.zip"),
        lambda: box.files.rename("/home/user/rt/_declaw_boot.py", "/tmp/boot.py"),
        lambda: box.files.rename("/home/user/lib/python315.zip", "/home/user/lib/x.zip"),
        lambda: box.files.make_dir("/home/user/site/evil"),
    ]
    for attempt in attempts:
        with pytest.raises(SandboxException, match="read-only"):
            attempt()
    box.files.remove("/home/user/rt")  # the link, not what it points at
    assert {guest: tree_signature(host) for guest, host in mounts.items()} == before
    assert box.commands.run("python3 -c 'import json; print(json.dumps(1))'").stdout == "1\n"
    assert_host_fine(box)


def test_guest_cannot_write_runtime_mounts(box: Sandbox) -> None:
    """Defends against a guest tampering with the stdlib, the boot code, the shell code or /dev's
    and /proc's files (every guest shares them: one sandbox's write would reach the next)."""
    mounts = read_only_mounts(box)
    before = {guest: tree_signature(host) for guest, host in mounts.items()}
    code = """
import os, shutil
targets = ['/usr/local/lib', '/usr/local/lib/declaw', '/usr/local/lib/declaw-site',
           '/usr/local/lib/declaw-site/declaw_shell', '/dev', '/proc']
attempts = []
for d in targets:
    attempts += [lambda d=d: open(d + '/evil.py', 'w').write('x'),
                 lambda d=d: os.mkdir(d + '/evil'),
                 lambda d=d: os.symlink('x', d + '/evil-link')]
attempts += [
    lambda: open('/usr/local/lib/python315.zip', 'ab').write(b'x'),
    lambda: open('/usr/local/lib/python315.zip', 'r+b').write(b'x'),
    lambda: os.truncate('/usr/local/lib/python315.zip', 0),
    lambda: os.remove('/usr/local/lib/python315.zip'),
    lambda: os.rename('/usr/local/lib/python315.zip', '/tmp/z.zip'),
    lambda: open('/usr/local/lib/declaw/_declaw_boot.py', 'a').write('x'),
    lambda: os.remove('/usr/local/lib/declaw/_declaw_boot.py'),
    lambda: os.utime('/usr/local/lib/declaw/_declaw_boot.py', (0, 0)),
    lambda: shutil.rmtree('/usr/local/lib/declaw-site'),
    lambda: os.rename('/usr/local/lib/declaw-site/declaw_shell', '/tmp/sh'),
    lambda: os.write(os.open('/dev/null', os.O_WRONLY), b'x'),
    lambda: os.remove('/dev/zero'),
    lambda: os.rename('/dev/urandom', '/tmp/u'),
    lambda: os.truncate('/dev/stdout', 0),
    lambda: os.write(os.open('/proc/meminfo', os.O_WRONLY), b'x'),
    lambda: os.remove('/proc/cpuinfo'),
]
ok = 0
for a in attempts:
    try:
        a()
        print('WROTE', a)
    except OSError:
        ok += 1
print('refused', ok, 'of', len(attempts))
"""
    r = run_py(box, code)
    assert "WROTE" not in r.stdout and r.stdout.startswith("refused 34 of 34"), r
    for cmd in ("touch /usr/local/lib/declaw/x", "rm -rf /usr/local/lib/declaw-site",
                "echo x >> /usr/local/lib/python315.zip", "echo x > /usr/local/lib/declaw/_declaw_boot.py",
                "mkdir /usr/local/lib/declaw/d", "mv /usr/local/lib/declaw-site /tmp/site",
                "cp /etc/passwd /usr/local/lib/declaw-site/", "rm -f /dev/null", "touch /dev/evil",
                "cp /etc/passwd /dev/passwd", "rm -f /proc/meminfo", "echo x > /proc/cpuinfo"):
        assert box.commands.run(cmd).exit_code != 0, cmd
    for path in ("/usr/local/lib/declaw/evil.py", "/usr/local/lib/declaw-site/evil.py", "/usr/local/lib/evil.py",
                 "/dev/null", "/dev/evil", "/proc/meminfo"):
        with pytest.raises(SandboxException, match="read-only"):
            box.files.write(path, "x")
    assert {guest: tree_signature(host) for guest, host in mounts.items()} == before
    assert box.commands.run("echo ok | tr a-z A-Z").stdout == "OK\n"
    assert_host_fine(box)


def _swap_race(box: Sandbox, folder: Path, seconds: float, stop_on_first_oddity: bool
               ) -> tuple[int, list[BaseException]]:
    """A guest swaps `d` between a folder and a symlink whose relative target is `folder` on the
    host, as fast as it can, for `seconds`; meanwhile the host API walks through `d` with every
    call. Returns the number of rounds of calls and every exception that was not a
    SandboxException naming guest paths only (the last round stops at the first one when asked)."""
    work = f"/home/user/race-{uuid.uuid4().hex}"
    box.files.make_dir(work)
    host_work = testing.host_path(box, work)
    target = os.path.relpath(folder, host_work)  # the host folder, if followed on the host
    code = f"""
import os, time
os.chdir({work!r})
end = time.time() + {seconds}
n = 0
while time.time() < end:
    n += 1
    for step in (lambda: os.rename('d', 'old%d' % n), lambda: os.symlink({target!r}, 'd'),
                 lambda: os.unlink('d'), lambda: os.mkdir('d'),
                 lambda: open('d/secret.txt', 'w').write('inside')):
        try:
            step()
        except OSError:
            pass
print('swaps', n)
"""
    box.files.write(f"{work}/race.py", code)
    handle = box.commands.run(f"python3 {work}/race.py", background=True, timeout=seconds + 10)
    base = str(testing.host_folder(box))
    odd: list[BaseException] = []
    rounds = 0
    deadline = time.monotonic() + seconds + 8
    while not testing.finished(handle) and time.monotonic() < deadline:
        rounds += 1
        for call in (lambda: box.files.read(f"{work}/d/secret.txt"),
                     lambda: box.files.write(f"{work}/d/new.txt", "PWNED"),
                     lambda: box.files.list(f"{work}/d"),
                     lambda: box.files.get_info(f"{work}/d/secret.txt"),
                     lambda: box.files.make_dir(f"{work}/d/made"),
                     lambda: box.files.rename(f"{work}/d/new.txt", f"{work}/d/moved.txt"),
                     lambda: box.files.remove(f"{work}/d/moved.txt")):
            try:
                _no_leak(call())
            except Exception as exc:  # the call failed: fine, if it failed the SDK's way
                if not isinstance(exc, SandboxException) or base in str(exc):
                    odd.append(exc)
        if odd and stop_on_first_oddity:
            handle.kill()
            break
    result = handle.wait()
    assert odd or result.stdout.startswith("swaps"), result
    return rounds, odd


def test_symlink_swapped_in_while_the_api_walks(box: Sandbox, tmp_path: Path) -> None:
    """Defends against a guest swapping a folder for an escaping symlink during API calls."""
    folder, secret, names = _host_target(tmp_path)
    rounds, _ = _swap_race(box, folder, 3, stop_on_first_oddity=False)
    assert rounds > 20  # ~15 a second on a loaded 2-core machine
    assert secret.read_text() == SECRET and set(os.listdir(folder)) == names
    assert_host_fine(box)


def test_symlink_swap_race_fails_the_sdk_way(box: Sandbox) -> None:
    """Defends against a symlink race surfacing raw OSErrors that carry host paths."""
    work = f"/home/user/flip-{uuid.uuid4().hex}"
    box.files.make_dir(work)
    box.files.write(f"{work}/flip.py", f"import os, time\nos.chdir({work!r})\nend = time.time() + 6\n"
                                       "while time.time() < end:\n    os.symlink('x', 'd')\n    os.unlink('d')\n")
    handle = box.commands.run(f"python3 {work}/flip.py", background=True, timeout=20)
    base = str(testing.host_folder(box))
    odd: list[BaseException] = []
    deadline = time.monotonic() + 6
    while not odd and time.monotonic() < deadline:
        for call in (lambda: box.files.exists(f"{work}/d/f"), lambda: box.files.read(f"{work}/d/f")):
            try:
                call()
            except Exception as exc:
                if not isinstance(exc, SandboxException) or base in str(exc):
                    odd.append(exc)
    handle.kill()
    assert_host_fine(box)
    assert not odd, f"{type(odd[0]).__name__}: {odd[0]}"


def test_symlink_loops_fail_fast(box: Sandbox) -> None:
    """Defends against guest symlink loops hanging the host's path resolution."""
    r = box.commands.run("mkdir -p /home/user/loops && cd /home/user/loops && ln -s b a && ln -s a b "
                         "&& ln -s self self && ln -s ../loops/deeper/../a deeper && echo made")
    assert r.stdout == "made\n"
    start = time.monotonic()
    for call in (lambda: box.files.read("/home/user/loops/a"),
                 lambda: box.files.read("/home/user/loops/self/x"),
                 lambda: box.files.write("/home/user/loops/a", "x"),
                 lambda: box.files.make_dir("/home/user/loops/b/sub"),
                 lambda: box.files.get_info("/home/user/loops/deeper")):
        with pytest.raises(SandboxException, match="symbolic links"):
            call()
    box.files.rename("/home/user/loops/self", "/home/user/loops/self2")  # the link itself
    box.files.remove("/home/user/loops/self2")
    assert time.monotonic() - start < 5
    assert_host_fine(box)


def test_symlink_loop_does_not_break_listing(fresh: Sandbox) -> None:
    """Defends against a guest symlink loop hiding a whole folder from files.list."""
    fresh.files.write("/home/user/out/result.csv", "a,b\n")
    r = fresh.commands.run("cd /home/user/out && ln -s b a && ln -s a b && ls -la | wc -l")
    assert r.exit_code == 0
    assert_host_fine(fresh)
    assert fresh.files.exists("/home/user/out/a") is True
    names = {e.name for e in fresh.files.list("/home/user/out")}
    assert {"result.csv", "a", "b"} <= names
    assert "result.csv" in {e.name for e in fresh.files.list("/home/user", depth=2)}


def test_writes_to_the_read_only_root_fail_like_bash(box: Sandbox) -> None:
    """Defends against a write to the read-only / crashing the whole command line with a traceback."""
    cases = {"echo x > /etc/passwd": "bash: /etc/passwd: Read-only file system\n",
             "echo x >> /etc/hostname": "bash: /etc/hostname: Read-only file system\n",
             "echo x 2> /etc/passwd": "bash: /etc/passwd: Read-only file system\n",
             "{ echo x; } > /etc/passwd": "bash: /etc/passwd: Read-only file system\n",
             "echo x > /nonexistent/dir/f": "bash: /nonexistent/dir/f: No such file or directory\n",
             "echo x > /tmp": "bash: /tmp: Is a directory\n",
             "mkdir /etc/d": "mkdir: /etc/d: Read-only file system\n"}
    for cmd, stderr in cases.items():
        r = box.commands.run(f"{cmd}; echo status=$?", timeout=20)
        assert (r.exit_code, r.stdout, r.stderr) == (0, "status=1\n", stderr), (cmd, r)
    r = box.commands.run("echo x > /etc/passwd && echo no || echo failed; set -e; "
                         "echo x > /etc/passwd; echo not-reached")
    assert r.stdout == "failed\n" and r.exit_code == 1, r
    assert "user:x:1000" in box.files.read("/etc/passwd")
    assert_host_fine(box)


def test_rm_rf_root_keeps_the_sandbox_working(fresh: Sandbox) -> None:
    """Defends against `cd /; rm -rf /` deleting anything outside the writable mounts."""
    mounts = read_only_mounts(fresh)
    before = {guest: tree_signature(host) for guest, host in mounts.items()}
    skeleton = tree_signature(testing.host_root(fresh) / "etc")
    fresh.files.write("/home/user/work/a.txt", "a")
    r = fresh.commands.run("cd /; rm -rf /; rm -rf /*; rm -rf /usr /etc /usr/local/lib/python315.zip "
                           "/usr/local/lib/declaw /usr/local/lib/declaw-site; rm -rf ~ /tmp; echo done",
                           timeout=30)
    assert r.stdout.endswith("done\n")
    assert tree_signature(testing.host_root(fresh) / "etc") == skeleton
    assert {guest: tree_signature(host) for guest, host in mounts.items()} == before
    assert "user:x:1000" in fresh.files.read("/etc/passwd")
    r = fresh.commands.run("cd ~ && echo back > again.txt && cat again.txt && "
                           "python3 -c 'import pandas; print(pandas.__name__)'")
    assert r.stdout == "back\npandas\n", r
    assert fresh.run_code("sum(range(5))").text == "10"
    assert_host_fine(fresh)
