"""A POSIX awk interpreter in pure Python, for the guest shell (which has no awk binary).

The pipeline: ``tokenize`` (regex or division is decided by the previous token) ->
``Parser`` (recursive descent with awk's precedence, producing a tuple AST) -> ``Compiler``
(AST to Python closures, so nothing is re-parsed per record) -> ``Runtime`` (records,
fields, variables, files and the BEGIN / main / END loop). Only the standard library is
used. The sandbox has no processes, so ``print | cmd``, ``cmd | getline`` and ``system()``
report that instead of pretending to work.

Known gaps: strings are characters, not bytes; an alternation inside a regex that also uses
$, \\y, \\< or \\> matches leftmost-first (Python ``re``), not POSIX leftmost-longest;
gawk-only built-ins (gensub, asort, strftime...) are undefined functions.
"""

from __future__ import annotations

import functools
import math
import operator
import os
import random
import re
import sys
import time
from typing import IO, Any, Callable, Iterable, Iterator, Mapping, NoReturn

NO_PROCESSES = "cannot run commands (no processes in the sandbox)"
USAGE = "usage: awk [-F fs] [-v var=value] ['prog' | -f progfile] [file ...]"


class AwkError(Exception):
    """A fatal error: ``run`` prints ``awk: <message>`` and returns 2."""


class AwkSyntaxError(AwkError):
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


class _Next(Exception):
    pass


class _NextFile(Exception):
    pass


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


class _Exit(Exception):
    def __init__(self, status: int | None) -> None:
        self.status = status


class _Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


# ---------------------------------------------------------------- values
# A value is a float (number), a str (string) or a StrNum (string from input, which
# compares as a number when it looks like one). UNINIT is "" and 0 at the same time.


class StrNum(str):
    """A string from input (field, getline, ARGV, -v): numeric in comparisons if it looks so."""

    __slots__ = ()


UNINIT = StrNum("")
_EMPTY_FIELD = StrNum("")


class _Vars(dict):
    """Global variables: an unset name reads as the uninitialized value."""

    def __missing__(self, key: str) -> StrNum:
        return UNINIT


class _Array(dict):
    """An awk array: merely referencing ``a[k]`` creates the element, as POSIX says."""

    def __missing__(self, key: str) -> StrNum:
        self[key] = UNINIT
        return UNINIT


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NUM_PREFIX = re.compile(rf"[ \t\n\r\f\v]*({_NUMBER})", re.ASCII)
_LOOKS_NUMERIC = re.compile(rf"[ \t\n\r\f\v]*{_NUMBER}[ \t\n\r\f\v]*\Z", re.ASCII)


def to_num(v: Any) -> float:
    """String to number by its longest numeric prefix ("3x" -> 3, "x" -> 0)."""
    if type(v) is float:
        return v
    m = _NUM_PREFIX.match(v)
    return float(m.group(1)) if m else 0.0


def strnum_value(v: Any) -> float | None:
    """The number a comparison uses for v, or None when v must compare as a string."""
    if type(v) is float:
        return v
    if type(v) is StrNum:
        if v is UNINIT:
            return 0.0
        if _LOOKS_NUMERIC.match(v):
            return float(v)
    return None


def to_bool(v: Any) -> bool:
    if type(v) is float:
        return v != 0.0
    n = strnum_value(v)
    return n != 0.0 if n is not None else v != ""


def _to_int(x: float) -> int:
    return int(x) if math.isfinite(x) else 0


def _div(x: float, y: float) -> float:
    if y == 0.0:
        raise AwkError("division by zero")
    return x / y


def _mod(x: float, y: float) -> float:
    if y == 0.0:
        raise AwkError("division by zero in %")
    try:
        return math.fmod(x, y)
    except ValueError:
        return math.nan


def _power(x: float, y: float) -> float:
    try:
        return math.pow(x, y)
    except OverflowError:
        return math.inf
    except ValueError:  # 0 ^ negative is infinite in C; a negative base ^ fraction is nan
        return math.inf if x == 0.0 else math.nan


def _math(fn: Callable[[float], float]) -> Callable[[float], float]:
    """Wrap a math function to give C's inf/nan results instead of Python exceptions."""
    def safe(x: float) -> float:
        try:
            return fn(x)
        except OverflowError:
            return math.inf
        except ValueError:
            return -math.inf if fn is math.log and x == 0.0 else math.nan
    return safe


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": _mod,
          "^": _power}
_COMPARE = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
            ">": operator.gt, ">=": operator.ge}


# ---------------------------------------------------------------- escapes and regexes

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "/": "/",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_OCTAL = re.compile(r"[0-7]{1,3}")


def _unescape_at(s: str, i: int) -> tuple[str, int]:
    """Decode the escape whose backslash is at s[i-1]; unknown ones keep the backslash (mawk)."""
    if i >= len(s):
        return "\\", i
    c = s[i]
    if c in _ESCAPES:
        return _ESCAPES[c], i + 1
    m = _OCTAL.match(s, i)
    if m:
        return chr(int(m.group(), 8)), m.end()
    return "\\" + c, i + 1


def unescape(s: str) -> str:
    """Process escapes as in a string literal (for -v, -F and operand assignments)."""
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\":
            text, i = _unescape_at(s, i + 1)
            out.append(text)
        else:
            out.append(s[i])
            i += 1
    return "".join(out)


_CLASSES = {
    "alpha": "A-Za-z", "digit": "0-9", "alnum": "0-9A-Za-z", "upper": "A-Z", "lower": "a-z",
    "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": "!-/:-@\\[-`{-~", "print": " -~",
    "graph": "!-~", "cntrl": "\\x00-\\x1f\\x7f", "xdigit": "0-9A-Fa-f", "word": "0-9A-Za-z_",
}
_GAWK_ESCAPES = {"s": r"\s", "S": r"\S", "w": r"\w", "W": r"\W", "y": r"\b", "B": r"\B",
                 "<": r"\b(?=\w)", ">": r"\b(?<=\w)", "`": r"\A", "'": r"\Z"}
_INTERVAL = re.compile(r"\{\d+(?:,\d*)?\}", re.ASCII)


def _regex_char(src: str, i: int) -> tuple[str, int]:
    """The literal character of the escape after the backslash at src[i-1]."""
    c = src[i]
    if c in _ESCAPES:
        return _ESCAPES[c], i + 1
    m = _OCTAL.match(src, i)
    if m:
        return chr(int(m.group(), 8)), m.end()
    return c, i + 1


def _bracket(src: str, i: int) -> tuple[str, int]:
    """Translate the bracket expression at src[i] ('[') to a Python character class."""
    n = len(src)
    j = i + 1
    negate = src.startswith("^", j)
    j += negate
    items: list[str] = []
    first = True
    while True:
        if j >= n:
            raise AwkError(f"unterminated [ in regular expression /{src}/")
        c = src[j]
        if c == "]" and not first:
            break
        first = False
        if c == "[" and src[j + 1:j + 2] in (":", ".", "="):
            close = src.find(src[j + 1] + "]", j + 2)
            if close != -1:
                name = src[j + 2:close]
                if src[j + 1] != ":":
                    items.append(re.escape(name))
                elif name in _CLASSES:
                    items.append(_CLASSES[name])
                else:
                    raise AwkError(f"invalid character class [:{name}:]")
                j = close + 2
                continue
        if c == "\\" and j + 1 < n:
            c, j = _regex_char(src, j + 1)
            items.append("\\" + c if c in "\\]^-[&~|" else c)
            continue
        items.append(c if c not in "\\][^&~|" else "\\" + c)
        j += 1
    return "[" + "^" * negate + "".join(items) + "]", j + 1


def translate_ere(src: str) -> str:
    """Rewrite a POSIX ERE as a Python regex: brackets, intervals, anchors, literal quirks."""
    out: list[str] = []
    atom: int | None = None  # index in out where the last repeatable item starts
    groups: list[int] = []
    quantified = False
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        interval = _INTERVAL.match(src, i) if c == "{" else None
        if c in "*+?" or interval:
            if atom is None:  # nothing to repeat: a literal, as gawk reads it
                atom = len(out)
                out.append("\\" + c)
                i += 1
                continue
            if quantified:  # a** or a{2}* : repeat the repeated item
                out[atom:] = ["(?:" + "".join(out[atom:]) + ")"]
            out.append(interval.group() if interval else c)
            i = interval.end() if interval else i + 1
            quantified = True
            continue
        quantified = False
        i += 1
        if c == "\\":
            if i >= n:
                piece = r"\\"
            elif src[i] in _GAWK_ESCAPES:
                piece, i = _GAWK_ESCAPES[src[i]], i + 1
            else:
                char, i = _regex_char(src, i)
                piece = re.escape(char)
            atom = len(out)
            out.append(piece)
        elif c == "[":
            piece, i = _bracket(src, i - 1)
            atom = len(out)
            out.append(piece)
        elif c == "(":
            groups.append(len(out))
            out.append("(?:")
            atom = None
        elif c == ")" and groups:
            atom = groups.pop()
            out.append(")")
        elif c in "|^":
            out.append(c)
            atom = None
        elif c == "$":
            out.append(r"\Z")
            atom = None
        else:
            atom = len(out)
            out.append("." if c == "." else re.escape(c))
    return "".join(out)


@functools.lru_cache(maxsize=512)
def compile_ere(src: str) -> re.Pattern:
    """The ERE as a Python pattern: enough to test whether it matches."""
    try:
        return re.compile(translate_ere(src), re.DOTALL)
    except re.error as e:
        raise AwkError(f"invalid regular expression /{src}/: {e}") from None


@functools.lru_cache(maxsize=512)
def longest_ere(src: str) -> Any:
    """The ERE for match, sub, gsub and split, where the extent of a match matters."""
    return _longest(compile_ere(src))


