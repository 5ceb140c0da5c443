"""What the sandbox's `git` prints, as git 2.39 prints it: paths quoted as core.quotePath quotes
them, dates in git's formats, `--pretty` placeholders, the diff headers and patches, `--stat`'s
columns and graph, the short-stat line and the summary of created, deleted and renamed files."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import gitdiff
from .gitrepo import MODE_LINK, ZERO, format_tz

if TYPE_CHECKING:
    from collections.abc import Callable

    from dulwich.objects import Commit

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 34: '"', 92: "\\"}


def quote(path: bytes, space: bool = False) -> str:
    """core.quotePath: control characters, `"`, `\\` and bytes above 0x7f in C quotes (space too
    for the short formats)."""
    if not any(b < 32 or b >= 127 or b in (34, 92) or (space and b == 32) for b in path):
        return path.decode("utf-8", "replace")
    out = ['"']
    for b in path:
        if b in ESCAPES:
            out.append("\\" + ESCAPES[b])
        elif b < 32 or b >= 127:
            out.append("\\%03o" % b)
        else:
            out.append(chr(b))
    out.append('"')
    return "".join(out)


# -- dates ------------------------------------------------------------------------------------------
def _parts(when: int, tz: int) -> time.struct_time:
    return time.gmtime(when + tz)


def format_date(when: int, tz: int, style: str = "default", now: float | None = None) -> str:
    t = _parts(when, tz)
    zone = format_tz(tz)
    if style in ("default", "medium"):
        return "%s %s %d %02d:%02d:%02d %d %s" % (WEEKDAYS[t.tm_wday], MONTHS[t.tm_mon - 1], t.tm_mday,
                                                    t.tm_hour, t.tm_min, t.tm_sec, t.tm_year, zone)
    if style == "iso":
        return "%04d-%02d-%02d %02d:%02d:%02d %s" % (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min,
                                                     t.tm_sec, zone)
    if style == "iso-strict":
        zone_text = "%s:%s" % (zone[:3], zone[3:])
        return "%04d-%02d-%02dT%02d:%02d:%02d%s" % (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min,
                                                    t.tm_sec, zone_text)
    if style == "rfc":
        return "%s, %d %s %d %02d:%02d:%02d %s" % (WEEKDAYS[t.tm_wday], t.tm_mday, MONTHS[t.tm_mon - 1],
                                                    t.tm_year, t.tm_hour, t.tm_min, t.tm_sec, zone)
    if style == "short":
        return "%04d-%02d-%02d" % (t.tm_year, t.tm_mon, t.tm_mday)
    if style == "unix":
        return str(when)
    if style == "raw":
        return "%d %s" % (when, zone)
    if style == "relative":
        return relative(when, now)
    if style.startswith("format:"):
        return time.strftime(style[7:], t)
    return format_date(when, tz)


def _plural(n: int, one: str, many: str) -> str:
    return (one if n == 1 else many) % n


def relative(when: int, now: float | None = None) -> str:
    """git's show_date_relative."""
    current = int(time.time() if now is None else now)
    if current < when:
        return "in the future"
    diff = current - when
    if diff < 90:
        return _plural(diff, "%d second ago", "%d seconds ago")
    diff = (diff + 30) // 60
    if diff < 90:
        return _plural(diff, "%d minute ago", "%d minutes ago")
    diff = (diff + 30) // 60
    if diff < 36:
        return _plural(diff, "%d hour ago", "%d hours ago")
    diff = (diff + 12) // 24
    if diff < 14:
        return _plural(diff, "%d day ago", "%d days ago")
    if diff < 70:
        return _plural((diff + 3) // 7, "%d week ago", "%d weeks ago")
    if diff < 365:
        return _plural((diff + 15) // 30, "%d month ago", "%d months ago")
    if diff < 1825:
        total_months = (diff * 12 * 2 + 365) // (365 * 2)
        years, months = total_months // 12, total_months % 12
        if months:
            return "%s, %s" % (_plural(years, "%d year", "%d years"), _plural(months, "%d month ago",
                                                                                 "%d months ago"))
        return _plural(years, "%d year ago", "%d years ago")
    return _plural((diff + 183) // 365, "%d year ago", "%d years ago")


# -- commit messages --------------------------------------------------------------------------------
def text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def subject(message: bytes) -> str:
    lines = text(message).split("\n")
    out: list[str] = []
    for line in lines:
        if not line.strip():
            if out:
                break
            continue
        out.append(line.strip())
    return " ".join(out)


def body(message: bytes) -> str:
    lines = text(message).split("\n")
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    while index < len(lines) and lines[index].strip():
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    rest = "\n".join(lines[index:])
    return rest if not rest or rest.endswith("\n") else rest + "\n"


def split_ident(ident: bytes) -> tuple[str, str]:
    raw = text(ident)
    name, _, rest = raw.partition(" <")
    return name, rest.rstrip(">")


@dataclass
class PrettyContext:
    abbrev: Callable[[bytes], str]
    decorations: Callable[[bytes], list[str]] = field(default=lambda sha: [])
    date_style: str = "default"


def pretty(fmt: str, commit: Commit, ctx: PrettyContext) -> str:  # noqa: C901 - git's placeholders
    out: list[str] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%" or i + 1 >= len(fmt):
            out.append(ch)
            i += 1
            continue
        key = fmt[i + 1]
        i += 2
        if key == "%":
            out.append("%")
        elif key == "n":
            out.append("\n")
        elif key == "H":
            out.append(commit.id.decode())
        elif key == "h":
            out.append(ctx.abbrev(commit.id))
        elif key == "T":
            out.append(commit.tree.decode())
        elif key == "t":
            out.append(ctx.abbrev(commit.tree))
        elif key == "P":
            out.append(" ".join(p.decode() for p in commit.parents))
        elif key == "p":
            out.append(" ".join(ctx.abbrev(p) for p in commit.parents))
        elif key == "s":
            out.append(subject(commit.message))
        elif key == "b":
            out.append(body(commit.message))
        elif key == "B":
            raw = text(commit.message)
            out.append(raw if raw.endswith("\n") else raw + "\n")
        elif key == "d":
            names = ctx.decorations(commit.id)
            out.append(" (%s)" % ", ".join(names) if names else "")
        elif key == "D":
            out.append(", ".join(ctx.decorations(commit.id)))
        elif key == "x" and i + 1 < len(fmt) + 1 and len(fmt) >= i + 2:
            try:
                out.append(chr(int(fmt[i:i + 2], 16)))
                i += 2
            except ValueError:
                out.append("%x")
        elif key in "ac" and i < len(fmt):
            sub = fmt[i]
            i += 1
            who = commit.author if key == "a" else commit.committer
            when = commit.author_time if key == "a" else commit.commit_time
            tz = commit.author_timezone if key == "a" else commit.commit_timezone
            name, email = split_ident(who)
            value = {"n": name, "N": name, "e": email, "E": email, "l": email.split("@")[0],
                     "d": format_date(when, tz, ctx.date_style), "D": format_date(when, tz, "rfc"),
                     "r": format_date(when, tz, "relative"), "t": str(when), "i": format_date(when, tz, "iso"),
                     "I": format_date(when, tz, "iso-strict"), "s": format_date(when, tz, "short")}.get(sub)
            out.append(value if value is not None else "%" + key + sub)
        else:
            out.append("%" + key)
    return "".join(out)


# -- diffs ------------------------------------------------------------------------------------------
@dataclass
class FilePair:
    """One file's change: old and new (mode, sha) — None where the file is not on that side."""

    old_path: bytes
    new_path: bytes
    old: tuple[int, bytes] | None
    new: tuple[int, bytes] | None
    score: int = 0  # a rename's similarity, in percent

    @property
    def status(self) -> str:
        if self.old is None:
            return "A"
        if self.new is None:
            return "D"
        if self.old_path != self.new_path:
            return "R"
        if (self.old[0] & 0o170000) != (self.new[0] & 0o170000):
            return "T"
        return "M"


def detect_renames(pairs: list[FilePair]) -> list[FilePair]:
    """Exact renames: a deleted file whose content an added file has (git pairs them first)."""
    deleted: dict[bytes, list[FilePair]] = {}
    for pair in pairs:
        if pair.status == "D" and pair.old is not None:
            deleted.setdefault(pair.old[1], []).append(pair)
    out: list[FilePair] = []
    used: set[int] = set()
    renamed: dict[int, FilePair] = {}
    for pair in pairs:
        if pair.status == "A" and pair.new is not None and deleted.get(pair.new[1]):
            source = deleted[pair.new[1]].pop(0)
            used.add(id(source))
            renamed[id(pair)] = FilePair(source.old_path, pair.new_path, source.old, pair.new, 100)
    for pair in pairs:
        if id(pair) in used:
            continue
        out.append(renamed.get(id(pair), pair))
    out.sort(key=lambda p: p.new_path if p.new is not None else p.old_path)
    return out


def short_sha(sha: bytes | None, abbrev: Callable[[bytes], str]) -> str:
    if sha is None or sha == ZERO:
        return "0000000"
    return abbrev(sha)


def patch(pair: FilePair, content: Callable[[bytes], bytes], abbrev: Callable[[bytes], str],
          context: int = 3) -> list[bytes]:
    """One file's `diff --git` section."""
    a = b"a/" + pair.old_path
    b = b"b/" + pair.new_path
    out = [b"diff --git %s %s\n" % (_header_path(a), _header_path(b))]
    old_mode = pair.old[0] if pair.old else None
    new_mode = pair.new[0] if pair.new else None
    if pair.old is None:
        out.append(b"new file mode %o\n" % (pair.new[0] if pair.new else 0))
    elif pair.new is None:
        out.append(b"deleted file mode %o\n" % pair.old[0])
    elif pair.old[0] != pair.new[0]:
        out.append(b"old mode %o\nnew mode %o\n" % (pair.old[0], pair.new[0]))
    if pair.old_path != pair.new_path:
        out.append(b"similarity index %d%%\nrename from %s\nrename to %s\n" % (
            pair.score, quote(pair.old_path).encode(), quote(pair.new_path).encode()))
    old_sha = pair.old[1] if pair.old else None
    new_sha = pair.new[1] if pair.new else None
    if old_sha == new_sha:
        return out
    index = b"index %s..%s" % (short_sha(old_sha, abbrev).encode(), short_sha(new_sha, abbrev).encode())
    if old_mode is not None and old_mode == new_mode:
        index += b" %o" % old_mode
    out.append(index + b"\n")
    old_data = content(old_sha) if old_sha else b""
    new_data = content(new_sha) if new_sha else b""
    minus = _header_path(a) if pair.old else b"/dev/null"
    plus = _header_path(b) if pair.new else b"/dev/null"
    if gitdiff.is_binary(old_data) or gitdiff.is_binary(new_data):
        out.append(b"Binary files %s and %s differ\n" % (minus, plus))
        return out
    if not old_data and not new_data:
        return out
    out.append(b"--- %s\n+++ %s\n" % (minus, plus))
    out.extend(gitdiff.unified(gitdiff.split_lines(old_data), gitdiff.split_lines(new_data), context))
    return out


def _header_path(path: bytes) -> bytes:
    return quote(path).encode()


@dataclass
class Stat:
    name: str
    added: int
    deleted: int
    binary: bool = False
    interesting: bool = True


def line_counts(pair: FilePair, content: Callable[[bytes], bytes]) -> tuple[int, int, bool]:
    """(added, deleted, binary) — bytes for binary files, as --stat counts them."""
    old = content(pair.old[1]) if pair.old else b""
    new = content(pair.new[1]) if pair.new else b""
    if gitdiff.is_binary(old) or gitdiff.is_binary(new):
        return len(new), len(old), True
    if old == new:
        return 0, 0, False
    script = gitdiff.changes(gitdiff.split_lines(old), gitdiff.split_lines(new))
    added, deleted = gitdiff.counts(script)
    return added, deleted, False


def rename_name(old: str, new: str) -> str:
    """`a => b`, or with the common folders outside braces: `d/{a => b}`."""
    pfx = 0
    i = 0
    while i < min(len(old), len(new)) and old[i] == new[i]:
        if old[i] == "/":
            pfx = i + 1
        i += 1
    sfx = 0
    j = 0
    while j < min(len(old), len(new)) - pfx and old[-1 - j] == new[-1 - j]:
        if old[-1 - j] == "/":
            sfx = j + 1
        j += 1
    if pfx == 0 and sfx == 0:
        return "%s => %s" % (old, new)
    mid_old = old[pfx:len(old) - sfx]
    mid_new = new[pfx:len(new) - sfx]
    return "%s{%s => %s}%s" % (old[:pfx], mid_old, mid_new, old[len(old) - sfx:])


def stat_name(pair: FilePair) -> str:
    if pair.old_path != pair.new_path:
        return rename_name(quote(pair.old_path), quote(pair.new_path))
    return quote(pair.new_path)


def _scale(it: int, width: int, max_change: int) -> int:
    return 0 if not it else 1 + (it * (width - 1) // max_change)


def stat_lines(stats: list[Stat], width: int = 80) -> list[str]:  # noqa: C901 - git's show_stats
    if not stats:
        return []
    max_len = max_change = 0
    number_width = bin_width = 0
    for s in stats:
        if not s.interesting and s.added + s.deleted == 0:
            continue
        max_len = max(max_len, len(s.name))
        if s.binary:
            bin_width = max(bin_width, 14 + len(str(s.added)) + len(str(s.deleted)))
            number_width = 3
            continue
        max_change = max(max_change, s.added + s.deleted)
    number_width = max(len(str(max_change)), number_width)
    width = max(width, 16 + 6 + number_width)
    graph_width = max_change if max_change + 4 > bin_width else bin_width - 4
    name_width = max_len
    if name_width + number_width + 6 + graph_width > width:
        if graph_width > width * 3 // 8 - number_width - 6:
            graph_width = max(width * 3 // 8 - number_width - 6, 6)
        if name_width > width - number_width - 6 - graph_width:
            name_width = width - number_width - 6 - graph_width
        else:
            graph_width = width - number_width - 6 - name_width
    out = []
    for s in stats:
        if not s.interesting and s.added + s.deleted == 0:
            continue
        name, prefix, length = s.name, "", name_width
        if name_width < len(name):
            prefix = "..."
            length = max(length - 3, 0)
            name = name[len(name) - length:] if length else ""
            slash = name.find("/")
            if slash >= 0:
                name = name[slash:]
        padding = max(length - len(name), 0)
        if s.binary:
            line = " %s%s%s | %*s" % (prefix, name, " " * padding, number_width, "Bin")
            if s.added or s.deleted:
                line += " %d -> %d bytes" % (s.deleted, s.added)
            out.append(line)
            continue
        add, dele = s.added, s.deleted
        if graph_width <= max_change:
            total = _scale(add + dele, graph_width, max_change)
            if total < 2 and add and dele:
                total = 2
            if add < dele:
                add = _scale(add, graph_width, max_change)
                dele = total - add
            else:
                dele = _scale(dele, graph_width, max_change)
                add = total - dele
        out.append(" %s%s%s | %*d%s%s%s" % (prefix, name, " " * padding, number_width, s.added + s.deleted,
                                             " " if s.added + s.deleted else "", "+" * add, "-" * dele))
    return out


def shortstat(stats: list[Stat]) -> str:
    files = sum(1 for s in stats if s.interesting or s.added + s.deleted)
    ins = sum(s.added for s in stats if not s.binary)
    dels = sum(s.deleted for s in stats if not s.binary)
    if not files:
        return " 0 files changed"
    line = " %d file%s changed" % (files, "" if files == 1 else "s")
    if ins or not dels:
        line += ", %d insertion%s(+)" % (ins, "" if ins == 1 else "s")
    if dels or not ins:
        line += ", %d deletion%s(-)" % (dels, "" if dels == 1 else "s")
    return line


def summary_lines(pairs: list[FilePair]) -> list[str]:
    """--summary: created, deleted, renamed files and mode changes."""
    out = []
    for pair in pairs:
        if pair.old is None and pair.new is not None:
            out.append(" create mode %o %s" % (pair.new[0], quote(pair.new_path)))
        elif pair.new is None and pair.old is not None:
            out.append(" delete mode %o %s" % (pair.old[0], quote(pair.old_path)))
        elif pair.old is not None and pair.new is not None:
            if pair.old_path != pair.new_path:
                out.append(" rename %s (%d%%)" % (rename_name(quote(pair.old_path), quote(pair.new_path)),
                                                 pair.score))
            elif pair.old[0] != pair.new[0] and MODE_LINK not in (pair.old[0], pair.new[0]):
                out.append(" mode change %o => %o %s" % (pair.old[0], pair.new[0], quote(pair.new_path)))
    return out
