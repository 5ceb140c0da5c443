"""Sandbox events as OpenTelemetry spans, captured by the SDK's in-memory exporter: commands and
cells are children of the caller's active span (roots otherwise), egress a client span under its
command, lifecycle steps spans of their own; semantic-convention attribute names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="no OpenTelemetry SDK (the `test` extra)")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm.otel import instrument  # noqa: E402

pytestmark = pytest.mark.guest
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def spans() -> Iterator[tuple[Any, InMemorySpanExporter]]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    stop = instrument(tracer_provider=provider)
    yield provider.get_tracer("the agent"), exporter
    stop()


def test_commands_cells_and_lifecycle_are_children_of_the_callers_span(spans: Any) -> None:
    tracer, exporter = spans
    with tracer.start_as_current_span("agent turn") as turn:
        sbx = Sandbox.create()
        sbx.commands.run("echo hi")
        sbx.commands.run("exit 4")
        sbx.run_code("1 / 0")
        sbx.kill()
    sbx2 = Sandbox.create()  # no active span: a trace of its own per command
    sbx2.commands.run("true")
    sbx2.kill()
    finished = exporter.get_finished_spans()
    mine = [s for s in finished if s.attributes.get("sandbox.id") == sbx.sandbox_id]
    assert {s.context.trace_id for s in mine} == {turn.get_span_context().trace_id}
    assert all(s.parent is not None and s.parent.span_id == turn.get_span_context().span_id for s in mine)
    names = [s.name for s in mine]
    assert names == ["sandbox.created", "sandbox.command", "sandbox.command", "sandbox.cell", "sandbox.killed"]
    ok, failed = [s for s in mine if s.name == "sandbox.command"]
    assert ok.attributes["process.command_line"] == "echo hi" and ok.attributes["process.exit.code"] == 0
    assert ok.attributes["sandbox.template"] == "code-interpreter"
    assert ok.status.status_code == StatusCode.UNSET and ok.end_time > ok.start_time
    assert failed.attributes["process.exit.code"] == 4 and failed.status.status_code == StatusCode.ERROR
    cell = next(s for s in mine if s.name == "sandbox.cell")
    assert cell.attributes["error.type"] == "ZeroDivisionError" and cell.status.status_code == StatusCode.ERROR
    theirs = [s for s in finished if s.attributes.get("sandbox.id") == sbx2.sandbox_id and s.name == "sandbox.command"]
    assert len(theirs) == 1 and theirs[0].parent is None


def test_egress_is_a_client_span_under_its_command(spans: Any) -> None:
    _, exporter = spans
    sbx = Sandbox.create()
    try:
        sbx.commands.run("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9), 2)\"")
    finally:
        sbx.kill()
    finished = [s for s in exporter.get_finished_spans() if s.attributes.get("sandbox.id") == sbx.sandbox_id]
    command = next(s for s in finished if s.name == "sandbox.command")
    (egress,) = [s for s in finished if s.attributes.get("declaw.egress.kind")]
    assert egress.kind.name == "CLIENT" and egress.parent is not None
    assert egress.parent.span_id == command.context.span_id
    assert egress.attributes["server.address"] == "127.0.0.1" and egress.attributes["declaw.decision"] == "denied"
    assert egress.status.status_code == StatusCode.ERROR and egress.attributes["error.type"] == "denied"


def run_python(program: str, **env: str) -> str:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DECLAW_WASM_CACHE")}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**keep, "PYTHONPATH": str(REPO), **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_the_core_import_does_not_import_opentelemetry() -> None:
    assert run_python("import sys; from declaw_wasm import Sandbox; s = Sandbox.create(); s.commands.run('true'); "
                      "s.kill(); print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))") == "[]"


def test_the_setting_instruments_the_process_with_the_global_provider() -> None:
    program = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
provider, exporter = TracerProvider(), InMemorySpanExporter()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from declaw_wasm import Sandbox
s = Sandbox.create(); s.commands.run('true'); s.kill()
print([span.name for span in exporter.get_finished_spans()])
"""
    assert run_python(program, DECLAW_WASM_OTEL="1") == "['sandbox.created', 'sandbox.command', 'sandbox.killed']"


@pytest.mark.parametrize("mode", ["processes"], indirect=True)
def test_a_pool_workers_events_become_spans_under_the_callers_span(spans: Any, make: Any) -> None:
    """Forwarded from the worker after each call, on the caller's thread: the same spans, the
    caller's span their parent."""
    tracer, exporter = spans
    with tracer.start_as_current_span("agent turn") as turn:
        sbx = make()
        sbx.commands.run("echo hi")
        sbx.run_code("1 + 1")
        sbx.files.write("/tmp/x", "y")
        sbx.kill()
    mine = [s for s in exporter.get_finished_spans() if s.attributes.get("sandbox.id") == sbx.sandbox_id]
    assert [s.name for s in mine] == ["sandbox.created", "sandbox.command", "sandbox.cell", "sandbox.killed"]
    assert all(s.parent is not None and s.parent.span_id == turn.get_span_context().span_id for s in mine)
    assert mine[1].attributes["process.command_line"] == "echo hi"
