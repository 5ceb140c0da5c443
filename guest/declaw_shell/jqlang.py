"""The jq language (jq 1.7.1): lexer, parser and a generator-based evaluator, for `jq` (jq.py).

Written for the sandbox's shell from jq's manual and its observed behaviour (compared with jq in
tests/shell/test_jq.py); nothing here is jq's C code. A filter is parsed to tuples, checked
(every function and variable must be defined, as jq checks at compile time), then evaluated
lazily: `Interp.ev(node, value, env, path)` yields `(output, output_path)` pairs. `path` is None
for values, a tuple of keys when the filter is evaluated as a path expression (`path(f)`,
`f |= g`, `del(f)`...), where only path-building forms are allowed, as in jq.

Values are Python's JSON values: None, bool, int (a number literal as read, so large integers
print as written, as jq 1.7 keeps literals), float (the result of arithmetic), str, list, dict.
Equality and order are jq's (`jcmp`), never Python's: `true == 1` is false in jq.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

Path = tuple[Any, ...]
Pair = tuple[Any, Any]  # (value, its path: a tuple, None for values, or BAD)
Node = tuple[Any, ...]

MAX_PARSE_DEPTH = 256  # jq's limits: deeper input is an error ("Exceeds depth limit for parsing"), and
MAX_PRINT_DEPTH = 256  # deeper output prints "<skipped: too deep>"; CPython's C JSON decoder would
# otherwise recurse once a level (a 50 000-deep `[[[...` crashed the guest)


class JqError(Exception):
    """An error raised by a filter (`error`, a type error...): catchable by `try`."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


class CompileError(Exception):
    """The filter does not parse (jq's exit 3); `pos`: where, if known."""

    def __init__(self, message: str, pos: int = -1) -> None:
        super().__init__(message)
        self.pos = pos


class Break(Exception):
    def __init__(self, label: object) -> None:
        super().__init__()
        self.label = label


class Halt(Exception):
    def __init__(self, status: int, message: Any = None, has_message: bool = False) -> None:
        super().__init__(status)
        self.status = status
        self.message = message
        self.has_message = has_message


# ---------------------------------------------------------------------------------------------
# values

def kind(v: Any) -> str:
    if v is None:
        return "null"
    if v is True or v is False:
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


_RANK = {"null": 0, "boolean": 1, "number": 3, "string": 4, "array": 5, "object": 6}


def _rank(v: Any) -> int:
    if v is True:
        return 2
    return _RANK[kind(v)]


def jcmp(a: Any, b: Any) -> int:
    """jq's order: null < false < true < numbers < strings < arrays < objects."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        return -1 if ra < rb else 1
    if ra == 3:  # two literals compare exactly (large integers keep their order), else as doubles
        if type(a) is not type(b):
            a, b = float(a), float(b)
        if a != a or b != b:  # nan sorts below every number, as in jq
            return (0 if b != b else -1) if a != a else 1
        return -1 if a < b else (1 if a > b else 0)
    if ra == 4:
        return -1 if a < b else (1 if a > b else 0)
    if ra == 5:
        for x, y in zip(a, b):  # noqa: B905 - lengths compared after
            c = jcmp(x, y)
            if c:
                return c
        return -1 if len(a) < len(b) else (1 if len(a) > len(b) else 0)
    if ra == 6:
        ka, kb = sorted(a), sorted(b)
        c = jcmp(ka, kb)
        if c:
            return c
        for k in ka:
            c = jcmp(a[k], b[k])
            if c:
                return c
    return 0


def jeq(a: Any, b: Any) -> bool:
    if type(a) is str and type(b) is str:
        return bool(a == b)
    return jcmp(a, b) == 0


class _Key:
    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Key) -> bool:
        return jcmp(self.v, other.v) < 0


def jsorted(values: list[Any]) -> list[Any]:
    return sorted(values, key=_Key)


def truthy(v: Any) -> bool:
    return v is not None and v is not False


def is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# ---------------------------------------------------------------------------------------------
# printing

def fmt_num(x: Any) -> str:
    if isinstance(x, int):
        return str(x)
    if x != x:
        return "null"
    if x in (math.inf, -math.inf):
        return "1.7976931348623157e+308" if x > 0 else "-1.7976931348623157e+308"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    text = repr(abs(x))
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    decpt = len(whole) + (int(exp) if exp else 0)
    digits = (whole + frac).lstrip("0")
    decpt -= len(whole + frac) - len((whole + frac).lstrip("0"))
    digits = digits.rstrip("0") or "0"
    sign = "-" if x < 0 else ""
    n = len(digits)
    if decpt <= -4 or decpt > n + 15:
        e = decpt - 1
        body = digits[0] + ("." + digits[1:] if n > 1 else "")
        return "%s%se%s%02d" % (sign, body, "-" if e < 0 else "+", abs(e))
    if decpt <= 0:
        return sign + "0." + "0" * (-decpt) + digits
    if n <= decpt:
        return sign + digits + "0" * (decpt - n)
    return sign + digits[:decpt] + "." + digits[decpt:]


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f]')
_NEEDS_ESCAPE_ASCII = re.compile(r'["\\\x00-\x1f\x7f-\U0010ffff]')


def _escape_char(m: re.Match[str]) -> str:
    c = m.group()
    if c in _ESCAPES:
        return _ESCAPES[c]
    o = ord(c)
    if o > 0xFFFF:
        o -= 0x10000
        return "\\u%04x\\u%04x" % (0xD800 + (o >> 10), 0xDC00 + (o & 0x3FF))
    if 0xD800 <= o < 0xE000:  # a lone surrogate (undecodable input byte): as jq, U+FFFD
        return "\ufffd"
    return "\\u%04x" % o


def _lone_surrogate(m: re.Match[str]) -> str:
    return "\ufffd"


_SURROGATE = re.compile("[\ud800-\udfff]")


def dump_str(s: str, ascii_only: bool = False) -> str:
    pattern = _NEEDS_ESCAPE_ASCII if ascii_only else _NEEDS_ESCAPE
    if not ascii_only:
        s = _SURROGATE.sub(_lone_surrogate, s)
    return '"' + pattern.sub(_escape_char, s) + '"'


class Dumper:
    """JSON text as jq prints it: indent (0: compact), --tab, -S, -a."""

    def __init__(self, indent: int = 2, tab: bool = False, sort_keys: bool = False,
                 ascii_only: bool = False) -> None:
        self.indent = "\t" if tab else " " * indent
        self.pretty = tab or indent > 0
        self.sort_keys = sort_keys
        self.ascii_only = ascii_only

    def dumps(self, v: Any) -> str:
        out: list[str] = []
        self._dump(v, out, 0)
        return "".join(out)

    def _dump(self, v: Any, out: list[str], level: int) -> None:  # noqa: C901 - one case a kind
        if level > MAX_PRINT_DEPTH:
            out.append("<skipped: too deep>")
            return
        if v is None:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, str):
            out.append(dump_str(v, self.ascii_only))
        elif isinstance(v, (int, float)):
            out.append(fmt_num(v))
        elif isinstance(v, list):
            if not v:
                out.append("[]")
                return
            out.append("[")
            for i, x in enumerate(v):
                if i:
                    out.append(",")
                if self.pretty:
                    out.append("\n" + self.indent * (level + 1))
                self._dump(x, out, level + 1)
            if self.pretty:
                out.append("\n" + self.indent * level)
            out.append("]")
        else:
            if not v:
                out.append("{}")
                return
            out.append("{")
            keys = sorted(v) if self.sort_keys else list(v)
            for i, k in enumerate(keys):
                if i:
                    out.append(",")
                if self.pretty:
                    out.append("\n" + self.indent * (level + 1))
                out.append(dump_str(k, self.ascii_only))
                out.append(": " if self.pretty else ":")
                self._dump(v[k], out, level + 1)
            if self.pretty:
                out.append("\n" + self.indent * level)
            out.append("}")


COMPACT = Dumper(indent=0)


def tojson(v: Any) -> str:
    return COMPACT.dumps(v)


def trunc(v: Any, bufsize: int = 15) -> str:
    """A value in an error message, cut as jq cuts it: to `bufsize - 1` bytes, the last three "..."."""
    text = tojson(v)
    raw = text.encode("utf-8")
    if len(raw) > bufsize - 1:
        return raw[: bufsize - 4].decode("utf-8", "ignore") + "..."
    return text


def tostring(v: Any) -> str:
    return v if isinstance(v, str) else tojson(v)


# ---------------------------------------------------------------------------------------------
# reading JSON

_WS = re.compile(r"[ \t\n\r]*")


def _parse_constant(name: str) -> float:
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


_DECODER = json.JSONDecoder(parse_constant=_parse_constant)


class InputError(Exception):
    pass


def _position(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1)
    return "at line %d, column %d" % (line, column)


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _mask_string(m: re.Match[str]) -> str:
    return "x" * len(m.group())


def too_deep_at(text: str, limit: int = MAX_PARSE_DEPTH) -> int:
    """Where `text` first nests arrays and objects deeper than `limit`, or -1 (C-speed scans
    when it cannot: fewer brackets than the limit, or no prefix that deep)."""
    if text.count("[") + text.count("{") <= limit:
        return -1
    masked = _JSON_STRING.sub(_mask_string, text)
    brackets = _NOT_BRACKET.sub("", masked)
    if not brackets:
        return -1
    depths = list(accumulate(map(_DEPTH_STEP.__getitem__, brackets)))
    if max(depths) <= limit:
        return -1
    k = next(i for i, d in enumerate(depths) if d > limit)
    for i, m in enumerate(_BRACKET.finditer(masked)):
        if i == k:
            return m.start()
    return -1


def parse_values_at(text: str) -> Iterator[tuple[Any, int]]:
    """Every JSON value in `text` and where it ends, separated by whitespace or not (`1 2`,
    `{}{}`), as jq reads them; nesting deeper than jq's limit is an error at the value that does."""
    index = _WS.match(text, 1 if text.startswith("\ufeff") else 0).end()  # type: ignore[union-attr]
    deep = too_deep_at(text)
    source = text if deep < 0 else text[:deep]
    end = len(source)
    while index < end:
        try:
            value, index = _DECODER.raw_decode(source, index)
        except RecursionError:
            raise InputError("Exceeds depth limit for parsing") from None
        except json.JSONDecodeError as exc:
            if deep >= 0 and (exc.pos >= end or not source[exc.pos:].strip()):
                raise InputError("Exceeds depth limit for parsing %s" % _position(text, deep)) from None
            message = exc.msg
            if exc.pos >= end or not source[exc.pos:].strip():
                message = "Unfinished JSON term at EOF"
            raise InputError("%s %s" % (message, _position(text, exc.pos))) from None
        yield value, index
        index = _WS.match(source, index).end()  # type: ignore[union-attr]
    if deep >= 0:
        raise InputError("Exceeds depth limit for parsing %s" % _position(text, deep))


def parse_values(text: str) -> Iterator[Any]:
    for value, _ in parse_values_at(text):
        yield value


def fromjson(text: str) -> Any:
    values = list(parse_values(text))
    if len(values) != 1:
        raise InputError("Unexpected extra JSON values" if values else "Expected JSON value")
    return values[0]


# ---------------------------------------------------------------------------------------------
# lexer

KEYWORDS = frozenset({"def", "if", "then", "elif", "else", "end", "as", "reduce", "foreach", "try", "catch",
                      "label", "import", "include", "and", "or", "__loc__"})
_OPS = ("?//", "//=", "|=", "+=", "-=", "*=", "/=", "%=", "==", "!=", "<=", ">=", "//", "..",
        ".", "[", "]", "{", "}", "(", ")", "|", ",", ":", ";", "=", "<", ">", "+", "-", "*", "/", "%", "?")
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*(?:::[a-zA-Z_][a-zA-Z0-9_]*)*")
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_SPACE = re.compile(r"(?:\s+|#[^\n]*)+")


