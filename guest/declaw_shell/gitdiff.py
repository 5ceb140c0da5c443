"""The line diff `git diff` prints (guest/declaw_shell/git.py), as git 2.39's xdiff makes it, so that
a sandbox's patches are byte for byte the host's: lines that cannot match are set aside first
(xprepare's cleanup), Myers' divide and conquer with xdiff's cost cut-offs finds the changes, the
change groups are slid as xdiff slides them (joined where they touch, lined up with the other
side's, and placed by the indent heuristic, on by default since git 2.14), and the hunks are cut
with git's context, inter-hunk merging and function lines (a line starting with a letter, `_` or
`$`, as git's default `funcname`). Lines are bytes and keep their newline: `a` at the end of a
file without one is not `a\\n`."""

from __future__ import annotations

from dataclasses import dataclass

MAX_COST_MIN = 256
HEUR_MIN_COST = 256
SNAKE_CNT = 20
K_HEUR = 4
MAX_EQLIMIT = 1024
SIMSCAN_WINDOW = 100
KPDIS_RUN = 4
LINE_MAX = 1 << 62
DISCARD, KEEP, INVESTIGATE = 0, 1, 2

MAX_INDENT = 200
MAX_BLANKS = 20
START_OF_FILE_PENALTY = 1
END_OF_FILE_PENALTY = 21
TOTAL_BLANK_WEIGHT = -30
POST_BLANK_WEIGHT = 6
RELATIVE_INDENT_PENALTY = -4
RELATIVE_INDENT_WITH_BLANK_PENALTY = 10
RELATIVE_OUTDENT_PENALTY = 24
RELATIVE_OUTDENT_WITH_BLANK_PENALTY = 17
RELATIVE_DEDENT_PENALTY = 23
RELATIVE_DEDENT_WITH_BLANK_PENALTY = 17
INDENT_WEIGHT = 60
INDENT_HEURISTIC_MAX_SLIDING = 100
SPACES = b" \t\n\r\v\f"


