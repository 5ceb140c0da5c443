"""OpenTelemetry for sandboxes: `instrument()` makes their commands, cells, egress and lifecycle spans.

    from declaw_wasm.otel import instrument
    instrument()                      # the global TracerProvider your OTel SDK set up
    instrument(tracer_provider=tp)    # or a provider of your own

Or set `DECLAW_WASM_OTEL=1` (the first sandbox instruments the process with the global
provider). Needs the `otel` extra (`opentelemetry-api`); exporting needs an SDK configured by the
program (an OTLP exporter to a collector, Jaeger, Honeycomb, Langfuse, Logfire...):
docs/observability.md. A process pool's or Ray's sandboxes' events are forwarded here after
each call (_pool/client.py), so their spans are made here too.
"""

from __future__ import annotations

from ._journal.otel import SpanMaker, instrument

__all__ = ["SpanMaker", "instrument"]
