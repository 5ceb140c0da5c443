"""`jq` in the sandbox's shell (guest/declaw_shell/jq.py, jqlang.py) against the real jq.

Each case of jq_cases.py runs as `jq ARGS < input` under the host's jq (Debian's, installed by
the README's test command where it can) and in a sandbox, in folders holding the same files:
stdout, the exit status and stderr must match (for a filter that does not compile, the status
and the last line: bison's wording of an unexpected token is not reproduced). Those cases are
the ones where jq 1.6 (Debian 12's) and jq 1.7.1 (what ours follows) agree; where they differ,
V17 below holds jq 1.7.1's answer, checked against jq 1.7.1 built from its source. The guest
tests at the end are the shell's side: `which jq`, pipes, streaming an endless output, and
hostile input (nesting, recursion) that must end with jq's error, not a crashed guest."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from declaw_wasm import Sandbox
from shell.jq_cases import CASES, FILES

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

HOST_JQ = shutil.which("jq")
FOLDER = "/home/user/jqcases"

# (arguments, stdin, stdout, exit status, what stderr starts with) as jq 1.7.1 answers
V17: list[tuple[list[str], str, str, int, str]] = [
    (["-c", ".[1:].[0], .[-1]"], "[1, 2, 3]", "2\n3\n", 0, ""),  # 1.7: `.[` after a path
    (["-c", "if . then \"yes\" end"], "false", "false\n", 0, ""),  # 1.7: else is optional
    (["-c", "[limit(0; 1, 2)], [limit(-1; 1, 2)]"], "null", "[]\n[1,2]\n", 0, ""),
    (["-c", "@uri"], "\"a'b(c)!*\"", '"a%27b%28c%29%21%2A"\n', 0, ""),  # 1.7: only A-Za-z0-9-_.~ kept
    (["-c", "pick(.a.b, .c[1])"], '{"a": {"b": 1, "x": 2}, "c": [5, 6, 7]}', '{"a":{"b":1},"c":[null,6]}\n', 0, ""),
    (["-c", "map(abs)"], "[-5, 0.5]", "[5,0.5]\n", 0, ""),
    (["-c", "splits(\", \") | ascii_upcase"], '"a, b"', '"A"\n"B"\n', 0, ""),
    (["-c", "debug(\"msg\"), (1 | stderr)"], "2", "2\n1\n", 0, '["DEBUG:","msg"]\n1'),
    (["-c", "$__loc__"], "null", '{"file":"<top-level>","line":1}\n', 0, ""),
    (["-c", "getpath([\"a\", 0, \"b\"]), ([paths] | length), (tostream | tostring)"], '{"a": [{"b": 1}]}',
     '1\n3\n"[[\\"a\\",0,\\"b\\"],1]"\n"[[\\"a\\",0,\\"b\\"]]"\n"[[\\"a\\",0]]"\n"[[\\"a\\"]]"\n', 0, ""),
    (["-c", ".[] |= empty"], "[1, 2, 3]", "[]\n", 0, ""),  # 1.7.1: every path deleted at the end
    (["-c", "del(.[1], .[-6], .[2], .[-3:9])"], "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]", "[0,3,5,6,9]\n", 0, ""),
    (["-c", "[.[] * \"ab\"]"], "[-1, 0, 0.5, 2.7]", '[null,"","","abab"]\n', 0, ""),
    (["-c", "try error(null) catch ., [.[] | try error catch .]"], "[1, \"x\"]", 'null\n[1,"x"]\n', 0, ""),
    (["-n", "1, error(null), 2"], "", "1\n", 5, "jq: error (at <unknown>) (not a string): null\n"),
    (["-c", "[.[] | isnan, isinfinite, isnormal]"], '[null, "a", 1]',
     "[false,false,false,false,false,false,false,false,true]\n", 0, ""),
    (["-c", ".[-0.5], .[1.7], (.[1.2] = 9)"], "[1, 2, 3]", "1\n2\n[1,9,3]\n", 0, ""),
    (["-n", "\"abc\" | test(\"(\")"], "", "", 5, "jq: error (at <unknown>): Regex failure: "),
    (["-n", "1 / 0"], "", "", 5,
     "jq: error (at <unknown>): number (1) and number (0) cannot be divided because the divisor is zero"),
    (["-n", "1 % 0"], "", "", 5,
     "jq: error (at <unknown>): number (1) and number (0) cannot be divided (remainder) because the divisor is zero"),
    (["-n", "\"x\" | tonumber"], "", "", 5, "jq: error (at <unknown>): "),
    (["-n", "[1] | .[nan:1], .[1:nan]"], "", "[\n  1\n]\n[]\n", 0, ""),
    (["-n", "try ([range(3)] | .[nan] = 9) catch ."], "", '"Cannot set array element at NaN index"\n', 0, ""),
    (["-n", "[1] | path(map(.) | .[0])"], "", "", 5,
     "jq: error (at <unknown>): Invalid path expression near attempt to access element 0 of [1]"),
    (["-n", "{} | .a.b |= (1, 2)"], "", '{\n  "a": {\n    "b": 1\n  }\n}\n', 0, ""),
    (["-c", "--seq", "-n", "1, [2]"], "", "\x1e1\n\x1e[2]\n", 0, ""),
    (["--raw-output0", ".[]"], '["a", "b"]', "a\0b\0", 0, ""),
    (["--raw-output0", ".[]"], '["a\\u0000b"]', "", 5, "jq: error (at <stdin>:0): Cannot dump a string containing NUL"),
    (["-c", "--", ".a"], '{"a": 1}', "1\n", 0, ""),
    ([], '{"a": 1}', '{\n  "a": 1\n}\n', 0, ""),  # no filter: `.`, as jq when stdin is not a terminal
    (["-c", ".a"], '1 {"a": 2} "s" {"a": 3}', "2\n3\n", 0, "jq: error (at <stdin>:0): Cannot index number"),
    (["-c", ".a"], '{"a": 2} 1', "2\n", 5, "jq: error (at <stdin>:0): Cannot index number"),  # the last input's
    (["."], '{"a": 1,', "", 5, "jq: parse error: "),
    (["-c", "."], '[1, 2] {"x": ]', "[1,2]\n", 5, "jq: parse error: "),
    (["-s", "."], "1 2 ]", "", 5, "jq: parse error: "),
    ([".a", "bad.json"], "", "", 5, "jq: parse error: "),
    (["length", "text.txt"], "", "", 5, "jq: parse error: "),
    (["."], "[" * 300 + "]" * 300, "", 5, "jq: parse error: Exceeds depth limit for parsing"),
    (["-c", "."], "[" * 256 + "]" * 256, "[" * 256 + "]" * 256 + "\n", 0, ""),
    ([".", "nosuchfile.json"], "", "", 2, "jq: error: Could not open file nosuchfile.json: No such file or directory"),
    (["--no-such-option", "."], "{}", "", 2, "jq: Unknown option --no-such-option\nUse jq --help"),
    (["-Z", "."], "{}", "", 2, "jq: Unknown option -Z\n"),
    (["--arg", "x"], "", "", 2, "jq: --arg takes two parameters (e.g. --arg varname value)\n"),
    (["-n", "--argjson", "x", "{bad", "$x"], "", "", 2, "jq: invalid JSON text passed to --argjson\n"),
    (["--indent", "9", "."], "{}", "", 2, "jq: --indent takes a number between -1 and 7\n"),
    (["--version"], "", "jq-1.7.1\n", 0, ""),
    (["-n", "@nosuchformat"], "", "", 5, "jq: error (at <unknown>): nosuchformat is not a valid format"),
    (["-n", "{a: 1} | halt_error(3)"], "", "", 3, '{"a":1}\n'),
    (["-n", "\"bye\\n\" | halt_error(1)"], "", "", 1, "bye\n"),
    (["-n", "null | halt_error"], "", "", 5, ""),
    (["-c", "-n", "[inputs]", "-R"], "a\nb", '["a","b"]\n', 0, ""),
    (["-e", ".[]"], "[null, 1]", "null\n1\n", 0, ""),
    (["-e", ".a"], '{"a": 1} {"b": 2}', "1\nnull\n", 1, ""),
    (["-e", ".[]"], "[1] []", "1\n", 0, ""),  # -e: the last input had no output, an earlier one was true
]


def _write(folder: Path) -> None:
    for name, text in FILES.items():
        (folder / name).write_text(text)


@pytest.fixture(scope="module")
def jq_sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=1800)
    sandbox.files.write_files([{"path": f"{FOLDER}/{name}", "data": text} for name, text in FILES.items()])
    yield sandbox
    sandbox.kill()


def _guest(sandbox: Sandbox, args: list[str], stdin: str) -> tuple[str, int, str]:
    sandbox.files.write(f"{FOLDER}/.stdin", stdin)
    run = sandbox.commands.run("jq " + " ".join(shlex.quote(a) for a in args) + " < .stdin", cwd=FOLDER,
                               timeout=120)
    return run.stdout, run.exit_code, run.stderr


def _last_line(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    return lines[-1]


@pytest.mark.skipif(HOST_JQ is None, reason="needs jq on the host (apt-get install jq)")
@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: " ".join(CASES[i][0])[:60])
def test_jq_as_jq(jq_sbx: Sandbox, tmp_path: Path, case: int) -> None:
    args, stdin = CASES[case]
    _write(tmp_path)
    assert HOST_JQ is not None
    host = subprocess.run([HOST_JQ, *args], input=stdin, capture_output=True, text=True, cwd=tmp_path, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": str(tmp_path)})
    out, code, err = _guest(jq_sbx, args, stdin)
    assert (out, code) == (host.stdout, host.returncode)
    if code == 3:
        assert _last_line(err) == _last_line(host.stderr)
        assert err.startswith(host.stderr.split(" at <top-level>")[0].split(",")[0])
    else:
        assert err == host.stderr


@pytest.mark.parametrize("case", range(len(V17)), ids=lambda i: " ".join(V17[i][0])[:60])
def test_jq_1_7_1(jq_sbx: Sandbox, case: int) -> None:
    args, stdin, stdout, status, stderr = V17[case]
    out, code, err = _guest(jq_sbx, args, stdin)
    assert (out, code) == (stdout, status)
    assert err.startswith(stderr) and (stderr or not err)


def test_jq_in_the_shell(jq_sbx: Sandbox) -> None:
    run = jq_sbx.commands.run("command -v jq && which jq && [ -x /usr/bin/jq ] && jq --version")
    assert run.stdout == "/usr/bin/jq\n/usr/bin/jq\njq-1.7.1\n"
    line = ("printf '{\"items\":[{\"n\":\"a\"},{\"n\":\"b\"}]}' | jq -r '.items[].n' | sort -r | tr -d '\\n'; "
            "echo; jq -n '[1,2]' > f.json && jq '.[1]' f.json; "
            "if echo '{\"ok\":true}' | jq -e .ok >/dev/null; then echo yes; fi; "
            "v=$(jq -r .version package.json); echo \"v=$v\"")
    run = jq_sbx.commands.run(line, cwd=FOLDER)
    assert run.stdout == "ba\n2\nyes\nv=1.2.3\n"


def test_jq_streams_an_endless_output(jq_sbx: Sandbox) -> None:
    run = jq_sbx.commands.run("jq -n 'repeat(1)' | head -3; jq -n 'range(1e9)' | sed -n '5p;5q'", timeout=60)
    assert run.stdout == "1\n1\n1\n4\n"


def test_jq_hostile_input_ends_with_an_error(jq_sbx: Sandbox) -> None:
    # a deep input is jq's parse error (CPython's C decoder would recurse a level a bracket)
    run = jq_sbx.commands.run("python3 -c \"print('['*200000)\" | jq .; echo status=$?", timeout=60)
    assert run.stdout == "status=5\n"
    assert run.stderr.startswith("jq: parse error: Exceeds depth limit for parsing")
    deep = "python3 -c \"import json; print('{\\\"a\\\":' * 100000 + '1' + '}' * 100000)\""
    run = jq_sbx.commands.run(f"{deep} | jq -c .; echo status=$?", timeout=60)
    assert run.stdout == "status=5\n"
    # a recursion too deep for the guest is jq's error, not a crashed guest; 1 500 calls work
    run = jq_sbx.commands.run("jq -n 'def f: if . > 0 then . - 1 | f else . end; 1500 | f'; "
                              "jq -n 'def f: if . > 0 then [. - 1 | f] else . end; 100000 | f'; echo status=$?",
                              timeout=60)
    assert run.stdout == "0\nstatus=5\n"
    assert "recursed too deeply" in run.stderr
    # a value built deeper than jq prints
    run = jq_sbx.commands.run("jq -nc 'reduce range(300) as $i (0; [.])' | grep -c 'skipped: too deep'")
    assert run.stdout == "1\n"
    # strings and regexes from the input are data: nothing runs
    run = jq_sbx.commands.run("echo '\"$(touch /tmp/pwned)\"' | jq -r '@sh \"echo \\(.)\"'; "
                              "jq -n '\"a\" | test(\"(a+)+$\")'; ls /tmp/pwned 2>&1 | head -1")
    assert run.stdout.startswith("echo '$(touch /tmp/pwned)'\ntrue\n")
    assert "No such file" in run.stdout
