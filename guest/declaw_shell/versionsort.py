"""`sort -V` (`--version-sort`, and a key's `V`), as GNU sort 9.1 orders versions: gnulib's
filevercmp, written here from its description. The library's sort had no -V ("unrecognized
arguments"); agents sort release tags and file names with it (`ls | sort -V`, `git tag | sort -V`).
Every other option is the library's sort, unchanged; with -V this module also does -k (with a
key's own `V`, `r`, `b`), -t, -r, -u, -s, -b, -f and files.

filevercmp: the empty string first, then ".", "..", other names starting with "."; a trailing file
suffix (`(\\.[A-Za-z~][A-Za-z0-9~]*)*$`) is set aside and the rest compared first; comparing walks
both strings taking runs of non-digits (letters by their code, `~` before everything, even the
end, other bytes after letters) then runs of digits by value; a tie compares the whole strings.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from bash_purepython.command import sort as library_sort
from bash_purepython.command.command import CommandResult
from bash_purepython.command.sources import input_lines

Invocation = Any  # bash_purepython's CommandInvocation (untyped)

KEY = re.compile(r"^(\d+)(?:\.(\d+))?([bfnrhV]*)(?:,(\d+)(?:\.(\d+))?([bfnrhV]*))?$")


def _order(s: bytes, pos: int) -> int:
    if pos >= len(s):
        return 0
    c = s[pos]
    if 48 <= c <= 57:
        return 0
    if 65 <= c <= 90 or 97 <= c <= 122:
        return c
    if c == 126:  # ~
        return -1
    return c + 256


def _digit(s: bytes, pos: int) -> bool:
    return pos < len(s) and 48 <= s[pos] <= 57


def _verrevcmp(a: bytes, b: bytes) -> int:
    i = j = 0
    while i < len(a) or j < len(b):
        first_diff = 0
        while (i < len(a) and not _digit(a, i)) or (j < len(b) and not _digit(b, j)):
            ca, cb = _order(a, i), _order(b, j)
            if ca != cb:
                return ca - cb
            i += 1
            j += 1
        while i < len(a) and a[i] == 48:
            i += 1
        while j < len(b) and b[j] == 48:
            j += 1
        while _digit(a, i) and _digit(b, j):
            if not first_diff:
                first_diff = a[i] - b[j]
            i += 1
            j += 1
        if _digit(a, i):
            return 1
        if _digit(b, j):
            return -1
        if first_diff:
            return first_diff
    return 0


_SUFFIX = re.compile(rb"(?:\.[A-Za-z~][A-Za-z0-9~]*)*$")


def _prefix_length(s: bytes) -> int:
    """How much of `s` is left once its trailing file suffixes are set aside (as GNU sort 9.1's
    filevercmp, a suffix may be the whole name: `.gz` sorts as an empty version)."""
    m = _SUFFIX.search(s)
    return m.start() if m else len(s)


def filevercmp(x: str, y: str) -> int:
    a, b = x.encode("utf-8", "surrogateescape"), y.encode("utf-8", "surrogateescape")
    if not a or not b:
        return (0 if not b else -1) if not a else 1
    if a[:1] == b"." or b[:1] == b".":
        if a[:1] != b".":
            return 1
        if b[:1] != b".":
            return -1
        for special in (b".", b".."):
            if a == special or b == special:
                return (0 if b == special else -1) if a == special else 1
    pa, pb = _prefix_length(a), _prefix_length(b)
    result = _verrevcmp(a[:pa], b[:pb])
    if result or (pa == len(a) and pb == len(b)):
        return result
    return _verrevcmp(a, b)


Key = tuple[Any, bool, bool, bool]  # (the library's SortKey or None: the whole line, version, reverse, fold)


def _compare(line_a: str, line_b: str, keys: list[Key], separator: str | None, stable: bool, reverse: bool) -> int:
    """GNU's comparison: each key in turn (its own modifiers, else the global ones), then, unless
    -s, the whole lines as bytes (reversed by a global -r)."""
    for key, version, key_reverse, fold in keys:
        ka = key.extract(line_a, separator) if key is not None else line_a
        kb = key.extract(line_b, separator) if key is not None else line_b
        if fold:
            ka, kb = ka.upper(), kb.upper()
        c = filevercmp(ka, kb) if version else (ka > kb) - (ka < kb)
        if c:
            return -c if key_reverse else c
    if stable:
        return 0
    ba, bb = line_a.encode("utf-8", "surrogateescape"), line_b.encode("utf-8", "surrogateescape")
    c = (ba > bb) - (ba < bb)
    return -c if reverse else c


def wants_version_sort(arguments: list[str]) -> bool:
    flags, keys, _, _ = _split_options(arguments)
    return "V" in flags or any("V" in key for key in keys)


def _split_options(arguments: list[str]) -> tuple[set[str], list[str], str | None, list[str]]:
    flags: set[str] = set()
    keys: list[str] = []
    separator: str | None = None
    paths: list[str] = []
    i = 0
    while i < len(arguments):
        a = arguments[i]
        if a == "--":
            paths.extend(arguments[i + 1:])
            break
        if a.startswith("--"):
            name, eq, value = a[2:].partition("=")
            if name in ("key", "field-separator") and not eq:
                i += 1
                value = arguments[i] if i < len(arguments) else ""
            if name == "key":
                keys.append(value)
            elif name == "field-separator":
                separator = value
            else:
                if name == "sort":
                    name = "version-sort" if value == "version" else "sort=" + value
                flags.add({"version-sort": "V", "reverse": "r", "unique": "u", "stable": "s", "ignore-case": "f",
                           "ignore-leading-blanks": "b"}.get(name, "?" + name))
        elif a.startswith("-") and len(a) > 1:
            j = 1
            while j < len(a):
                letter = a[j]
                if letter in "kt":
                    value = a[j + 1:]
                    if not value:
                        i += 1
                        value = arguments[i] if i < len(arguments) else ""
                    if letter == "k":
                        keys.append(value)
                    else:
                        separator = value
                    break
                flags.add(letter)
                j += 1
        else:
            paths.append(a)
        i += 1
    return flags, keys, separator, paths


async def version_sort(invocation: Invocation) -> CommandResult:
    state = invocation.state
    flags, key_texts, separator, paths = _split_options(list(invocation.arguments))
    unknown = sorted(f for f in flags if f not in "Vrusfb")
    if unknown:
        state.write_error("sort: with -V, these options are not supported here: %s\n" % " ".join(unknown))
        return CommandResult(stdout="", exit_code=2)
    keys: list[Key] = []
    for text in key_texts:
        m = KEY.match(text)
        if m is None:
            state.write_error("sort: invalid key definition %r\n" % text)
            return CommandResult(stdout="", exit_code=2)
        own = (m.group(3) or "") + (m.group(6) or "")
        modifiers = own or "".join(f for f in "Vrfb" if f in flags)  # a key with modifiers inherits none
        key = library_sort.SortKey(int(m.group(1)), int(m.group(2) or 1), int(m.group(4)) if m.group(4) else None,
                                   int(m.group(5)) if m.group(5) else None, modifiers.replace("V", ""))
        keys.append((key, "V" in modifiers, "r" in modifiers, "f" in modifiers))
    if not keys:
        keys = [(None, True, "r" in flags, "f" in flags)]
    lines = [line async for line in input_lines("sort", invocation, paths)]
    stable, reverse, blanks = "s" in flags, "r" in flags, "b" in flags and not key_texts

    def compare(x: str, y: str) -> int:
        if blanks:
            return _compare(x.lstrip(), y.lstrip(), keys, separator, True, reverse) or \
                _compare(x, y, [], separator, stable, reverse)
        return _compare(x, y, keys, separator, stable, reverse)

    ordered = sorted(lines, key=functools.cmp_to_key(compare))
    if "u" in flags:
        kept: list[str] = []
        for line in ordered:
            if not kept or _compare(kept[-1], line, keys, separator, True, reverse):
                kept.append(line)
        ordered = kept
    return CommandResult(stdout="".join(line + "\n" for line in ordered), exit_code=invocation.exit_status.code)


class SortCommand(library_sort.SortCommand):
    """The library's sort, and GNU's version sort when -V asks for it (module docstring)."""

    async def run(self, invocation: Invocation) -> CommandResult:
        if wants_version_sort(list(invocation.arguments)):
            return await version_sort(invocation)
        result: CommandResult = await super().run(invocation)
        return result
