"""Snapshots (docs/state.md): a sandbox's files and code contexts into the state store and back,
with declaw's names (`create_snapshot`, `snapshot`, `list_snapshots`, `delete_snapshot`,
`Sandbox.restore`) and `Sandbox.create(snapshot=...)`; the rules for what lives outside linear
memory (open files, the monotonic clock, running commands); integrity (tampered, truncated,
another base image refused); the cache keeping the warm image a snapshot pins."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from declaw_wasm import (ConflictException, NotFoundException, Sandbox, SandboxState, Snapshot,
                         SnapshotException, SnapshotInfo, testing)
from declaw_wasm._cache import pins, prune_superseded

from .records import body_of, resigned

STATE_SETUP = """
import sys, json, math
import pandas as pd, numpy as np
import matplotlib.pyplot as plt
import fractions  # a module no warm-up imported
x = 41
df = pd.DataFrame({"a": np.arange(1000), "b": np.linspace(0, 1, 1000)})
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [3, 1, 2])
ax.set_title("kept")
def area(r): return math.pi * r * r
"""
STATE_CHECK = """
print(x + 1, df.shape, round(float(df.b.sum()), 3), 'fractions' in sys.modules,
      fig.axes[0].get_title(), round(area(1), 5), fractions.Fraction(1, 3) * 3)
