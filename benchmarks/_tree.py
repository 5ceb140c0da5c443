"""Which declaw_wasm a benchmark imports: the tree PYTHONPATH names first (interleave.py runs
each tree's package that way, the same script for both), else this repository's, else an
installed copy. Imported by the scripts before declaw_wasm.

Each script used to put this repository first on `sys.path`, ahead of PYTHONPATH: a side by side
of two trees then ran the newer tree's package on both sides."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = str(Path(__file__).resolve().parent.parent)
if REPO not in sys.path:
    # sys.path: the script's folder, PYTHONPATH's entries, then the standard library and site-packages
    sys.path.insert(1 + len([entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]), REPO)


def package_tree() -> Path:
    """The folder holding the declaw_wasm this process imports (what a benchmark's own
    subprocesses must import too), found without importing it."""
    spec = importlib.util.find_spec("declaw_wasm")
    if spec is None or spec.origin is None:
        raise SystemExit("declaw_wasm is not importable: install it or set PYTHONPATH to a checkout")
    return Path(spec.origin).resolve().parent.parent
