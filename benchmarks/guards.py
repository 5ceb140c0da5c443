"""The guards' cost on the host: PII on a 100 KB JSON body, rehydration of a 1 MB SSE stream.

Side by side in one run (best of N in CPU time: the machine is shared):

1. A 100 KB chat-completions JSON body with PII in some messages: `GuardPipeline.request` with
   PII on vs guards off, and the round trip (request redaction + the echoed 100 KB answer
   rehydrated). Target: <= 3 ms added.
2. A 1 MB OpenAI-format SSE answer (tokens split across deltas) from a local HTTP server, read
   through a socket and parsed by h11 as the egress door will: passthrough vs the response filter
   rehydrating. Target: <= 5 % throughput loss.

    python3 benchmarks/guards.py [-n 30]
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import socket
import threading
import time
import warnings
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import h11

from declaw_wasm.security import GuardPipeline, PIIConfig, SecurityPolicy, TokenMap

warnings.simplefilter("ignore")
HOST = "api.openai.com"
JSON_HEADERS = [("content-type", "application/json")]
TYPES = ["ssn", "credit_card", "email", "phone", "api_key", "ip_address"]
WORDS = ["the", "quarterly", "revenue", "grew", "while", "operating", "costs", "fell", "across", "every",
         "region", "and", "the", "team", "expects", "further", "gains", "next", "year", "as", "new",
         "products", "reach", "customers"]


def best_ms(fn: Callable[[], object], n: int, clock: Callable[[], float] = time.perf_counter
            ) -> float:
    """Best of n: the machine is shared, and the best run is the one nothing else disturbed."""
    times = []
    for _ in range(n):
        start = clock()
        fn()
        times.append((clock() - start) * 1000)
    return min(times)


def cpu_ms(fn: Callable[[], object], n: int) -> float:
    """Best of n in this thread's CPU time: what the host spends, whatever else runs."""
    return best_ms(fn, n, time.thread_time)


def chat_body(size: int) -> bytes:
    rng = random.Random(7)
    messages: list[dict[str, str]] = []
    i = 0
    while sum(len(m["content"]) for m in messages) < size:
        text = " ".join(rng.choice(WORDS) for _ in range(60))
        if i % 4 == 0:
            text += f" Contact user{i}@example.com or +1 415 555 {1000 + i:04d}, SSN 123-45-{6000 + i}."
        messages.append({"role": "user" if i % 2 else "assistant", "content": text})
        i += 1
    return json.dumps({"model": "gpt-4.1", "temperature": 0.2, "messages": messages}).encode()


def bench_json(n: int) -> list[str]:
    body = chat_body(100_000)
    off = GuardPipeline(SecurityPolicy(), TokenMap())
    on = GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, types=TYPES)), TokenMap())
    headers = JSON_HEADERS + [("content-length", str(len(body)))]
    redacted = on.request(HOST, "POST", "/v1/chat/completions", headers, body).body

    def round_trip(pipe: GuardPipeline) -> None:
        out = pipe.request(HOST, "POST", "/v1/chat/completions", headers, body)
        f = pipe.response(HOST, "POST", "/v1/chat/completions", 200, JSON_HEADERS)
        f.feed(redacted)
        f.end()
        assert out.body

    req_off = cpu_ms(lambda: off.request(HOST, "POST", "/", headers, body), n)
    req_on = cpu_ms(lambda: on.request(HOST, "POST", "/", headers, body), n)
    rt_off = cpu_ms(lambda: round_trip(off), n)
    rt_on = cpu_ms(lambda: round_trip(on), n)
    tokens = redacted.count(b"[REDACTED_")
    return [
        f"JSON body: {len(body) / 1000:.0f} KB, {tokens} values tokenised (CPU time, best of {n})",
        "| work | guards off | PII on | added |",
        "|---|---|---|---|",
        f"| request (redact) | {req_off:.2f} ms | {req_on:.2f} ms | {req_on - req_off:.2f} ms |",
        (f"| round trip (redact + rehydrate the echo) | {rt_off:.2f} ms | {rt_on:.2f} ms | "
         f"{rt_on - rt_off:.2f} ms |"),
    ]


