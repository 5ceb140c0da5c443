"""The built-in PII detectors: ssn, credit_card, email, phone, ip_address, api_key.

Always ours (no external engine decides these six). Each is a regular expression for candidates
plus a check in Python (SSN area/group/serial rules, Luhn and card prefixes, `ipaddress`,
entropy), written so that a hostile body cannot make them backtrack: every pattern starts behind
a look-behind that fails fast at all but the first character of a run, and every repeat is
bounded. Some values are PII only by their label (a bare 9-digit SSN, a card's CVV, a random
string under `"api_key"`): detectors see the JSON key / form field name of a value as context.

A number is read as the number it stands for, whatever its spelling: a `+` or `-` standing alone
in front of it (at the start of a value, or after a space or punctuation — not after a letter,
digit, dot or another dash, where it joins a longer token) is its sign and hides nothing; a
number written with a zero fraction or an exponent (`4111111111111111.0`, `4.111111111111111e15`)
is the integer it denotes (every JSON reader reads it so, and prints it back as those digits). A
match on a number is the whole number, sign and exponent included, so a JSON number is always
replaced whole (`bodies.py` turns it into its token string).

`person_name` and `address` need a named-entity model, which declaw-wasm does not ship: they are
found only through an `EntityDetector` plug-in (see `plugins.py`).
"""

from __future__ import annotations

import ipaddress
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import NamedTuple

from .._re2 import compile_user_pattern
from .invisible_text import visible_view
from .plugins import EntityDetector

# Overlaps go to the longer match; on a tie, to the type listed first.
_PRIORITY = {"api_key": 0, "credit_card": 1, "ssn": 2, "email": 3, "ip_address": 4, "phone": 5,
             "person_name": 6, "address": 7}

#: Joins scanned units; no pattern matches it and every look-around treats it as a boundary.
SEP = "\x00"


class Detection(NamedTuple):
    start: int
    end: int
    type: str
    rehydrate: bool = True


# --- patterns -----------------------------------------------------------------------------------
# Python's `re` is fast when a pattern starts with a literal or an ASCII class (it skips to the
# candidates) and slow when it starts with a look-behind (tried at every position). So each family
# is anchored on something rare first — a run of digits and separators, an `@`, a key prefix, a
# label word — found with one fast pass, and the exact patterns run only around those anchors.

_CLUSTER = re.compile(r"[0-9][0-9 ().+\-]{5,}[0-9]")  # where numeric PII can be
_COLONS = re.compile(r":[0-9A-Fa-f:.]*:")  # where an IPv6 address can be
_EMAIL_DOMAIN = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,8}"
                           r"[A-Za-z]{2,24}(?![\w\-])")
_EMAIL_LOCAL = re.compile(r"[\w.%+\-]{1,65}")

# A `-` (or `+`) right before digits joins them to a longer token (`x-123`, `1-123`, `--123`)
# unless it stands alone: then it is the number's sign (`-123`, `: -123`, `[1,-123]`).
_LONE_DASH = r"(?<![\w.+\-]-)"
_LONE_SIGN = r"(?<![\w.+\-][+\-])"
_SSN = re.compile(r"(?<![\w.])" + _LONE_DASH
                  + r"([0-9]{3})([\-. ])([0-9]{2})\2([0-9]{4})(?![\w]|[\-.][0-9])")
_SSN_LABEL = re.compile(r"(?i)(?:\bssn|\bsocial[ _\-]security(?:[ _\-](?:number|no\.?|#))?)"
                        r"\W{0,4}\Z")
# A card's digits are 13-19, a card prefix and a Luhn sum: after a letter, a dash separates
# (`order-4111…`, as `order4111…` and `order_4111…` are matched); after a digit, a dot or a sign
# it joins a longer number (`1-4111…`, `--4111…`).
_CARD = re.compile(r"(?<![0-9.])(?<![0-9.+\-]-)"
                   r"[0-9](?:[ \-]?[0-9]){12,18}(?![0-9]|\.[0-9])")
_CVV_WORDS = ("cvv", "cvc", "csc", "security code")
_CVV_VALUE = re.compile(r"2?(?![A-Za-z0-9_])\W{0,4}([0-9]{3,4})(?![0-9])")

