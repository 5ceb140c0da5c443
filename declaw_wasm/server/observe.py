"""`serve` for operators: Prometheus metrics and lifecycle webhooks, both fed by this process's
sandbox events (_journal.subscribe).

**Metrics** (`prometheus-client`, the `metrics` extra) in a registry of the server's own, at
`/metrics` behind the API key like every route; `serve --metrics-port N` also exposes them
without a key on a listener of their own bound to loopback only (Host and Origin checked as
every keyless listener of ours: `_webguard.py`). Every label value is one of a fixed set (an
outcome, a decision, a limit's name): nothing a guest chooses becomes a label or a metric name.

**Webhooks** (`serve --webhook URL`, repeated; the secret from `DECLAW_WASM_WEBHOOK_SECRET`):
each lifecycle event (created, connected, paused, resumed, killed, timed out) POSTed as JSON to
every URL, signed with HMAC-SHA256 over the body (`X-Declaw-Signature: sha256=<hex>`), with an
id for deduplication (`X-Declaw-Delivery`). A URL is the operator's: it is reached from the
host, not through any sandbox's egress policy. Deliveries wait in a bounded queue per URL
(`QUEUE`; past it the oldest is dropped and counted) drained by one thread per URL, so a slow
or dead receiver never blocks a sandbox; a failure (no connection, a timeout, 408, 429, 5xx) is
retried with exponential backoff (`BACKOFF` s doubling, `ATTEMPTS` in all), any other answer ends
the delivery.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import queue
import threading
import time
import uuid
from typing import Any, Callable, Optional, Sequence
from urllib.parse import urlsplit

from .._journal import subscribe
from .._printable import logger
from ..events import (CellRun, CommandEnded, EgressEvent, LifecycleEvent, LimitEvent, SampleEvent, SandboxEvent,
                      ToolEvent, to_json)
from ..exceptions import InvalidArgumentException, NotFoundException

QUEUE = 1000  # deliveries waiting per webhook URL
ATTEMPTS = 5
BACKOFF = 0.5  # seconds before the first retry; doubled each time
POST_TIMEOUT = 10.0
SIGNATURE_HEADER = "X-Declaw-Signature"
DELIVERY_HEADER = "X-Declaw-Delivery"
RETRIED = frozenset({408, 429})
log = logger("declaw_wasm")
Stop = Callable[[], None]


class Metrics:
    """The server's metrics, updated from events (a listener) and read at a scrape."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.live = Gauge("declaw_sandboxes_live", "Sandboxes running in this server's process", registry=r)
        self.paused = Gauge("declaw_sandboxes_paused", "Sandboxes this server's process paused", registry=r)
        self.lifecycle = Counter("declaw_sandbox_lifecycle", "Lifecycle steps of sandboxes", ["action"], registry=r)
        self.commands = Counter("declaw_commands", "Commands ended, by outcome", ["outcome"], registry=r)
        self.command_seconds = Histogram("declaw_command_duration_seconds", "Command durations", registry=r)
        self.cells = Counter("declaw_cells", "Cells run, by outcome", ["outcome"], registry=r)
        self.cell_seconds = Histogram("declaw_cell_duration_seconds", "Cell durations", registry=r)
        self.egress = Counter("declaw_egress_events", "Egress audit events, by kind and decision",
                              ["kind", "decision"], registry=r)
        self.egress_bytes = Counter("declaw_egress_bytes", "Bytes moved by egress requests", ["direction"],
                                    registry=r)
        self.redactions = Counter("declaw_egress_pii_redactions", "PII redactions in egress requests", registry=r)
        self.injections = Counter("declaw_egress_injection_blocks", "Injection blocks in egress", registry=r)
        self.tools = Counter("declaw_tool_calls", "Host tool calls, by decision", ["decision"], registry=r)
        self.limits = Counter("declaw_limits_hit", "Limits hit, by limit", ["limit"], registry=r)
        self.memory = Gauge("declaw_command_memory_bytes", "Memory of the last ended command's guest", registry=r)
        self.in_use = Gauge("declaw_sandbox_memory_bytes", "Guest memory of the running sandboxes, as last sampled",
                            registry=r)
        self._sampled: dict[str, int] = {}
        self._running: set[str] = set()
        self._paused: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, event: SandboxEvent) -> None:
        if isinstance(event, LifecycleEvent):
            self._lifecycle(event)
        elif isinstance(event, CommandEnded):
            outcome = event.stopped or ("ok" if event.exit_code == 0 else "error")
            self.commands.labels(outcome if outcome in ("ok", "error", "timeout", "quota", "fuel", "killed")
                                 else "error").inc()
            self.command_seconds.observe(event.duration_ms / 1000)
            self.memory.set(event.memory_bytes)
        elif isinstance(event, CellRun):
            self.cells.labels("error" if event.error_name else "ok").inc()
            self.cell_seconds.observe(event.duration_ms / 1000)
        elif isinstance(event, EgressEvent):
            kind = event.audit_kind if event.audit_kind in ("dns", "connection", "request", "guard", "inbound") \
                else "other"
            self.egress.labels(kind, "denied" if event.decision == "denied" else "allowed").inc()
            self.egress_bytes.labels("out").inc(max(0, event.bytes_out))
            self.egress_bytes.labels("in").inc(max(0, event.bytes_in))
            self.redactions.inc(max(0, event.pii_redactions))
            self.injections.inc(max(0, event.injection_blocks))
        elif isinstance(event, ToolEvent):
            self.tools.labels("denied" if event.decision == "denied" else "allowed").inc()
        elif isinstance(event, LimitEvent):
            self.limits.labels(event.limit).inc()
        elif isinstance(event, SampleEvent):
            with self._lock:
                if event.sandbox_id in self._running:
                    self._sampled[event.sandbox_id] = max(0, event.memory_bytes)
                self.in_use.set(sum(self._sampled.values()))

    def _lifecycle(self, event: LifecycleEvent) -> None:
        self.lifecycle.labels(event.action).inc()
        with self._lock:
            if event.action in ("created", "resumed"):
                self._running.add(event.sandbox_id)
                self._paused.discard(event.sandbox_id)
            elif event.action == "paused":
                self._running.discard(event.sandbox_id)
                self._paused.add(event.sandbox_id)
            elif event.action in ("killed", "timed_out"):
                self._running.discard(event.sandbox_id)
                self._paused.discard(event.sandbox_id)
            if event.sandbox_id not in self._running:
                self._sampled.pop(event.sandbox_id, None)
                self.in_use.set(sum(self._sampled.values()))
            self.live.set(len(self._running))
            self.paused.set(len(self._paused))

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


