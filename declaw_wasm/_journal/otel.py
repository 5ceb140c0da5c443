"""Sandbox events as OpenTelemetry spans (the `otel` extra: opentelemetry-api), exported by
whatever the program's OpenTelemetry SDK is configured with.

`instrument()` subscribes a listener to this process's events (_journal): a command is a span
from its start to its end, a cell a span of its duration, an egress request or lookup a client
span, a lifecycle step a short span. Commands, cells and lifecycle steps the caller starts are
children of the caller's active span (an agent's own trace), otherwise roots (one trace per
command or cell: a sandbox lives for hours and may move between processes); egress is a child
of the sandbox's running command's span when there is one. Attributes use OpenTelemetry's
semantic-convention names where they exist (`process.command_line`, `process.exit.code`,
`http.request.method`, `url.full`, `server.address`, `http.response.status_code`,
`error.type`) and `sandbox.id`, `sandbox.template`, `declaw.*` otherwise. Values are the
events' (cut and masked there); nothing the guest chose becomes a span name but an HTTP method
the relay parsed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Optional

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..events import CellRun, CommandEnded, CommandStarted, EgressEvent, LifecycleEvent, LimitEvent, SandboxEvent, \
    ToolEvent
from . import subscribe

MAX_OPEN = 10_000  # command spans open at once (the oldest is ended past that)
_NAMES = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "DNS"})


def _ns(event: SandboxEvent, minus_ms: float = 0.0) -> int:
    return int(event.timestamp.timestamp() * 1e9 - minus_ms * 1e6)


class SpanMaker:
    """The listener: events in, spans out."""

    def __init__(self, tracer_provider: Any = None) -> None:
        from .. import __version__

        self.tracer = trace.get_tracer("declaw_wasm", __version__, tracer_provider=tracer_provider)
        self._open: "OrderedDict[tuple[str, int], Any]" = OrderedDict()
        self._templates: dict[str, str] = {}
        self._lock = threading.Lock()

    def _base(self, event: SandboxEvent) -> dict[str, Any]:
        return {"sandbox.id": event.sandbox_id, "sandbox.template": self._templates.get(event.sandbox_id, ""),
                "declaw.event.seq": event.seq}

    def __call__(self, event: SandboxEvent) -> None:
        if isinstance(event, CommandStarted):
            self._command_started(event)
        elif isinstance(event, CommandEnded):
            self._command_ended(event)
        elif isinstance(event, CellRun):
            self._cell(event)
        elif isinstance(event, EgressEvent):
            self._egress(event)
        elif isinstance(event, LifecycleEvent):
            self._lifecycle(event)
        elif isinstance(event, ToolEvent):
            self._short(event, "sandbox.tool", {"declaw.tool.name": event.name, "declaw.decision": event.decision},
                        event.error and "error" or (event.decision == "denied" and "denied") or "", event.duration_ms,
                        self._running_command(event.sandbox_id))
        elif isinstance(event, LimitEvent):
            self._limit(event)

    def _command_started(self, event: CommandStarted) -> None:
        attributes = {**self._base(event), "process.command_line": event.cmd, "process.pid": event.pid,
                      "declaw.cwd": event.cwd, "declaw.pty": event.pty}
        span = self.tracer.start_span("sandbox.command", context=otel_context.get_current(), kind=SpanKind.INTERNAL,
                                      attributes=attributes, start_time=_ns(event))
        with self._lock:
            self._open[(event.sandbox_id, event.pid)] = span
            while len(self._open) > MAX_OPEN:
                _, oldest = self._open.popitem(last=False)
                oldest.end()

    def _command_ended(self, event: CommandEnded) -> None:
        with self._lock:
            span = self._open.pop((event.sandbox_id, event.pid), None)
        if span is None:  # started before instrument()
            span = self.tracer.start_span("sandbox.command", context=None, start_time=_ns(event, event.duration_ms),
                                          attributes={**self._base(event), "process.command_line": event.cmd,
                                                      "process.pid": event.pid})
        span.set_attributes({"process.exit.code": event.exit_code, "declaw.duration_ms": event.duration_ms,
                             "declaw.cpu_seconds": event.cpu_seconds, "declaw.memory_bytes": event.memory_bytes,
                             "declaw.stdout_bytes": event.stdout_bytes, "declaw.stderr_bytes": event.stderr_bytes})
        if event.cpu_instructions is not None:
            span.set_attribute("declaw.cpu_instructions", event.cpu_instructions)
        if event.stopped:
            span.set_attribute("declaw.stopped", event.stopped)
        if event.exit_code != 0 or event.stopped:
            span.set_attribute("error.type", event.stopped or "exit_code")
            span.set_status(Status(StatusCode.ERROR, event.error or f"exit code {event.exit_code}"))
        span.end(end_time=_ns(event))

    def _cell(self, event: CellRun) -> None:
        attributes = {**self._base(event), "declaw.cell.language": event.language, "declaw.cell.code": event.code,
                      "declaw.cell.context_id": event.context_id, "declaw.cell.result_types": event.result_types,
                      "declaw.cell.chart_types": event.chart_types, "declaw.duration_ms": event.duration_ms}
        span = self.tracer.start_span("sandbox.cell", context=otel_context.get_current(), attributes=attributes,
                                      start_time=_ns(event, event.duration_ms))
        if event.error_name:
            span.set_attribute("error.type", event.error_name)
            span.set_status(Status(StatusCode.ERROR, f"{event.error_name}: {event.error_value}"))
        span.end(end_time=_ns(event))

    def _egress(self, event: EgressEvent) -> None:
        method = event.method if event.method in _NAMES else "HTTP"
        name = {"dns": "DNS lookup", "connection": "CONNECT"}.get(event.audit_kind, method)
        attributes: dict[str, Any] = {**self._base(event), "server.address": event.host, "server.port": event.port,
                                      "declaw.egress.kind": event.audit_kind, "declaw.decision": event.decision,
                                      "declaw.rule": event.rule, "declaw.bytes_out": event.bytes_out,
                                      "declaw.bytes_in": event.bytes_in,
                                      "declaw.pii_redactions": event.pii_redactions,
                                      "declaw.injection_blocks": event.injection_blocks}
        if event.audit_kind == "request":
            attributes.update({"http.request.method": event.method, "url.full": event.url})
            if event.status_code:
                attributes["http.response.status_code"] = event.status_code
        parent = self._running_command(event.sandbox_id)
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.CLIENT, attributes=attributes,
                                      start_time=_ns(event, event.duration_ms))
        if event.decision == "denied" or event.error or event.status_code >= 500:
            span.set_attribute("error.type", "denied" if event.decision == "denied" else
                               str(event.status_code) if event.status_code >= 500 else "error")
            span.set_status(Status(StatusCode.ERROR, event.reason or event.error))
        span.end(end_time=_ns(event))

    def _running_command(self, sandbox_id: str) -> Optional[Any]:
        """The context of the sandbox's latest running command's span, if any."""
        with self._lock:
            for (owner, _), span in reversed(self._open.items()):
                if owner == sandbox_id:
                    return trace.set_span_in_context(span)
        return None

    def _lifecycle(self, event: LifecycleEvent) -> None:
        if event.template:
            with self._lock:
                self._templates[event.sandbox_id] = event.template
        self._short(event, f"sandbox.{event.action}", {"declaw.network": event.network,
                                                       "declaw.timeout_s": event.timeout_s}, "", 0.0)
        if event.action in ("killed", "timed_out"):
            with self._lock:
                self._templates.pop(event.sandbox_id, None)

    def _limit(self, event: LimitEvent) -> None:
        with self._lock:
            span = self._open.get((event.sandbox_id, event.pid)) if event.pid is not None else None
        if span is not None:
            span.add_event("declaw.limit", {"declaw.limit": event.limit, "declaw.message": event.message})
        else:
            self._short(event, "sandbox.limit", {"declaw.limit": event.limit, "declaw.message": event.message},
                        event.limit, 0.0)

    def _short(self, event: SandboxEvent, name: str, attributes: dict[str, Any], error: str,
               duration_ms: float, parent: Optional[Any] = None) -> None:
        span = self.tracer.start_span(name, context=parent or otel_context.get_current(),
                                      attributes={**self._base(event), **attributes},
                                      start_time=_ns(event, duration_ms))
        if error:
            span.set_attribute("error.type", error)
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=_ns(event))


def instrument(tracer_provider: Any = None) -> Callable[[], None]:
    """Make this process's sandbox events OpenTelemetry spans, with `tracer_provider` (default:
    the global one the program configured); returns the function that stops it."""
    return subscribe(SpanMaker(tracer_provider))
