"""The state store: blobs verified on read, records published manifest last, ids validated,
leases exclusive across real processes. Local folders and memory:// (real fsspec backends);
S3 through moto's server when s3fs and moto are installed (`pip install -e '.[test-s3]'`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from declaw_wasm._state import (
    IntegrityError,
    LeaseHeld,
    LeaseLost,
    RecordNotFound,
    StateError,
    StateStore,
    UnsafeStoreError,
    check_id,
    check_key,
)
from declaw_wasm.exceptions import InvalidArgumentException


@pytest.fixture(params=["local", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    if request.param == "local":
        yield StateStore(tmp_path / "state")
    else:
        s = StateStore(f"memory://state-{uuid.uuid4().hex}")
        yield s
        s.delete_tree("t")


def _corrupt(store: StateStore, key: str, data: bytes) -> None:
    """Overwrite an object behind the store's back (as damage or an attacker would)."""
    if store.local:
        Path(store.path(key)).write_bytes(data)
    else:
        store.fs.pipe_file(store.path(key), data)


def test_blob_round_trip_and_dedupe(store: StateStore) -> None:
    ref = store.put_blob("t/ns", b"hello")
    assert store.put_blob("t/ns", b"hello") == ref
    assert store.get_blob("t/ns", ref) == b"hello"
    assert store.list_blobs("t/ns") == {ref.sha256}
    with store.blob_writer("t/ns") as w:
        for _ in range(3):
            w.write(b"x" * 1000)
        big = w.commit()
    assert big.size == 3000 and store.get_blob("t/ns", big) == b"x" * 3000
    with store.open_blob("t/ns", big) as reader:
        assert len(reader.read()) == 3000


def test_tampered_or_truncated_blob_is_detected(store: StateStore) -> None:
    ref = store.put_blob("t/ns", b"the original content")
    key = store.blob_key("t/ns", ref.sha256)
    _corrupt(store, key, b"the 0riginal content")
    with pytest.raises(IntegrityError, match="SHA-256"):
        store.get_blob("t/ns", ref)
    with pytest.raises(IntegrityError), store.open_blob("t/ns", ref) as reader:
        reader.finish()
    _corrupt(store, key, b"the original")
    with pytest.raises(IntegrityError, match="truncated"):
        store.get_blob("t/ns", ref)
    with pytest.raises(IntegrityError, match="do not match|truncated"):
        store.get_blob_range("t/ns", ref.sha256, 4, 8, "0" * 64)
    store.delete(key)
    with pytest.raises(RecordNotFound):
        store.get_blob("t/ns", ref)


