"""A watch's read is bounded whatever the guest does between reads (docs/security.md, the watch
row): a guest renaming one full folder in and out of a recursively watched folder queued one
arrival per rename, and each arrival walked the folder again and reported all it held — 100
renames of a 4096-file folder made one `get_new_events()` return 819 399 events and take 1 GB
of host memory. Each folder is walked once a read, and what walks may report in one read is
capped (MAX_FOUND entries, MAX_FOLDERS folders)."""

from __future__ import annotations

import pytest

from declaw_wasm import Sandbox
from declaw_wasm._local.watch import MAX_FOUND

pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)

RENAMES = 60
FILES = 1500


def test_a_folder_renamed_in_and_out_is_walked_once_a_read(fresh: Sandbox) -> None:
    fresh.commands.run(f"mkdir -p /tmp/w /tmp/A && cd /tmp/A && python3 -c \"[open(f'f{{i}}', 'w').write('x') "
                       f"for i in range({FILES})]\"", timeout=120)
    watch = fresh.files.watch_dir("/tmp/w", recursive=True)
    try:
        loop = (f"import os\nfor i in range({RENAMES}):\n    os.rename('/tmp/A', '/tmp/w/A')\n"
                f"    if i < {RENAMES} - 1:\n        os.rename('/tmp/w/A', '/tmp/A')\n")
        fresh.files.write("/tmp/loop.py", loop)
        assert fresh.commands.run("python3 /tmp/loop.py", timeout=120).exit_code == 0
        events = watch.get_new_events()
        inner = [e for e in events if e.path.startswith("/tmp/w/A/")]
        # the folder's files once (created, and written: they hold a byte), not once per arrival
        assert len(inner) == 2 * FILES, len(inner)
        assert len(events) <= 2 * RENAMES + 2 * MAX_FOUND, len(events)
    finally:
        watch.stop()


def test_many_full_folders_in_one_read_share_one_cap(fresh: Sandbox) -> None:
    """Walks in one read report at most MAX_FOUND entries together (the kernel's queue bounds the
    rest), however many full folders arrive."""
    script = ("import os\nfor d in range(6):\n    os.makedirs(f'/tmp/src{d}')\n    for i in range(1000):\n"
              "        open(f'/tmp/src{d}/f{i}', 'w').close()\n")
    fresh.files.write("/tmp/make.py", script)
    assert fresh.commands.run("mkdir -p /tmp/w2 && python3 /tmp/make.py", timeout=120).exit_code == 0
    watch = fresh.files.watch_dir("/tmp/w2", recursive=True)
    try:
        fresh.commands.run("for d in 0 1 2 3 4 5; do mv /tmp/src$d /tmp/w2/; done", timeout=60)
        events = watch.get_new_events()
        inner = [e for e in events if e.path.count("/") == 4]
        assert len(inner) == MAX_FOUND, len(inner)  # 6000 files arrived; the cap is for the read
    finally:
        watch.stop()
