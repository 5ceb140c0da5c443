"""bc, as GNU bc 1.07.1: agents' scripts do their decimal arithmetic with it
(`echo "scale=2; $used * 100 / $total" | bc`, `bc -l <<< 's(1)'`); the guest had none.

The language (POSIX bc and GNU's extensions): numbers of any size with a scale each, `scale`,
`ibase`, `obase` (2 to 16 read; any base printed, above 16 as GNU prints it), `last`/`.`,
`+ - * / % ^`, the assignment operators, `++`/`--`, relations anywhere, `! && ||`, GNU's
precedences (an assignment binds tighter than a relation: `a = 3 < 5` prints 1), `if`/`else`,
`while`, `for`, `break`, `continue`, `{ }`, strings, `print` with its escapes, `define` (value
and array parameters, `auto`, dynamic scope as bc has, `define void`), `return`, `length`,
`scale`, `sqrt`, `halt`, `quit` (when read, as GNU: `1; quit` prints nothing), `limits`,
comments (`/* */`, `#`), and `-l`'s library (`s c a l e j`, scale 20). Results are truncated as
bc truncates them (a product keeps min(a+b, max(scale, a, b)) digits, a quotient `scale`, a
power min(a*n, max(scale, a))); the library's functions give the exact value truncated at
`scale` (GNU's libmath.b gets the same digits but, rarely, in the last one). Numbers are printed
as GNU prints them: no leading 0 before the point, lines of BC_LINE_LENGTH (70) ending in `\\`.
A syntax error discards its line, a runtime error the rest of its line, as GNU does; messages
are GNU's, without the bytecode address GNU adds to a runtime error.

Not here: `read()`, `-s`/`-w`'s POSIX checks, `warranty`, array parameters by reference (`*a[]`).
"""

from __future__ import annotations

import decimal
import math
import re
import sys
from typing import TYPE_CHECKING, Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

VERSION = ("bc 1.07.1\nCopyright 1991-1994, 1997, 1998, 2000, 2004, 2006, 2008, 2012-2017 "
           "Free Software Foundation, Inc.\n")
USAGE = """usage: bc [options] [file ...]
  -h  --help         print this usage and exit
  -i  --interactive  force interactive mode
  -l  --mathlib      use the predefined math routines
  -q  --quiet        don't print initial banner
  -s  --standard     non-standard bc constructs are errors
  -w  --warn         warn about non-standard bc constructs
  -v  --version      print version information and exit
"""
LIMITS = ("BC_BASE_MAX     = 2147483647\nBC_DIM_MAX      = 16777215\nBC_SCALE_MAX    = 2147483647\n"
          "BC_STRING_MAX   = 2147483647\nMAX Exponent    = 9223372036854775807\nNumber of vars  = 32767\n")
DIM_MAX = 16777215
SCALE_MAX = 2147483647
BASE_MAX = 2147483647
MAX_DEPTH = 1000  # nested bc calls (GNU's limit is its memory; ours the guest's stack)
MAX_NESTING = 2500  # nested expressions and statements (GNU's parser stack holds ~9 990 parentheses)
RECURSION_LIMIT = 12000  # Python frames while bc runs: about 10 a bc call, and the parser's nesting
KEYWORDS = frozenset({"auto", "break", "continue", "define", "else", "for", "halt", "if", "last", "length",
                      "limits", "print", "quit", "read", "return", "scale", "sqrt", "while", "ibase", "obase",
                      "void", "warranty"})
TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+|\\\n)
  | (?P<comment>/\*.*?\*/|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<number>[0-9A-Z]+(?:\.[0-9A-Z]*)?|\.[0-9A-Z]+)
  | (?P<name>[a-z][a-z0-9_]*)
  | (?P<string>"[^"]*")
  | (?P<op>\+\+|--|\|\||&&|[-+*/%^=!<>]=|[-+*/%^=<>!(){}\[\];,.])
""", re.VERBOSE | re.DOTALL)
PRINT_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "q": '"', "r": "\r", "t": "\t", "\\": "\\"}
# precedence levels, lowest first (GNU bc's yacc grammar)
OR, AND, NOT, REL, ASSIGN, ADD, MUL, POW, NEG = range(1, 10)
BINARY = {"||": OR, "&&": AND, "==": REL, "!=": REL, "<": REL, "<=": REL, ">": REL, ">=": REL,
          "+": ADD, "-": ADD, "*": MUL, "/": MUL, "%": MUL, "^": POW}
ASSIGNMENTS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "^="})


class BcSyntaxError(Exception):
    pass


class BcRuntimeError(Exception):
    pass


class Quit(Exception):
    pass


class Exhausted(Exception):
    """Nesting past MAX_NESTING: GNU's parser stops with bison's "memory exhausted" and bc ends."""


class _Return(Exception):
    def __init__(self, value: Num) -> None:
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# -- numbers -----------------------------------------------------------------------------------------
class Num:
    """n / 10**s: bc's number, with the scale it carries."""

    __slots__ = ("n", "s")

    def __init__(self, n: int, s: int = 0) -> None:
        self.n, self.s = n, s

    def at(self, scale: int) -> Num:
        """This number with `scale` digits after the point, truncated toward zero."""
        if scale == self.s:
            return self
        if scale > self.s:
            return Num(self.n * 10 ** (scale - self.s), scale)
        return Num(_tdiv(self.n, 10 ** (self.s - scale)), scale)

    def is_zero(self) -> bool:
        return self.n == 0

    def integer(self) -> int:
        return _tdiv(self.n, 10 ** self.s)

    def compare(self, other: Num) -> int:
        scale = max(self.s, other.s)
        a, b = self.at(scale).n, other.at(scale).n
        return (a > b) - (a < b)


