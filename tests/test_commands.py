"""commands.run: python as a process, exit codes, streams, envs, timeouts, the small shell."""

import os
import threading
import time

import pytest

from declaw_wasm import Sandbox, TimeoutException
from waiting import until  # tests/ is on sys.path

pytestmark = [pytest.mark.guest, pytest.mark.served]  # every test on `sbx` runs in-process and served


def test_exit_code_is_returned_not_raised(sbx: Sandbox) -> None:
    r = sbx.commands.run("python3 -c 'import sys; print(\"out\"); print(\"err\", file=sys.stderr); exit(3)'")
    assert (r.exit_code, r.stdout, r.stderr) == (3, "out\n", "err\n")


def test_uncaught_exception_prints_a_cpython_traceback(sbx: Sandbox) -> None:
    r = sbx.commands.run("python3 -c '1/0'")
    assert r.exit_code == 1
    assert r.stderr.startswith("Traceback (most recent call last):\n  File \"<string>\", line 1")
    assert r.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "_declaw_boot" not in r.stderr


def test_script_sees_file_argv_and_imports_a_module_beside_it(sbx: Sandbox) -> None:
    sbx.files.write("proj/helper.py", "VALUE = 41\n")
    sbx.files.write("proj/main.py", "import sys, helper\nprint(helper.VALUE + 1, __file__, sys.argv, __name__)\n")
    r = sbx.commands.run("python3 proj/main.py a 'b c'")
    assert r.stdout == "42 /home/user/proj/main.py ['proj/main.py', 'a', 'b c'] __main__\n"
    r = sbx.commands.run("cd proj && python main.py x")
    assert r.stdout == "42 /home/user/proj/main.py ['main.py', 'x'] __main__\n"


