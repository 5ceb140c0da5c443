"""Upstream servers for the egress tests, on loopback only: HTTP, HTTPS (a CA made here with
trustme), HTTPS with a certificate for another name, HTTP on ::1, and a raw TCP echo.

Every HTTP request is recorded (method, path, headers, body, and the client's port, which
tells connections apart), so tests can see exactly what reached the upstream.

`/leak/<place>` routes are a hostile server echoing a secret back in every part of a response
(test_secret_echoes.py): the value of the request's `X-Echo` header (the secret itself, where
the host injected it), or the value the test planted in the server (`Upstreams.plant`: a server
that learnt the value elsewhere, for plain HTTP, where nothing is injected).
"""

from __future__ import annotations

import brotli
import gzip
import http.server
import json
import socket
import socketserver
import ssl
import struct
import threading
import time
import urllib.parse
import zlib
from urllib.parse import quote
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trustme

from . import providers


@dataclass
class Record:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    client_port: int
    server: str

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "Server"

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self, body: bytes) -> Record:
        record = Record(self.command, self.path, list(self.headers.items()), body,
                        self.client_address[1], self.server.label)
        with self.server.lock:
            self.server.records.append(record)
        return record

    def _send(self, status: int, body: bytes, ctype: str = "application/json",
              extra: tuple[tuple[str, str], ...] = ()) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        for key, value in extra:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _handle(self) -> None:
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
        record = self._record(body)
        path = self.path
        echo = json.dumps({"method": self.command, "path": path, "headers": dict(self.headers.items()),
                           "body": body.decode("utf-8", "replace"),
                           "server": self.server.label}).encode()
        if path.startswith("/bytes/"):
            self._send(200, b"x" * int(path.split("/")[2]), "application/octet-stream")
        elif path.startswith("/status/"):
            self._send(int(path.split("/")[2]), b"status\n", "text/plain")
        elif path == "/csv":
            self._send(200, b"a,b\n1,2\n3,4\n", "text/csv")
        elif path == "/gzip":
            self._send(200, gzip.compress(echo), extra=(("Content-Encoding", "gzip"),))
        elif path == "/deflate":
            self._send(200, zlib.compress(echo), extra=(("Content-Encoding", "deflate"),))
        elif path == "/br":
            self._send(200, brotli.compress(echo), extra=(("Content-Encoding", "br"),))
        elif path == "/echo-auth-header":
            self._send(200, b"ok\n", "text/plain",
                       extra=(("X-Echo-Auth", record.header("Authorization") or ""),))
        elif providers.is_sdk_call(self.command, path, self.headers.get("User-Agent")):
            providers.handle(path, dict(self.headers.items()), body, lambda status, data: self._send(status, data),
                             lambda events: self._chunked(events, "text/event-stream"))
        elif path.startswith("/leak/"):
            self._leak(path.split("/", 2)[2], self.server.planted or record.header("X-Echo") or "")
        elif not self._guard_route(path, body, echo):
            self._other_route(path, echo)

    def _other_route(self, path: str, echo: bytes) -> None:
        if path.startswith("/redirect"):
            self._send(302, b"", "text/plain", extra=(("Location", "/final"),))
        elif path == "/close":
            self._send(200, echo, extra=(("Connection", "close"),))
            self.close_connection = True
        else:
            self._send(200, echo)

    def _guard_route(self, path: str, body: bytes, echo: bytes) -> bool:
        """The routes of the guard tests (test_guardrails.py); False if `path` is none of them."""
        if path.startswith("/sse/"):
            self._sse(path.split("/")[2].split("?")[0], _last_message(body))
        elif path.startswith("/split/"):
            pieces = _cut(body.decode("utf-8", "replace"), int(path.split("/")[2]))
            self._chunked([p.encode() for p in pieces], self.headers.get("Content-Type") or "text/plain")
        elif path.startswith("/say/"):  # the query string, unquoted, as the answer (for guard tests)
            text = urllib.parse.unquote(path.split("?", 1)[1] if "?" in path else "")
            kind = path.split("/")[2].split("?")[0]
            if kind == "json":
                self._send(200, json.dumps({"choices": [{"message": {"role": "assistant",
                                                                     "content": text}}]}).encode())
            else:
                self._send(200, text.encode(), "text/plain; charset=utf-8")
        elif path.startswith("/long/"):  # /long/N?text: N KiB of lines, then the text
            size = int(path.split("/")[2].split("?")[0]) << 10
            text = urllib.parse.unquote(path.split("?", 1)[1] if "?" in path else "")
            line = b"all is well with the quarterly figures\n"
            self._chunked([line * (size // len(line)), text.encode() + b"\n"], "text/plain")
        elif path.startswith("/bomb/"):  # /bomb/N: N MiB of zeros, gzip-compressed, as text
            raw = gzip.compress(b"0" * (int(path.split("/")[2]) << 20))
            self._send(200, raw, "text/plain", extra=(("Content-Encoding", "gzip"),))
        elif path == "/zstd":
            self._send(200, zstd_compress(echo), extra=(("Content-Encoding", "zstd"),))
        else:
            return False
        return True

    def _leak(self, place: str, secret: str) -> None:
        """The secret in one `place` of the response (raw bytes: http.server would not write
        most of these)."""
        v, q = secret.encode(), quote(secret, safe="").encode()
        self.close_connection = True
        self.wfile.write(_leaked_head(place, v, q) or _leaked_body(place, v))
        self.wfile.flush()

    def _chunked(self, pieces: list[bytes], ctype: str) -> None:
        """Each piece in its own chunk and its own network write, a moment apart."""
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for piece in pieces:
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
                time.sleep(0.005)
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _sse(self, dialect: str, text: str) -> None:
        """`text` streamed back as an OpenAI or Anthropic SSE answer, in four deltas cut through
        its first redaction token, each event its own network write."""
        parts = _cut(text, 4)
        if dialect == "openai":
            def chunk(delta: dict[str, Any], finish: Any = None) -> dict[str, Any]:
                return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4.1",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            events = [chunk({"role": "assistant", "content": ""})]
            events += [chunk({"content": p}) for p in parts] + [chunk({}, "stop")]
            lines = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events]
            lines.append(b"data: [DONE]\n\n")
        else:
            msg: dict[str, Any] = {"id": "msg_1", "type": "message", "role": "assistant",
                                   "model": "claude-sonnet-4-5", "content": [], "stop_reason": None,
                                   "usage": {"input_tokens": 1, "output_tokens": 1}}
            named: list[tuple[str, dict[str, Any]]] = [
                ("message_start", {"type": "message_start", "message": msg}),
                ("content_block_start", {"type": "content_block_start", "index": 0,
                                         "content_block": {"type": "text", "text": ""}})]
            named += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": p}}) for p in parts]
            named += [("content_block_stop", {"type": "content_block_stop", "index": 0}),
                      ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                                         "usage": {"output_tokens": 4}}),
                      ("message_stop", {"type": "message_stop"})]
            lines = [f"event: {name}\ndata: {json.dumps(e)}\n\n".encode() for name, e in named]
        self._chunked(lines, "text/event-stream")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _handle


