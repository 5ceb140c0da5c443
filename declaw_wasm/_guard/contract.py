"""The hook content guards (PII redaction, injection defence, transformations...) plug into.

The egress relay (declaw_wasm/_egress/http.py) calls a `ContentGuard` for every request it
parses, on every connection of the sandbox, plaintext or TLS:

* `wants_request_body(host, method, url, headers)`: if True, the relay buffers the request body
  (up to `Limits.net_guard_body_bytes`; more is refused with 413) and calls
  `request(host, method, url, headers, body)` once it is whole; the outcome either blocks the
  request (a response the guest gets instead; nothing is sent upstream) or gives the headers and
  body to send. If False, neither is called and the body streams through untouched.
* `wants_response_body(host, method, url, status, headers)`: if True, the relay calls
  `response(...)` and feeds the filter the body decoded (Content-Encoding identity, gzip,
  deflate, br undone; the guest then gets it without Content-Encoding, chunked), chunk by chunk:
  `feed(chunk) -> bytes to pass on`, then `end() -> the rest` (a filter may hold back the tail
  of a chunk, e.g. half a redaction token). `filter.headers` replaces the response's headers.
  If False, the body streams through untouched.
* A request body the relay buffers for a guard, and what a filter holds back (`held`), count
  against the sandbox's budget of kept bytes (budget.py): past it the guest gets a 503.
* A filter may hold the response back (`head_ready` False: nothing goes to the guest yet) and
  then answer with another `status` and `headers` (a block answer, which `feed`/`end` return as
  the body; `blocked` names the guard; `done` True once it was returned whole, after which the
  relay drops the rest of the upstream's answer). Raising `GuardCut` from `feed`/`end` aborts the guest's
  connection mid-body (what was released stays released; the message never ends cleanly).
  An encoding the relay cannot undo reaches `response()` with its Content-Encoding header and
  raw bytes: the filter decides (refuse, or pass unfiltered with a note).

Headers are lists of (name, value) str pairs, in order, as sent. Counts (`COUNT_NAMES`) and
notes go into the audit event of the request. `IdentityGuard` is the default: it wants nothing,
so untouched traffic pays nothing; `GuardPipeline` (pipeline.py) is declaw's SecurityPolicy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Protocol, runtime_checkable

Headers = list[tuple[str, str]]
COUNT_NAMES = ("pii_redactions", "pii_detections", "pii_rehydrations", "injection_blocks",
               "injection_detections", "transformations_applied", "invisible_chars")


class GuardCut(Exception):
    """A response must be aborted part-way (a guard found something after part of it was
    released, or the body could not be decoded within its limit)."""

    def __init__(self, message: str, guard: str = "", status: int = 502) -> None:
        super().__init__(message)
        self.guard = guard
        self.status = status  # the guest's answer if nothing went to it yet


@dataclass
class BlockResponse:
    """What the guest receives instead of the upstream's answer when a guard blocks."""

    status: int = 403
    headers: Headers = field(default_factory=lambda: [("content-type", "text/plain; charset=utf-8")])
    body: bytes = b"blocked by the sandbox's content guard\n"
    guard: str = ""  # the guard that blocked


@dataclass
class RequestOutcome:
    """A guard's verdict on one request: `block` it, or send these headers and body."""

    headers: Headers
    body: bytes
    block: Optional[BlockResponse] = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class ResponseFilter(Protocol):
    """Rewrites one response: its headers, its decoded body as it streams.

    Optional attributes, read with these defaults when absent: `status` (the upstream's),
    `head_ready` (True: the head goes to the guest at once), `blocked` ("": the guard whose own
    answer replaced the response), `done` (False: True once that answer was returned), `notes`
    ([]: text for the audit event) and `held` (0: the
    bytes it holds back, which the relay counts against the sandbox's budget of kept bytes)."""

    @property
    def headers(self) -> Headers: ...

    @property
    def counts(self) -> dict[str, int]: ...

    def feed(self, chunk: bytes) -> bytes: ...

    def end(self) -> bytes: ...


@runtime_checkable
class ContentGuard(Protocol):
    def wants_request_body(self, host: str, method: str, url: str, headers: Headers) -> bool: ...

    def request(self, host: str, method: str, url: str, headers: Headers,
                body: bytes) -> RequestOutcome: ...

    def wants_response_body(self, host: str, method: str, url: str, status: int,
                            headers: Headers) -> bool: ...

    def response(self, host: str, method: str, url: str, status: int,
                 headers: Headers) -> ResponseFilter: ...


class IdentityFilter:
    def __init__(self, status: int, headers: Headers) -> None:
        self.status = status
        self.headers = headers
        self.head_ready = True
        self.blocked = ""
        self.counts: dict[str, int] = {}
        self.notes: list[str] = []

    def feed(self, chunk: bytes) -> bytes:
        return chunk

    def end(self) -> bytes:
        return b""


class IdentityGuard:
    """Changes nothing and asks for no body."""

    def wants_request_body(self, host: str, method: str, url: str, headers: Headers) -> bool:
        return False

    def request(self, host: str, method: str, url: str, headers: Headers,
                body: bytes) -> RequestOutcome:
        return RequestOutcome(headers, body)

    def wants_response_body(self, host: str, method: str, url: str, status: int,
                            headers: Headers) -> bool:
        return False

    def response(self, host: str, method: str, url: str, status: int,
                 headers: Headers) -> ResponseFilter:
        return IdentityFilter(status, headers)
