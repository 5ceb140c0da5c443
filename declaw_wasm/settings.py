"""Process-wide settings read from the environment, in one place."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Where compiled modules and the unpacked runtime live.

    `DECLAW_WASM_CACHE` makes it a relocatable folder (e.g. shipped with a serverless function
    and opened read-only); otherwise the user cache dir.
    """
    explicit = os.environ.get("DECLAW_WASM_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("declaw-wasm", appauthor=False))


def snapshot_enabled() -> bool:
    return os.environ.get("DECLAW_WASM_SNAPSHOT", "1") != "0"