_END_SENSITIVE = re.compile(r"\\[ZbB]|\(\?<?[=!]")


def _longest(rx: re.Pattern) -> Any:
    if "|" in rx.pattern and not _END_SENSITIVE.search(rx.pattern):
        return _LongestMatch(rx)
    return rx


class _LongestMatch:
    """POSIX takes the longest of the leftmost matches; Python's re takes the first alternative
    that fits (/ab|abc/ finds "ab" in "abc"). So a match is extended to the longest one from
    the same start, trying ends with fullmatch. Patterns whose meaning depends on where the
    text ends ($, \\b, lookarounds) are not wrapped: fullmatch would fake the end there."""

    __slots__ = ("rx",)

    def __init__(self, rx: re.Pattern) -> None:
        self.rx = rx

    def search(self, text: str, pos: int = 0) -> re.Match | None:
        m = self.rx.search(text, pos)
        if m is not None:
            for end in range(len(text), m.end(), -1):
                longer = self.rx.fullmatch(text, m.start(), end)
                if longer is not None:
                    return longer
        return m

    def finditer(self, text: str) -> Iterator[re.Match]:
        pos = 0
        while pos <= len(text):
            m = self.search(text, pos)
            if m is None:
                return
            yield m
            pos = m.end() + (m.end() == m.start())

    def split(self, text: str) -> list[str]:
        parts, pos = [], 0
        for m in self.finditer(text):
            if m.end() > m.start():
                parts.append(text[pos:m.start()])
                pos = m.end()
        parts.append(text[pos:])
        return parts


_BLANK_FIELDS = re.compile(r"[^ \t\n]+").findall


@functools.lru_cache(maxsize=64)
def field_splitter(fs: str, paragraph: bool = False) -> Callable[[str], list[str]]:
    """How FS splits text: " " = runs of blanks, one other char = literally, else an ERE.

    In paragraph mode (RS == "") a newline always separates fields too.
    """
    if fs == " ":
        return _BLANK_FIELDS
    if fs == "":
        return list
    if len(fs) == 1 and not paragraph:
        return lambda text: text.split(fs) if text else []
    pattern = re.escape(fs) if len(fs) == 1 else translate_ere(fs)
    if paragraph:
        pattern = f"(?:{pattern})|\n"
    try:
        rx = _longest(re.compile(pattern, re.DOTALL))
    except re.error as e:
        raise AwkError(f"invalid field separator {fs!r}: {e}") from None
    return lambda text: rx.split(text) if text else []


_FORMAT_SPEC = re.compile(r"%([-+ #0]*)(\*|\d*)(?:\.(\*|\d*))?[hlLqjzt]*([a-zA-Z%])?", re.ASCII)


@functools.lru_cache(maxsize=256)
def _parse_format(fmt: str) -> tuple:
    """Split a printf format into literal text and (flags, width, precision, conversion)."""
    pieces: list = []
    pos = 0
    for m in _FORMAT_SPEC.finditer(fmt):
        if m.start() > pos:
            pieces.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, precision, conv = m.groups()
        if conv == "%":
            pieces.append("%")
        elif conv and conv in "cdiouxXeEfFgGs":
            pieces.append((flags, width, precision, conv))
        else:
            pieces.append(m.group())  # not a conversion: printed as it is
    if pos < len(fmt):
        pieces.append(fmt[pos:])
    return tuple(pieces)


@functools.lru_cache(maxsize=256)
def _replacement(rep: str) -> tuple:
    """Parse a sub/gsub replacement: None stands for the matched text (&).

    \\& is a literal &, \\\\ a literal backslash, any other backslash stays (POSIX).
    """
    parts: list = []
    buf: list[str] = []
    i = 0
    while i < len(rep):
        c = rep[i]
        if c == "\\" and rep[i + 1:i + 2] in ("&", "\\"):
            buf.append(rep[i + 1])
            i += 2
            continue
        if c == "&":
            parts.append("".join(buf))
            parts.append(None)
            buf = []
        else:
            buf.append(c)
        i += 1
    parts.append("".join(buf))
    return tuple(p for p in parts if p != "")


@functools.lru_cache(maxsize=256)
def _may_match_empty(rx: re.Pattern) -> bool:
    return rx.search("") is not None or _END_SENSITIVE.search(rx.pattern) is not None


def _substitute(rx: Any, parts: tuple, text: str, every: bool) -> tuple[str, int]:
    """sub/gsub: replace the first (or every) match; no empty match right after a match."""
    if every and type(rx) is re.Pattern and not _may_match_empty(rx):  # then re.subn agrees
        template = "".join("\\g<0>" if p is None else p.replace("\\", "\\\\") for p in parts)
        return rx.subn(template, text)

    def expand(m: re.Match) -> str:
        return "".join(m.group() if p is None else p for p in parts)
    if not every:
        m = rx.search(text)
        if m is None:
            return text, 0
        return text[:m.start()] + expand(m) + text[m.end():], 1
    out: list[str] = []
    pos, last_end, count = 0, -1, 0
    for m in rx.finditer(text):
        start, end = m.span()
        if start == end == last_end:
            continue
        out.append(text[pos:start])
        out.append(expand(m))
        pos = last_end = end
        count += 1
    if not count:
        return text, 0
    out.append(text[pos:])
    return "".join(out), count


# ---------------------------------------------------------------- lexer

_KEYWORDS = frozenset("BEGIN END function func if else while for do break continue next "
                      "nextfile exit return delete in getline print printf".split())
_BUILTINS = {
    "length": (0, 1), "substr": (2, 3), "index": (2, 2), "split": (2, 3), "sub": (2, 3),
    "gsub": (2, 3), "match": (2, 2), "sprintf": (1, None), "tolower": (1, 1), "toupper": (1, 1),
    "int": (1, 1), "sqrt": (1, 1), "exp": (1, 1), "log": (1, 1), "sin": (1, 1), "cos": (1, 1),
    "atan2": (2, 2), "rand": (0, 0), "srand": (0, 1), "system": (1, 1), "close": (1, 1),
    "fflush": (0, 1),
}
_TOKEN = re.compile(r"""
    (?P<skip>[ \t\r\f]+|\\\r?\n|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>")
  | (?P<op>\*\*=|\*\*|&&|\|\||>>|\+\+|--|[-+*/%^!=<>]=|!~|[-+*/%^!<>=~?:,;{}()\[\]$|])
""", re.X | re.ASCII)
# After these tokens '/' divides; anywhere else it starts a regex literal.
_OPERAND_END = frozenset({"NAME", "NUMBER", "STRING", "ERE", "BUILTIN", ")", "]", "++", "--"})

Token = tuple  # (kind, value, line)


def _read_string(src: str, pos: int, line: int) -> tuple[str, int]:
    out: list[str] = []
    while pos < len(src) and src[pos] != "\n":
        c = src[pos]
        if c == '"':
            return "".join(out), pos + 1
        if c == "\\":
            if src.startswith("\n", pos + 1):
                pos += 2
                continue
            text, pos = _unescape_at(src, pos + 1)
            out.append(text)
        else:
            out.append(c)
            pos += 1
    raise AwkSyntaxError("unterminated string", line)


def _read_regex(src: str, pos: int, line: int) -> tuple[str, int]:
    """Read a /regex/ literal; a '/' inside [...] or after a backslash does not end it."""
    out: list[str] = []
    in_bracket = False
    n = len(src)
    while pos < n and src[pos] != "\n":
        c = src[pos]
        if c == "\\" and pos + 1 < n and src[pos + 1] != "\n":
            out.append("/" if src[pos + 1] == "/" else src[pos:pos + 2])
            pos += 2
            continue
        if in_bracket:
            if c == "[" and src[pos + 1:pos + 2] in (":", ".", "="):
                close = src.find(src[pos + 1] + "]", pos + 2)
                if close != -1:
                    out.append(src[pos:close + 2])
                    pos = close + 2
                    continue
            in_bracket = c != "]"
        elif c == "[":
            in_bracket = True
            start = pos + 1 + src.startswith("^", pos + 1)
            start += src.startswith("]", start)
            out.append(src[pos:start])
            pos = start
            continue
        elif c == "/":
            return "".join(out), pos + 1
        out.append(c)
        pos += 1
    raise AwkSyntaxError("unterminated regular expression", line)


def tokenize(src: str) -> list[Token]:
    toks: list[Token] = []
    pos, line = 0, 1
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise AwkSyntaxError(f"unexpected character {src[pos]!r}", line)
        kind, text = m.lastgroup, m.group()
        pos = m.end()
        if kind == "skip":
            line += text.count("\n")
        elif kind == "newline":
            toks.append(("NEWLINE", text, line))
            line += 1
        elif kind == "number":
            toks.append(("NUMBER", float(text), line))
        elif kind == "name":
            if text in _KEYWORDS:
                toks.append(("function" if text == "func" else text, text, line))
            elif text in _BUILTINS:
                toks.append(("BUILTIN", text, line))
            else:
                toks.append(("FUNC_NAME" if src.startswith("(", pos) else "NAME", text, line))
        elif kind == "string":
            value, pos = _read_string(src, pos, line)
            toks.append(("STRING", value, line))
        elif text in ("/", "/=") and (not toks or toks[-1][0] not in _OPERAND_END):
            value, pos = _read_regex(src, m.start() + 1, line)
            toks.append(("ERE", value, line))
        else:
            toks.append(({"**": "^", "**=": "^="}.get(text, text), text, line))
    toks.append(("EOF", "", line))
    return toks


