"""A local sandbox's events (events.py) made from what its host code sees: lifecycle steps,
commands, cells, files through the API, the egress audit, host tools, limits hit. Each is
recorded by the sandbox's `Recorder` (_journal/): its ring, its journal, this process's listeners.

Text from the guest (a command line, output, a cell's code, an error's message) goes in as data,
cut to the event's bounds; the egress audit's events come already masked and cut (_egress/audit.py).
"""

from __future__ import annotations

import fnmatch
import threading
import time
from typing import TYPE_CHECKING, Any, Optional

from .._model import construct
from .._egress import DEFAULT_MASK_PATTERNS
from .._journal import Recorder, head_tail
from ..events import (HEAD, MAX_TEXT, CellRun, CommandEnded, CommandStarted, EgressEvent, FileEvent,
                      LifecycleEvent, LimitEvent, ResultPreview, SampleEvent, ToolEvent)
from ..settings import sample_seconds
from . import quota
from .lifetimes import lifetimes

if TYPE_CHECKING:
    from ..execution import Execution
    from ..security.audit import AuditEvent
    from .processes import Process
    from .sandbox import LocalSandbox

PREVIEWED = ("text", "html", "svg", "markdown", "latex", "javascript")  # a cell's results' text formats kept
MAX_PREVIEWS = 16  # previews per cell event
_making = threading.Lock()
STOPPED_LIMIT = {"timeout": "timeout", "quota": "disk", "fuel": "cpu"}
KILLED_EXIT_CODE = 137
LIMIT_FIELDS = ("memory_limit", "disk_bytes", "output_limit", "cpu_instructions", "max_processes")


def recorder(sandbox: "LocalSandbox") -> Recorder:
    """The sandbox's recorder, made at its first event (one per sandbox, whichever thread asks first)."""
    made = sandbox.__dict__.get("recorder")
    if made is None:
        with _making:
            made = sandbox.__dict__.get("recorder")
            if made is None:
                journal = sandbox.options._host_only.get("journal") if sandbox.options is not None else None
                made = Recorder(sandbox.sandbox_id, journal)
                made.hide = hidden(sandbox)
                sandbox.__dict__["recorder"] = made
    return made


def hidden(sandbox: "LocalSandbox", session: Any = None) -> list[str]:
    """The values the sandbox's events mask: its egress audit's (secret values, envs its policy
    masks) once its network is built (`session`), else its envs named like secrets (the audit's
    default)."""
    slot = getattr(sandbox, "egress_slot", None)
    if session is None and slot is not None and slot.built:
        session = slot.session()
    if session is not None:
        return list(session.audit._hide)
    envs = getattr(sandbox, "envs", None) or {}
    masked = {v for k, v in envs.items() if len(v) >= 4 and any(fnmatch.fnmatch(k.upper(), p)
                                                                 for p in DEFAULT_MASK_PATTERNS)}
    return sorted(masked, key=len, reverse=True)


def lifecycle(sandbox: "LocalSandbox", action: str) -> None:
    options = sandbox.options
    network = "policy" if (options.network is not None or options.security is not None
                           or options.allow_internet_access is False) else "default"
    limits = getattr(sandbox, "limits", None)
    summary = {name: int(getattr(limits, name)) for name in LIMIT_FIELDS if getattr(limits, name, None)}
    recorder(sandbox).emit(LifecycleEvent, action=action, template=str(getattr(sandbox, "template", "")),
                           limits=summary, network=network, timeout_s=float(getattr(sandbox, "_timeout", 0.0)))
    if action == "timed_out":
        recorder(sandbox).emit(LimitEvent, limit="lifetime",
                               message=f"the sandbox reached its timeout of {sandbox._timeout:g} s")
    if action in ("killed", "timed_out"):
        recorder(sandbox).close()


def sampling(sandbox: "LocalSandbox") -> None:
    """A command or cell starts: sample the sandbox's resources every `sample_seconds()` from
    now while it runs something (one timer per sandbox, gone once nothing runs)."""
    if sandbox.__dict__.get("sampler") is not None:
        return
    interval = sample_seconds()
    if interval:
        sandbox.__dict__["sampler"] = lifetimes.schedule(interval, lambda: _sample(sandbox, interval))


def _sample(sandbox: "LocalSandbox", interval: float) -> None:
    sandbox.__dict__["sampler"] = None
    if not sandbox.running:
        return
    processes = sandbox._live_processes()
    busy = sandbox.kernel_busy_guests()
    if not processes and not busy:
        return
    guests = [p.guest for p in processes] + sandbox.kernel_guests()
    try:
        disk, _ = quota.usage(sandbox.fs.writable_folders())
    except OSError:
        disk = 0
    recorder(sandbox).emit(SampleEvent, cpu_seconds=round(sandbox.cpu_seconds_ended + sum(g.cpu_seconds()
                                                                                          for g in guests), 6),
                           memory_bytes=sum(g.memory_bytes() for g in guests), disk_bytes=disk,
                           running=len(processes) + len(busy))
    sandbox.__dict__["sampler"] = lifetimes.schedule(interval, lambda: _sample(sandbox, interval))


def command_started(sandbox: "LocalSandbox", process: "Process") -> None:
    sampling(sandbox)
    recorder(sandbox).emit(CommandStarted, pid=process.pid, cmd=process.cmd[:MAX_TEXT], cwd=process.cwd[:MAX_TEXT],
                           pty=process.pty_size is not None)


