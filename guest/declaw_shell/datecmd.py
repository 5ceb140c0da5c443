"""`date`, as GNU coreutils' 9.1: `-d STRING`, `-u`, `-r FILE`, `-f FILE`, `-I[FMT]`, `-R`,
`--rfc-3339=FMT` and `+FORMAT` with GNU's directives and flags.

Agents' scripts ask for dates relative to others (`date -d yesterday +%F`, `date -d @1700000000`,
`date -d "2024-01-31 +1 month"`, `date -u +%Y-%m-%dT%H:%M:%SZ`); the library's `date` knew only
`-u` and `+FORMAT` (and printed `Dec 03` where GNU prints `Dec  3`). The date strings are the
common part of GNU's grammar (parse_datetime): `@SECONDS`, ISO 8601 dates and times (`T` or a
space, fractions, `Z` or an offset), `MM/DD[/YYYY]`, month names (`Jan 2 2024`, `2 January`),
`YYYYMMDD`, bare hours (`10`, `1030`), times with `am`/`pm`, zones (`UTC`, `Z`, `+02:00`, the US
abbreviations), day names with `next`/`last`/`this`, `now`, `today`, `yesterday`, `tomorrow`,
`noon`, `midnight`, and relative items (`3 days ago`, `+2 hours`, `next week`, `-1 month`) applied
as GNU applies them (months move the month field: Jan 31 + 1 month is Mar 2 or 3). The time zone
is $TZ (a zoneinfo name or UTC); setting the clock (`-s`, `MMDDhhmm`) is refused, as for a user.
"""

from __future__ import annotations

import calendar
import os
import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

Invocation = Any  # bash_purepython's CommandInvocation (untyped)

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTH_NAMES = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December")
ZONES = {"utc": 0, "ut": 0, "gmt": 0, "z": 0, "wet": 0, "bst": 60, "cet": 60, "cest": 120, "eet": 120,
         "eest": 180, "est": -300, "edt": -240, "cst": -360, "cdt": -300, "mst": -420, "mdt": -360,
         "pst": -480, "pdt": -420, "akst": -540, "akdt": -480, "hst": -600, "jst": 540, "ist": 330}
UNITS = {"year": "years", "month": "months", "fortnight": "fortnights", "week": "weeks", "day": "days",
         "hour": "hours", "minute": "minutes", "min": "minutes", "second": "seconds", "sec": "seconds"}
DEFAULT_FORMAT = "%a %b %e %H:%M:%S %Z %Y"
ISO_FORMATS = {"hours": "%Y-%m-%dT%H%:z", "minutes": "%Y-%m-%dT%H:%M%:z", "date": "%Y-%m-%d",
               "seconds": "%Y-%m-%dT%H:%M:%S%:z", "ns": "%Y-%m-%dT%H:%M:%S,%N%:z"}
RFC3339_FORMATS = {"date": "%Y-%m-%d", "seconds": "%Y-%m-%d %H:%M:%S%:z", "ns": "%Y-%m-%d %H:%M:%S.%N%:z"}


class DateError(Exception):
    pass


def local_zone(environ: dict[str, str], utc: bool) -> tzinfo:
    """$TZ as a zone (a zoneinfo name, `UTC0`, `:Area/City`); UTC when unset or unknown."""
    name = "UTC" if utc else environ.get("TZ", "").lstrip(":")
    if not name or name.upper() in ("UTC", "UTC0", "GMT", "GMT0", "UCT", "Z"):
        return timezone.utc
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # an unknown or malformed $TZ: GNU falls back to UTC as well
        return timezone.utc


# ---------------------------------------------------------------------------------------------
# GNU's format directives

def _pad(text: str, flag: str, width: int | None, default_width: int, default_pad: str) -> str:
    if flag == "-":
        return text.lstrip("0") or "0" if text.isdigit() else text.lstrip()
    pad = {"_": " ", "0": "0"}.get(flag, default_pad)
    size = default_width if width is None else width
    negative = text.startswith("-")
    body = text[1:] if negative else text
    if pad == "0" and negative:
        return "-" + body.rjust(max(size - 1, 0), "0")
    return text.rjust(size, pad)