# ---------------------------------------------------------------- parser
# Expression nodes: ('num', v) ('str', s) ('regex', src) ('var', name) ('local', i, name)
# ('field', e) ('index', arr, [subs]) ('grouplist', [e]) ('concat', [e]) ('binop', op, a, b)
# ('cmp', op, a, b) ('match', negated, a, b) ('in', [subs], arr) ('and'|'or', a, b) ('not', e)
# ('neg'|'plus', e) ('cond', c, a, b) ('assign', op, lvalue, e) ('preincr'|'postincr', d, lv)
# ('call', name, [args]) ('builtin', name, [args]) ('getline', lvalue, file) ('pipegetline', ...)

_LVALUES = frozenset({"var", "local", "index", "field"})
_ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "^="})
_CONCAT_START = frozenset({"NUMBER", "STRING", "ERE", "NAME", "FUNC_NAME", "BUILTIN", "$", "(",
                           "!", "++", "--"})
_UNARY = {"-": "neg", "+": "plus", "!": "not"}
_TERMINATORS = frozenset({";", "NEWLINE", "}", "EOF"})


class FuncDef:
    """A user function; array_params are the parameters it (transitively) uses as arrays."""

    def __init__(self, params: list[str]) -> None:
        self.params = params
        self.slots = {p: i for i, p in enumerate(params)}
        self.array_params: set[int] = set()
        self.body: tuple = ("block", [])


class Parser:
    """Recursive descent over the token list, one method per precedence level. It also works
    out which names are arrays (so the compiler can pass them to functions by reference)."""

    def __init__(self, src: str) -> None:
        self.toks = tokenize(src)
        self.pos = 0
        self.func_names = {self.toks[i + 1][1] for i, t in enumerate(self.toks[:-1])
                           if t[0] == "function"}
        self.funcs: dict[str, FuncDef] = {}
        self.begin: list[tuple] = []
        self.end: list[tuple] = []
        self.rules: list[tuple] = []
        self.global_arrays = {"ARGV", "ENVIRON"}
        self.calls: list[tuple] = []  # (caller FuncDef or None, callee, args, line)
        self.func: FuncDef | None = None
        self.no_gt = False  # in an unparenthesized print list, '>' is a redirection
        self.loops = 0

    # -- token helpers
    @property
    def kind(self) -> str:
        return self.toks[self.pos][0]

    def peek(self, k: int) -> str:
        return self.toks[min(self.pos + k, len(self.toks) - 1)][0]

    def advance(self) -> Token:
        tok = self.toks[self.pos]
        if tok[0] != "EOF":
            self.pos += 1
        return tok

    def expect(self, kind: str) -> Token:
        if self.kind != kind:
            self.error(f"expected {kind!r}")
        return self.advance()

    def error(self, message: str = "") -> NoReturn:
        kind, value, line = self.toks[self.pos]
        found = {"EOF": "end of program", "NEWLINE": "newline"}.get(kind, repr(value))
        message = f"{message}, found {found}" if message else f"unexpected {found}"
        raise AwkSyntaxError(message, line)

    def skip_nl(self) -> None:
        while self.kind == "NEWLINE":
            self.advance()

    def skip_terms(self) -> None:
        while self.kind in ("NEWLINE", ";"):
            self.advance()

    # -- program structure
    def parse(self) -> Parser:
        self.skip_terms()
        while self.kind != "EOF":
            self.item()
            self.skip_terms()
        self.link()
        return self

    def item(self) -> None:
        kind = self.kind
        if kind == "function":
            self.function()
        elif kind in ("BEGIN", "END"):
            self.advance()
            (self.begin if kind == "BEGIN" else self.end).append(self.block())
        else:
            pattern = pattern2 = None
            if kind != "{":
                pattern = self.expr()
                if self.kind == ",":
                    self.advance()
                    self.skip_nl()
                    pattern2 = self.expr()
            if self.kind == "{":
                action = self.block()
            elif self.kind in ("NEWLINE", ";", "EOF"):
                action = None
            else:
                self.error()
            self.rules.append((pattern, pattern2, action))

    def function(self) -> None:
        line = self.advance()[2]
        kind, name, _ = self.advance()
        if kind not in ("NAME", "FUNC_NAME"):
            raise AwkSyntaxError(f"bad function name {name!r}", line)
        if name in self.funcs:
            raise AwkSyntaxError(f"function {name} is defined twice", line)
        self.expect("(")
        params: list[str] = []
        while self.kind != ")":
            param = self.expect("NAME")[1]
            if param in params or param in self.func_names:
                raise AwkSyntaxError(f"bad parameter {param!r} of function {name}", line)
            params.append(param)
            if self.kind == ",":
                self.advance()
                self.skip_nl()
            elif self.kind != ")":
                self.error()
        self.advance()
        self.skip_nl()
        self.func = self.funcs[name] = FuncDef(params)
        self.func.body = self.block()
        self.func = None

    def link(self) -> None:
        """Check calls, then mark arrays passed by reference (a fixpoint over call sites)."""
        for _, name, args, line in self.calls:
            f = self.funcs.get(name)
            if f is None:
                raise AwkSyntaxError(f"calling undefined function {name}", line)
            if len(args) > len(f.params):
                raise AwkSyntaxError(f"function {name} called with {len(args)} args, "
                                     f"accepts only {len(f.params)}", line)
        changed = True
        while changed:
            changed = False
            for caller, name, args, _ in self.calls:
                for i in self.funcs[name].array_params:
                    arg = args[i] if i < len(args) else ("num",)
                    if arg[0] in ("var", "local") and not self.is_array(arg, caller):
                        self.mark_array(arg, caller)
                        changed = True

    def is_array(self, node: tuple, func: FuncDef | None) -> bool:
        if node[0] == "local":
            assert func is not None  # locals exist inside functions only
            return node[1] in func.array_params
        return node[1] in self.global_arrays

    def mark_array(self, node: tuple, func: FuncDef | None) -> None:
        if node[0] == "local":
            assert func is not None  # locals exist inside functions only
            func.array_params.add(node[1])
        else:
            self.global_arrays.add(node[1])

    # -- statements
    def block(self) -> tuple:
        self.expect("{")
        stmts: list[tuple] = []
        while True:
            self.skip_terms()
            if self.kind == "}":
                self.advance()
                return ("block", stmts)
            if self.kind == "EOF":
                self.error("missing '}'")
            stmts.append(self.statement())

    def statement(self) -> tuple:
        kind = self.kind
        if kind == "{":
            return self.block()
        if kind == ";":
            self.advance()
            return ("block", [])
        if kind == "if":
            self.advance()
            cond = self.condition()
            then = self.statement()
            mark = self.pos
            self.skip_terms()
            if self.kind == "else":
                self.advance()
                self.skip_nl()
                return ("if", cond, then, self.statement())
            self.pos = mark
            return ("if", cond, then, None)
        if kind == "while":
            self.advance()
            cond = self.condition(skip=False)
            if self.kind == ";":
                self.advance()
                return ("while", cond, ("block", []))
            self.skip_nl()
            return ("while", cond, self.loop_body())
        if kind == "do":
            self.advance()
            self.skip_nl()
            body = self.loop_body()
            self.skip_terms()
            self.expect("while")
            cond = self.condition(skip=False)
            self.end_simple()
            return ("do", body, cond)
        if kind == "for":
            return self.for_statement()
        stmt = self.simple_statement()
        self.end_simple()
        return stmt

    def condition(self, skip: bool = True) -> tuple:
        self.expect("(")
        cond = self.expr()
        self.expect(")")
        if skip:
            self.skip_nl()
        return cond

    def loop_body(self) -> tuple:
        self.loops += 1
        try:
            return self.statement()
        finally:
            self.loops -= 1

    def for_statement(self) -> tuple:
        self.advance()
        self.expect("(")
        if (self.kind, self.peek(1), self.peek(2), self.peek(3)) == ("NAME", "in", "NAME", ")"):
            name, line = self.advance()[1:]
            var = self.name_node(name, line)
            self.advance()
            array = self.array_ref(*self.advance()[1:])
            self.advance()
            self.skip_nl()
            return ("forin", var, array, self.loop_body())
        init = None if self.kind == ";" else self.simple_statement()
        self.expect(";")
        self.skip_nl()
        cond = None if self.kind == ";" else self.expr()
        self.expect(";")
        self.skip_nl()
        step = None if self.kind == ")" else self.simple_statement()
        self.expect(")")
        if self.kind == ";":
            self.advance()
            return ("for", init, cond, step, ("block", []))
        self.skip_nl()
        return ("for", init, cond, step, self.loop_body())

    def end_simple(self) -> None:
        if self.kind in (";", "NEWLINE"):
            self.advance()
        elif self.kind not in ("}", "EOF"):
            self.error()

    def simple_statement(self) -> tuple:
        kind, _, line = self.toks[self.pos]
        if kind in ("print", "printf"):
            return self.print_statement()
        if kind == "delete":
            self.advance()
            array = self.array_ref(*self.expect("NAME")[1:])
            return ("delete", array, self.subscripts() if self.kind == "[" else None)
        if kind in ("break", "continue"):
            if not self.loops:
                raise AwkSyntaxError(f"{kind} outside a loop", line)
            self.advance()
            return (kind,)
        if kind in ("next", "nextfile"):
            self.advance()
            return (kind,)
        if kind in ("exit", "return"):
            if kind == "return" and self.func is None:
                raise AwkSyntaxError("return outside a function", line)
            self.advance()
            return (kind, None if self.kind in _TERMINATORS else self.expr())
        return ("expr", self.expr())

    def print_statement(self) -> tuple:
        kind = self.advance()[0]
        saved, self.no_gt = self.no_gt, True
        args = []
        if self.kind not in _TERMINATORS and self.kind not in (">", ">>", "|"):
            args = self.expr_list()
        if len(args) == 1 and args[0][0] == "grouplist":
            args = args[0][1]
        redirect = None
        if self.kind in (">", ">>", "|"):
            redirect = (self.advance()[0], self.concat())
        self.no_gt = saved
        if kind == "printf" and not args:
            self.error("printf needs a format")
        return (kind, args, redirect)

    # -- expressions, lowest precedence first
    def expr_list(self) -> list[tuple]:
        exprs = [self.expr()]
        while self.kind == ",":
            self.advance()
            self.skip_nl()
            exprs.append(self.expr())
        return exprs

    def expr(self) -> tuple:
        left = self.ternary()
        if self.kind in _ASSIGN_OPS and left[0] in _LVALUES:
            op = self.advance()[0]
            self.skip_nl()
            return ("assign", op, left, self.expr())
        return left

    def ternary(self) -> tuple:
        cond = self.binary_or()
        if self.kind != "?":
            return cond
        self.advance()
        self.skip_nl()
        yes = self.expr()
        self.skip_nl()
        self.expect(":")
        self.skip_nl()
        return ("cond", cond, yes, self.expr())

    def binary_or(self) -> tuple:
        left = self.binary_and()
        while self.kind == "||":
            self.advance()
            self.skip_nl()
            left = ("or", left, self.binary_and())
        return left

    def binary_and(self) -> tuple:
        left = self.membership()
        while self.kind == "&&":
            self.advance()
            self.skip_nl()
            left = ("and", left, self.membership())
        return left

    def membership(self) -> tuple:
        left = self.matching()
        while self.kind == "in":
            self.advance()
            array = self.array_ref(*self.expect("NAME")[1:])
            left = ("in", left[1] if left[0] == "grouplist" else [left], array)
        return left

    def matching(self) -> tuple:
        left = self.comparison()
        while self.kind in ("~", "!~"):
            negated = self.advance()[0] == "!~"
            left = ("match", negated, left, self.comparison())
        return left

    def comparison(self) -> tuple:
        left = self.pipe_getline()
        while self.kind in _COMPARE and not (self.kind == ">" and self.no_gt):
            op = self.advance()[0]
            left = ("cmp", op, left, self.pipe_getline())
        return left

    def pipe_getline(self) -> tuple:
        left = self.concat()
        while self.kind == "|" and self.peek(1) == "getline":
            self.advance()
            self.advance()
            left = ("pipegetline", left, self.getline_target())
        return left

    def concat(self) -> tuple:
        parts = [self.additive()]
        while self.kind in _CONCAT_START:
            parts.append(self.additive())
        return parts[0] if len(parts) == 1 else ("concat", parts)

    def additive(self) -> tuple:
        left = self.multiplicative()
        while self.kind in ("+", "-"):
            op = self.advance()[0]
            left = ("binop", op, left, self.multiplicative())
        return left

    def multiplicative(self) -> tuple:
        left = self.unary()
        while self.kind in ("*", "/", "%"):
            op = self.advance()[0]
            left = ("binop", op, left, self.unary())
        return left

    def unary(self) -> tuple:
        if self.kind in _UNARY:
            return (_UNARY[self.advance()[0]], self.unary())
        return self.power()

    def power(self) -> tuple:
        base = self.postfix()
        if self.kind != "^":
            return base
        self.advance()
        return ("binop", "^", base, self.signed(self.power))  # right associative; 2^-1 is allowed

    def signed(self, operand: Callable[[], tuple]) -> tuple:
        if self.kind in _UNARY:
            return (_UNARY[self.advance()[0]], self.signed(operand))
        return operand()

    def postfix(self) -> tuple:
        e = self.primary()
        if self.kind in ("++", "--") and e[0] in _LVALUES:
            return ("postincr", 1.0 if self.advance()[0] == "++" else -1.0, e)
        return e

    def primary(self) -> tuple:
        kind, value, line = self.advance()
        if kind == "NUMBER":
            return ("num", value)
        if kind == "STRING":
            return ("str", value)
        if kind == "ERE":
            return ("regex", value)
        if kind == "$":
            return ("field", self.signed(self.primary))
        if kind in ("++", "--"):
            target = self.primary()
            if target[0] not in _LVALUES:
                raise AwkSyntaxError(f"{kind} needs a variable", line)
            return ("preincr", 1.0 if kind == "++" else -1.0, target)
        if kind == "(":
            saved, self.no_gt = self.no_gt, False
            exprs = self.expr_list()
            self.no_gt = saved
            self.expect(")")
            return exprs[0] if len(exprs) == 1 else ("grouplist", exprs)
        if kind == "NAME":
            if self.kind == "[":
                return ("index", self.array_ref(value, line), self.subscripts())
            if value in self.func_names and self.kind == "(":
                return self.call(value, line)
            return self.name_node(value, line)
        if kind == "FUNC_NAME":
            return self.call(value, line)
        if kind == "BUILTIN":
            return self.builtin(value, line)
        if kind == "getline":
            into = self.getline_target()
            if self.kind != "<":
                return ("getline", into, None)
            self.advance()
            return ("getline", into, self.primary())
        self.pos -= kind != "EOF"
        self.error()

    def getline_target(self) -> tuple | None:
        if self.kind == "$":
            self.advance()
            return ("field", self.signed(self.primary))
        if self.kind == "NAME":
            name, line = self.advance()[1:]
            if self.kind == "[":
                return ("index", self.array_ref(name, line), self.subscripts())
            return self.name_node(name, line)
        return None

    def subscripts(self) -> list[tuple]:
        self.expect("[")
        saved, self.no_gt = self.no_gt, False
        subs = self.expr_list()
        self.no_gt = saved
        self.expect("]")
        return subs

    def arguments(self) -> list[tuple]:
        self.expect("(")
        saved, self.no_gt = self.no_gt, False
        args = [] if self.kind == ")" else self.expr_list()
        self.no_gt = saved
        self.expect(")")
        return args

    def call(self, name: str, line: int) -> tuple:
        args = self.arguments()
        self.calls.append((self.func, name, args, line))
        return ("call", name, args)

    def builtin(self, name: str, line: int) -> tuple:
        if self.kind == "(":
            args = self.arguments()
        elif name == "length":
            args = []
        else:
            raise AwkSyntaxError(f"{name} needs (arguments)", line)
        low, high = _BUILTINS[name]
        if len(args) < low or (high is not None and len(args) > high):
            raise AwkSyntaxError(f"wrong number of arguments to {name}", line)
        if name == "split":
            if args[1][0] not in ("var", "local"):
                raise AwkSyntaxError("split: the second argument must be an array name", line)
            self.mark_array(args[1], self.func)
        return ("builtin", name, args)

    def name_node(self, name: str, line: int) -> tuple:
        if self.func is not None and name in self.func.slots:
            return ("local", self.func.slots[name], name)
        if name in self.func_names:
            raise AwkSyntaxError(f"function {name} used as a variable", line)
        return ("var", name)

    def array_ref(self, name: str, line: int) -> tuple:
        node = self.name_node(name, line)
        self.mark_array(node, self.func)
        return node


