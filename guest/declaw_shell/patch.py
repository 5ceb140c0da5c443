"""`patch`: apply a unified diff (`diff -u`, `git diff`) as GNU patch 2.7 does, with its messages.

Coding agents write a fix as a diff and run `patch -p1 < fix.diff`; the guest had no `patch`.
What is here: unified hunks (git's headers too: new and deleted files), `-p N` (none: the file
names' last parts, as GNU), `-R`, `-N`, `-t`/`-f`, `--dry-run`, `-d DIR`, `-i FILE`, an ORIGFILE
operand, `-s`, `-b` and GNU's backup when a hunk does not match exactly (`FILE.orig`;
`--no-backup-if-mismatch`), `-F N` (fuzz, 2 by default), `-E`, and "\\ No newline at end of
file". Each hunk is looked for where its header says, shifted by the offset of the hunks before
it, then one line further each way (after, then before; never before the previous hunk's end),
with 0, 1, then 2 lines of its outer context ignored, as GNU's locate_hunk does. A hunk that fits
nowhere is saved to `FILE.rej`. A patch whose first hunk fits only reversed is "Reversed (or
previously applied)": skipped (`-N`, or no terminal to ask), reversed (`-t`), or tried as is
(`-f`). Not here: context diffs (`diff -c`), ed scripts, `--merge`, renames and modes of git's
headers. Exit status as GNU's: 0 applied, 1 some hunks failed, 2 trouble.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

HUNK_HEAD = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
NO_NEWLINE = "\\ No newline at end of file"
DEV_NULL = "/dev/null"
MAX_PATCH = 64 << 20  # a patch or target file larger than this is refused (bounded memory)


class Trouble(Exception):
    """GNU's "patch: **** ..." errors: exit status 2."""


class Usage(Exception):
    """A bad option: GNU's "patch: ..." and its --help hint, exit status 2."""


@dataclass
class Hunk:
    old_start: int
    new_start: int
    old_count: int
    new_count: int
    lines: list[tuple[str, str]]  # (" ", "-" or "+", the line with its newline if it has one)
    head: str  # the @@ line as written (for FILE.rej)
    text: list[str]  # the hunk's lines as written (for FILE.rej)

    def sides(self) -> tuple[list[str], list[str]]:
        old = [text for tag, text in self.lines if tag != "+"]
        new = [text for tag, text in self.lines if tag != "-"]
        return old, new

    def reversed(self) -> Hunk:
        swap = {"-": "+", "+": "-", " ": " "}
        return Hunk(self.new_start, self.old_start, self.new_count, self.old_count,
                    [(swap[tag], text) for tag, text in self.lines], self.head, self.text)

    def rejected(self, offset: int) -> str:
        """The hunk as FILE.rej holds it: its header moved by the offset the hunks before it had."""
        def side(start: int, count: int) -> str:
            return "%d" % (start + offset) if count == 1 else "%d,%d" % (start + offset, count)

        return "@@ -%s +%s @@\n%s" % (side(self.old_start, self.old_count), side(self.new_start, self.new_count),
                                     "".join(self.text[1:]))

    def context(self) -> tuple[int, int]:
        """Lines of context before the first change and after the last."""
        tags = [tag for tag, _ in self.lines]
        before = next((i for i, tag in enumerate(tags) if tag != " "), len(tags))
        after = next((i for i, tag in enumerate(reversed(tags)) if tag != " "), len(tags))
        return before, after


@dataclass
class FilePatch:
    old: str
    new: str
    header_line: int  # the line the file's header ends on (GNU's "at input line N")
    header: list[str]  # the lines leading up to its hunks
    hunks: list[Hunk] = field(default_factory=list)
    deleted: bool = False
    created: bool = False
    error: str = ""  # a malformed hunk: reported after the file's "patching file" line


def _name(text: str) -> str:
    """A ---/+++ line's file name: up to a tab (the timestamp), unquoted git-style."""
    name = text.split("\t", 1)[0].rstrip("\r\n")
    if " " in name and re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", name):
        name = name[:re.search(r" \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", name).start()]  # type: ignore[union-attr]
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
    return name


