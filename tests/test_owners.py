"""A program killed hard leaves its sandboxes' folders behind; the next program to start deletes
them, and never a live program's (declaw_wasm/_owners.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import Sandbox, testing
from declaw_wasm._owners import owner_tag, reap

HOLDER = """
import sys, time
from declaw_wasm import Sandbox, testing
held = [Sandbox.create(timeout=300) for _ in range(2)]
held[0].files.write("/home/user/data.txt", "kept while I live")
print(*[testing.host_folder(s) for s in held], flush=True)
time.sleep(300)
"""


def _holder() -> tuple[subprocess.Popen[str], list[Path]]:
    child = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert child.stdout is not None
    line = child.stdout.readline()
    folders = [Path(p) for p in line.split()]
    assert len(folders) == 2 and all(f.is_dir() for f in folders), line
    return child, folders


@pytest.mark.guest
def test_a_killed_programs_folders_are_reaped_at_the_next_start_and_a_live_ones_are_not() -> None:
    mine = Sandbox.create(timeout=300)
    killed, leftovers = _holder()
    alive, kept = _holder()
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(30)
        assert all(f.is_dir() for f in leftovers)  # SIGKILL: nothing could clean up
        assert all(owner_tag() not in f.name for f in leftovers + kept)  # each names its owner

        # the next program that starts making sandboxes reaps them in the background
        starter = "from declaw_wasm import Sandbox; from declaw_wasm._owners import wait_for_reaper\n" \
                  "Sandbox.create().kill(); wait_for_reaper()"
        subprocess.run([sys.executable, "-c", starter], check=True, timeout=120)
        assert not any(f.exists() for f in leftovers)
        assert all(f.is_dir() for f in kept)  # a live program's folders stay...
        assert testing.host_folder(mine).is_dir()  # ...and so do ours
        assert mine.commands.run("echo still here").stdout == "still here\n"
    finally:
        alive.kill()
        alive.wait(30)
        killed.kill()
        mine.kill()
    for folder in kept:  # the one we SIGKILLed last: reap it like the next start would
        deadline = time.monotonic() + 10
        while folder.exists() and time.monotonic() < deadline:
            reap(folder.parent)
            time.sleep(0.1)
        assert not folder.exists()


def test_folders_of_unknown_or_other_owners_are_left_alone(tmp_path: Path) -> None:
    pid1 = tmp_path / f"declaw-wasm-sbx-p1.{12345}.deadbeef-abc"  # pid 1 lives, another boot
    unparsed = tmp_path / "declaw-wasm-sbx-oldstyle"
    mine = tmp_path / f"declaw-wasm-sbx-{owner_tag()}-xyz"
    dead = tmp_path / "declaw-wasm-scratch-p999999999.1.00000000-q"
    link_target = tmp_path / "target"
    for folder in (pid1, unparsed, mine, dead, link_target):
        folder.mkdir()
    (link_target / "precious").write_text("x")
    link = tmp_path / "declaw-wasm-sbx-p999999998.1.00000000-link"
    link.symlink_to(link_target)
    reaped = reap(tmp_path)
    assert set(reaped) == {pid1, dead}  # pid 1 of another boot is not ours any more
    assert unparsed.is_dir() and mine.is_dir() and (link_target / "precious").exists()