_PHONE_INTL = re.compile(r"(?<![\w+])\+[0-9]{1,15}(?:(?:[ .\-]|[ ]?\()[0-9]{1,6}\)?){0,6}"
                         r"(?![\w]|[.\-][0-9])")
_PHONE_NANP = re.compile(r"(?<![\w+])(?:1[ .\-]?)?(?:\([0-9]{3}\)[ ]?|[0-9]{3}[ .\-])[0-9]{3}"
                         r"[ .\-][0-9]{4}(?![\w]|[.\-][0-9])")
_PHONE_TRUNK = re.compile(r"(?<![\w.])" + _LONE_SIGN
                          + r"0[1-9][0-9]{1,3}[ .\-]?[0-9]{3,4}[ .\-]?[0-9]{3,4}(?![\w]|[.\-][0-9])")
_PHONE_IN = re.compile(r"(?<![\w.])" + _LONE_SIGN
                       + r"[6-9][0-9]{4}[ \-][0-9]{5}(?![\w]|[.\-][0-9])")
# pattern, fewest and most digits (E.164 allows 15; national numbers with a trunk 0: 10-11)
_PHONES = [(_PHONE_INTL, 8, 15), (_PHONE_NANP, 10, 11), (_PHONE_TRUNK, 10, 11), (_PHONE_IN, 10, 10)]

# Numbers as values (see the module docstring): a lone sign in front, an unsigned number, an
# exponent behind, where a spelling with a zero fraction is, a whole spelled number, its parts.
_SIGN = re.compile(r"(?<![\w.+\-])[+\-]")
_UNSIGNED = re.compile(r"[0-9]{1,40}(?:\.[0-9]{1,40})?(?:[eE][+\-]?[0-9]{1,3})?")
_EXPONENT_TAIL = re.compile(r"[eE][+\-]?[0-9]{1,3}(?![\w]|\.[0-9])")
_MANTISSA = "0123456789."
_ZERO_FRACTION = re.compile(r"\.0{1,40}(?![0-9])")
_SPELLED = re.compile(r"(?<![\w.])" + _LONE_SIGN + r"[0-9]{1,40}(?:\.[0-9]{1,40})?"
                      r"(?:[eE][+\-]?[0-9]{1,3})?(?![\w]|\.[0-9])")
_NUMBER_PARTS = re.compile(r"[+\-]?([0-9]{1,40})(\.[0-9]{1,40})?([eE][+\-]?[0-9]{1,3})?")
_NUMERIC_TYPES = frozenset({"credit_card", "ssn", "phone"})
_FLOAT_EXACT = 2 ** 53  # integers below it are exact in a float (IEEE 754 double)

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.[0-9])")
_IPV6 = re.compile(r"(?<![\w:])(?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)[0-9A-Fa-f:]{2,39}"
                   r"(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3})?(?![\w:]|\.[0-9])")

# Known key formats, by the literal prefix they start with.
_KEY_PREFIXES: dict[str, re.Pattern[str]] = {p: re.compile(rx) for p, rx in {
    "sk-": r"sk-[A-Za-z0-9_\-]{20,}",  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-)
    "sk_": r"sk_(?:live|test)_[A-Za-z0-9]{16,}", "rk_": r"rk_(?:live|test)_[A-Za-z0-9]{16,}",
    "ghp_": r"ghp_[A-Za-z0-9]{36,}", "gho_": r"gho_[A-Za-z0-9]{36,}",
    "ghu_": r"ghu_[A-Za-z0-9]{36,}", "ghs_": r"ghs_[A-Za-z0-9]{36,}",
    "ghr_": r"ghr_[A-Za-z0-9]{36,}", "github_pat_": r"github_pat_[A-Za-z0-9_]{22,}",
    "glpat-": r"glpat-[A-Za-z0-9_\-]{20,}",
    "AKIA": r"AKIA[A-Z0-9]{16}", "ASIA": r"ASIA[A-Z0-9]{16}", "ABIA": r"ABIA[A-Z0-9]{16}",
    "ACCA": r"ACCA[A-Z0-9]{16}", "AIza": r"AIza[0-9A-Za-z_\-]{35}",
    "xox": r"xox[abposr]-[A-Za-z0-9\-]{10,}", "hf_": r"hf_[A-Za-z0-9]{30,}",
    "npm_": r"npm_[A-Za-z0-9]{36}", "gsk_": r"gsk_[A-Za-z0-9]{20,}", "xai-": r"xai-[A-Za-z0-9]{20,}",
    "SG.": r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}",
    "eyJ": r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
}.items()}
_KEY_END = re.compile(r"[\w\-]")
# One linear-time RE2 pass says whether any key prefix or label word occurs at all; the
# per-prefix searches below run only when one does.
_WORDS_GATE = compile_user_pattern(
    r"(?i)sk[-_]|rk_|gh[pousr]_|github_pat_|glpat-|akia|asia|abia|acca|aiza|xox|hf_|npm_|gsk_"
    r"|xai-|sg\.|eyj|-----begin|key|secret|token|auth|bearer|passw|pwd|credential|cvv|cvc|csc"
    r"|security code")