def parse(text: str) -> list[FilePatch]:
    """The file patches of a unified diff; Trouble for a malformed hunk or no hunk at all."""
    lines = text.splitlines(keepends=True)
    patches: list[FilePatch] = []
    leading: list[str] = []
    git: dict[str, bool] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            leading, git = [line], {}
        elif line.startswith("new file mode"):
            git["created"] = True
            leading.append(line)
        elif line.startswith("deleted file mode"):
            git["deleted"] = True
            leading.append(line)
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            header = [*leading, line, lines[i + 1]]
            patch = FilePatch(_name(line[4:]), _name(lines[i + 1][4:]), i + 3, header,
                              deleted=git.get("deleted", False), created=git.get("created", False))
            i += 2
            while i < len(lines) and lines[i].startswith("@@"):
                try:
                    hunk, i = _hunk(lines, i)
                except Trouble as trouble:  # GNU reports it once the file is found: after "patching file"
                    patch.error = str(trouble)
                    patches.append(patch)
                    return patches
                patch.hunks.append(hunk)
            patch.created = patch.created or patch.old == DEV_NULL
            patch.deleted = patch.deleted or patch.new == DEV_NULL
            patches.append(patch)
            leading, git = [], {}
            continue
        else:
            leading.append(line)
        i += 1
    if not patches and text.strip():
        raise Trouble("Only garbage was found in the patch input.")
    return patches


def _hunk(lines: list[str], i: int) -> tuple[Hunk, int]:
    match = HUNK_HEAD.match(lines[i])
    if match is None:
        raise Trouble("malformed patch at line %d: %s" % (i + 1, lines[i]))
    old_start, old_count = int(match[1]), int(match[2]) if match[2] is not None else 1
    new_start, new_count = int(match[3]), int(match[4]) if match[4] is not None else 1
    head, body, text = lines[i], [], [lines[i]]
    i += 1
    old_left, new_left = old_count, new_count
    while old_left > 0 or new_left > 0:
        if i >= len(lines):
            raise Trouble("malformed patch at line %d: " % (i + 1))
        line = lines[i]
        tag, content = (line[0], line[1:]) if line not in ("\n", "\r\n") else (" ", line)
        if tag not in " -+" or (tag in " -" and old_left <= 0) or (tag in " +" and new_left <= 0):
            raise Trouble("malformed patch at line %d: %s" % (i + 1, line))
        body.append((tag, content))
        text.append(line)
        old_left -= tag in " -"
        new_left -= tag in " +"
        i += 1
        if i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
            body[-1] = (tag, content.rstrip("\n").removesuffix("\r") if content.endswith("\r\n")
                        else content.rstrip("\n"))
            text.append(lines[i])
            i += 1
    return Hunk(old_start, new_start, old_count, new_count, body, head, text), i


def strip(name: str, level: int | None) -> str | None:
    """GNU's -p: `level` leading components off (a run of slashes is one boundary); None: the
    last part only; None when the name has too few components, or is /dev/null."""
    if name == DEV_NULL:
        return None
    if level is None:
        return name.rsplit("/", 1)[-1] or None
    parts = re.split(r"/+", name, maxsplit=level) if level else [name]
    return parts[level] if len(parts) > level and parts[level] else (name if level == 0 else None)


def _matches(lines: list[str], at: int, pattern: list[str]) -> bool:
    return at >= 0 and at + len(pattern) <= len(lines) and lines[at:at + len(pattern)] == pattern


def locate(lines: list[str], hunk: Hunk, offset: int, frozen: int, fuzz: int) -> tuple[int, int] | None:
    """GNU's locate_hunk at one fuzz level: (where the hunk's first old line is, 0-based; the
    offset from its header) or None. `offset` is the offset the hunks before it had, `frozen`
    how many lines they used up. A hunk with less context before its change than after can only
    match at the file's start (its diff was cut short there), and one with less after at its end;
    fuzz ignores that many outer context lines, counted from the side with the most context."""
    old, _ = hunk.sides()
    before, after = hunk.context()
    context = max(before, after)
    first = hunk.old_start if old else hunk.old_start + 1  # 1-based, as GNU counts
    guess = first + offset
    count = len(old)
    top, bottom = fuzz + before - context, fuzz + after - context
    max_pos = len(lines) - guess - count + 1
    max_neg = guess - frozen - 1
    if not count:
        return (guess - 1, offset) if 0 <= guess - 1 <= len(lines) else None
    max_neg = min(max_neg, guess - 1)

    def fits(at: int, skip_top: int, skip_bottom: int) -> bool:
        index = at - 1  # 0-based
        pattern = old[skip_top:count - skip_bottom]
        return index >= 0 and _matches(lines, index + skip_top, pattern)

    if top < 0 and hunk.old_start <= 1:  # only at the file's start
        if bottom < 0 and (count != len(lines) or before < frozen):
            return None
        shift = 1 - guess
        if frozen <= before and shift <= max_pos and fits(guess + shift, 0, max(bottom, 0)):
            return guess + shift - 1, offset + shift
        return None
    top = max(top, 0)
    if bottom < 0:  # only at the file's end
        shift = guess - (len(lines) - count + 1)
        if shift <= max_neg and fits(guess - shift, top, 0):
            return guess - shift - 1, offset - shift
        return None
    for step in range(max(max_pos, max_neg, 0) + 1):
        if step <= max_pos and fits(guess + step, top, bottom):
            return guess + step - 1, offset + step
        if 0 < step <= max_neg and fits(guess - step, top, bottom):
            return guess - step - 1, offset - step
    return None