# ---------------------------------------------------------------- input

_PARAGRAPH_END = re.compile(r"\n\n+")


class RecordReader:
    """Cuts a stream of text lines into records by RS, reading only as far as needed."""

    def __init__(self, lines: Iterable[str], handle: IO | None = None) -> None:
        self.lines: Iterator[str] = iter(lines)
        self.handle = handle
        self.buf = ""
        self.eof = False

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.eof, self.buf = True, ""

    def read(self, rs: str) -> str | None:
        if rs == "\n" and not self.buf:  # the common case: one line is one record
            if self.eof:
                return None
            line = next(self.lines, None)
            if line is None:
                self.eof = True
                return None
            if line.find("\n") == len(line) - 1 and line:
                return line[:-1]
            self.buf = line  # no newline, several, or an empty chunk: the general case
        while True:
            record = self._cut(rs)
            if record is not None:
                return record
            if not self._pull():
                record = self._cut(rs)
                if record is None:
                    record, self.buf = self.buf, ""
                    if rs == "":
                        record = record.rstrip("\n")
                return record or None

    def _pull(self) -> bool:
        if not self.eof:
            for line in self.lines:
                if line:
                    self.buf += line
                    return True
            self.eof = True
        return False

    def _cut(self, rs: str) -> str | None:
        """Take one complete record off the buffer, if it holds one."""
        buf = self.buf
        if rs == "":  # paragraph mode: blank lines separate records
            buf = self.buf = buf.lstrip("\n")
            m = _PARAGRAPH_END.search(buf)
        elif len(rs) == 1:
            i = buf.find(rs)
            if i < 0:
                return None
            self.buf = buf[i + 1:]
            return buf[:i]
        else:
            m = longest_ere(rs).search(buf)
            if m is not None and m.end() == m.start():
                return None
        if m is None or (m.end() == len(buf) and not self.eof):
            return None  # the separator may continue in the next line
        self.buf = buf[m.end():]
        return buf[:m.start()]


# ---------------------------------------------------------------- runtime

_OPERAND_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_INT_LIMIT = 2.0 ** 63
_STDIN_NAMES = ("-", "/dev/stdin")
_SCALAR_SPECIALS = frozenset("NF NR FNR FS OFS ORS RS FILENAME SUBSEP RSTART RLENGTH CONVFMT "
                             "OFMT ARGC".split())


class _Cells:
    """Subscriptable adapter so fields and NF can be assigned like any other variable cell."""

    __slots__ = ("get", "put")

    def __init__(self, get: Callable[[Any], Any], put: Callable[[Any, Any], None]) -> None:
        self.get, self.put = get, put

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)


def _spec(flags: str, width: str, precision: str | None) -> str:
    """A Python %-format prefix from printf's flags, width and precision."""
    return "%" + flags + width + ("" if precision is None else "." + precision)