"""
EXPECTED = "42 (1000, 2) 500.0 True kept 3.14159 1\n"


def store_files(state: str) -> list[Path]:
    return [p for p in Path(state).rglob("*") if p.is_file()]


@pytest.mark.guest
def test_state_survives_a_snapshot_and_restore(sandbox: Sandbox, state: str) -> None:
    assert sandbox.run_code(STATE_SETUP).error is None
    sandbox.files.write("/home/user/notes.txt", "before")
    info = sandbox.create_snapshot()
    assert isinstance(info, SnapshotInfo) and info.sandbox_id == sandbox.sandbox_id and info.created_at
    # the sandbox goes on, and changes after the snapshot are not in it
    sandbox.run_code("x = 0")
    sandbox.files.write("/home/user/notes.txt", "after")
    restored = Sandbox.restore(sandbox.sandbox_id, snapshot_id=info.snapshot_id)
    try:
        assert restored.sandbox_id == sandbox.sandbox_id  # declaw's: the same sandbox, remade
        execution = restored.run_code(STATE_CHECK)
        assert execution.error is None, execution.error
        assert "".join(execution.logs.stdout) == EXPECTED
        assert execution.execution_count == 2  # the context's count goes on
        assert restored.files.read("/home/user/notes.txt") == "before"
        # the figure still draws (its fonts, closed for the snapshot, are opened again)
        drawn = restored.run_code("import io; b = io.BytesIO(); ax.set_title('again'); fig.savefig(b, format='png'); "
                                  "print(b.getvalue()[:4] == b'\\x89PNG', len(b.getvalue()) > 5000); display(fig)")
        assert "".join(drawn.logs.stdout) == "True True\n", drawn
        assert drawn.results and drawn.results[0].chart is not None
    finally:
        restored.kill()


@pytest.mark.guest
def test_create_from_a_snapshot_is_a_new_sandbox_and_snapshots_outlive_kill(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("x = 7")
    snap = sandbox.snapshot()
    assert isinstance(snap, Snapshot) and snap.source == "manual" and snap.mem_size_bytes
    assert snap.size_bytes and snap.size_bytes < 64 << 20
    sandbox.kill()
    assert [s.snapshot_id for s in Sandbox.list_snapshots(sandbox.sandbox_id)] == [snap.snapshot_id]
    twin = Sandbox.create(snapshot=snap.snapshot_id)
    try:
        assert twin.sandbox_id != sandbox.sandbox_id
        assert "".join(twin.run_code("print(x * 6)").logs.stdout) == "42\n"
        other = Sandbox.create(snapshot=snap.snapshot_id)
        other.run_code("x = 1")  # two sandboxes from one snapshot are independent
        assert "".join(twin.run_code("print(x)").logs.stdout) == "7\n"
        other.kill()
    finally:
        twin.kill()
    with pytest.raises(NotFoundException):
        Sandbox.create(snapshot="snap_missing")


@pytest.mark.guest
def test_list_delete_and_restore_preference(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("x = 'manual'")
    manual = sandbox.create_snapshot()
    sandbox.run_code("x = 'paused'")
    assert sandbox.pause() is True
    listed = Sandbox.list_snapshots(sandbox.sandbox_id)
    assert [s.source for s in listed] == ["pause", "manual"]  # newest first
    with pytest.raises(ConflictException):  # what the paused sandbox resumes from
        sandbox.delete_snapshot(listed[0].snapshot_id)
    restored = Sandbox.restore(sandbox.sandbox_id)  # no id: the pause one, though older ones exist
    assert "".join(restored.run_code("print(x)").logs.stdout) == "paused\n"
    assert restored.delete_snapshot(manual.snapshot_id) is True
    assert restored.delete_snapshot(manual.snapshot_id) is True  # idempotent (declaw's)
    assert [s.source for s in restored.list_snapshots()] == ["pause"]
    restored.kill()


@pytest.mark.guest
def test_every_context_and_its_cwd_are_kept(sandbox: Sandbox, state: str) -> None:
    sandbox.files.make_dir("/tmp/work")
    ctx = sandbox.create_code_context(cwd="/tmp/work")
    sandbox.run_code("y = 'second'", context=ctx)
    sandbox.run_code("y = 'default'")
    fresh_ctx = sandbox.create_code_context()  # never ran: restored as a context that starts afresh
    info = sandbox.create_snapshot()
    twin = Sandbox.create(snapshot=info.snapshot_id)
    try:
        ids = {c.id for c in twin.list_code_contexts()}
        assert {"default", ctx.id, fresh_ctx.id} <= ids
        out = twin.run_code("import os; print(y, os.getcwd())", context=ctx)
        assert "".join(out.logs.stdout) == "second /tmp/work\n"
        assert "".join(twin.run_code("print(y)").logs.stdout) == "default\n"
        error = twin.run_code("y", context=fresh_ctx).error
        assert error is not None and error.name == "NameError"
    finally:
        twin.kill()


@pytest.mark.guest
def test_a_file_left_open_across_cells_is_refused_never_aliased(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("f = open('/tmp/log.txt', 'w'); f.write('a')")
    with pytest.raises(ConflictException, match="open files across cells") as caught:
        sandbox.create_snapshot()
    assert "fd " in str(caught.value) and "regular file" in str(caught.value)
    sandbox.run_code("import sqlite3; db = sqlite3.connect('/tmp/db.sqlite'); db.execute('create table t(x)')")
    sandbox.run_code("f.close()")
    with pytest.raises(ConflictException, match="open files"):  # the database is still open
        sandbox.pause()
    assert sandbox.is_running()  # a refused pause leaves the sandbox as it was
    sandbox.run_code("db.commit(); db.close()")
    assert sandbox.pause() is True
    sandbox.resume()
    out = sandbox.run_code("import sqlite3; print(open('/tmp/log.txt').read(), "
                           "sqlite3.connect('/tmp/db.sqlite').execute('select count(*) from t').fetchone())")
    assert "".join(out.logs.stdout) == "a (0,)\n"


@pytest.mark.guest
def test_a_running_command_is_refused_and_a_running_cell_waited_for(sandbox: Sandbox, state: str) -> None:
    handle = sandbox.commands.run("sleep 30", background=True)
    with pytest.raises(ConflictException, match="commands running"):
        sandbox.create_snapshot()
    handle.kill()
    import threading

    cell = threading.Thread(target=lambda: sandbox.run_code("import time; time.sleep(1); z = 'done'"))
    cell.start()
    time.sleep(0.3)
    info = sandbox.create_snapshot()  # waits for the cell, then captures its result
    cell.join()
    twin = Sandbox.create(snapshot=info.snapshot_id)
    assert "".join(twin.run_code("print(z)").logs.stdout) == "done\n"
    twin.kill()


@pytest.mark.guest
def test_the_monotonic_clock_never_goes_backwards(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("import time; time.sleep(0.3); t0 = time.monotonic(); p0 = time.process_time()")
    sandbox.pause()
    time.sleep(0.2)
    sandbox.resume()
    out = sandbox.run_code("t1 = time.monotonic(); time.sleep(0.05); t2 = time.monotonic(); "
                           "print(t1 >= t0, t2 - t1 >= 0.05, time.process_time() >= p0, t1 - t0 < 60)")
    assert "".join(out.logs.stdout) == "True True True True\n", out


@pytest.mark.guest
def test_a_tampered_or_truncated_snapshot_is_refused(sandbox: Sandbox, state: str) -> None:
    sandbox.run_code("x = 1")
    sandbox.files.write("/home/user/a.txt", "a")
    info = sandbox.create_snapshot()
    folder = Path(state) / "sandboxes" / sandbox.sandbox_id / "snapshots" / info.snapshot_id
    manifest = body_of(folder / "manifest.json")
    for part in ("ctx-0", "tree-0"):
        blob = next(p for p in store_files(state) if p.name == manifest["parts"][part]["sha256"])
        original = blob.read_bytes()
        blob.chmod(0o644)
        blob.write_bytes(original[: len(original) // 2])  # truncated
        with pytest.raises(SnapshotException):
            Sandbox.create(snapshot=info.snapshot_id)
        tampered = bytearray(original)
        tampered[len(tampered) // 2] ^= 0xFF
        blob.write_bytes(bytes(tampered))  # one bit changed
        with pytest.raises(SnapshotException):
            Sandbox.create(snapshot=info.snapshot_id)
        blob.write_bytes(original)
    raw = (folder / "manifest.json").read_text()
    (folder / "manifest.json").write_text(raw.replace('"x":', '"y":').replace('"manual"', '"pause"'))
    with pytest.raises(SnapshotException, match="does not match its signature"):
        Sandbox.create(snapshot=info.snapshot_id)
    (folder / "manifest.json").write_text(raw)
    Sandbox.create(snapshot=info.snapshot_id).kill()  # intact again: restores
    # no sandbox folder was left behind by the refused restores
    assert len(Sandbox.list().next_items()) >= 1


def _rewrite_manifest(folder: Path, change: dict[str, dict[str, str]]) -> None:
    """Change manifest fields and sign it again with the state key (a manifest another
    declaw-wasm sharing the key made): the checks that remain are those against this process's
    runtime."""
    def changed(body: dict[str, Any]) -> dict[str, Any]:
        for section, fields in change.items():
            body[section].update(fields)
        return body

    path = folder / "manifest.json"
    name = path.relative_to(folder.parents[3]).as_posix()
    path.write_bytes(resigned(path.read_bytes(), name, changed))


@pytest.mark.guest
def test_another_base_image_or_engine_is_refused_naming_what_is_needed(sandbox: Sandbox, state: str) -> None:
    info = sandbox.create_snapshot()
    folder = Path(state) / "sandboxes" / sandbox.sandbox_id / "snapshots" / info.snapshot_id
    _rewrite_manifest(folder, {"base": {"image_sha256": "0" * 64, "module_file": "python-warm-old.cwasm"}})
    with pytest.raises(SnapshotException, match="python-warm-old.cwasm"):
        Sandbox.create(snapshot=info.snapshot_id)
    _rewrite_manifest(folder, {"engine": {"wasmtime": "1.0.0"}})
    with pytest.raises(SnapshotException, match="wasmtime 1.0.0"):
        Sandbox.create(snapshot=info.snapshot_id)


@pytest.mark.guest
def test_the_cache_keeps_the_warm_image_a_snapshot_pins(sandbox: Sandbox, state: str) -> None:
    interpreter = testing.interpreter_of(sandbox)
    assert interpreter.source is not None
    before = set(pins(interpreter.source))
    info = sandbox.create_snapshot()
    mine = set(pins(interpreter.source)) - before
    assert len(mine) == 1, "the snapshot pins its warm module in the cache"
    # an upgrade builds a new warm module and prunes the superseded ones: not the pinned one
    newer = interpreter.source.with_name("python-warm-newer.cwasm")
    old = interpreter.source.with_name("python-warm-unpinned.cwasm")
    old.write_bytes(b"old")
    newer.write_bytes(b"new")
    try:
        prune_superseded(newer, "python-warm-*")
        assert interpreter.source.exists() and not old.exists()
    finally:
        newer.unlink()
    sandbox.delete_snapshot(info.snapshot_id)
    assert not mine & set(pins(interpreter.source))
    # a pin whose snapshot is gone from a local store (deleted by another process) lapses by itself
    second = sandbox.create_snapshot()
    mine = set(pins(interpreter.source)) - before
    assert len(mine) == 1
    import shutil

    shutil.rmtree(Path(state) / "sandboxes" / sandbox.sandbox_id / "snapshots" / second.snapshot_id)
    assert not mine & set(pins(interpreter.source))


@pytest.mark.guest
def test_the_cold_path_snapshots_too(state: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_WARM_IMAGE", "0")
    sbx = Sandbox.create()
    try:
        assert not testing.is_warm(sbx)
        sbx.run_code("x = 'cold'")
        info = sbx.create_snapshot()
        twin = Sandbox.create(snapshot=info.snapshot_id)
        assert "".join(twin.run_code("print(x)").logs.stdout) == "cold\n"
        twin.kill()
        monkeypatch.setenv("DECLAW_WASM_WARM_IMAGE", "1")  # the warm runtime cannot restore it
        with pytest.raises(SnapshotException, match="warm=False"):
            Sandbox.create(snapshot=info.snapshot_id)
    finally:
        sbx.kill()


def test_ids_are_checked_before_they_name_a_store_path(state: str) -> None:
    from declaw_wasm import InvalidArgumentException

    for bad in ("../x", "a/b", "", ".hidden", "x" * 200):
        with pytest.raises(InvalidArgumentException):
            Sandbox.restore(bad)
        with pytest.raises(InvalidArgumentException):
            Sandbox.create(snapshot=bad)
    with pytest.raises(NotFoundException):
        Sandbox.restore("sbx_unknown")
    assert not os.listdir(state) or set(os.listdir(state)) <= {"sandboxes", "snapshot-index"}


@pytest.mark.guest
def test_info_and_list_show_a_paused_sandbox(sandbox: Sandbox, state: str) -> None:
    sandbox.pause()
    assert sandbox.get_info().state == SandboxState.PAUSED
    found = {i.sandbox_id: i.state for i in Sandbox.list()}
    assert found[sandbox.sandbox_id] == SandboxState.PAUSED
    assert sandbox.pause() is False  # paused already
    sandbox.resume()
    assert sandbox.get_info().state == SandboxState.RUNNING


@pytest.mark.guest
def test_a_context_that_will_not_come_to_rest_is_refused_in_bounded_time(sandbox: Sandbox, state: str) -> None:
    # hostile code in the context: the turn before a capture calls into matplotlib's font cache
    sandbox.run_code("import sys, types\n"
                     "class Loop:\n"
                     "    def cache_info(self):\n"
                     "        while True: pass\n"
                     "sys.modules['matplotlib.font_manager'] = types.SimpleNamespace(_get_font=Loop())")
    start = time.monotonic()
    with pytest.raises(ConflictException, match="did not come to rest"):
        sandbox.create_snapshot()
    assert time.monotonic() - start < 30
    fresh = sandbox.run_code("print('fresh')")  # the context restarted, and says so
    assert "".join(fresh.logs.stdout) == "fresh\n" and "restarted" in "".join(fresh.logs.stderr)


@pytest.mark.guest
def test_volumes_are_attached_again_and_copies_come_from_the_snapshot(state: str) -> None:
    from declaw_wasm.volumes import VolumeAttachment, Volumes

    vol = Volumes.create("snap-vol")
    Volumes.files(vol.volume_id).write("/a.txt", b"from the volume")
    sbx = Sandbox.create(volumes=[VolumeAttachment(vol.volume_id, "/data"),  # a private copy
                                  VolumeAttachment(vol.volume_id, "/ro", mode="mount-ro"),
                                  VolumeAttachment(vol.volume_id, "/home/user/copy")])
    try:
        sbx.commands.run("echo changed > /data/a.txt; echo new > /home/user/copy/b.txt; rm /home/user/copy/a.txt")
        info = sbx.create_snapshot()
        twin = Sandbox.create(snapshot=info.snapshot_id)
        try:
            out = twin.commands.run("cat /data/a.txt /ro/a.txt /home/user/copy/b.txt; ls /home/user/copy")
            assert out.stdout == "changed\nfrom the volumenew\nb.txt\n", out  # a.txt has no newline
            assert twin.commands.run("echo x > /ro/a.txt").exit_code != 0  # still read-only
        finally:
            twin.kill()
    finally:
        sbx.kill()
        Volumes.delete(vol.volume_id)


@pytest.mark.guest
def test_the_pii_token_map_is_persisted(state: str) -> None:
    from declaw_wasm import PIIConfig, SecurityPolicy

    sbx = Sandbox.create(security=SecurityPolicy(pii=PIIConfig(enabled=True)))
    try:
        tokens = getattr(testing.egress_of(sbx), "token_map", None)
        if tokens is None:
            pytest.skip("this build's sandboxes keep no PII token map (the guard wiring gives them one)")
        token = tokens.tokenize("email", "alice@example.com")
        info = sbx.create_snapshot()
        twin = Sandbox.create(snapshot=info.snapshot_id)
        try:
            restored = testing.egress_of(twin).token_map
            assert restored is not tokens and restored.lookup(token) == "alice@example.com"
        finally:
            twin.kill()
    finally:
        sbx.kill()