def sse_stream(size: int, tm: TokenMap, every: int = 50) -> bytes:
    rng = random.Random(3)
    token = tm.tokenize("email", "alice@example.com")
    out = []
    total = 0
    i = 0
    while total < size:
        if i % every == 0:  # a token split over three deltas every `every` events
            pieces = [" " + token[:5], token[5:12], token[12:] + " "]
        else:
            pieces = [rng.choice(WORDS) + " "]
        for p in pieces:
            ev = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                  "model": "gpt-4.1", "choices": [{"index": 0, "delta": {"content": p},
                                                   "finish_reason": None}]}
            line = b"data: " + json.dumps(ev).encode() + b"\n\n"
            out.append(line)
            total += len(line)
        i += 1
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


class _Upstream(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stream = b""

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        stream = type(self).stream
        for i in range(0, len(stream), 4096):
            piece = stream[i:i + 4096]
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")


def fetch(port: int, pipe: GuardPipeline | None) -> bytes:
    """GET the stream over a socket, parse it with h11 (as the door does), filter it or not."""
    conn = h11.Connection(h11.CLIENT)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(conn.send(h11.Request(method="GET", target="/", headers=[("Host", HOST)]))
                     + conn.send(h11.EndOfMessage()))
        out, f = [], None
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(sock.recv(65536))
            elif isinstance(ev, h11.Response) and pipe is not None:
                f = pipe.response(HOST, "GET", "/", 200,
                                  [(k.decode(), v.decode()) for k, v in ev.headers])
            elif isinstance(ev, h11.Data):
                out.append(f.feed(bytes(ev.data)) if f else bytes(ev.data))
            elif isinstance(ev, h11.EndOfMessage):
                if f:
                    out.append(f.end())
                return b"".join(out)


def bench_sse(n: int) -> list[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    lines = ["| 1 MB OpenAI SSE answer | passthrough | rehydrating | throughput loss | filter alone |",
             "|---|---|---|---|---|"]
    for every, label in ((50, "a token every 50 deltas"), (1000, "a token every 1000 deltas")):
        tm = TokenMap()
        stream = _Upstream.stream = sse_stream(1_000_000, tm, every)
        on = GuardPipeline(SecurityPolicy(pii=PIIConfig(enabled=True, types=TYPES)), tm)
        rehydrated = fetch(port, on)
        assert b"alice@example.com" in rehydrated and b"[REDACTED" not in rehydrated
        # CPU time of the whole process (server thread included): stable on a shared machine.
        off_ms = best_ms(functools.partial(fetch, port, None), n, time.process_time)
        on_ms = best_ms(functools.partial(fetch, port, on), n, time.process_time)
        chunks = [stream[i:i + 4096] for i in range(0, len(stream), 4096)]

        def alone(pipe: GuardPipeline = on, chunks: list[bytes] = chunks) -> None:
            f = pipe.response(HOST, "GET", "/", 200, [("content-type", "text/event-stream")])
            for c in chunks:
                f.feed(c)
            f.end()

        alone_ms = cpu_ms(alone, n)
        mb = len(stream) / 1e6
        lines.append(
            f"| {label} ({rehydrated.count(b'alice@example.com')} tokens, each split over 3 "
            f"deltas) | {off_ms:.1f} ms ({mb / off_ms * 1000:.0f} MB/s) | {on_ms:.1f} ms "
            f"({mb / on_ms * 1000:.0f} MB/s) | {(1 - off_ms / on_ms) * 100:.0f} % | "
            f"{alone_ms:.1f} ms ({mb / alone_ms * 1000:.0f} MB/s) |")
    srv.shutdown()
    note = ("passthrough = local server -> socket -> h11 -> bytes, on the host only (the guest's "
            f"own reading is not in it); process CPU time, best of {n}")
    return [note, *lines]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=30)
    args = ap.parse_args()
    for line in bench_json(args.n) + [""] + bench_sse(args.n):
        print(line)


if __name__ == "__main__":
    main()