def _format_int(flags: str, width: str, precision: str | None, conv: str, v: int) -> str:
    """%d %i %o %u %x %X, with the C rules where Python's % differs."""
    if conv not in "di":  # unsigned: no sign flags, negatives in two's complement
        flags = flags.replace("+", "").replace(" ", "")
        v = v + (1 << 64) if v < 0 else v
    if precision is not None:  # a precision turns off zero padding
        flags = flags.replace("0", "")
    if v == 0 and precision in ("0", ""):  # C prints no digits at all
        sign = "+" if "+" in flags else " " if " " in flags else ""
        text = "0" if conv == "o" and "#" in flags else sign
        return (_spec(flags.replace("#", ""), width, None) + "s") % text
    if "#" in flags and (conv == "o" or not v):  # %#o of 15 is 017 not 0o17; %#x of 0 is 0
        if conv == "o" and v:
            precision = str(max(int(precision or 0), len("%o" % v) + 1))
        flags = flags.replace("#", "")
    return (_spec(flags, width, precision) + ("d" if conv in "diu" else conv)) % v


def _discard(text: str) -> None:
    pass


def _text_opener(open_file: Callable[..., IO]) -> Callable[[str, str], IO]:
    """The builtin open is made to read like awk (CRLF kept, bad bytes replaced, not fatal);
    any other opener is called as open_file(path, mode)."""
    if open_file is open:
        return lambda path, mode: open(path, mode, newline="", errors="replace")
    return open_file


class Runtime:
    """Interpreter state: variables, the current record and fields, open files, main input."""

    def __init__(self, stdin: Iterable[str], write_out: Callable[[str], None],
                 write_err: Callable[[str], None], open_file: Callable[..., IO],
                 environ: Mapping[str, str], operands: list[str]) -> None:
        self.write_out, self.write_err = write_out, write_err
        self.open_file = _text_opener(open_file)
        g = self.g = _Vars(FS=" ", OFS=" ", ORS="\n", RS="\n", NR=0.0, FNR=0.0, SUBSEP="\x1c",
                           CONVFMT="%.6g", OFMT="%.6g", RSTART=0.0, RLENGTH=-1.0)
        g["ENVIRON"] = _Array((k, StrNum(v)) for k, v in environ.items())
        g["ARGV"] = _Array([("0", "awk")] + [(str(i), StrNum(a))
                                             for i, a in enumerate(operands, 1)])
        g["ARGC"] = float(len(operands) + 1)
        self.record: str = UNINIT
        self.fields: list[str] | None = None
        self.record_fs: Any = " "
        self.split_key: tuple = ()
        self.split: Callable[[str], list[str]] = _BLANK_FIELDS
        self.frame: list = []
        self.stdin = RecordReader(stdin)
        self.current: RecordReader | None = None
        self.argi = 1
        self.saw_file = False
        self.inputs: dict[str, RecordReader] = {}
        self.outputs: dict[str, tuple[Callable[[str], object], IO | None]] = {}
        self.rng = random.Random(0)
        self.seed = 0.0
        self.fields_view = _Cells(self.get_field, self.set_field)
        self.nf_view = _Cells(lambda _: self.get_nf(), lambda _, v: self.set_nf(v))

    # -- conversions
    def to_str(self, v: Any) -> str:
        """Number to string: integers (below 2^63, as onetrue awk) exactly, others by CONVFMT."""
        if type(v) is float:
            if v.is_integer() and -_INT_LIMIT < v < _INT_LIMIT:
                return str(int(v))
            return self.format_number(v, self.g["CONVFMT"])
        return v

    def to_output(self, v: Any) -> str:
        """Like to_str, but print uses OFMT."""
        if type(v) is float:
            if v.is_integer() and -_INT_LIMIT < v < _INT_LIMIT:
                return str(int(v))
            return self.format_number(v, self.g["OFMT"])
        return v

    def format_number(self, v: float, fmt: Any) -> str:
        if fmt == "%.6g" or type(fmt) is float:
            return "%.6g" % v
        return self.sprintf(fmt, [v])

    def comparable(self, a: Any, b: Any) -> tuple:
        """Both as numbers if both are numeric (or numeric-looking input), else both as strings."""
        x = strnum_value(a)
        if x is not None:
            y = strnum_value(b)
            if y is not None:
                return x, y
        return self.to_str(a), self.to_str(b)

    # -- the record and its fields. Both are stored as plain str and become StrNum when
    # read; fields are split lazily, with the FS in force when the record was read.
    def set_record(self, text: str) -> None:
        self.record = text
        self.fields = None
        self.record_fs = self.g["FS"]

    def get_record(self) -> StrNum:
        record = self.record
        return record if type(record) is StrNum else StrNum(record)

    def split_record(self) -> list[str]:
        key = (self.record_fs, self.g["RS"] == "")
        if key != self.split_key:
            self.split_key = key
            self.split = field_splitter(self.to_str(key[0]), key[1])
        self.fields = self.split(self.record)
        return self.fields

    def get_field(self, i: int) -> Any:
        if i == 0:
            return self.get_record()
        fields = self.fields if self.fields is not None else self.split_record()
        if i > len(fields):
            return UNINIT
        value = fields[i - 1]
        if type(value) is not StrNum:
            value = fields[i - 1] = StrNum(value)
        return value

    def set_field(self, i: int, value: Any) -> None:
        if i == 0:
            self.set_record(self.to_str(value))
            return
        fields = self.fields if self.fields is not None else self.split_record()
        if i > len(fields):
            fields.extend([_EMPTY_FIELD] * (i - len(fields)))
        fields[i - 1] = self.to_str(value)
        self.rebuild()

    def get_nf(self) -> float:
        return float(len(self.fields if self.fields is not None else self.split_record()))

    def set_nf(self, value: Any) -> None:
        n = to_num(value)
        if not 0 <= n < 10_000_000:
            raise AwkError(f"NF set to an impossible value {self.to_str(n)}")
        fields = self.fields if self.fields is not None else self.split_record()
        del fields[int(n):]
        fields.extend([_EMPTY_FIELD] * (int(n) - len(fields)))
        self.rebuild()

    def rebuild(self) -> None:
        assert self.fields is not None  # split before any field is assigned
        self.record = self.to_str(self.g["OFS"]).join(self.fields)

    # -- main input: ARGV operands (files and var=value), else stdin
    def read_main(self) -> str | None:
        g = self.g
        while True:
            if self.current is None and not self.next_input():
                return None
            assert self.current is not None  # next_input() opened the next one
            rs = g["RS"]
            record = self.current.read(rs if type(rs) is str else self.to_str(rs))
            if record is not None:
                nr, fnr = g["NR"], g["FNR"]
                g["NR"] = (nr if type(nr) is float else to_num(nr)) + 1.0
                g["FNR"] = (fnr if type(fnr) is float else to_num(fnr)) + 1.0
                return record
            self.close_current()

    def next_input(self) -> bool:
        g = self.g
        while self.argi < to_num(g["ARGC"]):
            arg = g["ARGV"].get(str(self.argi))
            self.argi += 1
            arg = "" if arg is None else self.to_str(arg)
            m = _OPERAND_ASSIGN.match(arg)
            if m:
                self.assign(m.group(1), arg[m.end():])
            elif arg:
                self.saw_file = True
                try:
                    self.current = self.open_input(arg)
                except OSError as e:
                    raise AwkError(f"cannot open {arg} ({e.strerror or e})") from None
                g["FILENAME"], g["FNR"] = arg, 0.0
                return True
        if self.saw_file:
            return False
        self.saw_file = True
        self.current, g["FNR"] = self.stdin, 0.0
        return True

    def close_current(self) -> None:
        if self.current is not None and self.current is not self.stdin:
            self.current.close()
        self.current = None

    def assign(self, name: str, text: str) -> None:
        """A -v or operand assignment: escapes are processed and the value is a strnum."""
        if isinstance(self.g.get(name), _Array):
            raise AwkError(f"can't assign to {name}; it's an array name.")
        value = StrNum(unescape(text))
        if name == "NF":
            self.set_nf(value)
        else:
            self.g[name] = value

    # -- files named in the program or on the command line
    def open_input(self, name: str) -> RecordReader:
        """A reader for name: "-" and /dev/stdin are stdin; /dev/null is ours (WASI has none)."""
        if name in _STDIN_NAMES:
            return self.stdin
        if name == "/dev/null":
            return RecordReader(())
        handle = self.open_file(name, "r")
        return RecordReader(handle, handle)

    def read_file(self, name: str) -> str | float | None:
        """getline < name: a record, None at end of file, or -1.0 if it cannot be opened."""
        reader = self.inputs.get(name)
        if reader is None:
            try:
                reader = self.inputs[name] = self.open_input(name)
            except OSError:
                return -1.0
        return reader.read(self.to_str(self.g["RS"]))

    def write_file(self, name: str, mode: str, text: str) -> None:
        stream: tuple[Callable[[str], object], IO | None] | None = self.outputs.get(name)
        if stream is None:
            if name in ("/dev/stdout", "-"):
                stream = (self.write_out, None)
            elif name == "/dev/stderr":
                stream = (self.write_err, None)
            elif name == "/dev/null":
                stream = (_discard, None)
            else:
                try:
                    handle = self.open_file(name, mode)
                except OSError as e:
                    raise AwkError(f'cannot open "{name}" for output ({e.strerror or e})') from None
                stream = (handle.write, handle)
            self.outputs[name] = stream
        stream[0](text)

    def close_stream(self, name: str) -> float:
        found = False
        stream = self.outputs.pop(name, None)
        if stream is not None:
            found = True
            if stream[1] is not None:
                stream[1].close()
        reader = self.inputs.pop(name, None)
        if reader is not None:
            found = True
            if reader is not self.stdin:
                reader.close()
        return 0.0 if found else -1.0

    def flush(self) -> float:
        for _, handle in self.outputs.values():
            if handle is not None:
                handle.flush()
        return 0.0

    def close_all(self) -> None:
        for name in list(self.outputs) + list(self.inputs):
            try:
                self.close_stream(name)
            except OSError:
                pass
        self.close_current()

    # -- printf
    def sprintf(self, fmt: str, args: list) -> str:
        out: list[str] = []
        i = 0
        for piece in _parse_format(fmt):
            if type(piece) is str:
                out.append(piece)
                continue
            flags, width, precision, conv = piece
            if i + (width == "*") + (precision == "*") >= len(args):
                raise AwkError(f"not enough arguments passed to printf({fmt!r})")
            if width == "*":  # a negative * width means left-justified
                w = _to_int(to_num(args[i]))
                i += 1
                flags, width = (flags + "-", str(-w)) if w < 0 else (flags, str(w))
            if precision == "*":
                p = _to_int(to_num(args[i]))
                i += 1
                precision = str(p) if p >= 0 else None
            out.append(self.format_one(flags, width, precision, conv, args[i]))
            i += 1
        return "".join(out)

    def format_one(self, flags: str, width: str, precision: str | None, conv: str, arg: Any) -> str:
        spec = _spec(flags, width, precision)
        if conv == "s":
            return (spec + "s") % self.to_str(arg)
        if conv == "c":
            n = strnum_value(arg)
            if n is None:
                char = self.to_str(arg)[:1]
            else:
                char = chr(int(n)) if 0 <= n < 0x110000 else ""
            return (_spec(flags, width, None) + "s") % char
        n = to_num(arg)
        if conv in "eEfFgG":
            return (spec + conv) % n
        if not math.isfinite(n):
            return (_spec(flags, width, None) + "s") % ("%g" % n)
        return _format_int(flags, width, precision, conv, int(n))

    # -- the program
    def execute(self, begin: list, rules: list, end: list) -> int:
        status = 0
        try:
            try:
                for action in begin:
                    action()
                if rules or end:
                    self.main_loop(rules)
            except _Exit as e:
                status = status if e.status is None else e.status
            try:
                for action in end:
                    action()
            except _Exit as e:
                status = status if e.status is None else e.status
        except (_Next, _NextFile):
            raise AwkError("next or nextfile used in a BEGIN or END action") from None
        finally:
            self.close_all()
        return status

    def main_loop(self, rules: list) -> None:
        read, set_record = self.read_main, self.set_record
        while True:
            record = read()
            if record is None:
                return
            set_record(record)
            try:
                for rule in rules:
                    rule()
            except _Next:
                pass
            except _NextFile:
                self.close_current()

    def where(self) -> str:
        """Where a runtime error happened, for its message."""
        if not to_num(self.g["NR"]):
            return ""
        source = self.to_str(self.g["FILENAME"]) or "stdin"
        return f" (input record {self.to_str(self.g['FNR'])} of {source})"


