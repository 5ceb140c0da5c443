"""Putting original values back in place of tokens, in whole bodies and in streams.

Streams are the hard part (declaw's users hit it): a token can arrive split across network
chunks, or across the text deltas of consecutive server-sent events (OpenAI's
`choices[i].delta.content`, Anthropic's `delta.text`). The rehydrators here hold back only a tail
that could still become a token (`[`, `[RED`, `[REDACTED_EMA`, ... at most 40 bytes) and release
everything else at once; the text that reaches the client, once concatenated, has the original
values.

- `ChunkRehydrator`: any byte stream (a JSON or text body, whole or chunked).
- `SSERehydrator`: `text/event-stream`. Events are split at blank lines; an event is parsed only
  when it could hold a token or a channel has held-back text, so an answer without tokens costs a
  byte search per chunk. Text deltas are rehydrated per channel (an OpenAI choice, an Anthropic
  content block, a Responses API item), across events; held text is released before the event
  that ends its channel (`finish_reason`, `content_block_stop`, `[DONE]`, end of stream), in an
  event of the same shape. Other JSON events have complete tokens in any string rehydrated.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

from .tokens import MAX_TOKEN_LEN, TOKEN_RE, TOKEN_RE_BYTES, TokenMap

# A tail that may still grow into a token.
_PARTIAL = r"\[(?:R(?:E(?:D(?:A(?:C(?:T(?:E(?:D(?:_[A-Z0-9_]*)?)?)?)?)?)?)?)?)?"
_PARTIAL_RE = re.compile(_PARTIAL + r"\Z")
_PARTIAL_RE_BYTES = re.compile(_PARTIAL.encode() + rb"\Z")
# Could this SSE data hold a token or the start of one (an opening bracket at a string's end)?
_BRACKET_THEN = re.compile(rb'\[["R]')
_MAYBE_TOKEN_BYTES = re.compile(rb'\[REDACTED_|' + _PARTIAL.encode() + rb'(?=")')


def partial_start(text: str) -> int:
    """Where a possible partial token starts at the end of `text` (len(text) if none)."""
    i = text.rfind("[", max(0, len(text) - MAX_TOKEN_LEN))
    if i >= 0 and _PARTIAL_RE.match(text, i):
        return i
    return len(text)


def rehydrate_text(text: str, tokens: TokenMap, *, escape: Callable[[str], str] | None = None) -> str:
    """`text` with every known rehydratable token replaced (unknown tokens stay)."""
    return rehydrate_counted(text, tokens, escape=escape)[0]


def rehydrate_counted(text: str, tokens: TokenMap, *,
                      escape: Callable[[str], str] | None = None) -> tuple[str, int]:
    """`rehydrate_text` and the number of tokens it put back."""
    if "[REDACTED_" not in text:
        return text, 0
    n = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal n
        v = tokens.lookup(m.group())
        if v is None:
            return m.group()
        n += 1
        return escape(v) if escape else v

    return TOKEN_RE.sub(sub, text), n


def json_escape(value: str) -> str:
    """`value` as it must appear inside a JSON string literal."""
    if value.isprintable() and '"' not in value and "\\" not in value:
        return value  # nothing to escape (every value the built-in detectors find)
    return json.dumps(value, ensure_ascii=False)[1:-1]


class ChunkRehydrator:
    """Rehydrates a byte stream; `json_strings=True` escapes values for JSON string literals."""

    def __init__(self, tokens: TokenMap, *, json_strings: bool = False, charset: str = "utf-8"):
        self.tokens = tokens
        self.json_strings = json_strings
        self.charset = charset
        self._held = b""
        self.count = 0
        self._cache: dict[bytes, bytes] = {}

    def _sub(self, m: re.Match[bytes]) -> bytes:
        token = m.group()
        out = self._cache.get(token)
        if out is None:
            v = self.tokens.lookup(token.decode("ascii"))
            if v is None:
                return token
            if self.json_strings:
                v = json_escape(v)
            out = v.encode(self.charset, "surrogateescape")
            if len(self._cache) < 4096:
                self._cache[token] = out
        self.count += 1
        return out

    def _rehydrate(self, data: bytes) -> bytes:
        if b"[REDACTED_" not in data:
            return data
        return TOKEN_RE_BYTES.sub(self._sub, data)

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + chunk if self._held else chunk
        if b"[" not in data:
            self._held = b""
            return data
        i = data.rfind(b"[", max(0, len(data) - MAX_TOKEN_LEN))
        if i >= 0 and _PARTIAL_RE_BYTES.match(data, i):
            self._held, data = data[i:], data[:i]
        else:
            self._held = b""
        return self._rehydrate(data)

    def end(self) -> bytes:
        data, self._held = self._held, b""
        return self._rehydrate(data)

    @property
    def held(self) -> int:
        """Bytes held back (the start of a token that may go on in the next chunk)."""
        return len(self._held)


def rehydrate_json_value(obj: Any, tokens: TokenMap) -> tuple[Any, int]:
    """A parsed JSON value with tokens in every string rehydrated; and how many."""
    count = 0

    def walk(v: Any) -> Any:
        nonlocal count
        if isinstance(v, str):
            if "[REDACTED_" in v:
                new, n = rehydrate_counted(v, tokens)
                count += n
                return new
            return v
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        return v

    return walk(obj), count


# --- server-sent events -------------------------------------------------------------------------

_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
MAX_EVENT = 1 << 20  # an event longer than this is passed on without parsing


class _Event:
    __slots__ = ("data", "lines", "obj", "sep")

    def __init__(self, raw: bytes, sep: bytes) -> None:
        self.sep = sep
        self.lines = raw.splitlines()
        data = [ln[6:] if ln.startswith(b"data: ") else ln[5:]
                for ln in self.lines if ln.startswith(b"data:")]
        self.data = b"\n".join(data)
        self.obj: Any = None

    def serialize(self, obj: Any) -> bytes:
        body = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
        out, done = [], False
        for ln in self.lines:
            if ln.startswith(b"data:"):
                if not done:
                    out.append(b"data: " + body)
                    done = True
            else:
                out.append(ln)
        nl = b"\r\n" if self.sep == b"\r\n\r\n" else self.sep[:1]
        return nl.join(out) + self.sep


def _openai_choice(idx: Any) -> Callable[[tuple[Any, ...]], bool]:
    return lambda k: k[0] == "openai" and k[1] == idx


def _next_event_end(data: bytes, pos: int) -> int:
    """Just past the first blank line at or after `pos` (len(data) if none)."""
    m = _EVENT_END.search(data, pos)
    return m.end() if m is not None else len(data)


def _event_start(data: bytes, lo: int, pos: int) -> int:
    """Where the event holding `pos` starts: just past the last blank line before it."""
    best = lo
    for sep in (b"\n\n", b"\r\r", b"\r\n\r\n"):
        i = data.rfind(sep, lo, pos)
        if i >= 0:
            best = max(best, i + len(sep))
    return best


def _last_event_end(buf: bytes) -> int:
    """Just past the last blank line in `buf`, or -1."""
    if b"\r" not in buf:
        i = buf.rfind(b"\n\n")
        return i + 2 if i >= 0 else -1
    cut = -1
    for sep in (b"\n\n", b"\r\r", b"\r\n\r\n"):
        i = buf.rfind(sep)
        if i >= 0:
            cut = max(cut, i + len(sep))
    return cut


class SSERehydrator:
    """Rehydrates a `text/event-stream`, keeping tokens whole across events (see the module)."""

    def __init__(self, tokens: TokenMap, *, transform: Callable[[Any], tuple[Any, int]] | None = None):
        self.tokens = tokens
        self.transform = transform  # inbound transformations on each parsed JSON event
        self._buf = b""
        self._held: dict[tuple[Any, ...], str] = {}
        self._templates: dict[tuple[Any, ...], Any] = {}
        self.count = 0
        self.transformed = 0
        self._raw_has_token = False

    @property
    def held(self) -> int:
        """Bytes held back: an unfinished event (up to MAX_EVENT) and tokens' unfinished starts."""
        return len(self._buf) + sum(len(v) for v in self._held.values())

    # framing ------------------------------------------------------------------------------------
    def feed(self, chunk: bytes) -> bytes:
        buf = self._buf + chunk if self._buf else chunk
        cut = _last_event_end(buf)
        if cut < 0:
            if len(buf) > MAX_EVENT:  # no event boundary in sight: pass on, unparsed
                self._buf = b""
                return buf
            self._buf = buf
            return b""
        complete, self._buf = buf[:cut], buf[cut:]
        if self.transform is not None:
            return self._events(complete)
        return self._sparse(complete)

    def end(self) -> bytes:
        out = []
        if self._buf:
            rest, self._buf = self._buf, b""
            out.append(self._events(rest + b"\n\n") if rest.strip() else rest)
        out.append(self._flush_all())
        return b"".join(out)

    def _sparse(self, data: bytes) -> bytes:
        """Complete events: only those that may hold a token (or follow held text) are parsed;
        the bytes between them are copied as they are."""
        out: list[bytes] = []
        pos, n = 0, len(data)
        while pos < n:
            if self._held:  # the next event continues or ends a held token
                end = _next_event_end(data, pos)
                out.append(self._events(data[pos:end]))
                pos = end
                continue
            # A token, whole or partial, starts with `[R` or is a `[` ending a string: without
            # either byte pair (one fast search for `[`) nothing here needs parsing.
            if _BRACKET_THEN.search(data, pos) is None:
                out.append(data[pos:])
                break
            m = _MAYBE_TOKEN_BYTES.search(data, pos)
            if m is None:
                out.append(data[pos:])
                break
            start = max(pos, _event_start(data, pos, m.start()))
            end = _next_event_end(data, m.start())
            out.append(data[pos:start])
            out.append(self._events(data[start:end]))
            pos = end
        return b"".join(out)

    def _events(self, data: bytes) -> bytes:
        out: list[bytes] = []
        pos = 0
        for m in _EVENT_END.finditer(data):
            raw = data[pos:m.start()]
            sep = m.group()
            pos = m.end()
            out.append(self._event(raw, sep))
        if pos < len(data):
            out.append(data[pos:])
        return b"".join(out)

    # one event ----------------------------------------------------------------------------------
    def _event(self, raw: bytes, sep: bytes) -> bytes:
        ev = _Event(raw, sep)
        if not ev.data:
            return raw + sep
        if ev.data.strip() == b"[DONE]":
            return self._flush_all() + raw + sep
        if self.transform is None and not self._held and not _MAYBE_TOKEN_BYTES.search(ev.data):
            return raw + sep
        try:
            obj = json.loads(ev.data)
        except ValueError:
            text = ev.data.decode("utf-8", "replace")
            new, n = rehydrate_counted(text, self.tokens)
            self.count += n
            return raw + sep if new == text else raw.replace(ev.data, new.encode()) + sep
        self._raw_has_token = b"[REDACTED_" in ev.data
        prefix, obj, changed = self._rehydrate_event(obj)
        if self.transform is not None:
            obj, n = self.transform(obj)
            if n:
                self.transformed += n
                changed = True
        return prefix + (ev.serialize(obj) if changed else raw + sep)

    def _rehydrate_event(self, obj: Any) -> tuple[bytes, Any, bool]:  # noqa: C901 (one branch per SSE format)
        """(events to emit first, the event's new object, whether it changed)."""
        if not isinstance(obj, dict):
            new, n = rehydrate_json_value(obj, self.tokens)
            self.count += n
            return b"", new, n > 0
        prefix = b""
        changed = False
        key: tuple[Any, ...]
        typ = obj.get("type")
        # Anthropic Messages --------------------------------------------------------------------
        if typ == "content_block_delta" and isinstance(obj.get("delta"), dict):
            delta = obj["delta"]
            for field in ("text", "partial_json", "thinking"):
                if isinstance(delta.get(field), str):
                    key = ("anthropic", obj.get("index"), field)
                    self._templates[key] = obj
                    changed |= self._delta(key, delta, field)
            return prefix, obj, changed
        if typ == "content_block_stop":
            return self._flush(lambda k: k[0] == "anthropic" and k[1] == obj.get("index")), obj, False
        if typ in ("message_stop", "message_delta"):
            prefix = self._flush(lambda k: k[0] == "anthropic")
        # OpenAI Responses API -------------------------------------------------------------------
        elif isinstance(typ, str) and typ.startswith("response.") and typ.endswith(".delta") \
                and isinstance(obj.get("delta"), str):
            key = ("responses", obj.get("item_id"), obj.get("content_index"), typ)
            self._templates[key] = obj
            return prefix, obj, self._delta(key, obj, "delta")
        elif isinstance(typ, str) and typ.startswith("response.") and typ.endswith(".done"):
            prefix = self._flush(lambda k: k[0] == "responses" and k[1] == obj.get("item_id"))
        # OpenAI Chat Completions ----------------------------------------------------------------
        choices = obj.get("choices")
        if isinstance(choices, list):
            for ch in choices:
                if not isinstance(ch, dict):
                    continue
                delta = ch.get("delta")
                idx = ch.get("index")
                if isinstance(delta, dict):
                    for field in ("content", "refusal", "reasoning_content"):
                        if isinstance(delta.get(field), str):
                            key = ("openai", idx, field)
                            self._templates[key] = obj
                            changed |= self._delta(key, delta, field)
                    for tc in delta.get("tool_calls") or []:
                        fn = tc.get("function") if isinstance(tc, dict) else None
                        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                            key = ("openai", idx, "tool", tc.get("index"))
                            self._templates[key] = obj
                            changed |= self._delta(key, fn, "arguments")
                if ch.get("finish_reason") is not None:
                    prefix += self._flush(_openai_choice(idx))
            if self._raw_has_token:  # a whole token outside the deltas (ids, usage...)
                rest = {k: v for k, v in obj.items() if k != "choices"}
                new_rest, n = rehydrate_json_value(rest, self.tokens)
                if n:
                    obj.update(new_rest)
                    self.count += n
                    changed = True
            return prefix, obj, changed
        new, n = rehydrate_json_value(obj, self.tokens)
        self.count += n
        return prefix, new, changed or n > 0

    def _delta(self, key: tuple[Any, ...], holder: dict[str, Any], field: str) -> bool:
        text = self._held.pop(key, "") + holder[field]
        cut = partial_start(text)
        if cut < len(text):
            self._held[key] = text[cut:]
        ready = text[:cut]
        new, n = rehydrate_counted(ready, self.tokens)
        self.count += n
        changed = bool(new != holder[field])
        holder[field] = new
        return changed

    # releasing held text ------------------------------------------------------------------------
    def _flush(self, which: Callable[[tuple[Any, ...]], bool]) -> bytes:
        out = []
        for key in [k for k in self._held if which(k)]:
            text = self._held.pop(key)
            out.append(self._synth(key, text))
        return b"".join(out)

    def _flush_all(self) -> bytes:
        return self._flush(lambda k: True)

    def _synth(self, key: tuple[Any, ...], text: str) -> bytes:
        """An event of the channel's own shape carrying `text`."""
        tpl = self._templates.get(key)
        obj: Any
        if key[0] == "anthropic":
            field = key[2]
            dtype = {"text": "text_delta", "partial_json": "input_json_delta",
                     "thinking": "thinking_delta"}[field]
            obj = {"type": "content_block_delta", "index": key[1],
                   "delta": {"type": dtype, field: text}}
            head = b"event: content_block_delta\n"
        elif key[0] == "responses":
            obj = copy.deepcopy(tpl) if isinstance(tpl, dict) else {"type": key[3]}
            obj["delta"] = text
            head = f"event: {obj.get('type')}\n".encode()
        else:
            obj = {k: v for k, v in (tpl or {}).items() if k not in ("choices", "usage")}
            delta: dict[str, Any]
            if key[2] == "tool":
                delta = {"tool_calls": [{"index": key[3], "function": {"arguments": text}}]}
            else:
                delta = {key[2]: text}
            obj["choices"] = [{"index": key[1], "delta": delta, "finish_reason": None}]
            head = b""
        return head + b"data: " + json.dumps(obj, ensure_ascii=False,
                                             separators=(",", ":")).encode() + b"\n\n"
