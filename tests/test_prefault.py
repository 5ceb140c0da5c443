"""Hot pages (_wasm/prefault.py): a fresh guest's copy-on-write faults taken in one batch.

What must hold: populating never changes a byte a guest reads (a populated page holds what the
mapping held); the page list is learned from what a guest wrote and nothing else; and it is
learned only from a pristine guest (a standby sandbox's parked guest, before the sandbox is
handed out), never from a guest that ran or saw anything of a sandbox's."""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import Sandbox, testing
from declaw_wasm._local.parking import parking
from declaw_wasm._local.standby import teaches_hot_pages
from declaw_wasm._packages.catalog import GuestTemplate, builtin
from declaw_wasm._wasm.prefault import PAGE, HotPages

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and pagemap are Linux's")


def _private_pages(base: int, pages: int) -> list[int]:
    """Indexes of the pages at `base` that are private copies (present, not file-backed)."""
    with open("/proc/self/pagemap", "rb") as pagemap:
        pagemap.seek(base // PAGE * 8)
        data = pagemap.read(pages * 8)
    return [i for i, (entry,) in enumerate(struct.iter_unpack("<Q", data))
            if entry >> 63 and not (entry >> 61) & 1]


@pytest.fixture
def image(tmp_path: Path) -> Path:
    """A file standing for the warm image: 64 pages of random bytes."""
    path = tmp_path / "image"
    path.write_bytes(os.urandom(64 * PAGE))
    return path


def _mapped(path: Path) -> tuple[mmap.mmap, int]:
    """The file mapped copy-on-write, as a guest's memory maps the image; and its address."""
    with path.open("rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    return mapping, ctypes.addressof(ctypes.c_char.from_buffer(mapping))


@linux_only
def test_hot_pages_are_the_pages_written_and_populating_keeps_the_bytes(image: Path) -> None:
    original = image.read_bytes()
    first, base = _mapped(image)
    for page in (3, 4, 10, 40):  # 3 and 4 are one run; 10 and 40 are their own
        first[page * PAGE] = first[page * PAGE]  # a write of the same byte: a private copy, same content
    hot = HotPages()
    hot.learn(base, len(first))
    assert hot.runs == ((3 * PAGE, 2 * PAGE), (10 * PAGE, PAGE), (40 * PAGE, PAGE))

    second, base2 = _mapped(image)
    assert _private_pages(base2, 64) == []
    populated = hot.populate(base2, len(second))
    if hot.disabled:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE")
    assert populated == 4 * PAGE
    assert _private_pages(base2, 64) == [3, 4, 10, 40]
    assert bytes(second) == original  # what the guest reads is the image's, populated or not
    assert hot.populate(base2, 11 * PAGE) == 3 * PAGE  # runs past the memory's size are skipped
    del first, second  # (the buffers' exports must go before the mappings close)


def test_hot_pages_are_learned_once() -> None:
    hot = HotPages()
    hot.runs = ((0, PAGE),)
    hot.learn(PAGE * 16, PAGE)  # a second pristine guest: the first list stays
    assert hot.runs == ((0, PAGE),)


def test_only_a_builtin_templates_standby_guest_teaches(tmp_path: Path) -> None:
    assert all(teaches_hot_pages(builtin(name)) for name in ("code-interpreter", "base", "ai-agent", "web-dev"))
    assert not teaches_hot_pages(GuestTemplate("mine", bundle=True, site=tmp_path / "site"))
    assert not teaches_hot_pages(GuestTemplate("mine", bundle=True, root=tmp_path / "files"))
    assert not teaches_hot_pages(GuestTemplate("mine", bundle=True, envs={"A": "b"}))


@pytest.mark.guest
def test_hot_pages_are_learned_from_a_pristine_standby_guest_only(monkeypatch: pytest.MonkeyPatch,
                                                                  guest_path: str) -> None:
    if guest_path != "warm":
        pytest.skip("only the warm image parks")
    sbx = Sandbox.create()
    interpreter = testing.local(sbx).interpreter
    monkeypatch.setattr(interpreter, "hot_pages", None)  # as in a process that learned nothing yet
    try:
        # a used sandbox's parked guest (its envs, files and commands reached it): teaches nothing
        assert sbx.commands.run("python3 -c 'print(1)'").stdout == "1\n"
        testing.park(sbx)
        assert parking.is_parked(testing.local(sbx))
        assert interpreter.hot_pages is None or interpreter.hot_pages.runs is None
    finally:
        sbx.kill()
    # a standby sandbox's parked guest, made ahead of any create: teaches the runtime its hot pages
    deadline = time.monotonic() + 60
    while (interpreter.hot_pages is None or interpreter.hot_pages.runs is None) and time.monotonic() < deadline:
        Sandbox.create().kill()  # the second create of a key starts standby; its first is made at once
        time.sleep(0.3)
    hot = interpreter.hot_pages
    assert hot is not None and hot.runs, "no standby guest taught the hot pages"
    # and a fresh guest, its pages populated, runs as before
    with Sandbox.create(envs={"WHO": "fresh"}) as fresh:
        assert fresh.commands.run("python3 -c 'import os; print(os.environ[\"WHO\"])'").stdout == "fresh\n"


_LOOP = """
from declaw_wasm import Sandbox, testing
learned = []
for _ in range(20):
    with Sandbox.create() as sbx:
        sbx.commands.run("true")
        hot = testing.local(sbx).interpreter.hot_pages
        learned.append(hot is not None and hot.runs is not None)
print(learned.index(True) if True in learned else "never")
"""


@pytest.mark.guest
def test_a_loop_of_creates_back_to_back_learns_the_hot_pages(guest_path: str) -> None:
    """A harness creating sandboxes in a loop from its first line: the standby sandbox that
    teaches the hot pages is offered only once its park turn is over (a create that took it
    sooner made it not pristine, and a loop never pauses for another: nothing was ever learned)."""
    if guest_path != "warm":
        pytest.skip("only the warm image parks")
    import subprocess

    out = subprocess.run([sys.executable, "-c", _LOOP], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() != "never", "a loop of 20 creates never learned the hot pages"
    assert int(out.stdout) <= 5