def _head(status: bytes, reason: bytes, *lines: bytes) -> bytes:
    return b"HTTP/1.1 " + status + b" " + reason + b"\r\n" + b"".join(x + b"\r\n" for x in lines) + b"\r\n"


def _leaked_head(place: str, v: bytes, q: bytes) -> bytes:
    """The secret `v` (`q` URL-encoded) in a response head, a 1xx one or a trailer."""
    if place == "head":  # the reason phrase, a header's value, a header's name, the body
        body = b"body " + v
        return _head(b"200", b"OK " + v, b"X-Leak: " + v, b"Set-Cookie: k=" + q, v + b": as-a-name",
                     b"Content-Length: %d" % len(body), b"Connection: close") + body
    if place == "info":  # every 1xx head, then a plain answer
        out = b""
        for status, reason in ((b"100", b"Continue"), (b"102", b"Processing"), (b"103", b"Early Hints")):
            out += _head(status, reason + b" " + v, b"X-Leak: " + v,
                         b"Link: </style.css?k=" + q + b">; rel=preload", v + b": as-a-name")
        return out + _head(b"200", b"OK", b"Content-Length: 2", b"Connection: close") + b"ok"
    if place == "trailer":  # chunked trailers
        out = _head(b"200", b"OK", b"Transfer-Encoding: chunked", b"Trailer: X-Leak", b"Connection: close")
        return out + b"2\r\nok\r\n0\r\nX-Leak: " + v + b"\r\n" + v + b": as-a-name\r\n\r\n"
    if place == "switch":  # an upgrade nobody asked for, then the raw stream
        return _head(b"101", b"Switching Protocols " + v, b"Upgrade: websocket", b"Connection: Upgrade",
                     b"X-Leak: " + v) + b"raw stream " + v
    if place == "redirect":
        return _head(b"302", b"Found", b"Location: https://api.openai.com/cb?key=" + q + b"&raw=" + v,
                     b"Content-Location: /x/" + v, b"Content-Length: 0", b"Connection: close")
    return b""


