"""The HTTP/1.x relay: every request the guest sends is parsed, checked and re-serialised.

Two h11 state machines per connection: one plays the server to the guest, one the client to
the upstream. Bytes never go through as they came: each request is parsed (h11, plus a check
of the raw head for the shapes h11 would quietly normalise: duplicate Content-Length, both
Content-Length and Transfer-Encoding, duplicate Host, obsolete line folding, bare LF), checked
(no CONNECT, no Upgrade, origin-form target, `Host` equal to the name the connection is bound
to), then written anew for the upstream. Pipelined requests wait their turn (h11 pauses), so no
request can hide inside another's body. Responses are parsed the same way and written anew for
the guest.

On the way: secret injection (secrets.py) into the guest's request after the content guard
(declaw_wasm/_guard/contract.py) saw it; with secrets on the sandbox, every response head (1xx ones too: reason, header
names and values) and every decoded body scrubbed of secret values, a body the host cannot
decode refused (502, or the connection aborted if its head went out already: a coded body's head
waits for its first decoded bytes, so that a body that does not decode at all gets the 502),
trailers dropped (always), upgrades refused (always); guard filters
on bodies (a filter may hold the response's head back until it has scanned the body, answer
with its own block response, or cut the response: the guest's connection is then aborted
mid-body, never ended cleanly); one audit event per exchange, with the guards' counts. A
refused request gets a short plain-text response (400 malformed or smuggling, 405 CONNECT, 421
wrong Host, 431 head too large, 413 body too large for a guard, 501 Upgrade, 502 bad upstream,
503 with Retry-After when the sandbox's or the process's budget of kept bytes is full) and the
connection closes.

What the relay keeps beyond its windows is counted in `ctx.hold` (budget.py) as it grows: a
body's decoders (decoded with _codings.py's bounded decoders, whose `Meter` reserves
each window before the decoder allocates it), a request body a guard holds whole, an answer a
guard holds back; it is all given back when the exchange ends or is stopped.

Why h11: a small, strict, well-kept HTTP/1.1 state machine with no I/O of its own (httpcore and
uvicorn's h11 mode use it), so the relay decides every byte that moves.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import h11

from .._codings import (DECODER_BYTES, BodyDecoder, EncodingError, Meter, decodable, parse_codings,
                        undecodable)
from .._guard.contract import (COUNT_NAMES, BlockResponse, ContentGuard, GuardCut, Headers, IdentityGuard,
                               ResponseFilter)
from .audit import AuditEvent, now
from .budget import Hold, HoldRefused
from .policy import PolicyError, normalize_name, parse_address
from .secrets import Scrubber, SecretBook

DECODE_CHUNK = 64 << 10
# informational (1xx) heads relayed for one request: past it, a 502 (a server sending them without
# end would hold a client that skips them, such as httpx, however short its timeouts; CPython's
# http.client stops at 100 too, Go's at 5)
MAX_INFORMATIONAL = 100
# where h11 starts quoting the bytes it found wrong ("illegal status line: bytearray(b'...')")
_QUOTED = re.compile(r"""[:\s]*(?:bytearray\(b|\bb)['"]""")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
REASONS = {400: "Bad Request", 403: "Forbidden", 405: "Method Not Allowed", 413: "Content Too Large",
           421: "Misdirected Request", 431: "Request Header Fields Too Large",
           501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass
class RelayContext:
    """What the relay knows about its connection."""

    name: str  # the name the connection is bound to (or its literal address)
    port: int  # the port the guest connected to
    address: str
    tls: bool  # TLS the host verified
    rule: str  # the policy entry that allowed the connection
    secrets: SecretBook
    guard: ContentGuard
    record: Callable[[AuditEvent], None]
    header_bytes: int = 64 << 10
    guard_body_bytes: int = 16 << 20
    out_room: int = 4 << 20  # to_guest is not grown past this by decoding
    rebind: Callable[[str], bool] = lambda _name: False  # may a plaintext connection take this name?
    hold: Hold = field(default_factory=Hold)  # what the connection keeps beyond its windows


@dataclass
class _Exchange:
    method: str
    url: str
    started: float
    injected: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    status: int = 0
    informational: int = 0  # 1xx heads relayed
    bytes_out: int = 0
    bytes_in: int = 0
    body: Optional[bytearray] = None  # buffered for the guard
    audited: bool = False
    headers: Headers = field(default_factory=list)
    target: str = ""
    note: str = ""
    guard: str = ""  # the guard that blocked or cut
    notes: list[str] = field(default_factory=list)  # the guards' notes

    def add(self, counts: dict[str, int], notes: list[str]) -> None:
        for key in COUNT_NAMES:
            self.counts[key] = self.counts.get(key, 0) + int(counts.get(key, 0))
        self.notes += notes


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_head(head: bytes) -> Optional[str]:
    """What is wrong with a request's raw head that h11 would accept (None: nothing)."""
    raw = head.lstrip(b"\r\n")
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        return "header lines must end with CRLF" if _HEAD_END.search(raw) else None
    part = raw[:end]
    if b"\n" in part.replace(b"\r\n", b""):
        return "header lines must end with CRLF"
    seen: dict[bytes, int] = {}
    for line in part.split(b"\r\n")[1:]:
        if line[:1] in (b" ", b"\t"):
            return "obsolete line folding in a header"
        if b"\r" in line:
            return "a bare CR in a header"
        name = line.split(b":", 1)[0].lower()
        seen[name] = seen.get(name, 0) + 1
    if seen.get(b"content-length", 0) > 1:
        return "duplicate Content-Length headers"
    if seen.get(b"transfer-encoding", 0) > 1:
        return "duplicate Transfer-Encoding headers"
    if seen.get(b"content-length") and seen.get(b"transfer-encoding"):
        return "both Content-Length and Transfer-Encoding"
    if seen.get(b"host", 0) > 1:
        return "duplicate Host headers"
    return None


def _text(headers: list[tuple[bytes, bytes]]) -> Headers:
    return [(n.decode("latin-1"), v.decode("latin-1")) for n, v in headers]


def _get(headers: Headers, name: str) -> list[str]:
    return [v for k, v in headers if k.lower() == name]


def _without(headers: Headers, *names: str) -> Headers:
    return [(k, v) for k, v in headers if k.lower() not in names]


class HttpRelay:
    """One connection's HTTP/1.x traffic: `feed_guest` / `feed_upstream` take bytes (b"" = that
    side closed); `to_upstream` / `to_guest` hold bytes to send; `guest_done` / `upstream_done`
    say that side gets no more (close it once its buffer is sent)."""

    def __init__(self, ctx: RelayContext) -> None:
        self.ctx = ctx
        self.guest = h11.Connection(h11.SERVER, max_incomplete_event_size=ctx.header_bytes)
        self.upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=ctx.header_bytes)
        self.to_upstream = bytearray()
        self.to_guest = bytearray()
        self.guest_done = False
        self.upstream_done = False
        self.exchanges = 0
        self._head = bytearray()
        self._collecting = True
        self._ex: Optional[_Exchange] = None
        self._sent_request = False
        self._response_started = False
        self._decoder: Optional[BodyDecoder] = None
        self._scrubber: Optional[Scrubber] = None
        self._filter: Optional[ResponseFilter] = None
        self._held: Optional[tuple[int, Headers, bytes]] = None  # a head the filter holds back
        self._await_body = False  # the head waits for the first decoded bytes (or the end)
        self._starved = False  # the decoder made no progress: it needs more of the body
        self._coding = ""  # the response's Content-Encoding, for messages
        self._end_pending = False
        self._stopped = False
        self._upstream_eof = False
        self._guard_active = not isinstance(ctx.guard, IdentityGuard)

    # -- from the guest ------------------------------------------------------------------------
    def backlog(self) -> int:
        """Guest bytes taken but not yet parsed (pipelined requests wait here): the connection
        counts them against its room, so a guest cannot make the host hold more."""
        return _unparsed(self.guest)

    def held_in(self) -> int:
        """Upstream bytes held: for the guest, not yet parsed (an answer that came before the
        guest's request was done waits here, h11 PAUSED), not yet decoded, and the scrubber's
        held-back tail: the connection's window towards the guest bounds them all, in every
        parser state. (Decoder windows and what a guard holds whole are kept apart, in
        `ctx.hold`: they cannot wait for the guest to read.)"""
        held = len(self.to_guest) + _unparsed(self.upstream)
        if self._decoder is not None:
            held += self._decoder.buffered
        if self._scrubber is not None:
            held += len(self._scrubber.tail)
        return held

    def set_room(self, room: int) -> None:
        """The window towards the guest now (decoding a body stops there too)."""
        self.ctx.out_room = room

    def feed_guest(self, data: bytes) -> None:
        if self._stopped:
            return
        if self._collecting and data:
            self._head += data
            if len(self._head) > self.ctx.header_bytes + (1 << 20):
                del self._head[self.ctx.header_bytes + 1:]
        try:
            self.guest.receive_data(data)
        except h11.RemoteProtocolError:
            pass  # reported by next_event
        self._process_guest()

    def _process_guest(self) -> None:
        while not self._stopped:
            try:
                event = self.guest.next_event()
            except h11.RemoteProtocolError as exc:
                too_big = "too long" in str(exc).lower() or "too large" in str(exc).lower()
                self._refuse(431 if too_big else 400, f"malformed request: {exc}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            try:
                if isinstance(event, h11.Request):
                    self._on_request(event)
                elif isinstance(event, h11.Data):
                    self._on_request_body(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._on_request_end()
                elif isinstance(event, h11.ConnectionClosed):
                    self._on_guest_closed()
                    return
            except Refused as exc:
                self._refuse(exc.status, str(exc))
                return
            except h11.LocalProtocolError as exc:
                self._refuse(400, f"cannot forward this request: {exc}")
                return

    def _on_request(self, event: h11.Request) -> None:
        head = bytes(self._head)
        self._collecting, self._head = False, bytearray()
        size = sum(len(n) + len(v) + 4 for n, v in event.headers.raw_items()) + len(event.target)
        if size > self.ctx.header_bytes:
            raise Refused(431, f"request head larger than {self.ctx.header_bytes} bytes "
                          "(Limits.net_header_bytes)")
        problem = check_head(head)
        if problem:
            raise Refused(400, f"request refused: {problem}")
        method = event.method.decode("ascii", "replace")
        target = event.target.decode("ascii", "replace")
        headers = _text(list(event.headers.raw_items()))
        scheme = "https" if self.ctx.tls else "http"
        self._ex = _Exchange(method, f"{scheme}://{self.ctx.name}{target[:2000]}", time.monotonic(), [])
        if event.http_version not in (b"1.0", b"1.1"):
            raise Refused(400, f"HTTP/{event.http_version.decode('ascii', 'replace')} is not "
                          "supported (HTTP/1.0 and 1.1 only)")
        if event.http_version == b"1.1" and not _get(headers, "host"):
            raise Refused(400, "an HTTP/1.1 request needs a Host header")
        if method == "CONNECT":
            raise Refused(405, "CONNECT (tunnelling) is not allowed through the sandbox's egress")
        if _get(headers, "upgrade") or any("upgrade" in v.lower() for v in _get(headers, "connection")):
            raise Refused(501, "protocol upgrades (WebSocket, h2c) are not supported by the "
                          "sandbox's egress")
        if not (target.startswith("/") or (method == "OPTIONS" and target == "*")):
            raise Refused(400, f"request target {target[:200]!r} refused: only origin-form "
                          "targets (/path) are accepted (no proxy-style absolute URLs)")
        authority = self._check_host(headers)
        if not _get(headers, "host"):
            headers.insert(0, ("Host", authority))
        ex = self._ex
        ex.url = f"{scheme}://{authority}{target}"
        ex.target = target
        if self.ctx.secrets or self._guard_active:
            headers = self._accept_encoding(headers)
        if self._guard_active and self.ctx.guard.wants_request_body(self.ctx.name, method, ex.url, headers):
            ex.body, ex.headers = bytearray(), _without(headers, "expect")
            if any(v.strip().lower() == "100-continue" for v in _get(headers, "expect")):
                # the body must reach the guard before anything goes upstream: we say go on
                self.to_guest += self.guest.send(h11.InformationalResponse(status_code=100, headers=[],
                                                                           reason=b"Continue"))
            return
        self._send_request(method, target, headers)

    def _check_host(self, headers: Headers) -> str:
        """The request's authority, checked against the connection's name and port."""
        values = _get(headers, "host")
        default = 443 if self.ctx.tls else 80
        bound = self.ctx.name
        if not values:
            literal = parse_address(bound)
            shown = f"[{bound}]" if literal is not None and literal.version == 6 else bound
            return shown if self.ctx.port == default else f"{shown}:{self.ctx.port}"
        value = values[0].strip()
        match = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]*)(?::(\d{1,5}))?", value)
        if not match:
            raise Refused(400, f"bad Host header {value[:200]!r}")
        host, port = match.group(1), match.group(2)
        if port is not None and int(port) != self.ctx.port:
            raise Refused(421, f"Host {value!r} names port {port}, but this connection goes to port "
                          f"{self.ctx.port}")
        if not self._same_host(host):
            if self.exchanges == 0 and not self.ctx.tls and self.ctx.rebind(host.strip("[]")):
                return value
            raise Refused(421, f"Host {value!r} is not {bound!r}, the name this connection was "
                          "opened for (each connection serves only the host it was opened for)")
        return value

    def _same_host(self, host: str) -> bool:
        bound = self.ctx.name
        try:
            ip = parse_address(host)
            bound_ip = parse_address(bound)
        except PolicyError:
            return False
        if ip is not None or bound_ip is not None:
            return ip is not None and bound_ip is not None and ip == bound_ip
        try:
            return normalize_name(host) == bound
        except PolicyError:
            return False

    def _accept_encoding(self, headers: Headers) -> Headers:
        """Only codings the host can undo, so that bodies can be scrubbed and filtered."""
        values = _get(headers, "accept-encoding")
        if not values:
            return headers
        can = decodable()
        kept = []
        for item in ",".join(values).split(","):
            coding = item.split(";", 1)[0].strip().lower()
            if coding in can or coding == "identity":
                kept.append(item.strip())
        return _without(headers, "accept-encoding") + [("Accept-Encoding", ", ".join(kept) or "identity")]

    def _send_request(self, method: str, target: str, headers: Headers, body: Optional[bytes] = None) -> None:
        ex = self._ex
        assert ex is not None
        target, headers, ex.injected = self.ctx.secrets.inject(self.ctx.name, self.ctx.tls, target, headers)
        if body is not None:
            headers = _without(headers, "content-length", "transfer-encoding")
            if body or method not in ("GET", "HEAD", "DELETE", "OPTIONS"):
                headers.append(("Content-Length", str(len(body))))
        self.to_upstream += self.upstream.send(h11.Request(method=method, target=target, headers=headers))
        self._sent_request = True
        if body is not None:
            if body:
                self.to_upstream += self.upstream.send(h11.Data(data=body))
            ex.bytes_out += len(body)
            self.to_upstream += self.upstream.send(h11.EndOfMessage())

    def _on_request_body(self, data: bytes) -> None:
        ex = self._ex
        assert ex is not None
        if ex.body is not None:
            if len(ex.body) + len(data) > self.ctx.guard_body_bytes:
                raise Refused(413, f"request body larger than {self.ctx.guard_body_bytes} bytes "
                              "(Limits.net_guard_body_bytes), which the content guard must see whole")
            self._keep("a request body the content guard must see whole", len(ex.body) + len(data))
            ex.body += data
            return
        ex.bytes_out += len(data)
        self.to_upstream += self.upstream.send(h11.Data(data=data))

    def _on_request_end(self) -> None:
        ex = self._ex
        assert ex is not None
        if ex.body is None:
            self.to_upstream += self.upstream.send(h11.EndOfMessage())
        else:
            if parse_codings(",".join(_get(ex.headers, "content-encoding"))):
                # the guard decodes it whole: up to the same bound again, and its decoders
                self._keep("the content guard's decoded copy of a coded request body",
                           self.ctx.guard_body_bytes + DECODER_BYTES)
            body, ex.body = bytes(ex.body), bytearray()  # one copy, not two, while the guard reads
            try:
                outcome = self.ctx.guard.request(self.ctx.name, ex.method, ex.url, ex.headers, body)
            finally:
                self.ctx.hold.clear()
            ex.add(outcome.counts, list(getattr(outcome, "notes", [])))
            if outcome.block is not None:
                self._block(outcome.block)
                return
            self._send_request(ex.method, ex.target, list(outcome.headers), bytes(outcome.body))
        self._maybe_next_cycle()

    def _keep(self, what: str, n: int) -> None:
        """Keep `n` bytes for a request body (the guest gets a 503 when its sandbox or the
        process cannot)."""
        try:
            self.ctx.hold.set(what, n)
        except HoldRefused as exc:
            if self._ex is not None:
                self._ex.guard = "budget"
            raise Refused(503, f"the request cannot be held for the content guard now: {exc}; retry "
                          "once other requests are done") from None

    def _on_guest_closed(self) -> None:
        """The guest shut its sending side: the upstream gets no more requests."""
        if self.upstream.our_state in (h11.IDLE, h11.DONE, h11.MUST_CLOSE):
            self.upstream_done = True
        if self._ex is None or self._response_done():
            self.guest_done = True

    # -- from the upstream -------------------------------------------------------------------------
    def can_take_upstream(self) -> bool:
        decoder = self._decoder
        return not self._stopped and len(self.to_guest) < self.ctx.out_room and \
            not (decoder is not None and decoder.pending and not self._starved)

    def feed_upstream(self, data: bytes) -> None:
        if self._stopped:
            return
        if not data:
            self._upstream_eof = True
        try:
            self.upstream.receive_data(data)
        except h11.RemoteProtocolError:
            pass
        self._process_upstream()

    def head_unfinished(self) -> bool:
        """Part of a response head came, not all of it: nothing the guest can see (the bytes of a
        head a server drips do not keep the connection's idle timer from running)."""
        return self.upstream.their_state is h11.SEND_RESPONSE and _unparsed(self.upstream) > 0

    def upstream_reset(self) -> None:
        """The upstream reset the connection (an RST, or TLS ended without close_notify). An
        answer it cut in the middle of its body is cut for the guest too (a 502 if its head is
        still held): never ended cleanly, as the end of the stream would end a body that runs to
        the connection's close. Otherwise it counts as the end of the stream."""
        if not self._stopped and self.upstream.their_state is h11.SEND_BODY and not _unparsed(self.upstream):
            self._bad_upstream("the server reset the connection in the middle of its answer")
            return
        self.feed_upstream(b"")

    def resume(self) -> None:
        """Go on with what was held back: decoding a body (for room), or the upstream's unparsed
        bytes (the host reads no more while they fill its window: once the guest's request is
        done, they are the next answer, or a protocol error)."""
        if self._stopped:
            return
        if self._decoding() or _unparsed(self.upstream):
            self._process_upstream()

    def _decoding(self) -> bool:
        """A body is being decoded and can go on without more of it (or its end is pending)."""
        decoder = self._decoder
        return decoder is not None and ((decoder.pending and not self._starved) or self._end_pending)

    def _process_upstream(self) -> None:
        try:
            self._upstream_events()
        except GuardCut as exc:
            self._cut(exc)

    def _upstream_events(self) -> None:
        while not self._stopped:
            if self._decoding():
                self._drain()
                if self._decoding():
                    return  # no room: wait for the guest to read
            try:
                event = self.upstream.next_event()
            except h11.RemoteProtocolError as exc:
                self._bad_upstream(f"the server sent a malformed response: {_fault(exc)}")
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            try:
                if isinstance(event, h11.InformationalResponse):
                    if not self._on_informational(event):
                        return
                elif isinstance(event, h11.Response):
                    self._on_response(event)
                elif isinstance(event, h11.Data):
                    self._on_response_body(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    self._end_pending = True
                    self._finish_response()
                elif isinstance(event, h11.ConnectionClosed):
                    if self._ex is not None:
                        self._ex.note = "the server closed the connection before answering"
                        self._audit_exchange()
                    self._stop()  # the guest sees the end of the stream, as from the server
                    return
            except h11.LocalProtocolError as exc:
                self._bad_upstream(f"cannot forward the server's response: {_fault(exc)}")
                return

    def _on_informational(self, event: h11.InformationalResponse) -> bool:
        """A 1xx head for the guest; False if it ended the exchange (an upgrade, too many)."""
        if event.status_code == 101:
            self._bad_upstream("the server switched protocols")
            return False
        if self._ex is not None:
            self._ex.informational += 1
            if self._ex.informational > MAX_INFORMATIONAL:
                self._bad_upstream(f"the server sent more than {MAX_INFORMATIONAL} informational "
                                   "(1xx) responses to one request")
                return False
        self.to_guest += self.guest.send(self._informational(event))
        return True

    def _on_response(self, event: h11.Response) -> None:
        ex = self._ex
        if ex is None:
            raise h11.LocalProtocolError("a response without a request")
        ex.status = event.status_code
        if sum(len(n) + len(v) + 4 for n, v in event.headers.raw_items()) > self.ctx.header_bytes:
            raise h11.LocalProtocolError(f"response head larger than {self.ctx.header_bytes} bytes "
                                         "(Limits.net_header_bytes)")
        raw, reason = self._scrubbed(list(event.headers.raw_items()), event.reason)
        headers = _text(raw)
        secrets = self.ctx.secrets
        has_body = ex.method != "HEAD" and event.status_code not in (204, 304)
        guard_wants = self._guard_active and has_body and self.ctx.guard.wants_response_body(
            self.ctx.name, ex.method, ex.url, event.status_code, headers)
        if has_body and (secrets or guard_wants):
            encodings = ",".join(_get(headers, "content-encoding")).split(",")
            self._coding = ", ".join(e.strip() for e in encodings if e.strip())[:200]
            # a body the host cannot decode is refused if it holds a byte, with secrets on: passed
            # on raw, it would pass their values on too
            decoder = BodyDecoder(encodings, meter=Meter(reserve=self._keep_decoders),
                                  refuse_on_data=True) \
                if secrets or undecodable(encodings) is None else None
            if decoder is not None:
                headers = _without(headers, "content-encoding", "content-length", "transfer-encoding")
                if secrets:
                    self._scrubber = secrets.scrubber()
                # a coded body's head waits for its first decoded bytes: a body that does not
                # decode (corrupt, or over a bound) then gets a clear error, not a cut answer
                self._await_body = bool(parse_codings(",".join(encodings)))
            elif guard_wants:  # the guard gets the raw bytes and their coding, and decides
                decoder = BodyDecoder(None)
                headers = _without(headers, "content-length", "transfer-encoding")
            self._decoder = decoder
            if guard_wants:
                self._filter = self.ctx.guard.response(self.ctx.name, ex.method, ex.url,
                                                       event.status_code, headers)
        self._held = (event.status_code, headers, reason)
        self._send_head()
        if self._filter is not None and getattr(self._filter, "done", False):
            self._pass_on(b"")  # the guard answered before any body

    def _scrubbed(self, raw: list[tuple[bytes, bytes]], reason: bytes) -> tuple[list[tuple[bytes, bytes]], bytes]:
        """A response head's headers and reason with the sandbox's secret values replaced by
        their placeholders; a header whose name holds a value is dropped (no real header is
        named so, and the placeholder may not be a valid name)."""
        secrets = self.ctx.secrets
        if not secrets:
            return raw, reason
        kept = [(n, secrets.scrub_bytes(v)) for n, v in raw if not secrets.holds_value(n)]
        return kept, secrets.scrub_bytes(reason)

    def _informational(self, event: h11.InformationalResponse) -> h11.InformationalResponse:
        """A 1xx head from the upstream, scrubbed like a final one, for the guest."""
        raw, reason = self._scrubbed(list(event.headers.raw_items()), event.reason)
        return h11.InformationalResponse(status_code=event.status_code, headers=raw, reason=reason)

    def _send_head(self, force: bool = False) -> None:
        """The response's head to the guest, once the filter (if any) lets it go, and (for a
        coded body scrubbed of secrets) once the body's first bytes have decoded."""
        if self._held is None or (self._await_body and not force):
            return
        status, headers, reason = self._held
        f = self._filter
        if f is not None:
            if not (force or getattr(f, "head_ready", True)):
                return
            status = int(getattr(f, "status", status))
            headers = list(f.headers)
            if status != self._held[0]:
                reason = REASONS.get(status, "Error").encode()
        self._held = None
        self._response_started = True
        if self._ex is not None:
            self._ex.status = status
        wire = [(k.encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers]
        self.to_guest += self.guest.send(h11.Response(status_code=status, headers=wire, reason=reason))

    def _on_response_body(self, data: bytes) -> None:
        ex = self._ex
        assert ex is not None
        ex.bytes_in += len(data)
        if self._decoder is None:
            self.to_guest += self.guest.send(h11.Data(data=data))
            return
        if self._filter is not None and getattr(self._filter, "done", False):
            return  # the guard answered already: the rest is dropped
        self._decoder.feed(data)
        self._starved = False
        self._drain()

    def _keep_decoders(self, total: int) -> None:
        """The body's decoders are about to hold `total` bytes (raises: no room)."""
        self.ctx.hold.set("decoder windows", total)

    def _drain(self) -> None:
        """Decode, scrub and filter what is pending, while the guest's buffer has room."""
        decoder = self._decoder
        assert decoder is not None
        while decoder.pending and len(self.to_guest) < self.ctx.out_room and not self._stopped:
            before = decoder.buffered
            try:
                chunk = decoder.take(DECODE_CHUNK)
            except HoldRefused as exc:
                raise GuardCut(f"the server's response cannot be decoded now: {exc}; retry once "
                               "other answers are done", "budget", 503) from None
            except Exception as exc:  # a corrupt body (CorruptBody), or over a bound
                raise self._undecodable(exc) from None
            if not chunk:
                if decoder.pending and decoder.buffered < before:
                    continue  # an inner coding took the bytes: go on
                self._starved = decoder.pending  # it needs more input (its window bounds that)
                break
            self._pass_on(chunk)
        if self._end_pending and (not decoder.pending or self._starved) and not self._stopped:
            self._finish_response()

    def _undecodable(self, exc: Exception) -> GuardCut:
        why = str(exc) if "Content-Encoding" in str(exc) else f"Content-Encoding {self._coding!r}: {exc}"
        if self.ctx.secrets:
            why += ("; with secrets on this sandbox, a body the host cannot check for their values "
                    "is not passed on")
        return GuardCut(f"the server's response body could not be decoded ({why})", "content-encoding")

    def _pass_on(self, chunk: bytes) -> None:
        if chunk and self._await_body:  # the body decodes: its head may go (unless a filter holds it)
            self._await_body = False
            self._send_head()
        if self._scrubber is not None:
            chunk = self._scrubber.feed(chunk)
        f = self._filter
        if f is not None and (chunk or getattr(f, "done", False)):
            chunk = f.feed(chunk)
            self._keep_filtered(f)
            self._send_head(force=bool(chunk))
        elif chunk:
            self._send_head(force=True)  # a head awaiting the body's first decoded bytes
        if chunk:
            self.to_guest += self.guest.send(h11.Data(data=chunk))
        if f is not None and getattr(f, "done", False):
            self._finish_early()

    def _keep_filtered(self, f: ResponseFilter) -> None:
        """Count what the filter holds back (an answer held for an injection scan)."""
        try:
            self.ctx.hold.set("an answer the content guard holds back", int(getattr(f, "held", 0)))
        except HoldRefused as exc:
            raise GuardCut(f"the server's response cannot be held back for the content guard now: "
                           f"{exc}; retry once other answers are done", "budget", 503) from None

    def _finish_early(self) -> None:
        """The guard's own answer went out whole: end the guest's message, drop the upstream's."""
        self._send_head(force=True)
        self.to_guest += self.guest.send(h11.EndOfMessage())
        self._audit_exchange("denied")
        self._stop()

    def _finish_response(self) -> None:
        if self._decoder is not None:
            if self._decoder.pending and not self._starved:
                return  # _drain finishes it
            try:  # a body cut inside its coding is not a whole one (nor its scrubbed tail)
                self._decoder.end()
            except EncodingError as exc:
                raise self._undecodable(exc) from None
            tail = self._scrubber.end() if self._scrubber is not None else b""
            if self._filter is not None:
                tail = (self._filter.feed(tail) if tail else b"") + self._filter.end()
            self._send_head(force=True)  # before the tail: a short body may be all tail
            if tail:
                self.to_guest += self.guest.send(h11.Data(data=tail))
        self._end_pending = False
        self._send_head(force=True)
        self.to_guest += self.guest.send(h11.EndOfMessage())
        blocked = self._filter is not None and bool(getattr(self._filter, "blocked", ""))
        self._audit_exchange("denied" if blocked else "allowed")
        self._decoder = self._scrubber = self._filter = None
        self._await_body = self._starved = False
        self.ctx.hold.clear()  # the decoders and what the guard held are gone
        self._maybe_next_cycle()

    def _response_done(self) -> bool:
        return self.guest.our_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED)

    def _maybe_next_cycle(self) -> None:
        states = (self.guest.our_state, self.guest.their_state, self.upstream.our_state,
                  self.upstream.their_state)
        if all(s is h11.DONE for s in states):
            self.guest.start_next_cycle()
            self.upstream.start_next_cycle()
            self._ex, self._sent_request, self._response_started = None, False, False
            self._held = None
            self._collecting = True
            self._head = bytearray(self.guest.trailing_data[0])
            self._process_guest()
        elif self._response_done() and any(s in (h11.MUST_CLOSE, h11.CLOSED) for s in states) \
                and self.guest.their_state is not h11.SEND_BODY:
            self.guest_done = True
            self.upstream_done = True

    # -- endings -----------------------------------------------------------------------------------
    def _audit_exchange(self, decision: str = "allowed", reason: str = "", status: int = 0) -> None:
        ex = self._ex
        if ex is None or ex.audited:
            return
        ex.audited = True
        self.exchanges += 1
        f = self._filter
        if f is not None:
            ex.add(f.counts, list(getattr(f, "notes", [])))
            ex.guard = ex.guard or getattr(f, "blocked", "")
            if ex.guard and decision == "allowed":
                decision = "denied"
        if ex.guard and not reason and not ex.note:
            reason = f"blocked by the {ex.guard} guard"
        event = AuditEvent(timestamp=now(), method=ex.method, url=ex.url or f"(refused) {ex.method}",
                           status_code=status or ex.status, kind="request", decision=decision,
                           rule=self.ctx.rule if decision == "allowed" else
                           (f"guard:{ex.guard}" if ex.guard else "http"), reason=reason or ex.note,
                           host=self.ctx.name, address=self.ctx.address, port=self.ctx.port,
                           tls=self.ctx.tls, bytes_out=ex.bytes_out, bytes_in=ex.bytes_in,
                           duration_ms=round((time.monotonic() - ex.started) * 1000, 3),
                           secrets_injected=ex.injected,
                           guard=ex.guard, guard_notes=ex.notes,
                           **{key: ex.counts.get(key, 0) for key in COUNT_NAMES})
        self.ctx.record(event)

    def _raw_response(self, status: int, body: bytes, headers: Headers) -> None:
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}"]
        lines += [f"{k}: {v}" for k, v in _without(headers, "content-length", "connection",
                                                   "transfer-encoding")]
        lines += [f"Content-Length: {len(body)}", "Connection: close"]
        self.to_guest += ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace") + body

    def _refuse(self, status: int, message: str) -> None:
        """Answer the guest with an error of our own and close."""
        if self._ex is None:
            self._ex = _Exchange("?", "", time.monotonic(), [])
        if not self._response_started:
            body = f"declaw-wasm egress: {message}\n".encode("utf-8", "replace")
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("X-Declaw-Egress", "refused")]
            if status == 503:  # the host's state, not the request's: it passes
                headers.append(("Retry-After", "1"))
            self._raw_response(status, body, headers)
        self._audit_exchange("denied", message, status)
        self._stop()

    def _block(self, block: BlockResponse) -> None:
        self._raw_response(block.status, block.body, block.headers)
        ex = self._ex
        assert ex is not None
        ex.status = block.status
        ex.guard = getattr(block, "guard", "")
        ex.note = f"blocked by the {ex.guard} guard" if ex.guard else "blocked by the content guard"
        self._audit_exchange("denied", ex.note, block.status)
        self._stop()

    def _cut(self, exc: GuardCut) -> None:
        """A guard (or the decoder) cut the response: a 502 if nothing went to the guest yet,
        else the guest's connection is aborted mid-body."""
        ex = self._ex
        if ex is None or self._stopped:
            return
        ex.guard = exc.guard or "guard"
        message = str(exc) if ex.guard in ("content-encoding", "budget") else \
            f"response cut by the {ex.guard} guard: {exc}"
        if not self._response_started:
            self._held = None
            self._refuse(exc.status, message)
            return
        ex.note = message
        self._audit_exchange("denied", message)
        self._stop()

    def _bad_upstream(self, message: str) -> None:
        if self._upstream_eof and not self._response_started:
            message = "the server closed the connection before answering"  # the guest sees EOF
            if self._ex is not None:
                self._ex.note = message
                self._audit_exchange()
            self._stop()
            return
        if self._ex is not None and not self._response_started:
            self._refuse(502, message)
            return
        if self._ex is not None:
            self._ex.note = message
            self._audit_exchange()
        self._stop()

    def _stop(self) -> None:
        self._stopped = True
        self._ex = None
        self._decoder = None
        self._scrubber = None
        self.ctx.hold.clear()
        self._await_body = False
        self._filter = None
        self._held = None
        self.guest_done = True
        self.upstream_done = True
        self.to_upstream.clear()

    def close_audit(self) -> None:
        """The connection is closing: record an exchange still in flight."""
        if self._ex is not None and not self._stopped:
            self._ex.note = self._ex.note or "connection closed before the exchange finished"
            self._audit_exchange()
            self._ex = None


def _fault(exc: Exception) -> str:
    """What h11 found wrong in the upstream's bytes, without quoting them: they may hold anything
    the server wants the guest to read (a secret's value, past the scrubber, inside the 502)."""
    text = str(exc)
    quoted = _QUOTED.search(text)
    return (text[:quoted.start()] if quoted else text)[:200] or "unreadable"


def _unparsed(conn: h11.Connection) -> int:
    """Bytes h11 holds that it has not turned into events yet."""
    buffer = getattr(conn, "_receive_buffer", None)
    return len(buffer) if buffer is not None else 0


class RawRelay:
    """Bytes as they are, both ways (non-HTTP traffic to destinations an allow_out entry names)."""

    def __init__(self) -> None:
        self.to_upstream = bytearray()
        self.to_guest = bytearray()
        self.guest_done = False
        self.upstream_done = False
        self.out_room = 4 << 20

    def backlog(self) -> int:
        return 0

    def held_in(self) -> int:
        return len(self.to_guest)

    def set_room(self, room: int) -> None:
        self.out_room = room

    def feed_guest(self, data: bytes) -> None:
        if data:
            self.to_upstream += data
        else:
            self.upstream_done = True

    def can_take_upstream(self) -> bool:
        return len(self.to_guest) < self.out_room

    def feed_upstream(self, data: bytes) -> None:
        if data:
            self.to_guest += data
        else:
            self.guest_done = True

    def resume(self) -> None:
        pass

    def head_unfinished(self) -> bool:
        return False

    def close_audit(self) -> None:
        pass


_METHOD_START = re.compile(rb"[A-Z]{1,20}( |$)")


def sniff(data: bytes) -> Optional[str]:
    """"http" if `data` starts like an HTTP/1.x request, "raw" if it cannot, None if too short to
    tell. Anything starting like a method (capital letters then a space) or a blank line counts
    as HTTP: the parser then decides, so nothing HTTP-shaped slips through as raw bytes."""
    if not data:
        return None
    if data[:1] in (b"\r", b"\n"):
        return "http"
    match = _METHOD_START.match(data[:21])
    if match is None:
        return "raw"
    if match.group(1) == b" ":
        return "http"
    return None if len(data) < 21 else "raw"
