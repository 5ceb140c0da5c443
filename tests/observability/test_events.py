"""A sandbox's events, recorded by the host as they happen (declaw_wasm.events): lifecycle,
commands, cells, files, egress (the audit's events, masked), limits; numbered, in the ring that
`sbx.events()` reads, and in the JSONL journal, which a SIGKILLed writer leaves readable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from declaw_wasm import Sandbox
from declaw_wasm.events import (CellRun, CommandEnded, CommandStarted, EgressEvent, FileEvent, LifecycleEvent,
                                LimitEvent, SampleEvent, read_journal)
from declaw_wasm.exceptions import InvalidArgumentException, TimeoutException

pytestmark = pytest.mark.guest
REPO = Path(__file__).resolve().parents[2]


def by_kind(events: list, kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def test_a_sandboxs_life_is_recorded_as_numbered_events_in_its_ring_and_journal(tmp_path: Path) -> None:
    sbx = Sandbox.create(journal=tmp_path)
    try:
        done = sbx.commands.run("echo hi; echo oops >&2; exit 3")
        assert done.exit_code == 3
        sbx.files.write("/tmp/a.txt", "hello")
        assert sbx.files.read("/tmp/a.txt") == "hello"
        sbx.run_code("import matplotlib.pyplot as plt; plt.plot([1, 2], [3, 4]); plt.show()")
        sbx.run_code("1 / 0")
        events = sbx.events()
        assert sbx.events(since=events[-2].seq) == events[-1:]
    finally:
        sbx.kill()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert all(e.sandbox_id == sbx.sandbox_id for e in events)
    created = events[0]
    assert isinstance(created, LifecycleEvent) and created.action == "created"
    assert created.template == "code-interpreter" and created.limits["memory_limit"] > 0
    (started,), (ended, *_) = by_kind(events, CommandStarted), by_kind(events, CommandEnded)
    assert started.cmd == ended.cmd == "echo hi; echo oops >&2; exit 3"
    assert (ended.exit_code, ended.stdout_head, ended.stderr_head, ended.stdout_bytes) == (3, "hi\n", "oops\n", 3)
    assert ended.duration_ms > 0 and ended.cpu_seconds > 0
    writes = [(e.op, e.path, e.size) for e in by_kind(events, FileEvent)]
    assert writes == [("write", "/tmp/a.txt", 5), ("read", "/tmp/a.txt", 5)]
    chart, failed = by_kind(events, CellRun)
    assert chart.chart_types == ["line"] and [i.mime for i in chart.images] == ["image/png"]
    assert (failed.error_name, failed.error_value) == ("ZeroDivisionError", "division by zero")
    # the journal: every event, and one more (the kill), readable as the same models
    journaled = list(read_journal(tmp_path / f"{sbx.sandbox_id}.jsonl"))
    assert [e.model_dump() for e in journaled[:len(events)]] == [e.model_dump() for e in events]
    assert isinstance(journaled[-1], LifecycleEvent) and journaled[-1].action == "killed"
    assert (tmp_path / "images" / f"{chart.images[0].sha256}.png").read_bytes().startswith(b"\x89PNG")


def test_egress_events_are_the_audits_events_and_never_carry_a_masked_value(tmp_path: Path) -> None:
    """A value of an environment variable the audit masks (`*_KEY`), sent by the guest as a
    name to resolve, is `***` in the egress event and nowhere in the journal."""
    value = "qz7" + os.urandom(6).hex()
    sbx = Sandbox.create(envs={"SERVICE_KEY": value}, journal=tmp_path)
    try:
        done = sbx.commands.run("python3 -c \"import os, socket; socket.getaddrinfo(os.environ['SERVICE_KEY'] + "
                                "'.invalid', 80)\"")
        assert done.exit_code != 0
        events = sbx.events()
        audit = sbx.audit_events()
    finally:
        sbx.kill()
    egress = by_kind(events, EgressEvent)
    assert [(e.method, e.decision) for e in egress] == [(a.method, a.decision) for a in audit] == [("DNS", "denied")]
    assert egress[0].url == audit[0].url == "***.invalid"
    assert value not in (tmp_path / f"{sbx.sandbox_id}.jsonl").read_text()


def test_a_command_stopped_at_its_timeout_is_a_limit_event() -> None:
    sbx = Sandbox.create()
    try:
        with pytest.raises(TimeoutException):
            sbx.commands.run("sleep 5", timeout=0.5)
        deadline = time.monotonic() + 10
        while not by_kind(sbx.events(), CommandEnded) and time.monotonic() < deadline:
            time.sleep(0.05)
        events = sbx.events()
    finally:
        sbx.kill()
    (ended,) = by_kind(events, CommandEnded)
    assert ended.stopped == "timeout"
    assert [(e.limit, e.pid) for e in by_kind(events, LimitEvent)] == [("timeout", ended.pid)]


def test_the_setting_journals_every_sandbox_and_journal_false_opts_out(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_JOURNAL", str(tmp_path))
    one, two = Sandbox.create(), Sandbox.create(journal=False)
    for sbx in (one, two):
        sbx.commands.run("true")
        sbx.kill()
    assert sorted(p.name for p in tmp_path.glob("*.jsonl")) == [f"{one.sandbox_id}.jsonl"]


def test_journal_is_refused_where_this_process_cannot_write_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentException, match="journal"):
        Sandbox.create(journal=tmp_path, domain="http://127.0.0.1:9", api_key="k")


WRITER = """
import sys
from declaw_wasm import Sandbox
sbx = Sandbox.create(journal=sys.argv[1])
print(sbx.sandbox_id, flush=True)
n = 0
while True:
    sbx.commands.run(f"echo {n}")
    n += 1
    if n == 3:
        print("ready", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_journal_is_read_back_whole_after_its_writer_is_sigkilled(tmp_path: Path) -> None:
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert writer.stdout is not None
        sandbox_id = writer.stdout.readline().strip()
        assert writer.stdout.readline().strip() == "ready"
        time.sleep(0.3)  # mid-command, most likely
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
    events = list(read_journal(tmp_path / f"{sandbox_id}.jsonl"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[0], LifecycleEvent) and events[0].action == "created"
    ended = by_kind(events, CommandEnded)
    assert len(ended) >= 3
    assert [e.stdout_head for e in ended] == [f"{n}\n" for n in range(len(ended))]


@pytest.mark.parametrize("mode", ["processes", "served"], indirect=True)
def test_events_are_forwarded_from_a_pool_worker_and_a_server(make) -> None:  # type: ignore[no-untyped-def]
    """The same events, made where the sandbox runs and validated on arrival here."""
    sbx = make()
    try:
        sbx.commands.run("echo far")
        sbx.files.write("/tmp/f.txt", "abc")
        events = sbx.events()
        later = sbx.events(since=events[-1].seq)
    finally:
        sbx.kill()
    assert [e.kind for e in events] == ["lifecycle", "command.started", "command.ended", "file"]
    ended = events[2]
    assert isinstance(ended, CommandEnded) and ended.stdout_head == "far\n"
    assert later == []
    with pytest.raises(InvalidArgumentException, match="since"):
        sbx.events(since=-1)


def test_pause_and_resume_are_events_and_the_numbering_goes_on(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_STATE", str(tmp_path / "state"))
    sbx = Sandbox.create(journal=tmp_path / "j")
    try:
        sbx.commands.run("echo before")
        sbx.pause()
        sbx.connect()  # resumes it
        sbx.commands.run("echo after")
        events = sbx.events()
    finally:
        sbx.kill()
    actions = [e.action for e in events if isinstance(e, LifecycleEvent)]
    assert actions == ["created", "paused", "resumed"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    journaled = list(read_journal(tmp_path / "j"))
    assert [e.seq for e in journaled] == list(range(1, len(events) + 2))  # and the kill


def test_a_running_sandbox_is_sampled_at_the_set_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECLAW_WASM_SAMPLE_SECONDS", "0.3")
    sbx = Sandbox.create()
    try:
        sbx.commands.run("python3 -c \"import time; x = bytearray(40_000_000); time.sleep(2)\"")
        time.sleep(1.0)  # nothing runs now: no more samples
        events = sbx.events()
    finally:
        sbx.kill()
    samples = [e for e in events if isinstance(e, SampleEvent)]
    assert len(samples) >= 3
    assert max(s.memory_bytes for s in samples) > 40_000_000 and all(s.running == 1 for s in samples)
    assert [s.cpu_seconds for s in samples] == sorted(s.cpu_seconds for s in samples)
    ended = next(e for e in events if isinstance(e, CommandEnded))
    assert all(s.seq < ended.seq for s in samples)