def max_fuzz_of(hunk: Hunk, limit: int) -> int:
    """GNU: fuzz goes no further than the hunk's larger context."""
    return min(limit, max(hunk.context()))


def _plural(n: int) -> str:
    return "hunk" if n == 1 else "hunks"


@dataclass
class Options:
    strip: int | None = None
    directory: str | None = None
    input: str | None = None
    reject: str | None = None
    output: str | None = None
    fuzz: int = 2
    reverse: bool = False
    forward: bool = False
    batch: bool = False
    force: bool = False
    dry_run: bool = False
    silent: bool = False
    backup: bool = False
    backup_if_mismatch: bool = True
    remove_empty: bool = False

    def take(self, name: str, value: str) -> None:
        if name in ("strip", "fuzz"):
            if not value.isdigit():
                raise Trouble("%s %s is not a number" % ("strip count" if name == "strip" else "fuzz factor", value))
            setattr(self, name, int(value))
        elif name in ("directory", "input", "reject", "output"):
            setattr(self, name, value)

    def flag(self, name: str) -> None:
        if name == "no_backup_if_mismatch":
            self.backup_if_mismatch = False
        elif name:
            setattr(self, name, True)


SHORT_VALUES = {"p": "strip", "d": "directory", "i": "input", "F": "fuzz", "r": "reject", "o": "output", "z": "suffix",
                "x": "debug", "D": "ifdef", "V": "version_control", "B": "prefix", "Y": "prefix", "g": "get"}
LONG_VALUES = {"--strip": "strip", "--directory": "directory", "--input": "input", "--fuzz": "fuzz",
               "--reject-file": "reject", "--output": "output", "--suffix": "suffix"}
SHORT_FLAGS = {"R": "reverse", "N": "forward", "t": "batch", "f": "force", "s": "silent", "b": "backup",
               "E": "remove_empty", "u": "", "l": ""}
LONG_FLAGS = {"--reverse": "reverse", "--forward": "forward", "--batch": "batch", "--force": "force",
              "--dry-run": "dry_run", "--silent": "silent", "--quiet": "silent", "--backup": "backup",
              "--remove-empty-files": "remove_empty", "--unified": "", "--binary": "", "--verbose": "",
              "--posix": "", "--no-backup-if-mismatch": "no_backup_if_mismatch",
              "--backup-if-mismatch": "backup_if_mismatch"}


def parse_options(args: list[str]) -> tuple[Options, list[str]]:
    """GNU patch's options (the ones supported here) and the operands."""
    opts = Options()
    operands: list[str] = []
    while args:
        arg = args.pop(0)
        if arg == "--":
            operands.extend(args)
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name in LONG_VALUES:
                if not eq:
                    if not args:
                        raise Usage("option '%s' requires an argument" % name)
                    value = args.pop(0)
                opts.take(LONG_VALUES[name], value)
            elif arg in LONG_FLAGS:
                opts.flag(LONG_FLAGS[arg])
            else:
                raise Usage("unrecognized option '%s'" % arg)
        elif arg.startswith("-") and len(arg) > 1:
            _short(arg[1:], args, opts)
        else:
            operands.append(arg)
    return opts, operands


def _short(letters: str, args: list[str], opts: Options) -> None:
    while letters:
        letter, letters = letters[0], letters[1:]
        if letter in SHORT_VALUES:
            if not letters:
                if not args:
                    raise Usage("option requires an argument -- '%s'" % letter)
                letters = args.pop(0)
            opts.take(SHORT_VALUES[letter], letters)
            return
        if letter not in SHORT_FLAGS:
            raise Usage("invalid option -- '%s'" % letter)
        opts.flag(SHORT_FLAGS[letter])


