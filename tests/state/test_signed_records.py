"""The state store's records are signed with a key that lives outside the store (docs/state-store.md,
"Who may do what"): whoever can write the store but lacks the key cannot change, forge or move a
record unseen, and nothing of a refused record is used; records of before signing are refused
naming `declaw-wasm state resign`, and work once it re-signed the store; the key file is made
0600 on first use, and a loose one is refused; `DECLAW_WASM_STATE_KEY` is used when set.
On a local folder, `memory://` and S3 (moto's server, when `.[test-s3]` is installed). The same
properties through sandboxes (resume, attach, leases) on every backend: test_untrusted_store.py."""

from __future__ import annotations

import os
import secrets
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from declaw_wasm._state import (RecordNotFound, StateKey, StateKeyError, StateStore, UntrustedRecord, keys,
                                records)
from declaw_wasm._state.snapshots import SnapshotStore
from declaw_wasm._volumes.store import VolumeStore
from declaw_wasm.cli import main
from declaw_wasm.volumes import Volumes

from .records import forged, parts, unsigned

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A key file of the test's own, not made yet; no key in the environment."""
    path = tmp_path / "config" / "declaw-wasm" / "state.key"
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY_FILE", str(path))
    monkeypatch.delenv("DECLAW_WASM_STATE_KEY", raising=False)
    return path


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StateStore]:
    """A fresh store of each kind, which DECLAW_WASM_STATE names too."""
    if request.param == "local":
        url = str(tmp_path / "state")
    elif request.param == "memory":
        url = f"memory://signed-{uuid.uuid4().hex}"
    else:
        url = request.getfixturevalue("s3_state")
    monkeypatch.setenv("DECLAW_WASM_STATE", url)
    made = StateStore(url)
    yield made
    if request.param == "memory":
        made.delete_tree("volumes")
        made.delete_tree("sandboxes")
        made.delete_tree("t")


def overwrite(store: StateStore, name: str, data: bytes) -> None:
    """Write an object behind declaw-wasm's back (as another principal with write access would)."""
    if store.local:
        Path(store.path(name)).parent.mkdir(parents=True, exist_ok=True)
        Path(store.path(name)).write_bytes(data)
    else:
        store.fs.pipe_file(store.path(name), data)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """`declaw-wasm ...` in a new process (this checkout first on the path, this environment)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", "declaw_wasm.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def resign(store: StateStore, capsys: pytest.CaptureFixture[str]) -> Callable[..., subprocess.CompletedProcess[str]]:
    """`declaw-wasm state resign --store URL [more]`: in a new process, or in this one for
    memory:// (a store that lives in one process)."""
    def run(*more: str) -> subprocess.CompletedProcess[str]:
        argv = ["state", "resign", "--store", store.url, *more]
        if store.protocol != "memory":
            return cli(*argv)
        capsys.readouterr()
        code = main(argv)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(argv, code, out, err)
    return run