def metrics_available() -> bool:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def check_webhook(url: str) -> str:
    """A webhook URL: http or https, with a host; `InvalidArgumentException` otherwise."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        raise InvalidArgumentException(f"--webhook must be an http:// or https:// URL with a host and no "
                                       f"credentials, got {url!r}")
    return url


def signature(secret: bytes, body: bytes) -> str:
    """The value of `SIGNATURE_HEADER` for `body`: `sha256=` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class Webhook:
    """One URL's deliveries: a bounded queue and the thread that posts them."""

    def __init__(self, url: str, secret: bytes) -> None:
        self.url = check_webhook(url)
        self.secret = secret
        self.queue: "queue.Queue[Optional[bytes]]" = queue.Queue(QUEUE)
        self.dropped = 0
        self.delivered = 0
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="declaw-webhook", daemon=True)
        self._thread.start()

    def put(self, body: Optional[bytes]) -> None:
        """Queue a delivery; never waits (a full queue drops its oldest)."""
        while True:
            try:
                self.queue.put_nowait(body)
                return
            except queue.Full:
                try:
                    self.queue.get_nowait()
                    self.dropped += 1
                except queue.Empty:
                    pass

    def _run(self) -> None:
        import httpx

        with httpx.Client(timeout=POST_TIMEOUT, follow_redirects=False, trust_env=False) as client:
            while True:
                body = self.queue.get()
                if body is None:
                    return
                self._deliver(client, body)

    def _deliver(self, client: Any, body: bytes) -> None:
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: signature(self.secret, body),
                   DELIVERY_HEADER: str(uuid.uuid4()), "User-Agent": "declaw-wasm-webhook"}
        wait = BACKOFF
        for attempt in range(1, ATTEMPTS + 1):
            try:
                status = client.post(self.url, content=body, headers=headers).status_code
            except Exception as exc:  # noqa: BLE001 -- any transport failure is retried
                status, problem = 0, type(exc).__name__
            else:
                problem = f"HTTP {status}"
                if status < 500 and status not in RETRIED:
                    if status >= 400:
                        self.failed += 1
                        log.warning("webhook %s refused a delivery (%s); not retried", self.url, problem)
                    else:
                        self.delivered += 1
                    return
            if attempt == ATTEMPTS:
                self.failed += 1
                log.warning("webhook %s: delivery failed after %d attempts (%s)", self.url, ATTEMPTS, problem)
                return
            time.sleep(wait)
            wait *= 2

    def close(self) -> None:
        self.put(None)  # the thread's end, after what is queued


class Webhooks:
    """The listener: lifecycle events to every webhook."""

    def __init__(self, urls: Sequence[str], secret: str) -> None:
        if not secret:
            raise InvalidArgumentException("--webhook needs a signing secret: set DECLAW_WASM_WEBHOOK_SECRET")
        self.hooks = [Webhook(url, secret.encode()) for url in urls]

    def __call__(self, event: SandboxEvent) -> None:
        if isinstance(event, LifecycleEvent):
            body = json.dumps({"type": f"sandbox.lifecycle.{event.action}", "event": json.loads(to_json(event))},
                              separators=(",", ":")).encode()
            for hook in self.hooks:
                hook.put(body)

    def close(self) -> None:
        for hook in self.hooks:
            hook.close()


def metrics_router(metrics: Optional[Metrics]) -> Any:
    """`GET /metrics` on the server's app (behind the API key like every route)."""
    from fastapi import APIRouter, Response

    router = APIRouter()

    @router.get("/metrics", include_in_schema=False)
    async def prometheus() -> Response:
        """Prometheus metrics, in the text exposition format."""
        if metrics is None:
            raise NotFoundException("no metrics: install prometheus-client (pip install 'declaw-wasm[metrics]')")
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type, headers={"Cache-Control": "no-store"})

    return router


def keyless_metrics(metrics: Metrics) -> Any:
    """The ASGI app of `serve --metrics-port`: GET /metrics only, no key, behind the checks of a
    keyless listener of ours (loopback Host names, no other origin's page: `WebGuard`). Bound to
    loopback by `serve`."""
    from .._webguard import HostPolicy, WebGuard, plain_answer

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/metrics" or scope["method"] not in ("GET", "HEAD"):
            await plain_answer(scope, receive, send, 404, "only GET /metrics here")
            return
        body, content_type = metrics.exposition()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type.encode()), (b"cache-control", b"no-store"),
                                (b"x-content-type-options", b"nosniff")]})
        await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})

    return WebGuard(app, HostPolicy())


def observe(metrics: Optional[Metrics], webhooks: Optional[Webhooks]) -> Stop:
    """Subscribe the server's listeners; returns the function that stops them."""
    stops = [subscribe(listener) for listener in (metrics, webhooks) if listener is not None]

    def stop() -> None:
        for unsubscribe in stops:
            unsubscribe()
        if webhooks is not None:
            webhooks.close()
    return stop