def split_lines(data: bytes) -> list[bytes]:
    """A file's lines, each with its newline (the last may have none)."""
    parts = data.split(b"\n")
    lines = [part + b"\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def bogosqrt(n: int) -> int:
    i = 1
    while n > 0:
        n >>= 2
        i <<= 1
    return i


@dataclass
class Change:
    i1: int  # first changed line in the old file
    i2: int  # first changed line in the new file
    chg1: int
    chg2: int


class _Side:
    """One file: its lines' classes and which lines are changed (index +1: sentinels at both ends)."""

    def __init__(self, lines: list[bytes], classes: list[int]) -> None:
        self.lines = lines
        self.classes = classes
        self.nrec = len(lines)
        self.changed = [False] * (self.nrec + 2)
        self.ref: list[int] = []  # the lines kept for the Myers pass

    def is_changed(self, i: int) -> bool:
        return self.changed[i + 1]

    def set_changed(self, i: int, value: bool) -> None:
        self.changed[i + 1] = value


def _clean_mmatch(action: list[int], i: int, s: int, e: int) -> bool:
    if i - s > SIMSCAN_WINDOW:
        s = i - SIMSCAN_WINDOW
    if e - i > SIMSCAN_WINDOW:
        e = i + SIMSCAN_WINDOW
    rdis0, rpdis0 = 0, 1
    r = 1
    while i - r >= s:
        a = action[i - r]
        if a == DISCARD:
            rdis0 += 1
        elif a == INVESTIGATE:
            rpdis0 += 1
        else:
            break
        r += 1
    if rdis0 == 0:
        return False
    rdis1, rpdis1 = 0, 1
    r = 1
    while i + r <= e:
        a = action[i + r]
        if a == DISCARD:
            rdis1 += 1
        elif a == INVESTIGATE:
            rpdis1 += 1
        else:
            break
        r += 1
    if rdis1 == 0:
        return False
    rdis1 += rdis0
    rpdis1 += rpdis0
    return rpdis1 * KPDIS_RUN < rpdis1 + rdis1


def _prepare(x1: _Side, x2: _Side) -> None:
    """Trim the common ends, set aside lines with no match (and runs of many-match lines among them)."""
    n1, n2 = x1.nrec, x2.nrec
    lim = min(n1, n2)
    start = 0
    while start < lim and x1.classes[start] == x2.classes[start]:
        start += 1
    lim -= start
    tail = 0
    while tail < lim and x1.classes[n1 - 1 - tail] == x2.classes[n2 - 1 - tail]:
        tail += 1
    dend1, dend2 = n1 - tail - 1, n2 - tail - 1
    count1: dict[int, int] = {}
    count2: dict[int, int] = {}
    for c in x1.classes:
        count1[c] = count1.get(c, 0) + 1
    for c in x2.classes:
        count2[c] = count2.get(c, 0) + 1
    for side, other_count, dend in ((x1, count2, dend1), (x2, count1, dend2)):
        mlim = min(bogosqrt(side.nrec), MAX_EQLIMIT)
        action = []
        for i in range(start, dend + 1):
            nm = other_count.get(side.classes[i], 0)
            action.append(DISCARD if nm == 0 else KEEP if nm < mlim else INVESTIGATE)
        length = len(action)
        for k in range(length):
            a = action[k]
            if a == INVESTIGATE:
                a = DISCARD if _clean_mmatch(action, k, 0, length - 1) else KEEP
            if a == KEEP:
                side.ref.append(start + k)
            else:
                side.set_changed(start + k, True)


class _Myers:
    def __init__(self, x1: _Side, x2: _Side) -> None:
        self.x1, self.x2 = x1, x2
        self.h1 = [x1.classes[i] for i in x1.ref]
        self.h2 = [x2.classes[i] for i in x2.ref]
        ndiags = len(self.h1) + len(self.h2) + 3
        self.base = len(self.h2) + 1
        self.kvdf = [0] * (ndiags + 2)
        self.kvdb = [0] * (ndiags + 2)
        self.mxcost = max(bogosqrt(ndiags), MAX_COST_MIN)

    def run(self) -> None:
        stack = [(0, len(self.h1), 0, len(self.h2), False)]
        h1, h2 = self.h1, self.h2
        while stack:
            off1, lim1, off2, lim2, need_min = stack.pop()
            while off1 < lim1 and off2 < lim2 and h1[off1] == h2[off2]:
                off1 += 1
                off2 += 1
            while off1 < lim1 and off2 < lim2 and h1[lim1 - 1] == h2[lim2 - 1]:
                lim1 -= 1
                lim2 -= 1
            if off1 == lim1:
                for k in range(off2, lim2):
                    self.x2.set_changed(self.x2.ref[k], True)
            elif off2 == lim2:
                for k in range(off1, lim1):
                    self.x1.set_changed(self.x1.ref[k], True)
            else:
                i1, i2, min_lo, min_hi = self.split(off1, lim1, off2, lim2, need_min)
                stack.append((i1, lim1, i2, lim2, min_hi))
                stack.append((off1, i1, off2, i2, min_lo))

    def split(self, off1: int, lim1: int, off2: int, lim2: int,  # noqa: C901 - xdiff's one routine
              need_min: bool) -> tuple[int, int, bool, bool]:
        h1, h2, b = self.h1, self.h2, self.base
        kvdf, kvdb = self.kvdf, self.kvdb
        dmin, dmax = off1 - lim2, lim1 - off2
        fmid, bmid = off1 - off2, lim1 - lim2
        odd = (fmid - bmid) & 1
        fmin = fmax = fmid
        bmin = bmax = bmid
        kvdf[b + fmid] = off1
        kvdb[b + bmid] = lim1
        ec = 0
        while True:
            ec += 1
            got_snake = False
            if fmin > dmin:
                fmin -= 1
                kvdf[b + fmin - 1] = -1
            else:
                fmin += 1
            if fmax < dmax:
                fmax += 1
                kvdf[b + fmax + 1] = -1
            else:
                fmax -= 1
            for d in range(fmax, fmin - 1, -2):
                if kvdf[b + d - 1] >= kvdf[b + d + 1]:
                    i1 = kvdf[b + d - 1] + 1
                else:
                    i1 = kvdf[b + d + 1]
                prev1 = i1
                i2 = i1 - d
                while i1 < lim1 and i2 < lim2 and h1[i1] == h2[i2]:
                    i1 += 1
                    i2 += 1
                if i1 - prev1 > SNAKE_CNT:
                    got_snake = True
                kvdf[b + d] = i1
                if odd and bmin <= d <= bmax and kvdb[b + d] <= i1:
                    return i1, i2, True, True
            if bmin > dmin:
                bmin -= 1
                kvdb[b + bmin - 1] = LINE_MAX
            else:
                bmin += 1
            if bmax < dmax:
                bmax += 1
                kvdb[b + bmax + 1] = LINE_MAX
            else:
                bmax -= 1
            for d in range(bmax, bmin - 1, -2):
                if kvdb[b + d - 1] < kvdb[b + d + 1]:
                    i1 = kvdb[b + d - 1]
                else:
                    i1 = kvdb[b + d + 1] - 1
                prev1 = i1
                i2 = i1 - d
                while i1 > off1 and i2 > off2 and h1[i1 - 1] == h2[i2 - 1]:
                    i1 -= 1
                    i2 -= 1
                if prev1 - i1 > SNAKE_CNT:
                    got_snake = True
                kvdb[b + d] = i1
                if not odd and fmin <= d <= fmax and i1 <= kvdf[b + d]:
                    return i1, i2, True, True
            if need_min:
                continue
            if got_snake and ec > HEUR_MIN_COST:
                found = self._heuristic(off1, lim1, off2, lim2, ec, fmin, fmax, fmid, bmin, bmax, bmid)
                if found is not None:
                    return found
            if ec >= self.mxcost:
                return self._furthest(off1, lim1, off2, lim2, fmin, fmax, bmin, bmax)

    def _heuristic(self, off1: int, lim1: int, off2: int, lim2: int, ec: int, fmin: int, fmax: int, fmid: int,
                   bmin: int, bmax: int, bmid: int) -> tuple[int, int, bool, bool] | None:
        h1, h2, b = self.h1, self.h2, self.base
        best, spl = 0, (0, 0)
        for d in range(fmax, fmin - 1, -2):
            dd = d - fmid if d > fmid else fmid - d
            i1 = self.kvdf[b + d]
            i2 = i1 - d
            v = (i1 - off1) + (i2 - off2) - dd
            if (v > K_HEUR * ec and v > best and off1 + SNAKE_CNT <= i1 < lim1
                    and off2 + SNAKE_CNT <= i2 < lim2):
                k = 1
                while h1[i1 - k] == h2[i2 - k]:
                    if k == SNAKE_CNT:
                        best, spl = v, (i1, i2)
                        break
                    k += 1
        if best > 0:
            return spl[0], spl[1], True, False
        for d in range(bmax, bmin - 1, -2):
            dd = d - bmid if d > bmid else bmid - d
            i1 = self.kvdb[b + d]
            i2 = i1 - d
            v = (lim1 - i1) + (lim2 - i2) - dd
            if (v > K_HEUR * ec and v > best and off1 < i1 <= lim1 - SNAKE_CNT
                    and off2 < i2 <= lim2 - SNAKE_CNT):
                k = 0
                while h1[i1 + k] == h2[i2 + k]:
                    if k == SNAKE_CNT - 1:
                        best, spl = v, (i1, i2)
                        break
                    k += 1
        if best > 0:
            return spl[0], spl[1], False, True
        return None

    def _furthest(self, off1: int, lim1: int, off2: int, lim2: int, fmin: int, fmax: int, bmin: int,
                  bmax: int) -> tuple[int, int, bool, bool]:
        b = self.base
        fbest = fbest1 = -1
        for d in range(fmax, fmin - 1, -2):
            i1 = min(self.kvdf[b + d], lim1)
            i2 = i1 - d
            if lim2 < i2:
                i1, i2 = lim2 + d, lim2
            if fbest < i1 + i2:
                fbest, fbest1 = i1 + i2, i1
        bbest = bbest1 = LINE_MAX
        for d in range(bmax, bmin - 1, -2):
            i1 = max(off1, self.kvdb[b + d])
            i2 = i1 - d
            if i2 < off2:
                i1, i2 = off2 + d, off2
            if i1 + i2 < bbest:
                bbest, bbest1 = i1 + i2, i1
        if (lim1 + lim2) - bbest < fbest - (off1 + off2):
            return fbest1, fbest - fbest1, True, False
        return bbest1, bbest - bbest1, False, True


# -- sliding the change groups (xdl_change_compact) -------------------------------------------------
def _indent(line: bytes) -> int:
    ret = 0
    for c in line:
        if c not in (32, 9, 10, 13, 11, 12):
            return ret
        if c == 32:
            ret += 1
        elif c == 9:
            ret += 8 - ret % 8
        if ret >= MAX_INDENT:
            return MAX_INDENT
    return -1


def _measure(side: _Side, split: int, indents: dict[int, int]) -> tuple[bool, int, int, int, int, int]:
    def indent(i: int) -> int:
        got = indents.get(i)
        if got is None:
            got = indents[i] = _indent(side.lines[i])
        return got

    if split >= side.nrec:
        end_of_file, ind = True, -1
    else:
        end_of_file, ind = False, indent(split)
    def nearest(lines: range) -> tuple[int, int]:
        """(blank lines crossed, the indent of the first non-blank line or -1), at most MAX_BLANKS."""
        blanks = 0
        for i in lines:
            found = indent(i)
            if found != -1:
                return blanks, found
            blanks += 1
            if blanks == MAX_BLANKS:
                return blanks, 0
        return blanks, -1

    pre_blank, pre_indent = nearest(range(split - 1, -1, -1))
    post_blank, post_indent = nearest(range(split + 1, side.nrec))
    return end_of_file, ind, pre_blank, pre_indent, post_blank, post_indent


def _score(m: tuple[bool, int, int, int, int, int], score: list[int]) -> None:
    end_of_file, ind, pre_blank, pre_indent, post_blank_after, post_indent = m
    if pre_indent == -1 and pre_blank == 0:
        score[1] += START_OF_FILE_PENALTY
    if end_of_file:
        score[1] += END_OF_FILE_PENALTY
    post_blank = 1 + post_blank_after if ind == -1 else 0
    total_blank = pre_blank + post_blank
    score[1] += TOTAL_BLANK_WEIGHT * total_blank + POST_BLANK_WEIGHT * post_blank
    indent = ind if ind != -1 else post_indent
    any_blanks = total_blank != 0
    score[0] += indent
    if indent == -1 or pre_indent == -1:
        return
    if indent > pre_indent:
        score[1] += RELATIVE_INDENT_WITH_BLANK_PENALTY if any_blanks else RELATIVE_INDENT_PENALTY
    elif indent < pre_indent:
        if post_indent != -1 and post_indent > indent:
            score[1] += RELATIVE_OUTDENT_WITH_BLANK_PENALTY if any_blanks else RELATIVE_OUTDENT_PENALTY
        else:
            score[1] += RELATIVE_DEDENT_WITH_BLANK_PENALTY if any_blanks else RELATIVE_DEDENT_PENALTY


def _score_cmp(s1: list[int], s2: list[int]) -> int:
    cmp_indents = (s1[0] > s2[0]) - (s1[0] < s2[0])
    return INDENT_WEIGHT * cmp_indents + (s1[1] - s2[1])


class _Group:
    __slots__ = ("start", "end")

    def __init__(self, side: _Side) -> None:
        self.start = self.end = 0
        while side.is_changed(self.end):
            self.end += 1

    def next(self, side: _Side) -> bool:
        if self.end == side.nrec:
            return False
        self.start = self.end + 1
        self.end = self.start
        while side.is_changed(self.end):
            self.end += 1
        return True

    def previous(self, side: _Side) -> bool:
        if self.start == 0:
            return False
        self.end = self.start - 1
        self.start = self.end
        while side.is_changed(self.start - 1):
            self.start -= 1
        return True

    def slide_down(self, side: _Side) -> bool:
        if self.end < side.nrec and side.classes[self.start] == side.classes[self.end]:
            side.set_changed(self.start, False)
            side.set_changed(self.end, True)
            self.start += 1
            self.end += 1
            while side.is_changed(self.end):
                self.end += 1
            return True
        return False

    def slide_up(self, side: _Side) -> bool:
        if self.start > 0 and side.classes[self.start - 1] == side.classes[self.end - 1]:
            self.start -= 1
            self.end -= 1
            side.set_changed(self.start, True)
            side.set_changed(self.end, False)
            while side.is_changed(self.start - 1):
                self.start -= 1
            return True
        return False


def _compact(side: _Side, other: _Side, indent_heuristic: bool) -> None:  # noqa: C901 - xdiff's loop
    g, go = _Group(side), _Group(other)
    indents: dict[int, int] = {}
    while True:
        if g.end != g.start:
            while True:
                groupsize = g.end - g.start
                end_matching_other = -1
                while g.slide_up(side):
                    go.previous(other)
                earliest_end = g.end
                if go.end > go.start:
                    end_matching_other = g.end
                while g.slide_down(side):
                    go.next(other)
                    if go.end > go.start:
                        end_matching_other = g.end
                if groupsize == g.end - g.start:
                    break
            if g.end == earliest_end:
                pass
            elif end_matching_other != -1:
                while go.end == go.start:
                    g.slide_up(side)
                    go.previous(other)
            elif indent_heuristic:
                shift = max(earliest_end, g.end - groupsize - 1, g.end - INDENT_HEURISTIC_MAX_SLIDING)
                best_shift, best_score = -1, [0, 0]
                while shift <= g.end:
                    score = [0, 0]
                    _score(_measure(side, shift, indents), score)
                    _score(_measure(side, shift - groupsize, indents), score)
                    if best_shift == -1 or _score_cmp(score, best_score) <= 0:
                        best_score, best_shift = score, shift
                    shift += 1
                while g.end > best_shift:
                    g.slide_up(side)
                    go.previous(other)
        if not g.next(side):
            break
        go.next(other)


def changes(old: list[bytes], new: list[bytes], indent_heuristic: bool = True) -> list[Change]:
    """The edit script from `old` to `new`, as xdiff's (forward order)."""
    ids: dict[bytes, int] = {}
    x1 = _Side(old, [ids.setdefault(line, len(ids)) for line in old])
    x2 = _Side(new, [ids.setdefault(line, len(ids)) for line in new])
    _prepare(x1, x2)
    _Myers(x1, x2).run()
    _compact(x1, x2, indent_heuristic)
    _compact(x2, x1, indent_heuristic)
    script: list[Change] = []
    i1, i2 = x1.nrec, x2.nrec
    while i1 >= 0 or i2 >= 0:
        if x1.is_changed(i1 - 1) or x2.is_changed(i2 - 1):
            l1, l2 = i1, i2
            while x1.is_changed(i1 - 1):
                i1 -= 1
            while x2.is_changed(i2 - 1):
                i2 -= 1
            script.append(Change(i1, i2, l1 - i1, l2 - i2))
        i1 -= 1
        i2 -= 1
    script.reverse()
    return script


# -- hunks ------------------------------------------------------------------------------------------
def _func_line(line: bytes) -> bytes | None:
    if line and (chr(line[0]).isalpha() and line[0] < 128 or line[:1] in (b"_", b"$")):
        text = line[:80]
        return text.rstrip(SPACES)
    return None


def _range(start: int, count: int) -> str:
    if count == 1:
        return str(start)
    return "%d,%d" % (start if count else start - 1, count)


def unified(old: list[bytes], new: list[bytes], context: int = 3, inter_hunk: int = 0,
            script: list[Change] | None = None) -> list[bytes]:
    """The hunks (`@@ ... @@` headers and their lines) of a unified diff, as git prints them."""
    if script is None:
        script = changes(old, new)
    out: list[bytes] = []
    max_common = 2 * context + inter_hunk
    func = b""
    funclineprev = -1
    index = 0
    while index < len(script):
        first = index
        last = index
        while last + 1 < len(script):
            nxt, cur = script[last + 1], script[last]
            if nxt.i1 - (cur.i1 + cur.chg1) > max_common:
                break
            last += 1
        xch, xche = script[first], script[last]
        s1 = max(xch.i1 - context, 0)
        s2 = max(xch.i2 - context, 0)
        lctx = min(context, len(old) - (xche.i1 + xche.chg1), len(new) - (xche.i2 + xche.chg2))
        e1 = xche.i1 + xche.chg1 + lctx
        e2 = xche.i2 + xche.chg2 + lctx
        line = s1 - 1
        while line != funclineprev and 0 <= line < len(old):
            found = _func_line(old[line])
            if found is not None:
                func = found
                break
            line -= 1
        funclineprev = s1 - 1
        header = b"@@ -%s +%s @@" % (_range(s1 + 1, e1 - s1).encode(), _range(s2 + 1, e2 - s2).encode())
        if func:
            header += b" " + func[:128 - len(header) - 2]
        out.append(header + b"\n")
        for k in range(s2, xch.i2):
            out.append(b" " + new[k])
        a, bb = xch.i1, xch.i2
        for ch in script[first:last + 1]:
            while a < ch.i1 and bb < ch.i2:
                out.append(b" " + new[bb])
                a += 1
                bb += 1
            out.extend(b"-" + old[k] for k in range(ch.i1, ch.i1 + ch.chg1))
            out.extend(b"+" + new[k] for k in range(ch.i2, ch.i2 + ch.chg2))
            a, bb = ch.i1 + ch.chg1, ch.i2 + ch.chg2
        for k in range(xche.i2 + xche.chg2, e2):
            out.append(b" " + new[k])
        index = last + 1
    return [line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n" for line in out]


def counts(script: list[Change]) -> tuple[int, int]:
    """(lines added, lines removed)."""
    return sum(c.chg2 for c in script), sum(c.chg1 for c in script)


def is_binary(data: bytes) -> bool:
    """git's test: a NUL in the first 8000 bytes."""
    return b"\0" in data[:8000]