# -- another principal writes the store ----------------------------------------------------------------
@pytest.mark.heavy
def test_a_record_changed_without_the_key_is_refused_and_nothing_of_it_used(store: StateStore) -> None:
    states = SnapshotStore(store)
    states.put_state("sbx_1", {"state": "paused", "snapshot_id": "snap_1", "network": {"allow_out": []}})
    name = states.state_key("sbx_1")
    raw = store.read_bytes(name)
    assert raw.startswith(b"declaw-wasm-record 2 sandbox-state " + store.key.key_id.encode())
    widened = forged(raw, lambda body: {**body, "network": {"allow_out": ["0.0.0.0/0"]}})
    overwrite(store, name, widened)
    with pytest.raises(UntrustedRecord, match="does not match its signature") as refused:
        states.get_state("sbx_1")
    assert refused.value.reason == "mismatch" and "0.0.0.0/0" not in str(refused.value)
    assert states.states() == {}  # listed nowhere either (and logged)
    # the attack that worked before records were signed: a bare SHA-256 anyone can recompute
    overwrite(store, name, unsigned({"state": "paused", "snapshot_id": "snap_1", "network": {"allow_out": ["*"]}}))
    with pytest.raises(UntrustedRecord, match="state resign") as refused:
        states.get_state("sbx_1")
    assert refused.value.reason == "unsigned"
    for damaged in (raw[: len(raw) // 2], raw[:40], b"", b"\x00" * 100, raw.replace(b"2 sandbox-state", b"2 bogus!")):
        overwrite(store, name, damaged)
        with pytest.raises(UntrustedRecord):
            states.get_state("sbx_1")
    overwrite(store, name, raw)
    assert states.get_state("sbx_1") == {"state": "paused", "snapshot_id": "snap_1", "network": {"allow_out": []}}


def test_a_record_moved_to_another_name_or_kind_is_refused(store: StateStore) -> None:
    volumes = VolumeStore(store)
    mine, theirs = volumes.create("mine"), volumes.create("theirs")
    raw = store.read_bytes(f"volumes/{mine.volume_id}/manifest.json")
    overwrite(store, f"volumes/{theirs.volume_id}/manifest.json", raw)  # a valid record, under another id
    with pytest.raises(UntrustedRecord, match="moved here from another name"):
        volumes.get(theirs.volume_id)
    assert [v.volume_id for v in volumes.list_volumes()] == [mine.volume_id]
    # a record of one kind put where another kind lives, under the same name
    states = SnapshotStore(store)
    states.put_state("sbx_2", {"state": "paused"})
    state = store.read_bytes(states.state_key("sbx_2"))
    fields, body = parts(state)
    overwrite(store, states.state_key("sbx_2"), records.seal(StateKey(secrets.token_bytes(32), "x"), "lease",
                                                              states.state_key("sbx_2"), body))
    with pytest.raises(UntrustedRecord):
        states.get_state("sbx_2")
    overwrite(store, states.state_key("sbx_2"), state.replace(b" sandbox-state ", b" lease "))
    with pytest.raises(UntrustedRecord, match="where a 'sandbox-state' record belongs") as refused:
        states.get_state("sbx_2")
    assert refused.value.reason == "kind"
    # snapshot index entries are bound to their snapshot id
    states.store.put_json("snapshot-index/snap_a.json", {"sandbox_id": "sbx_a"}, kind="snapshot-index")
    overwrite(store, "snapshot-index/snap_b.json", store.read_bytes("snapshot-index/snap_a.json"))
    with pytest.raises(UntrustedRecord):
        states.owner("snap_b")
    assert states.owner("snap_a") == "sbx_a"


def test_a_record_moved_to_another_namespace_is_refused(store: StateStore) -> None:
    """A server's namespace (`<store>/namespaces/serve`) and the store's root sign their records
    apart: a valid record copied from one to the other, under the same name, is refused."""
    root = VolumeStore(store)
    served_store = StateStore(f"{store.url.rstrip('/')}/namespaces/serve")
    served = VolumeStore(served_store)
    mine = root.create("mine")
    theirs = served.create("theirs")
    name = f"volumes/{theirs.volume_id}/manifest.json"
    overwrite(store, name, served_store.read_bytes(name))  # the server's record, into the root
    with pytest.raises(UntrustedRecord, match="moved here from another name"):
        root.get(theirs.volume_id)
    assert [v.volume_id for v in root.list_volumes()] == [mine.volume_id]
    assert served.get(theirs.volume_id).volume_id == theirs.volume_id


def test_restore_and_recovery_say_why_a_refused_snapshot_is_not_used(store: StateStore) -> None:
    """`restore` (the latest snapshot) and a node-loss restore (the latest checkpoint) with only
    refused records to choose from fail with the refusal, not "no snapshot"."""
    from declaw_wasm._local import checkpoints

    states = SnapshotStore(store)
    states.publish("sbx_7", "snap_7", {"source": "periodic", "checkpoint": {"policy": "cell"}}, {})
    assert states.latest("sbx_7").snapshot_id == "snap_7"
    name = "sandboxes/sbx_7/snapshots/snap_7/manifest.json"
    overwrite(store, name, forged(store.read_bytes(name), lambda body: {**body, "source": "manual"}))
    with pytest.raises(UntrustedRecord, match="does not match its signature"):
        states.latest("sbx_7")
    with pytest.raises(UntrustedRecord, match="does not match its signature"):
        checkpoints.latest(states, "sbx_7")
    assert states.list("sbx_7") == []
    with pytest.raises(RecordNotFound):
        states.latest("sbx_8")


def test_a_rewritten_lease_is_refused_never_read_as_released(store: StateStore) -> None:
    leases = store.leases
    held = leases.take("t/leases/sbx_3", 30, owner="the holder")
    name = "t/leases/sbx_3/g000000000001.json"
    raw = store.read_bytes(name)
    overwrite(store, name, forged(raw, lambda body: {**body, "released": True}))  # "free it" for a taker
    with pytest.raises(UntrustedRecord, match="g000000000001.json"):
        leases.take("t/leases/sbx_3", 30, owner="a taker")
    with pytest.raises(UntrustedRecord):
        leases.status("t/leases/sbx_3")
    with pytest.raises(UntrustedRecord):
        leases.renew("t/leases/sbx_3", held.token, 30)
    overwrite(store, name, forged(raw, lambda body: {**body, "token": "forged", "expires_at": 1e12}))
    with pytest.raises(UntrustedRecord):
        leases.release("t/leases/sbx_3", "forged")
    overwrite(store, name, raw)
    assert leases.status("t/leases/sbx_3").owner == "the holder"
    assert leases.release("t/leases/sbx_3", held.token) is True


def test_a_record_signed_with_another_key_says_so(store: StateStore) -> None:
    other = StateKey(secrets.token_bytes(32), "the other host's key")
    StateStore(store.url, signing_key=other).put_json("t/doc.json", {"a": 1}, kind="test")
    with pytest.raises(UntrustedRecord, match=f"another state key \\(key id {other.key_id}") as refused:
        store.get_json("t/doc.json", kind="test")
    assert refused.value.reason == "other-key" and store.key.key_id in str(refused.value)
    assert StateStore(store.url, signing_key=other).get_json("t/doc.json", kind="test") == {"a": 1}


# -- records of before signing, and `declaw-wasm state resign` -----------------------------------------------
@pytest.mark.heavy
def test_unsigned_records_are_refused_naming_the_resign_command_and_work_after_it(
        store: StateStore, resign: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    vol = Volumes.create("written before signing")
    Volumes.files(vol.volume_id).write("/a.txt", b"kept")
    states = SnapshotStore(store)
    states.put_state("sbx_4", {"state": "paused", "snapshot_id": "snap_4"})
    store.put_json("snapshot-index/snap_4.json", {"sandbox_id": "sbx_4"}, kind="snapshot-index")
    store.leases.take("sandboxes/sbx_4/lease", 30)
    names = sorted(store.walk())
    signed = [n for n in names if records.kind_of(n)]
    assert len(signed) == 5 and len(names) == 5  # blobs are not walked
    for name in signed:  # as the declaw-wasm of before signing wrote them
        overwrite(store, name, unsigned(parts(store.read_bytes(name))[1]))
    with pytest.raises(UntrustedRecord) as refused:
        Volumes.get(vol.volume_id)
    assert "`declaw-wasm state resign` (where DECLAW_WASM_STATE names this store" in str(refused.value)
    assert store.root not in str(refused.value)  # errors reach a server's clients: never where its store is
    with pytest.raises(UntrustedRecord, match="state resign"):
        states.get_state("sbx_4")
    with pytest.raises(UntrustedRecord, match="state resign"):
        store.leases.status("sandboxes/sbx_4/lease")

    dry = resign("--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("signed ") == 5 and "5 unsigned records would be signed" in dry.stderr
    with pytest.raises(UntrustedRecord):
        Volumes.get(vol.volume_id)  # a dry run changes nothing
    done = resign()
    assert done.returncode == 0, done.stderr
    for kind in ("volume", "sandbox-state", "snapshot-index", "lease"):
        assert f"signed    {kind}" in done.stdout, done.stdout
    assert Volumes.files(vol.volume_id).read("/a.txt") == b"kept"
    assert states.get_state("sbx_4") == {"state": "paused", "snapshot_id": "snap_4"}
    assert states.owner("snap_4") == "sbx_4" and store.leases.status("sandboxes/sbx_4/lease").held
    again = resign()
    assert again.returncode == 0 and again.stdout == "" and "5 already signed" in again.stderr

    # a rotated key: resign signs what the old key signed; never a record changed after it was
    # signed with this key, nor a damaged one
    rotated = StateKey(secrets.token_bytes(32), "the old key")
    StateStore(store.url, signing_key=rotated).put_json(states.state_key("sbx_5"), {"state": "paused"},
                                                       kind="sandbox-state")
    name = f"volumes/{vol.volume_id}/manifest.json"
    overwrite(store, name, forged(store.read_bytes(name), lambda body: {**body, "quota_bytes": 1 << 60}))
    overwrite(store, "snapshot-index/snap_6.json", b'{"body": {"sandbox_id": "sbx_6"}, "format": 1, "sha256": "0"}')
    mixed = resign()
    assert mixed.returncode == 1
    assert (f"re-signed sandbox-state   sandboxes/sbx_5/state.json  (was signed with key {rotated.key_id})"
            in mixed.stdout)
    assert f"left      volume          {name}" in mixed.stdout and "never re-signed" in mixed.stdout
    assert "left      snapshot-index  snapshot-index/snap_6.json  (unsigned and damaged" in mixed.stdout
    assert states.get_state("sbx_5") == {"state": "paused"}
    with pytest.raises(UntrustedRecord, match="does not match its signature"):
        Volumes.get(vol.volume_id)


# -- the key ---------------------------------------------------------------------------------------------
def test_the_key_file_is_made_0600_on_first_use_and_a_loose_one_is_refused(key_file: Path, tmp_path: Path) -> None:
    assert not key_file.exists()
    old = os.umask(0)  # the file is private whatever the umask
    try:
        key = keys.current()
    finally:
        os.umask(old)
    st = key_file.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32 and st.st_uid == os.geteuid()
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert key.secret == key_file.read_bytes() and key.source == str(key_file)
    assert keys.current() == key and len(key.key_id) == 16 and key.secret.hex() not in repr(key)
    assert not [p for p in key_file.parent.iterdir() if p != key_file]  # no temp file left
    store = StateStore(tmp_path / "state")
    store.put_json("t/doc.json", {"a": 1}, kind="test")
    for mode in (0o640, 0o604, 0o660, 0o644, 0o602, 0o620):
        key_file.chmod(mode)
        with pytest.raises(StateKeyError, match=f"mode {mode:04o}.*chmod 600"):
            keys.current()
        with pytest.raises(StateKeyError):
            store.get_json("t/doc.json", kind="test")  # nothing is read with a key others may know
    key_file.chmod(0o600)
    assert store.get_json("t/doc.json", kind="test") == {"a": 1}
    if os.geteuid() == 0:  # a key file someone else owns could be changed by them
        os.chown(key_file, 12345, -1)
        with pytest.raises(StateKeyError, match="belongs to uid 12345"):
            keys.current()
        os.chown(key_file, 0, -1)
    key_file.write_bytes(b"x" * 31)
    with pytest.raises(StateKeyError, match="31 bytes, not 32"):
        keys.current()
    key_file.unlink()
    key_file.symlink_to(tmp_path)
    with pytest.raises(StateKeyError, match="not a regular file"):
        keys.current()


def test_the_key_file_made_by_processes_at_once_is_one_key(key_file: Path) -> None:
    code = "from declaw_wasm._state import keys; print(keys.current().key_id)"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    racers = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
              for _ in range(4)]
    ids = {racer.communicate(timeout=60)[0].strip() for racer in racers}
    assert ids == {keys.current().key_id}


def test_the_key_in_DECLAW_WASM_STATE_KEY_is_used(key_file: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    value = secrets.token_hex(32)
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY", value.upper() + "\n")
    key = keys.current()
    assert key.secret == bytes.fromhex(value) and key.source == "DECLAW_WASM_STATE_KEY"
    store = StateStore(tmp_path / "state")
    store.put_json("t/doc.json", {"a": 1}, kind="test")
    assert not key_file.exists()  # the variable is the key: no file is made
    shown = cli("state", "key")
    assert shown.stdout == f"state key {key.key_id} from DECLAW_WASM_STATE_KEY\n" and value not in shown.stdout
    monkeypatch.delenv("DECLAW_WASM_STATE_KEY")
    with pytest.raises(UntrustedRecord, match="another state key"):
        store.get_json("t/doc.json", kind="test")  # the key file's key is another
    for bad in ("abc", "zz" * 32, value[:-2], value + "00"):
        monkeypatch.setenv("DECLAW_WASM_STATE_KEY", bad)
        with pytest.raises(StateKeyError, match="DECLAW_WASM_STATE_KEY must be 64 hex digits"):
            store.get_json("t/doc.json", kind="test")


def test_a_store_without_a_key_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "read-only"
    blocked.mkdir(mode=0o500)
    monkeypatch.setenv("DECLAW_WASM_STATE_KEY_FILE", str(blocked / "sub" / "state.key"))
    if os.geteuid() == 0:  # root writes anywhere: a file where the folder should be
        (blocked / "sub").write_bytes(b"")
    store = StateStore(tmp_path / "state")
    with pytest.raises(StateKeyError, match="DECLAW_WASM_STATE_KEY is unset and the key file .* cannot be made"):
        store.put_json("t/doc.json", {}, kind="test")
    with pytest.raises(RecordNotFound):
        store.get_json("t/missing.json", kind="test")  # a missing record needs no key