def _offset(dt: datetime, colons: int) -> str:
    delta = dt.utcoffset() or timedelta(0)
    total = int(delta.total_seconds())
    sign = "-" if total < 0 else "+"
    total = abs(total)
    h, m, s = total // 3600, total // 60 % 60, total % 60
    if colons == 0:
        return "%s%02d%02d" % (sign, h, m)
    if colons == 1:
        return "%s%02d:%02d" % (sign, h, m)
    if colons == 2:
        return "%s%02d:%02d:%02d" % (sign, h, m, s)
    if s:
        return "%s%02d:%02d:%02d" % (sign, h, m, s)
    return "%s%02d:%02d" % (sign, h, m) if m else "%s%02d" % (sign, h)


def _iso_week(dt: datetime) -> tuple[int, int]:
    year, week, _ = dt.isocalendar()
    return year, week


def _directive(dt: datetime, c: str, nanos: int) -> tuple[str, int, str] | str | None:  # noqa: C901 - one a letter
    """A directive's text and GNU's default padding (width, character), or text not padded."""
    if c == "a":
        return DAY_NAMES[dt.weekday()][:3]
    if c == "A":
        return DAY_NAMES[dt.weekday()]
    if c in "bh":
        return MONTH_NAMES[dt.month - 1][:3]
    if c == "B":
        return MONTH_NAMES[dt.month - 1]
    if c == "C":
        return str(dt.year // 100), 2, "0"
    if c == "d":
        return str(dt.day), 2, "0"
    if c == "e":
        return str(dt.day), 2, " "
    if c == "g":
        return str(_iso_week(dt)[0] % 100), 2, "0"
    if c == "G":
        return str(_iso_week(dt)[0]), 4, "0"
    if c == "H":
        return str(dt.hour), 2, "0"
    if c == "I":
        return str((dt.hour % 12) or 12), 2, "0"
    if c == "j":
        return str(dt.timetuple().tm_yday), 3, "0"
    if c == "k":
        return str(dt.hour), 2, " "
    if c == "l":
        return str((dt.hour % 12) or 12), 2, " "
    if c == "m":
        return str(dt.month), 2, "0"
    if c == "M":
        return str(dt.minute), 2, "0"
    if c == "N":
        return "%09d" % nanos, 9, "0"
    if c == "p":
        return "AM" if dt.hour < 12 else "PM"
    if c == "P":
        return "am" if dt.hour < 12 else "pm"
    if c == "q":
        return str((dt.month - 1) // 3 + 1), 1, "0"
    if c == "s":
        return str(calendar.timegm(dt.utctimetuple())), 1, "0"
    if c == "S":
        return str(dt.second), 2, "0"
    if c == "u":
        return str(dt.isoweekday()), 1, "0"
    if c == "U":
        return str((dt.timetuple().tm_yday + 6 - (dt.isoweekday() % 7)) // 7), 2, "0"
    if c == "V":
        return str(_iso_week(dt)[1]), 2, "0"
    if c == "w":
        return str(dt.isoweekday() % 7), 1, "0"
    if c == "W":
        return str((dt.timetuple().tm_yday + 6 - dt.weekday()) // 7), 2, "0"
    if c == "y":
        return str(dt.year % 100), 2, "0"
    if c == "Y":
        return str(dt.year), 1, "0"
    if c == "Z":
        return dt.tzname() or ""
    if c == "n":
        return "\n"
    if c == "t":
        return "\t"
    if c == "%":
        return "%"
    return None


_COMPOSITE = {"c": "%a %b %e %H:%M:%S %Y", "D": "%m/%d/%y", "x": "%m/%d/%y", "F": "%+4Y-%m-%d",
              "r": "%I:%M:%S %p", "R": "%H:%M", "T": "%H:%M:%S", "X": "%H:%M:%S"}
_SPEC = re.compile(r"%([-_0^#+]*)(\d*)(:{0,3})([a-zA-Z%])")


def render(fmt: str, dt: datetime, nanos: int = 0) -> str:
    """GNU strftime: flags `-` `_` `0` `^` `#`, a width, `%N`'s digits, `%:z` `%::z` `%:::z`."""
    def one(m: re.Match[str]) -> str:
        flags, width_text, colons, c = m.groups()
        width = int(width_text) if width_text else None
        if c == "z":
            return _offset(dt, len(colons))
        if colons:
            return m.group()
        if c in _COMPOSITE:
            text = render(_COMPOSITE[c].replace("%+4Y", "%Y"), dt, nanos)
            return text.rjust(width) if width else text
        if c == "N":
            digits = "%09d" % nanos
            return digits[:width] if width else digits
        found = _directive(dt, c, nanos)
        if found is None:
            return m.group()
        flag = next((f for f in reversed(flags) if f in "-_0"), "")
        if isinstance(found, tuple):
            text, default_width, default_pad = found
            text = _pad(text, flag, width, default_width, default_pad)
        else:
            text = found.rjust(width, "0" if flag == "0" else " ") if width else found
        if "^" in flags:
            text = text.upper()
        elif "#" in flags:
            text = text.lower() if c in "pZ" else text.upper()
        return text
    return _SPEC.sub(one, fmt)


# ---------------------------------------------------------------------------------------------
# GNU's date strings (the common part of parse_datetime)

_MONTH = r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DAY = r"(sun(?:day)?|mon(?:day)?|tue(?:s(?:day)?)?|wed(?:nesday)?|thu(?:rs(?:day)?)?|thur|fri(?:day)?|" \
       r"sat(?:urday)?)\.?,?"
_TIME = r"(\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?(?:\s*([ap])\.?m\.?\b)?"
_ZONE_NUM = r"([+-])(\d{2}):?(\d{2})?"
ORDINALS = {"last": -1, "this": 0, "next": 1, "first": 1, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
            "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12}
_ORDINAL = r"(last|this|next|first|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth)"
_ITEMS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(pattern, re.I)) for name, pattern in [
    ("iso", r"(\d{4})-(\d{1,2})-(\d{1,2})(?:t|\s+)?(?=\s|$|t|\d)"),
    ("time_zone", _TIME + r"\s*([+-])(\d{1,2}(?::?\d{2})?)(?=\s|$|[a-z])"),
    ("time", _TIME),
    ("hour_ampm", r"(\d{1,2})\s*([ap])\.?m\.?\b"),
    ("us", r"(\d{1,2})/(\d{1,2})(?:/(\d{2,4}))?"),
    ("dmy", r"(\d{1,2})[\s-]+" + _MONTH + r"(?:[\s-]+(\d{4}))?"),
    ("mdy", _MONTH + r"\s+(\d{1,2})(?:st|nd|rd|th)?,?(?:\s+(\d{4}))?"),
    ("month", _MONTH + r"(?=\s|$|,)"),
    ("relative", r"([+-]?\s*\d+)\s*(year|month|fortnight|week|day|hour|minute|min|second|sec)s?\b(\s+ago\b)?"),
    ("ordinal_unit", _ORDINAL + r"\s+(year|month|fortnight|week|day|hour|minute|min|second|sec)s?\b"
                     r"(\s+ago\b)?"),
    ("unit", r"(year|month|fortnight|week|day|hour|minute|min|second|sec)s?\b(\s+ago\b)?"),
    ("weekday", r"(?:" + _ORDINAL + r"\s+)?" + _DAY),
    ("word", r"(now|today|yesterday|tomorrow)\b"),
    ("zone_num", _ZONE_NUM + r"(?=\s|$)"),
    ("zone", r"(utc|ut|gmt|z|wet|bst|cest|cet|eest|eet|est|edt|cst|cdt|mst|mdt|pst|pdt|akst|akdt|hst|jst|ist)\b"),
    ("number", r"(\d+)"),
]]


class _Parsed:
    def __init__(self) -> None:
        self.date: tuple[int, int, int] | None = None
        self.time: tuple[int, int, int, int] | None = None  # h, m, s, nanoseconds
        self.zone: int | None = None  # minutes east of UTC
        self.weekday: tuple[int, int] | None = None  # (Monday=0.., ordinal)
        self.rel = {"years": 0, "months": 0, "days": 0, "hours": 0, "minutes": 0, "seconds": 0}

    def add(self, unit: str, n: int) -> None:
        unit = UNITS.get(unit.lower(), unit.lower())
        if unit == "fortnights":
            unit, n = "days", n * 14
        elif unit == "weeks":
            unit, n = "days", n * 7
        self.rel[unit] += n


def _year(text: str | None, now: datetime) -> int:
    if text is None:
        return now.year
    y = int(text)
    if len(text) <= 2:
        y += 2000 if y < 69 else 1900
    return y


def _hour(h: int, ampm: str | None) -> int:
    if ampm:
        if h > 12 or h == 0:
            raise DateError("hour")
        return (h % 12) + (12 if ampm.lower() == "p" else 0)
    return h


def _nanos(fraction: str | None) -> int:
    return int((fraction or "0")[:9].ljust(9, "0"))


def _item(p: _Parsed, kind: str, g: tuple[Any, ...], now: datetime) -> None:  # noqa: C901 - one case an item
    if kind == "iso":
        p.date = (int(g[0]), int(g[1]), int(g[2]))
    elif kind in ("time", "time_zone"):
        p.time = (_hour(int(g[0]), g[4]), int(g[1]), int(g[2] or 0), _nanos(g[3]))
        if kind == "time_zone":
            digits = g[6].replace(":", "")
            hours, minutes = (int(digits), 0) if len(digits) <= 2 else (int(digits[:-2]), int(digits[-2:]))
            if hours > 24 or minutes > 59:
                raise DateError("zone")
            p.zone = (1 if g[5] == "+" else -1) * (hours * 60 + minutes)
    elif kind == "hour_ampm":
        p.time = (_hour(int(g[0]), g[1]), 0, 0, 0)
    elif kind == "us":
        p.date = (_year(g[2], now), int(g[0]), int(g[1]))
    elif kind == "dmy":
        p.date = (_year(g[2], now), MONTHS.index(g[1][:3].lower()) + 1, int(g[0]))
    elif kind == "mdy":
        p.date = (_year(g[2], now), MONTHS.index(g[0][:3].lower()) + 1, int(g[1]))
    elif kind == "month":
        raise DateError("month")
    elif kind == "relative":
        n = int(g[0].replace(" ", ""))
        p.add(g[1], -n if g[2] else n)
    elif kind == "ordinal_unit":
        n = ORDINALS[g[0].lower()]
        p.add(g[1], -n if g[2] else n)
    elif kind == "unit":
        p.add(g[0], -1 if g[1] else 1)
    elif kind == "weekday":
        ordinal = ORDINALS[g[0].lower()] if g[0] else 0
        p.weekday = (DAYS.index(g[1][:3].lower()), ordinal)
    elif kind == "word":
        word = g[0].lower()
        if word == "yesterday":
            p.add("day", -1)
        elif word == "tomorrow":
            p.add("day", 1)
    elif kind == "zone_num":
        p.zone = (1 if g[0] == "+" else -1) * (int(g[1]) * 60 + int(g[2] or 0))
    elif kind == "zone":
        p.zone = ZONES[g[0].lower()]
    elif kind == "number":
        digits = g[0]
        if len(digits) == 8:
            p.date = (int(digits[:4]), int(digits[4:6]), int(digits[6:]))
        elif len(digits) <= 2 and p.time is None:
            p.time = (int(digits), 0, 0, 0)
        elif len(digits) <= 4 and p.time is None:
            p.time = (int(digits[:-2]), int(digits[-2:]), 0, 0)
        elif len(digits) == 4 and p.date is not None:
            p.date = (int(digits), p.date[1], p.date[2])
        else:
            raise DateError("number")


def parse(text: str, now: datetime, nanos: int = 0) -> tuple[datetime, int]:  # noqa: C901 - GNU's order of application
    """`text` as GNU date reads it, against `now` (aware, in the output zone): the time and its
    nanoseconds. Raises DateError when GNU would say "invalid date"."""
    s = text.strip()
    if s.startswith("@"):
        m = re.fullmatch(r"@\s*([+-]?\d+)(?:[.,](\d+))?", s)
        if not m:
            raise DateError(text)
        seconds = int(m.group(1))
        try:
            moment = datetime.fromtimestamp(seconds, timezone.utc).astimezone(now.tzinfo)
        except (OverflowError, OSError, ValueError):
            raise DateError(text) from None
        return moment, _nanos(m.group(2))
    p = _Parsed()
    pos = 0
    while True:
        while pos < len(s) and (s[pos].isspace() or s[pos] == ","):
            pos += 1
        if pos >= len(s):
            break
        for kind, pattern in _ITEMS:
            m = pattern.match(s, pos)
            if m and m.end() > pos:
                _item(p, kind, m.groups(), now)
                pos = m.end()
                break
        else:
            raise DateError(text)
    try:
        return _compose(p, now, nanos)
    except (ValueError, OverflowError):
        raise DateError(text) from None


def _compose(p: _Parsed, now: datetime, nanos: int) -> tuple[datetime, int]:
    zone: tzinfo = now.tzinfo or timezone.utc
    if p.zone is not None:
        zone = timezone(timedelta(minutes=p.zone))
    base = now.astimezone(zone)
    y, mo, d = p.date if p.date is not None else (base.year, base.month, base.day)
    if p.time is not None:
        h, mi, sec, nanos = p.time
    elif p.date is not None or p.weekday is not None:
        h, mi, sec, nanos = 0, 0, 0, 0
    else:
        h, mi, sec = base.hour, base.minute, base.second
    if p.date is not None and not (1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]):
        raise ValueError("date")
    if h > 23 or mi > 59 or sec > 59:
        raise ValueError("time")
    # years and months move their fields, then the day overflows into the next month (mktime)
    months = y * 12 + (mo - 1) + p.rel["years"] * 12 + p.rel["months"]
    y, mo = divmod(months, 12)
    mo += 1
    extra_days = max(0, d - calendar.monthrange(y, mo)[1])
    d -= extra_days
    moment = datetime(y, mo, d, h, mi, min(sec, 59), tzinfo=zone) + timedelta(days=extra_days)
    if p.weekday is not None and p.date is None:  # with a date, GNU keeps the date
        wd, ordinal = p.weekday
        ahead = (wd - moment.weekday()) % 7
        if ordinal > 0:
            ahead = (ahead or 7) + 7 * (ordinal - 1)
        elif ordinal < 0:
            ahead = (ahead - 7 if ahead else -7) + 7 * (ordinal + 1)
        moment += timedelta(days=ahead)
    moment += timedelta(days=p.rel["days"])  # days keep the wall clock (across a DST change too)
    moment = moment.astimezone(timezone.utc) + timedelta(hours=p.rel["hours"], minutes=p.rel["minutes"],
                                                         seconds=p.rel["seconds"])
    return moment.astimezone(now.tzinfo), nanos


# ---------------------------------------------------------------------------------------------
# the command

class Usage(Exception):
    pass


def _options(args: list[str]) -> tuple[dict[str, str | bool], list[str]]:  # noqa: C901 - GNU's getopt
    opts: dict[str, str | bool] = {}
    operands: list[str] = []
    with_value = {"d": "date", "f": "file", "r": "reference", "s": "set"}
    long_names = {"date": "date", "file": "file", "reference": "reference", "set": "set", "utc": "utc",
                  "universal": "utc", "rfc-email": "rfc", "rfc-2822": "rfc", "rfc-3339": "rfc3339",
                  "iso-8601": "iso", "debug": "debug", "help": "help", "version": "version"}
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            operands.extend(args[i + 1:])
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            matches = [k for k in long_names if k.startswith(name)]
            if name in long_names:
                matches = [name]
            if len(matches) != 1:
                raise Usage("unrecognized option '%s'" % a if not matches else "option '%s' is ambiguous" % a)
            key = long_names[matches[0]]
            if key in ("date", "file", "reference", "set", "rfc3339"):
                if not eq:
                    if i + 1 >= len(args):
                        raise Usage("option '--%s' requires an argument" % matches[0])
                    i += 1
                    value = args[i]
                opts[key] = value
            elif key == "iso":
                opts[key] = value if eq else "date"
            else:
                opts[key] = True
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                letter = a[j]
                if letter in with_value:
                    value = a[j + 1:]
                    if not value:
                        if i + 1 >= len(args):
                            raise Usage("option requires an argument -- '%s'" % letter)
                        i += 1
                        value = args[i]
                    opts[with_value[letter]] = value
                    break
                if letter == "I":
                    opts["iso"] = a[j + 1:] or "date"
                    break
                if letter == "u":
                    opts["utc"] = True
                elif letter == "R":
                    opts["rfc"] = True
                else:
                    raise Usage("invalid option -- '%s'" % letter)
                j += 1
        else:
            operands.append(a)
        i += 1
    return opts, operands


def _choose(table: dict[str, str], value: str, option: str) -> str:
    matches = [k for k in table if k.startswith(value)] if value else []
    if value in table:
        return table[value]
    if len(matches) != 1:
        raise Usage("invalid argument ‘%s’ for ‘%s’\nValid arguments are:\n%s" % (
            value, option, "\n".join("  - ‘%s’" % k for k in table)))
    return table[matches[0]]


def run_date(args: list[str], environ: dict[str, str], read: Any, stat_mtime: Any,  # noqa: C901 - GNU's checks
             write_error: Any, now: datetime | None = None) -> tuple[str, int]:
    try:
        opts, operands = _options(args)
        fmt = DEFAULT_FORMAT
        if "iso" in opts:
            fmt = _choose(ISO_FORMATS, str(opts["iso"]), "--iso-8601")
        if "rfc3339" in opts:
            fmt = _choose(RFC3339_FORMATS, str(opts["rfc3339"]), "--rfc-3339")
        if opts.get("rfc"):
            fmt = "%a, %d %b %Y %H:%M:%S %z"
    except Usage as exc:
        write_error("date: %s\nTry 'date --help' for more information.\n" % exc)
        return "", 1
    if opts.get("help"):
        return "Usage: date [OPTION]... [+FORMAT]\n  or:  date [-u|--utc|--universal] [MMDDhhmm[[CC]YY][.ss]]\n", 0
    if opts.get("version"):
        return "date (declaw-wasm coreutils) 9.1\n", 0
    plus = [o for o in operands if o.startswith("+")]
    others = [o for o in operands if not o.startswith("+")]
    if len(operands) > 1:
        write_error("date: extra operand ‘%s’\nTry 'date --help' for more information.\n" % operands[1])
        return "", 1
    if sum(1 for k in ("date", "file", "reference") if k in opts) > 1:
        write_error("date: the options to specify dates for printing are mutually exclusive\n"
                    "Try 'date --help' for more information.\n")
        return "", 1
    if plus:
        if fmt is not DEFAULT_FORMAT:
            write_error("date: multiple output formats specified\n")
            return "", 1
        fmt = plus[0][1:]
    if "set" in opts or others:
        write_error("date: cannot set date: Operation not permitted\n")
        return "", 1
    zone = local_zone(environ, bool(opts.get("utc")))
    if now is None:
        stamp = datetime.now(timezone.utc)
        now, nanos = stamp.astimezone(zone), stamp.microsecond * 1000
    else:
        now, nanos = now.astimezone(zone), now.microsecond * 1000
    if "reference" in opts:
        try:
            seconds = stat_mtime(str(opts["reference"]))
        except OSError as exc:
            write_error("date: %s: %s\n" % (opts["reference"], exc.strerror))
            return "", 1
        moment = datetime.fromtimestamp(int(seconds), timezone.utc).astimezone(zone)
        return render(fmt, moment, int(round((seconds % 1) * 1e9))) + "\n", 0
    if "file" in opts:
        try:
            lines = read(str(opts["file"])).splitlines()
        except OSError as exc:
            write_error("date: %s: %s\n" % (opts["file"], exc.strerror))
            return "", 1
        out, status = [], 0
        for line in lines:
            try:
                moment, n = parse(line, now, nanos)
                out.append(render(fmt, moment, n) + "\n")
            except DateError:
                write_error("date: invalid date ‘%s’\n" % line)
                status = 1
        return "".join(out), status
    if "date" in opts:
        try:
            moment, nanos = parse(str(opts["date"]), now, nanos)
        except DateError:
            write_error("date: invalid date ‘%s’\n" % opts["date"])
            return "", 1
        return render(fmt, moment, nanos) + "\n", 0
    return render(fmt, now, nanos) + "\n", 0


class DateCommand(Command):
    """date [OPTION]... [+FORMAT] (module docstring)."""

    name = "date"
    summary = "print the date and time"
    input_kinds = frozenset({InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.TEXT})

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state

        def read(name: str) -> str:
            if name == "-":
                return str(invocation.stdin or "")
            with open(str(state.resolve_path(name)), encoding="utf-8", errors="replace") as handle:
                return handle.read()

        def stat_mtime(name: str) -> float:
            return os.stat(str(state.resolve_path(name))).st_mtime

        out, status = run_date(list(invocation.arguments), dict(state.exported_variables()), read, stat_mtime,
                               state.write_error)
        return CommandResult(stdout=out, exit_code=status)