def test_dash_m_runs_a_module_from_the_cwd(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/mods/greet.py", "import sys\nprint('hello', sys.argv[1:], __name__)\n")
    r = sbx.commands.run("python3 -m greet 1 2", cwd="/tmp/mods")
    assert r.stdout == "hello ['1', '2'] __main__\n"


def test_missing_script_is_exit_2(sbx: Sandbox) -> None:
    r = sbx.commands.run("python3 /tmp/does_not_exist.py")
    assert r.exit_code == 2
    assert "can't open file '/tmp/does_not_exist.py'" in r.stderr


def test_unknown_command_is_bash_127(sbx: Sandbox) -> None:
    r = sbx.commands.run("frobnicate --now")
    assert (r.exit_code, r.stderr) == (127, "bash: frobnicate: command not found\n")


def test_lists_prefix_assignments_and_cd(sbx: Sandbox) -> None:
    r = sbx.commands.run("false && echo no || echo yes; GREETING=hi python3 -c "
                         "'import os; print(os.environ[\"GREETING\"], os.getcwd())'")
    assert r.stdout == "yes\nhi /home/user\n"
    r = sbx.commands.run("cd /tmp && python3 -c 'import os; print(os.getcwd())'")
    assert r.stdout == "/tmp\n"
    r = sbx.commands.run("cd /nowhere && echo unreachable")
    assert r.exit_code == 1 and "No such file or directory" in r.stderr and r.stdout == ""


def test_host_environment_never_reaches_the_guest(sbx: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_TEST_SECRET_KEY", "sk-host-secret")
    r = sbx.commands.run("python3 -c 'import os; print(sorted(os.environ.items()))'")
    assert "sk-host-secret" not in r.stdout and "DECLAW_TEST_SECRET_KEY" not in r.stdout
    assert "('HOME', '/home/user')" in r.stdout and "('MPLBACKEND', 'Agg')" in r.stdout


def test_sandbox_and_command_envs() -> None:
    with Sandbox.create(envs={"A": "sandbox", "B": "sandbox"}) as s:
        code = "python3 -c 'import os; print(os.environ[\"A\"], os.environ[\"B\"])'"
        assert s.commands.run(code, envs={"B": "command"}).stdout == "sandbox command\n"
        assert s.commands.run(code).stdout == "sandbox sandbox\n"


def test_streaming_callbacks_get_output_while_running(sbx: Sandbox) -> None:
    seen: list[tuple[float, str]] = []
    start = time.monotonic()
    r = sbx.commands.run(
        "python3 -c 'import time\nfor i in range(3):\n    print(i, flush=True); time.sleep(0.3)'",
        on_stdout=lambda s: seen.append((time.monotonic() - start, s)))
    assert r.stdout == "0\n1\n2\n"
    assert "".join(s for _, s in seen) == r.stdout
    assert seen[0][0] < seen[-1][0] - 0.4  # the first line arrived well before the last


def test_timeout_stops_a_busy_loop_and_the_sandbox_goes_on(sbx: Sandbox) -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutException) as info:
        sbx.commands.run("python3 -c 'print(\"started\", flush=True)\nwhile True: pass'", timeout=3)
    assert time.monotonic() - start < 3.5  # (3 s: the cold path takes ~1 s to start the shell)
    assert info.value.stdout == "started\n"
    assert sbx.commands.run("python3 -c 'print(2)'").stdout == "2\n"


def test_timeout_stops_a_sleeping_guest(sbx: Sandbox) -> None:
    start = time.monotonic()
    with pytest.raises(TimeoutException):
        sbx.commands.run("python3 -c 'import time; time.sleep(60)'", timeout=1)
    assert time.monotonic() - start < 1.5


def test_sleep_sleeps_for_the_time_asked(sbx: Sandbox) -> None:
    """At least the time asked, and not far past it (a loaded 2-core machine once woke it 0.5 s
    late: the bound is loose, this is no timing benchmark)."""
    r = sbx.commands.run("python3 -c 'import time; t = time.monotonic(); time.sleep(0.3); "
                         "print(round(time.monotonic() - t, 2))'")
    assert 0.3 <= float(r.stdout) < 2.0, r


def test_asyncio_run_works(sbx: Sandbox) -> None:
    code = ("import asyncio\n"
            "async def work(i):\n    await asyncio.sleep(0.05 * i)\n    return i * i\n"
            "async def main():\n    q = asyncio.Queue()\n    await q.put(7)\n"
            "    return await asyncio.gather(*(work(i) for i in range(4))), await q.get()\n"
            "print(asyncio.run(main()))\n")
    sbx.files.write("/tmp/aio.py", code)
    r = sbx.commands.run("python3 /tmp/aio.py")
    assert (r.exit_code, r.stdout) == (0, "([0, 1, 4, 9], 7)\n"), r.stderr


def test_os_exit_code(sbx: Sandbox) -> None:
    assert sbx.commands.run("python3 -c 'import os; os._exit(7)'").exit_code == 7


def test_atexit_runs_and_files_are_flushed_at_exit(sbx: Sandbox) -> None:
    code = ("import atexit\nf = open('/tmp/unflushed.txt', 'w')\nf.write('kept')\n"
            "atexit.register(lambda: print('atexit ran'))\n")
    r = sbx.commands.run(f"python3 -c \"{code}\"")
    assert r.stdout == "atexit ran\n"
    assert sbx.files.read("/tmp/unflushed.txt") == "kept"


def test_two_sandboxes_from_two_threads_keep_their_files_apart() -> None:
    results: dict[str, str] = {}

    def work(name: str) -> None:
        with Sandbox.create() as s:
            s.files.write("/tmp/who.txt", name)
            for _ in range(3):
                r = s.commands.run("python3 -c 'print(open(\"/tmp/who.txt\").read())'")
                results.setdefault(name, "")
                results[name] += r.stdout

    threads = [threading.Thread(target=work, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"left": "left\n" * 3, "right": "right\n" * 3}


def test_output_is_separated_per_concurrent_command(sbx: Sandbox) -> None:
    outs: dict[int, str] = {}

    def work(i: int) -> None:
        outs[i] = sbx.commands.run(f"python3 -c 'for _ in range(200): print({i})'").stdout

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outs == {i: f"{i}\n" * 200 for i in range(4)}


def test_host_process_environment_is_untouched(sbx: Sandbox) -> None:
    before = dict(os.environ)
    sbx.commands.run("python3 -c 'import os; os.environ[\"X\"] = \"1\"'")
    assert dict(os.environ) == before



def test_a_lines_background_jobs_outlive_it_as_bashs_do(sbx: Sandbox) -> None:
    """bash leaves a line's `cmd &` jobs running when the line ends, a child bash's too: the
    command returns at the line's end (its status, the output so far) and the jobs run on,
    past the command's timeout, listed under its pid until they end, killable there. (The guest
    ended them with the line: the files were never written.)"""
    d = f"/tmp/jobs-{os.urandom(4).hex()}"
    sbx.commands.run(f"mkdir -p {d}")
    line = f"(sleep 4; echo later > {d}/a) & sh -c '(sleep 4; echo inner > {d}/b) &'; echo now; exit 3"
    r = sbx.commands.run(line, timeout=3)
    assert (r.stdout, r.stderr, r.exit_code) == ("now\n", "", 3)
    assert [p.cmd for p in sbx.commands.list() if d in p.cmd] == [line]
    until(lambda: sbx.commands.run(f"cat {d}/a {d}/b 2>/dev/null").stdout == "later\ninner\n")
    until(lambda: not [p for p in sbx.commands.list() if d in p.cmd])
    r = sbx.commands.run(f"while :; do sleep 0.1; done & echo {d}")
    assert (r.stdout, r.exit_code) == (f"{d}\n", 0)
    [pid] = [p.pid for p in sbx.commands.list() if d in p.cmd]
    assert sbx.commands.kill(pid)
    until(lambda: not [p for p in sbx.commands.list() if d in p.cmd])
    assert sbx.commands.run("echo on").stdout == "on\n"


def test_a_python_job_runs_beside_its_line_as_in_bash(sbx: Sandbox) -> None:
    """`python3 ... &` (a server, a worker) runs in a guest of its own, beside the line, as a
    process of its own does in bash: the line goes on at once (it waited for the program to
    end), reaches the server, reads the program's redirected output as it is written, gets its
    status from `wait`, kills it with `kill %1`; a program the line leaves running is listed
    beside the command and ends when the command is killed."""
    d = f"/tmp/pyjobs-{os.urandom(4).hex()}"
    sbx.commands.run(f"mkdir -p {d} && echo served > {d}/index.txt")
    port = 18000 + int.from_bytes(os.urandom(2), "big") % 2000
    r = sbx.commands.run(
        f"python3 -m http.server {port} -d {d} >{d}/log 2>&1 & "
        f"for i in $(seq 100); do curl -s localhost:{port}/index.txt && break; sleep 0.1; done; "
        # one write: print() writes the text and its newline apart, which `until` could see between
        f"python3 -u -c 'import sys, time; sys.stdout.write(\"early\\n\"); time.sleep(60)' > {d}/out & "
        f"until [ -s {d}/out ]; do sleep 0.05; done; cat {d}/out; "
        f"kill %1 %2; wait; "
        f"python3 -c 'import sys; sys.exit(len(sys.stdin.read()))' < {d}/index.txt & wait $!; echo status $?",
        timeout=30)
    assert (r.stdout, r.exit_code) == ("served\nearly\nstatus 7\n", 0), r
    assert "GET /index.txt" in sbx.files.read(f"{d}/log")
    r = sbx.commands.run(f"python3 -c 'import sys; sys.stdout.write(\"x\" * 3000000)' > {d}/big & wait; "
                         f"wc -c < {d}/big", timeout=30)  # one write, read back in 1 Mi pieces
    assert r.stdout.strip() == "3000000", r
    r = sbx.commands.run(f"python3 -c 'import time; time.sleep(60)' & echo {d}", timeout=10)
    assert r.stdout == f"{d}\n"
    listed = {p.pid: p.cmd for p in sbx.commands.list()}
    [line] = [pid for pid, cmd in listed.items() if d in cmd]
    assert "python3 -c 'import time; time.sleep(60)'" in listed.values(), listed
    assert sbx.commands.kill(line)
    until(lambda: not sbx.commands.list())


def test_a_shell_forgets_its_finished_jobs(sbx: Sandbox) -> None:
    """The guest's list of a line's jobs keeps only those still running when it adds one: a
    PTY's shell, whose line never ends, grew it by one per `cmd &` for the session's life."""
    line = "for i in $(seq 200); do true & wait; done; " \
           "python3 -c 'from declaw_shell.shells import LINE_JOBS; print(len(LINE_JOBS))'"
    assert sbx.commands.run(line).stdout == "1\n"


def test_another_commands_program_is_found_and_ended_by_pid_or_name(sbx: Sandbox) -> None:
    """A server started by one command is found and stopped from another, as agents do in a
    VM: `pgrep` and `ps` give its pid, `kill PID` and `pkill -f` end it (the asking command
    never matches itself), `kill -0` asks whether it runs; an unknown pid is bash's error. (The
    line that started a job's program is listed while the program runs: it carries the
    program's output to where the job's goes, and ends with it.)"""
    tag = f"jobs-{os.urandom(4).hex()}"
    sbx.commands.run(f"nohup python3 -c 'import time; time.sleep(60)' {tag}-a > /dev/null 2>&1 &")
    sbx.commands.run(f"python3 -c 'import time; time.sleep(60)' {tag}-b", background=True)
    until(lambda: len([p for p in sbx.commands.list() if tag in p.cmd]) == 3)
    listed = {p.pid: p.cmd for p in sbx.commands.list() if tag in p.cmd}
    [program] = [pid for pid, cmd in listed.items() if cmd.startswith("python3") and f"{tag}-a" in cmd]
    r = sbx.commands.run(f"pgrep -f {tag}-a; pgrep -x python3; pgrep -x nothing-like-it; echo $?")
    *found, named, status = r.stdout.split()
    assert status == "1" and {int(pid) for pid in found} == {pid for pid, cmd in listed.items() if f"{tag}-a" in cmd}
    assert int(named) == program, r
    r = sbx.commands.run(f"kill -0 {program} && echo runs; kill {program}; echo $?; kill 99999; echo $?")
    assert r.stdout == "runs\n0\n1\n" and r.stderr == "bash: kill: (99999) - No such process\n", r
    until(lambda: not [p for p in sbx.commands.list() if f"{tag}-a" in p.cmd])
    assert sbx.commands.run(f"pkill -f {tag}-b; echo $?").stdout == "0\n"
    until(lambda: not [p for p in sbx.commands.list() if tag in p.cmd])
    assert sbx.commands.run(f"pkill -f {tag}-b; echo $?").stdout == "1\n"
