"""Bodies as lists of text units that guards rewrite, and back to bytes.

A guard never runs a regular expression over a JSON document's raw bytes (declaw's #02 and #08:
a redaction crossing a quote broke the JSON, OpenAI answered 400 and Anthropic 404 "model not
found"). Instead a body is split into *units* — each JSON key, string and number; each form
field name and value; each multipart part (recursively); a whole text — the guards rewrite units,
and only the units that changed are re-encoded (JSON strings with `json.dumps`, so the document
stays valid JSON; a number that became a token becomes a string). Every other byte, spacing and
number spelling included, is kept as it was. JSON escapes are decoded before scanning, so
`alice\\u0040example.com` is seen as an email.

Binary bodies (not valid UTF-8, or an image/audio/video/font/archive type) are one opaque part.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from email.message import Message
from typing import Protocol
from urllib.parse import quote_plus, unquote_plus

_BINARY_PREFIXES = ("image/", "audio/", "video/", "font/", "model/")
_BINARY_TYPES = {"application/zip", "application/gzip", "application/x-gzip", "application/pdf",
                 "application/x-tar", "application/x-protobuf", "application/protobuf",
                 "application/grpc", "application/x-msgpack", "application/msgpack",
                 "application/wasm", "application/vnd.apache.parquet", "application/x-7z-compressed",
                 "application/zstd", "application/x-bzip2", "application/x-xz"}

# A string (group 1; group 2 set when it is an object key) or a number (group 3).
_JSON_TOKEN = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")([ \t\r\n]*:)?'
                         r'|(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+\-]?[0-9]+)?)')
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_content_type(value: str | None) -> tuple[str, dict[str, str]]:
    """('type/subtype' lower-cased, params) of a Content-Type header."""
    if not value:
        return "", {}
    msg = Message()
    msg["content-type"] = value
    params = {k.lower(): v for k, v in msg.get_params(failobj=[])[1:]}
    return msg.get_content_type().lower() if "/" in value else "", params


class Body(Protocol):
    """A parsed body: its text units, each unit's context (the key or field naming it)."""

    @property
    def kind(self) -> str: ...

    @property
    def units(self) -> list[str]: ...

    @property
    def contexts(self) -> list[str | None]: ...

    def rebuild(self, new_units: Sequence[str]) -> bytes: ...


@dataclass
class OpaqueBody:
    """Binary or empty: nothing to scan, passed as is."""

    raw: bytes
    kind: str = "binary"
    units: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)

    def rebuild(self, new_units: Sequence[str]) -> bytes:
        return self.raw


@dataclass
class TextBody:
    text: str
    charset: str = "utf-8"
    kind: str = "text"
    units: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.units = [self.text]
        self.contexts = [None]

    def rebuild(self, new_units: Sequence[str]) -> bytes:
        return new_units[0].encode(self.charset, "surrogateescape")


class JsonBody:
    """A JSON document: keys, strings and numbers are the units (split on first use)."""

    kind = "json"

    def __init__(self, text: str) -> None:
        self.text = text
        self._units: list[str] | None = None
        self._contexts: list[str | None] = []
        self._spans: list[tuple[int, int, bool]] = []  # start, end, is_number

    @property
    def units(self) -> list[str]:
        if self._units is None:
            self._split()
        assert self._units is not None
        return self._units

    @property
    def contexts(self) -> list[str | None]:
        self.units  # noqa: B018 - splits on first use
        return self._contexts

    def _split(self) -> None:
        units: list[str] = []
        contexts, spans = self._contexts, self._spans
        last_key: str | None = None
        loads = json.loads
        for m in _JSON_TOKEN.finditer(self.text):
            raw, key, number = m.groups()
            if number is not None:
                units.append(number)
                contexts.append(last_key)
                spans.append((m.start(3), m.end(3), True))
                continue
            value = raw[1:-1] if "\\" not in raw else loads(raw)
            units.append(value)
            if key is not None:
                last_key = value
                contexts.append(None)
            else:
                contexts.append(last_key)
            spans.append((m.start(1), m.end(1), False))
        self._units = units

    def rebuild(self, new_units: Sequence[str]) -> bytes:
        out: list[str] = []
        pos = 0
        text = self.text
        for (start, end, _), old, new in zip(self._spans, self.units, new_units, strict=False):
            if new == old:
                continue
            out.append(text[pos:start])
            out.append(_json_string(new))
            pos = end
        out.append(text[pos:])
        return "".join(out).encode("utf-8")


def _json_string(s: str) -> str:
    if _SURROGATE.search(s):
        return json.dumps(s)  # a lone surrogate cannot be UTF-8: keep it escaped
    return json.dumps(s, ensure_ascii=False)


@dataclass
class _Composite:
    """A body made of children (form fields, multipart parts, JSON lines)."""

    kind: str
    pieces: list[bytes | Body]  # literal bytes and child bodies, in order
    units: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)
    trim: int = 0  # bytes to drop from the front (multipart's made-up leading CRLF)

    def __post_init__(self) -> None:
        for p in self.pieces:
            if not isinstance(p, bytes):
                self.units.extend(p.units)
                self.contexts.extend(p.contexts)

    def rebuild(self, new_units: Sequence[str]) -> bytes:
        out: list[bytes] = []
        i = 0
        for p in self.pieces:
            if isinstance(p, bytes):
                out.append(p)
                continue
            n = len(p.units)
            mine = new_units[i:i + n]
            out.append(p.rebuild(mine) if list(mine) != p.units else _original(p))
            i += n
        return b"".join(out)[self.trim:]


