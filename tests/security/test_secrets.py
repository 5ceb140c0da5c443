"""Host secrets and environment: the guest sees the sandbox's own /etc, no /proc, no host home
or checkout, and none of the host process's environment variables, from any entry point
(command, python3, background command, PTY, run_code)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from declaw_wasm._wasm.layout import DEVICES
from declaw_wasm import testing
from declaw_wasm import FileNotFoundException, PtySize, Sandbox, SandboxException

from .support import assert_host_fine, run_py

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

FAKE_KEY = "sk-test-declaw-security-0123456789abcdef"
CHECKOUT = Path(__file__).resolve().parents[2]


def test_etc_passwd_is_the_sandboxs_own(box: Sandbox) -> None:
    """Defends against reading the host's /etc/passwd, group or hostname."""
    host_passwd = Path("/etc/passwd").read_text()
    r = box.commands.run("cat /etc/passwd; echo ---; cat /etc/hostname; echo ---; cat /etc/shadow")
    passwd, hostname, _ = r.stdout.split("---\n")
    assert passwd != host_passwd and "user:x:1000:1000" in passwd
    assert hostname.strip() == "sandbox" and "No such file" in r.stderr
    code = "import sys\nsys.stdout.write(open('/etc/passwd').read())\n"
    assert run_py(box, code).stdout == passwd
    text = box.run_code("open('/etc/passwd').read()").text
    assert text is not None and text.strip("'\"") != host_passwd
    api = box.files.read("/etc/passwd")
    assert api != host_passwd and api == passwd
    assert_host_fine(box)


def test_proc_and_sys_are_absent(box: Sandbox) -> None:
    """Defends against reading the host process's /proc (environ, maps, cmdline, fds) and its
    devices. The guest's /proc holds the sandbox's boot id (as Linux has it) and the empty files
    whose content the guest's open() makes from the sandbox's own figures (cpuinfo, meminfo); its
    /dev, the empty files of the devices the guest's open() answers (layout.DEVICES)."""
    r = box.commands.run("ls /sys; cat /proc/self/environ /proc/self/maps /proc/1/cmdline "
                         "/proc/self/status; ls /proc/self/fd")
    assert r.stdout == "" and r.exit_code != 0
    devices = box.commands.run("ls -a /dev; find /dev -type f -empty | wc -l; ls /dev/mem /dev/sda /dev/kmsg /dev/shm")
    assert devices.stdout == "\n".join([".", "..", *sorted(DEVICES)]) + f"\n{len(DEVICES)}\n", devices
    assert devices.exit_code != 0
    assert sorted(box.commands.run("find /proc").stdout.split()) == [
        "/proc", "/proc/cpuinfo", "/proc/meminfo", "/proc/sys", "/proc/sys/kernel", "/proc/sys/kernel/random",
        "/proc/sys/kernel/random/boot_id"]
    for leak in (FAKE_KEY, "VmRSS", "python", "declaw-wasm-sbx"):
        assert leak not in r.stderr
    code = """
for p in ('/proc/self/environ', '/proc/self/maps', '/proc/self/mem', '/proc/1/environ',
          '/proc/self/cwd/x', '/proc/self/root/etc/shadow', '/sys/kernel/hostname', '/dev/mem'):
    try:
        open(p, 'rb').read(64)
        print('OPENED', p)
    except OSError as e:
        print(type(e).__name__)
"""
    r = run_py(box, code)
    assert "OPENED" not in r.stdout and r.stdout.count("\n") == 8
    ex = box.run_code("import os\n[os.path.exists(p) for p in ('/proc/self', '/proc/1', '/sys', '/dev/mem')]")
    assert ex.text == "[False, False, False, False]"
    for p in ("/proc/self/environ", "/proc/self/maps", "/sys/kernel/hostname"):
        with pytest.raises(FileNotFoundException):
            box.files.read(p)
    assert_host_fine(box)


