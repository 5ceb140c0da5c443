"""Pause and resume (docs/state.md): in this process and in another one (the state store is the
hand-over), with E2B's `connect` and declaw's `resume`; one winner when two processes race to
resume a sandbox; secrets never stored (a resume elsewhere takes them again);
`lifecycle={"on_timeout": "pause"}`; the async face."""

from __future__ import annotations

import asyncio
import textwrap
import time
from pathlib import Path

import pytest

from declaw_wasm import (AsyncSandbox, InvalidArgumentException, Sandbox, SandboxException, SandboxNotFoundException,
                         SandboxState)

from .conftest import run_python

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_pause_and_resume_in_process(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("import numpy as np; data = np.arange(10) * 2")
    sandbox.files.write("/tmp/kept.txt", "kept")
    assert sandbox.pause() is True
    assert not sandbox.is_running()
    with pytest.raises(SandboxException, match="paused"):
        sandbox.run_code("1")
    assert sandbox.resume() is sandbox  # in place: the same object goes on
    assert sandbox.is_running()
    assert "".join(sandbox.run_code("print(int(data.sum()))").logs.stdout) == "90\n"
    assert sandbox.files.read("/tmp/kept.txt") == "kept"
    assert sandbox.commands.run("cat /tmp/kept.txt").stdout == "kept"
    # E2B's way back: connect resumes; by id: Sandbox.resume(id), Sandbox.pause(id)
    assert Sandbox.pause(sandbox.sandbox_id) is True
    assert Sandbox.connect(sandbox.sandbox_id).run_code("int(data[1])").text == "2"
    Sandbox.pause(sandbox.sandbox_id)
    assert Sandbox.resume(sandbox.sandbox_id).run_code("int(data[2])").text == "4"


def test_resume_in_another_process_and_back(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("import time; x = 41; t0 = time.monotonic()")
    sandbox.files.write("/home/user/from-parent.txt", "parent")
    sandbox.pause()
    child = run_python(textwrap.dedent(f"""
        from declaw_wasm import Sandbox
        sbx = Sandbox.connect({sandbox.sandbox_id!r})
        out = sbx.run_code("x += 1; print(x, time.monotonic() > t0)")
        print("".join(out.logs.stdout), end="")
        print(sbx.files.read("/home/user/from-parent.txt"))
        sbx.files.write("/home/user/from-child.txt", "child")
        assert sbx.pause() is True
    """))
    assert child.returncode == 0, child.stderr
    assert child.stdout == "42 True\nparent\n"
    sandbox.resume()  # the child's pause is the latest: its state comes back here
    assert "".join(sandbox.run_code("print(x)").logs.stdout) == "42\n"
    assert sandbox.files.read("/home/user/from-child.txt") == "child"


def test_two_processes_racing_to_resume_one_wins(sandbox: Sandbox, state: str, tmp_path: Path) -> None:
    sandbox.run_code("x = 'once'")
    sandbox.pause()
    go = tmp_path / "go"
    racer = textwrap.dedent(f"""
        import os, time
        from declaw_wasm import ConflictException, Sandbox
        from declaw_wasm._wasm.warm_image import get_interpreter
        get_interpreter()  # loaded before the start line, so both try at once
        while not os.path.exists({str(go)!r}):
            time.sleep(0.005)
        try:
            sbx = Sandbox.resume({sandbox.sandbox_id!r})
        except ConflictException as exc:
            print("lost:", exc)
        else:
            print("won:", "".join(sbx.run_code("print(x)").logs.stdout).strip())
            time.sleep(3)  # still running while the other one tries
            sbx.pause()
    """)
    import subprocess
    import sys
    import os

    from .conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-c", racer], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(8)  # both have loaded the runtime (it is cached)
    go.write_text("go")
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(out.strip() for out, _ in outs), outs
    lines = sorted(out.strip().splitlines()[-1] for out, _ in outs)
    assert len(lines) == 2 and lines[1] == "won: once", outs
    assert lines[0].startswith("lost:") and "running in another process" in lines[0], outs


def test_secrets_are_never_stored_and_needed_again_elsewhere(state: str) -> None:
    from declaw_wasm import Secret

    sbx = Sandbox.create(secrets={"API_TOKEN": Secret("s3cr3t-value", hosts=["api.example.com"])})
    try:
        placeholder = sbx.commands.run("echo $API_TOKEN").stdout.strip()
        assert placeholder and "s3cr3t" not in placeholder
        sbx.run_code("import os; seen = os.environ['API_TOKEN']")
        sbx.pause()
        for path in Path(state).rglob("*"):
            if path.is_file():
                assert b"s3cr3t-value" not in path.read_bytes(), path
        child = run_python(textwrap.dedent(f"""
            from declaw_wasm import InvalidArgumentException, Sandbox, Secret
            try:
                Sandbox.resume({sbx.sandbox_id!r})
            except InvalidArgumentException as exc:
                print("refused:", exc)
            sbx = Sandbox.resume({sbx.sandbox_id!r},
                                 secrets={{"API_TOKEN": Secret("s3cr3t-value", hosts=["api.example.com"])}})
            print("".join(sbx.run_code("print(seen == os.environ['API_TOKEN'])").logs.stdout), end="")
            print(sbx.commands.run("echo $API_TOKEN").stdout, end="")
            sbx.pause()
        """))
        assert child.returncode == 0, child.stderr
        refused, same, env = child.stdout.splitlines()
        assert refused.startswith("refused:") and "API_TOKEN" in refused and "secrets=" in refused
        assert same == "True" and env == placeholder  # the guest's placeholder is kept
        sbx.resume()  # in the process that holds the secret, no need to pass it again
        assert sbx.commands.run("echo $API_TOKEN").stdout.strip() == placeholder
    finally:
        sbx.kill()


def test_on_timeout_pause_pauses_instead_of_killing(state: str) -> None:
    sbx = Sandbox.create(timeout=3, lifecycle={"on_timeout": "pause"})
    sbx.run_code("kept = 'yes'")
    sbx.commands.run("sleep 60", background=True)  # what runs at the end of the lifetime is stopped
    time.sleep(7)
    assert sbx.get_info().state == SandboxState.PAUSED
    assert sbx.get_info().lifecycle == {"on_timeout": "pause"}
    sbx.resume(timeout=60)
    assert "".join(sbx.run_code("print(kept)").logs.stdout) == "yes\n"
    sbx.kill()
    with pytest.raises(InvalidArgumentException):
        Sandbox.create(lifecycle={"on_timeout": "hibernate"})


def test_killing_a_paused_sandbox_ends_it_and_keeps_its_snapshots(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("x = 1")
    sandbox.pause()
    assert Sandbox.kill(sandbox.sandbox_id) is True
    with pytest.raises(SandboxNotFoundException):
        Sandbox.connect(sandbox.sandbox_id)
    assert sandbox.sandbox_id not in {i.sandbox_id for i in Sandbox.list()}
    [snap] = Sandbox.list_snapshots(sandbox.sandbox_id)
    assert snap.source == "pause"
    restored = Sandbox.restore(sandbox.sandbox_id)  # a killed sandbox comes back from a snapshot
    assert "".join(restored.run_code("print(x)").logs.stdout) == "1\n"
    restored.kill()


def test_the_async_face(state: str) -> None:
    async def main() -> None:
        sbx = await AsyncSandbox.create()
        await sbx.run_code("v = 'async'")
        info = await sbx.create_snapshot()
        assert await sbx.pause() is True
        assert (await sbx.get_info()).state == SandboxState.PAUSED
        await sbx.resume()
        assert "".join((await sbx.run_code("print(v)")).logs.stdout) == "async\n"
        [fork] = await sbx.fork(count=1)
        assert "".join((await fork.run_code("print(v)")).logs.stdout) == "async\n"
        await fork.kill()
        again = await AsyncSandbox.restore(sbx.sandbox_id, snapshot_id=info.snapshot_id)
        assert [s.snapshot_id for s in await again.list_snapshots()][-1] == info.snapshot_id
        await again.pause()
        resumed = await AsyncSandbox.resume(sbx.sandbox_id)
        assert isinstance(resumed, AsyncSandbox)
        await resumed.kill()
    asyncio.run(main())


def test_pause_and_resume_through_an_object_store(s3_state: str) -> None:
    """DECLAW_WASM_STATE=s3://... (moto's S3 server): the snapshot's parts and manifest, the state
    document and the lease (a conditional PUT) live there; another process resumes."""
    sbx = Sandbox.create()
    try:
        sbx.run_code("import numpy as np; weights = np.arange(5)")
        sbx.files.write("/home/user/model.txt", "on s3")
        sbx.pause()
        child = run_python(textwrap.dedent(f"""
            from declaw_wasm import Sandbox
            sbx = Sandbox.connect({sbx.sandbox_id!r})
            print("".join(sbx.run_code("print(int(weights.sum()))").logs.stdout), end="")
            print(sbx.files.read("/home/user/model.txt"))
            sbx.pause()
        """))
        assert child.returncode == 0, child.stderr
        assert child.stdout == "10\non s3\n"
        sbx.resume()
        assert [s.source for s in sbx.list_snapshots()] == ["pause"]
    finally:
        sbx.kill()