def _original(body: Body) -> bytes:
    return body.rebuild(body.units)


@dataclass
class _FormField:
    raw: bytes
    kind: str = "form-field"
    units: list[str] = field(default_factory=list)
    contexts: list[str | None] = field(default_factory=list)

    def __post_init__(self) -> None:
        name, eq, value = self.raw.partition(b"=")
        n = unquote_plus(name.decode("latin-1"), encoding="utf-8", errors="surrogateescape")
        self.units = [n]
        self.contexts = [None]
        self._has_value = bool(eq)
        if eq:
            self.units.append(unquote_plus(value.decode("latin-1"), encoding="utf-8",
                                           errors="surrogateescape"))
            self.contexts.append(n)

    def rebuild(self, new_units: Sequence[str]) -> bytes:
        if list(new_units) == self.units:
            return self.raw
        parts = self.raw.partition(b"=")
        name = parts[0] if new_units[0] == self.units[0] else _form_quote(new_units[0])
        if not self._has_value:
            return name
        value = parts[2] if new_units[1] == self.units[1] else _form_quote(new_units[1])
        return name + b"=" + value


def _form_quote(s: str) -> bytes:
    return quote_plus(s, encoding="utf-8", errors="surrogateescape").encode("ascii")


def _form_body(raw: bytes) -> _Composite:
    pieces: list[bytes | Body] = []
    for i, part in enumerate(raw.split(b"&")):
        if i:
            pieces.append(b"&")
        pieces.append(_FormField(part) if part else b"")
    return _Composite("form", pieces)


def _multipart_body(raw: bytes, boundary: str, depth: int) -> Body:
    delim = b"\r\n--" + boundary.encode("latin-1")
    data = b"\r\n" + raw
    segs = data.split(delim)
    if len(segs) < 2:
        return _text_or_opaque(raw, "utf-8")
    pieces: list[bytes | Body] = [segs[0]]
    for seg in segs[1:]:
        pieces.append(delim)
        if seg.startswith(b"--"):
            pieces.append(seg)  # the close delimiter and the epilogue
            continue
        hdr_end = seg.find(b"\r\n\r\n")
        if hdr_end < 0:
            pieces.append(seg)
            continue
        head, content = seg[:hdr_end + 4], seg[hdr_end + 4:]
        ptype, name = _part_header(head)
        pieces.append(head)
        child = parse_body(ptype, content, _depth=depth + 1)
        if name is not None and isinstance(child, TextBody):
            child.contexts = [name]
        pieces.append(child)
    return _Composite("multipart", pieces, trim=2)


def _part_header(head: bytes) -> tuple[str, str | None]:
    ctype, name = "text/plain", None
    for line in head.decode("latin-1").split("\r\n"):
        k, _, v = line.partition(":")
        k = k.strip().lower()
        if k == "content-type":
            ctype = v.strip()
        elif k == "content-disposition":
            m = re.search(r'name="([^"]*)"', v)
            name = m.group(1) if m else None
    return ctype, name


def _jsonl_body(text: str) -> Body | None:
    pieces: list[bytes | Body] = []
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        if content.strip():
            try:
                json.loads(content)
            except ValueError:
                return None
            pieces.append(JsonBody(content))
        else:
            pieces.append(content.encode())
        pieces.append(line[len(content):].encode())
    return _Composite("jsonl", pieces)


def _text_or_opaque(raw: bytes, charset: str, *, strict: bool = True) -> Body:
    try:
        text = raw.decode(charset) if strict else raw.decode(charset, "surrogateescape")
    except (UnicodeDecodeError, LookupError):
        return OpaqueBody(raw)
    return _sniff(text, charset) or TextBody(text, charset)


def _sniff(text: str, charset: str) -> Body | None:
    """A text that is in fact JSON or JSON lines gets the JSON treatment."""
    head = text.lstrip()[:1]
    if head not in ("{", "["):
        return None
    try:
        json.loads(text)
    except ValueError:
        return _jsonl_body(text) if "\n" in text.strip() else None
    return JsonBody(text) if charset.lower().replace("_", "-") in ("utf-8", "utf8") else None


def parse_body(content_type: str | None, raw: bytes, *, _depth: int = 0) -> Body:
    """Split `raw` (already Content-Encoding-decoded) into units by its Content-Type."""
    if not raw:
        return OpaqueBody(raw, kind="empty")
    ctype, params = parse_content_type(content_type)
    charset = params.get("charset", "utf-8")
    if ctype.startswith(_BINARY_PREFIXES) or ctype in _BINARY_TYPES:
        return OpaqueBody(raw)
    if ctype.startswith("multipart/") and params.get("boundary") and _depth < 4:
        return _multipart_body(raw, params["boundary"], _depth)
    if ctype == "application/x-www-form-urlencoded":
        return _form_body(raw)
    if ctype in ("application/x-ndjson", "application/jsonl", "application/x-jsonlines"):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _text_or_opaque(raw, charset, strict=False)
        return _jsonl_body(text) or TextBody(text)
    if ctype == "application/json" or ctype.endswith("+json"):
        try:
            text = raw.decode("utf-8")
            json.loads(text)
        except ValueError:  # not JSON after all: scan as text
            return _text_or_opaque(raw, charset, strict=False)
        return JsonBody(text)
    if ctype.startswith("text/") or not ctype or "xml" in ctype or "javascript" in ctype:
        return _text_or_opaque(raw, charset, strict=False)
    # Any other type (application/octet-stream included): text if it decodes as UTF-8.
    return _text_or_opaque(raw, "utf-8")