class PatchCommand(Command):
    """patch [OPTIONS] [ORIGFILE [PATCHFILE]] (module docstring)."""

    name = "patch"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.TEXT})
    summary = "apply a diff file to an original"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        out: list[str] = []
        try:
            status = self._run(invocation, out)
        except Trouble as trouble:
            state.write_error("patch: **** %s\n" % trouble)
            status = 2
        except Usage as usage:
            state.write_error("patch: %s\npatch: Try 'patch --help' for more information.\n" % usage)
            status = 2
        return CommandResult(stdout="".join(out), exit_code=status)

    def _run(self, invocation: Invocation, out: list[str]) -> int:
        state = invocation.state
        opts, operands = parse_options(list(invocation.arguments))
        if len(operands) > 2:
            raise Trouble("extra operand '%s'" % operands[2])
        if len(operands) == 2:
            opts.input = operands[1]
        base = str(state.resolve_path(opts.directory)) if opts.directory else str(state.cwd)
        if opts.directory and not os.path.isdir(base):
            raise Trouble("Can't change to directory %s : No such file or directory" % opts.directory)

        def at(path: str) -> str:
            return path if path.startswith("/") else os.path.join(base, path)

        if opts.input is not None and opts.input != "-":
            try:
                with open(at(opts.input), encoding="utf-8", errors="surrogateescape", newline="") as handle:
                    text = handle.read(MAX_PATCH + 1)
            except OSError as exc:
                raise Trouble("Can't open patch file %s : %s" % (opts.input, exc.strerror)) from None
        else:
            text = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
        if len(text) > MAX_PATCH:
            raise Trouble("patch input larger than %d bytes" % MAX_PATCH)
        status = 0
        for patch in parse(text):
            status = max(status, self._apply(patch, out, at, operands[0] if operands else None, opts))
        return status

    def _apply(self, patch: FilePatch, out: list[str], at: Any,  # noqa: C901 - GNU's cases, in its order
               target_override: str | None, opts: Options) -> int:
        strip_level, reverse, dry_run, silent = opts.strip, opts.reverse, opts.dry_run, opts.silent
        reject_name = opts.reject
        say = (lambda text: None) if silent else out.append
        hunks = [hunk.reversed() for hunk in patch.hunks] if reverse else list(patch.hunks)
        creating = patch.deleted if reverse else patch.created
        deleting = patch.created if reverse else patch.deleted
        old_name, new_name = strip(patch.old, strip_level), strip(patch.new, strip_level)
        target: str | None
        if target_override is not None:
            target = target_override
        elif patch.old == DEV_NULL and new_name:
            target = new_name
        else:
            names = [n for n in (old_name, new_name) if n]
            target = next((n for n in names if os.path.exists(at(n))), None) or (
                (new_name or old_name) if creating else None)
        if target is None and deleting and old_name:
            say("The next patch would delete the file %s,\nwhich does not exist!  Assume -R? [n] \n"
                "Apply anyway? [n] \nSkipping patch.\n%d out of %d %s ignored\n"
                % (old_name, len(hunks), len(hunks), _plural(len(hunks))))
            return 1
        if target is None or (not os.path.exists(at(target)) and not creating):
            hint = "Perhaps you should have used the -p or --strip option?" if strip_level is None else \
                "Perhaps you used the wrong -p or --strip option?"
            out.append("can't find file to patch at input line %d\n%s\nThe text leading up to this was:\n"
                       "--------------------------\n%s--------------------------\nFile to patch: \n"
                       "Skip this patch? [y] \nSkipping patch.\n%d out of %d %s ignored\n"
                       % (patch.header_line, hint, "".join("|" + line if line.endswith("\n") else "|" + line + "\n"
                                                          for line in patch.header),
                          len(hunks), len(hunks), _plural(len(hunks))))
            return 1
        path = at(target)
        original = ""
        if os.path.exists(path):
            if os.path.getsize(path) > MAX_PATCH:
                raise Trouble("%s is larger than %d bytes" % (target, MAX_PATCH))
            with open(path, encoding="utf-8", errors="surrogateescape", newline="") as handle:
                original = handle.read()
        lines = original.splitlines(keepends=True)
        say(("checking file %s\n" if dry_run else "patching file %s\n") % target)
        if patch.error:
            raise Trouble(patch.error)
        result, failed, exact, reports, status = self._hunks(lines, hunks, opts.fuzz, reverse, opts.forward,
                                                              opts.batch, opts.force, say)
        if status == "ignored":
            count = len(hunks)
            rej = reject_name or target + ".rej"
            say("%d out of %d %s ignored%s\n" % (count, count, _plural(count),
                                                 "" if dry_run else " -- saving rejects to file " + rej))
            if not dry_run:
                self._write_rejects(at(rej), target, [(hunk, 0) for hunk in patch.hunks])
            return 1
        out.extend(reports if not silent else [])
        if failed:
            rej = reject_name or target + ".rej"
            say("%d out of %d %s FAILED%s\n" % (len(failed), len(hunks), _plural(len(hunks)),
                                                "" if dry_run else " -- saving rejects to file " + rej))
        if dry_run:
            return 1 if failed else 0
        if opts.backup or (opts.backup_if_mismatch and not exact and os.path.exists(path)):
            with open(path + ".orig", "w", encoding="utf-8", errors="surrogateescape", newline="") as handle:
                handle.write(original)
        text = "".join(result)
        if opts.output:
            path = at(opts.output)
        if (deleting or opts.remove_empty) and not text and not opts.output:
            if os.path.exists(path):
                os.remove(path)
        else:
            parent = os.path.dirname(path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as handle:
                handle.write(text)
        if failed:
            self._write_rejects(at(reject_name or target + ".rej"), target,
                                [(hunks[i], offset) for i, offset in failed])
            return 1
        return 0

    def _hunks(self, lines: list[str], hunks: list[Hunk], max_fuzz: int, reverse_given: bool, forward: bool,
               batch: bool, force: bool, say: Any) -> tuple[list[str], list[tuple[int, int]], bool, list[str], str]:
        """Apply `hunks` to `lines`: (result, failed hunks' indices, all exact, report lines, "" or
        "ignored")."""
        result = list(lines)
        failed: list[tuple[int, int]] = []  # (hunk index, the offset then)
        reports: list[str] = []
        exact = True
        offset = frozen = 0
        delta = 0  # lines the applied hunks added to result (result index = original index + delta)
        for number, hunk in enumerate(hunks, 1):
            found = fuzz = None
            detect = number == 1 and not force and not reverse_given
            for fuzz in range(max_fuzz_of(hunk, max_fuzz) + 1):
                found = locate(lines, hunk, offset, frozen, fuzz)
                if found is not None:
                    break
                if detect and locate(lines, hunk.reversed(), offset, frozen, fuzz) is not None:
                    if forward:
                        say("Reversed (or previously applied) patch detected!  Skipping patch.\n")
                        return lines, [], True, [], "ignored"
                    if not batch:
                        say("Reversed (or previously applied) patch detected!  Assume -R? [n] \n"
                            "Apply anyway? [n] \nSkipping patch.\n")
                        return lines, [], True, [], "ignored"
                    say("Reversed (or previously applied) patch detected!  Assuming -R.\n")
                    result, failed, _, reports, status = self._hunks(
                        lines, [h.reversed() for h in hunks], max_fuzz, True, forward, True, True, say)
                    return result, failed, False, reports, status  # not as written: FILE.orig is kept
            if found is None or fuzz is None:
                failed.append((number - 1, offset))
                exact = False
                reports.append("Hunk #%d FAILED at %d.\n" % (number, hunk.old_start + offset))
                continue
            where, offset = found
            old, new = hunk.sides()
            before, after = hunk.context()
            context = max(before, after)
            top = max(fuzz + before - context, 0)
            bottom = max(fuzz + after - context, 0)
            old_part = old[top:len(old) - bottom]
            new_part = new[top:len(new) - bottom]
            start = where + top + delta
            result[start:start + len(old_part)] = new_part
            delta += len(new_part) - len(old_part)
            frozen = where + top + len(old_part)
            if offset or fuzz:
                exact = False
                text = "Hunk #%d succeeded at %d" % (number, where + 1 + delta - (len(new_part) - len(old_part)))
                if fuzz:
                    text += " with fuzz %d" % fuzz
                if offset:
                    text += " (offset %d line%s)" % (offset, "" if offset == 1 else "s")
                reports.append(text + ".\n")
        return result, failed, exact, reports, ""

    @staticmethod
    def _write_rejects(path: str, target: str, hunks: list[tuple[Hunk, int]]) -> None:
        with open(path, "w", encoding="utf-8", errors="surrogateescape", newline="") as handle:
            handle.write("--- %s\n+++ %s\n" % (target, target))
            for hunk, offset in hunks:
                handle.write(hunk.rejected(offset))