class Tok:
    __slots__ = ("kind", "val", "pos")

    def __init__(self, kind: str, val: Any, pos: int) -> None:
        self.kind = kind
        self.val = val
        self.pos = pos

    def __repr__(self) -> str:
        return "Tok(%s, %r)" % (self.kind, self.val)


def lex(src: str, pos: int = 0, nested: bool = False) -> tuple[list[Tok], int]:  # noqa: C901 - a lexer
    """Tokens from `pos`; `nested`: inside `\\(...)`, stop at its closing parenthesis."""
    toks: list[Tok] = []
    depth = 0
    n = len(src)
    while True:
        m = _SPACE.match(src, pos)
        if m:
            pos = m.end()
        if pos >= n:
            if nested:
                raise CompileError("syntax error, unexpected end of file (Unix shell quoting issues?)", n)
            toks.append(Tok("eof", None, pos))
            return toks, pos
        c = src[pos]
        if c == '"':
            parts, pos2 = _lex_string(src, pos + 1)
            toks.append(Tok("str", parts, pos))
            pos = pos2
            continue
        if c == "." and pos + 1 < n and (src[pos + 1].isalpha() or src[pos + 1] == "_") and src[pos + 1].isascii():
            m = _IDENT.match(src, pos + 1)
            assert m is not None
            toks.append(Tok("field", m.group().split("::")[0], pos))
            pos = pos + 1 + len(m.group().split("::")[0])
            continue
        m = _NUMBER.match(src, pos)
        if m and (c.isdigit() or (c == "." and pos + 1 < n and src[pos + 1].isdigit())):
            text = m.group()
            value: Any = float(text) if any(ch in text for ch in ".eE") else int(text)
            toks.append(Tok("num", value, pos))
            pos = m.end()
            continue
        if c == "$":
            m = _IDENT.match(src, pos + 1)
            if not m:
                raise CompileError("syntax error, unexpected '$' (Unix shell quoting issues?)", pos)
            toks.append(Tok("var", m.group(), pos))
            pos = m.end()
            continue
        if c == "@":
            m = _IDENT.match(src, pos + 1)
            if not m:
                raise CompileError("syntax error, unexpected '@' (Unix shell quoting issues?)", pos)
            toks.append(Tok("fmt", m.group(), pos))
            pos = m.end()
            continue
        if c.isalpha() or c == "_":
            m = _IDENT.match(src, pos)
            if m and c.isascii():
                word = m.group()
                toks.append(Tok("kw" if word in KEYWORDS else "ident", word, pos))
                pos = m.end()
                continue
        for op in _OPS:
            if src.startswith(op, pos):
                break
        else:
            raise CompileError("syntax error, unexpected INVALID_CHARACTER (Unix shell quoting issues?)", pos)
        if nested:
            if op == "(":
                depth += 1
            elif op == ")":
                if depth == 0:
                    toks.append(Tok("eof", None, pos))
                    return toks, pos + 1
                depth -= 1
        toks.append(Tok("op", op, pos))
        pos += len(op)


_STRING_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _lex_string(src: str, pos: int) -> tuple[list[Any], int]:  # noqa: C901 - escapes, one case each
    parts: list[Any] = []
    buf: list[str] = []
    n = len(src)
    while True:
        if pos >= n:
            raise CompileError("syntax error, unexpected $end, expecting QQSTRING_TEXT or QQSTRING_INTERP_START or "
                               "QQSTRING_END (Unix shell quoting issues?)", n)
        c = src[pos]
        if c == '"':
            if buf or not parts:
                parts.append("".join(buf))
            return parts, pos + 1
        if c != "\\":
            buf.append(c)
            pos += 1
            continue
        if pos + 1 >= n:
            raise CompileError("syntax error, unexpected $end, expecting QQSTRING_TEXT or QQSTRING_INTERP_START or "
                               "QQSTRING_END (Unix shell quoting issues?)", n)
        e = src[pos + 1]
        if e in _STRING_ESCAPES:
            buf.append(_STRING_ESCAPES[e])
            pos += 2
        elif e == "u":
            hexa = src[pos + 2:pos + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", hexa):
                raise CompileError("syntax error, invalid \\u escape", pos)
            code = int(hexa, 16)
            pos += 6
            if 0xD800 <= code < 0xDC00 and src[pos:pos + 2] == "\\u" and re.fullmatch(r"[dD][c-fC-F][0-9a-fA-F]{2}",
                                                                                     src[pos + 2:pos + 6]):
                low = int(src[pos + 2:pos + 6], 16)
                code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                pos += 6
            buf.append(chr(code) if not 0xD800 <= code < 0xE000 else "\ufffd")
        elif e == "(":
            if buf:
                parts.append("".join(buf))
                buf = []
            toks, pos = lex(src, pos + 2, nested=True)
            parts.append(toks)
        else:
            raise CompileError("syntax error, invalid escape", pos)


# ---------------------------------------------------------------------------------------------
# parser

_CONSTANTS = {"null": None, "true": True, "false": False}
_ASSIGN = {"=", "|=", "+=", "-=", "*=", "/=", "%=", "//="}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}


class Parser:
    def __init__(self, toks: list[Tok], src: str) -> None:
        self.toks = toks
        self.i = 0
        self.src = src

    def peek(self, ahead: int = 0) -> Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def next(self) -> Tok:
        t = self.toks[self.i]
        if self.i < len(self.toks) - 1:
            self.i += 1
        return t

    def is_op(self, *ops: str) -> bool:
        t = self.peek()
        return t.kind == "op" and t.val in ops

    def is_kw(self, *words: str) -> bool:
        t = self.peek()
        return t.kind == "kw" and t.val in words

    def fail(self, t: Tok | None = None) -> CompileError:
        t = t or self.peek()
        what = {"eof": "end of file", "num": "LITERAL", "str": "QQSTRING_START", "ident": "IDENT",
                "field": "FIELD", "var": "'$'", "fmt": "FORMAT"}.get(t.kind)
        if what is None:
            what = "'%s'" % t.val if t.kind == "op" and len(t.val) == 1 else str(t.val)
        return CompileError("syntax error, unexpected %s (Unix shell quoting issues?)" % what, t.pos)

    def expect_op(self, op: str) -> None:
        if not self.is_op(op):
            raise self.fail()
        self.next()

    def expect_kw(self, word: str) -> None:
        if not self.is_kw(word):
            raise self.fail()
        self.next()

    def program(self) -> Node:
        if self.peek().kind == "eof":
            return ("id",)
        node = self.pipe()
        if self.peek().kind != "eof":
            raise self.fail()
        return node

    def pipe(self, no_comma: bool = False) -> Node:
        if self.is_kw("def"):
            fdef = self.funcdef()
            return ("def", fdef, self.pipe(no_comma))
        left = self.alt() if no_comma else self.comma()
        if self.is_op("|"):
            self.next()
            return ("pipe", left, self.pipe(no_comma))
        return left

    def comma(self) -> Node:
        left = self.alt()
        while self.is_op(","):
            self.next()
            left = ("comma", left, self.alt())
        return left

    def alt(self) -> Node:
        left = self.assign()
        if self.is_op("//"):
            self.next()
            return ("alt", left, self.alt())
        return left

    def assign(self) -> Node:
        left = self.orexp()
        t = self.peek()
        if t.kind == "op" and t.val in _ASSIGN:
            self.next()
            right = self.orexp()
            return ("assign", t.val, left, right)
        return left

    def orexp(self) -> Node:
        left = self.andexp()
        while self.is_kw("or"):
            self.next()
            left = ("or", left, self.andexp())
        return left

    def andexp(self) -> Node:
        left = self.compare()
        while self.is_kw("and"):
            self.next()
            left = ("and", left, self.compare())
        return left

    def compare(self) -> Node:
        left = self.additive()
        t = self.peek()
        if t.kind == "op" and t.val in _COMPARE:
            self.next()
            right = self.additive()
            if self.peek().kind == "op" and self.peek().val in _COMPARE:
                raise self.fail()
            return ("bin", t.val, left, right)
        return left

    def additive(self) -> Node:
        left = self.multiplicative()
        while self.is_op("+", "-"):
            op = self.next().val
            left = ("bin", op, left, self.multiplicative())
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        while self.is_op("*", "/", "%"):
            op = self.next().val
            left = ("bin", op, left, self.unary())
        return left

    def unary(self) -> Node:
        if self.is_op("-"):
            self.next()
            return ("neg", self.unary())
        return self.postfix()

    def postfix(self, allow_as: bool = True) -> Node:  # noqa: C901 - one case a suffix
        term = self.primary()
        while True:
            t = self.peek()
            if t.kind == "field":
                self.next()
                term = ("index", term, ("lit", t.val))
            elif t.kind == "op" and t.val == "." and self.peek(1).kind == "str":
                self.next()
                term = ("index", term, self.string(self.next().val, None))
            elif t.kind == "op" and t.val == "." and self.peek(1).kind == "op" and self.peek(1).val == "[":
                self.next()
            elif t.kind == "op" and t.val == "[":
                self.next()
                term = self.bracket(term)
            elif t.kind == "op" and t.val == "?":
                self.next()
                term = ("try", term, None)
            elif t.kind == "kw" and t.val == "as" and allow_as:
                self.next()
                patterns = self.patterns()
                self.expect_op("|")
                return ("as", term, patterns, self.pipe())
            else:
                return term

    def bracket(self, term: Node) -> Node:
        if self.is_op("]"):
            self.next()
            return ("iter", term)
        if self.is_op(":"):
            self.next()
            upper = self.pipe()
            self.expect_op("]")
            return ("slice", term, None, upper)
        lower = self.pipe()
        if self.is_op(":"):
            self.next()
            if self.is_op("]"):
                self.next()
                return ("slice", term, lower, None)
            upper = self.pipe()
            self.expect_op("]")
            return ("slice", term, lower, upper)
        self.expect_op("]")
        return ("index", term, lower)

    def primary(self) -> Node:  # noqa: C901 - one case a kind of term
        t = self.next()
        k, v = t.kind, t.val
        if k == "num":
            return ("lit", v)
        if k == "str":
            return self.string(v, None)
        if k == "fmt":
            if self.peek().kind == "str":
                return self.string(self.next().val, v)
            return ("format", v)
        if k == "field":
            return ("index", ("id",), ("lit", v))
        if k == "var":
            if v == "__loc__":
                return ("lit", {"file": "<top-level>", "line": self.src.count("\n", 0, t.pos) + 1})
            return ("var", v, t.pos)
        if k == "op":
            if v == ".":
                if self.peek().kind == "str":
                    return ("index", ("id",), self.string(self.next().val, None))
                return ("id",)
            if v == "..":
                return ("call", "recurse", [], t.pos)
            if v == "(":
                inner = self.pipe()
                self.expect_op(")")
                return inner
            if v == "[":
                if self.is_op("]"):
                    self.next()
                    return ("collect", None)
                inner = self.pipe()
                self.expect_op("]")
                return ("collect", inner)
            if v == "{":
                return self.object()
            raise self.fail(t)
        if k == "kw":
            return self.keyword(t)
        if k == "ident":
            if v == "break" and self.peek().kind == "var":
                return ("break", self.next().val, t.pos)
            if v in _CONSTANTS and not self.is_op("("):
                return ("lit", _CONSTANTS[v])
            args: list[Node] = []
            if self.is_op("("):
                self.next()
                args.append(self.pipe())
                while self.is_op(";"):
                    self.next()
                    args.append(self.pipe())
                self.expect_op(")")
            return ("call", v, args, t.pos)
        raise self.fail(t)

    def keyword(self, t: Tok) -> Node:  # noqa: C901 - one case a keyword
        v = t.val
        if v == "if":
            return self.if_rest()
        if v == "try":
            body = self.postfix(allow_as=False) if not self.is_op("-") else self.unary()
            handler = None
            if self.is_kw("catch"):
                self.next()
                handler = self.postfix(allow_as=False)
            return ("try", body, handler)
        if v in ("reduce", "foreach"):
            source = self.postfix(allow_as=False)
            self.expect_kw("as")
            patterns = self.patterns()
            self.expect_op("(")
            init = self.pipe()
            self.expect_op(";")
            update = self.pipe()
            extract = None
            if v == "foreach" and self.is_op(";"):
                self.next()
                extract = self.pipe()
            self.expect_op(")")
            if v == "reduce":
                return ("reduce", source, patterns, init, update)
            return ("foreach", source, patterns, init, update, extract)
        if v == "label":
            name = self.next()
            if name.kind != "var":
                raise self.fail(name)
            self.expect_op("|")
            return ("label", name.val, self.pipe())
        if v == "def":
            self.i -= 1
            fdef = self.funcdef()
            return ("def", fdef, self.pipe())
        if v == "__loc__":
            raise self.fail(t)
        raise self.fail(t)

    def if_rest(self) -> Node:
        cond = self.pipe()
        self.expect_kw("then")
        then = self.pipe()
        if self.is_kw("elif"):
            self.next()
            return ("if", cond, then, self.if_rest())
        other = None
        if self.is_kw("else"):
            self.next()
            other = self.pipe()
        self.expect_kw("end")
        return ("if", cond, then, other)

    def funcdef(self) -> Node:
        self.expect_kw("def")
        name = self.next()
        if name.kind not in ("ident", "kw"):
            raise self.fail(name)
        params: list[str] = []
        if self.is_op("("):
            self.next()
            while True:
                p = self.next()
                if p.kind == "var":
                    params.append("$" + p.val)
                elif p.kind in ("ident", "kw"):
                    params.append(p.val)
                else:
                    raise self.fail(p)
                if self.is_op(")"):
                    self.next()
                    break
                self.expect_op(";")
        self.expect_op(":")
        body = self.pipe()
        self.expect_op(";")
        return (name.val, tuple(params), body)

    def string(self, parts: list[Any], fmt: str | None) -> Node:
        if all(isinstance(p, str) for p in parts):
            return ("lit", "".join(parts))
        nodes: list[Any] = []
        for p in parts:
            if isinstance(p, str):
                nodes.append(p)
            else:
                sub = Parser(p, self.src)
                nodes.append(sub.program())
        return ("interp", tuple(nodes), fmt or "text")

    def object(self) -> Node:  # noqa: C901 - one case a kind of key
        entries: list[tuple[Node, Node]] = []
        if self.is_op("}"):
            self.next()
            return ("object", ())
        while True:
            t = self.next()
            key: Node
            value: Node | None = None
            if t.kind == "var":
                if t.val == "__loc__":
                    key = ("lit", "__loc__")
                    value = ("lit", {"file": "<top-level>", "line": self.src.count("\n", 0, t.pos) + 1})
                elif self.is_op(":"):
                    key = ("var", t.val, t.pos)
                else:
                    key, value = ("lit", t.val), ("var", t.val, t.pos)
            elif t.kind in ("ident", "kw"):
                key = ("lit", t.val)
            elif t.kind == "num":
                key = ("lit", t.val)
            elif t.kind == "str":
                key = self.string(t.val, None)
            elif t.kind == "fmt" and self.peek().kind == "str":
                key = self.string(self.next().val, t.val)
            elif t.kind == "op" and t.val == "(":
                key = self.pipe()
                self.expect_op(")")
                if not self.is_op(":"):
                    raise self.fail()
            else:
                raise self.fail(t)
            if self.is_op(":"):
                self.next()
                value = self.objval()
            elif value is None:
                value = ("index", ("id",), key)
            entries.append((key, value))
            if self.is_op(","):
                self.next()
                continue
            self.expect_op("}")
            return ("object", tuple(entries))

    def objval(self) -> Node:
        return self.pipe(no_comma=True)

    def patterns(self) -> list[Node]:
        found = [self.pattern()]
        while self.is_op("?//"):
            self.next()
            found.append(self.pattern())
        return found

    def pattern(self) -> Node:  # noqa: C901 - one case a kind of pattern
        t = self.next()
        if t.kind == "var":
            return ("pvar", t.val)
        if t.kind == "op" and t.val == "[":
            elements = [self.pattern()]
            while self.is_op(","):
                self.next()
                elements.append(self.pattern())
            self.expect_op("]")
            return ("parray", tuple(elements))
        if t.kind == "op" and t.val == "{":
            entries: list[tuple[Node, str | None, Node | None]] = []
            while True:
                e = self.next()
                if e.kind == "var":
                    sub = None
                    if self.is_op(":"):
                        self.next()
                        sub = self.pattern()
                    entries.append((("lit", e.val), e.val, sub))
                else:
                    if e.kind in ("ident", "kw"):
                        key: Node = ("lit", e.val)
                    elif e.kind == "str":
                        key = self.string(e.val, None)
                    elif e.kind == "op" and e.val == "(":
                        key = self.pipe()
                        self.expect_op(")")
                    else:
                        raise self.fail(e)
                    self.expect_op(":")
                    entries.append((key, None, self.pattern()))
                if self.is_op(","):
                    self.next()
                    continue
                self.expect_op("}")
                return ("pobject", tuple(entries))
        raise self.fail(t)


