"""Fork (E2B's `fork`): new sandboxes with the same files and code contexts, each diverging on
its own (files copied by reflink where the file system can, contexts from one shared image)."""

from __future__ import annotations

import pytest

from declaw_wasm import ConflictException, InvalidArgumentException, Sandbox

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_forks_start_equal_and_diverge_independently(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("import random, tempfile; items = [1, 2]; seed_probe = None")
    sandbox.files.write("/home/user/shared.txt", "base")
    sandbox.commands.run("mkdir -p /tmp/d/e && ln -s shared.txt /home/user/link && echo deep > /tmp/d/e/f")
    forks = sandbox.fork(count=3)
    try:
        assert len(forks) == 3 and len({f.sandbox_id for f in forks} | {sandbox.sandbox_id}) == 4
        for i, fork in enumerate(forks):
            fork.run_code(f"items.append({i})")
            fork.files.write("/home/user/shared.txt", f"fork {i}")
        sandbox.run_code("items.append('parent')")
        for i, fork in enumerate(forks):
            assert "".join(fork.run_code("print(items)").logs.stdout) == f"[1, 2, {i}]\n"
            assert fork.files.read("/home/user/shared.txt") == f"fork {i}"
            assert fork.commands.run("cat /home/user/link /tmp/d/e/f").stdout == f"fork {i}deep\n"
        assert "".join(sandbox.run_code("print(items)").logs.stdout) == "[1, 2, 'parent']\n"
        assert sandbox.files.read("/home/user/shared.txt") == "base"
        # each fork draws its own random numbers (new seeds), so best-of-N samples differ
        draws = {"".join(f.run_code("print(random.random(), tempfile.mktemp())").logs.stdout) for f in forks}
        assert len(draws) == 3
    finally:
        for fork in forks:
            fork.kill()


def test_fork_of_a_fork_and_a_single_fork(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("depth = 0")
    [one] = sandbox.fork()  # no count: a list of one (E2B's)
    assert isinstance(one, Sandbox)
    two = one.fork(count=1)[0]  # before `one` ran a cell: its pending image is what forks
    try:
        assert "".join(two.run_code("depth += 2; print(depth)").logs.stdout) == "2\n"
        assert "".join(one.run_code("print(depth)").logs.stdout) == "0\n"
    finally:
        one.kill()
        two.kill()


def test_fork_rules(sandbox: Sandbox, state: str) -> None:
    for bad in (0, 65, -1, True, "2"):
        with pytest.raises(InvalidArgumentException):
            sandbox.fork(count=bad)
    sandbox.run_code("f = open('/tmp/x', 'w')")
    with pytest.raises(ConflictException, match="open files"):
        sandbox.fork(count=2)
    sandbox.run_code("f.close()")
    forks = sandbox.fork(count=2, timeout=30)
    assert all(f.get_info().end_at < sandbox.get_info().end_at for f in forks)
    for fork in forks:
        fork.kill()
