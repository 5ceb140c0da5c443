"""A copy of the runtime cache made of hard links (cheap), for tests that change what a cache
holds without touching the real one."""

from __future__ import annotations

import os
from pathlib import Path


def linked_copy(source: Path, target: Path) -> None:
    """`cp -al source target`, but a file that goes away while it is copied is left out: the
    guest tier runs in two processes (tests/conftest.py), and the other one's temporary files
    and locks come and go in the cache meanwhile (`cp` then failed the test)."""
    for root, _folders, files in os.walk(source):
        here = target / os.path.relpath(root, source)
        here.mkdir(parents=True, exist_ok=True)
        for name in files:
            try:
                os.link(os.path.join(root, name), here / name, follow_symlinks=False)
            except FileNotFoundError:
                pass