# ---------------------------------------------------------------- compiler

_TESTS = frozenset({"cmp", "match", "regex", "and", "or", "not", "in"})
_JUMPS = {"break": _Break, "continue": _Continue, "next": _Next, "nextfile": _NextFile}
_MATH = {name: _math(getattr(math, name)) for name in ("sqrt", "exp", "log", "sin", "cos")}


def _noop() -> None:
    pass


def _change_case(text: str, change: Callable[[str], str]) -> str:
    """Like C's per-character toupper/tolower: a character whose case form is longer stays."""
    if text.isascii():
        return change(text)
    return "".join(c if len(change(c)) != 1 else change(c) for c in text)


class Compiler:
    """Compiles the AST to closures over a Runtime: expressions to zero-argument functions
    returning values, tests to functions returning bools, statements to functions."""

    def __init__(self, rt: Runtime, parser: Parser) -> None:
        self.rt = rt
        self.funcs = parser.funcs
        self.arrays = parser.global_arrays
        self.func: FuncDef | None = None
        self.bodies: dict[str, list] = {name: [_noop] for name in parser.funcs}
        for name in self.arrays:
            if name in _SCALAR_SPECIALS:
                raise AwkError(f"can't use {name} as an array")
            if name not in rt.g:
                rt.g[name] = _Array()

    def program(self, parser: Parser) -> tuple[list, list, list]:
        for name, f in self.funcs.items():
            self.func = f
            self.bodies[name][0] = self.stmt(f.body)
        self.func = None
        return ([self.stmt(b) for b in parser.begin], [self.rule(*r) for r in parser.rules],
                [self.stmt(b) for b in parser.end])

    def rule(self, pattern: tuple | None, pattern2: tuple | None, action: tuple | None) -> Callable:
        rt, g, S = self.rt, self.rt.g, self.rt.to_str
        if action is None:
            def act() -> None:
                rt.write_out(rt.record + S(g["ORS"]))
        else:
            act = self.stmt(action)
        if pattern is None:
            return act
        start = self.test(pattern)
        if pattern2 is None:
            def rule() -> None:
                if start():
                    act()
            return rule
        stop = self.test(pattern2)
        active = False

        def ranged() -> None:
            nonlocal active
            if active or start():
                active = not stop()
                act()
        return ranged

    # -- expressions
    def expr(self, node: tuple) -> Callable[[], Any]:
        if node[0] in _TESTS:
            test = self.test(node)
            return lambda: 1.0 if test() else 0.0
        return getattr(self, "e_" + node[0])(node)

    def test(self, node: tuple) -> Callable[[], bool]:
        method = getattr(self, "t_" + node[0], None)
        if method is not None:
            return method(node)
        e = self.expr(node)
        return lambda: to_bool(e())

    def e_num(self, node: tuple) -> Callable:
        value = node[1]
        return lambda: value

    e_str = e_num

    def e_grouplist(self, node: tuple) -> Callable:
        raise AwkError("syntax error: a parenthesized list (a, b) must be followed by 'in'")

    def e_var(self, node: tuple) -> Callable:
        name = node[1]
        if name in self.arrays:
            raise AwkError(f"can't use array {name} in a scalar context")
        if name == "NF":
            return self.rt.get_nf
        g = self.rt.g
        return lambda: g[name]

    def e_local(self, node: tuple) -> Callable:
        i, rt = node[1], self.rt
        assert self.func is not None  # locals exist inside functions only
        if i in self.func.array_params:
            raise AwkError(f"can't use array {node[2]} in a scalar context")
        return lambda: rt.frame[i]

    def e_field(self, node: tuple) -> Callable:
        rt, get = self.rt, self.rt.get_field
        if node[1][0] == "num":
            i = int(node[1][1])
            if i < 0:
                raise AwkError(f"trying to access out of range field {i}")
            return rt.get_record if i == 0 else (lambda: get(i))
        index = self.field_index(node[1])
        return lambda: get(index())

    def field_index(self, node: tuple) -> Callable[[], int]:
        e, S = self.expr(node), self.rt.to_str

        def index() -> int:
            n = to_num(e())
            if not 0 <= n < 10_000_000:
                raise AwkError(f"trying to access out of range field {S(n)}")
            return int(n)
        return index

    def e_index(self, node: tuple) -> Callable:
        array, key = self.array(node[1]), self.key(node[2])
        return lambda: array()[key()]

    def array(self, node: tuple) -> Callable[[], _Array]:
        if node[0] == "var":
            a = self.rt.g[node[1]]
            return lambda: a
        i, rt = node[1], self.rt

        def local_array() -> _Array:
            v = rt.frame[i]
            if type(v) is _Array:
                return v
            if v is UNINIT:
                v = rt.frame[i] = _Array()
                return v
            raise AwkError(f"can't use scalar {node[2]} as an array")
        return local_array

    def key(self, subs: list[tuple]) -> Callable[[], str]:
        S = self.rt.to_str
        if len(subs) == 1:
            sub = subs[0]
            if sub[0] == "str" or (sub[0] == "num" and sub[1].is_integer()):
                k = S(sub[1])
                return lambda: k
            e = self.expr(sub)
            return lambda: S(e())
        es, g = [self.expr(s) for s in subs], self.rt.g
        return lambda: S(g["SUBSEP"]).join([S(e()) for e in es])

    def ref(self, node: tuple) -> Callable[[], tuple]:
        """Compile an lvalue to a function giving (container, key): container[key] is the cell."""
        kind = node[0]
        if kind == "var":
            self.e_var(node)  # rejects arrays
            cell = (self.rt.nf_view, None) if node[1] == "NF" else (self.rt.g, node[1])
            return lambda: cell
        if kind == "local":
            self.e_local(node)
            i, rt = node[1], self.rt
            return lambda: (rt.frame, i)
        if kind == "index":
            array, key = self.array(node[1]), self.key(node[2])
            return lambda: (array(), key())
        if kind == "field":
            view = self.rt.fields_view
            index = self.field_index(node[1])
            return lambda: (view, index())
        raise AwkError("assignment to something that is not a variable")

    def e_concat(self, node: tuple) -> Callable:
        parts, S = [self.expr(p) for p in node[1]], self.rt.to_str
        if len(parts) == 2:
            a, b = parts
            return lambda: S(a()) + S(b())
        return lambda: "".join([S(p()) for p in parts])

    def e_binop(self, node: tuple) -> Callable:
        op, a, b = node[1], self.expr(node[2]), self.expr(node[3])
        if op == "+":
            return lambda: to_num(a()) + to_num(b())
        if op == "-":
            return lambda: to_num(a()) - to_num(b())
        if op == "*":
            return lambda: to_num(a()) * to_num(b())
        fn = _ARITH[op]
        return lambda: fn(to_num(a()), to_num(b()))

    def e_neg(self, node: tuple) -> Callable:
        e = self.expr(node[1])
        return lambda: -to_num(e())

    def e_plus(self, node: tuple) -> Callable:
        e = self.expr(node[1])
        return lambda: to_num(e())

    def e_cond(self, node: tuple) -> Callable:
        cond, yes, no = self.test(node[1]), self.expr(node[2]), self.expr(node[3])
        return lambda: yes() if cond() else no()

    def e_assign(self, node: tuple) -> Callable:
        op, target, value = node[1], node[2], self.expr(node[3])
        ref = self.ref(target)
        if op == "=":
            if target[0] == "var" and target[1] != "NF":
                g, name = self.rt.g, target[1]

                def assign_var() -> Any:
                    v = g[name] = value()
                    return v
                return assign_var

            def assign() -> Any:
                v = value()
                cell, k = ref()
                cell[k] = v
                return v
            return assign
        fn = _ARITH[op[0]]
        if target[0] == "var" and target[1] != "NF":
            g, name = self.rt.g, target[1]

            def update_var() -> float:
                y = to_num(value())
                v = g[name] = fn(to_num(g[name]), y)
                return v
            return update_var

        def update() -> float:
            y = to_num(value())
            cell, k = ref()
            v = cell[k] = fn(to_num(cell[k]), y)
            return v
        return update

    def e_preincr(self, node: tuple) -> Callable:
        delta, ref = node[1], self.ref(node[2])

        def preincr() -> float:
            cell, k = ref()
            v = cell[k] = to_num(cell[k]) + delta
            return v
        return preincr

    def e_postincr(self, node: tuple) -> Callable:
        delta, ref = node[1], self.ref(node[2])
        if node[2][0] == "var" and node[2][1] != "NF":
            g, name = self.rt.g, node[2][1]

            def postincr_var() -> float:
                old = to_num(g[name])
                g[name] = old + delta
                return old
            return postincr_var

        def postincr() -> float:
            cell, k = ref()
            old = to_num(cell[k])
            cell[k] = old + delta
            return old
        return postincr

    def e_call(self, node: tuple) -> Callable:
        name, args = node[1], node[2]
        callee, body, rt = self.funcs[name], self.bodies[name], self.rt
        argfns = [self.argument(a, i in callee.array_params) for i, a in enumerate(args)]
        padding = [UNINIT] * (len(callee.params) - len(args))

        def call() -> Any:
            frame = [f() for f in argfns]
            frame += padding
            saved, rt.frame = rt.frame, frame
            try:
                body[0]()
            except _Return as r:
                return r.value
            finally:
                rt.frame = saved
            return UNINIT
        return call

    def argument(self, node: tuple, array_param: bool) -> Callable:
        """Arrays are passed by reference, scalars by value."""
        if node[0] == "var" and node[1] in self.arrays:
            return self.array(node)
        if node[0] == "local":
            assert self.func is not None  # locals exist inside functions only
            if array_param or node[1] in self.func.array_params:
                return self.array(node)
            i, rt = node[1], self.rt
            return lambda: rt.frame[i]  # may be an array passed on through an untyped parameter
        return self.expr(node)

    def e_getline(self, node: tuple) -> Callable:
        target, file, rt = node[1], node[2], self.rt
        ref = self.ref(target) if target else None

        def store(record: str) -> None:
            if ref is None:
                rt.set_record(record)
            else:
                cell, k = ref()
                cell[k] = StrNum(record)
        if file is None:
            def getline() -> float:
                record = rt.read_main()
                if record is None:
                    return 0.0
                store(record)
                return 1.0
            return getline
        name, S = self.expr(file), self.rt.to_str

        def getline_file() -> float:  # unlike plain getline, NR and FNR stay as they are
            record = rt.read_file(S(name()))
            if not isinstance(record, str):
                return 0.0 if record is None else record
            store(record)
            return 1.0
        return getline_file

    def e_pipegetline(self, node: tuple) -> Callable:
        def pipe() -> float:
            raise AwkError(NO_PROCESSES)
        return pipe

    # -- tests
    def t_regex(self, node: tuple) -> Callable:
        search, rt = compile_ere(node[1]).search, self.rt
        return lambda: search(rt.record) is not None

    def t_match(self, node: tuple) -> Callable:
        negated, left, S = node[1], self.expr(node[2]), self.rt.to_str
        regex = self.regex(node[3], compile_ere)
        if negated:
            return lambda: regex().search(S(left())) is None
        return lambda: regex().search(S(left())) is not None

    def regex(self, node: tuple, compile: Callable = longest_ere) -> Callable[[], Any]:
        """A regex operand: a /literal/ is compiled now, any other value when evaluated."""
        if node[0] == "regex":
            rx = compile(node[1])
            return lambda: rx
        e, S = self.expr(node), self.rt.to_str
        return lambda: compile(S(e()))

    def t_cmp(self, node: tuple) -> Callable:
        op, a, b = _COMPARE[node[1]], self.expr(node[2]), self.expr(node[3])
        if node[3][0] == "num" and node[3][1].is_integer():  # the common `$3 > 10`
            number = node[3][1]
            text = str(int(number))

            def compare_constant() -> bool:
                x = a()
                n = strnum_value(x)
                return op(x, text) if n is None else op(n, number)
            return compare_constant
        comparable = self.rt.comparable
        return lambda: op(*comparable(a(), b()))

    def t_and(self, node: tuple) -> Callable:
        a, b = self.test(node[1]), self.test(node[2])
        return lambda: a() and b()

    def t_or(self, node: tuple) -> Callable:
        a, b = self.test(node[1]), self.test(node[2])
        return lambda: a() or b()

    def t_not(self, node: tuple) -> Callable:
        a = self.test(node[1])
        return lambda: not a()

    def t_in(self, node: tuple) -> Callable:
        key, array = self.key(node[1]), self.array(node[2])
        return lambda: key() in array()

    # -- built-in functions
    def e_builtin(self, node: tuple) -> Callable:
        name, args = node[1], node[2]
        if name in _MATH:
            fn, e = _MATH[name], self.expr(args[0])
            return lambda: fn(to_num(e()))
        return getattr(self, "b_" + name)(args)

    def b_length(self, args: list) -> Callable:
        rt, S = self.rt, self.rt.to_str
        if not args:
            return lambda: float(len(rt.record))
        arg = args[0]
        if arg[0] in ("var", "local") and self.is_array(arg):
            array = self.array(arg)
            return lambda: float(len(array()))
        if arg[0] == "local":  # may hold an array passed through an untyped parameter
            i = arg[1]

            def length_local() -> float:
                v = rt.frame[i]
                return float(len(v if type(v) is _Array else S(v)))
            return length_local
        e = self.expr(arg)
        return lambda: float(len(S(e())))

    def is_array(self, node: tuple) -> bool:
        if node[0] == "local":
            assert self.func is not None  # locals exist inside functions only
            return node[1] in self.func.array_params
        return node[1] in self.arrays

    def b_substr(self, args: list) -> Callable:
        s, m, S = self.expr(args[0]), self.expr(args[1]), self.rt.to_str
        n = self.expr(args[2]) if len(args) == 3 else None

        def substr() -> str:
            text = S(s())
            start = to_num(m())
            start = start if math.isinf(start) else float(round(start))
            if n is None:
                end = len(text) + 1.0
            else:
                length = to_num(n())
                end = start + (length if math.isinf(length) else float(round(length)))
            low, high = max(start, 1.0), min(end, len(text) + 1.0)
            if not high > low:  # also false for nan
                return ""
            return text[int(low) - 1:int(high) - 1]
        return substr

    def b_index(self, args: list) -> Callable:
        s, t, S = self.expr(args[0]), self.expr(args[1]), self.rt.to_str
        return lambda: float(S(s()).find(S(t())) + 1)

    def b_split(self, args: list) -> Callable:
        s, array, rt, S = self.expr(args[0]), self.array(args[1]), self.rt, self.rt.to_str
        if len(args) == 2:
            def separator() -> Callable:
                return field_splitter(S(rt.g["FS"]))
        elif args[2][0] == "regex":
            rx = longest_ere(args[2][1])
            splitter = (lambda text: rx.split(text) if text else []) if args[2][1] else list

            def separator() -> Callable:
                return splitter
        else:
            sep = self.expr(args[2])

            def separator() -> Callable:
                return field_splitter(S(sep()))

        def split() -> float:
            parts = separator()(S(s()))
            a = array()
            a.clear()
            a.update(zip(map(str, range(1, len(parts) + 1)), map(StrNum, parts), strict=False))
            return float(len(parts))
        return split

    def b_sub(self, args: list, every: bool = False) -> Callable:
        regex, repl, S = self.regex(args[0]), self.expr(args[1]), self.rt.to_str
        target = args[2] if len(args) == 3 else ("field", ("num", 0.0))
        if target[0] in _LVALUES:
            ref = self.ref(target)
        else:  # a non-variable target: the result is computed and dropped
            value = self.expr(target)

            def ref() -> tuple:
                return [value()], 0

        def sub() -> float:
            rx, parts = regex(), _replacement(S(repl()))
            cell, k = ref()
            text, count = _substitute(rx, parts, S(cell[k]), every)
            if count:
                cell[k] = text
            return float(count)
        return sub

    def b_gsub(self, args: list) -> Callable:
        return self.b_sub(args, every=True)

    def b_match(self, args: list) -> Callable:
        s, regex, g, S = self.expr(args[0]), self.regex(args[1]), self.rt.g, self.rt.to_str

        def match() -> float:
            m = regex().search(S(s()))
            if m is None:
                g["RSTART"], g["RLENGTH"] = 0.0, -1.0
            else:
                g["RSTART"], g["RLENGTH"] = float(m.start() + 1), float(m.end() - m.start())
            return g["RSTART"]
        return match

    def b_sprintf(self, args: list) -> Callable:
        fmt, rest, rt = self.expr(args[0]), [self.expr(a) for a in args[1:]], self.rt
        return lambda: rt.sprintf(rt.to_str(fmt()), [a() for a in rest])

    def b_tolower(self, args: list) -> Callable:
        e, S = self.expr(args[0]), self.rt.to_str
        return lambda: _change_case(S(e()), str.lower)

    def b_toupper(self, args: list) -> Callable:
        e, S = self.expr(args[0]), self.rt.to_str
        return lambda: _change_case(S(e()), str.upper)

    def b_int(self, args: list) -> Callable:
        e = self.expr(args[0])

        def int_() -> float:
            x = to_num(e())
            return float(math.trunc(x)) if math.isfinite(x) else x
        return int_

    def b_atan2(self, args: list) -> Callable:
        y, x = self.expr(args[0]), self.expr(args[1])
        return lambda: math.atan2(to_num(y()), to_num(x()))

    def b_rand(self, args: list) -> Callable:
        return self.rt.rng.random

    def b_srand(self, args: list) -> Callable:
        rt = self.rt
        e = self.expr(args[0]) if args else None

        def srand() -> float:
            previous = rt.seed
            rt.seed = to_num(e()) if e else float(int(time.time()))
            rt.rng.seed(rt.seed)
            return previous
        return srand

    def b_system(self, args: list) -> Callable:
        e, S = self.expr(args[0]), self.rt.to_str

        def system() -> float:
            if S(e()) == "":  # system("") is the idiom for flushing output
                return self.rt.flush()
            raise AwkError(NO_PROCESSES)
        return system

    def b_close(self, args: list) -> Callable:
        e, rt = self.expr(args[0]), self.rt
        return lambda: rt.close_stream(rt.to_str(e()))

    def b_fflush(self, args: list) -> Callable:
        return self.rt.flush

    # -- statements
    def stmt(self, node: tuple) -> Callable[[], None]:
        return getattr(self, "s_" + node[0])(node)

    def s_block(self, node: tuple) -> Callable:
        body = tuple(self.stmt(s) for s in node[1])
        if not body:
            return _noop
        if len(body) == 1:
            return body[0]

        def block() -> None:
            for s in body:
                s()
        return block

    def s_expr(self, node: tuple) -> Callable:
        return self.expr(node[1])

    def output(self, redirect: tuple | None) -> Callable[[str], None]:
        rt = self.rt
        if redirect is None:
            return rt.write_out
        op, target = redirect
        if op == "|":
            def pipe(text: str) -> None:
                raise AwkError(NO_PROCESSES)
            return pipe
        name, mode, S = self.expr(target), "a" if op == ">>" else "w", rt.to_str
        return lambda text: rt.write_file(S(name()), mode, text)

    def s_print(self, node: tuple) -> Callable:
        rt, g, S, P = self.rt, self.rt.g, self.rt.to_str, self.rt.to_output
        write, items = self.output(node[2]), [self.expr(a) for a in node[1]]
        if not items:
            return lambda: write(rt.record + S(g["ORS"]))
        if len(items) == 1:
            item = items[0]
            return lambda: write(P(item()) + S(g["ORS"]))
        return lambda: write(S(g["OFS"]).join([P(i()) for i in items]) + S(g["ORS"]))

    def s_printf(self, node: tuple) -> Callable:
        rt, write = self.rt, self.output(node[2])
        fmt, rest = self.expr(node[1][0]), [self.expr(a) for a in node[1][1:]]
        return lambda: write(rt.sprintf(rt.to_str(fmt()), [a() for a in rest]))

    def s_if(self, node: tuple) -> Callable:
        cond, then = self.test(node[1]), self.stmt(node[2])
        otherwise = self.stmt(node[3]) if node[3] else _noop

        def if_() -> None:
            if cond():
                then()
            else:
                otherwise()
        return if_

    def s_while(self, node: tuple) -> Callable:
        cond, body = self.test(node[1]), self.stmt(node[2])

        def while_() -> None:
            while cond():
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
        return while_

    def s_do(self, node: tuple) -> Callable:
        body, cond = self.stmt(node[1]), self.test(node[2])

        def do() -> None:
            while True:
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
                if not cond():
                    break
        return do

    def s_for(self, node: tuple) -> Callable:
        init = self.stmt(node[1]) if node[1] else _noop
        cond = self.test(node[2]) if node[2] else (lambda: True)
        step = self.stmt(node[3]) if node[3] else _noop
        body = self.stmt(node[4])

        def for_() -> None:
            init()
            while cond():
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
                step()
        return for_

    def s_forin(self, node: tuple) -> Callable:
        ref, array, body = self.ref(node[1]), self.array(node[2]), self.stmt(node[3])

        def forin() -> None:
            cell, k = ref()
            for key in list(array()):
                cell[k] = key if type(key) is str else str(key)
                try:
                    body()
                except _Break:
                    break
                except _Continue:
                    pass
        return forin

    def s_delete(self, node: tuple) -> Callable:
        array = self.array(node[1])
        if node[2] is None:
            return lambda: array().clear()
        key = self.key(node[2])
        return lambda: array().pop(key(), None)

    def s_jump(self, node: tuple) -> Callable:
        """break, continue, next and nextfile unwind to the loop or record loop as exceptions."""
        jump = _JUMPS[node[0]]

        def raise_jump() -> None:
            raise jump()
        return raise_jump

    s_break = s_continue = s_next = s_nextfile = s_jump

    def s_exit(self, node: tuple) -> Callable:
        e = self.expr(node[1]) if node[1] else None

        def exit_() -> None:
            raise _Exit(None if e is None else _to_int(to_num(e())) & 0xFF)
        return exit_

    def s_return(self, node: tuple) -> Callable:
        e = self.expr(node[1]) if node[1] else (lambda: UNINIT)

        def return_() -> None:
            raise _Return(e())
        return return_