def test_record_is_published_manifest_last(store: StateStore) -> None:
    manifest = store.publish("t/recs/r1", {"what": "a record"}, {"memory": b"pages", "files": b"tree"}, kind="test")
    assert store.list_records("t/recs") == ["r1"]
    assert store.read_part("t/recs/r1", manifest, "memory") == b"pages"
    # Parts without a manifest (a writer that died half-way) are not a record.
    store.put_blob("t/recs/r2", b"orphan part")
    assert store.list_records("t/recs") == ["r1"]
    with pytest.raises(RecordNotFound):
        store.read_record("t/recs/r2", kind="test")
    # A damaged manifest is refused, not half-read.
    raw = store.read_bytes("t/recs/r1/manifest.json")
    _corrupt(store, "t/recs/r1/manifest.json", raw.replace(b"a record", b"a recorc"))
    with pytest.raises(IntegrityError, match="does not match its signature"):
        store.read_record("t/recs/r1", kind="test")
    _corrupt(store, "t/recs/r1/manifest.json", raw[: len(raw) // 2])
    with pytest.raises(IntegrityError):
        store.read_record("t/recs/r1", kind="test")
    store.delete_record("t/recs/r1")
    assert store.list_records("t/recs") == []


@pytest.mark.parametrize("bad", ["", "..", ".", "a/b", "../x", "-x", "x" * 129, "a\x00b", "a b",
                                 "é", "a.b", 7, None])
def test_ids_are_validated(bad: object) -> None:
    with pytest.raises(InvalidArgumentException):
        check_id(bad)


@pytest.mark.parametrize("bad", ["", "/a", "a/", "a//b", "a/../b", "../a", "a/./b", ".hidden", "a\\b"])
def test_keys_are_validated(bad: str) -> None:
    with pytest.raises(InvalidArgumentException):
        check_key(bad)


def test_store_refused_inside_the_runtime_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(StateError, match="runtime cache"):
        StateStore(tmp_path / "cache" / "state")
    StateStore(tmp_path / "elsewhere")


@pytest.mark.heavy
def test_lease_take_renew_release(store: StateStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_LEASE_GRACE", "0.2")
    leases = store.leases
    info = leases.take("t/leases/sbx_1", 0.5, owner="me")
    with pytest.raises(LeaseHeld) as held:
        leases.take("t/leases/sbx_1", 5)
    assert 0 < held.value.expires_in <= 0.5
    assert leases.status("t/leases/sbx_1").held
    with pytest.raises(LeaseLost):
        leases.renew("t/leases/sbx_1", "not-the-token", 5)
    info = leases.renew("t/leases/sbx_1", info.token, 0.5)
    time.sleep(0.8)  # past expiry + grace: anyone may take it, and the old holder may not renew
    assert not leases.status("t/leases/sbx_1").held
    with pytest.raises(LeaseLost, match="expired"):
        leases.renew("t/leases/sbx_1", info.token, 5)
    second = leases.take("t/leases/sbx_1", 5)
    assert second.generation == info.generation + 1
    with pytest.raises(LeaseLost):
        leases.release("t/leases/sbx_1", info.token)
    assert leases.release("t/leases/sbx_1", second.token) is True
    third = leases.take("t/leases/sbx_1", 5)
    assert third.generation == second.generation + 1


def test_a_lease_of_a_holder_known_dead_is_broken_at_once(store: StateStore) -> None:
    """Node-loss checkpoints: a driver that knows the holder is dead (Ray or the pool said so)
    names it, and its live lease is taken over; a live lease of anyone else still is not."""
    dead = store.leases.take("sandboxes/sbx_y/lease", 30, owner="node-a:4242")
    with pytest.raises(LeaseHeld):
        store.leases.take("sandboxes/sbx_y/lease", 30, owner="node-b:7", breaking="node-c:1")
    taken = store.leases.take("sandboxes/sbx_y/lease", 30, owner="node-b:7", breaking="node-a:4242")
    assert taken.generation > dead.generation and store.leases.status("sandboxes/sbx_y/lease").owner == "node-b:7"
    with pytest.raises(LeaseLost):
        store.leases.renew("sandboxes/sbx_y/lease", dead.token, 30)  # the dead holder, were it not


def test_unsafe_store_refuses_leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend with no atomic create-if-absent (here fsspec's `dir::` wrapper) is refused."""
    store = StateStore(f"dir::memory://unsafe-{uuid.uuid4().hex}")
    assert not store.lease_safe
    with pytest.raises(UnsafeStoreError, match="UNSAFE_LEASES"):
        store.leases.take("t/l", 5)
    monkeypatch.setenv("DECLAW_WASM_STATE_UNSAFE_LEASES", "1")
    store.leases.take("t/l", 5)


_RACER = textwrap.dedent("""
    import sys, time
    from declaw_wasm._state import StateStore, LeaseHeld
    url, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    store = StateStore(url, **__import__("json").loads(sys.argv[4]))
    while time.time() < start:
        pass
    try:
        info = store.leases.take(name, 30)
        print("won", info.generation)
    except LeaseHeld:
        print("held")
""")


def _race(url: str, name: str, racers: int, options: dict[str, object]) -> list[str]:
    start = time.time() + 1.5  # all started and spinning before the gun
    procs = [subprocess.Popen([sys.executable, "-c", _RACER, url, name, str(start), json.dumps(options)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(racers)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        outs.append(out.strip())
    return outs


@pytest.mark.heavy
def test_lease_race_between_processes(tmp_path: Path) -> None:
    """Processes racing for one lease: exactly one wins, every round."""
    url = str(tmp_path / "state")
    for round_ in range(3):
        outs = _race(url, f"sandboxes/sbx_{round_}/lease", 4, {})
        assert sum(o.startswith("won") for o in outs) == 1, outs
        assert sum(o == "held" for o in outs) == 3, outs


def test_expired_lease_of_a_dead_process_can_be_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_LEASE_GRACE", "0.2")
    url = str(tmp_path / "state")
    code = ("import sys; from declaw_wasm._state import StateStore; "
            "print(StateStore(sys.argv[1]).leases.take('sandboxes/sbx_x/lease', 0.6).token)")
    subprocess.run([sys.executable, "-c", code, url], check=True, capture_output=True)
    store = StateStore(url)
    with pytest.raises(LeaseHeld):
        store.leases.take("sandboxes/sbx_x/lease", 5)
    time.sleep(0.9)
    assert store.leases.take("sandboxes/sbx_x/lease", 5).generation == 2


# -- S3 through moto's server (tests/volumes/conftest.py; skipped without s3fs and moto) --------
@pytest.mark.heavy
def test_s3_store_blobs_and_leases(s3_options: dict[str, Any]) -> None:
    url = f"s3://declaw-state/run-{uuid.uuid4().hex}"
    store = StateStore(url, **s3_options)
    assert store.exclusive == "if-none-match" and store.lease_safe
    ref = store.put_blob("t/ns", b"over s3")
    assert store.get_blob("t/ns", ref) == b"over s3"
    store.fs.pipe_file(store.path(store.blob_key("t/ns", ref.sha256)), b"over s4")
    with pytest.raises(IntegrityError):
        store.get_blob("t/ns", ref)
    info = store.leases.take("t/lease", 30)
    with pytest.raises(LeaseHeld):
        store.leases.take("t/lease", 30)
    assert store.leases.release("t/lease", info.token)
    outs = _race(url, "sandboxes/sbx_s3/lease", 3, s3_options)
    assert sum(o.startswith("won") for o in outs) == 1, outs