def parse(src: str) -> Node:
    toks, _ = lex(src)
    return Parser(toks, src).program()


def parse_defs(src: str) -> list[Node]:
    toks, _ = lex(src)
    parser = Parser(toks, src)
    defs = []
    while parser.peek().kind != "eof":
        defs.append(parser.funcdef())
    return defs


# ---------------------------------------------------------------------------------------------
# operations on values

def _type_error(a: Any, b: Any, what: str) -> JqError:
    return JqError("%s (%s) and %s (%s) %s" % (kind(a), trunc(a), kind(b), trunc(b), what))


def index(v: Any, k: Any) -> Any:  # noqa: C901 - jq's cases of `.[k]`
    if isinstance(k, str):
        if isinstance(v, dict):
            return v.get(k)
        if v is None:
            return None
        raise JqError('Cannot index %s with string "%s"' % (kind(v), k))
    if is_num(k):
        if isinstance(v, list):
            if k != k:
                return None
            i = _to_int(k)  # jq truncates: .[-0.5] is .[0]
            if i < 0:
                i += len(v)
            return v[i] if 0 <= i < len(v) else None
        if v is None:
            return None
    elif isinstance(k, dict) and isinstance(v, (list, str)) or (isinstance(k, dict) and v is None):
        if v is None:
            return None
        lo, hi = _slice_bounds(v, k.get("start"), k.get("end"))
        return v[lo:hi]
    elif isinstance(k, list) and isinstance(v, list):
        return _indices_of(v, k)
    elif k is None and v is None:
        return None
    raise JqError("Cannot index %s with %s" % (kind(v), kind(k)))


def _slice_bounds(v: Any, start: Any, end: Any) -> tuple[int, int]:
    n = len(v)
    if start is not None and not is_num(start) or end is not None and not is_num(end):
        raise JqError("Start and end indices of an array slice must be numbers")
    lo = 0 if start is None or start != start else start
    hi = n if end is None or end != end else end
    lo = lo + n if lo < 0 else lo
    hi = hi + n if hi < 0 else hi
    lo = min(max(math.floor(lo), 0), n)
    hi = min(max(math.ceil(hi) if isinstance(hi, float) and hi == hi else int(hi), 0), n)
    return lo, max(lo, hi)


def _indices_of(v: list[Any], sub: list[Any]) -> Any:
    if not sub:
        return None
    m = len(sub)
    return [i for i in range(len(v) - m + 1) if all(jeq(v[i + j], sub[j]) for j in range(m))]


def iterate(v: Any, p: Any) -> Iterator[Pair]:
    if isinstance(v, list):
        if p is None:
            for x in v:
                yield x, None
        else:
            for i, x in enumerate(v):
                yield x, p + (i,)
    elif isinstance(v, dict):
        if p is None:
            for x in list(v.values()):
                yield x, None
        else:
            for k, x in list(v.items()):
                yield x, p + (k,)
    else:
        raise JqError("Cannot iterate over %s%s" % (kind(v), " (%s)" % trunc(v) if v is not None else ""))


def getpath(v: Any, path: Any) -> Any:
    if not isinstance(path, list):
        raise JqError("Path must be specified as an array")
    for k in path:
        if v is None:
            return None
        v = index(v, k)
    return v


def setpath(v: Any, path: list[Any], x: Any, at: int = 0) -> Any:  # noqa: C901 - jq's cases
    if at == len(path):
        return x
    k = path[at]
    if isinstance(k, str):
        if v is None:
            v = {}
        if not isinstance(v, dict):
            raise JqError('Cannot index %s with "%s"' % (kind(v), k))
        new = dict(v)
        new[k] = setpath(v.get(k), path, x, at + 1)
        return new
    if is_num(k):
        if v is None:
            v = []
        if not isinstance(v, list):
            raise JqError("Cannot index %s with number" % kind(v))
        if k != k:
            raise JqError("Cannot set array element at NaN index")
        i = _to_int(k)
        if i < 0:
            i += len(v)
            if i < 0:
                raise JqError("Out of bounds negative array index")
        if i > 1 << 26:
            raise JqError("Array index too large")
        new_list = list(v)
        if i >= len(new_list):
            new_list.extend([None] * (i + 1 - len(new_list)))
        new_list[i] = setpath(new_list[i], path, x, at + 1)
        return new_list
    if isinstance(k, dict):
        if v is None:
            v = []
        if isinstance(v, str):
            raise JqError("Cannot update string slices")
        if not isinstance(v, list):
            raise JqError("Cannot update field at object index of %s" % kind(v))
        lo, hi = _slice_bounds(v, k.get("start"), k.get("end"))
        inner = setpath(v[lo:hi], path, x, at + 1)
        if not isinstance(inner, list):
            raise JqError("A slice of an array can only be assigned another array")
        return v[:lo] + inner + v[hi:]
    raise JqError("Invalid path component")


def _delete_keys(v: Any, keys: list[Any]) -> Any:
    """Delete `keys` from one container at once (indices against its length before any)."""
    if v is None:
        return None
    if isinstance(v, dict):
        for k in keys:
            if not isinstance(k, str):
                raise JqError("Cannot delete field at index of object")
        return {k: x for k, x in v.items() if k not in keys}
    if isinstance(v, list):
        gone: set[int] = set()
        n = len(v)
        for k in keys:
            if isinstance(k, dict):
                lo, hi = _slice_bounds(v, k.get("start"), k.get("end"))
                gone.update(range(lo, hi))
            elif is_num(k):
                if k != k:
                    continue
                i = _to_int(k)
                i = i + n if i < 0 else i
                if 0 <= i < n:
                    gone.add(i)
            else:
                raise JqError("Cannot delete field at object index of array")
        return [x for i, x in enumerate(v) if i not in gone]
    raise JqError("Cannot delete field at %s index of %s" % (kind(keys[0]) if keys else "null", kind(v)))


def _delpaths_sorted(v: Any, paths: list[list[Any]]) -> Any:
    deletions: list[Any] = []
    i = 0
    while i < len(paths):
        key = paths[i][0]
        j = i
        while j < len(paths) and jeq(paths[j][0], key):
            j += 1
        group = paths[i:j]
        if any(len(path) == 1 for path in group):
            deletions.append(key)
        elif v is not None:
            child = index(v, key)
            if child is not None:
                v = setpath(v, [key], _delpaths_sorted(child, [path[1:] for path in group]))
        i = j
    return _delete_keys(v, deletions) if deletions else v


def delpaths(v: Any, paths: Any) -> Any:
    if not isinstance(paths, list):
        raise JqError("Paths must be specified as an array")
    for path in paths:
        if not isinstance(path, list):
            raise JqError("Path must be specified as an array")
    if any(not path for path in paths):
        return None
    return _delpaths_sorted(v, jsorted(paths))


