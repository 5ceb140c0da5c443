"""The recorder, its ring and its JSONL journal, without a guest: numbering, bounds, rotation,
a torn last line, what is stored as an image, the settings and arguments."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from declaw_wasm import _args, _journal
from declaw_wasm._journal import Journal, Recorder, subscribe
from declaw_wasm.events import (CommandEnded, FileEvent, LifecycleEvent, SandboxEvent, parse_event,
                                read_journal, to_json)
from declaw_wasm.exceptions import InvalidArgumentException
from declaw_wasm.settings import journal_dir, journal_max_bytes

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def test_events_are_numbered_from_one_and_kept_in_the_ring(tmp_path: Path) -> None:
    rec = Recorder("sbx_a", journal=False)
    rec.emit(LifecycleEvent, action="created", template="base")
    rec.emit(FileEvent, op="write", path="/tmp/x", size=3)
    events = rec.events()
    assert [e.seq for e in events] == [1, 2]
    assert [e.kind for e in events] == ["lifecycle", "file"]
    assert rec.events(since=1) == events[1:]
    assert all(e.sandbox_id == "sbx_a" for e in events)


def test_the_ring_is_bounded_in_events_and_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_journal, "RING_EVENTS", 10)
    rec = Recorder("sbx_b", journal=False)
    for i in range(25):
        rec.emit(FileEvent, op="write", path=f"/tmp/{i}", size=i)
    assert [e.seq for e in rec.events()] == list(range(16, 26))
    assert rec.dropped == 15
    monkeypatch.setattr(_journal, "RING_BYTES", 20_000)
    rec = Recorder("sbx_c", journal=False)
    for _ in range(10):
        rec.emit(CommandEnded, pid=1, cmd="x" * 4096)
    assert 1 <= len(rec.events()) <= 5


def test_a_journal_is_one_append_only_file_per_sandbox_read_back_as_events(tmp_path: Path) -> None:
    rec = Recorder("sbx_d", journal=tmp_path / "j")
    rec.emit(LifecycleEvent, action="created", template="base", limits={"memory_limit": 1})
    rec.emit(CommandEnded, pid=1, cmd="echo hi", exit_code=0, stdout_head="hi\n", stdout_bytes=3)
    path = tmp_path / "j" / "sbx_d.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "j").stat().st_mode) == 0o700
    back = list(read_journal(path))
    assert [type(e) for e in back] == [LifecycleEvent, CommandEnded]
    assert isinstance(back[0], LifecycleEvent) and isinstance(back[1], CommandEnded)
    assert back[1].stdout_head == "hi\n" and back[0].limits == {"memory_limit": 1}
    assert [e.model_dump() for e in back] == [e.model_dump() for e in rec.events()]
    rec.close()


def test_a_torn_last_line_is_skipped_and_a_bad_line_elsewhere_is_named(tmp_path: Path) -> None:
    rec = Recorder("sbx_e", journal=tmp_path)
    rec.emit(FileEvent, op="write", path="/a", size=1)
    rec.close()
    path = tmp_path / "sbx_e.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"sandbox_id":"sbx_e","seq":2,"timest')  # a write cut by SIGKILL
    assert [e.seq for e in read_journal(path)] == [1]
    path.write_bytes(b'{"not": "an event"}\n' + path.read_bytes())
    with pytest.raises(ValueError, match="line 1 is not a sandbox event"):
        list(read_journal(path))


def test_a_journal_is_rotated_at_its_size_and_keeps_three_old_files(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_JOURNAL_MAX_BYTES", "2000")
    rec = Recorder("sbx_f", journal=tmp_path)
    for i in range(200):
        rec.emit(FileEvent, op="write", path=f"/tmp/{i:04}", size=i)
    rec.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["sbx_f.jsonl", "sbx_f.jsonl.1", "sbx_f.jsonl.2", "sbx_f.jsonl.3"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    seqs = [e.seq for e in read_journal(tmp_path)]  # oldest file first: contiguous and rising
    assert seqs == list(range(seqs[0], 201))


def test_a_sandbox_id_that_is_no_file_name_is_hashed(tmp_path: Path) -> None:
    journal = Journal(tmp_path, "../../etc/passwd", 1 << 20)
    journal.close()
    (made,) = list(tmp_path.iterdir())
    assert made.parent == tmp_path and made.name.startswith("sbx_") and ".." not in made.name


def test_a_journal_that_is_a_symlink_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (tmp_path / "j").mkdir()
    (tmp_path / "j" / "sbx_g.jsonl").symlink_to(target)
    rec = Recorder("sbx_g", journal=tmp_path / "j")  # refused (logged): the sandbox has no journal
    assert rec.journal is None
    rec.emit(FileEvent, op="write", path="/a", size=1)
    assert target.read_text() == "keep"


def test_only_png_and_jpeg_are_stored_as_images(tmp_path: Path) -> None:
    rec = Recorder("sbx_h", journal=tmp_path)
    ref = rec.image(base64.b64encode(PNG).decode())
    assert ref is not None and ref.mime == "image/png" and ref.size == len(PNG)
    assert (tmp_path / "images" / f"{ref.sha256}.png").read_bytes() == PNG
    assert rec.image_data(ref.sha256) == ("image/png", PNG)
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    assert rec.image(base64.b64encode(svg).decode()) is None
    assert rec.image("not base64 at all!!") is None
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == [f"{ref.sha256}.png"]


def test_listeners_see_every_event_and_a_failing_one_breaks_nothing() -> None:
    seen: list[SandboxEvent] = []

    def broken(event: SandboxEvent) -> None:
        raise RuntimeError("a listener's bug")

    stops = [subscribe(broken), subscribe(seen.append)]
    try:
        rec = Recorder("sbx_i", journal=False)
        rec.emit(FileEvent, op="read", path="/x", size=0)
    finally:
        for stop in stops:
            stop()
    assert [e.kind for e in seen] == ["file"]


def test_an_event_round_trips_through_its_json() -> None:
    rec = Recorder("sbx_j", journal=False)
    event = rec.emit(CommandEnded, pid=2, cmd="ls", exit_code=1, stderr_head="\u00e9\ud800x")
    line = to_json(event)
    assert "\n" not in line
    back = parse_event(line)
    assert isinstance(back, CommandEnded) and back.seq == 1 and back.exit_code == 1
    assert back.stderr_head == "\u00e9?x"  # a lone surrogate cannot be UTF-8: replaced
    assert parse_event(json.loads(line)).model_dump() == back.model_dump()


def test_the_journal_settings_and_argument(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DECLAW_WASM_JOURNAL", raising=False)
    assert journal_dir() is None
    monkeypatch.setenv("DECLAW_WASM_JOURNAL", str(tmp_path))
    assert journal_dir() == tmp_path
    monkeypatch.setenv("DECLAW_WASM_JOURNAL_MAX_BYTES", "0")
    with pytest.raises(ValueError, match="DECLAW_WASM_JOURNAL_MAX_BYTES"):
        journal_max_bytes()
    assert _args.journal(str(tmp_path)) == tmp_path and _args.journal(False) is False
    (tmp_path / "file").write_text("")
    for bad in (True, 3, "", tmp_path / "file"):
        with pytest.raises(InvalidArgumentException, match="journal"):
            _args.journal(bad)
    for bad_seq in (-1, True, 1.5):
        with pytest.raises(InvalidArgumentException, match="since"):
            _args.event_seq(bad_seq)


def test_a_journal_that_cannot_be_written_does_not_fail_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    rec = Recorder("sbx_k", journal=tmp_path / "file" / "j")  # no folder can be made there
    assert rec.journal is None
    rec.emit(FileEvent, op="read", path="/x", size=0)
    assert len(rec.events()) == 1


def test_the_process_rings_are_bounded_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the process's cap, a growing ring keeps its floor, whatever its own bounds allow."""
    monkeypatch.setattr(_journal, "PROCESS_BYTES", _journal.PROCESS_RINGS.bytes + 200_000)
    monkeypatch.setattr(_journal, "RING_FLOOR", 30_000)
    recorders = [Recorder(f"sbx_p{i}", journal=False) for i in range(4)]
    for rec in recorders:
        for _ in range(40):
            rec.emit(CommandEnded, pid=1, cmd="x" * 4096)
    held = [rec._held.bytes for rec in recorders]
    assert all(h <= 30_000 + 5000 for h in held[2:]), held  # the later ones met the cap
    assert sum(held) <= 200_000 + 4 * 35_000
    before = _journal.PROCESS_RINGS.bytes
    del recorders, rec
    assert _journal.PROCESS_RINGS.bytes < before - sum(held) + 1


