"""The response filter over real HTTP framing: a local server sends gzip and chunked SSE, a raw
socket reads it, h11 parses it (as the egress door will), and the filter rehydrates it."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import h11
import pytest

from .conftest import openai_chunk, openai_text, pii_pipe, sse

EMAIL = "alice@example.com"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self) -> None:
        if self.path == "/json.gz":
            body = gzip.compress(json.dumps({"msg": "to [REDACTED_EMAIL_1] now"}).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        events = [openai_chunk(p) for p in ("Write to ", "[RED", "ACTED_EMAIL", "_1] today.")]
        stream = sse(events + [openai_chunk(None, "stop")]) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        gz = self.path == "/sse.gz"
        if gz:
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()
        comp = zlib.compressobj(wbits=31) if gz else None
        for i in range(0, len(stream), 23):  # network chunks cut through tokens and events
            piece = stream[i:i + 23]
            if comp is not None:
                piece = comp.compress(piece) + comp.flush(zlib.Z_SYNC_FLUSH)
            self._chunk(piece)
            time.sleep(0.001)
        if comp is not None:
            self._chunk(comp.flush())
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


def _fetch_through_filter(port: int, path: str) -> tuple[list[tuple[str, str]], bytes, int]:
    pipe = pii_pipe()
    pipe.tokens.tokenize("email", EMAIL)
    conn = h11.Connection(h11.CLIENT)
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    host = "api.openai.com"
    sock.sendall(conn.send(h11.Request(method="GET", target=path, headers=[
        ("Host", host), ("Accept-Encoding", "gzip")])) + conn.send(h11.EndOfMessage()))
    out, filt, pieces = b"", None, 0
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA:
                conn.receive_data(sock.recv(65536))
                continue
            if isinstance(ev, h11.Response):
                headers = [(k.decode(), v.decode()) for k, v in ev.headers]
                filt = pipe.response(host, "GET", path, ev.status_code, headers)
            elif isinstance(ev, h11.Data):
                assert filt is not None
                out += filt.feed(bytes(ev.data))
                pieces += 1
            elif isinstance(ev, h11.EndOfMessage):
                assert filt is not None
                out += filt.end()
                break
    finally:
        sock.close()
    assert filt is not None and filt.head_ready
    return filt.headers, out, pieces


def test_gzip_json_from_a_real_server(server: int) -> None:
    headers, out, _ = _fetch_through_filter(server, "/json.gz")
    assert json.loads(out) == {"msg": f"to {EMAIL} now"}
    assert not any(k.lower() in ("content-encoding", "content-length") for k, _ in headers)


@pytest.mark.parametrize("path", ["/sse", "/sse.gz"])
def test_chunked_sse_from_a_real_server(server: int, path: str) -> None:
    headers, out, pieces = _fetch_through_filter(server, path)
    assert pieces > 4  # really streamed in pieces
    assert openai_text(out) == f"Write to {EMAIL} today."
    assert out.endswith(b"data: [DONE]\n\n")
    assert not any(k.lower() in ("content-encoding", "transfer-encoding") for k, _ in headers)
