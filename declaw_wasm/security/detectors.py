"""The built-in PII detectors: ssn, credit_card, email, phone, ip_address, api_key.

Always ours (no external engine decides these six). Each is a regular expression for candidates
plus a check in Python (SSN area/group/serial rules, Luhn and card prefixes, `ipaddress`,
entropy), written so that a hostile body cannot make them backtrack: every pattern starts behind
a look-behind that fails fast at all but the first character of a run, and every repeat is
bounded. Some values are PII only by their label (a bare 9-digit SSN, a card's CVV, a random
string under `"api_key"`): detectors see the JSON key / form field name of a value as context.

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
from dataclasses import dataclass

from .invisible import visible_view

#: A plug-in detector for one type: text -> (start, end) spans.
EntityDetector = Callable[[str], Iterable[tuple[int, int]]]

# Overlaps go to the longer match; on a tie, to the type listed first.
_PRIORITY = {"api_key": 0, "credit_card": 1, "ssn": 2, "email": 3, "ip_address": 4, "phone": 5,
             "person_name": 6, "address": 7}

#: Joins scanned units; no pattern matches it and every look-around treats it as a boundary.
SEP = "\x00"


@dataclass(frozen=True, slots=True)
class Detection:
    start: int
    end: int
    type: str
    rehydrate: bool = True


# --- patterns -----------------------------------------------------------------------------------

_EMAIL = re.compile(
    r"(?<![\w.%+\-])[\w.%+\-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,8}"
    r"[A-Za-z]{2,24}(?![\w\-])")

_SSN = re.compile(r"(?<![\w\-.])(\d{3})([\-. ])(\d{2})\2(\d{4})(?![\w]|[\-.]\d)")
_SSN_LABELLED = re.compile(r"(?i)\b(?:ssn|social[ _\-]security(?:[ _\-](?:number|no\.?|#))?)"
                           r"\W{0,4}(\d{9})(?!\d)")

_CARD = re.compile(r"(?<![\d\-.])\d(?:[ \-]?\d){12,18}(?!\d|[.,]\d)")
_CVV_LABELLED = re.compile(r"(?i)\b(?:cvv2?|cvc2?|csc|card\s+security\s+code|security\s+code)"
                           r"\W{0,4}(\d{3,4})(?!\d)")

_PHONE_INTL = re.compile(r"(?<![\w+])\+\d{1,15}(?:(?:[ .\-]|[ ]?\()\d{1,6}\)?){0,6}(?![\w]|[.\-]\d)")
_PHONE_NANP = re.compile(r"(?<![\w+])(?:1[ .\-]?)?(?:\(\d{3}\)[ ]?|\d{3}[ .\-])\d{3}[ .\-]\d{4}"
                         r"(?![\w]|[.\-]\d)")
_PHONE_TRUNK = re.compile(r"(?<![\w+.\-])0[1-9]\d{1,3}[ .\-]?\d{3,4}[ .\-]?\d{3,4}(?![\w]|[.\-]\d)")
_PHONE_IN = re.compile(r"(?<![\w+.\-])[6-9]\d{4}[ \-]\d{5}(?![\w]|[.\-]\d)")
# pattern, fewest and most digits (E.164 allows 15; national numbers with a trunk 0: 10-11)
_PHONES = [(_PHONE_INTL, 8, 15), (_PHONE_NANP, 10, 11), (_PHONE_TRUNK, 10, 11), (_PHONE_IN, 10, 10)]

_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = re.compile(rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.[0-9])")
_IPV6 = re.compile(r"(?<![\w:])(?=[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:)[0-9A-Fa-f:]{2,39}"
                   r"(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3})?(?![\w:]|\.[0-9])")

_API_KEY = re.compile(
    r"(?<![\w\-])(?:"
    r"sk-[A-Za-z0-9_\-]{20,}"  # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-)
    r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe secret / restricted
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}|gsk_[A-Za-z0-9]{20,}|xai-[A-Za-z0-9]{20,}"
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # JWT
    r")(?![\w\-])"
    r"|-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----[\s\S]{1,16384}?-----END (?:[A-Z0-9]+ ){0,3}"
    r"PRIVATE KEY-----")
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


def _card_span(m: re.Match[str]) -> tuple[int, int] | None:
    """The card inside a candidate run: whole, or the longest prefix of its digit groups."""
    text = m.group()
    groups = re.split(r"[ \-]", text)
    for n in range(len(groups), 0, -1):
        digits = "".join(groups[:n])
        if len(digits) < 13:
            break
        if len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
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


def _digits(s: str) -> str:
    return "".join(c for c in s if c.isdigit())


# --- the detector -------------------------------------------------------------------------------

class PIIDetector:
    """Finds PII of the given types in text (see the module docstring)."""

    def __init__(self, types: Iterable[str], plugins: dict[str, EntityDetector] | None = None,
                 never: Iterable[str] = ()) -> None:
        self.types = frozenset(types)
        self.plugins = {t: f for t, f in (plugins or {}).items() if t in self.types}
        self.never = tuple(sorted({s for s in never if s}, key=len, reverse=True))

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
        view, index = visible_view(joined)
        found = self._scan(view)
        if index is not None:
            found = [Detection(index[d.start], index[d.end - 1] + 1, d.type, d.rehydrate)
                     for d in found]
        for d in found:
            i = bisect_right(starts, d.start) - 1
            base = starts[i]
            if d.end - base <= len(units[i]):
                out[i].append(Detection(d.start - base, d.end - base, d.type, d.rehydrate))
        for i, (unit, ctx) in enumerate(zip(units, contexts)):
            if ctx is not None and not out[i]:
                d1 = self._by_context(unit, ctx)
                if d1 is not None:
                    out[i].append(d1)
            if self.plugins and unit.strip():
                for t, fn in self.plugins.items():
                    out[i].extend(Detection(s, e, t) for s, e in fn(unit) if 0 <= s < e <= len(unit))
        return [self._finish(unit, dets) for unit, dets in zip(units, out)]

    def _scan(self, text: str) -> list[Detection]:
        types = self.types
        found: list[Detection] = []
        add = found.append
        has_digit = any(c in text for c in "0123456789")
        if "email" in types and "@" in text:
            for m in _EMAIL.finditer(text):
                add(Detection(m.start(), m.end(), "email"))
        if "api_key" in types:
            for m in _API_KEY.finditer(text):
                add(Detection(m.start(), m.end(), "api_key"))
            lower = text.lower()
            if any(w in lower for w in _KEY_WORDS):
                for m in _API_KEY_LABELLED.finditer(text):
                    if looks_random(m.group(1)):
                        add(Detection(m.start(1), m.end(1), "api_key"))
        if not has_digit:
            return found
        if "ssn" in types:
            for m in _SSN.finditer(text):
                if ssn_valid(m.group(1), m.group(3), m.group(4)):
                    add(Detection(m.start(), m.end(), "ssn"))
            for m in _SSN_LABELLED.finditer(text):
                v = m.group(1)
                if ssn_valid(v[:3], v[3:5], v[5:]):
                    add(Detection(m.start(1), m.end(1), "ssn"))
        if "credit_card" in types:
            for m in _CARD.finditer(text):
                span = _card_span(m)
                if span is not None:
                    add(Detection(span[0], span[1], "credit_card"))
            for m in _CVV_LABELLED.finditer(text):
                add(Detection(m.start(1), m.end(1), "credit_card", rehydrate=False))
        if "ip_address" in types:
            if "." in text:
                for m in _IPV4.finditer(text):
                    if _ip_ok(m.group()):
                        add(Detection(m.start(), m.end(), "ip_address"))
            if "::" in text or text.count(":") >= 7:
                for m in _IPV6.finditer(text):
                    if _ip_ok(m.group()):
                        add(Detection(m.start(), m.end(), "ip_address"))
        if "phone" in types:
            for rx, low, high in _PHONES:
                for m in rx.finditer(text):
                    if low <= len(_digits(m.group())) <= high:
                        add(Detection(m.start(), m.end(), "phone"))
        return found

    def _by_context(self, unit: str, ctx: str) -> Detection | None:
        """A value that is PII because of its field name (`"cvv": "123"`, `"ssn": 123456789`)."""
        value = unit.strip()
        if not value or len(value) > 4096:
            return None
        start = unit.index(value)
        end = start + len(value)
        types = self.types
        if "credit_card" in types and value.isdigit() and len(value) in (3, 4) and _KEY_CVV.match(ctx):
            return Detection(start, end, "credit_card", rehydrate=False)
        if "ssn" in types and _KEY_SSN.match(ctx):
            d = _digits(value)
            if len(d) == 9 and re.fullmatch(r"[\d\-. ]+", value) and ssn_valid(d[:3], d[3:5], d[5:]):
                return Detection(start, end, "ssn")
        if "phone" in types and _KEY_PHONE.match(ctx) and re.fullmatch(r"\+?[\d\-. ()]+", value):
            if 7 <= len(_digits(value)) <= 15:
                return Detection(start, end, "phone")
        if ("api_key" in types and _KEY_SECRET.match(ctx) and " " not in value
                and looks_random(value)):
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
