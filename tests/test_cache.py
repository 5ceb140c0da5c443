"""The compiled cache's housekeeping (declaw_wasm/_cache.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from declaw_wasm import _cache


def _built(folder: Path, used: float) -> Path:
    folder.mkdir()
    (folder / "READY").write_text(folder.name)
    os.utime(folder / "READY", (used, used))
    return folder


def test_a_superseded_folder_another_install_uses_is_kept(tmp_path: Path) -> None:
    """Two installs (or checkouts with other guest code) sharing a cache: building one's guest
    site prunes the other's only once nothing has used it for a day (guests of a running install
    mount it; a deleted folder is gone for them, unlike a mapped file)."""
    now = time.time()
    recent = _built(tmp_path / "guest-site-aaaa", now - 60)
    stale = _built(tmp_path / "guest-site-bbbb", now - _cache.FOLDER_GRACE_S - 60)
    unfinished = tmp_path / "guest-site-cccc"
    unfinished.mkdir()
    made = _cache.ensure_folder(tmp_path / "guest-site-dddd", lambda staging: None, "guest-site-*")
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")) == \
        ["guest-site-aaaa", "guest-site-dddd"]
    assert recent.exists() and not stale.exists() and not unfinished.exists()
    # using a folder marks it used (once per process)
    os.utime(made / "READY", (now - _cache.FOLDER_GRACE_S - 60,) * 2)
    _cache._used.discard(made)
    assert _cache.ensure_folder(made, lambda staging: None, "guest-site-*") == made
    assert time.time() - (made / "READY").stat().st_mtime < 60