ZERO = Num(0)
ONE = Num(1)


def _tdiv(a: int, b: int) -> int:
    """a / b truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _negate(a: Num) -> Num:
    return Num(-a.n, a.s)


def add(a: Num, b: Num) -> Num:
    if a.s == b.s:
        return Num(a.n + b.n, a.s)
    scale = max(a.s, b.s)
    return Num(a.at(scale).n + b.at(scale).n, scale)


def sub(a: Num, b: Num) -> Num:
    if a.s == b.s:
        return Num(a.n - b.n, a.s)
    scale = max(a.s, b.s)
    return Num(a.at(scale).n - b.at(scale).n, scale)


def mul(a: Num, b: Num, scale: int) -> Num:
    return Num(a.n * b.n, a.s + b.s).at(min(a.s + b.s, max(scale, a.s, b.s)))


def div(a: Num, b: Num, scale: int) -> Num:
    if b.is_zero():
        raise BcRuntimeError("Divide by zero")
    # a.n/10^a.s / (b.n/10^b.s) * 10^scale
    return Num(_tdiv(a.n * 10 ** (b.s + scale), b.n * 10 ** a.s), scale)


def mod(a: Num, b: Num, scale: int) -> Num:
    if b.is_zero():
        raise BcRuntimeError("Modulo by zero")
    quotient = div(a, b, scale)
    return sub(a, mul(quotient, b, scale + b.s)).at(max(scale + b.s, a.s))


def power(a: Num, b: Num, scale: int, warn: Callable[[str], None]) -> Num:
    if b.s:
        warn("non-zero scale in exponent")
    exponent = b.integer()
    if exponent == 0:
        return ONE
    if abs(exponent) > 1 << 63:
        raise BcRuntimeError("exponent too large in raise")
    if exponent < 0:
        exact = Num(a.n ** -exponent, a.s * -exponent)
        if exact.is_zero():
            raise BcRuntimeError("divide by zero")
        return div(ONE, exact, scale)
    exact = Num(a.n ** exponent, a.s * exponent)
    return exact.at(min(a.s * exponent, max(scale, a.s)))


def square_root(a: Num, scale: int) -> Num:
    if a.n < 0:
        raise BcRuntimeError("Square root of a negative number")
    rscale = max(scale, a.s)
    # sqrt(n / 10^s) * 10^r = sqrt(n * 10^(2r - s))
    shift = 2 * rscale - a.s
    value = a.n * 10 ** shift if shift >= 0 else a.n // 10 ** -shift
    return Num(math.isqrt(value), rscale)


def length(a: Num) -> int:
    digits = len(str(abs(a.n)))
    integer_digits = max(digits - a.s, 0)
    if integer_digits == 0:
        return a.s if a.s else 1
    return integer_digits + a.s


def parse_number(text: str, ibase: int) -> Num:
    if len(text) == 1:
        return Num(int(text, 36))
    whole, _, fraction = text.partition(".")

    def digit(character: str) -> int:
        return min(int(character, 36), ibase - 1)

    if ibase == 10 and text.replace(".", "").isdigit():
        return Num(int(whole + fraction or "0"), len(fraction))
    value = 0
    for character in whole:
        value = value * ibase + digit(character)
    if not fraction:
        return Num(value)
    numerator = 0
    for character in fraction:
        numerator = numerator * ibase + digit(character)
    scale = len(fraction)
    return Num(value * 10 ** scale + numerator * 10 ** scale // ibase ** len(fraction), scale)


def format_number(a: Num, obase: int) -> str:
    """The digits bc prints for a number (without line breaks)."""
    if a.is_zero():
        return "0"
    sign = "-" if a.n < 0 else ""
    magnitude = abs(a.n)
    whole, fraction = divmod(magnitude, 10 ** a.s)
    if obase == 10:
        text = str(whole) if whole else ""
        if a.s:
            text += "." + str(fraction).rjust(a.s, "0")
        return sign + text
    width = len(str(obase - 1))

    def put(value: int, first: bool) -> str:
        if obase <= 16:
            return "0123456789ABCDEF"[value]
        return ("" if first else " ") + str(value).rjust(width, "0")

    digits: list[int] = []
    while whole:
        whole, remainder = divmod(whole, obase)
        digits.append(remainder)
    text = "".join(put(d, False) for d in reversed(digits))
    if a.s:
        text += "."
        denominator = 10 ** a.s
        place, first = 1, True
        while len(str(place)) <= a.s:
            fraction *= obase
            value, fraction = divmod(fraction, denominator)
            text += put(value, first)
            first = False
            place *= obase
    return sign + text


# -- the math library (-l) ---------------------------------------------------------------------------
# Each works in the decimal context library_call sets (decimal.localcontext): enough digits for
# the result's whole part, its scale and guard digits, truncating.
def _to_decimal(a: Num) -> decimal.Decimal:
    return decimal.Decimal(a.n).scaleb(-a.s)


def _from_decimal(value: decimal.Decimal, scale: int) -> Num:
    return Num(int(value.scaleb(scale).to_integral_value(rounding=decimal.ROUND_DOWN)), scale)


def _series(first: decimal.Decimal, step: Callable[[decimal.Decimal, int], decimal.Decimal]) -> decimal.Decimal:
    """first + t1 + t2 + ... with t(k) = step(t(k-1), k), until a term no longer changes the sum."""
    total, term, k = first, first, 1
    while True:
        term = step(term, k)
        if total + term == total:
            return total
        total, k = total + term, k + 1


def _pi() -> decimal.Decimal:
    """pi by Machin's formula: 16 atan(1/5) - 4 atan(1/239)."""
    def arctan_inverse(n: int) -> decimal.Decimal:
        square = n * n
        power = decimal.Decimal(1) / n
        total, k = power, 1
        while True:
            power = -power / square
            term = power / (2 * k + 1)
            if total + term == total:
                return total
            total, k = total + term, k + 1

    return 16 * arctan_inverse(5) - 4 * arctan_inverse(239)


