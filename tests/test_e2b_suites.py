"""Gaps in E2B compatibility found by running E2B's own test suites against declaw_wasm
(benchmarks/e2b_suites/), each reproduced here with a test of ours: `SandboxQuery.started_after`
finds a sandbox started at that moment, E2B's metric fields and time ranges, E2B's message for a
cell whose sandbox is killed, and a recursive watch on a folder made and filled between two
reads."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from declaw_wasm import (FilesystemEventType, InvalidArgumentException, Sandbox, SandboxQuery,
                         TimeoutException)


pytestmark = pytest.mark.guest  # every test here starts guests (tests/conftest.py)


def test_started_after_includes_a_sandbox_started_at_that_moment(local_sbx: Sandbox) -> None:
    info = local_sbx.get_info()

    def found(after: datetime) -> bool:
        return local_sbx.sandbox_id in [i.sandbox_id for i in Sandbox.list(query=SandboxQuery(started_after=after))]

    assert found(info.started_at)
    assert found(info.started_at - timedelta(seconds=1))
    assert not found(info.started_at + timedelta(seconds=1))


@pytest.mark.served
def test_metrics_have_e2bs_fields(sbx: Sandbox) -> None:
    sbx.files.write("/tmp/metrics-sample", b"x" * 4096)
    sample = sbx.get_metrics()[0]
    assert sample.cpu_count >= 1 and 0 <= sample.cpu_used_pct <= 100 * sample.cpu_count
    assert sample.mem_total == 1 << 30 and sample.mem_used >= 0
    assert sample.disk_total == 1 << 30 and sample.disk_used >= 4096
    assert sample.disk_usage_mb == round(sample.disk_used / (1 << 20), 3)


def test_metrics_of_a_time_range(local_sbx: Sandbox) -> None:
    started = local_sbx.get_info().started_at
    now = datetime.now(timezone.utc)
    assert len(local_sbx.get_metrics(start=started - timedelta(seconds=5), end=now)) == 1
    assert len(local_sbx.get_metrics(start=started)) == 1
    assert local_sbx.get_metrics(start=started - timedelta(hours=1), end=started - timedelta(minutes=30)) == []
    assert local_sbx.get_metrics(start=now + timedelta(hours=1)) == []
    naive_past = (started - timedelta(hours=2)).astimezone().replace(tzinfo=None)  # local time
    assert local_sbx.get_metrics(end=naive_past) == []
    with pytest.raises(InvalidArgumentException, match="start must be a datetime"):
        local_sbx.get_metrics(start="yesterday")  # type: ignore[arg-type]


def test_a_cell_whose_sandbox_is_killed_says_so_as_e2b_does(fresh: Sandbox) -> None:
    running = threading.Event()
    errors: list[BaseException] = []

    def cell() -> None:
        try:
            fresh.run_code("print('running', flush=True); import time; time.sleep(60)",
                           on_stdout=lambda _: running.set())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=cell)
    thread.start()
    assert running.wait(60)
    fresh.kill()
    thread.join(30)
    assert len(errors) == 1 and isinstance(errors[0], TimeoutException)
    assert "sandbox was killed while the request was in progress" in str(errors[0])
    assert "killed or reached its end of life" in str(errors[0])


def test_a_recursive_watch_reports_files_written_into_a_new_folder(fresh: Sandbox) -> None:
    """The folder is made and filled between two reads, before its watch can be added: its
    files with content are reported as created and written, as a watch added in time sees."""
    fresh.files.make_dir("/home/user/watched")
    watch = fresh.files.watch_dir("/home/user/watched", recursive=True)
    fresh.files.make_dir("/home/user/watched/nested/deeper")
    fresh.files.write("/home/user/watched/nested/file.txt", "content")
    fresh.files.write("/home/user/watched/nested/deeper/empty", "")
    events: list[tuple[str, Any]] = [(e.name, e.type) for e in watch.get_new_events()]
    assert ("nested", FilesystemEventType.CREATE) in events
    assert ("nested/file.txt", FilesystemEventType.CREATE) in events
    assert ("nested/file.txt", FilesystemEventType.WRITE) in events
    assert ("nested/deeper/empty", FilesystemEventType.CREATE) in events
    assert ("nested/deeper/empty", FilesystemEventType.WRITE) not in events  # nothing was written
    fresh.commands.run("echo more >> /home/user/watched/nested/file.txt")
    assert ("nested/file.txt", FilesystemEventType.WRITE) in [(e.name, e.type) for e in watch.get_new_events()]
    watch.stop()
