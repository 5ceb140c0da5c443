"""The host's wheel cache (`<cache>/wheel-cache/`): only wheels the host downloaded (from an index
or the wheelhouse), each hash recorded before it is published and checked on every use, never
replaced, capped with least-recently-used eviction. The real resolve/fetch with the host's pip,
offline, from a wheelhouse; the cache is put in the test's own folder."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from declaw_wasm._packages import pip
from declaw_wasm._packages.pip import PackageError, Pin, fetch, resolve, wheel_cache

from wheels import make_wheel

pytestmark = pytest.mark.heavy  # each runs the host's real pip or fills a cache: seconds each


@pytest.fixture
def house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty wheelhouse, no index, and a wheel cache of the test's own."""
    monkeypatch.setattr(pip, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setenv("DECLAW_WASM_OFFLINE", "1")
    monkeypatch.setenv("DECLAW_WASM_WHEELHOUSE", str(tmp_path / "house"))
    (tmp_path / "house").mkdir()
    return tmp_path / "house"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def records() -> dict[str, str]:
    folder = wheel_cache().parent / "records"
    return {p.name: p.read_text().strip() for p in folder.iterdir()} if folder.is_dir() else {}


def cached() -> dict[str, str]:
    return {p.name: sha(p) for p in wheel_cache().glob("*.whl")}


def get(name: str, into: Path) -> Path:
    [path] = fetch(resolve([name], {}), into)
    return path


def test_the_cache_holds_downloaded_wheels_recorded_and_checked_on_every_use(house: Path, tmp_path: Path) -> None:
    wheel = make_wheel(house, "cachepkg", "1.0")
    digest = sha(wheel)
    got = get("cachepkg", tmp_path / "a")
    assert sha(got) == digest and got.parent == tmp_path / "a"
    assert cached() == {"cachepkg-1.0-py3-none-any.whl": digest}
    assert records() == {digest: "cachepkg-1.0-py3-none-any.whl"}
    wheel.unlink()  # from now on only the cache has it
    assert sha(get("cachepkg", tmp_path / "b")) == digest
    # altered in the cache: never used; out of the cache with it
    with open(wheel_cache() / "cachepkg-1.0-py3-none-any.whl", "ab") as f:
        f.write(b"tampered")
    with pytest.raises(PackageError, match="downloading wheels failed"):
        fetch([Pin("cachepkg", "1.0", digest)], tmp_path / "c")
    assert cached() == {} and records() == {}
    assert not any(p.name.endswith(".whl") for p in (tmp_path / "c").iterdir())


def test_a_callers_own_wheel_is_used_and_never_cached(house: Path, tmp_path: Path) -> None:
    own = make_wheel(tmp_path / "own", "ownpkg", "1.0")
    pins = resolve(["ownpkg"], {}, find_links=[own.parent])
    [got] = fetch(pins, tmp_path / "into", local={sha(own): own})
    assert got == own
    assert cached() == {} and records() == {}


def test_a_cached_wheel_is_never_replaced(house: Path, tmp_path: Path) -> None:
    first = make_wheel(house, "samepkg", "1.0", files={"samepkg/__init__.py": "FIRST = 1\n"})
    get("samepkg", tmp_path / "a")
    before = cached()
    first.unlink()
    other = make_wheel(house, "samepkg", "1.0", files={"samepkg/__init__.py": "OTHER = 1\n"})
    [got] = fetch([Pin("samepkg", "1.0", sha(other))], tmp_path / "b")  # downloaded, then not cached
    assert sha(got) == sha(other)
    assert cached() == before and set(records()) == set(before.values())


def test_a_wheel_without_a_record_is_never_used_and_is_swept(house: Path, tmp_path: Path) -> None:
    wheel_cache().mkdir(parents=True)
    stray = make_wheel(wheel_cache(), "straypkg", "1.0", files={"straypkg/__init__.py": "STRAY = 1\n"})
    with pytest.raises(PackageError):  # pip sees it, but nothing vouches for it: not installed
        get("straypkg", tmp_path / "a")
    make_wheel(house, "otherpkg", "1.0")
    get("otherpkg", tmp_path / "b")  # publishing sweeps the cache
    assert not stray.exists()


def test_the_cache_is_capped_least_recently_used_first(house: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {}
    for name in ("lrua", "lrub", "lruc", "lruhuge"):
        body = os.urandom(40_000 if name == "lruhuge" else 10_000).hex()  # incompressible
        sizes[name] = make_wheel(house, name, "1.0", files={f"{name}/__init__.py": f"X = {body!r}\n"}).stat().st_size
    monkeypatch.setenv("DECLAW_WASM_WHEEL_CACHE_BYTES", str(sizes["lrua"] + sizes["lrub"] + sizes["lruc"] // 2))
    get("lrua", tmp_path / "1")
    time.sleep(0.05)
    get("lrub", tmp_path / "2")
    time.sleep(0.05)
    (house / "lrua-1.0-py3-none-any.whl").unlink()
    get("lrua", tmp_path / "3")  # from the cache: now the most recently used
    time.sleep(0.05)
    get("lruc", tmp_path / "4")
    assert sorted(cached()) == ["lrua-1.0-py3-none-any.whl", "lruc-1.0-py3-none-any.whl"]
    assert sorted(records().values()) == sorted(cached())
    get("lruhuge", tmp_path / "5")  # larger than the cap: used, not cached
    assert "lruhuge-1.0-py3-none-any.whl" not in cached()