def _sin(x: decimal.Decimal) -> decimal.Decimal:
    x = x.remainder_near(2 * _pi())
    square = x * x
    return _series(x, lambda term, k: -term * square / ((2 * k) * (2 * k + 1)))


def _cos(x: decimal.Decimal) -> decimal.Decimal:
    x = x.remainder_near(2 * _pi())
    square = x * x
    return _series(decimal.Decimal(1), lambda term, k: -term * square / ((2 * k - 1) * (2 * k)))


def _atan(x: decimal.Decimal) -> decimal.Decimal:
    if x < 0:
        return -_atan(-x)
    if x > 1:
        return _pi() / 2 - _atan(1 / x)
    halvings = 0  # atan(x) = 2 atan(x / (1 + sqrt(1 + x^2))), until the series is quick
    while x > decimal.Decimal("0.1"):
        x = x / (1 + (1 + x * x).sqrt())
        halvings += 1
    square = x * x
    total, power, k = x, x, 1
    while True:
        power = -power * square
        term = power / (2 * k + 1)
        if total + term == total:
            return total * 2 ** halvings
        total, k = total + term, k + 1


def _bessel(n: int, x: decimal.Decimal) -> decimal.Decimal:
    """J_n(x) by its series (the context carries digits for the cancellation of large x)."""
    if n < 0:
        return _bessel(-n, x) * (-1 if n % 2 else 1)
    half = x / 2
    square = half * half
    first = (half ** n if n else decimal.Decimal(1)) / math.factorial(n)
    if first == 0:
        return first
    total, term, k = first, first, 1
    while True:
        term = -term * square / (k * (n + k))
        if total + term == total and k > abs(half):
            return total
        total, k = total + term, k + 1