def test_host_home_and_checkout_are_absent(box: Sandbox) -> None:
    """Defends against reading the host's home (/root), its caches, and the /work checkout."""
    r = box.commands.run("ls /root/.cache /work; ls -a ~; cat /root/.bashrc; find / -maxdepth 2 -name '*.md'; "
                         "cat ~/../../root/.cache/declaw-wasm/*; ls /usr/local/lib/declaw/../../../../work")
    assert "README.md" not in r.stdout and "No such file" in r.stderr
    assert r.stdout.split() == [".", "..", ".config"] or r.stdout.split() == [".config"]
    code = f"""
import os
found = []
for p in ('/root/.bashrc', '/work', {str(CHECKOUT)!r}, '/root/.cache', '/home/root', '/home/user/../../root/.cache'):
    found.append(os.path.exists(p))
print(found, os.listdir('/root'))
"""
    # the guest's /root is its own empty folder (as on Linux), never the host's
    assert run_py(box, code).stdout == "[False, False, False, False, False, False] []\n"
    ex = box.run_code(f"import os\nos.path.exists({str(CHECKOUT / 'README.md')!r})")
    assert ex.text == "False"
    for path in ("/root/.bashrc", "/work", str(CHECKOUT), "/root/.cache"):
        assert not box.files.exists(path)
    assert box.files.list("/root") == []
    assert_host_fine(box)


def test_runtime_mount_shows_only_guest_code(box: Sandbox) -> None:
    """Defends against the read-only runtime mounts exposing host files beyond the guest's code."""
    r = box.commands.run("ls /usr/local/lib; ls /usr/local/lib/declaw; ls /usr/local/lib/declaw/..")
    listed = set(r.stdout.split())
    assert "python315.zip" in listed and "_declaw_boot.py" in listed
    for host_only in ("declaw_wasm", "pyproject.toml", "README.md", "tests", ".git", "compiled"):
        assert host_only not in listed
    r = box.commands.run("cat /usr/local/lib/declaw/../../../../work/main/README.md; "
                         "cat /usr/local/lib/declaw-site/../../../../root/.bash_history")
    assert r.stdout == "" and r.exit_code != 0
    assert_host_fine(box)


@pytest.fixture
def host_secret_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """The test process's environment holds a secret, set before any sandbox is created."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_KEY + "-aws")
    monkeypatch.setenv("PYTHONSTARTUP", "/etc/passwd")
    return FAKE_KEY


def _no_secret(text: str) -> None:
    assert FAKE_KEY not in text and "OPENAI_API_KEY" not in text and "AWS_SECRET" not in text


def test_host_environment_is_invisible_to_commands(host_secret_env: str) -> None:
    """Defends against host environment variables (API keys) leaking into a command's guest."""
    with Sandbox.create(timeout=120) as s:
        r = s.commands.run("env; printenv OPENAI_API_KEY; echo \"[$OPENAI_API_KEY]\"; set | grep -i key; "
                           "cat /proc/self/environ")
        _no_secret(r.stdout + r.stderr)
        assert "[]" in r.stdout and "HOME=/home/user" in r.stdout
        r = s.commands.run("python3 -c 'import os; print(sorted(os.environ)); "
                           "print(os.environ.get(\"OPENAI_API_KEY\"))'")
        _no_secret(r.stdout + r.stderr)
        assert r.stdout.endswith("None\n")
        r = run_py(s, "import os\ntry:\n    print(open('/proc/self/environ', 'rb').read())\n"
                      "except OSError as e:\n    print(type(e).__name__)\n")
        assert r.stdout == "FileNotFoundError\n"
        h = s.commands.run("env", background=True)
        _no_secret(h.wait().stdout)
        env_names = {line.split("=", 1)[0] for line in s.commands.run("env").stdout.splitlines()}
        assert not env_names & {k for k in os.environ if k not in
                                {"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TMPDIR", "HOSTNAME",
                                 "PWD", "MPLBACKEND", "MPLCONFIGDIR", "TERM", "LC_ALL", "SHLVL", "OLDPWD", "_"}}
        assert_host_fine(s)


