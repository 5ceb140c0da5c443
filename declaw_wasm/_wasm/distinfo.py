"""An installed distribution's version and RECORD, read straight from its `.dist-info` folder.

`importlib.metadata` costs 30-40 ms to import (email, csv, zipfile...) and parses METADATA
through the email package; a serverless cold start needs two facts from three distributions
(the guest site's key, wasmtime's version). Found next to the top-level package, the way pip
lays them out; anything else (an egg, an odd layout) falls back to importlib.metadata.
"""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path
from typing import Optional


def _folder(name: str, package: str) -> Optional[Path]:
    spec = importlib.util.find_spec(package)  # a top-level name: found, not imported
    if spec is None:
        return None
    where = spec.submodule_search_locations
    origin = Path(list(where)[0]) if where else Path(spec.origin) if spec.origin else None
    if origin is None:
        return None
    found = sorted(origin.parent.glob(f"{name.replace('-', '_')}-*.dist-info"))
    return found[0] if len(found) == 1 and (found[0] / "RECORD").is_file() else None


def version(name: str, package: str) -> str:
    """The installed version of distribution `name`, whose top-level package is `package`."""
    folder = _folder(name, package)
    if folder is None:
        import importlib.metadata

        return importlib.metadata.version(name)
    return folder.name[len(name) + 1:-len(".dist-info")]


def record(name: str, package: str) -> tuple[str, Path, list[tuple[str, Optional[str]]]]:
    """(version, the folder RECORD's paths are relative to, [(path, "algo=digest" or None)])."""
    folder = _folder(name, package)
    if folder is None:
        import importlib.metadata

        dist = importlib.metadata.distribution(name)
        rows = [(f.as_posix(), f"{f.hash.mode}={f.hash.value}" if f.hash else None)
                for f in dist.files or []]
        return dist.version, Path(str(dist.locate_file(""))), rows
    with open(folder / "RECORD", newline="", encoding="utf-8") as f:
        rows = [(row[0], row[1] or None) for row in csv.reader(f) if row]
    return folder.name[len(name) + 1:-len(".dist-info")], folder.parent, rows
