"""Sandbox events: one model of what happened in a sandbox, as the journal, the console and OpenTelemetry see it.

Every event carries the sandbox's id, a sequence number (monotonic per sandbox, from 1, kept
across a pause and resume in one process) and a UTC timestamp; `kind` says which model it is:

- `lifecycle`: the sandbox was created, connected, paused, resumed, killed or timed out (with
  its template, a summary of its limits and whether it has a network policy);
- `command.started`, `command.ended`: a command line (or terminal), its exit code, duration,
  CPU time (instructions with a CPU limit), memory at the end, output sizes and the first and
  last KiB of each stream;
- `cell`: a `run_code` cell: its code (the first 4 KiB), the result types, the error's name,
  the duration, charts as references to the stored PNG/JPEG (`ImageRef`), the first KiB of
  each result's text formats (`ResultPreview`: sources, never rendered);
- `file`: a file written or read through the API (path and size; never the content);
- `egress`: one event of the egress audit (`AuditEvent`'s fields: host, method, status,
  bytes, decision and rule, redaction and injection counts; secret values are masked by the
  audit before they get here, and rehydrated plaintext is never recorded);
- `tool`: a host tool called by the sandbox's code;
- `limit`: a limit was hit (the sandbox's lifetime, a command's timeout, the disk quota, the
  CPU budget, the output limit);
- `sample`: the sandbox's CPU time, memory and disk, every `DECLAW_WASM_SAMPLE_SECONDS` (5)
  while it runs a command or a cell.

Events are values the host made: text from the guest (a command line, output, a URL) is in
them as data, cut to bounds (`MAX_TEXT`, `HEAD`), and never interpreted. `read_journal` reads a
journal file back (docs/observability.md), skipping a last line cut short by a crash.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, Optional, Union

from pydantic import Field, TypeAdapter, ValidationError

from ._model import Model

MAX_TEXT = 4096  # characters of a command line, a cell's code, a path in an event
HEAD = 1024  # characters of the first and of the last part of a command's or cell's output
EventKind = Literal["lifecycle", "command.started", "command.ended", "cell", "file", "egress", "tool", "limit",
                    "sample"]


class SandboxEvent(Model):
    """What every event has."""

    sandbox_id: str
    seq: int
    timestamp: datetime.datetime
    kind: str


class LifecycleEvent(SandboxEvent):
    kind: Literal["lifecycle"] = "lifecycle"
    action: Literal["created", "connected", "paused", "resumed", "killed", "timed_out"]
    template: str = ""
    limits: dict[str, int] = Field(default_factory=dict)  # the sandbox's limits, in their units
    network: str = ""  # "default", or "policy" when the create gave network or security options
    timeout_s: float = 0.0  # the lifetime set at create, resume or connect


class CommandStarted(SandboxEvent):
    kind: Literal["command.started"] = "command.started"
    pid: int
    cmd: str  # "" for an interactive terminal
    cwd: str = ""
    pty: bool = False


class CommandEnded(SandboxEvent):
    kind: Literal["command.ended"] = "command.ended"
    pid: int
    cmd: str
    cwd: str = ""
    pty: bool = False
    exit_code: int = 0
    stopped: str = ""  # "timeout", "quota", "fuel", "killed" or "" (it ended by itself)
    error: str = ""
    duration_ms: float = 0.0
    cpu_seconds: float = 0.0
    cpu_instructions: Optional[int] = None  # with a CPU limit
    memory_bytes: int = 0  # the command's guest's linear memory at its end (its peak: it never shrinks)
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_head: str = ""  # the first HEAD characters...
    stdout_tail: str = ""  # ...and the last HEAD ("" when the head has it all)
    stderr_head: str = ""
    stderr_tail: str = ""


class ImageRef(Model):
    """A chart or image a cell returned, stored beside the journal (`<sha256>.<ext>` in its
    `images/` folder) or in the in-memory ring, never inlined in the event."""

    mime: Literal["image/png", "image/jpeg"]
    sha256: str
    size: int


class ResultPreview(Model):
    """The first `HEAD` characters of one of a cell's results in a text format (its `text`,
    `html`, `svg`, `javascript`, `markdown`, `latex`...): the guest's source, as data. A viewer
    shows it as text, never as markup (the console does)."""

    format: str
    source: str


class CellRun(SandboxEvent):
    kind: Literal["cell"] = "cell"
    context_id: str = ""
    language: str = "python"
    code: str = ""
    duration_ms: float = 0.0
    result_types: list[str] = Field(default_factory=list)  # each result's formats ("png", "text", "html"...)
    chart_types: list[str] = Field(default_factory=list)
    images: list[ImageRef] = Field(default_factory=list)
    previews: list[ResultPreview] = Field(default_factory=list)
    error_name: str = ""
    error_value: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_head: str = ""
    stdout_tail: str = ""
    stderr_head: str = ""
    stderr_tail: str = ""


class FileEvent(SandboxEvent):
    kind: Literal["file"] = "file"
    op: Literal["write", "read"]
    path: str
    size: int = 0  # bytes written, or the file's size when read


class EgressEvent(SandboxEvent):
    """One event of the sandbox's egress audit (`AuditEvent`), as recorded there: masked, cut."""

    kind: Literal["egress"] = "egress"
    audit_kind: str = "request"  # AuditEvent.kind: dns, connection, request, guard (or inbound)
    direction: str = "outbound"
    method: str = ""
    url: str = ""
    host: str = ""
    port: int = 0
    tls: bool = False
    status_code: int = 0
    decision: str = "allowed"
    rule: str = ""
    reason: str = ""
    error: str = ""
    bytes_out: int = 0
    bytes_in: int = 0
    duration_ms: float = 0.0
    pii_redactions: int = 0
    pii_detections: int = 0
    pii_rehydrations: int = 0  # a count: the plaintext is never recorded
    injection_blocks: int = 0
    injection_detections: int = 0
    invisible_chars: int = 0
    guard: str = ""
    secrets_injected: list[str] = Field(default_factory=list)  # variable names, never values


