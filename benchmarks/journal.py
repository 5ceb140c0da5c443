"""The cost of recording a sandbox's events: `echo hi` and a small cell with the default ring
only, with the JSONL journal on, and with OpenTelemetry spans on (when the `otel` extra is
installed), side by side.

    python benchmarks/journal.py [--repeat N] [--gap S]

Each sink has its own sandbox; the rounds interleave them (one call each, in turn, `--gap`
seconds of quiet before each: an agent's pace, so a parked guest is ready), so load on the
machine falls on all alike. A second ring-only sandbox shows how far two sandboxes with the
same sink differ in the same run (the noise the other columns are read against). Also times
the recorder alone (microseconds an event, no guest). Prints a Markdown table of medians
(paste it into benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import _tree  # noqa: E402,F401  -- PYTHONPATH's tree first (interleave.py), else this repository's

from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm._journal import Recorder  # noqa: E402
from declaw_wasm.events import CommandEnded  # noqa: E402


def otel_on() -> Callable[[], None] | None:
    """Spans to an in-memory exporter through the SDK (None without the `otel` extra)."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    from declaw_wasm.otel import instrument

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return instrument(tracer_provider=provider)


def per_event_us(folder: Path, count: int = 20_000) -> tuple[float, float]:
    """Microseconds per `CommandEnded` event: ring only, and ring + journal."""
    out = []
    for journal in (False, folder):
        rec = Recorder("sbx_bench_" + ("j" if journal else "r"), journal=journal)
        start = time.perf_counter()
        for i in range(count):
            rec.emit(CommandEnded, pid=i, cmd="echo hi", cwd="/home/user", exit_code=0, duration_ms=5.0,
                     cpu_seconds=0.004, stdout_bytes=3, stdout_head="hi\n")
        out.append((time.perf_counter() - start) / count * 1e6)
        rec.close()
    return out[0], out[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=41)
    parser.add_argument("--gap", type=float, default=0.2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="declaw-wasm-journal-bench-"))
    ring_us, journal_us = per_event_us(folder / "micro")
    boxes: dict[str, Any] = {"ring only (default)": Sandbox.create(journal=False, timeout=3600),
                             "ring only, a second sandbox (the noise)": Sandbox.create(journal=False, timeout=3600),
                             "JSONL journal": Sandbox.create(journal=folder / "journal", timeout=3600)}
    stop_otel = otel_on()
    if stop_otel is not None:
        boxes["OpenTelemetry spans"] = Sandbox.create(journal=False, timeout=3600)
    work = {"`echo hi`": lambda sbx: sbx.commands.run("echo hi"),
            "cell `x = 1 + 1`": lambda sbx: sbx.run_code("x = 1 + 1")}
    times: dict[tuple[str, str], list[float]] = {(w, b): [] for w in work for b in boxes}
    for sbx in boxes.values():  # warm each: its first command and cell start guests
        for call in work.values():
            call(sbx)
    for _ in range(args.repeat):
        for label, call in work.items():
            for name, sbx in boxes.items():
                time.sleep(args.gap)
                start = time.perf_counter()
                call(sbx)
                times[(label, name)].append(time.perf_counter() - start)
    for sbx in boxes.values():
        sbx.kill()
    if stop_otel is not None:
        stop_otel()
    print(f"recorder alone: {ring_us:.1f} µs an event (ring), {journal_us:.1f} µs (ring + JSONL journal)\n")
    names = list(boxes)
    print("| work | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for label in work:
        base = statistics.median(times[(label, names[0])])
        cells = [f"{base * 1000:.2f} ms"]
        for name in names[1:]:
            value = statistics.median(times[(label, name)])
            cells.append(f"{value * 1000:.2f} ms ({(value / base - 1) * 100:+.1f} %)")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
