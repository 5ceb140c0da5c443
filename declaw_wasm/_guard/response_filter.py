"""The response side of the guard pipeline: decode, scan, transform, rehydrate, re-frame.

`GuardPipeline.response()` makes one `ResponseFilter` per answer: the relay's `ResponseFilter`
(contract.py), fed the body (decoded by the relay; a coding the relay could not undo arrives
with its Content-Encoding header, and the filter refuses it or passes it unfiltered with a
note).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._codings import (MAX_CODINGS, BodyDecoder, DecodedTooLarge, EncodingError, available_codings,
                        parse_codings)
from .._printable import logger
from ._http import BINARY_PREFIXES, DIGEST_HEADERS, block_answer, header, without
from .bodies import Body, parse_body, parse_content_type
from .contract import GuardCut, Headers
from .rehydrate import ChunkRehydrator, SSERehydrator, rehydrate_counted
from .tokens import TokenMap

if TYPE_CHECKING:
    from .pipeline import GuardPipeline

log = logger("declaw_wasm.egress")


class ResponseFilter:
    """One response on its way to the guest, as the relay's `ResponseFilter`.

    `head_ready` is False only while a blocking injection scan holds the response back; the
    status and headers may then still become a 403 block answer (`blocked` names the guard; the
    answer comes from `feed` or `end`, after which `done` is True and the relay drops the rest).
    A response longer than `GuardLimits.scan_buffer` is scanned in windows of that size (cut at
    a line end): the first window before anything is released (a hit gives the guest a 403),
    later ones before each release (a hit raises `GuardCut`: the relay aborts the guest's
    connection, and the notes say where it was cut). With `log_only`, the response streams
    unchanged and a copy is scanned. The decoded body is bounded by `GuardLimits.max_response_body`
    (the sandbox's `Limits.net_guard_response_bytes`): past it, `GuardCut` ("limits"). Should a
    guard raise anything else (a bug of ours), the answer is cut ("guard") and the error logged.
    """

    def __init__(self, pipe: GuardPipeline, host: str, method: str, url: str, status: int,
                 headers: Headers) -> None:
        self.pipe = pipe
        self.host = host
        self.status = status
        self.headers = headers
        self.head_ready = True
        self.blocked = ""  # the guard whose answer replaced the response
        self.done = False  # that answer was returned whole: the relay ends the message
        self.pii_rehydrations = 0
        self.transformations_applied = 0
        self.injection_blocks = 0
        self.injection_detections = 0
        self.notes: list[str] = []
        self._windows = 0
        # what the guard reads, decoded (identity: as fed) and bounded, past it `GuardCut`
        self._body = BodyDecoder(None, limit=pipe.limits.max_response_body)
        self._proc: ChunkRehydrator | SSERehydrator | None = None
        self._buffer: list[bytes] | None = None  # held back until scanned / transformed
        self._copy: list[bytes] | None = None  # a copy to scan (log_only)
        self._buffered = 0
        self._tail = ""  # the end of the last scanned window, so a phrase across two is caught
        self._block_body = b""  # the block answer, until it is returned
        self._active = pipe.wants_response_body(host, method, url, status, headers)
        if self._active:
            self._setup()

    def _setup(self) -> None:
        pipe = self.pipe
        self._ctype_header = header(self.headers, "content-type")
        ctype, params = parse_content_type(self._ctype_header)
        self._charset = params.get("charset", "utf-8")
        self._sse = ctype == "text/event-stream"
        binary = ctype.startswith(BINARY_PREFIXES)
        self._inject = pipe._injection_on(self.host) and not binary
        block_mode = self._inject and pipe.policy.injection_config.action == "block"
        rehydrate = pipe._rehydrate_on(self.host) and not binary
        self._whole = bool(pipe._in_rules) and not self._sse and not binary
        if not (self._inject or rehydrate or self._whole or (pipe._in_rules and self._sse)):
            self._active = False
            return
        codings = parse_codings(header(self.headers, "content-encoding"))
        unsupported = [c for c in codings if c not in available_codings() and c != "x-gzip"]
        if codings and self.status == 206:  # a range of an encoded body cannot be decoded
            unsupported = [f"a byte range of {', '.join(codings)}"]
        if len(codings) > MAX_CODINGS:
            unsupported = [f"{len(codings)} stacked codings (the host undoes at most {MAX_CODINGS})"]
        if unsupported:
            if self._inject or pipe._in_rules:
                self._block_now(502, "content-encoding",
                                f"cannot scan a response in {', '.join(unsupported)}")
            else:
                self.notes.append(f"pii: not rehydrated (response in {', '.join(unsupported)})")
                self._active = False
            return
        if codings:
            self._body = BodyDecoder(codings, limit=pipe.limits.max_response_body)
        changes = bool(codings or rehydrate or pipe._in_rules)
        drop = {"transfer-encoding"} | DIGEST_HEADERS
        if changes:
            drop |= {"content-encoding", "content-length"}
        self.headers = without(self.headers, drop)
        if self._sse:
            transform = self._sse_transform if pipe._in_rules else None
            if rehydrate or transform:
                self._proc = SSERehydrator(pipe.tokens if rehydrate else TokenMap(),
                                           transform=transform)
        elif rehydrate:
            self._proc = ChunkRehydrator(pipe.tokens, charset=self._charset,
                                         json_strings=ctype == "application/json"
                                         or ctype.endswith("+json"))
        if block_mode or self._whole:
            self._buffer = []
            self.head_ready = not block_mode
        elif self._inject:
            self._copy = []

    def _sse_transform(self, obj: Any) -> tuple[Any, int]:
        """Inbound transformations on every string of one parsed event."""
        units = _strings(obj)
        new = list(units)
        n = self.pipe._inbound_units(new)
        if not n:
            return obj, 0
        it = iter(new)

        def rebuild(v: Any) -> Any:
            if isinstance(v, str):
                return next(it)
            if isinstance(v, list):
                return [rebuild(x) for x in v]
            if isinstance(v, dict):
                return {k: rebuild(x) for k, x in v.items()}
            return v

        return rebuild(obj), n

    @property
    def counts(self) -> dict[str, int]:
        return {"pii_rehydrations": self.pii_rehydrations, "injection_blocks": self.injection_blocks,
                "injection_detections": self.injection_detections,
                "transformations_applied": self.transformations_applied}

    @property
    def held(self) -> int:
        """Decoded bytes held back, which the door counts against its budgets: for a scan or a
        whole-body transformation (at most `GuardLimits.scan_buffer` and one chunk), and by the
        rehydrator (an unfinished SSE event, up to 1 MiB; a token's unfinished start)."""
        return self._buffered + (self._proc.held if self._proc is not None else 0)

    # the relay's calls ---------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> bytes:
        if self.blocked:
            return self._answer()
        try:
            data = self._decode(chunk)
            if not self._active:
                return data
            if self._buffer is None:
                if self._copy is not None:
                    self._tee(data, final=False)
                return self._process(data)
            self._buffer.append(data)
            self._buffered += len(data)
            if self._buffered < self.pipe.limits.scan_buffer:
                return b""
            return self._window(final=False)
        except GuardCut:
            raise
        except Exception as exc:  # a bug of ours: cut, never release unguarded
            raise self._failed(exc) from None

    def end(self) -> bytes:
        if self.blocked:
            return self._answer()
        if not self._active:
            return b""
        try:
            return self._end()
        except GuardCut:
            raise
        except Exception as exc:
            raise self._failed(exc) from None

    def _end(self) -> bytes:
        self._decode_step(self._body.end)  # a body cut inside its coding is not a whole one
        if self._buffer is not None:
            out = self._window(final=True)
        else:
            if self._copy is not None:
                self._tee(b"", final=True)
            out = self._process(b"", final=True)
        if self._proc is not None:
            self.pii_rehydrations += self._proc.count
            if isinstance(self._proc, SSERehydrator):
                self.transformations_applied += self._proc.transformed
        return out

    def _failed(self, exc: Exception) -> GuardCut:
        log.error("content guard failed on a response: %r", exc, exc_info=exc)
        return GuardCut(f"the sandbox's content guard failed on this answer ({type(exc).__name__})", "guard")

    def _answer(self) -> bytes:
        """The block answer, once (then `done`)."""
        out, self._block_body = self._block_body, b""
        self.done = True
        return out

    # internals ------------------------------------------------------------------------------------
    def _decode(self, chunk: bytes) -> bytes:
        return self._decode_step(lambda: self._body.decode(chunk))

    def _decode_step(self, step: Callable[[], bytes | None]) -> bytes:
        try:
            return step() or b""
        except DecodedTooLarge:
            cap = self.pipe.limits.max_response_body
            self.notes.append(f"limits: response cut past {cap} decoded bytes")
            raise GuardCut(f"the decoded response is larger than {cap} bytes "
                           "(Limits.net_guard_response_bytes)", "limits") from None
        except EncodingError as e:
            self.notes.append(f"content-encoding: response cut ({e})")
            raise GuardCut(str(e), "content-encoding") from e

    def _process(self, data: bytes, final: bool = False) -> bytes:
        if self._proc is None:
            return data
        out = self._proc.feed(data) if data else b""
        if final:
            out += self._proc.end()
        return out

    def _tee(self, data: bytes, final: bool) -> None:
        assert self._copy is not None
        if data:
            self._copy.append(data)
            self._buffered += len(data)
        if self._buffered >= self.pipe.limits.scan_buffer or (final and self._buffered):
            text = b"".join(self._copy).decode(self._charset, "replace")
            self._copy.clear()
            self._buffered = 0
            self._scan(text)

    def _scan(self, text: str) -> str | None:
        scanned = extract_text(text, self._sse)
        hit = self.pipe._injection(self._tail + scanned, self.host, "inbound")
        self._tail = scanned[-512:]
        if hit is not None:
            self.injection_detections += 1
        if hit is not None and self._buffer is None:
            self.notes.append(f"injection_defense: detected in response ({hit}), log_only")
        return hit

    def _window(self, final: bool) -> bytes:
        """Scan, transform and rehydrate what is buffered; release it (or block)."""
        assert self._buffer is not None
        data = b"".join(self._buffer)
        if not final:  # keep a partial line for the next window
            cut = data.rfind(b"\n") + 1 or len(data)
            data, rest = data[:cut], data[cut:]
        else:
            rest = b""
        self._buffer = [rest] if rest else []
        self._buffered = len(rest)
        first = self._windows == 0
        self._windows += 1
        if self._inject:  # injection scan first, on what upstream sent
            hit = self._scan(data.decode(self._charset, "replace"))
            if hit is not None:
                if self.pipe.policy.injection_config.action == "block":
                    self.injection_blocks += 1
                    if first:
                        self._block_now(403, "injection_defense", f"prompt injection ({hit})")
                        return self._answer()
                    self.notes.append(f"injection_defense: response cut at window {self._windows} "
                                      f"({hit})")
                    raise GuardCut(f"prompt injection in the response ({hit})", "injection_defense")
                self.notes.append(f"injection_defense: detected in response ({hit}), log_only")
        whole = first and final and not self._sse
        parsed = parse_body(self._ctype_header, data) if whole else None
        units = list(parsed.units) if parsed is not None else \
            [data.decode(self._charset, "surrogateescape")]
        if self._whole:
            self.transformations_applied += self.pipe._inbound_units(units)
        self.head_ready = True
        if parsed is not None:
            return self._finish_whole(parsed, units, data)
        if self._whole:
            data = units[0].encode(self._charset, "surrogateescape")
        return self._process(data, final=final)

    def _finish_whole(self, parsed: Body, units: list[str], data: bytes) -> bytes:
        """A whole non-stream body: rehydrate unit by unit (JSON stays valid), rebuild."""
        if self._proc is not None:
            for i, u in enumerate(units):
                if "[REDACTED_" in u:
                    new, n = rehydrate_counted(u, self.pipe.tokens)
                    if n:
                        self.pii_rehydrations += n
                        units[i] = new
            self._proc = None
        if units == parsed.units:
            return data
        return parsed.rebuild(units)

    def _block_now(self, status: int, guard: str, message: str) -> None:
        answer = block_answer(guard, f"blocked by the sandbox's security policy: {message}", status)
        self.blocked = guard
        self.head_ready = True
        self.status = status
        self.headers = answer.headers + [("connection", "close")]
        self._block_body = answer.body
        self.notes.append(f"{guard}: blocked ({message})")


def extract_text(text: str, sse: bool) -> str:
    """What an injection scan reads: a JSON document's strings, the text deltas of an SSE
    stream (concatenated, so a phrase split across events is whole), or the text itself."""
    if not sse:
        if text.lstrip()[:1] in ("{", "["):
            try:
                return "\n".join(_strings(json.loads(text)))
            except ValueError:
                pass
        return text
    parts: list[str] = []
    for line in text.splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        try:
            obj = json.loads(payload)
        except ValueError:
            parts.append(payload + "\n")
            continue
        parts.append(_event_text(obj))
    return "".join(parts)


def _event_text(obj: Any) -> str:
    if isinstance(obj, dict):
        if isinstance(obj.get("choices"), list):
            out = []
            for ch in obj["choices"]:
                delta = ch.get("delta") if isinstance(ch, dict) else None
                if isinstance(delta, dict):
                    out.append(delta.get("content") or "")
                    for tc in delta.get("tool_calls") or []:
                        fn = tc.get("function") if isinstance(tc, dict) else None
                        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                            out.append(fn["arguments"])
            return "".join(o for o in out if isinstance(o, str))
        delta = obj.get("delta")
        if isinstance(delta, dict):
            return "".join(v for k, v in delta.items()
                           if k in ("text", "partial_json", "thinking") and isinstance(v, str))
        if isinstance(delta, str):
            return delta
    return "\n" + "\n".join(_strings(obj)) + "\n"


def _strings(v: Any) -> list[str]:
    out: list[str] = []
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, list):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(reversed(list(x.values())))
    return out