_PEM = re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----[\s\S]{1,16384}?"
                  r"-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----")
_KEY_WORDS = ("key", "secret", "token", "auth", "bearer", "passw", "pwd", "credential")
_API_KEY_LABELLED = re.compile(
    r"(?i)(?<![a-z0-9])(?:api[_\-]?key|apikey|secret(?:[_\-]?key)?|access[_\-]?(?:key|token)"
    r"|auth(?:orization)?|bearer|token|password|passwd|pwd|client[_\-]?secret|private[_\-]?key"
    r"|credentials?)(?:[\"']?[ \t]{0,4}(?:[:=]|=>)[ \t]{0,4}[\"']?|[ \t]{1,4})(?:bearer[ \t]+)?"
    r"([A-Za-z0-9_\-+/=.~]{16,512})(?![A-Za-z0-9_\-+/=.~])")

# Field names that make a bare value PII.
_KEY_SSN = re.compile(r"(?i)^(?:.*[_\-. ])?(?:ssn|social[_\-. ]?security(?:[_\-. ]?(?:number|no))?)$")
_KEY_CVV = re.compile(r"(?i)^(?:.*[_\-. ])?(?:cvv2?|cvc2?|csc|cid|security[_\-. ]?code"
                      r"|card[_\-. ]?verification(?:[_\-. ]?(?:code|value))?)$")
_KEY_PHONE = re.compile(r"(?i)^(?:.*[_\-. ])?(?:phone|mobile|cell|tel|telephone|fax|whatsapp|msisdn)"
                        r"(?:[_\-. ]?(?:number|no))?$")
_KEY_SECRET = re.compile(r"(?i)^(?:.*[_\-. ])?(?:api[_\-. ]?key|apikey|secret|secret[_\-. ]?key|token"
                         r"|access[_\-. ]?token|refresh[_\-. ]?token|password|passwd|pwd"
                         r"|access[_\-. ]?key|client[_\-. ]?secret|private[_\-. ]?key|auth"
                         r"|authorization|credentials?)$")


# A JSON object key and the value after it (escape-free documents only).
_JSON_KEY = re.compile(r'"([^"\\]{1,128})"[ \t\r\n]*:[ \t\r\n]*')
# Is there a key that might label a value (a cheap RE2 pass before listing the keys)?
_LABEL_KEY_GATE = compile_user_pattern(
    r'(?i)"[^"]{0,64}(?:cvv|cvc|csc|cid|security|verification|ssn|social|phone|mobile|cell|tel'
    r'|fax|whatsapp|msisdn|key|secret|token|passw|pwd|auth|credential)[^"]{0,64}"[ \t\r\n]*:')
_JSON_KEY_NAMES = re.compile(r'"([^"\\]{1,128})"[ \t\r\n]*:')
_JSON_VALUE = re.compile(r'"([^"\\]{0,4096})"|(-?[0-9][0-9.eE+\-]{0,40})')


# --- checks -------------------------------------------------------------------------------------

