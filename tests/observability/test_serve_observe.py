"""`declaw-wasm serve` for operators: Prometheus `/metrics` behind the API key (and keyless on a
loopback listener of its own, behind the web-page checks), parsed by prometheus-client's own
parser; lifecycle webhooks to a real loopback receiver, signed, retried, never blocking a sandbox."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest

pytest.importorskip("prometheus_client", reason="no prometheus-client (the `test` extra)")

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from declaw_wasm import Sandbox  # noqa: E402
from declaw_wasm.exceptions import InvalidArgumentException  # noqa: E402
from declaw_wasm.server import observe, serve_in_thread  # noqa: E402
from declaw_wasm.server.observe import (SIGNATURE_HEADER, Metrics, Webhook, Webhooks, check_webhook,  # noqa: E402
                                        keyless_metrics)

KEY = "observe-key"
SECRET = "webhook-secret-" + "x" * 8


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


class Receiver:
    """A webhook receiver on loopback: records each POST; answers `plan`'s statuses in turn
    (then 204), or waits `hang` seconds before answering."""

    def __init__(self, plan: tuple[int, ...] = (), hang: float = 0.0) -> None:
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.plan = list(plan)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append(({k.lower(): v for k, v in self.headers.items()}, body))
                time.sleep(hang)
                status = receiver.plan.pop(0) if receiver.plan else 204
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver(plan=(503,))
    yield made
    made.close()


def wait_for(condition: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.guest
def test_metrics_are_behind_the_key_and_count_what_sandboxes_did() -> None:
    with serve_in_thread(api_key=KEY) as url:
        assert httpx.get(f"{url}/metrics").status_code == 401
        before = samples(httpx.get(f"{url}/metrics", headers={"X-API-Key": KEY}).text)
        sbx = Sandbox.create(domain=url, api_key=KEY)
        sbx.commands.run("true")
        sbx.commands.run("exit 3")
        sbx.run_code("1 / 0")
        sbx.commands.run("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9), 2)\"")
        sbx.kill()
        answer = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {KEY}"})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    after = samples(answer.text)

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert grew("declaw_sandbox_lifecycle_total", action="created") == 1
    assert grew("declaw_sandbox_lifecycle_total", action="killed") == 1
    assert grew("declaw_commands_total", outcome="ok") == 1
    assert grew("declaw_commands_total", outcome="error") == 2
    assert grew("declaw_cells_total", outcome="error") == 1
    assert grew("declaw_command_duration_seconds_count") == 3
    assert grew("declaw_egress_events_total", kind="connection", decision="denied") == 1
    assert after[("declaw_sandboxes_live", ())] == before.get(("declaw_sandboxes_live", ()), 0.0)


@pytest.mark.guest
def test_a_pool_backed_servers_metrics_count_its_workers_sandboxes() -> None:
    """`serve --backend processes`: the workers' events are forwarded to the server's process."""
    import os

    from conftest import POOL  # tests/ is on sys.path

    from declaw_wasm.sandbox import sandboxes_for
    from declaw_wasm.settings import parse_backend

    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    with serve_in_thread(api_key=KEY, sandboxes=sandboxes_for(parse_backend(POOL))) as url:
        before = samples(httpx.get(f"{url}/metrics", headers={"X-API-Key": KEY}).text)
        sbx = Sandbox.create(domain=url, api_key=KEY)
        sbx.commands.run("exit 2")
        sbx.kill()
        after = samples(httpx.get(f"{url}/metrics", headers={"X-API-Key": KEY}).text)
    for key, grown in ((("declaw_sandbox_lifecycle_total", (("action", "created"),)), 1),
                       (("declaw_sandbox_lifecycle_total", (("action", "killed"),)), 1),
                       (("declaw_commands_total", (("outcome", "error"),)), 1)):
        assert after.get(key, 0.0) - before.get(key, 0.0) == grown, key


def test_keyless_metrics_answer_loopback_names_only_and_no_other_origins_page() -> None:
    import uvicorn

    metrics = Metrics()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(keyless_metrics(metrics), log_level="warning", http="h11"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started)
        base = f"http://127.0.0.1:{port}"
        fine = httpx.get(f"{base}/metrics")
        assert fine.status_code == 200 and "declaw_sandboxes_live" in fine.text
        assert httpx.get(f"{base}/metrics", headers={"Host": "attacker.example"}).status_code >= 400  # rebinding
        assert httpx.get(f"{base}/metrics", headers={"Origin": "https://attacker.example"}).status_code == 403
        assert httpx.get(f"{base}/sandboxes").status_code == 404
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.mark.guest
def test_lifecycle_webhooks_are_signed_and_retried(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observe, "BACKOFF", 0.05)
    with serve_in_thread(api_key=KEY, webhooks=[receiver.url], webhook_secret=SECRET) as url:
        sbx = Sandbox.create(domain=url, api_key=KEY)
        sbx.kill()
        wait_for(lambda: len(receiver.posts) >= 3)  # created (refused once with 503, then again), killed
    kinds = [json.loads(body)["type"] for _, body in receiver.posts]
    assert kinds == ["sandbox.lifecycle.created", "sandbox.lifecycle.created", "sandbox.lifecycle.killed"]
    for headers, body in receiver.posts:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers[SIGNATURE_HEADER.lower()], expected)
        event = json.loads(body)["event"]
        assert event["sandbox_id"] == sbx.sandbox_id and event["kind"] == "lifecycle"
    assert receiver.posts[0][0]["x-declaw-delivery"] == receiver.posts[1][0]["x-declaw-delivery"]  # one delivery


@pytest.mark.guest
def test_a_receiver_that_hangs_never_slows_a_sandbox() -> None:
    slow = Receiver(hang=5.0)
    try:
        with serve_in_thread(api_key=KEY, webhooks=[slow.url], webhook_secret=SECRET) as url:
            start = time.monotonic()
            for _ in range(3):
                Sandbox.create(domain=url, api_key=KEY).kill()
            assert time.monotonic() - start < 4.0
    finally:
        slow.close()


def test_the_webhook_queue_is_bounded_and_drops_its_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = Receiver(hang=3.0)
    monkeypatch.setattr(observe, "QUEUE", 3)
    try:
        hook = Webhook(slow.url, b"k")
        for i in range(20):
            hook.put(json.dumps({"n": i}).encode())
        assert hook.queue.qsize() <= 3 and hook.dropped >= 16
        hook.close()
    finally:
        slow.close()


def test_webhook_urls_and_secret_are_checked() -> None:
    assert check_webhook("https://hooks.example/x") == "https://hooks.example/x"
    for bad in ("ftp://x/", "http:///nohost", "https://user:pw@hooks.example/", "hooks.example"):
        with pytest.raises(InvalidArgumentException, match="webhook"):
            check_webhook(bad)
    with pytest.raises(InvalidArgumentException, match="DECLAW_WASM_WEBHOOK_SECRET"):
        Webhooks(["https://hooks.example/"], "")


def test_memory_in_use_is_the_running_sandboxes_last_samples() -> None:
    from declaw_wasm._journal import Recorder
    from declaw_wasm.events import LifecycleEvent, SampleEvent

    metrics = Metrics()
    one, two = Recorder("sbx_m1", journal=False), Recorder("sbx_m2", journal=False)
    for rec in (one, two):
        metrics(rec.emit(LifecycleEvent, action="created"))
    metrics(one.emit(SampleEvent, memory_bytes=100))
    metrics(two.emit(SampleEvent, memory_bytes=50))
    metrics(one.emit(SampleEvent, memory_bytes=300))
    found = samples(metrics.exposition()[0].decode())
    assert found[("declaw_sandbox_memory_bytes", ())] == 350
    metrics(one.emit(LifecycleEvent, action="killed"))
    found = samples(metrics.exposition()[0].decode())
    assert found[("declaw_sandbox_memory_bytes", ())] == 50 and found[("declaw_sandboxes_live", ())] == 1