def _leaked_body(place: str, v: bytes) -> bytes:
    """The secret `v` in a body the host cannot decode."""
    def coded(coding: bytes, body: bytes) -> bytes:
        return _head(b"200", b"OK", b"Content-Type: text/plain", b"Content-Encoding: " + coding,
                     b"Content-Length: %d" % len(body), b"Connection: close") + body

    if place == "unknown":  # a coding nobody decodes, the value raw inside
        return coded(b"xyz", b"body " + v)
    if place == "stacked-unknown":
        return coded(b"gzip, xyz", gzip.compress(b"body " + v))
    if place == "too-deep":  # five gzip layers: real, but past the host's bound
        body = b"body " + v
        for _ in range(5):
            body = gzip.compress(body)
        return coded(b"gzip, gzip, gzip, gzip, gzip", body)
    if place.startswith("corrupt-") and place != "corrupt-late":
        return coded(place.split("-")[1].encode(), b"\x00body " + v)
    if place == "zstd-window":  # a frame that needs a 16 MiB window (RFC 9659: 8 MiB at most)
        return coded(b"zstd", zstd_compress(v + b"\0" * (16 << 20) + v, window_log=24))
    if place.startswith("tiny-"):  # a coded body shorter than what the scrubber holds back
        coding = place.split("-", 1)[1]
        text = b"" if coding == "empty" else b'{"ok":true}'
        encode = {"gzip": gzip.compress, "deflate": zlib.compress, "br": brotli.compress,
                  "zstd": zstd_compress, "empty": gzip.compress}[coding]
        return coded(b"gzip" if coding == "empty" else coding.encode(), encode(text))
    if place == "cut-gzip":  # a gzip member cut before its end, the value raw after its start
        whole = gzip.compress(b"".join(b"all is well\n%d\n" % i for i in range(5000)))
        return coded(b"gzip", whole[:len(whole) // 2])
    if place == "trailing-gzip":  # a gzip member, then the value raw: not another member
        return coded(b"gzip", gzip.compress(b"all is well\n" * 1000) + b"\x00" * 8 + v)
    if place == "corrupt-late":  # 256 KiB that decode, then a broken block, the value after it
        z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        body = z.compress(b"all is well\n" * 21846) + z.flush(zlib.Z_FULL_FLUSH)
        return coded(b"gzip", body + b"\xff\xff\xff\xff" + v + b"\xff" * 64)
    return _head(b"404", b"Not Found", b"Content-Length: 0", b"Connection: close")


def _last_message(body: bytes) -> str:
    """The content of the last message of an OpenAI- or Anthropic-shaped request body."""
    try:
        content = json.loads(body)["messages"][-1]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return body.decode("utf-8", "replace")
    return content if isinstance(content, str) else json.dumps(content)


def _cut(text: str, n: int) -> list[str]:
    """`text` in n pieces; when it holds a redaction token, the cuts all fall inside the first
    one (so its bytes arrive in n pieces)."""
    start = text.find("[REDACTED_")
    end = text.find("]", start) + 1 if start >= 0 else 0
    if start < 0 or end - start < n:
        start, end = 0, len(text)
    cuts = [start + (end - start) * i // n for i in range(1, n)]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def zstd_compress(data: bytes, window_log: int = 0) -> bytes:
    try:
        from compression import zstd
    except ImportError:
        from backports import zstd
    if window_log:
        return bytes(zstd.compress(data, options={zstd.CompressionParameter.window_log: window_log}))
    return bytes(zstd.compress(data))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """HTTP, or HTTPS with `tls` (the handshake runs in each connection's thread, as in a real
    server, never in the accept loop)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], label: str, family: int = socket.AF_INET) -> None:
        self.address_family = family
        self.label = label
        self.records: list[Record] = []
        self.lock = threading.Lock()
        self.tls: ssl.SSLContext | None = None
        self.planted = ""  # a secret value this server knows (the /leak/ routes echo it)
        super().__init__(address, Handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # failed handshakes are what some tests cause

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class RawEcho(socketserver.ThreadingMixIn, socketserver.TCPServer):
    """Echoes every chunk back, prefixed with b"echo:"."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        class H(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                while True:
                    data = self.request.recv(65536)
                    if not data:
                        return
                    self.request.sendall(b"echo:" + data)

        super().__init__(("127.0.0.1", 0), H)


class Flood:
    """A hostile upstream: it answers at once, without reading a request's body, and then sends
    as fast as the peer takes bytes (a memoryview of one block: it holds nothing itself).

    The request's path picks what it sends (after reading only the head): `/early...` a whole
    small answer, then `size` bytes more on the connection (bytes the relay may not pass on
    until the guest's request is done); `/body...` one answer with a `size`-byte body; `/sink...`
    nothing, and it never reads again (the guest's bytes pile up in front of it). With
    `raw=True` it reads nothing and sends `size` bytes from the start (a non-HTTP protocol).
    With `tls`, it is a TLS server with that context.

    `sent` counts the bytes it managed to hand to its kernel, over all connections; it stops
    sending past `total` (a safety net: a relay that stops holding back fails the test's bound
    instead of exhausting the machine's memory). `seen` counts requests (connections for raw);
    nothing is sent before `release()` (so a test can measure from a quiet start).
    """

    BLOCK = memoryview(b"z" * (1 << 20))

    def __init__(self, size: int = 400 << 20, total: int = 1 << 30, raw: bool = False,
                 tls: ssl.SSLContext | None = None) -> None:
        self.size = size
        self.total = total
        self.raw = raw
        self.tls = tls
        self.sent = 0
        self.seen = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._go = threading.Event()
        self._conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name="flood-accept").start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="flood").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(10)
            sock: socket.socket = conn
            if self.tls is not None:
                sock = self.tls.wrap_socket(conn, server_side=True)
            path = b"/raw"
            if not self.raw:
                head = b""
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    data = sock.recv(4096)
                    if not data:
                        return
                    head += data
                path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
            with self.lock:
                self.seen += 1
            while not self._go.wait(0.1):
                if self._stop.is_set():
                    return
            if path.startswith(b"/sink"):
                self._stop.wait()
                return
            if path.startswith(b"/early"):
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif path.startswith(b"/body"):
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % self.size)
            self._flood(sock)
            self._stop.wait()  # the connection stays open: the end of the stream is no way out
        except OSError:
            return
        finally:
            conn.close()

    def _flood(self, sock: socket.socket) -> None:
        sock.settimeout(0.1)
        left = self.size
        while left > 0 and not self._stop.is_set() and self.sent < self.total:
            try:
                n = sock.send(self.BLOCK[:min(left, len(self.BLOCK))])
            except (TimeoutError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                continue
            left -= n
            with self.lock:
                self.sent += n

    def release(self) -> None:
        """Let every connection's answer (and flood) go."""
        self._go.set()

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        with self.lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


class Stalling:
    """A hostile upstream that answers every request with `head` and the first `cut` bytes of
    `body`, then keeps the connection open and sends nothing more (so whatever the relay holds
    for the answer stays held while the guest keeps the connection)."""

    def __init__(self, head: bytes, body: bytes, cut: int) -> None:
        self.head, self.body, self.cut = head, body, cut
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name="stalling-accept").start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="stalling").start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            conn.sendall(self.head)
            conn.sendall(memoryview(self.body)[:self.cut])  # no copy: the test's memory is measured
            self._stop.wait()
        except OSError:
            pass

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        for conn in self._conns:
            conn.close()


