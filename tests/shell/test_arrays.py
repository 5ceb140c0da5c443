"""Arrays at sizes and shapes the conformance lines (array_cases.py) do not reach: bash's key
order across its table's growth (20 000 keys: 1024 -> 4096 -> 16384 buckets), a word count
against Python's, and hostile subscripts (nested past bash's recursion limit, unclosed quotes),
which end with an error while the sandbox goes on."""

from __future__ import annotations

import collections
import random
import tempfile
from typing import Iterator

import pytest

from declaw_wasm import Sandbox
from hostbash import HOST_BASH, host_bash  # tests/ is on sys.path

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


@pytest.fixture(scope="module")
def sbx() -> Iterator[Sandbox]:
    sandbox = Sandbox.create(timeout=600)
    yield sandbox
    sandbox.kill()


@pytest.mark.skipif(HOST_BASH is None, reason="needs bash on the host")
def test_key_order_is_bash_s_across_growth(sbx: Sandbox) -> None:
    rng = random.Random(7)
    keys = [f"{rng.choice(['k', 'user_', 'é', 'x.y/'])}{rng.randrange(10**6)}" for _ in range(20000)]
    sbx.files.write("/home/user/keys.txt", "\n".join(keys) + "\n")
    line = ("declare -A m; while IFS= read -r k; do m[$k]=${#k}; done < keys.txt; "
            "unset 'm[" + keys[5] + "]'; m[again]=1; echo ${#m[@]}; printf '%s\\n' \"${!m[@]}\" | md5sum")
    ours = sbx.commands.run(line, cwd="/home/user", timeout=300)
    with tempfile.TemporaryDirectory() as folder:
        with open(f"{folder}/keys.txt", "w", encoding="utf-8") as out:
            out.write("\n".join(keys) + "\n")
        theirs = host_bash(["-c", line], cwd=folder, capture_output=True, timeout=120,
                           env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    assert (ours.stdout, ours.exit_code) == (theirs.stdout.decode(), theirs.returncode)


def test_a_word_count_agrees_with_python(sbx: Sandbox) -> None:
    rng = random.Random(3)
    text = " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "x.y", "1+1"]) + str(rng.randrange(50))
                    for _ in range(4000))
    sbx.files.write("/home/user/words.txt", text)
    r = sbx.commands.run("declare -A count; for w in $(cat words.txt); do ((count[$w]++)); done; "
                         "for w in \"${!count[@]}\"; do echo \"$w ${count[$w]}\"; done", cwd="/home/user", timeout=300)
    assert r.exit_code == 0, r.stderr
    counted = dict(line.rsplit(" ", 1) for line in r.stdout.splitlines())
    assert {w: int(n) for w, n in counted.items()} == dict(collections.Counter(text.split()))


@pytest.mark.parametrize("line, message", [
    ("a=(1); echo $(( " + "a[" * 3000 + "0" + "]" * 3000 + " ))", "expression recursion level exceeded"),
    ("declare -A m=([k]=1); (( " + "m[" * 200 + "k" + "]" * 200 + " += 1 )); echo ${m[k]}", None),
    ("declare -A m; echo \"${m[\\\"a]}\"", None),
    ("declare -A m; unset 'm[]'", "bad array subscript"),
    ("declare -A m; m[$(printf 'x%.0s' $(seq 1 20000))]=1; echo ${#m[@]}", None),
])
def test_hostile_subscripts_end_in_an_error_not_a_crash(sbx: Sandbox, line: str, message: str | None) -> None:
    r = sbx.commands.run(line, cwd="/home/user", timeout=120)
    if message is not None:
        assert message in r.stderr, r.stderr[-500:]
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr[-2000:]
    assert sbx.commands.run("declare -A after=([ok]=yes); echo ${after[ok]}").stdout == "yes\n"