def library_call(name: str, args: list[Num], scale: int) -> Num:
    """`-l`'s functions: the exact value truncated at `scale` (guard digits carry the work)."""
    x = _to_decimal(args[-1])
    whole = len(str(abs(args[-1].integer())))
    extra = 12
    if name == "e" and x > 0:
        extra += int(x * decimal.Decimal("0.4343")) + 2  # the digits of e^x's whole part
    if name == "j":
        extra += int(abs(x)) // 2 + 2  # the series' terms grow to about e^|x| before they cancel
    if name == "l" and x <= 0:
        return Num((1 - 10 ** scale) * 10 ** scale, scale)  # libmath.b's answer: (1 - 10^scale) / 1
    context = decimal.Context(prec=scale + whole + extra, rounding=decimal.ROUND_DOWN,
                              Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    with decimal.localcontext(context):
        if name == "e":
            value = x.exp()
        elif name == "l":
            value = x.ln()
        elif name == "s":
            value = _sin(x)
        elif name == "c":
            value = _cos(x)
        elif name == "a":
            value = _atan(x)
        else:
            value = _bessel(args[0].integer(), x)
        return _from_decimal(value, scale)


LIBRARY = {"s": 1, "c": 1, "a": 1, "l": 1, "e": 1, "j": 2}


# -- the parser --------------------------------------------------------------------------------------
class Parser:
    """GNU bc's grammar, one input item (a line of statements, or a function) at a time."""

    def __init__(self, source: str, report: Callable[[int | None, str], None]) -> None:
        self.report = report  # (line, message): an illegal character, met where GNU's lexer meets it
        self.tokens: list[tuple[str, str, int]] = []
        line = 1
        position = 0
        while position < len(source):
            unclosed = source.startswith("/*", position) and source.find("*/", position + 2) < 0
            match = None if unclosed else TOKEN.match(source, position)
            if unclosed:
                self.tokens.append(("unclosed", "", line))  # "EOF encountered in a comment."
                break
            if match is None:
                self.tokens.append(("bad", source[position], line))
                position += 1
                continue
            kind = match.lastgroup or ""
            text = match.group(kind)
            line += text.count("\n") if kind == "newline" else 0  # a newline is read on its next line
            if kind not in ("space", "comment"):
                self.tokens.append((kind, text, line))
            line += text.count("\n") if kind != "newline" else 0
            position = match.end()
        self.tokens.append(("eof", "", line))
        self.index = 0
        self.in_function = False
        self.loops = 0  # loops around the statement being read (`break` outside one is an error)
        self.depth = 0  # expressions and statements being read, one inside the other
        self.void: Callable[[str], bool] = lambda name: False  # the interpreter's void functions
        # GNU's grammar ends an item with a newline: a last line without one is a syntax error
        self.terminated = source.endswith("\n")
        self.errors: list[tuple[int, str]] = []

    # tokens
    def peek(self, offset: int = 0) -> tuple[str, str, int]:
        for position in range(self.index, min(self.index + offset, len(self.tokens) - 1) + 1):
            while self.tokens[position][0] == "bad":  # the last token, eof, never is
                _, character, line = self.tokens.pop(position)
                self.report(line, f"illegal character: {character}")
            if self.tokens[position][0] == "unclosed":
                self.report(None, "EOF encountered in a comment.")
                self.tokens[position:] = [("eof", "", self.tokens[position][2])]
        return self.tokens[min(self.index + offset, len(self.tokens) - 1)]

    def at(self, *texts: str) -> bool:
        kind, text, _ = self.peek()
        return kind in ("op", "name") and text in texts

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        self.index += 1
        return token

    def bad(self) -> BcSyntaxError:
        """A syntax error at the token just taken (its line is the one reported)."""
        self.index -= 1
        return BcSyntaxError("syntax error")

    def expect(self, text: str) -> None:
        if not self.at(text):
            raise BcSyntaxError("syntax error")
        self.index += 1

    def skip_newlines(self) -> None:
        while self.peek()[0] == "newline":
            self.index += 1

    @property
    def line(self) -> int:
        return self.peek()[2]

    # input items
    def item(self) -> list[tuple[str, Any]] | None:
        """The next input item, a line: [("define", function)] and/or [("run", statements)] (GNU
        takes statements after a definition's `}` on its line, not a definition after them);
        None at the end."""
        while self.peek()[0] == "newline" or self.at(";"):
            self.index += 1
        if self.peek()[0] == "eof":
            return None
        found: list[tuple[str, Any]] = []
        if self.at("define"):
            found.append(("define", self.function()))
            if self.at(";"):
                self.index += 1
        if self.peek()[0] not in ("newline", "eof"):
            statements = [self.statement()]
            while self.at(";"):
                self.index += 1
                if self.peek()[0] in ("newline", "eof"):
                    break
                statements.append(self.statement())
            found.append(("run", statements))
        if self.peek()[0] == "eof" and not self.terminated:
            raise BcSyntaxError("syntax error")
        if self.peek()[0] not in ("newline", "eof"):
            raise BcSyntaxError("syntax error")
        return found

    def recover(self) -> None:
        """After a syntax error: skip to the end of the line (outside braces)."""
        depth = 0
        while self.peek()[0] != "eof":
            kind, text, _ = self.take()
            if kind == "op" and text == "{":
                depth += 1
            elif kind == "op" and text == "}":
                depth = max(depth - 1, 0)
            elif kind == "newline" and depth == 0:
                return

    def function(self) -> tuple[str, list[tuple[str, bool]], list[tuple[str, bool]], list[Any], bool]:
        self.expect("define")
        void = False
        if self.at("void"):
            self.index += 1
            void = True
        kind, name, _ = self.take()
        if kind != "name" or name in KEYWORDS:
            raise BcSyntaxError("syntax error")
        self.expect("(")
        params = self.name_list(")")
        self.expect(")")
        self.expect("{")
        self.skip_newlines()
        autos: list[tuple[str, bool]] = []
        while self.at("auto"):
            self.index += 1
            autos += self.name_list(";", "\n")
            if self.at(";"):
                self.index += 1
            self.skip_newlines()
        was, self.in_function, loops, self.loops = self.in_function, True, self.loops, 0
        try:
            body = self.statement_list("}")
        finally:
            self.in_function, self.loops = was, loops
        self.expect("}")
        names = [n for n, _ in params + autos]
        if len(set(params + autos)) != len(names):
            raise BcSyntaxError(f"duplicate parameter or auto name in {name}")
        return name, params, autos, body, void

    def name_list(self, *ends: str) -> list[tuple[str, bool]]:
        names: list[tuple[str, bool]] = []
        if self.at(*ends) or self.peek()[0] == "newline":
            return names
        while True:
            if self.at("*"):
                raise BcSyntaxError("array parameters by reference (*a[]) are not supported here")
            kind, name, _ = self.take()
            if kind != "name" or name in KEYWORDS:
                raise BcSyntaxError("syntax error")
            array = False
            if self.at("["):
                self.index += 1
                self.expect("]")
                array = True
            names.append((name, array))
            if not self.at(","):
                return names
            self.index += 1

    def statement_list(self, end: str) -> list[Any]:
        statements: list[Any] = []
        while True:
            while self.peek()[0] == "newline" or self.at(";"):
                self.index += 1
            if self.at(end) or self.peek()[0] == "eof":
                return statements
            statements.append(self.statement())
            if not (self.at(";", end) or self.peek()[0] in ("newline", "eof")):
                raise BcSyntaxError("syntax error")

    def statement(self) -> Any:
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise Exhausted()
            return self._statement()
        finally:
            self.depth -= 1

    def _statement(self) -> Any:  # noqa: C901 - one branch per statement of the grammar
        kind, text, line = self.peek()
        if kind == "string":
            self.index += 1
            return ("string", text[1:-1])
        if kind == "op" and text == "{":
            self.index += 1
            body = self.statement_list("}")
            self.expect("}")
            return ("block", body)
        if kind == "name" and text in KEYWORDS and text not in ("scale", "ibase", "obase", "last", "length",
                                                               "sqrt", "read"):
            self.index += 1
            if text == "quit":
                raise Quit()
            if text == "break" and not self.loops:
                raise BcSyntaxError("Break outside a for/while", line)
            if text == "continue" and not self.loops:
                raise BcSyntaxError("Continue outside a for", line)
            if text in ("break", "continue", "halt", "limits", "warranty"):
                return (text,)
            if text == "return":
                value = None
                if self.at("(") or (self.peek()[0] not in ("newline", "eof") and not self.at(";", "}")):
                    value = self.expression()
                if not self.in_function:
                    raise BcSyntaxError("Return outside of a function.")
                return ("return", value)
            if text == "print":
                items = [self.print_item()]
                while self.at(","):
                    self.index += 1
                    items.append(self.print_item())
                return ("print", items)
            if text == "if":
                self.expect("(")
                condition = self.expression()
                self.expect(")")
                self.skip_newlines()
                then = self.statement()
                otherwise = None
                if self.at("else"):  # on the same line, as GNU's grammar has it
                    self.index += 1
                    self.skip_newlines()
                    otherwise = self.statement()
                return ("if", condition, then, otherwise)
            if text == "while":
                self.expect("(")
                condition = self.expression()
                self.expect(")")
                self.skip_newlines()
                return ("while", condition, self.loop_body())
            if text == "for":
                self.expect("(")
                first = None if self.at(";") else self.expression()
                self.expect(";")
                condition = None if self.at(";") else self.expression()
                self.expect(";")
                step = None if self.at(")") else self.expression()
                self.expect(")")
                self.skip_newlines()
                return ("for", first, condition, step, self.loop_body())
            raise BcSyntaxError("syntax error")
        if self.at(";") or self.peek()[0] in ("newline", "eof") or self.at("}"):
            return ("empty",)
        return ("expr", self.expression())

    def loop_body(self) -> Any:
        self.loops += 1
        try:
            return self.statement()
        finally:
            self.loops -= 1

    def print_item(self) -> Any:
        if self.peek()[0] == "string":
            return ("string", self.take()[1][1:-1])
        return self.expression()

    # expressions: precedence climbing over GNU's levels
    def expression(self, level: int = 0) -> Any:
        """An expression of operators at `level` and above (a left-associative operator's right
        side is one level up; `^` and the assignments associate to the right)."""
        self.depth += 1
        try:
            if self.depth > MAX_NESTING:
                raise Exhausted()
            return self._expression(level)
        finally:
            self.depth -= 1

    def _expression(self, level: int) -> Any:
        left = self.prefix()
        while True:
            kind, text, _ = self.peek()
            if kind != "op":
                return left
            if text in ASSIGNMENTS:
                if ASSIGN < level:
                    return left
                if not _is_lvalue(left):
                    raise BcSyntaxError("syntax error")
                self.index += 1
                source = self.expression(ASSIGN)
                if source[0] == "call" and self.void(source[1]):
                    raise BcSyntaxError("Assignment of a void expression")
                left = ("assign", text, left, source)
                continue
            precedence = BINARY.get(text)
            if precedence is None or precedence < level:
                return left
            self.index += 1
            right = self.expression(precedence if precedence == POW else precedence + 1)
            left = ("binary", text, left, right)

    def prefix(self) -> Any:  # noqa: C901 - one branch per kind of operand
        if self.peek()[0] in ("newline", "eof"):
            raise BcSyntaxError("syntax error")
        kind, text, _ = self.take()
        if kind == "number":
            return ("number", text)
        if kind == "op":
            if text == "(":
                inner = self.expression()
                self.expect(")")
                return ("group", inner)
            if text == "-":
                return ("negate", self.expression(NEG))
            if text == "!":
                return ("not", self.expression(NOT + 1))
            if text in ("++", "--"):
                target = self.prefix()
                if not _is_lvalue(target):
                    raise BcSyntaxError("syntax error")
                return ("pre", text, target)
            if text == ".":
                return self.postfix(("last",))
            raise self.bad()
        if kind != "name":
            raise self.bad()
        if text in ("scale", "ibase", "obase", "last"):
            if text == "scale" and self.at("("):
                self.index += 1
                inner = self.expression()
                self.expect(")")
                return ("scale_of", inner)
            return self.postfix(("special", text))
        if text in ("length", "sqrt"):
            self.expect("(")
            inner = self.expression()
            self.expect(")")
            return (text, inner)
        if text == "read":
            self.expect("(")
            self.expect(")")
            return ("read",)
        if text in KEYWORDS:
            raise self.bad()
        if self.at("("):
            self.index += 1
            args: list[Any] = []
            if not self.at(")"):
                while True:
                    if self.peek()[0] == "name" and self.peek(1)[1] == "[" and self.peek(2)[1] == "]":
                        args.append(("array_arg", self.take()[1]))
                        self.index += 2
                    else:
                        args.append(self.expression())
                    if not self.at(","):
                        break
                    self.index += 1
            self.expect(")")
            return ("call", text, args)
        if self.at("["):
            self.index += 1
            index = self.expression()
            self.expect("]")
            return self.postfix(("element", text, index))
        return self.postfix(("variable", text))

    def postfix(self, target: Any) -> Any:
        if self.at("++", "--"):
            return ("post", self.take()[1], target)
        return target


def _is_lvalue(node: Any) -> bool:
    return node[0] in ("variable", "element", "special")


# -- the interpreter ---------------------------------------------------------------------------------
class Interpreter:
    def __init__(self, write: Callable[[str], None], error: Callable[[str], None], line_length: int,
                 mathlib: bool) -> None:
        self.write, self.error = write, error
        self.line_length = line_length
        self.scale = 20 if mathlib else 0
        self.ibase = 10
        self.obase = 10
        self.last = ZERO
        self.variables: dict[str, Num] = {}
        self.arrays: dict[str, dict[int, Num]] = {}
        self.functions: dict[str, Any] = {}
        self.library = mathlib
        self.column = 0
        self.frames: list[str] = ["(main)"]
        self._numbers: dict[tuple[str, int], Num] = {}  # literals as read in a base (Nums never change)

    # output
    def out_text(self, text: str) -> None:
        self.write(text)
        newline = text.rfind("\n")
        self.column = len(text) - newline - 1 if newline >= 0 else self.column + len(text)

    def out_number(self, value: Num) -> None:
        text = format_number(value, self.obase)
        if self.line_length <= 0:
            self.out_text(text)
            return
        pieces: list[str] = []
        for character in text:  # GNU: a line holds line_length - 2 characters, then `\`
            if self.column == self.line_length - 2:
                pieces.append("\\\n")
                self.column = 0
            pieces.append(character)
            self.column += 1
        self.write("".join(pieces))

    def warn(self, message: str) -> None:
        self.error(f"Runtime warning (func={self.frames[-1]}): {message}\n")

    # statements
    def run(self, statements: list[Any]) -> None:
        for statement in statements:
            self.execute(statement)

    def execute(self, statement: Any) -> None:  # noqa: C901 - one branch per statement
        kind = statement[0]
        if kind == "expr":
            node = statement[1]
            if node[0] == "call" and self.functions.get(node[1], (0, 0, 0, 0, False))[4]:
                self.evaluate(node)  # a void function's call prints nothing
                return
            value = self.evaluate(node)
            if node[0] != "assign":
                self.out_number(value)
                self.out_text("\n")
                self.last = value
        elif kind == "string":
            self.out_text(statement[1])
        elif kind == "print":
            for item in statement[1]:
                if item[0] == "string":
                    self.out_text(_print_escapes(item[1]))
                else:
                    value = self.evaluate(item)
                    self.out_number(value)
                    self.last = value
        elif kind == "block":
            self.run(statement[1])
        elif kind == "if":
            if not self.evaluate(statement[1]).is_zero():
                self.execute(statement[2])
            elif statement[3] is not None:
                self.execute(statement[3])
        elif kind == "while":
            while not self.evaluate(statement[1]).is_zero():
                try:
                    self.execute(statement[2])
                except _Break:
                    break
                except _Continue:
                    continue
        elif kind == "for":
            _, first, condition, step, body = statement
            if first is not None:
                self.evaluate(first)
            while condition is None or not self.evaluate(condition).is_zero():
                try:
                    self.execute(body)
                except _Break:
                    break
                except _Continue:
                    pass
                if step is not None:
                    self.evaluate(step)
        elif kind == "break":
            raise _Break()
        elif kind == "continue":
            raise _Continue()
        elif kind == "return":
            raise _Return(ZERO if statement[1] is None else self.evaluate(statement[1]))
        elif kind == "halt":
            raise Quit()
        elif kind == "limits":
            self.out_text(LIMITS)
        elif kind == "warranty":
            self.out_text(VERSION)

    # expressions
    def evaluate(self, node: Any) -> Num:
        return self._evaluators[node[0]](self, node)

    def _number(self, node: Any) -> Num:
        key = (node[1], self.ibase)
        value = self._numbers.get(key)
        if value is None:
            value = self._numbers[key] = parse_number(node[1], self.ibase)
        return value

    def _assign(self, node: Any) -> Num:
        _, operator, target, source = node
        value = self.evaluate(source)
        if operator != "=":
            value = self.arithmetic(operator[0], self.evaluate(target), value)
        self.store(target, value)
        return self.evaluate(target) if target[0] == "special" else value

    def _step(self, node: Any) -> Num:
        kind, operator, target = node
        before = self.evaluate(target)
        after = add(before, ONE) if operator == "++" else sub(before, ONE)
        self.store(target, after)
        return after if kind == "pre" else before

    def _read(self, node: Any) -> Num:
        raise BcRuntimeError("read() is not supported here")

    _evaluators: dict[str, Callable[[Interpreter, Any], Num]] = {
        "number": _number,
        "group": lambda self, node: self.evaluate(node[1]),
        "variable": lambda self, node: self.variables.get(node[1], ZERO),
        "element": lambda self, node: self.arrays.get(node[1], {}).get(self.index(node), ZERO),
        "special": lambda self, node: self.special(node[1]),
        "last": lambda self, node: self.last,
        "negate": lambda self, node: _negate(self.evaluate(node[1])),
        "not": lambda self, node: ONE if self.evaluate(node[1]).is_zero() else ZERO,
        "binary": lambda self, node: self.binary(node[1], node[2], node[3]),
        "assign": _assign,
        "pre": _step,
        "post": _step,
        "scale_of": lambda self, node: Num(self.evaluate(node[1]).s),
        "length": lambda self, node: Num(length(self.evaluate(node[1]))),
        "sqrt": lambda self, node: square_root(self.evaluate(node[1]), self.scale),
        "call": lambda self, node: self.call(node[1], node[2]),
        "read": _read,
    }

    def binary(self, operator: str, left_node: Any, right_node: Any) -> Num:
        if operator == "&&":
            return ONE if not self.evaluate(left_node).is_zero() and not self.evaluate(right_node).is_zero() else ZERO
        if operator == "||":
            return ONE if not self.evaluate(left_node).is_zero() or not self.evaluate(right_node).is_zero() else ZERO
        left, right = self.evaluate(left_node), self.evaluate(right_node)
        if BINARY[operator] == REL:
            order = left.compare(right)
            truth = {"==": order == 0, "!=": order != 0, "<": order < 0, "<=": order <= 0, ">": order > 0,
                     ">=": order >= 0}[operator]
            return ONE if truth else ZERO
        return self.arithmetic(operator, left, right)

    def arithmetic(self, operator: str, left: Num, right: Num) -> Num:
        if operator == "+":
            return add(left, right)
        if operator == "-":
            return sub(left, right)
        if operator == "*":
            return mul(left, right, self.scale)
        if operator == "/":
            return div(left, right, self.scale)
        if operator == "%":
            return mod(left, right, self.scale)
        return power(left, right, self.scale, self.warn)

    def index(self, node: Any) -> int:
        index = self.evaluate(node[2]).integer()
        if not 0 <= index <= DIM_MAX:
            raise BcRuntimeError(f"Array {node[1]} subscript out of bounds.")
        return index

    def special(self, name: str) -> Num:
        return {"scale": Num(self.scale), "ibase": Num(self.ibase), "obase": Num(self.obase),
                "last": self.last}[name]

    def store(self, target: Any, value: Num) -> None:
        kind = target[0]
        if kind == "variable":
            self.variables[target[1]] = value
        elif kind == "element":
            self.arrays.setdefault(target[1], {})[self.index(target)] = value
        elif target[1] == "last":
            self.last = value
        else:
            number = value.integer()
            if target[1] == "scale":
                if number < 0:
                    self.warn("negative scale, set to 0")
                    number = 0
                self.scale = min(number, SCALE_MAX)
            elif target[1] == "ibase":
                if number < 2:
                    self.warn("ibase too small, set to 2")
                    number = 2
                elif number > 16:
                    self.warn("ibase too large, set to 16")
                    number = 16
                self.ibase = number
            else:
                if number < 2:
                    self.warn("obase too small, set to 2")
                    number = 2
                elif number > BASE_MAX:
                    self.warn(f"obase too large, set to {BASE_MAX}")
                    number = BASE_MAX
                self.obase = number

    def call(self, name: str, args: list[Any]) -> Num:
        function = self.functions.get(name)
        if function is None:
            if self.library and name in LIBRARY:
                if len(args) != LIBRARY[name] or any(arg[0] == "array_arg" for arg in args):
                    raise BcRuntimeError("Parameter number mismatch")
                return library_call(name, [self.evaluate(arg) for arg in args], self.scale)
            raise BcRuntimeError(f"Function {name} not defined.")
        _, params, autos, body, void = function
        if len(args) != len(params):
            raise BcRuntimeError("Parameter number mismatch")
        if len(self.frames) > MAX_DEPTH:
            raise BcRuntimeError("Function call nesting too deep")
        values: list[Any] = []
        for (param, is_array), arg in zip(params, args, strict=True):
            if is_array != (arg[0] == "array_arg"):  # GNU's two messages, as it words them
                where = f"parameter {param}." if is_array else "parameter (null)."
                self.error(f"Runtime error (func={self.frames[-1]}): Parameter type mismatch"
                           f"{'' if is_array else ','} {where}\n")
                raise BcRuntimeError("Parameter number mismatch")
            values.append({k: v for k, v in self.arrays.get(arg[1], {}).items()} if is_array else self.evaluate(arg))
        saved: list[tuple[str, bool, Any]] = []
        for (param, is_array), value in zip(params, values, strict=True):
            saved.append((param, is_array, self._swap(param, is_array, value)))
        for auto, is_array in autos:
            saved.append((auto, is_array, self._swap(auto, is_array, {} if is_array else ZERO)))
        self.frames.append(name)
        try:
            self.run(body)
            result = ZERO
        except _Return as returned:
            result = returned.value
        except BcRuntimeError as problem:
            if not problem.args[1:]:
                problem.args = (problem.args[0], name)  # where it happened, for the message
            raise
        finally:
            self.frames.pop()
            for variable, is_array, old in reversed(saved):
                self._swap(variable, is_array, old)
        return result

    def _swap(self, name: str, is_array: bool, value: Any) -> Any:
        table: dict[str, Any] = self.arrays if is_array else self.variables
        old = table.pop(name, None)
        if value is not None:
            table[name] = value
        return old


def _print_escapes(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        character = text[index]
        if character == "\\" and index + 1 < len(text):
            out.append(PRINT_ESCAPES.get(text[index + 1], ""))
            index += 2
        else:
            out.append(character)
            index += 1
    return "".join(out)


# -- the program -------------------------------------------------------------------------------------
def _options(args: list[str]) -> tuple[bool, list[str], tuple[str, int, str] | None]:
    """(-l given, the files, or what to print and exit with: (stdout, status, stderr))."""
    mathlib = False
    files: list[str] = []
    options_done = False
    for arg in args:
        if options_done or not arg.startswith("-") or arg == "-":
            files.append(arg)
        elif arg == "--":
            options_done = True
        elif arg in ("--help", "-h"):
            return mathlib, files, (USAGE, 0, "")
        elif arg in ("--version", "-v"):
            return mathlib, files, (VERSION, 0, "")
        elif arg in ("--mathlib", "--quiet", "--standard", "--warn", "--interactive"):
            mathlib = mathlib or arg == "--mathlib"
        elif arg.startswith("--"):
            return mathlib, files, (USAGE, 1, f"bc: unrecognized option '{arg}'\n")
        elif any(letter not in "hilqswv" for letter in arg[1:]):
            letter = next(letter for letter in arg[1:] if letter not in "hilqswv")
            return mathlib, files, (USAGE, 1, f"bc: invalid option -- '{letter}'\n")
        elif "h" in arg:
            return mathlib, files, (USAGE, 0, "")
        elif "v" in arg:
            return mathlib, files, (VERSION, 0, "")
        else:
            mathlib = mathlib or "l" in arg
    return mathlib, files, None


def run_bc(args: list[str], stdin: str, environ: dict[str, str], read_file: Callable[[str], str],  # noqa: C901
           error: Callable[[str], None]) -> Iterator[str | int]:
    """bc's output in pieces, then its exit status (an int) last."""
    mathlib, files, done = _options(args)
    if done is not None:
        if done[2]:
            error(done[2])
        yield done[0]
        yield done[1]
        return
    try:
        line_length = int(environ.get("BC_LINE_LENGTH", "70"))
    except ValueError:
        line_length = 70
    if line_length != 0 and line_length < 3:
        line_length = 70
    output: list[str] = []
    bc = Interpreter(output.append, error, line_length, mathlib)
    sources: list[tuple[str, str]] = []
    for name in files:
        try:
            sources.append((name, read_file(name)))
        except OSError:
            error(f"File {name} is unavailable.\n")
            yield 1
            return
    sources.append(("(standard_in)", stdin))
    for name, source in sources:
        def report(line: int | None, message: str, name: str = name) -> None:
            error(f"{name} {line}: {message}\n" if line is not None else f"{message}\n")

        parser = Parser(source, report)
        parser.void = lambda function: bool(bc.functions.get(function, (0, 0, 0, 0, False))[4])
        while True:
            try:
                item = parser.item()
            except Quit:
                yield "".join(output)
                yield 0
                return
            except BcSyntaxError as problem:
                line = problem.args[1] if problem.args[1:] else parser.line
                error(f"{name} {line}: {problem.args[0]}\n")
                parser.recover()
                continue
            except Exhausted:
                error(f"{name} {parser.line}: memory exhausted\n")
                yield "".join(output)
                yield 0
                return
            if item is None:
                break
            try:
                for kind, payload in item:
                    if kind == "define":
                        bc.functions[payload[0]] = payload
                        continue
                    for statement in payload:
                        bc.execute(statement)
            except Quit:
                yield "".join(output)
                yield 0
                return
            except BcRuntimeError as problem:
                where = problem.args[1] if problem.args[1:] else "(main)"
                error(f"Runtime error (func={where}): {problem.args[0]}\n")
            except RecursionError:
                error("Runtime error (func=(main)): Function call nesting too deep\n")
            except MemoryError:
                error("Runtime error (func=(main)): Out of memory\n")
            if output:
                yield "".join(output)
                output.clear()
    yield "".join(output)
    yield 0


class BcCommand(Command):
    """bc [-hilqswv] [FILE...] (module docstring)."""

    name = "bc"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.STREAM_TEXT})
    summary = "an arbitrary precision calculator language"

    def run(self, invocation: Any) -> CommandResult:
        state = invocation.state

        def read_file(name: str) -> str:
            with open(str(state.resolve_path(name)), encoding="utf-8", errors="replace") as handle:
                return handle.read()

        stdin = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
        pieces = run_bc(list(invocation.arguments), stdin, dict(state.exported_variables()), read_file,
                        state.write_error)

        async def output() -> Any:
            # deep calls, and numbers of any length in and out (CPython caps int <-> str at 4300
            # digits unless told otherwise; bc has no such cap)
            limit, digits = sys.getrecursionlimit(), sys.get_int_max_str_digits()
            sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
            sys.set_int_max_str_digits(0)
            try:
                for piece in pieces:
                    if isinstance(piece, int):
                        invocation.exit_status.code = piece
                    elif piece:
                        yield piece
            finally:
                sys.setrecursionlimit(limit)
                sys.set_int_max_str_digits(digits)

        return CommandResult(stdout=output(), exit_code=0)