# -- Hostile: one upstream, every misbehaviour (tests/egress/test_hostile_upstream.py) -------------

class Hostile:
    """A hostile upstream on loopback (a real socket; real TLS with `tls`): what it does is picked
    by the request's path, `/<mode>[/<arg>...]`, after it read the request's head (at most 64 KiB;
    the body only where a mode says so). Every mode writes raw bytes: most of them no HTTP
    library would send.

    ok                 200 "ok", keep-alive (the next request on the connection is served too)
    flood-body         200, then a chunked body that never ends
    flood-head         a status line, then header lines that never end
    early              200 "early" (Connection: close) at once, then reads the request's body
                       to its end (bytes counted in `body_bytes`) and closes
    info/<n>[/<status>] n informational heads (100 Continue and 103 Early Hints in turn, or all
                       <status>), then 200 "ok"
    info-flood         100 Continue heads that never end
    huge-head/<kib>    a 200 whose headers take <kib> KiB, then "ok"
    bad-status/<kind>  a status line that is not one: garbage, version, empty, icy, leak
    bad-header/<kind>  a header line that is not one: nocolon, nul, space, fold, leak
    framing/<kind>     conflicting framing: cl-cl (two Content-Lengths), cl-te (both),
                       te-unknown (Transfer-Encoding: gzip), cl-negative, cl-short (the server
                       closes before the length announced)
    bad-chunk/<kind>   a chunked body whose chunk size is not one: hex, negative, huge, leak,
                       footer (chunk data not followed by CRLF)
    drip-head/<s>      the head of a 200, one byte every <s> seconds (its body never comes)
    drip-body/<s>/<n>  a 200 with an n-byte body, one byte every <s> seconds
    bomb/<coding>/<mib> a body of <mib> MiB of "0", coded gzip, br or zstd (1000x or more)
    coding/<name>      a body with an unknown Content-Encoding <name>
    reset/<framing>    a 1 MiB body (framing: cl, chunked or close) cut after 64 KiB by an RST
                       (SO_LINGER 0)
    reset-now          an RST instead of an answer
    close              the connection closed (FIN) without an answer
    silent             no answer, the connection kept open

    `leak` kinds (and `coding`) put `planted` (a secret value the server learnt elsewhere), or
    else the value of the request's `X-Echo` header (where the host injected a secret), into the
    broken line (the body). `heads` holds the request heads received (the first 4 KiB of each), `handshakes` the
    TLS handshakes that failed or succeeded, `sent` the bytes it handed to its kernel; it stops
    sending past `total` (a safety net: a relay that stops holding back fails the test's bound,
    it does not exhaust the machine).

    TLS renegotiation is not among the modes: Python's `ssl` has no call that makes a server
    ask for one (no SSL_renegotiate), and TLS 1.3 has none.
    """

    BLOCK = memoryview(b"z" * (64 << 10))
    _bombs: dict[tuple[str, int], bytes] = {}

    def __init__(self, tls: ssl.SSLContext | None = None, total: int = 512 << 20) -> None:
        self.tls = tls
        self.total = total
        self.planted = ""
        self.sent = 0
        self.body_bytes = 0
        self.heads: list[bytes] = []
        self.handshakes = {"ok": 0, "failed": 0}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = int(self.listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True, name="hostile-accept").start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name="hostile").start()

    def _serve(self, conn: socket.socket) -> None:
        sock: socket.socket = conn
        try:
            conn.settimeout(10)
            if self.tls is not None:
                try:
                    sock = self.tls.wrap_socket(conn, server_side=True)
                except (ssl.SSLError, OSError):
                    with self.lock:
                        self.handshakes["failed"] += 1
                    return
                with self.lock:
                    self.handshakes["ok"] += 1
            buffer = b""
            while not self._stop.is_set():
                head, buffer = _read_head(sock, buffer)
                if head is None:
                    return
                with self.lock:
                    self.heads.append(head[:4096])
                parts = (head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/").decode("latin-1").split("/")
                mode, args = parts[1] if len(parts) > 1 else "", parts[2:]
                if mode == "ok":
                    buffer = _skip_body(sock, head, buffer)
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
                    continue
                self._act(sock, conn, mode, args, (self.planted or _header(head, b"x-echo")).encode())
                return
        except OSError:
            return
        finally:
            sock.close()

    def _act(self, sock: socket.socket, conn: socket.socket, mode: str, args: list[str], secret: bytes) -> None:
        """Answer as `mode` says (the connection is closed after); `secret` for the leaks."""
        if mode == "flood-body":
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                       b"Transfer-Encoding: chunked\r\n\r\n")
            self._flood(sock, b"%x\r\n%s\r\n" % (len(self.BLOCK), self.BLOCK))
        elif mode == "flood-head":
            self._send(sock, b"HTTP/1.1 200 OK\r\n")
            self._flood(sock, b"X-Flood: %s\r\n" % self.BLOCK[:1000])
        elif mode == "early":
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly")
            self._drain(sock)
        elif mode == "info":
            n = int(args[0])
            statuses = [args[1].encode()] if len(args) > 1 else [b"100 Continue", b"103 Early Hints"]
            link = b"Link: </style.css>; rel=preload\r\n"
            one = [b"HTTP/1.1 %s\r\n%s\r\n" % (s if b" " in s else s + b" Info", link if s.startswith(b"103") else b"")
                   for s in statuses]
            heads = b"".join(one[i % len(one)] for i in range(n))
            self._send(sock, heads + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
        elif mode == "info-flood":
            self._flood(sock, b"HTTP/1.1 100 Continue\r\n\r\n" * 64)
        elif mode == "huge-head":
            line = b"X-Big: " + b"b" * 1000 + b"\r\n"
            self._send(sock, b"HTTP/1.1 200 OK\r\n" + line * int(args[0]) +
                       b"Content-Length: 2\r\nConnection: close\r\n\r\nok")
        elif mode in ("bad-status", "bad-header", "framing", "bad-chunk"):
            self._send(sock, _broken(mode, args[0], secret))  # then closes (framing/cl-short: short)
        else:
            self._act_slowly(sock, conn, mode, args, secret)

    def _act_slowly(self, sock: socket.socket, conn: socket.socket, mode: str, args: list[str],
                    secret: bytes) -> None:
        """The modes that take their time, code a body, or end the connection."""
        if mode == "drip-head":
            self._drip(sock, b"HTTP/1.1 200 OK\r\n" + b"X-Drip: d\r\n" * 100000, float(args[0]))
        elif mode == "drip-body":
            n = int(args[1])
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % n)
            self._drip(sock, b"d" * n, float(args[0]))
            self._drain(sock)
        elif mode == "bomb":
            body = self.bomb(args[0], int(args[1]))
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: %s\r\n"
                       b"Content-Length: %d\r\n\r\n" % (args[0].encode(), len(body)) + body)
            self._drain(sock)
        elif mode == "coding":
            body = b"body coded " + args[0].encode() + b" " + secret
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: %s\r\n"
                       b"Content-Length: %d\r\n\r\n" % (args[0].encode(), len(body)) + body)
            self._drain(sock)
        elif mode == "reset":
            framing = {"cl": b"Content-Length: %d\r\n" % (1 << 20), "chunked": b"Transfer-Encoding: chunked\r\n",
                       "close": b"Connection: close\r\n"}[args[0]]
            part = bytes(self.BLOCK)
            body = b"%x\r\n%s\r\n" % (len(part), part) if args[0] == "chunked" else part
            self._send(sock, b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s\r\n%s"
                       % (framing, body))
            time.sleep(0.2)  # the part reaches the relay before the reset
            _reset(conn)
        elif mode == "reset-now":
            _reset(conn)
        elif mode == "silent":
            self._stop.wait()
        # "close", and every unknown mode: closed without an answer

    def _send(self, sock: socket.socket, data: bytes) -> None:
        sock.sendall(data)
        with self.lock:
            self.sent += len(data)

    def _flood(self, sock: socket.socket, piece: bytes) -> None:
        """`piece` again and again, while the peer takes it."""
        sock.settimeout(0.1)
        while not self._stop.is_set() and self.sent < self.total:
            view = memoryview(piece)
            while view and not self._stop.is_set():
                try:
                    n = sock.send(view)
                except (TimeoutError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                    continue
                view = view[n:]
                with self.lock:
                    self.sent += n

    def _drip(self, sock: socket.socket, data: bytes, interval: float) -> None:
        for i in range(len(data)):
            if self._stop.wait(interval):
                return
            self._send(sock, data[i:i + 1])

    def _drain(self, sock: socket.socket) -> None:
        """Read (and count) what the client sends until it closes."""
        while not self._stop.is_set():
            try:
                data = sock.recv(1 << 16)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            with self.lock:
                self.body_bytes += len(data)

    @classmethod
    def bomb(cls, coding: str, mib: int) -> bytes:
        """`mib` MiB of b"0", coded (gzip: ~1000x; br and zstd: far more)."""
        key = (coding, mib)
        if key not in cls._bombs:
            raw = b"0" * (mib << 20)
            cls._bombs[key] = {"gzip": lambda: gzip.compress(raw, 9), "br": lambda: brotli.compress(raw),
                               "zstd": lambda: zstd_compress(raw)}[coding]()
        return cls._bombs[key]

    def clear(self) -> None:
        with self.lock:
            self.heads.clear()
            self.handshakes = {"ok": 0, "failed": 0}
            self.body_bytes = self.sent = 0
            self.planted = ""

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        with self.lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def _read_head(sock: socket.socket, buffer: bytes) -> tuple[bytes | None, bytes]:
    """A request's head (and the bytes after it), None if the peer closed or sent garbage."""
    while b"\r\n\r\n" not in buffer:
        if len(buffer) > 65536:
            return None, b""
        try:
            data = sock.recv(65536)
        except OSError:
            return None, b""
        if not data:
            return None, b""
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def _header(head: bytes, name: bytes) -> str:
    """The value of a request head's header `name` (lower case), "" if none."""
    for line in head.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return ""


def _skip_body(sock: socket.socket, head: bytes, buffer: bytes) -> bytes:
    """Read past a request's Content-Length body; what follows it."""
    length = int(_header(head, b"content-length") or 0)
    while len(buffer) < length:
        data = sock.recv(65536)
        if not data:
            break
        buffer += data
    return buffer[length:]


def _reset(conn: socket.socket) -> None:
    """Close with an RST, not a FIN."""
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


def _broken(mode: str, kind: str, secret: bytes) -> bytes:
    """A response that breaks HTTP/1.1's grammar or framing in one way."""
    ok = b"Content-Length: 2\r\nConnection: close\r\n\r\nok"
    if mode == "bad-status":
        line = {"garbage": b"HTTP/1.1 2x0 OK", "version": b"HTTP/3 200 OK", "empty": b"",
                "icy": b"ICY 200 OK", "leak": b"HTTP/1.1 2" + secret + b" OK"}[kind]
        return line + b"\r\n" + ok
    if mode == "bad-header":
        line = {"nocolon": b"X-No-Colon", "nul": b"X-Nul: a\x00b", "space": b"X-Space : b",
                "fold": b"X-Fold: a\r\n folded", "leak": b"X-" + secret + b" broken"}[kind]
        return b"HTTP/1.1 200 OK\r\n" + line + b"\r\n" + ok
    if mode == "framing":
        return b"HTTP/1.1 200 OK\r\n" + {
            "cl-cl": b"Content-Length: 2\r\nContent-Length: 5\r\n\r\nok",
            "cl-te": b"Content-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "te-unknown": b"Transfer-Encoding: gzip\r\n\r\nok",
            "cl-negative": b"Content-Length: -1\r\n\r\nok",
            "cl-short": b"Content-Length: 100\r\n\r\nok"}[kind]
    size = {"hex": b"zz", "negative": b"-1", "huge": b"f" * 24, "leak": secret, "footer": b"2"}[kind]
    tail = b"okXX0\r\n\r\n" if kind == "footer" else b"\r\nok\r\n0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + size + b"\r\n" + tail


@dataclass
class Upstreams:
    http: Server
    https: Server
    wrong_cert: Server
    http6: Server
    raw: RawEcho
    ca_path: Path
    names: list[str]
    servers: list[Any] = field(default_factory=list)
    ca: trustme.CA | None = None  # the CA the host trusts (DECLAW_WASM_CA_BUNDLE): more certificates

    def records(self) -> list[Record]:
        found: list[Record] = []
        for server in (self.http, self.https, self.wrong_cert, self.http6):
            with server.lock:
                found += server.records
        return found

    def clear(self) -> None:
        for server in (self.http, self.https, self.wrong_cert, self.http6):
            with server.lock:
                server.records.clear()
                server.planted = ""

    def plant(self, server: Server, value: str) -> None:
        """Make `server` know a secret value (as one that received it elsewhere would)."""
        server.planted = value

    def resolve_env(self) -> str:
        """DECLAW_WASM_RESOLVE mapping every test name to these servers."""
        entries = []
        for name in self.names:
            entries.append(f"{name}:80:127.0.0.1:{self.http.port}")
            entries.append(f"{name}:443:127.0.0.1:{self.https.port}")
        entries.append(f"wrongcert.example:443:127.0.0.1:{self.wrong_cert.port}")
        entries.append(f"v6.example:80:[::1]:{self.http6.port}")
        entries.append(f"raw.example:7000:127.0.0.1:{self.raw.server_address[1]}")
        return " ".join(entries)

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()


def start(names: list[str], folder: Path) -> Upstreams:
    ca = trustme.CA()
    cert = ca.issue_cert(*names, "127.0.0.1")
    wrong = ca.issue_cert("unrelated.test")
    plain = Server(("127.0.0.1", 0), "http")
    tls = Server(("127.0.0.1", 0), "https")
    wrong_tls = Server(("127.0.0.1", 0), "wrong-cert")
    for server, issued in ((tls, cert), (wrong_tls, wrong)):
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        issued.configure_cert(context)
        context.set_alpn_protocols(["http/1.1"])
        server.tls = context
    v6 = Server(("::1", 0), "http6", socket.AF_INET6)
    raw = RawEcho()
    servers: list[Any] = [plain, tls, wrong_tls, v6, raw]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ca_path = folder / "test-ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    return Upstreams(plain, tls, wrong_tls, v6, raw, ca_path, list(names), servers, ca)
