"""`pwd`, `grp`, `resource` and `fcntl` in the guest (guest/declaw_posix): WASI's CPython is built
without them, so `import pwd` (what `os.path.expanduser("~root")`, `shutil.chown` and `getpass`
reach for), a `resource.setrlimit` safety cap or a `fcntl.flock` lock file ended the program.
One table of calls whose answers do not depend on the machine runs under the host's CPython
and in a guest, and must print the same; then what only the sandbox answers (its users, its
memory limit) is checked against the sandbox."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from declaw_wasm import Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

TABLE = r'''
import errno, os, pickle, sys
import fcntl, grp, pwd, resource

def show(label, f):
    try:
        value = f()
    except Exception as e:
        # an OSError by its errno's name: its text is the C library's (WASI's strerror is not glibc's)
        code = errno.errorcode.get(getattr(e, "errno", None) or 0, "")
        value = "%s %s %s" % (type(e).__name__, code, e if not code else "")
    print(label, "=", value)

os.chdir(sys.argv[1])
show("pwd fields", lambda: (pwd.struct_passwd.n_fields, pwd.struct_passwd.__match_args__))
show("grp fields", lambda: (grp.struct_group.n_fields, grp.struct_group.__match_args__))
show("getpwnam missing", lambda: pwd.getpwnam("no-such-user-here"))
show("getpwuid missing", lambda: pwd.getpwuid(424242))
show("getpwuid -1", lambda: pwd.getpwuid(-1))
show("getpwuid str", lambda: pwd.getpwuid("0"))
show("getpwuid float", lambda: pwd.getpwuid(0.0))
show("getpwnam int", lambda: pwd.getpwnam(0))
show("getpwnam nul", lambda: pwd.getpwnam("a\0b"))
show("getgrgid missing", lambda: grp.getgrgid(424242))
show("getgrnam missing", lambda: grp.getgrnam("no-such-group-here"))
show("getgrgid str", lambda: grp.getgrgid("0"))
show("root", lambda: (pwd.getpwuid(0).pw_name, pwd.getpwnam("root").pw_uid, pwd.getpwuid(0)[0],
                      grp.getgrgid(0).gr_name))
show("root repr", lambda: repr(pwd.getpwnam("root")).startswith("pwd.struct_passwd(pw_name='root', pw_passwd="))
show("root pickled", lambda: pickle.loads(pickle.dumps(pwd.getpwnam("root"))) == pwd.getpwnam("root"))
show("struct wrong size", lambda: pwd.struct_passwd(("a", "b")))
show("struct readonly", lambda: setattr(pwd.getpwnam("root"), "pw_uid", 5))
show("all has root", lambda: ("root" in [p.pw_name for p in pwd.getpwall()],
                              "root" in [g.gr_name for g in grp.getgrall()]))
show("expanduser ~root", lambda: os.path.expanduser("~root/x"))
show("expanduser ~nobody", lambda: os.path.expanduser("~no-such-user-here/x"))

show("rusage fields", lambda: (resource.struct_rusage.n_fields, resource.struct_rusage.__match_args__[:3]))
show("rusage types", lambda: [type(v).__name__ for v in resource.getrusage(resource.RUSAGE_SELF)[:3]])
show("rusage who", lambda: resource.getrusage(7))
show("rlimit bad", lambda: resource.getrlimit(99))
show("rlimit negative", lambda: resource.getrlimit(-1))
show("rlimit str", lambda: resource.getrlimit("a"))
show("setrlimit soft > hard", lambda: resource.setrlimit(resource.RLIMIT_CORE, (10, 5)))
show("setrlimit not a pair", lambda: resource.setrlimit(resource.RLIMIT_CORE, 5))
show("setrlimit three", lambda: resource.setrlimit(resource.RLIMIT_CORE, (1, 2, 3)))
show("setrlimit then get", lambda: (resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),
                                    resource.getrlimit(resource.RLIMIT_CORE)))
show("RLIM_INFINITY", lambda: (resource.RLIM_INFINITY, resource.error is OSError, resource.RLIMIT_NOFILE,
                               resource.RLIMIT_AS))
show("pagesize", lambda: resource.getpagesize())
show("sysconf page", lambda: (os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_PAGESIZE"),
                              os.sysconf(os.sysconf_names["SC_PAGE_SIZE"]) == resource.getpagesize()))
show("sysconf memory", lambda: (os.sysconf("SC_PHYS_PAGES") > 0,
                                0 <= os.sysconf("SC_AVPHYS_PAGES") <= os.sysconf("SC_PHYS_PAGES")))
show("sysconf others", lambda: (os.sysconf("SC_MINSIGSTKSZ") >= 2048, os.sysconf("SC_CLK_TCK"),
                                os.sysconf("SC_OPEN_MAX") == resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 0))
show("sysconf unknown", lambda: os.sysconf("SC_NO_SUCH_NAME"))
show("sysconf float", lambda: os.sysconf(1.5))
show("sysconf none", lambda: os.sysconf(None))
show("sysconf number", lambda: os.sysconf(-5))
show("cap AS", lambda: (resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)),
                        resource.getrlimit(resource.RLIMIT_AS)))

open("lock", "w").close()
a, b = open("lock"), open("lock")
show("flock ex", lambda: fcntl.flock(a, fcntl.LOCK_EX))
show("flock ex again same fd", lambda: fcntl.flock(a.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB))
show("flock other ex nb", lambda: fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB))
show("flock other sh nb", lambda: fcntl.flock(b, fcntl.LOCK_SH | fcntl.LOCK_NB))
show("flock un", lambda: fcntl.flock(a, fcntl.LOCK_UN))
show("flock other ex after un", lambda: fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB))
b.close()
show("flock after holder closed", lambda: fcntl.flock(a, fcntl.LOCK_SH | fcntl.LOCK_NB))
c = open("lock")
show("flock shared twice", lambda: fcntl.flock(c, fcntl.LOCK_SH | fcntl.LOCK_NB))
show("flock bad op", lambda: fcntl.flock(a, 64))
show("flock closed fd", lambda: fcntl.flock(1000, fcntl.LOCK_EX))
show("flock not a file", lambda: fcntl.flock("x", fcntl.LOCK_EX))
d, e = open("lock", "r+"), open("lock", "r+")
show("lockf same process", lambda: (fcntl.lockf(d, fcntl.LOCK_EX), fcntl.lockf(e, fcntl.LOCK_EX | fcntl.LOCK_NB)))
show("lockf bad", lambda: fcntl.lockf(d, 64))
show("nonblock", lambda: (os.set_blocking(d.fileno(), False), bool(fcntl.fcntl(d, fcntl.F_GETFL) & os.O_NONBLOCK)))
show("F_SETFL", lambda: (fcntl.fcntl(d, fcntl.F_SETFL, 0), os.get_blocking(d.fileno())))
show("F_SETFD", lambda: (fcntl.fcntl(d, fcntl.F_SETFD, fcntl.FD_CLOEXEC),
                         fcntl.fcntl(d, fcntl.F_GETFD) & fcntl.FD_CLOEXEC))
show("ioctl file", lambda: fcntl.ioctl(d, 0x5413, b"\0" * 8))
show("constants", lambda: (fcntl.LOCK_SH, fcntl.LOCK_EX, fcntl.LOCK_NB, fcntl.LOCK_UN, fcntl.F_GETFL,
                           fcntl.F_SETLK, fcntl.F_UNLCK))
'''


def _native(tmp_path: Path) -> str:
    script = tmp_path / "table.py"
    script.write_text(TABLE)
    folder = tmp_path / "native"
    folder.mkdir()
    return subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                          timeout=60, check=True).stdout


def test_the_table_prints_what_cpython_on_linux_prints(fresh: Sandbox, tmp_path: Path) -> None:
    native = _native(tmp_path)
    fresh.files.write("/home/user/table.py", TABLE)
    fresh.commands.run("mkdir -p /home/user/guest")
    run = fresh.commands.run("python3 /home/user/table.py /home/user/guest", timeout=60)
    assert run.exit_code == 0, run.stderr
    mismatched = [(n, g) for n, g in zip(native.splitlines(), run.stdout.splitlines(), strict=False) if n != g]
    assert not mismatched and len(native.splitlines()) == len(run.stdout.splitlines()), "\n".join(
        f"native: {n}\nguest:  {g}" for n, g in mismatched) or (native, run.stdout)


SANDBOX = r'''
import getpass, os, pwd, grp, resource, shutil, tarfile
me = pwd.getpwuid(os.getuid())
print(me.pw_name, me.pw_dir, me.pw_shell, grp.getgrgid(os.getgid()).gr_name, getpass.getuser())
print(os.path.expanduser("~root"), os.path.expanduser("~user/x"))
print([p.pw_name for p in pwd.getpwall()], [g.gr_name for g in grp.getgrall()])
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
print(soft, hard == resource.RLIM_INFINITY)
print(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), os.sysconf.__module__, os.sysconf.__name__)
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_maxrss > 10_000, usage.ru_utime > 0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
open("/tmp/f", "w").close()
with tarfile.open("/tmp/t.tar", "w") as t:
    t.add("/tmp/f")
with tarfile.open("/tmp/t.tar") as t:
    print(t.getmembers()[0].uname, t.getmembers()[0].gname)
'''


def test_the_sandbox_answers_what_only_it_knows(fresh: Sandbox) -> None:
    fresh.files.write("/home/user/sandbox.py", SANDBOX)
    run = fresh.commands.run("python3 /home/user/sandbox.py", timeout=60)
    assert run.exit_code == 0, run.stderr
    total = fresh.get_metrics()[-1].mem_total
    assert run.stdout.splitlines() == [
        "user /home/user /bin/bash user user",
        "/root /home/user/x",
        "['root', 'user'] ['root', 'user']",
        f"{total} True",
        f"{total} os sysconf",  # WASI's C library said -248 pages of 65536 bytes
        "True True 0",
        "root root",  # WASI has no owners: os.stat's st_uid is 0 (the shell's ls says user)
    ], run.stdout
    # a limit one program sets is its own: the next program of the line starts from the default,
    # as a new process on Linux would (the programs share one interpreter here)
    get = "print(r.getrlimit(r.RLIMIT_STACK))"
    line = (f"python3 -c 'import resource as r; r.setrlimit(r.RLIMIT_STACK, (1 << 20, 1 << 20)); {get}'; "
            f"python3 -c 'import resource as r; {get}'")
    assert fresh.commands.run(line).stdout == "(1048576, 1048576)\n(8388608, -1)\n"


def test_the_sandbox_has_one_name(fresh: Sandbox) -> None:
    """Python's names for the machine are the shell's (WASI's C library said "(none)"), and the
    name resolves to loopback, as /etc/hosts makes it on Linux."""
    run = fresh.commands.run("hostname; uname -n; python3 -c 'import os, platform, socket\n"
                             "print(socket.gethostname(), os.uname().nodename, platform.node())\n"
                             "print(socket.gethostbyname(socket.gethostname()), socket.getfqdn())'")
    assert run.stdout == "sandbox\nsandbox\nsandbox sandbox sandbox\n127.0.0.1 sandbox\n", run.stderr


def test_one_thread_on_one_cpu_as_linux_names_it(fresh: Sandbox) -> None:
    """`time.thread_time` and `os.sched_getaffinity`, which WASI's CPython lacks (AttributeError):
    the one thread's CPU time, and the CPUs `nproc` and `os.cpu_count()` count."""
    run = fresh.commands.run("nproc; python3 -c 'import os, time\n"
                             "t = time.thread_time(); sum(range(10**6))\n"
                             "print(time.thread_time() > t, time.thread_time_ns() > 0, "
                             "len(os.sched_getaffinity(0)) == os.cpu_count())'")
    assert run.stdout == "1\nTrue True True\n", run.stderr


CHOWN = r"""
import errno, os, shutil, time
open("/tmp/owned", "w").close()
os.chown("/tmp/owned", os.getuid(), os.getgid()); os.chown("/tmp/owned", -1, -1)
shutil.chown("/tmp/owned", user="user", group="user")
with open("/tmp/owned") as f:
    os.fchown(f.fileno(), -1, os.getgid())
for call in (lambda: os.chown("/tmp/owned", 0, 0), lambda: shutil.chown("/tmp/owned", user="root"),
             lambda: os.chown("/tmp/missing", -1, -1), lambda: os.lchown("/tmp/owned", 1000, 0),
             lambda: os.fchown(9999, -1, -1)):
    try:
        call()
        print("changed")
    except OSError as e:
        print(type(e).__name__, errno.errorcode[e.errno])
os.environ["TZ"] = "UTC"; time.tzset()
print(time.tzname, time.timezone, time.strftime("%Z", time.localtime(0)))
"""


def test_chown_and_tzset_answer_as_linux_answers_the_sandboxs_user(fresh: Sandbox) -> None:
    """`os.chown`, `lchown`, `fchown` (what `shutil.chown` calls) and `time.tzset`, which WASI's
    CPython lacks (AttributeError): the user's own ids change nothing, another owner needs root
    (EPERM, as for any user on Linux); `TZ=UTC` then `tzset()` is UTC, the one zone WASI knows."""
    fresh.files.write("/tmp/chown.py", CHOWN)
    run = fresh.commands.run("python3 /tmp/chown.py")
    assert run.exit_code == 0, run.stderr
    assert run.stdout.splitlines() == ["PermissionError EPERM", "PermissionError EPERM",
                                       "FileNotFoundError ENOENT", "PermissionError EPERM", "OSError EBADF",
                                       "('UTC', 'UTC') 0 UTC"], run.stdout


def test_proc_cpuinfo_and_meminfo_are_the_sandboxs(fresh: Sandbox) -> None:
    """/proc/cpuinfo and /proc/meminfo, where agents look first (`grep -c processor`, `grep
    MemTotal`), were missing: they hold the sandbox's CPUs and memory — what `nproc` and `free`
    say, never the host's — and are read-only."""
    run = fresh.commands.run(
        "grep -c ^processor /proc/cpuinfo; nproc; awk '/^MemTotal/{print $2}' /proc/meminfo; "
        "free -k | awk '/^Mem/{print $2}'; grep -c '^model name.*declaw-wasm' /proc/cpuinfo; "
        "test -f /proc/meminfo && echo file; "
        "python3 -c 'import os\nprint(os.path.exists(\"/proc/cpuinfo\"), sorted(os.listdir(\"/proc\")))\n"
        "m = dict(l.split(\":\") for l in open(\"/proc/meminfo\"))\n"
        "print(0 < int(m[\"MemAvailable\"].split()[0]) <= int(m[\"MemTotal\"].split()[0]))'; "
        "echo x > /proc/meminfo; echo $?; python3 -c 'open(\"/proc/cpuinfo\", \"w\")' 2>&1 | tail -1")
    lines = run.stdout.splitlines()
    assert lines[0] == lines[1] == "1" and lines[2] == lines[3] and int(lines[2]) > 0, run
    assert lines[4:8] == ["1", "file", "True ['cpuinfo', 'meminfo', 'sys']", "True"], run
    assert lines[8] != "0" and lines[9].startswith("PermissionError"), run
    host = open("/proc/cpuinfo").read()
    assert "model name" not in host or host.split("model name")[1].splitlines()[0] not in run.stdout


def test_a_cell_sees_the_sandbox_too(fresh: Sandbox) -> None:
    """`!free`, `!ps` and `resource` in run_code (the kernel's door answers `sysinfo` as a
    command's does: `!free` raised KeyError)."""
    execution = fresh.run_code("import resource, pwd\n!free -m\n"
                               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 10_000, "
                               "pwd.getpwuid(1000).pw_name)")
    assert execution.error is None, execution.error
    out = "".join(execution.logs.stdout)
    assert out.splitlines()[0].split() == ["total", "used", "free", "shared", "buff/cache", "available"], out
    assert out.endswith("True user\n"), out


def test_a_cells_sysinfo_shows_only_its_own_sandbox(fresh: Sandbox) -> None:
    """The `sysinfo` route a code context now has (threat model: door ops) answers this
    sandbox's view only: another sandbox's running command and its command line never show."""
    other = Sandbox.create(timeout=120)
    try:
        mine = fresh.commands.run("sleep 30 # mine-0451", background=True)
        theirs = other.commands.run("sleep 30 # theirs-secret-0452", background=True)
        execution = fresh.run_code("from declaw_shell import door\ninfo = door.call('sysinfo')\n"
                                   "print(info['pid'], sorted(p['pid'] for p in info['processes']))\n"
                                   "print(' '.join(str(p['cmd']) for p in info['processes']))\n"
                                   "!ps aux")
        assert execution.error is None, execution.error
        out = "".join(execution.logs.stdout)
        assert out.splitlines()[0] == f"0 [{mine.pid}]", out
        assert "mine-0451" in out and "theirs-secret-0452" not in out, out
        mine.kill()
        theirs.kill()
    finally:
        other.kill()


DISK = r'''
import os, shutil, sys
st = os.statvfs("/tmp")
print(st.f_bsize, st.f_blocks * st.f_frsize, st.f_files, os.statvfs_result.__module__, len(st))
before = shutil.disk_usage("/home/user")
with open("/tmp/eight.bin", "wb") as f:
    f.write(b"x" * (8 << 20))
    print(os.fstatvfs(f.fileno()).f_bavail * 4096 <= before.free - (8 << 20))
after = shutil.disk_usage(".")
print(after.total, after.used - before.used >= 8 << 20, after.free == after.total - after.used)
for bad in ("/no/such/dir", "/tmp/eight.bin/x"):
    try:
        os.statvfs(bad)
    except OSError as e:
        print(type(e).__name__)
one, five, fifteen = os.getloadavg()
print(one >= 1.0 and one == five == fifteen)
'''


def test_the_disk_is_the_sandboxs_quota() -> None:
    """`os.statvfs`, `shutil.disk_usage` and `df` (AttributeError, and a fixed 10G `df`, before)
    give the sandbox's disk quota and what its folders hold; `os.getloadavg` its running commands,
    as `uptime` prints them."""
    from declaw_wasm import Limits

    box = Sandbox.create(timeout=120, limits=Limits(disk_bytes=64 << 20, disk_files=5000))
    try:
        box.files.write("/tmp/disk.py", DISK)
        r = box.commands.run("python3 /tmp/disk.py")
        assert r.stdout.splitlines() == [f"4096 {64 << 20} 5000 os 10", "True", f"{64 << 20} True True",
                                         "FileNotFoundError", "NotADirectoryError", "True"], r
        df = box.commands.run("df -h /tmp; df; df -i .; df /no/such; echo rc=$?")
        lines = df.stdout.splitlines()
        assert lines[0].split() == ["Filesystem", "Size", "Used", "Avail", "Use%", "Mounted", "on"], df
        assert lines[1].split()[:3] == ["/dev/root", "64M", "8.1M"] and lines[1].split()[-1] == "/", df
        size, used, available = map(int, lines[3].split()[1:4])
        assert size == 64 << 10 and used + available == size and used >= 8 << 10, df
        assert lines[5].split()[1:3] == ["5000", str(5000 - int(lines[5].split()[3]))], df
        assert lines[-1] == "rc=1" and "df: /no/such: No such file or directory" in df.stderr, df
        cell = box.run_code("import shutil\nshutil.disk_usage('/').total")
        assert cell.error is None and cell.text == str(64 << 20), cell
    finally:
        box.kill()
