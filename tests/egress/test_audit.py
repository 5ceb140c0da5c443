"""A sandbox's audit log is bounded in events and in bytes, whatever its events carry: each text
field is cut (after secrets are masked, so no part of a value survives a cut), guard notes are
capped, and the log drops its oldest events past 10 000 events or 16 MiB (declaw_wasm/_egress/
audit.py; docs/security.md, "Upstream servers and the relay")."""

from __future__ import annotations

import gc
from typing import Any, Callable

import pytest

from declaw_wasm._budget import ProcessBytes
from declaw_wasm._egress import audit
from declaw_wasm._egress.audit import (LOG_FLOOR, MAX_EVENTS, MAX_LOG_BYTES, MAX_NOTES, MAX_TEXT,
                                       AuditEvent, AuditLog, now)

from security.support import PeakRSS
from .conftest import run
from .upstream import Upstreams

MiB = 1 << 20
SECRET = "sk-audit-0123456789abcdef"


@pytest.fixture(scope="module")
def guest_path() -> str:
    return "warm"  # the log is host code: the guest path does not change it


def test_the_audit_log_is_bounded_in_bytes() -> None:
    """3000 events, each with a 60 KiB url and reason (a guest's longest request target fits a
    64 KiB head) and 100 guard notes: each event's text is cut, the log keeps at most 16 MiB of
    events and says how many it dropped (it kept every url whole: 180 MiB here, ~600 MiB at its
    10 000 events); and at most 10 000 events, however small."""
    long = "a" * (60 << 10)
    notes = ["n" * 5000] * 100
    log = AuditLog([SECRET], {})
    with PeakRSS() as mem:
        for i in range(3000):
            log.record(AuditEvent(timestamp=now(), method="GET", url=f"http://example.com/{i}/{long}",
                                  reason=long, guard_notes=notes))
    kept = log.events()
    assert 0 < len(kept) < 3000 and log.bytes <= MAX_LOG_BYTES
    assert log.dropped == 3000 - len(kept) and kept[-1].url.startswith("http://example.com/2999/")
    event = kept[-1]
    assert len(event.url) <= MAX_TEXT + 50 and event.url.endswith("more characters cut)")
    assert len(event.guard_notes) == MAX_NOTES + 1 and event.guard_notes[-1] == "... (68 more notes cut)"
    assert mem.growth < 48 * MiB, f"{mem.growth >> 20} MiB"
    small = AuditLog([], {})
    for _ in range(MAX_EVENTS + 50):
        small.record(AuditEvent(timestamp=now(), method="GET", url="http://example.com/"))
    assert len(small.events()) == MAX_EVENTS and small.dropped == 50


def test_all_the_processs_audit_logs_are_bounded_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each log's 16 MiB times the sandboxes a process hosts (1000) is no bound: once all the
    process's logs hold their cap, a log that grows drops its oldest events until they are back
    under it, or it is down to 256 KiB (so the process holds at most the cap and a floor per
    log); a log's bytes are given back when it is gone."""
    # a count of this case's logs alone: other tests' sandboxes' logs, collected meanwhile, gave
    # their bytes back to the process's count and let the hog past its cap (one full run)
    monkeypatch.setattr(audit, "PROCESS_LOGS", ProcessBytes())
    monkeypatch.setattr(audit, "PROCESS_LOG_BYTES", 4 * MiB)
    url = "http://example.com/" + "a" * 1900
    hog, other = AuditLog([], {}), AuditLog([], {})
    for _ in range(1500):  # ~4.4 MiB: past the process's cap by the end
        hog.record(AuditEvent(timestamp=now(), url=url))
    one = hog.bytes // len(hog.events())
    assert 4 * MiB - one < hog.bytes <= 4 * MiB + one
    for _ in range(500):
        other.record(AuditEvent(timestamp=now(), url=url))
    assert other.bytes <= LOG_FLOOR + one and len(other.events()) < 100 and other.dropped > 400
    hog.record(AuditEvent(timestamp=now(), url=url))  # it grows: the logs are back under the cap
    assert audit.PROCESS_LOGS.bytes <= 4 * MiB and hog.bytes <= 4 * MiB - other.bytes
    kept = other.bytes
    del hog
    gc.collect()
    assert audit.PROCESS_LOGS.bytes == kept


def test_a_secret_is_masked_before_its_field_is_cut() -> None:
    """A value across the cut would otherwise leave its first characters in the log."""
    log = AuditLog([SECRET], {})
    log.record(AuditEvent(timestamp=now(), url="x" * (MAX_TEXT - 5) + SECRET + "y" * 100,
                          guard_notes=["z" * 495 + SECRET]))
    event = log.events()[0]
    assert SECRET[:5] not in event.url and event.url.startswith("x" * (MAX_TEXT - 5) + "***")
    assert SECRET[:5] not in event.guard_notes[0]


LONG_TARGETS = """
import socket
s = socket.create_connection(("api.openai.com", 80), timeout=30)
for i in range(40):
    s.sendall(("GET /" + "a" * (60 << 10) + "/%d HTTP/1.1\\r\\nHost: api.openai.com\\r\\n\\r\\n" % i).encode())
    got = b""
    while b"\\r\\n\\r\\n" not in got:
        got += s.recv(65536)
    head, _, body = got.partition(b"\\r\\n\\r\\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\\r\\n")[0])
    while len(body) < length:
        body += s.recv(65536)
print("done")
"""


@pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)
def test_a_guests_long_request_targets_are_cut_in_its_audit_log(make: Callable[..., Any], up: Upstreams,
                                                                 mode: str) -> None:
    """From guest code: requests whose targets are 60 KiB each (the whole target went to the
    log) are audited with their urls cut to 2000 characters, saying so."""
    sbx = make()
    assert run(sbx, LONG_TARGETS) == "done\n"
    events = [e for e in sbx.audit_events() if e.kind == "request"]
    assert len(events) == 40
    for i, event in enumerate(events):
        full = f"http://api.openai.com/{'a' * (60 << 10)}/{i}"
        assert event.url == f"{full[:MAX_TEXT]}... ({len(full) - MAX_TEXT} more characters cut)"