class ToolEvent(SandboxEvent):
    kind: Literal["tool"] = "tool"
    name: str
    decision: str = "allowed"
    duration_ms: float = 0.0
    error: str = ""


class SampleEvent(SandboxEvent):
    """The sandbox's resources, sampled every `DECLAW_WASM_SAMPLE_SECONDS` while it runs a
    command or a cell (as `metrics()` measures them)."""

    kind: Literal["sample"] = "sample"
    cpu_seconds: float = 0.0  # CPU time of its guests so far (ended ones included)
    memory_bytes: int = 0  # the live guests' linear memories
    disk_bytes: int = 0  # under its writable folders
    running: int = 0  # commands and cells running


class LimitEvent(SandboxEvent):
    kind: Literal["limit"] = "limit"
    limit: Literal["lifetime", "timeout", "disk", "cpu", "output"]
    message: str = ""
    pid: Optional[int] = None


Event = Annotated[Union[LifecycleEvent, CommandStarted, CommandEnded, CellRun, FileEvent, EgressEvent, ToolEvent,
                        LimitEvent, SampleEvent], Field(discriminator="kind")]
_adapter: Optional[TypeAdapter[Any]] = None


def parse_event(data: Union[str, bytes, dict[str, Any]]) -> SandboxEvent:
    """One event from its JSON (a journal line) or its dict; `ValidationError` if it is none."""
    global _adapter
    if _adapter is None:
        _adapter = TypeAdapter(Event)
    if isinstance(data, dict):
        event: SandboxEvent = _adapter.validate_python(data)
    else:
        event = _adapter.validate_json(data)
    return event


def read_journal(path: Union[str, Path]) -> Iterator[SandboxEvent]:
    """The events of a journal file (or of every `*.jsonl` file of a journal folder, by name),
    oldest first. A line cut short by a crash of the writer (not JSON) is skipped; a JSON line
    that is not an event raises `ValueError` naming the file and line."""
    where = Path(path)
    files = sorted(where.glob("*.jsonl*"), key=_journal_order) if where.is_dir() else [where]
    for file in files:
        with open(file, "rb") as f:
            lines = f.read().split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError:  # a write torn by a crash (the next writer starts a new line)
                continue
            if not isinstance(data, dict):
                raise ValueError(f"{file}: line {number} is not a sandbox event: not an object")
            try:
                yield parse_event(data)
            except ValidationError as exc:
                raise ValueError(f"{file}: line {number} is not a sandbox event: {exc.errors()[0]['msg']}") from None


def _journal_order(path: Path) -> tuple[str, int]:
    """`<id>.jsonl.2`, `<id>.jsonl.1` (rotated, oldest first), then `<id>.jsonl`."""
    stem, _, suffix = path.name.partition(".jsonl")
    return (stem, -int(suffix[1:]) if suffix[1:].isdigit() else 0)


def to_json(event: SandboxEvent) -> str:
    """An event as one JSON line (no newline), without pydantic's serializer (events are made
    with `_model.construct` from the host's own values: plain types, a datetime, `ImageRef`s).
    Valid UTF-8: a lone surrogate (a guest's undecodable name or output) becomes "?"."""
    line = json.dumps(_plain(event), separators=(",", ":"), ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = line.encode("utf-8", "replace").decode("utf-8")
    return line


def _plain(value: Any) -> Any:
    if isinstance(value, Model):
        return {k: _plain(v) for k, v in value.__dict__.items()}
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