# ---------------------------------------------------------------- entry point

class _Usage(Exception):
    """A command-line error: reported with the usage line."""


def _parse_args(argv: list[str]) -> tuple[list[tuple[str, str]], list[str], str | None, list[str]]:
    """Split argv into (assignments incl. -F as FS, -f files, program text, operands)."""
    assigns: list[tuple[str, str]] = []
    progfiles: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg[:2] not in ("-F", "-v", "-f"):
            if arg.startswith("-") and arg != "-":
                raise _Usage(f"unknown option {arg}")
            break
        value = arg[2:]
        if not value:
            i += 1
            if i >= len(argv):
                raise _Usage(f"option {arg} needs an argument")
            value = argv[i]
        if arg[1] == "F":
            assigns.append(("FS", value))
        elif arg[1] == "f":
            progfiles.append(value)
        else:
            m = _OPERAND_ASSIGN.match(value)
            if not m:
                raise _Usage(f"improper assignment: -v {value}")
            assigns.append((m.group(1), value[m.end():]))
        i += 1
    program = None
    if not progfiles:
        if i >= len(argv):
            raise _Usage("no program given")
        program = argv[i]
        i += 1
    return assigns, progfiles, program, argv[i:]


def _read_program(path: str, stdin: Iterable[str], open_file: Callable[..., IO]) -> str:
    if path in _STDIN_NAMES:
        return "".join(stdin)
    if path == "/dev/null":
        return ""
    try:
        with _text_opener(open_file)(path, "r") as f:
            return f.read()
    except OSError as e:
        raise AwkError(f"can't open program file {path} ({e.strerror or e})") from None