def command_ended(sandbox: "LocalSandbox", process: "Process") -> None:
    outcome = process.outcome
    if outcome is None:
        return
    out = process.outline("pty" if process.pty_size is not None else "stdout", HEAD)
    err = process.outline("stderr", HEAD)
    stopped = outcome.stopped or ""
    exit_code = KILLED_EXIT_CODE if process.killed or stopped in ("quota", "killed") else outcome.exit_code
    guest = process.guest
    memory = process.memory_bytes
    error = outcome.error or process.quota_message or ""
    record = recorder(sandbox)
    record.emit(CommandEnded, pid=process.pid, cmd=process.cmd[:MAX_TEXT], cwd=process.cwd[:MAX_TEXT],
                pty=process.pty_size is not None, exit_code=exit_code, stopped=stopped, error=error[:MAX_TEXT],
                duration_ms=round((time.time() - process.started) * 1000, 3),
                cpu_seconds=round(guest.cpu_seconds(), 6),
                cpu_instructions=outcome.fuel_used if sandbox.limits.cpu_instructions else None,
                memory_bytes=memory, stdout_bytes=out[0], stdout_head=out[1], stdout_tail=out[2],
                stderr_bytes=err[0], stderr_head=err[1], stderr_tail=err[2])
    if stopped in STOPPED_LIMIT:
        record.emit(LimitEvent, limit=STOPPED_LIMIT[stopped], pid=process.pid,
                    message=(process.quota_message or f"the command was stopped ({stopped})")[:MAX_TEXT])
    for stream in outcome.truncated:
        record.emit(LimitEvent, limit="output", pid=process.pid,
                    message=f"{stream} truncated at the sandbox's output limit")


def cell_run(sandbox: "LocalSandbox", code: str, context_id: Optional[str], language: Optional[str], began: float,
             execution: Optional["Execution"], failure: Optional[BaseException]) -> None:
    record = recorder(sandbox)
    fields: dict[str, Any] = {"context_id": context_id or "", "language": language or "python",
                              "code": code[:MAX_TEXT], "duration_ms": round((time.monotonic() - began) * 1000, 3)}
    if execution is not None:
        result_types: list[str] = []
        charts: list[str] = []
        images: list[Any] = []
        previews: list[ResultPreview] = []
        for result in execution.results:
            result_types.append(",".join(result.formats()))
            for name in PREVIEWED:
                source = getattr(result, name, None)
                if isinstance(source, str) and source and len(previews) < MAX_PREVIEWS:
                    previews.append(construct(ResultPreview, format=name, source=source[:HEAD]))
            if result.chart is not None:
                charts.append(str(getattr(result.chart.type, "value", result.chart.type)))
            for data in (result.png, result.jpeg):
                if data:
                    ref = record.image(data)
                    if ref is not None:
                        images.append(ref)
        stdout, stderr = "".join(execution.logs.stdout), "".join(execution.logs.stderr)
        (head, tail), (ehead, etail) = head_tail(stdout), head_tail(stderr)
        fields.update(result_types=result_types, chart_types=charts, images=images, previews=previews,
                      stdout_bytes=len(stdout.encode("utf-8", "surrogatepass")), stdout_head=head, stdout_tail=tail,
                      stderr_bytes=len(stderr.encode("utf-8", "surrogatepass")), stderr_head=ehead,
                      stderr_tail=etail)
        if execution.error is not None:
            fields.update(error_name=execution.error.name[:MAX_TEXT], error_value=execution.error.value[:HEAD])
    elif failure is not None:
        fields.update(error_name=type(failure).__name__, error_value=str(failure)[:HEAD])
    record.emit(CellRun, **fields)
    if failure is not None and type(failure).__name__ == "TimeoutException":
        record.emit(LimitEvent, limit="timeout", message=str(failure)[:MAX_TEXT])


def file_event(sandbox: "LocalSandbox", op: str, path: str, size: int) -> None:
    recorder(sandbox).emit(FileEvent, op=op, path=path[:MAX_TEXT], size=size)


def audit(sandbox: "LocalSandbox", event: "AuditEvent") -> None:
    """One event of the egress audit (already masked and cut by the audit log), forwarded."""
    if event.kind == "tool":
        recorder(sandbox).emit(ToolEvent, name=event.url.removeprefix("tool:"), decision=event.decision,
                               duration_ms=event.duration_ms, error=event.error)
        return
    recorder(sandbox).emit(
        EgressEvent, masked=True, audit_kind=str(event.kind), direction=str(event.direction), method=event.method,
        url=event.url, host=event.host, port=event.port, tls=event.tls, status_code=event.status_code,
        decision=event.decision, rule=event.rule, reason=event.reason, error=event.error, bytes_out=event.bytes_out,
        bytes_in=event.bytes_in,
        duration_ms=event.duration_ms, pii_redactions=event.pii_redactions, pii_detections=event.pii_detections,
        pii_rehydrations=event.pii_rehydrations, injection_blocks=event.injection_blocks,
        injection_detections=event.injection_detections, invisible_chars=event.invisible_chars, guard=event.guard,
        secrets_injected=list(event.secrets_injected))