def add(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    if is_num(a) and is_num(b):
        return float(a) + float(b)
    ta = type(a)
    if ta is type(b):
        if ta is str or ta is list:
            return a + b
        if ta is dict:
            merged = dict(a)
            merged.update(b)
            return merged
    raise _type_error(a, b, "cannot be added")


def subtract(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        return float(a) - float(b)
    if isinstance(a, list) and isinstance(b, list):
        return [x for x in a if not any(jeq(x, y) for y in b)]
    raise _type_error(a, b, "cannot be subtracted")


def _deep_merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    merged = dict(a)
    for k, y in b.items():
        x = merged.get(k)
        merged[k] = _deep_merge(x, y) if isinstance(x, dict) and isinstance(y, dict) else y
    return merged


def multiply(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        return float(a) * float(b)
    if isinstance(a, str) and is_num(b) or is_num(a) and isinstance(b, str):
        s, n = (a, b) if isinstance(a, str) else (b, a)
        if n < 0 or n != n:
            return None
        count = int(min(n, 1 << 30))
        if len(s) * count > 1 << 28:
            raise JqError("Repeat string result too long")
        return s * count
    if isinstance(a, dict) and isinstance(b, dict):
        return _deep_merge(a, b)
    raise _type_error(a, b, "cannot be multiplied")


def divide(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        if b == 0:
            raise _type_error(a, b, "cannot be divided because the divisor is zero")
        return float(a) / float(b)
    if isinstance(a, str) and isinstance(b, str):
        return split_string(a, b)
    raise _type_error(a, b, "cannot be divided")


def modulo(a: Any, b: Any) -> Any:
    if is_num(a) and is_num(b):
        if a != a or b != b:
            return math.nan
        ia, ib = _to_int(a), _to_int(b)
        if ib == 0:
            raise _type_error(a, b, "cannot be divided (remainder) because the divisor is zero")
        r = abs(ia) % abs(ib)
        return -r if ia < 0 else r
    raise _type_error(a, b, "cannot be divided")


def _to_int(x: Any) -> int:
    if isinstance(x, int):
        return x
    if x in (math.inf, -math.inf):
        return sys.maxsize if x > 0 else -sys.maxsize - 1
    return int(x)


def split_string(s: str, sep: str) -> list[str]:
    if not s:
        return []
    if not sep:
        return list(s)
    return s.split(sep)


_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": add, "-": subtract, "*": multiply, "/": divide, "%": modulo,
    "==": lambda a, b: jeq(a, b), "!=": lambda a, b: not jeq(a, b),
    "<": lambda a, b: jcmp(a, b) < 0, "<=": lambda a, b: jcmp(a, b) <= 0,
    ">": lambda a, b: jcmp(a, b) > 0, ">=": lambda a, b: jcmp(a, b) >= 0,
}


def length(v: Any) -> Any:
    if v is None:
        return 0
    if v is True or v is False:
        raise JqError("boolean (%s) has no length" % tojson(v))
    if is_num(v):
        return abs(v)
    return len(v)


def _contains(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return all(k in a and _contains(a[k], y) for k, y in b.items())
    if isinstance(a, list) and isinstance(b, list):
        return all(any(_contains(x, y) for x in a) for y in b)
    if isinstance(a, str) and isinstance(b, str):
        return b in a
    return kind(a) == kind(b) and jeq(a, b)


def contains(a: Any, b: Any) -> bool:
    if kind(a) != kind(b):
        raise _type_error(a, b, "cannot have their containment checked")
    return _contains(a, b)


def keys(v: Any, sort: bool = True) -> list[Any]:
    if isinstance(v, dict):
        return sorted(v) if sort else list(v)
    if isinstance(v, list):
        return list(range(len(v)))
    raise JqError("%s (%s) has no keys" % (kind(v), trunc(v)))


def has(v: Any, k: Any) -> bool:
    if isinstance(v, dict) and isinstance(k, str):
        return k in v
    if isinstance(v, list) and is_num(k):
        return 0 <= k < len(v)
    raise JqError("Cannot check whether %s has a %s key" % (kind(v), kind(k)))


def tonumber(v: Any) -> Any:
    if is_num(v):
        return v
    if isinstance(v, str):
        text = v.strip(" \t\n\r")
        if re.fullmatch(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", text):
            return float(text) if any(c in text for c in ".eE") else int(text)
        if text in ("nan", "-nan", "NaN", "-NaN"):
            return math.nan
        try:
            parsed = fromjson(v)
        except InputError as exc:
            raise JqError("%s (while parsing '%s')" % (exc, v)) from None
        if is_num(parsed):
            return parsed
    raise JqError("%s (%s) cannot be parsed as a number" % (kind(v), trunc(v)))


def flatten(v: Any, depth: Any) -> list[Any]:
    if not isinstance(v, list):
        raise JqError("Cannot iterate over %s (%s)" % (kind(v), trunc(v)))
    out: list[Any] = []
    for x in v:
        if isinstance(x, list) and depth != 0:
            out.extend(flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def implode(v: Any) -> str:
    if not isinstance(v, list):
        raise JqError("implode input must be an array")
    chars = []
    for c in v:
        if not is_num(c):
            raise JqError("%s (%s) can't be imploded, unicode codepoint needs to be numeric" % (kind(c), trunc(c)))
        code = int(c)
        chars.append(chr(code) if 0 <= code <= 0x10FFFF and not 0xD800 <= code < 0xE000 else "\ufffd")
    return "".join(chars)


def join(v: Any, sep: Any) -> Any:
    if not isinstance(v, (list, dict)):
        raise JqError("Cannot iterate over %s%s" % (kind(v), " (%s)" % trunc(v) if v is not None else ""))
    items = v if isinstance(v, list) else list(v.values())
    if not items:
        return ""
    parts: list[str] = []
    for x in items:
        if x is None:
            parts.append("")
        elif isinstance(x, str):
            parts.append(x)
        elif x is True or x is False or is_num(x):
            parts.append(tojson(x))
        else:
            so_far = "".join(part + sep for part in parts) if isinstance(sep, str) else ""
            raise _type_error(so_far, x, "cannot be added")
    if not isinstance(sep, str):
        if len(parts) == 1:
            return parts[0]
        raise _type_error(parts[0], sep, "cannot be added")
    return sep.join(parts)


def sort_values(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise JqError("%s (%s) cannot be sorted, as it is not an array" % (kind(v), trunc(v)))
    return jsorted(v)


# formats (@csv, @tsv...)

def _csv_field(x: Any) -> str:
    if isinstance(x, str):
        return '"' + x.replace('"', '""') + '"'
    if x is None:
        return ""
    if x is True or x is False or is_num(x):
        return tojson(x)
    raise JqError("%s (%s) is not valid in a csv row" % (kind(x), trunc(x)))


def _tsv_field(x: Any) -> str:
    if isinstance(x, str):
        return x.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    if x is None:
        return ""
    if x is True or x is False or is_num(x):
        return tojson(x)
    raise JqError("%s (%s) is not valid as a tsv field" % (kind(x), trunc(x)))


def _sh_word(x: Any) -> str:
    if isinstance(x, str):
        return "'" + x.replace("'", "'\\''") + "'"
    if isinstance(x, (list, dict)):
        raise JqError("%s (%s) can not be escaped for shell" % (kind(x), trunc(x)))
    return tojson(x)


_URI_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def apply_format(name: str, v: Any) -> str:  # noqa: C901 - one case a format
    if name == "text":
        return tostring(v)
    if name == "json":
        return tojson(v)
    if name == "html":
        s = tostring(v)
        return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                .replace("'", "&" + "apos;").replace('"', "&quot;"))
    if name == "uri":
        return "".join(chr(b) if b in _URI_SAFE else "%%%02X" % b for b in tostring(v).encode("utf-8", "replace"))
    if name in ("csv", "tsv"):
        if not isinstance(v, list):
            raise JqError("%s (%s) cannot be %s-formatted, only an array can be" % (kind(v), trunc(v), name))
        if name == "csv":
            return ",".join(_csv_field(x) for x in v)
        return "\t".join(_tsv_field(x) for x in v)
    if name == "sh":
        if isinstance(v, list):
            return " ".join(_sh_word(x) for x in v)
        return _sh_word(v)
    if name == "base64":
        return base64.b64encode(tostring(v).encode("utf-8", "replace")).decode("ascii")
    if name == "base64d":
        s = tostring(v)
        try:
            data = base64.b64decode(s.rstrip("=") + "=" * (-len(s.rstrip("=")) % 4))
        except (binascii.Error, ValueError):
            raise JqError("%s (%s) is not valid base64 data" % (kind(v), trunc(v))) from None
        return data.decode("utf-8", "replace")
    raise JqError("%s is not a valid format" % name)



# regular expressions (jq's are Oniguruma's, Perl syntax; these are Python's `re` after a rewrite
# of the forms that differ: named groups, \z, \h)

_REGEX_CACHE: dict[tuple[str, str], tuple[re.Pattern[str], bool, bool]] = {}


def _compile_regex(pattern: Any, flags: Any) -> tuple[re.Pattern[str], bool, bool]:
    if not isinstance(pattern, str):
        raise JqError("%s (%s) cannot be matched, as it is not a string" % (kind(pattern), trunc(pattern)))
    if flags is not None and not isinstance(flags, str):
        raise JqError("%s is not a string" % trunc(flags))
    flags = flags or ""
    cached = _REGEX_CACHE.get((pattern, flags))
    if cached:
        return cached
    reflags = 0
    glob = skip_empty = False
    for f in flags:
        if f == "g":
            glob = True
        elif f == "i":
            reflags |= re.IGNORECASE
        elif f == "x":
            reflags |= re.VERBOSE
        elif f in "sp":
            reflags |= re.DOTALL
        elif f == "n":
            skip_empty = True
        elif f == "l":
            pass
        else:
            raise JqError("%s is not a valid modifier string" % flags)
    text = re.sub(r"\(\?<(?![=!])", "(?P<", pattern)
    text = re.sub(r"(?<!\\)((?:\\\\)*)\\z", r"\1\\Z", text)
    text = re.sub(r"(?<!\\)((?:\\\\)*)\\h", r"\1[0-9a-fA-F]", text)
    try:
        compiled = re.compile(text, reflags)
    except re.error as exc:
        raise JqError("Regex failure: %s" % exc.msg) from None
    if len(_REGEX_CACHE) > 256:
        _REGEX_CACHE.clear()
    _REGEX_CACHE[(pattern, flags)] = (compiled, glob, skip_empty)
    return compiled, glob, skip_empty


def _match_object(m: re.Match[str]) -> dict[str, Any]:
    names = {index: name for name, index in m.re.groupindex.items()}
    captures = []
    for g in range(1, (m.re.groups or 0) + 1):
        start = m.start(g)
        if start < 0:
            captures.append({"offset": -1, "length": 0, "string": None, "name": names.get(g)})
        else:
            captures.append({"offset": start, "length": m.end(g) - start, "string": m.group(g), "name": names.get(g)})
    return {"offset": m.start(), "length": m.end() - m.start(), "string": m.group(), "captures": captures}


def regex_matches(v: Any, pattern: Any, flags: Any, test: bool = False) -> Any:
    if not isinstance(v, str):
        raise JqError("%s (%s) cannot be matched, as it is not a string" % (kind(v), trunc(v)))
    compiled, glob, skip_empty = _compile_regex(pattern, flags)
    if test:
        return compiled.search(v) is not None
    found = []
    for m in compiled.finditer(v):
        if skip_empty and m.end() == m.start():
            continue
        found.append(_match_object(m))
        if not glob:
            break
    return found


def _capture_object(match: dict[str, Any]) -> dict[str, Any]:
    return {c["name"]: c["string"] for c in match["captures"] if c["name"] is not None}


# dates

def gmtime(v: Any, local: bool = False) -> list[Any]:
    if not is_num(v):
        raise JqError("%s() requires a number" % ("localtime" if local else "gmtime"))
    seconds = float(v)
    try:
        tm = time.localtime(math.floor(seconds)) if local else time.gmtime(math.floor(seconds))
    except (OverflowError, OSError, ValueError):
        raise JqError("%s() requires a valid time" % ("localtime" if local else "gmtime")) from None
    frac = seconds - math.floor(seconds)
    sec: Any = tm.tm_sec + frac if frac else tm.tm_sec
    return [tm.tm_year, tm.tm_mon - 1, tm.tm_mday, tm.tm_hour, tm.tm_min, sec, (tm.tm_wday + 1) % 7, tm.tm_yday - 1]


def _struct_time(v: Any, what: str) -> time.struct_time:
    if not isinstance(v, list) or len(v) < 6 or not all(is_num(x) for x in v[:6]):
        raise JqError("%s requires parsed datetime inputs" % what)
    year, mon, mday, hour, minute, sec = (int(x) for x in v[:6])
    wday = int(v[6]) if len(v) > 6 and is_num(v[6]) else 0
    yday = int(v[7]) if len(v) > 7 and is_num(v[7]) else 0
    return time.struct_time((year, mon + 1, mday, hour, minute, sec, (wday + 6) % 7, yday + 1, 0))


def strftime(v: Any, fmt: Any, local: bool = False) -> str:
    what = "strflocaltime/1" if local else "strftime/1"
    if is_num(v):
        v = gmtime(v, local)
    if not isinstance(fmt, str):
        raise JqError("%s requires a string format" % what)
    tm = _struct_time(v, what)
    return time.strftime(fmt, tm)


def strptime(v: Any, fmt: Any) -> list[Any]:
    if not isinstance(v, str):
        raise JqError("strptime/1 requires string inputs and arguments")
    if not isinstance(fmt, str):
        raise JqError("strptime/1 requires string inputs and arguments")
    try:
        tm = time.strptime(v, fmt)
    except ValueError:
        raise JqError('date "%s" does not match format "%s"' % (v, fmt)) from None
    return [tm.tm_year, tm.tm_mon - 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (tm.tm_wday + 1) % 7,
            tm.tm_yday - 1]


def mktime(v: Any) -> int:
    if not isinstance(v, list):
        raise JqError("mktime requires array of 6 numbers")
    if len(v) < 6 or not all(is_num(x) for x in v[:6]):
        raise JqError("mktime requires parsed datetime inputs")
    year, mon, mday, hour, minute, sec = (int(math.floor(x)) for x in v[:6])
    return calendar.timegm((year, mon + 1, mday, hour, minute, sec, 0, 0, 0))


# ---------------------------------------------------------------------------------------------
# the evaluator

class Env:
    __slots__ = ("parent", "vars", "funcs")

    def __init__(self, parent: Env | None, vars: dict[str, Any] | None = None,
                 funcs: dict[tuple[str, int], Any] | None = None) -> None:
        self.parent = parent
        self.vars = vars
        self.funcs = funcs

    def var(self, name: str) -> Any:
        env: Env | None = self
        while env is not None:
            if env.vars is not None and name in env.vars:
                return env.vars[name]
            env = env.parent
        raise JqError("$%s is not defined" % name)

    def func(self, key: tuple[str, int]) -> Any:
        env: Env | None = self
        while env is not None:
            if env.funcs is not None:
                found = env.funcs.get(key)
                if found is not None:
                    return found
            env = env.parent
        return None


BAD = ("<not a path>",)  # the path of a value made in a path expression (`path(1)`): an error once used


def _key_error(k: Any) -> JqError:
    return JqError("Cannot use %s (%s) as object key" % (kind(k), trunc(k)))


def _invalid_path(v: Any) -> JqError:
    return JqError("Invalid path expression with result %s" % trunc(v, 30))


def _bad_access(t: Any, k: Any) -> JqError:
    return JqError("Invalid path expression near attempt to access element %s of %s" % (trunc(k), trunc(t, 30)))


def _out(result: Any, p: Any) -> Pair:
    """A value made, not reached: in path mode it has no path."""
    return result, (None if p is None else BAD)


def checked_path(x: Any, p: Any) -> list[Any]:
    if p is BAD:
        raise _invalid_path(x)
    return list(p)


Builtin = Callable[["Interp", list[Node], Any, Env, Any], Iterator[Pair]]
BUILTINS: dict[tuple[str, int], Builtin] = {}


class Interp:
    """Runs a parsed filter; `inputs` feeds `input`/`inputs`, `stderr` takes `debug`'s lines."""

    def __init__(self, inputs: Iterator[Any] | None = None, stderr: Callable[[str], None] | None = None,
                 filename: Callable[[], Any] | None = None) -> None:
        self.inputs = inputs if inputs is not None else iter(())
        self.stderr = stderr or (lambda text: None)
        self.filename = filename or (lambda: None)
        self.table: dict[str, Callable[[Node, Any, Env, Path | None], Iterator[Pair]]] = {
            "id": self.e_id, "lit": self.e_lit, "index": self.e_index, "slice": self.e_slice,
            "iter": self.e_iter, "pipe": self.e_pipe, "comma": self.e_comma, "neg": self.e_neg,
            "bin": self.e_bin, "and": self.e_and, "or": self.e_or, "alt": self.e_alt, "if": self.e_if,
            "try": self.e_try, "collect": self.e_collect, "object": self.e_object, "var": self.e_var,
            "format": self.e_format, "interp": self.e_interp, "as": self.e_as, "reduce": self.e_reduce,
            "foreach": self.e_foreach, "label": self.e_label, "break": self.e_break, "def": self.e_def,
            "call": self.e_call, "assign": self.e_assign,
        }

    def ev(self, node: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        return self.table[node[0]](node, v, env, p)

    def values(self, node: Node, v: Any, env: Env) -> Iterator[Any]:
        for x, _ in self.table[node[0]](node, v, env, None):
            yield x

    def cartesian(self, args: list[Node], v: Any, env: Env) -> Iterator[tuple[Any, ...]]:
        if not args:
            yield ()
            return
        for a in self.values(args[0], v, env):
            for rest in self.cartesian(args[1:], v, env):
                yield (a,) + rest

    # forms

    def e_id(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield v, p

    def e_lit(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield _out(n[1], p)

    def e_index(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, target, keynode = n
        if keynode[0] == "lit":
            k = keynode[1]
            for t, tp in self.ev(target, v, env, p):
                if tp is BAD:
                    raise _bad_access(t, k)
                yield index(t, k), (tp + (k,) if tp is not None else None)
            return
        for k in self.values(keynode, v, env):
            for t, tp in self.ev(target, v, env, p):
                if tp is not None:
                    if tp is BAD:
                        raise _bad_access(t, k)
                    if isinstance(k, list):
                        raise JqError("Cannot update field at object index of array")
                yield index(t, k), (tp + (k,) if tp is not None else None)

    def e_slice(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, target, lower, upper = n
        for hi in (self.values(upper, v, env) if upper is not None else iter([None])):
            for lo in (self.values(lower, v, env) if lower is not None else iter([None])):
                key = {"start": lo, "end": hi}
                for t, tp in self.ev(target, v, env, p):
                    if t is not None and not isinstance(t, (list, str)):
                        raise JqError("Cannot index %s with object" % kind(t))
                    if tp is BAD:
                        raise _bad_access(t, key)
                    yield index(t, key), (tp + (key,) if tp is not None else None)

    def e_iter(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for t, tp in self.ev(n[1], v, env, p):
            if tp is BAD:
                raise JqError("Invalid path expression near attempt to iterate through %s" % trunc(t, 30))
            yield from iterate(t, tp)

    def e_pipe(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        right = n[2]
        for x, xp in self.ev(n[1], v, env, p):
            yield from self.ev(right, x, env, xp)

    def e_comma(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield from self.ev(n[1], v, env, p)
        yield from self.ev(n[2], v, env, p)

    def e_neg(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for x in self.values(n[1], v, env):
            if not is_num(x):
                raise JqError("%s (%s) cannot be negated" % (kind(x), trunc(x)))
            yield _out(-x, p)

    def e_bin(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, op, left, right = n
        fn = _BINOPS[op]
        for r in self.values(right, v, env):
            for lv in self.values(left, v, env):
                yield _out(fn(lv, r), p)

    def e_and(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for a in self.values(n[1], v, env):
            if not truthy(a):
                yield self._boolean(False, p)
                continue
            for b in self.values(n[2], v, env):
                yield self._boolean(truthy(b), p)

    def e_or(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for a in self.values(n[1], v, env):
            if truthy(a):
                yield self._boolean(True, p)
                continue
            for b in self.values(n[2], v, env):
                yield self._boolean(truthy(b), p)

    def _boolean(self, b: bool, p: Any) -> Pair:
        return _out(b, p)

    def e_alt(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        found = False
        try:
            for x, xp in self.ev(n[1], v, env, p):
                if truthy(x):
                    found = True
                    yield x, xp
        except JqError:
            if found:
                raise
        if not found:
            yield from self.ev(n[2], v, env, p)

    def e_if(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, cond, then, other = n
        for c in self.values(cond, v, env):
            if truthy(c):
                yield from self.ev(then, v, env, p)
            elif other is not None:
                yield from self.ev(other, v, env, p)
            else:
                yield v, p

    def e_try(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, body, handler = n
        try:
            yield from self.ev(body, v, env, p)
        except JqError as err:
            if handler is not None:
                for x in self.values(handler, err.value, env):
                    yield _out(x, p)
        except RecursionError:
            if handler is not None:
                for x in self.values(handler, "Recursion too deep", env):
                    yield _out(x, p)

    def e_collect(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield _out([] if n[1] is None else list(self.values(n[1], v, env)), p)

    def e_object(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for obj in self._entries(n[1], 0, v, env, {}):
            yield _out(obj, p)

    def _entries(self, entries: tuple[Any, ...], i: int, v: Any, env: Env, acc: dict[str, Any]
                 ) -> Iterator[dict[str, Any]]:
        if i == len(entries):
            yield dict(acc)
            return
        knode, vnode = entries[i]
        for k in self.values(knode, v, env):
            if not isinstance(k, str):
                raise _key_error(k)
            for x in self.values(vnode, v, env):
                had, old = k in acc, acc.get(k)
                acc[k] = x
                yield from self._entries(entries, i + 1, v, env, acc)
                if had:
                    acc[k] = old
                else:
                    del acc[k]

    def e_var(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield _out(env.var(n[1]), p)

    def e_format(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        yield _out(apply_format(n[1], v), p)

    def e_interp(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, parts, fmt = n
        for s in self._interp(parts, len(parts) - 1, v, env, fmt):
            yield _out(s, p)

    def _interp(self, parts: tuple[Any, ...], i: int, v: Any, env: Env, fmt: str) -> Iterator[str]:
        if i < 0:
            yield ""
            return
        part = parts[i]
        if isinstance(part, str):
            for head in self._interp(parts, i - 1, v, env, fmt):
                yield head + part
            return
        for x in self.values(part, v, env):
            piece = apply_format(fmt, x)
            for head in self._interp(parts, i - 1, v, env, fmt):
                yield head + piece

    # bindings

    def e_as(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, source, patterns, body = n
        for x in self.values(source, v, env):
            if len(patterns) == 1:
                for benv in self.bind(patterns[0], x, env, v):
                    yield from self.ev(body, v, benv, p)
                continue
            yield from self._alternatives(patterns, x, env, v, body, p)

    def _alternatives(self, patterns: list[Node], x: Any, env: Env, v: Any, body: Node, p: Any
                      ) -> Iterator[Pair]:
        names: dict[str, Any] = {}
        for pat in patterns:
            for name in pattern_vars(pat):
                names[name] = None
        base = Env(env, names)
        for i, pat in enumerate(patterns):
            last = i == len(patterns) - 1
            try:
                for benv in self.bind(pat, x, base, v):
                    yield from self.ev(body, v, benv, p)
                return
            except JqError:
                if last:
                    raise

    def bind(self, pat: Node, x: Any, env: Env, dot: Any) -> Iterator[Env]:  # noqa: C901 - one case a pattern
        k = pat[0]
        if k == "pvar":
            yield Env(env, {pat[1]: x})
        elif k == "parray":
            if x is not None and not isinstance(x, list):
                raise JqError("Cannot index %s with number" % kind(x))
            yield from self._bind_all([(sub, index(x, i)) for i, sub in enumerate(pat[1])], 0, env, dot)
        else:
            if x is not None and not isinstance(x, dict):
                key0 = pat[1][0][0]
                raise JqError('Cannot index %s with string "%s"' % (kind(x), key0[1] if key0[0] == "lit" else "?"))
            yield from self._bind_object(pat[1], 0, x, env, dot)

    def _bind_all(self, pairs: list[tuple[Node, Any]], i: int, env: Env, dot: Any) -> Iterator[Env]:
        if i == len(pairs):
            yield env
            return
        sub, value = pairs[i]
        for e2 in self.bind(sub, value, env, dot):
            yield from self._bind_all(pairs, i + 1, e2, dot)

    def _bind_object(self, entries: tuple[Any, ...], i: int, x: Any, env: Env, dot: Any) -> Iterator[Env]:
        if i == len(entries):
            yield env
            return
        keynode, var, sub = entries[i]
        for key in self.values(keynode, dot, env):
            if not isinstance(key, str):
                raise JqError("Cannot index %s with %s" % (kind(x), kind(key)))
            value = index(x, key)
            e2 = Env(env, {var: value}) if var is not None else env
            if sub is None:
                yield from self._bind_object(entries, i + 1, x, e2, dot)
            else:
                for e3 in self.bind(sub, value, e2, dot):
                    yield from self._bind_object(entries, i + 1, x, e3, dot)

    def e_reduce(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, source, patterns, init, update = n
        for acc in self.values(init, v, env):
            for x in self.values(source, v, env):
                for benv in self.bind(patterns[0], x, env, v):
                    last: Any = None
                    for state in self.values(update, acc, benv):
                        last = state
                    acc = last
            yield _out(acc, p)

    def e_foreach(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, source, patterns, init, update, extract = n
        for acc in self.values(init, v, env):
            for x in self.values(source, v, env):
                for benv in self.bind(patterns[0], x, env, v):
                    for state in self.values(update, acc, benv):
                        acc = state
                        if extract is None:
                            yield _out(state, p)
                        else:
                            for out in self.values(extract, state, benv):
                                yield _out(out, p)

    def e_label(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        token = object()
        try:
            yield from self.ev(n[2], v, Env(env, {"*label*" + n[1]: token}), p)
        except Break as b:
            if b.label is not token:
                raise

    def e_break(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        raise Break(env.var("*label*" + n[1]))
        yield  # pragma: no cover - a generator

    def e_def(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        fdef = n[1]
        scope = Env(env, None, {})
        assert scope.funcs is not None
        scope.funcs[(fdef[0], len(fdef[1]))] = ("def", fdef, scope)
        yield from self.ev(n[2], v, scope, p)

    def e_call(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        name, args = n[1], n[2]
        f = env.func((name, len(args)))
        if f is None:
            builtin = BUILTINS.get((name, len(args)))
            if builtin is None:
                raise JqError("%s/%d is not defined" % (name, len(args)))
            yield from builtin(self, args, v, env, p)
            return
        k = f[0]
        if k == "closure":
            yield from self.ev(f[1], v, f[2], p)
        elif k == "value":
            yield _out(f[1], p)
        else:
            yield from self._call_def(f[1], f[2], args, v, env, p)

    def _call_def(self, fdef: Node, scope: Env, args: list[Node], v: Any, env: Env, p: Any
                  ) -> Iterator[Pair]:
        _, params, body = fdef
        funcs: dict[tuple[str, int], Any] = {}
        value_params = []
        for param, arg in zip(params, args, strict=True):
            if param.startswith("$"):
                value_params.append((param[1:], arg))
            else:
                funcs[(param, 0)] = ("closure", arg, env)
        fenv = Env(scope, None, funcs)
        if not value_params:
            yield from self.ev(body, v, fenv, p)
            return
        for vals in self.cartesian([arg for _, arg in value_params], v, env):
            names = [name for name, _ in value_params]
            bound = dict(zip(names, vals, strict=True))
            venv = Env(fenv, bound, {(name, 0): ("value", val) for name, val in bound.items()})
            yield from self.ev(body, v, venv, p)

    # assignment

    def e_assign(self, n: Node, v: Any, env: Env, p: Any) -> Iterator[Pair]:
        _, op, lhs, rhs = n
        if op == "|=":
            yield _out(self.modify(lhs, v, env, lambda x: next(self.values(rhs, x, env), _EMPTY)), p)
            return
        for r in self.values(rhs, v, env):
            if op == "=":
                result = v
                for x, path in self.ev(lhs, v, env, ()):
                    result = setpath(result, checked_path(x, path), r)
                yield _out(result, p)
            else:
                yield _out(self.modify(lhs, v, env, _updater(op, r)), p)

    def modify(self, lhs: Node, v: Any, env: Env, update: Callable[[Any], Any]) -> Any:
        result = v
        deletions = []
        for x, path in self.ev(lhs, v, env, ()):
            keys = checked_path(x, path)
            new = update(getpath(result, keys))
            if new is _EMPTY:
                deletions.append(keys)
            else:
                result = setpath(result, keys, new)
        return delpaths(result, deletions) if deletions else result


_EMPTY = object()


def _updater(op: str, r: Any) -> Callable[[Any], Any]:
    """`lhs op= r`'s change to each value at lhs's paths."""
    if op == "//=":
        return lambda x: x if truthy(x) else r
    fn = _BINOPS[op[0]]
    return lambda x: fn(x, r)


def pattern_vars(pat: Node) -> list[str]:
    if pat[0] == "pvar":
        return [pat[1]]
    if pat[0] == "parray":
        return [name for sub in pat[1] for name in pattern_vars(sub)]
    found = []
    for _, var, sub in pat[1]:
        if var is not None:
            found.append(var)
        if sub is not None:
            found.extend(pattern_vars(sub))
    return found


# ---------------------------------------------------------------------------------------------
# builtins written in Python

def _register(name: str, arity: int) -> Callable[[Builtin], Builtin]:
    def deco(f: Builtin) -> Builtin:
        BUILTINS[(name, arity)] = f
        return f
    return deco


def _value_builtin(name: str, arity: int, fn: Callable[..., Any]) -> None:
    def run(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
        for vals in it.cartesian(args, v, env):
            yield _out(fn(v, *vals), p)
    BUILTINS[(name, arity)] = run


def _need_number(name: str, v: Any) -> float:
    if not is_num(v):
        raise JqError("%s (%s) number required" % (kind(v), trunc(v)))
    return float(v)


def _math1(name: str, fn: Callable[[float], float]) -> None:
    def run(v: Any) -> Any:
        x = _need_number(name, v)
        try:
            return float(fn(x))
        except ValueError:
            if x == 0 and name.startswith("log") and name != "log1p":
                return -math.inf
            return math.nan
        except OverflowError:
            return math.inf
    _value_builtin(name, 0, run)


def _math2(name: str, fn: Callable[[float, float], float]) -> None:
    def run(v: Any, a: Any, b: Any) -> Any:
        x, y = _need_number(name, a), _need_number(name, b)
        try:
            return float(fn(x, y))
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf
    _value_builtin(name, 2, run)


def _c_round(x: float) -> float:
    return math.copysign(math.floor(abs(x) + 0.5), x) if math.isfinite(x) else x


def _significand(x: float) -> float:
    if x == 0 or not math.isfinite(x):
        return x
    m, _ = math.frexp(x)
    return m * 2


def _logb(x: float) -> float:
    if x == 0:
        return -math.inf
    if not math.isfinite(x):
        return abs(x)
    return float(math.frexp(x)[1] - 1)


for _name, _fn in {
    "floor": math.floor, "ceil": math.ceil, "round": _c_round, "sqrt": math.sqrt, "fabs": math.fabs,
    "exp": math.exp, "exp2": lambda x: 2.0 ** x, "exp10": lambda x: 10.0 ** x, "log": math.log,
    "log2": math.log2, "log10": math.log10, "log1p": math.log1p, "expm1": math.expm1, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "asinh": math.asinh, "acosh": math.acosh,
    "atanh": math.atanh, "cbrt": lambda x: math.copysign(abs(x) ** (1.0 / 3.0), x),
    "trunc": math.trunc, "rint": round, "nearbyint": round, "significand": _significand, "logb": _logb,
    "gamma": math.lgamma, "lgamma": math.lgamma, "tgamma": math.gamma, "lgamma_r": math.lgamma,
}.items():
    _math1(_name, _fn)  # type: ignore[arg-type]

for _name, _fn2 in {
    "pow": math.pow, "atan2": math.atan2, "fmod": math.fmod, "fmin": min, "fmax": max,
    "ldexp": lambda x, e: math.ldexp(x, int(e)), "scalb": lambda x, e: x * 2.0 ** e,
    "scalbln": lambda x, e: math.ldexp(x, int(e)), "copysign": math.copysign, "hypot": math.hypot,
    "nextafter": math.nextafter, "drem": math.remainder,
}.items():
    _math2(_name, _fn2)  # type: ignore[arg-type]

_value_builtin("frexp", 0, lambda v: list(math.frexp(_need_number("frexp", v))))
_value_builtin("modf", 0, lambda v: list(math.modf(_need_number("modf", v))))
_value_builtin("length", 0, length)
def _utf8bytelength(v: Any) -> int:
    if not isinstance(v, str):
        raise JqError("%s (%s) only strings have UTF-8 byte length" % (kind(v), trunc(v)))
    return len(v.encode("utf-8", "surrogateescape"))


def _explode(v: Any) -> list[int]:
    if not isinstance(v, str):
        raise JqError("%s (%s) cannot be exploded, as it is not a string" % (kind(v), trunc(v)))
    return [ord(c) for c in v]


def _setpath(v: Any, path: Any, x: Any) -> Any:
    if not isinstance(path, list):
        raise JqError("Path must be specified as an array")
    return setpath(v, path, x)


def _format(v: Any, name: Any) -> str:
    if not isinstance(name, str):
        raise JqError("%s (%s) is not a valid format" % (kind(name), trunc(name)))
    return apply_format(name, v)


def _flatten(v: Any, depth: Any) -> list[Any]:
    if not is_num(depth) or depth < 0:
        raise JqError("flatten depth must not be negative")
    return flatten(v, depth)


_value_builtin("utf8bytelength", 0, _utf8bytelength)
_value_builtin("not", 0, lambda v: not truthy(v))
_value_builtin("keys", 0, keys)
_value_builtin("keys_unsorted", 0, lambda v: keys(v, sort=False))
_value_builtin("has", 1, has)
_value_builtin("contains", 1, contains)
_value_builtin("tostring", 0, tostring)
_value_builtin("tonumber", 0, tonumber)
_value_builtin("type", 0, kind)
_value_builtin("infinite", 0, lambda v: math.inf)
_value_builtin("nan", 0, lambda v: math.nan)
_value_builtin("isinfinite", 0, lambda v: is_num(v) and v in (math.inf, -math.inf))
_value_builtin("isnan", 0, lambda v: is_num(v) and v != v)
_value_builtin("isnormal", 0, lambda v: is_num(v) and math.isfinite(v) and v != 0 and abs(v) >= sys.float_info.min)
_value_builtin("sort", 0, sort_values)
_value_builtin("tojson", 0, tojson)
_value_builtin("explode", 0, _explode)
_value_builtin("implode", 0, implode)
_value_builtin("flatten", 0, lambda v: flatten(v, -1))
_value_builtin("join", 1, join)
_value_builtin("delpaths", 1, delpaths)
_value_builtin("setpath", 2, _setpath)
_value_builtin("format", 1, _format)
_value_builtin("_match_impl", 3, lambda v, pattern, flags, test: regex_matches(v, pattern, flags, truthy(test)))
_value_builtin("gmtime", 0, gmtime)
_value_builtin("localtime", 0, lambda v: gmtime(v, local=True))
_value_builtin("mktime", 0, mktime)
_value_builtin("strftime", 1, strftime)
_value_builtin("strflocaltime", 1, lambda v, fmt: strftime(v, fmt, local=True))
_value_builtin("strptime", 1, strptime)
_value_builtin("now", 0, lambda v: time.time())
_value_builtin("input_line_number", 0, lambda v: 0)

_ASCII_DOWN = {c: c + 32 for c in range(65, 91)}
_ASCII_UP = {c: c - 32 for c in range(97, 123)}


def _string_in(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise JqError("%s input must be a string" % name)
    return v


_value_builtin("ascii_downcase", 0, lambda v: _string_in("ascii_downcase", v).translate(_ASCII_DOWN))
_value_builtin("ascii_upcase", 0, lambda v: _string_in("ascii_upcase", v).translate(_ASCII_UP))
_value_builtin("ltrimstr", 1, lambda v, s: v[len(s):] if isinstance(v, str) and isinstance(s, str)
               and v.startswith(s) else v)
_value_builtin("rtrimstr", 1, lambda v, s: v[:len(v) - len(s)] if isinstance(v, str) and isinstance(s, str)
               and v.endswith(s) and s else v)


def _startswith(v: Any, s: Any, end: bool = False) -> bool:
    if not isinstance(v, str) or not isinstance(s, str):
        raise JqError("%s() requires string inputs" % ("endswith" if end else "startswith"))
    return v.endswith(s) if end else v.startswith(s)


_value_builtin("startswith", 1, _startswith)
_value_builtin("endswith", 1, lambda v, s: _startswith(v, s, end=True))


def _split1(v: Any, sep: Any) -> list[str]:
    if not isinstance(v, str) or not isinstance(sep, str):
        raise JqError("split input and separator must be strings")
    return split_string(v, sep)


def _split2(v: Any, pattern: Any, flags: Any) -> list[str]:
    if not isinstance(v, str):
        raise JqError("%s (%s) cannot be matched, as it is not a string" % (kind(v), trunc(v)))
    pieces, prev = [], 0
    for m in regex_matches(v, pattern, (flags or "") + "g"):
        pieces.append(v[prev:m["offset"]])
        prev = m["offset"] + m["length"]
    pieces.append(v[prev:])
    return pieces


_value_builtin("split", 1, _split1)
_value_builtin("split", 2, _split2)


def _strindices(v: str, s: str) -> list[int]:
    if not s:
        return []
    found, at = [], v.find(s)
    while at >= 0:
        found.append(at)
        at = v.find(s, at + 1)
    return found


def indices(v: Any, i: Any) -> Any:
    if isinstance(v, list):
        return _indices_of(v, i if isinstance(i, list) else [i])
    if isinstance(v, str) and isinstance(i, str):
        return _strindices(v, i)
    return index(v, i)


def _first_or_none(found: Any, last: bool = False) -> Any:
    if not isinstance(found, list):
        return None if found is None else index(found, -1 if last else 0)
    return (found[-1] if last else found[0]) if found else None


_value_builtin("indices", 1, indices)
_value_builtin("index", 1, lambda v, i: _first_or_none(indices(v, i)))
_value_builtin("rindex", 1, lambda v, i: _first_or_none(indices(v, i), last=True))


def _iterable_values(v: Any) -> list[Any]:
    if isinstance(v, list):
        return v
    if isinstance(v, dict):
        return list(v.values())
    raise JqError("Cannot iterate over %s%s" % (kind(v), " (%s)" % trunc(v) if v is not None else ""))


def _add(v: Any) -> Any:
    total: Any = None
    for x in _iterable_values(v):
        total = add(total, x)
    return total


def _minmax(v: Any, biggest: bool) -> Any:
    if not isinstance(v, list):
        raise JqError("%s (%s) and %s (%s) cannot be iterated over" % (kind(v), trunc(v), kind(v), trunc(v)))
    best: Any = None
    for i, x in enumerate(v):
        if i == 0 or (jcmp(x, best) >= 0 if biggest else jcmp(x, best) < 0):
            best = x
    return best


def _unique(v: Any) -> list[Any]:
    out: list[Any] = []
    for x in sort_values(v):
        if not out or not jeq(out[-1], x):
            out.append(x)
    return out


def _to_entries(v: Any) -> list[Any]:
    return [{"key": k, "value": index(v, k)} for k in keys(v, sort=False)]


def _from_entries(v: Any) -> dict[str, Any]:
    """jq 1.7.1's: the key is .key // .Key // .name // .Name, the value .value, else .Value."""
    out: dict[str, Any] = {}
    for e in _iterable_values(v):
        key: Any = None
        for name in ("key", "Key", "name", "Name"):
            key = index(e, name)
            if truthy(key):
                break
        if not isinstance(key, str):
            raise _key_error(key)
        out[key] = index(e, "value") if has(e, "value") else index(e, "Value")
    return out


def _reverse(v: Any) -> Any:
    if v is None:
        return []
    if isinstance(v, (list, str)):
        return v[::-1]
    raise JqError("Cannot index %s with number" % kind(v))


def _tostream(v: Any) -> list[Any]:
    events: list[Any] = []

    def walk(x: Any, path: list[Any], top: bool) -> None:
        if isinstance(x, (list, dict)) and x:
            items = list(enumerate(x)) if isinstance(x, list) else list(x.items())
            for k, child in items:
                walk(child, path + [k], False)
            events.append([path + [items[-1][0]]])
        else:
            events.append([path, x])
    walk(v, [], True)
    return events


def _bsearch(v: Any, target: Any) -> int:
    if not isinstance(v, list):
        raise JqError("%s (%s) cannot be searched from" % (kind(v), trunc(v)))
    lo, hi = 0, len(v)
    while lo < hi:
        mid = (lo + hi) // 2
        c = jcmp(v[mid], target)
        if c == 0:
            return mid
        if c < 0:
            lo = mid + 1
        else:
            hi = mid
    return -1 - lo


_value_builtin("add", 0, _add)
_value_builtin("min", 0, lambda v: _minmax(v, False))
_value_builtin("max", 0, lambda v: _minmax(v, True))
_value_builtin("unique", 0, _unique)
_value_builtin("to_entries", 0, _to_entries)
_value_builtin("from_entries", 0, _from_entries)
_value_builtin("reverse", 0, _reverse)
_value_builtin("_tostream", 0, _tostream)
_value_builtin("bsearch", 1, _bsearch)
_value_builtin("flatten", 1, _flatten)


def _fromjson(v: Any) -> Any:
    if not isinstance(v, str):
        raise JqError("%s (%s) cannot be parsed, as it is not a string" % (kind(v), trunc(v)))
    try:
        return fromjson(v)
    except InputError as exc:
        raise JqError("%s (while parsing '%s')" % (exc, v)) from None


_value_builtin("fromjson", 0, _fromjson)


@_register("empty", 0)
def _b_empty(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    return iter(())


@_register("error", 0)
def _b_error(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    raise JqError(v)


@_register("error", 1)
def _b_error1(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for msg in it.values(args[0], v, env):
        raise JqError(msg)
    return iter(())


@_register("path", 1)
def _b_path(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for x, pp in it.ev(args[0], v, env, ()):
        yield _out(checked_path(x, pp), p)


@_register("getpath", 1)
def _b_getpath(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for path in it.values(args[0], v, env):
        if p is BAD:
            raise _bad_access(v, path)
        try:
            result = getpath(v, path)
        except JqError:
            if p is None:
                raise
            result = None
        yield result, (p + tuple(path) if p is not None else None)


@_register("limit", 2)
def _b_limit(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for n in it.values(args[0], v, env):
        if not is_num(n):
            raise JqError("Invalid limit: must be a number")
        if n <= 0:
            if n < 0:
                yield from it.ev(args[1], v, env, p)
            continue
        count = 0
        for pair in it.ev(args[1], v, env, p):
            yield pair
            count += 1
            if count >= n:
                break


@_register("first", 1)
def _b_first(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for pair in it.ev(args[0], v, env, p):
        yield pair
        return


@_register("nth", 2)
def _b_nth(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for n in it.values(args[0], v, env):
        if not is_num(n):
            raise JqError("Cannot index number with number")
        if n < 0:
            raise JqError("nth doesn't support negative indices")
        for i, pair in enumerate(it.ev(args[1], v, env, p)):
            if i >= n:
                yield pair
                break


@_register("range", 2)
def _b_range(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for lo, hi in it.cartesian(args, v, env):
        if not is_num(lo) or not is_num(hi):
            raise JqError("Range bounds must be numeric")
        x = lo
        while x < hi:
            yield _out(x, p)
            x += 1


@_register("range", 3)
def _b_range3(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for lo, hi, by in it.cartesian(args, v, env):
        if not (is_num(lo) and is_num(hi) and is_num(by)):
            raise JqError("Range bounds must be numeric")
        x = lo
        if by > 0:
            while x < hi:
                yield _out(x, p)
                x += by
        elif by < 0:
            while x > hi:
                yield _out(x, p)
                x += by


def _loop(it: Interp, frames: Callable[[Any], Iterator[tuple[bool, Any]]], v: Any, p: Any) -> Iterator[Pair]:
    """A jq recursion (`def r: ..., (f | r)`) run with a stack, not Python's: `[limit(100000;
    repeat(1))]` and `until` loops of any length."""
    stack = [frames(v)]
    while stack:
        try:
            is_output, x = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if is_output:
            yield _out(x, p)
        else:
            stack.append(frames(x))


@_register("while", 2)
def _b_while(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    cond, update = args

    def frames(x: Any) -> Iterator[tuple[bool, Any]]:
        for c in it.values(cond, x, env):
            if truthy(c):
                yield True, x
                for y in it.values(update, x, env):
                    yield False, y
    return _loop(it, frames, v, p)


@_register("until", 2)
def _b_until(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    cond, update = args

    def frames(x: Any) -> Iterator[tuple[bool, Any]]:
        for c in it.values(cond, x, env):
            if truthy(c):
                yield True, x
            else:
                for y in it.values(update, x, env):
                    yield False, y
    return _loop(it, frames, v, p)


@_register("repeat", 1)
def _b_repeat(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    while True:
        yield from it.ev(args[0], v, env, p)


def _by(it: Interp, node: Node, v: Any, env: Env, what: str) -> list[tuple[list[Any], Any]]:
    if not isinstance(v, list):
        raise JqError("Cannot index %s with number" % kind(v)) if not isinstance(v, dict) else \
            JqError("%s (%s) cannot be %s, as it is not an array" % (kind(v), trunc(v), what))
    return [(list(it.values(node, x, env)), x) for x in v]


def _sorted_by(pairs: list[tuple[list[Any], Any]]) -> list[tuple[list[Any], Any]]:
    return sorted(pairs, key=lambda pair: _Key(pair[0]))


@_register("sort_by", 1)
def _b_sort_by(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    result = [x for _, x in _sorted_by(_by(it, args[0], v, env, "sorted"))]
    yield _out(result, p)


def _groups(pairs: list[tuple[list[Any], Any]]) -> list[list[Any]]:
    groups: list[list[Any]] = []
    last: Any = _EMPTY
    for key, x in _sorted_by(pairs):
        if last is _EMPTY or not jeq(key, last):
            groups.append([])
            last = key
        groups[-1].append(x)
    return groups


@_register("group_by", 1)
def _b_group_by(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    result = _groups(_by(it, args[0], v, env, "grouped"))
    yield _out(result, p)


@_register("unique_by", 1)
def _b_unique_by(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    result = [g[0] for g in _groups(_by(it, args[0], v, env, "grouped"))]
    yield _out(result, p)


def _extreme_by(it: Interp, args: list[Node], v: Any, env: Env, biggest: bool) -> Any:
    best: Any = None
    best_key: Any = None
    for i, (key, x) in enumerate(_by(it, args[0], v, env, "iterated over")):
        if i == 0 or (jcmp(key, best_key) >= 0 if biggest else jcmp(key, best_key) < 0):
            best, best_key = x, key
    return best


@_register("min_by", 1)
def _b_min_by(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    yield _out(_extreme_by(it, args, v, env, False), p)


@_register("max_by", 1)
def _b_max_by(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    yield _out(_extreme_by(it, args, v, env, True), p)


@_register("input", 0)
def _b_input(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    try:
        x = next(it.inputs)
    except StopIteration:
        raise JqError("No more inputs") from None
    yield _out(x, p)


@_register("inputs", 0)
def _b_inputs(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for x in it.inputs:
        yield _out(x, p)


@_register("debug", 0)
def _b_debug(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    it.stderr('["DEBUG:",%s]\n' % tojson(v))
    yield v, p


@_register("stderr", 0)
def _b_stderr(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    it.stderr(tojson(v))
    yield v, p


@_register("input_filename", 0)
def _b_input_filename(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    yield _out(it.filename(), p)


@_register("halt", 0)
def _b_halt(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    raise Halt(0)


@_register("halt_error", 1)
def _b_halt_error(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    for code in it.values(args[0], v, env):
        if not is_num(code):
            raise JqError("halt_error/1: number required")
        raise Halt(int(code), v, True)
    return iter(())


@_register("builtins", 0)
def _b_builtins(it: Interp, args: list[Node], v: Any, env: Env, p: Any) -> Iterator[Pair]:
    names = {"%s/%d" % key for key in BUILTINS if not key[0].startswith("_")}
    names.update("%s/%d" % (d[0], len(d[1])) for d in prelude() if not d[0].startswith("_"))
    yield _out(sorted(names), p)


def _sub(it: Interp, args: list[Node], v: Any, env: Env, p: Any, glob: bool) -> Iterator[Pair]:
    flag_node: Node = args[2] if len(args) > 2 else ("lit", "")
    for pattern, flags in it.cartesian([args[0], flag_node], v, env):
        if not isinstance(v, str):
            raise JqError("%s (%s) cannot be matched, as it is not a string" % (kind(v), trunc(v)))
        if flags is not None and not isinstance(flags, str):
            raise JqError("%s (%s) is not a string" % (kind(flags), trunc(flags)))
        matches = regex_matches(v, pattern, (flags or "") + ("g" if glob else ""))
        results: list[Any] = []
        prev = 0
        for m in matches:
            gap = v[prev:m["offset"]]
            for ix, insert in enumerate(list(it.values(args[1], _capture_object(m), env))):
                piece = add(gap, insert)
                if ix < len(results):
                    results[ix] = add(results[ix], piece)
                else:
                    results.extend([None] * (ix - len(results)))
                    results.append(piece)
            prev = m["offset"] + m["length"]
        outputs = [add(r, v[prev:]) for r in results]
        emitted = False
        for out in outputs:
            if truthy(out):
                emitted = True
                yield _out(out, p)
        if not emitted:
            yield _out(v, p)


BUILTINS[("sub", 2)] = lambda it, args, v, env, p: _sub(it, args, v, env, p, False)
BUILTINS[("sub", 3)] = lambda it, args, v, env, p: _sub(it, args, v, env, p, False)
BUILTINS[("gsub", 2)] = lambda it, args, v, env, p: _sub(it, args, v, env, p, True)
BUILTINS[("gsub", 3)] = lambda it, args, v, env, p: _sub(it, args, v, env, p, True)


# builtins written in jq (ours, from jq's manual: each is what the manual says the builtin does)

PRELUDE = r"""
def halt_error: halt_error(5);
def error(msg): msg | error;
def map(f): [.[] | f];
def select(f): if f then . else empty end;
def recurse(f): def r: ., (f | r); r;
def recurse(f; cond): def r: ., (f | select(cond) | r); r;
def recurse: recurse(.[]?);
def values: select(. != null);
def nulls: select(. == null);
def booleans: select(type == "boolean");
def numbers: select(type == "number");
def strings: select(type == "string");
def arrays: select(type == "array");
def objects: select(type == "object");
def iterables: select(type | . == "array" or . == "object");
def scalars: select(type | . != "array" and . != "object");
def isfinite: type == "number" and (isinfinite | not);
def finites: select(isfinite);
def normals: select(isnormal);
def map_values(f): .[] |= f;
def with_entries(f): to_entries | map(f) | from_entries;
def del(f): delpaths([path(f)]);
def paths: path(..) | select(length > 0);
def paths(node_filter): path(.. | select(node_filter)) | select(length > 0);
def leaf_paths: paths(scalars);
def isempty(g): first((g | false), true);
def all(generator; condition): isempty(first(generator | condition and empty));
def any(generator; condition): isempty(first(generator | condition or empty)) | not;
def all(condition): all(.[]; condition);
def any(condition): any(.[]; condition);
def all: all(.[]; .);
def any: any(.[]; .);
def last(g): reduce g as $item (null; $item);
def nth($n): .[$n];
def first: .[0];
def last: .[-1];
def in(xs): . as $x | xs | has($x);
def inside(xs): . as $x | xs | contains($x);
def combinations: if length == 0 then [] else .[0][] as $x | (.[1:] | combinations) as $rest | [$x] + $rest end;
def combinations(n): . as $dot | [range(n) | $dot] | combinations;
def walk(f): def w: if type == "object" then map_values(w) elif type == "array" then map(w) else . end | f; w;
def env: $ENV;
def transpose: [range(0; map(length) | max // 0) as $i | [.[][$i]]];
def range($x): range(0; $x);
def todateiso8601: strftime("%Y-%m-%dT%H:%M:%SZ");
def fromdateiso8601: strptime("%Y-%m-%dT%H:%M:%SZ") | mktime;
def todate: todateiso8601;
def fromdate: fromdateiso8601;
def date: todate;
def dateadd(u; n): . + n;
def datesub(u; n): . - n;
def match(re; mode): _match_impl(re; mode; false) | .[];
def match($val): ($val | type) as $vt | if $vt == "string" then match($val; null)
  elif $vt == "array" and ($val | length) > 1 then match($val[0]; $val[1])
  elif $vt == "array" and ($val | length) > 0 then match($val[0]; null)
  else error($vt + " not a string or array") end;
def test(re; mode): _match_impl(re; mode; true);
def test($val): ($val | type) as $vt | if $vt == "string" then test($val; null)
  elif $vt == "array" and ($val | length) > 1 then test($val[0]; $val[1])
  elif $vt == "array" and ($val | length) > 0 then test($val[0]; null)
  else error($vt + " not a string or array") end;
def capture(re; mods): match(re; mods) | [.captures[] | select(.name != null) | {(.name): .string}] | add // {};
def capture($val): ($val | type) as $vt | if $vt == "string" then capture($val; null)
  elif $vt == "array" and ($val | length) > 1 then capture($val[0]; $val[1])
  elif $vt == "array" and ($val | length) > 0 then capture($val[0]; null)
  else error($vt + " not a string or array") end;
def scan($re; $flags): match($re; "g" + ($flags // ""))
  | if (.captures | length) > 0 then [.captures[].string] else .string end;
def scan($re): scan($re; null);
def splits($re; flags): split($re; flags) | .[];
def splits($re): splits($re; null);
def tostream: _tostream[];
def fromstream(f): {x: null, e: false} as $init
  | foreach f as $i ($init;
      if .e then $init else . end
      | if $i | length == 2
        then setpath(["e"]; $i[0] | length == 0) | setpath(["x"] + $i[0]; $i[1])
        else setpath(["e"]; $i[0] | length == 1) end;
      if .e then .x else empty end);
def truncate_stream(stream): . as $n | null | stream | . as $input
  | if (.[0] | length) > $n then setpath([0]; $input[0][$n:]) else empty end;
def pick(pathexps): . as $top | reduce path(pathexps) as $p (null; setpath($p; $top | getpath($p)));
def debug(msgs): (msgs | debug | empty), .;
def abs: if . < 0 then - . else . end;
def INDEX(stream; idx_expr): reduce stream as $row ({}; .[$row | idx_expr | tostring] |= $row);
def INDEX(idx_expr): INDEX(.[]; idx_expr);
def IN(s): any(s == .; .);
def IN(src; s): any(src == s; .);
def JOIN($idx; idx_expr): [.[] | [., $idx[idx_expr]]];
def JOIN($idx; stream; idx_expr): stream | [., $idx[idx_expr]];
def JOIN($idx; stream; idx_expr; join_expr): stream | [., $idx[idx_expr]] | join_expr;
"""

_PRELUDE: list[Node] | None = None


def prelude() -> list[Node]:
    global _PRELUDE
    if _PRELUDE is None:
        _PRELUDE = parse_defs(PRELUDE)
    return _PRELUDE


def root_env(variables: dict[str, Any]) -> Env:
    funcs: dict[tuple[str, int], Any] = {}
    base = Env(None, dict(variables), funcs)
    for d in prelude():
        funcs[(d[0], len(d[1]))] = ("def", d, base)
    return base


# ---------------------------------------------------------------------------------------------
# compile-time checks: every function, variable, label and format must be defined

def defined_functions() -> set[tuple[str, int]]:
    names = {key for key in BUILTINS}
    names.update((d[0], len(d[1])) for d in prelude())
    return names


def check(node: Node, variables: set[str]) -> list[tuple[str, int]]:
    """What is not defined, each with where it is named in the filter."""
    errors: list[tuple[str, int]] = []
    _check(node, defined_functions(), set(variables), set(), errors)
    return errors


def _check(node: Any, funcs: set[tuple[str, int]], variables: set[str], labels: set[str],  # noqa: C901
           errors: list[tuple[str, int]]) -> None:
    if not isinstance(node, tuple) or not node:
        return
    k = node[0]
    if k == "call":
        if (node[1], len(node[2])) not in funcs:
            errors.append(("%s/%d is not defined" % (node[1], len(node[2])), node[3]))
        for arg in node[2]:
            _check(arg, funcs, variables, labels, errors)
    elif k == "var":
        if node[1] not in variables:
            errors.append(("$%s is not defined" % node[1], node[2]))
    elif k == "break":
        if node[1] not in labels:
            errors.append(("$*label-%s is not defined" % node[1], node[2]))
    elif k == "interp":
        for part in node[1]:
            _check(part, funcs, variables, labels, errors)
    elif k == "as":
        _check(node[1], funcs, variables, labels, errors)
        names = {n for pat in node[2] for n in pattern_vars(pat)}
        for pat in node[2]:
            _check_pattern(pat, funcs, variables, labels, errors)
        _check(node[3], funcs, variables | names, labels, errors)
    elif k in ("reduce", "foreach"):
        _check(node[1], funcs, variables, labels, errors)
        names = {n for pat in node[2] for n in pattern_vars(pat)}
        _check(node[3], funcs, variables, labels, errors)
        for part in node[4:]:
            _check(part, funcs, variables | names, labels, errors)
    elif k == "label":
        _check(node[2], funcs, variables, labels | {node[1]}, errors)
    elif k == "def":
        name, params, body = node[1]
        inner = funcs | {(name, len(params))}
        _check(node[2], inner, variables, labels, errors)
        pfuncs = {(p.lstrip("$"), 0) for p in params}
        pvars = {p[1:] for p in params if p.startswith("$")}
        _check(body, inner | pfuncs, variables | pvars, labels, errors)
    elif k == "object":
        for key, value in node[1]:
            _check(key, funcs, variables, labels, errors)
            _check(value, funcs, variables, labels, errors)
    elif k == "lit":
        return
    else:
        for part in node[1:]:
            if isinstance(part, tuple):
                _check(part, funcs, variables, labels, errors)


def _check_pattern(pat: Node, funcs: set[tuple[str, int]], variables: set[str], labels: set[str],
                   errors: list[tuple[str, int]]) -> None:
    if pat[0] == "parray":
        for sub in pat[1]:
            _check_pattern(sub, funcs, variables, labels, errors)
    elif pat[0] == "pobject":
        for key, _, sub in pat[1]:
            _check(key, funcs, variables, labels, errors)
            if sub is not None:
                _check_pattern(sub, funcs, variables, labels, errors)