def ssn_valid(area: str, group: str, serial: str) -> bool:
    """The SSA's structural rules: no 000/666/9xx area, no 00 group, no 0000 serial.

    Well-known sample numbers (123-45-6789, 078-05-1120) pass these rules and are redacted: a
    false positive is better than a leak.
    """
    a = int(area)
    return a != 0 and a != 666 and a < 900 and int(group) != 0 and int(serial) != 0


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def integer_digits(number: str) -> str | None:
    """The digits of the integer a number stands for, without its sign; None for no integer.

    `-4111111111111111`, `4111111111111111.0` and `4.111111111111111e15` all give
    `4111111111111111`. A plain integer's digits are kept as written (leading zeros too). A
    spelling with a fraction or an exponent is a float's: it stands for an integer when its value
    is one that a float (what JSON readers hold it in) holds exactly, below 2**53 — every card
    number of 13-16 digits is; above, a float's digits are rounding, not anyone's number
    (`6.623982102020842e16` is no card). `4111111111111111.5` is no integer. Exact (`decimal`),
    and bounded: at most 40 digits a part, a 3-digit exponent.
    """
    m = _NUMBER_PARTS.fullmatch(number)
    if m is None:
        return None
    if m.group(2) is None and m.group(3) is None:
        return m.group(1)
    value = abs(Decimal(number))
    if not 1 <= value < _FLOAT_EXACT or value != value.to_integral_value():
        return None
    return str(int(value))


def _card_digits(digits: str) -> bool:
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits)


def _card_span(m: re.Match[str]) -> tuple[int, int] | None:
    """The card inside a candidate run: whole, or the longest prefix of its digit groups."""
    text = m.group()
    groups = re.split(r"[ \-]", text)
    for n in range(len(groups), 0, -1):
        digits = "".join(groups[:n])
        if len(digits) < 13:
            break
        if _card_digits(digits):
            length = len(" ".join(groups[:n]))
            return m.start(), m.start() + length
    return None


def _entropy(s: str) -> float:
    counts = Counter(s)
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(s: str) -> bool:
    """A secret-like string: long, mixed letters and digits, high per-character entropy."""
    if len(s) < 16 or len(s) > 4096:
        return False
    has_digit = any(c.isdigit() for c in s)
    has_alpha = any(c.isalpha() for c in s)
    return has_digit and has_alpha and _entropy(s) >= 3.0


def _ip_ok(value: str) -> bool:
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return False
    if addr.is_unspecified or addr.is_loopback or str(addr) == "255.255.255.255":
        return False  # 0.0.0.0, 127.0.0.1, ::1 identify nobody (and fill code samples)
    if addr.version == 6 and addr.ipv4_mapped is None:
        return sum(1 for g in value.split(":") if g) >= 3
    return True


_NOT_DIGIT = re.compile(r"[^0-9]")
_LABELLED_SSN = re.compile(r"[0-9\-. ]+")
_LABELLED_PHONE = re.compile(r"\+?[0-9\-. ()]+")


def _digits(s: str) -> str:
    return _NOT_DIGIT.sub("", s)


def _whole_number(text: str, d: Detection) -> Detection:
    """A numeric match that is a number (digits, a fraction, an exponent) with its lone sign in
    front or an exponent behind: the match is the whole number."""
    if d.type not in _NUMERIC_TYPES:
        return d
    start, end = d.start, d.end
    if _UNSIGNED.fullmatch(text, start, end) is None:
        return d  # `4111 1111 1111 1111`, `123-45-6789`: no number, nothing to widen
    if start and _SIGN.match(text, start - 1) is not None:
        start -= 1
    if text[end:end + 1] in ("e", "E") and "e" not in text[start:end].lower():
        tail = _EXPONENT_TAIL.match(text, end)
        if tail is not None:
            end = tail.end()
    if (start, end) == (d.start, d.end):
        return d
    return Detection(start, end, d.type, d.rehydrate)


# --- the detector -------------------------------------------------------------------------------