def test_the_console_command_needs_a_journal_folder_or_a_server(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from declaw_wasm.cli import main

    monkeypatch.delenv("DECLAW_WASM_JOURNAL", raising=False)
    with pytest.raises(SystemExit, match="--journal DIR"):
        main(["console"])
    with pytest.raises(SystemExit, match="--journal DIR"):
        main(["console", "--journal", str(tmp_path / "missing")])
    with pytest.raises(SystemExit, match="http"):
        main(["console", "--serve", "ftp://example/"])


def test_a_sandbox_resumed_elsewhere_goes_on_numbering_from_its_journal(tmp_path: Path) -> None:
    first = Recorder("sbx_r", journal=tmp_path)
    for _ in range(3):
        first.emit(FileEvent, op="write", path="/p", size=1)
    first.close()
    with open(tmp_path / "sbx_r.jsonl", "ab") as f:
        f.write(b'{"sandbox_id":"sbx_r","seq":4,"time')  # torn by a crash: not counted
    again = Recorder("sbx_r", journal=tmp_path)  # the resumed sandbox, in another process
    assert again.emit(FileEvent, op="read", path="/p", size=1).seq == 4
    assert Recorder("sbx_new", journal=tmp_path).emit(FileEvent, op="read", path="/p", size=1).seq == 1
    events = list(read_journal(tmp_path / "sbx_r.jsonl"))  # the torn line skipped, the rest whole
    assert [e.seq for e in events] == [1, 2, 3, 4]


def test_a_journal_follow_reads_only_what_was_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from declaw_wasm.server.console import JournalSource

    monkeypatch.setenv("DECLAW_WASM_JOURNAL_MAX_BYTES", "3000")
    rec = Recorder("sbx_f1", journal=tmp_path)
    rec.emit(FileEvent, op="write", path="/a", size=1)
    read = JournalSource(tmp_path).reader("sbx_f1")
    assert [e.seq for e in read(0)] == [1]
    rec.emit(FileEvent, op="write", path="/b", size=1)
    with open(tmp_path / "sbx_f1.jsonl", "ab") as f:
        f.write(b'{"sandbox_id":"sbx_f1","seq":3')  # a line still being written: not read yet
    assert [e.seq for e in read(1)] == [2]
    assert read(2) == []
    for _ in range(40):  # past the size: rotated, read again from the start (seqs filter)
        rec.emit(FileEvent, op="write", path="/c" * 20, size=1)
    seqs = [e.seq for e in read(2)]
    assert seqs and seqs[0] > 2 and seqs == sorted(seqs) and seqs[-1] == rec.seq
    rec.close()