def test_host_environment_is_invisible_to_run_code_and_pty(host_secret_env: str) -> None:
    """Defends against host environment variables leaking into run_code contexts or a PTY."""
    with Sandbox.create(timeout=120) as s:
        ex = s.run_code("import os\n"
                        "print(dict(os.environ))\n"
                        "os.environ.get('OPENAI_API_KEY'), os.getenv('AWS_SECRET_ACCESS_KEY')")
        assert ex.error is None and ex.text == "(None, None)"
        _no_secret("".join(ex.logs.stdout))
        ex = s.run_code("!env")
        _no_secret("".join(ex.logs.stdout + ex.logs.stderr))
        ctx = s.create_code_context()
        assert s.run_code("import os; 'OPENAI_API_KEY' in os.environ", context=ctx).text == "False"
        out: list[bytes] = []
        pty = s.pty.create(PtySize(24, 200), timeout=20)
        pty.send_stdin(b"env; echo \"[$OPENAI_API_KEY]\"; exit\n")
        pty.wait(on_pty=out.append)
        text = b"".join(out).decode()
        assert "[]" in text
        _no_secret(text.replace("echo \"[$OPENAI_API_KEY]\"", ""))
        assert_host_fine(s)


def test_sandbox_envs_do_not_leak_between_sandboxes_or_commands(box: Sandbox) -> None:
    """Defends against one command's or sandbox's `envs=` secrets reaching another."""
    with Sandbox.create(envs={"TENANT_TOKEN": "tenant-a-secret"}, timeout=60) as a:
        assert a.commands.run("echo $TENANT_TOKEN").stdout == "tenant-a-secret\n"
        r = box.commands.run("env; echo \"[$TENANT_TOKEN]\"")
        assert "tenant-a-secret" not in r.stdout and "[]" in r.stdout
        assert a.commands.run("echo $ONE", envs={"ONE": "per-command"}).stdout == "per-command\n"
        assert a.commands.run("echo \"[$ONE]\"").stdout == "[]\n"
        assert a.run_code("import os; os.environ.get('ONE')", envs={"ONE": "cell"}).text in ("cell", "'cell'")
        ex = a.run_code("import os; os.environ.get('ONE')")
        assert ex.text in (None, "None")
    assert_host_fine(box)


def test_errors_never_name_host_paths(box: Sandbox) -> None:
    """Defends against error messages and results disclosing the sandbox's host folder."""
    base = str(testing.host_folder(box))
    messages: list[str] = []
    for call in (lambda: box.files.read("/nope/x"), lambda: box.files.read("/tmp"),
                 lambda: box.files.write("/etc/passwd", "x"), lambda: box.files.list("/etc/passwd"),
                 lambda: box.files.rename("/nope", "/tmp/x"), lambda: box.files.remove("/"),
                 lambda: box.files.make_dir("/etc/x"), lambda: box.files.get_info("/nope"),
                 lambda: box.files.write("/home/user", "x"), lambda: box.commands.run("echo", cwd="/nope")):
        with pytest.raises(SandboxException) as info:
            call()
        messages.append(str(info.value))
    entries = box.files.list("/", depth=2)
    messages += [e.path for e in entries] + [str(e.symlink_target) for e in entries]
    r = box.commands.run("cat /nope; cd /nope; ls /nope; python3 /nope.py; pwd; realpath ~; "
                         "python3 -c 'import os, sys; print(os.getcwd(), sys.executable, sys.path, __file__)'")
    messages += [r.stdout, r.stderr]
    ex = box.run_code("import os, sys\nraise OSError(os.getcwd() + ' ' + repr(sys.path))")
    assert ex.error is not None
    messages += [ex.error.value, ex.error.traceback]
    for text in messages:
        assert base not in text and "declaw-wasm-sbx" not in text, text
        assert not re.search(r"/root/\.cache|/work/main", text), text
    assert_host_fine(box)