class PIIDetector:
    """Finds PII of the given types in text (see the module docstring)."""

    def __init__(self, types: Iterable[str], plugins: dict[str, EntityDetector] | None = None,
                 never: Iterable[str] = ()) -> None:
        self.types = frozenset(types)
        self.plugins = {t: f for t, f in (plugins or {}).items() if t in self.types}
        self.never = tuple(sorted({s for s in never if s}, key=len, reverse=True))
        self._ctx_cache: dict[str, tuple[bool, bool, bool, bool]] = {}

    # One text -----------------------------------------------------------------------------------
    def find(self, text: str, context: str | None = None) -> list[Detection]:
        return self.find_units([text], [context])[0]

    # Many units at once (a JSON document's strings): one scan of the joined text ----------------
    def find_units(self, units: Sequence[str], contexts: Sequence[str | None]) -> list[list[Detection]]:
        out: list[list[Detection]] = [[] for _ in units]
        if not units:
            return out
        joined = SEP.join(units)
        starts: list[int] = []
        pos = 0
        for u in units:
            starts.append(pos)
            pos += len(u) + 1
        for d in self._scan_visible(joined):
            i = bisect_right(starts, d.start) - 1
            base = starts[i]
            if d.end - base <= len(units[i]):
                out[i].append(Detection(d.start - base, d.end - base, d.type, d.rehydrate))
        for i, (unit, ctx) in enumerate(zip(units, contexts, strict=False)):
            if ctx is not None and not out[i]:
                d1 = self._by_context(unit, ctx)
                if d1 is not None:
                    out[i].append(d1)
            if self.plugins and unit.strip():
                for t, fn in self.plugins.items():
                    out[i].extend(Detection(s, e, t) for s, e in fn(unit) if 0 <= s < e <= len(unit))
        return [self._finish(unit, dets) for unit, dets in zip(units, out, strict=False)]

    def find_json_text(self, text: str) -> list[Detection]:
        """Detections in the raw text of a JSON document that has no backslash at all.

        Then every string's content is its raw text, so one scan of the document finds what
        scanning each string would (no pattern matches a quote); values labelled by their key
        (`"cvv": "123"`) are found after their key. Plug-in detectors need units: not here.
        """
        found = self._scan_visible(text)
        keys: set[str] = set()
        if _LABEL_KEY_GATE.search(text) is not None:
            keys = {k for k in set(_JSON_KEY_NAMES.findall(text)) if any(self._context_kinds(k))}
        for m in _JSON_KEY.finditer(text) if keys else ():
            if m.group(1) not in keys:
                continue
            v = _JSON_VALUE.match(text, m.end())
            if v is None:
                continue
            g = 1 if v.group(1) is not None else 2
            vs, ve = v.span(g)
            if any(d.start < ve and vs < d.end for d in found):
                continue
            d1 = self._by_context(text[vs:ve], m.group(1))
            if d1 is not None:
                found.append(Detection(vs + d1.start, vs + d1.end, d1.type, d1.rehydrate))
        return self._finish(text, found)

    def _scan_visible(self, text: str) -> list[Detection]:
        """`_scan` of the text without hidden characters, mapped back onto `text`."""
        view, index = visible_view(text)
        found = self._scan(view)
        if index is None:
            return found
        return [Detection(index[d.start], index[d.end - 1] + 1, d.type, d.rehydrate)
                for d in found]

    def _scan(self, text: str) -> list[Detection]:
        types = self.types
        found: list[Detection] = []
        add = found.append
        if "email" in types and "@" in text:
            self._emails(text, add)
        words = ("api_key" in types or "credit_card" in types) and \
            _WORDS_GATE.search(text) is not None
        if "api_key" in types and words:
            self._keys(text, add)
        if "ip_address" in types and ("::" in text or text.count(":") >= 7):
            for m in _COLONS.finditer(text):
                lo, hi = max(0, m.start() - 5), min(len(text), m.end() + 20)
                for m6 in _IPV6.finditer(text, lo, hi):
                    if _ip_ok(m6.group()):
                        add(Detection(m6.start(), m6.end(), "ip_address"))
        if "credit_card" in types and words:
            self._cvvs(text, add)
        numeric = types & {"ssn", "credit_card", "phone", "ip_address"}
        exponents: list[tuple[int, int]] = []  # (mantissa start, end) where an exponent follows
        if numeric:
            for m in _CLUSTER.finditer(text):
                self._numeric(text, m.start(), m.end(), add)
                if text[m.end():m.end() + 1] in ("e", "E"):
                    run = m.group()
                    exponents.append((m.end() - len(run) + len(run.rstrip(_MANTISSA)), m.end()))
        if "credit_card" in types or "ssn" in types:
            self._spelled(text, exponents, add)
        # Overlapping windows may find a value twice.
        return [_whole_number(text, d) for d in dict.fromkeys(found)]

    def _spelled(self, text: str, exponents: list[tuple[int, int]],
                 add: Callable[[Detection], None]) -> None:
        """Numbers written with a zero fraction or an exponent, judged by the integer they stand
        for: a card number (`4111111111111111.0`, `4.111111111111111e15`), a labelled SSN.

        The anchors: each zero fraction (a fast literal search), and each digit run of 7+
        characters an exponent follows (`exponents`, from the numeric pass: a mantissa of 6
        significant digits or fewer, `4.1111e15`, is not looked at: no card number has 7-10
        trailing zeros, and a separate pass over every digit would cost a third of the scan).
        """
        anchors = list(exponents)
        for f in _ZERO_FRACTION.finditer(text):
            head = text[max(0, f.start() - 40):f.start()]  # the digits before the point
            anchors.append((f.start() - len(head) + len(head.rstrip(_MANTISSA[:-1])), f.start()))
        done = -1
        for start, i in sorted(anchors):
            if i < done:
                continue  # inside a number already judged
            if text[i:i + 1] in ("e", "E"):  # too small to be a long integer: skip the parse
                tail = _EXPONENT_TAIL.match(text, i)
                whole = text[start:i].partition(".")[0]
                if tail is None or len(whole) - 1 + int(tail.group()[1:]) < 8:
                    continue
            m = _SPELLED.match(text, start)
            if m is None or m.end() <= i:
                continue
            done = m.end()
            digits = integer_digits(m.group())
            if digits is None:
                continue
            if "credit_card" in self.types and _card_digits(digits):
                add(Detection(m.start(), m.end(), "credit_card"))
            elif ("ssn" in self.types and len(digits) == 9
                  and ssn_valid(digits[:3], digits[3:5], digits[5:])
                  and _SSN_LABEL.search(text, max(0, start - 30), start)):
                add(Detection(m.start(), m.end(), "ssn"))

    def _emails(self, text: str, add: Callable[[Detection], None]) -> None:
        at = text.find("@")
        while at >= 0:
            dom = _EMAIL_DOMAIN.match(text, at + 1)
            if dom is not None:
                lo = max(0, at - 65)
                local = _EMAIL_LOCAL.match(text[lo:at][::-1])
                if local is not None and local.end() <= 64:
                    add(Detection(at - local.end(), dom.end(), "email"))
            at = text.find("@", at + 1)

    def _keys(self, text: str, add: Callable[[Detection], None]) -> None:
        for prefix, rx in _KEY_PREFIXES.items():
            i = text.find(prefix)
            while i >= 0:
                if i == 0 or not _KEY_END.match(text, i - 1):
                    m = rx.match(text, i)
                    if m is not None and not _KEY_END.match(text, m.end()):
                        add(Detection(i, m.end(), "api_key"))
                i = text.find(prefix, i + 1)
        if "-----BEGIN" in text:
            for m in _PEM.finditer(text):
                add(Detection(m.start(), m.end(), "api_key"))
        lower = text.lower()
        for word in _KEY_WORDS:
            i = lower.find(word)
            while i >= 0:
                lo, hi = max(0, i - 16), min(len(text), i + 600)
                for m in _API_KEY_LABELLED.finditer(text, lo, hi):
                    if (m.end() < hi or hi == len(text)) and looks_random(m.group(1)):
                        add(Detection(m.start(1), m.end(1), "api_key"))
                i = lower.find(word, i + 1)

    def _cvvs(self, text: str, add: Callable[[Detection], None]) -> None:
        lower = text.lower()
        for word in _CVV_WORDS:
            i = lower.find(word)
            while i >= 0:
                end = i + len(word)
                if i == 0 or not lower[i - 1].isalnum():
                    m = _CVV_VALUE.match(text, end)
                    if m is not None:
                        add(Detection(m.start(1), m.end(1), "credit_card", rehydrate=False))
                i = lower.find(word, end)

    def _numeric(self, text: str, start: int, end: int,  # noqa: C901 (one branch per number shape)
                 add: Callable[[Detection], None]) -> None:
        """The numeric detectors, around one run of digits and separators."""
        types = self.types
        lo, hi = max(0, start - 3), min(len(text), end + 2)
        run = text[start:end]
        # The usual case: the run is one value. One anchored match settles it.
        if len(run) == 11 and "ssn" in types:
            m = _SSN.match(text, start, hi)
            if m is not None and m.end() == end:
                if ssn_valid(m.group(1), m.group(3), m.group(4)):
                    add(Detection(start, end, "ssn"))
                return
        if start and text[start - 1] == "+" and "phone" in types:
            m = _PHONE_INTL.match(text, start - 1, hi)
            if m is not None and m.end() == end and 8 <= len(_digits(run)) <= 15:
                add(Detection(start - 1, end, "phone"))
                return
        ndigits = len(run) - sum(map(run.count, " ().+-"))
        if "ssn" in types and ndigits >= 9:
            for m in _SSN.finditer(text, lo, hi):
                if ssn_valid(m.group(1), m.group(3), m.group(4)):
                    add(Detection(m.start(), m.end(), "ssn"))
            if len(run) == 9 and run.isdigit() and ssn_valid(run[:3], run[3:5], run[5:]) \
                    and _SSN_LABEL.search(text, max(0, start - 30), start):
                add(Detection(start, end, "ssn"))
        if "credit_card" in types and ndigits >= 13:
            for m in _CARD.finditer(text, lo, hi):
                span = _card_span(m)
                if span is not None:
                    add(Detection(span[0], span[1], "credit_card"))
        if "ip_address" in types and "." in run:
            for m in _IPV4.finditer(text, lo, hi):
                if _ip_ok(m.group()):
                    add(Detection(m.start(), m.end(), "ip_address"))
        if "phone" in types and ndigits >= 8:
            window = text[lo:hi]
            for rx, low, high in _PHONES:
                if (rx is _PHONE_INTL and "+" not in window or ndigits < low
                        or rx is _PHONE_TRUNK and run[0] != "0"
                        or rx is _PHONE_IN and run[0] not in "6789"):
                    continue
                for m in rx.finditer(text, lo, hi):
                    if low <= len(_digits(m.group())) <= high:
                        add(Detection(m.start(), m.end(), "phone"))

    def _context_kinds(self, ctx: str) -> tuple[bool, bool, bool, bool]:
        """(cvv, ssn, phone, secret): which labelled-value checks a field name calls for."""
        kinds = self._ctx_cache.get(ctx)
        if kinds is None:
            types = self.types
            kinds = ("credit_card" in types and bool(_KEY_CVV.match(ctx)),
                     "ssn" in types and bool(_KEY_SSN.match(ctx)),
                     "phone" in types and bool(_KEY_PHONE.match(ctx)),
                     "api_key" in types and bool(_KEY_SECRET.match(ctx)))
            if len(self._ctx_cache) < 4096:
                self._ctx_cache[ctx] = kinds
        return kinds

    def _by_context(self, unit: str, ctx: str) -> Detection | None:
        """A value that is PII because of its field name (`"cvv": "123"`, `"ssn": 123456789`)."""
        cvv, ssn, phone, secret = self._context_kinds(ctx)
        if not (cvv or ssn or phone or secret):
            return None
        value = unit.strip()
        if not value or len(value) > 4096:
            return None
        start = unit.index(value)
        end = start + len(value)
        num = integer_digits(value) or value  # a number is judged by the integer it stands for
        if cvv and num.isdigit() and len(num) in (3, 4):
            return Detection(start, end, "credit_card", rehydrate=False)
        if ssn:
            d = _digits(num)
            if len(d) == 9 and _LABELLED_SSN.fullmatch(num) and ssn_valid(d[:3], d[3:5], d[5:]):
                return Detection(start, end, "ssn")
        if phone and _LABELLED_PHONE.fullmatch(num) and 7 <= len(_digits(num)) <= 15:
            return Detection(start, end, "phone")
        if secret and " " not in value and looks_random(value):
            return Detection(start, end, "api_key")
        return None

    def _finish(self, unit: str, dets: list[Detection]) -> list[Detection]:
        if not dets:
            return dets
        if self.never:  # secret placeholders are never tokenised
            guarded = [(m.start(), m.end()) for s in self.never
                       for m in re.finditer(re.escape(s), unit)]
            if guarded:
                dets = [d for d in dets if not any(d.start < e and s < d.end for s, e in guarded)]
        dets.sort(key=lambda d: (d.start, -(d.end - d.start), _PRIORITY.get(d.type, 9)))
        kept: list[Detection] = []
        for d in dets:
            if kept and d.start < kept[-1].end:
                last = kept[-1]
                if (d.end - d.start) > (last.end - last.start):
                    kept[-1] = d
                continue
            kept.append(d)
        return kept