def run(argv: list[str], stdin: Iterable[str], write_out: Callable[[str], None],
        write_err: Callable[[str], None], *, open_file: Callable[..., IO] = open,
        environ: Mapping[str, str] | None = None) -> int:
    """Run awk with ``argv`` (the words after ``awk``); output goes through the writers.

    Returns the exit status: 0, the value given to ``exit``, or 2 after an error.
    """
    try:
        assigns, progfiles, program, operands = _parse_args(list(argv))
    except _Usage as e:
        write_err(f"awk: {e}\n{USAGE}\n")
        return 2
    rt: Runtime | None = None
    old_limit = sys.getrecursionlimit()
    try:
        if program is None:
            program = "\n".join(_read_program(path, stdin, open_file) for path in progfiles)
        parser = Parser(program).parse()
        rt = Runtime(stdin, write_out, write_err, open_file,
                     os.environ if environ is None else environ, operands)
        compiled = Compiler(rt, parser).program(parser)
        for name, value in assigns:
            rt.assign(name, value)
        sys.setrecursionlimit(max(old_limit, 10_000))  # awk recursion nests several closures
        return rt.execute(*compiled)
    except AwkSyntaxError as e:
        write_err(f"awk: syntax error at source line {e.line}: {e}\n")
        lines = program.split("\n") if program else []
        if 0 < e.line <= len(lines):
            write_err(f"awk: source line {e.line}: {lines[e.line - 1].strip()}\n")
        return 2
    except AwkError as e:
        write_err(f"awk: {e}{rt.where() if rt else ''}\n")
        return 2
    except RecursionError:
        write_err("awk: function calls nested too deeply\n")
        return 2
    except UnicodeDecodeError as e:
        write_err(f"awk: input is not valid text ({e.reason})\n")
        return 2
    except BrokenPipeError:
        return 2
    except Exception as e:  # a bug here must not look like a crash of the whole shell
        write_err(f"awk: internal error: {type(e).__name__}: {e}\n")
        return 2
    finally:
        sys.setrecursionlimit(old_limit)
