"""`free`, `df`, `ps`, `top -b`, `uptime`, `lscpu`, `kill`, `pgrep` and `pkill`: what agents run to look at
the machine and its processes, answered from the sandbox rather than from a kernel the guest does
not have (`kill PID` and `pkill` end another command of the sandbox through the door's `kill`).

The guest has no /proc. The host answers the door's `sysinfo` op (declaw_wasm/_local/doors.py)
with the sandbox's memory limit and its guests' memory (the figures `get_metrics()` gives), its
running commands (what `commands.list()` gives) and its uptime; these commands print that in
the layout of procps-ng's, so scripts that cut columns find them where they expect. The command
lines of the sandbox are `bash -l -c LINE` (as E2B runs them), so `ps aux | grep server` finds a
background `python3 server.py`; the asking line's background jobs (`cmd &`) are listed too.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind
from bash_purepython.command.kill import KillCommand as LibraryKill
from bash_purepython.shell_state import JobStatus

from . import door

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from .shells import GuestState

    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

ARGS_ONLY = frozenset({InputKind.ARGUMENTS})
TEXT_OUT = frozenset({OutputKind.TEXT})
USER = "user"
VERSION_NOTE = "(declaw-wasm: the sandbox's own implementation, from the sandbox's limits)"


def _usage(state: GuestState, name: str, text: str) -> CommandResult:
    state.write_error("%s: %s\nTry '%s --help' for more information.\n" % (name, text, name))
    return CommandResult(stdout="", exit_code=1)


# -- free --------------------------------------------------------------------------------------

FREE_UNITS = {"-b": 1, "--bytes": 1, "-k": 1 << 10, "--kibi": 1 << 10, "-m": 1 << 20, "--mebi": 1 << 20,
              "-g": 1 << 30, "--gibi": 1 << 30, "--tebi": 1 << 40, "--kilo": 1000, "--mega": 10 ** 6,
              "--giga": 10 ** 9, "--tera": 10 ** 12}
FREE_HELP = """
Usage:
 free [options]

Options:
 -b, --bytes         show output in bytes
 -k, --kibi          show output in kibibytes
 -m, --mebi          show output in mebibytes
 -g, --gibi          show output in gibibytes
 -h, --human         show human-readable output
     --si            use powers of 1000 not 1024
 -t, --total         show total for RAM + swap
 -w, --wide          wide output (accepted)
     --help     display this help and exit
 -V, --version  output version information and exit

Memory is the sandbox's: total is its memory limit, used what its running programs take.
"""


def human_size(value: float, si: bool = False) -> str:
    """procps's short form: `0B`, `8.6Mi`, `23Gi` (`--si`: `8.6M`)."""
    base = 1000 if si else 1024
    if value < base:
        return "%dB" % value
    scaled = float(value)
    for unit in "KMGTPE":
        scaled /= base
        suffix = unit if si else unit + "i"
        if scaled < 10:
            return "%.1f%s" % (scaled, suffix)
        if scaled < base:
            return "%d%s" % (int(scaled), suffix)
    return "%d%s" % (int(scaled), "E" if si else "Ei")


class FreeCommand(Command):
    """free [-b|-k|-m|-g|-h] [--si] [-t] [-w]: the sandbox's memory in procps-ng's layout."""

    name = "free"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "display the sandbox's memory"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        unit, human, si, total_line = 1 << 10, False, False, False
        for arg in invocation.arguments:
            if arg == "--help":
                return CommandResult(stdout=FREE_HELP, exit_code=0)
            if arg in ("-V", "--version"):
                return CommandResult(stdout="free from procps-ng 4.0.2 %s\n" % VERSION_NOTE, exit_code=0)
            if arg in FREE_UNITS:
                unit = FREE_UNITS[arg]
            elif arg in ("-h", "--human"):
                human = True
            elif arg == "--si":
                si = True
            elif arg in ("-t", "--total"):
                total_line = True
            elif arg in ("-w", "--wide", "-l", "--lohi", "-v", "--committed"):
                pass
            elif arg.startswith("-") and len(arg) > 2 and not arg.startswith("--") \
                    and all(c in "bkmghtwlv" for c in arg[1:]):
                for c in arg[1:]:
                    unit = FREE_UNITS.get("-" + c, unit)
                    human = human or c == "h"
                    total_line = total_line or c == "t"
            else:
                return _usage(state, "free", "invalid option -- '%s'" % arg.lstrip("-")[:1]
                              if arg.startswith("-") else "extra operand '%s'" % arg)
        if si and unit in (1 << 10, 1 << 20, 1 << 30, 1 << 40):
            unit = {1 << 10: 1000, 1 << 20: 10 ** 6, 1 << 30: 10 ** 9, 1 << 40: 10 ** 12}[unit]
        info = door.call("sysinfo")
        total = int(info["mem_total"])
        used = min(int(info["mem_used"]), total)
        free = total - used

        def show(value: int) -> str:
            return human_size(value, si) if human else str(value // unit)

        head = "%-8s %11s %11s %11s %11s %11s %11s\n" % ("", "total", "used", "free", "shared",
                                                      "buff/cache", "available")
        mem = "%-8s %11s %11s %11s %11s %11s %11s\n" % ("Mem:", show(total), show(used), show(free),
                                                     show(0), show(0), show(free))
        swap = "%-8s %11s %11s %11s\n" % ("Swap:", show(0), show(0), show(0))
        lines = head + mem + swap
        if total_line:
            lines += "%-8s %11s %11s %11s\n" % ("Total:", show(total), show(used), show(free))
        return CommandResult(stdout=lines, exit_code=0)


# -- ps ----------------------------------------------------------------------------------------

PS_HELP = """
Usage:
 ps [options]

 ps, ps -e, ps -A, ps ax   the sandbox's processes (its running commands)
 ps aux, ps u              user-oriented columns
 ps -ef, ps -f             full-format columns
 -p PID[,PID...]           only these pids
 --help, -V, --version

Processes are the sandbox's command lines (`bash -l -c LINE`, as commands.list() shows them)
and the background jobs (`cmd &`) of the line that runs ps.
"""


def _clock(seconds: float, full: bool) -> str:
    seconds = int(seconds)
    if full:
        return "%02d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)
    return "%d:%02d" % (seconds // 60, seconds % 60)


def _rows(info: dict[str, Any], jobs: Iterable[Any]) -> list[dict[str, Any]]:
    """One dict per process: the sandbox's commands, then the asking line's running jobs."""
    now = time.time()
    mem_total = max(int(info["mem_total"]), 1)
    rows = []
    for proc in info["processes"]:
        pid = int(proc["pid"])
        args = [str(a) for a in proc.get("args") or []]
        comm = "bash"
        if proc.get("tty"):
            command = "/bin/bash " + " ".join(args)
        elif proc.get("spawned"):  # a line's `python3 ... &` job's program: its own argv
            command, comm = str(proc.get("cmd", "")), "python3"
        else:
            command = "/bin/bash -l -c " + str(proc.get("cmd", ""))
        started = float(proc.get("started") or now)
        cpu = float(proc.get("cpu") or 0.0)
        memory = int(proc.get("memory") or 0)
        rows.append({"pid": pid, "ppid": 0, "tty": "pts/0" if proc.get("tty") else "?",
                     "stat": "R" if pid == info["pid"] else "S", "started": started, "cpu": cpu,
                     "memory": memory, "pcpu": 100.0 * cpu / max(now - started, 1e-3),
                     "pmem": 100.0 * memory / mem_total, "command": command.replace("\n", " "),
                     "comm": comm})
    for job in jobs:
        text = str(job.command_text).replace("\n", " ")
        rows.append({"pid": int(job.pid), "ppid": int(info["pid"]), "tty": "?", "stat": "S",
                     "started": now, "cpu": 0.0, "memory": 0, "pcpu": 0.0, "pmem": 0.0,
                     "command": text, "comm": (text.split() or ["-"])[0].rsplit("/", 1)[-1][:15]})
    return rows


class PsCommand(Command):
    """ps [aux | -ef | -e | -f | -p PID]: the sandbox's processes in procps's columns."""

    name = "ps"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "report the sandbox's processes"

    def run(self, invocation: Invocation) -> CommandResult:  # noqa: C901 (ps's option grammar, one flat loop)
        state = invocation.state
        args = list(invocation.arguments)
        user, full, only = False, False, None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--help":
                return CommandResult(stdout=PS_HELP, exit_code=0)
            if arg in ("-V", "V", "--version"):
                return CommandResult(stdout="ps from procps-ng 4.0.2 %s\n" % VERSION_NOTE, exit_code=0)
            if arg in ("-p", "p", "--pid") or (arg.startswith("-p") and len(arg) > 2):
                value = arg[2:] if arg.startswith("-p") and len(arg) > 2 else None
                if value is None:
                    i += 1
                    if i >= len(args):
                        return _usage(state, "ps", "option requires an argument -- 'p'")
                    value = args[i]
                try:
                    only = {int(p) for p in value.replace(",", " ").split()}
                except ValueError:
                    return _usage(state, "ps", "process ID list syntax error")
            elif arg.startswith("--"):
                pass  # --sort, --forest...: accepted, the layout stays
            elif arg.startswith("-"):
                full = full or "f" in arg or "F" in arg
            else:  # BSD style: aux, ax, u, ...
                user = user or "u" in arg
            i += 1
        jobs = [job for job in state.job_table.running()] if hasattr(state, "job_table") else []
        rows = _rows(door.call("sysinfo"), jobs)
        if only is not None:
            rows = [row for row in rows if row["pid"] in only]
        if user:
            lines = ["%-8s %5s %4s %4s %6s %5s %-8s %-4s %5s %6s %s\n" % (
                "USER", "PID", "%CPU", "%MEM", "VSZ", "RSS", "TTY", "STAT", "START", "TIME", "COMMAND")]
            for r in rows:
                kib = r["memory"] // 1024
                lines.append("%-8s %5d %4.1f %4.1f %6d %5d %-8s %-4s %5s %6s %s\n" % (
                    USER, r["pid"], r["pcpu"], r["pmem"], kib, kib, r["tty"], r["stat"],
                    time.strftime("%H:%M", time.localtime(r["started"])), _clock(r["cpu"], False),
                    r["command"]))
        elif full:
            lines = ["%-8s %5s %5s %2s %5s %-8s %8s %s\n" % ("UID", "PID", "PPID", "C", "STIME", "TTY", "TIME", "CMD")]
            for r in rows:
                lines.append("%-8s %5d %5d %2d %5s %-8s %8s %s\n" % (
                    USER, r["pid"], r["ppid"], min(int(r["pcpu"]), 99),
                    time.strftime("%H:%M", time.localtime(r["started"])), r["tty"], _clock(r["cpu"], True),
                    r["command"]))
        else:
            lines = ["%5s %-8s %8s %s\n" % ("PID", "TTY", "TIME", "CMD")]
            for r in rows:
                lines.append("%5d %-8s %8s %s\n" % (r["pid"], r["tty"], _clock(r["cpu"], True), r["comm"]))
        return CommandResult(stdout="".join(lines), exit_code=0 if only is None or len(lines) > 1 else 1)


# -- uptime, lscpu -----------------------------------------------------------------------------

def _since_text(seconds: float) -> str:
    minutes = int(seconds) // 60
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    text = "%d day%s, " % (days, "" if days == 1 else "s") if days else ""
    return text + ("%2d:%02d" % (hours, minutes) if hours else "%d min" % minutes)


def _pretty_since(seconds: float) -> str:
    minutes = int(seconds) // 60
    parts: list[str] = []
    for size, word in ((1440, "day"), (60, "hour"), (1, "minute")):
        count, minutes = divmod(minutes, size)
        if count or (word == "minute" and not parts):
            parts.append("%d %s%s" % (count, word, "" if count == 1 else "s"))
    return "up " + ", ".join(parts)


class UptimeCommand(Command):
    """uptime [-p|-s]: how long the sandbox has run (load: its running commands)."""

    name = "uptime"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "tell how long the sandbox has been running"

    def run(self, invocation: Invocation) -> CommandResult:
        args = list(invocation.arguments)
        if "--help" in args or "-h" in args:
            return CommandResult(stdout="Usage:\n uptime [-p|--pretty] [-s|--since] [-V]\n", exit_code=0)
        if "-V" in args or "--version" in args:
            return CommandResult(stdout="uptime from procps-ng 4.0.2 %s\n" % VERSION_NOTE, exit_code=0)
        for arg in args:
            if arg not in ("-p", "--pretty", "-s", "--since"):
                return _usage(invocation.state, "uptime", "invalid option -- '%s'" % arg.lstrip("-")[:1])
        info = door.call("sysinfo")
        up = float(info["uptime"])
        now = time.time()
        if "-s" in args or "--since" in args:
            return CommandResult(stdout=time.strftime("%Y-%m-%d %H:%M:%S\n", time.localtime(now - up)),
                                 exit_code=0)
        if "-p" in args or "--pretty" in args:
            return CommandResult(stdout=_pretty_since(up) + "\n", exit_code=0)
        load = "%.2f" % float(len(info["processes"]))
        return CommandResult(stdout=" %s up %s,  1 user,  load average: %s, %s, %s\n" % (
            time.strftime("%H:%M:%S", time.localtime(now)), _since_text(up), load, load, load), exit_code=0)


# -- df ----------------------------------------------------------------------------------------

DF_HELP = """Usage: df [OPTION]... [FILE]...
Show information about the file system on which each FILE resides,
or all file systems by default.

  -h, --human-readable  print sizes in powers of 1024 (e.g., 1023M)
  -H, --si              print sizes in powers of 1000 (e.g., 1.1G)
  -i, --inodes          list inode information instead of block usage
  -k                    like --block-size=1K
  -m                    like --block-size=1M
  -P, --portability     use the POSIX output format
  -T, --print-type      print file system type
      --total           produce a grand total
      --help        display this help and exit
      --version     output version information and exit

The sandbox has one file system, /: its size is the disk quota (Limits.disk_bytes, disk_files),
its use what /home/user and /tmp hold.
"""
DF_FLAGS = {"-h": "human", "--human-readable": "human", "-H": "si", "--si": "si", "-i": "inodes",
            "--inodes": "inodes", "-k": "k", "-m": "m", "-P": "posix", "--portability": "posix",
            "-T": "type", "--print-type": "type", "--total": "total", "-a": "all", "--all": "all",
            "-l": "local", "--local": "local"}


def df_size(value: int, base: int) -> str:
    """coreutils' -h/-H form: rounded up, one decimal under 10 (`1.0G`, `512M`, `0`)."""
    if value < base:
        return "%d" % value
    scaled = float(value)
    for unit in "KMGTPE":
        scaled /= base
        if scaled < base or unit == "E":
            break
    units = "KMGTPE"
    index = units.index(unit)
    rounded = math.ceil(scaled * 10 - 1e-9) / 10 if scaled < 10 else float(math.ceil(scaled - 1e-9))
    if rounded >= base and index + 1 < len(units):  # 1023.99M rounds up to 1.0G, as coreutils'
        index, rounded = index + 1, 1.0
    suffix = "k" if base == 1000 and index == 0 else units[index]
    return ("%.1f%s" if rounded < 10 else "%d%s") % (rounded, suffix)


class DfCommand(Command):
    """df [-hHikmPT] [--total] [FILE...]: the sandbox's one file system, sized by its disk quota
    and filled by what its writable folders hold (the door's `disk`, as os.statvfs)."""

    name = "df"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "report the sandbox's disk space"

    def run(self, invocation: Invocation) -> CommandResult:  # noqa: C901 (df's options, one flat loop)
        state = invocation.state
        flags: set[str] = set()
        paths: list[str] = []
        args = list(invocation.arguments)
        while args:
            arg = args.pop(0)
            if arg == "--help":
                return CommandResult(stdout=DF_HELP, exit_code=0)
            if arg == "--version":
                return CommandResult(stdout="df (GNU coreutils) 9.1 %s\n" % VERSION_NOTE, exit_code=0)
            if arg == "--":
                paths.extend(args)
                break
            if arg in DF_FLAGS:
                flags.add(DF_FLAGS[arg])
            elif arg.startswith("--"):
                return _usage(state, "df", "unrecognized option '%s'" % arg)
            elif arg.startswith("-") and len(arg) > 1:
                for letter in arg[1:]:
                    if "-" + letter not in DF_FLAGS:
                        return _usage(state, "df", "invalid option -- '%s'" % letter)
                    flags.add(DF_FLAGS["-" + letter])
            else:
                paths.append(arg)
        status, shown = 0, 0
        for path in paths:
            try:
                os.stat(state.resolve_path(path))
            except OSError as exc:
                state.write_error("df: %s: %s\n" % (path, exc.strerror or "cannot access"))
                status = 1
            else:
                shown += 1
        if paths and not shown:
            return CommandResult(stdout="", exit_code=status)
        st = os.statvfs("/")
        rows = max(shown, 1)
        return CommandResult(stdout=_df_table(st, flags, rows), exit_code=status)


def _df_table(st: os.statvfs_result, flags: set[str], rows: int) -> str:
    """The header and `rows` lines for the one file system (and a total line for --total)."""
    if "inodes" in flags:
        total, free = st.f_files, st.f_ffree
        unit = 1
        header = ["Inodes", "IUsed", "IFree", "IUse%"]
    else:
        total, free = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        unit = 1 << 20 if "m" in flags else 1024
        header = ["Size", "Used", "Avail", "Use%"] if flags & {"human", "si"} else \
            ["%s-blocks" % ("1M" if unit == 1 << 20 else "1024" if "posix" in flags else "1K"), "Used",
             "Available", "Capacity" if "posix" in flags else "Use%"]
    used = total - free

    def show(value: int) -> str:
        if "inodes" in flags:
            return str(value)
        if "human" in flags:
            return df_size(value, 1024)
        if "si" in flags:
            return df_size(value, 1000)
        return str(-(-value // unit))

    percent = "%d%%" % -(-used * 100 // total) if total else "-"
    line = [show(total), show(used), show(free), percent]
    names = ["Filesystem"] + (["Type"] if "type" in flags else [])
    body = [["/dev/root"] + (["ext4"] if "type" in flags else []) + line + ["/"] for _ in range(rows)]
    if "total" in flags:
        body.append(["total"] + (["-"] if "type" in flags else []) + line + ["-"])
    table = [names + header + ["Mounted on"], *body]
    # coreutils' least widths: 14 for the file system, 4 for its type, 5 for a figure
    least = [14] + [4] * (len(names) - 1) + [5, 5, 5, 4]
    widths = [max(least[i], *(len(row[i]) for row in table)) for i in range(len(table[0]) - 1)]
    lead = len(names)
    out = []
    for row in table:
        cells = [cell.ljust(widths[i]) if i < lead else cell.rjust(widths[i]) for i, cell in enumerate(row[:-1])]
        out.append(" ".join(cells) + " " + row[-1])
    return "\n".join(out) + "\n"


LSCPU = [("Architecture:", "wasm32"), ("CPU op-mode(s):", "32-bit"), ("Byte Order:", "Little Endian"),
         ("CPU(s):", "1"), ("On-line CPU(s) list:", "0"), ("Vendor ID:", "declaw-wasm"),
         ("Model name:", "WebAssembly (wasm32-wasi, one thread per command)"), ("Thread(s) per core:", "1"),
         ("Core(s) per socket:", "1"), ("Socket(s):", "1")]


class LscpuCommand(Command):
    """lscpu: the guest's processor as a program sees it (wasm32, one thread)."""

    name = "lscpu"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "display the sandbox's processor"

    def run(self, invocation: Invocation) -> CommandResult:
        if "-V" in invocation.arguments or "--version" in invocation.arguments:
            return CommandResult(stdout="lscpu from util-linux 2.38.1 %s\n" % VERSION_NOTE, exit_code=0)
        return CommandResult(stdout="".join("%-33s %s\n" % row for row in LSCPU), exit_code=0)


class TopCommand(Command):
    """top -b -n 1: one batch-mode screen (the header lines and the process table). Without a
    terminal to redraw, every call prints one screen and ends, whatever `-n` says."""

    name = "top"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "display the sandbox's processes once"

    def run(self, invocation: Invocation) -> CommandResult:
        args = list(invocation.arguments)
        if "-h" in args or "--help" in args:
            return CommandResult(stdout="Usage:\n  top -b -n 1   one screen of the sandbox's processes\n", exit_code=0)
        if "-v" in args or "-V" in args or "--version" in args:
            return CommandResult(stdout="top from procps-ng 4.0.2 %s\n" % VERSION_NOTE, exit_code=0)
        info = door.call("sysinfo")
        rows = _rows(info, [job for job in invocation.state.job_table.running()])
        now = time.time()
        mib = 1024.0 * 1024.0
        total = int(info["mem_total"])
        used = min(int(info["mem_used"]), total)
        running = sum(1 for r in rows if r["stat"] == "R")
        load = "%.2f" % float(len(info["processes"]))
        lines = [
            "top - %s up %s,  1 user,  load average: %s, %s, %s\n" % (
                time.strftime("%H:%M:%S", time.localtime(now)), _since_text(float(info["uptime"])), load, load, load),
            "Tasks: %3d total, %3d running, %3d sleeping,   0 stopped,   0 zombie\n" % (
                len(rows), running, len(rows) - running),
            "%Cpu(s):  0.0 us,  0.0 sy,  0.0 ni,100.0 id,  0.0 wa,  0.0 hi,  0.0 si,  0.0 st\n",
            "MiB Mem : %8.1f total, %8.1f free, %8.1f used, %8.1f buff/cache\n" % (
                total / mib, (total - used) / mib, used / mib, 0.0),
            "MiB Swap: %8.1f total, %8.1f free, %8.1f used. %8.1f avail Mem\n" % (0.0, 0.0, 0.0, (total - used) / mib),
            "\n",
            "%5s %-9s%3s %3s %7s %6s %6s %s %5s %5s %9s %s\n" % (
                "PID", "USER", "PR", "NI", "VIRT", "RES", "SHR", "S", "%CPU", "%MEM", "TIME+", "COMMAND"),
        ]
        for r in rows:
            kib = r["memory"] // 1024
            cpu = r["cpu"]
            lines.append("%5d %-9s%3d %3d %7d %6d %6d %s %5.1f %5.1f %9s %s\n" % (
                r["pid"], USER, 20, 0, kib, kib, 0, r["stat"], r["pcpu"], r["pmem"],
                "%d:%05.2f" % (int(cpu) // 60, cpu % 60), r["comm"]))
        return CommandResult(stdout="".join(lines), exit_code=0)


class ArchCommand(Command):
    """arch: `uname -m`'s answer."""

    name = "arch"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "print the machine's architecture"

    def run(self, invocation: Invocation) -> CommandResult:
        return CommandResult(stdout="wasm32\n", exit_code=0)


LOCALE_NAMES = ("LC_CTYPE", "LC_NUMERIC", "LC_TIME", "LC_COLLATE", "LC_MONETARY", "LC_MESSAGES", "LC_PAPER",
                "LC_NAME", "LC_ADDRESS", "LC_TELEPHONE", "LC_MEASUREMENT", "LC_IDENTIFICATION")


class LocaleCommand(Command):
    """locale [-a]: the locale the environment names (the guest's text is UTF-8 whatever it says);
    `-a`: C, C.utf8, POSIX."""

    name = "locale"
    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT
    summary = "show the locale settings"

    def run(self, invocation: Invocation) -> CommandResult:
        args = list(invocation.arguments)
        if "-a" in args or "--all-locales" in args:
            return CommandResult(stdout="C\nC.utf8\nPOSIX\n", exit_code=0)
        variables = invocation.state.variables
        lang = variables.get("LANG", "")
        every = variables.get("LC_ALL", "")
        lines = ["LANG=%s\n" % lang, "LANGUAGE=%s\n" % variables.get("LANGUAGE", "")]
        for name in LOCALE_NAMES:
            value = variables.get(name) or every or lang or "POSIX"
            lines.append("%s=%s\n" % (name, value if name in variables and not every else '"%s"' % value))
        lines.append("LC_ALL=%s\n" % every)
        return CommandResult(stdout="".join(lines), exit_code=0)


# -- kill, pgrep, pkill ------------------------------------------------------------------------

SIGNALS = {"HUP": 1, "INT": 2, "QUIT": 3, "KILL": 9, "USR1": 10, "USR2": 12, "TERM": 15, "CONT": 18,
           "STOP": 19}


def signal_number(text: str) -> int | None:
    """`9`, `KILL`, `SIGKILL`, `kill` -> 9; None for no signal bash knows."""
    name = text.upper().removeprefix("SIG")
    if name.isdigit():
        number = int(name)
        return number if number <= 64 else None
    return SIGNALS.get(name)


def kill_command(pid: int, signal: int) -> bool:
    """Signal a command of the sandbox (the door's `kill`): False if it runs no such pid."""
    return door.call("kill", pid=pid, signal=signal) is True


class KillCommand(LibraryKill):
    """The library's `kill` for the line's jobs (`%1`, a job's pid); any other pid is a command
    of the sandbox (`ps`'s PID: a server another command started), ended through the door."""

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state
        args = list(invocation.arguments)
        signal = 15
        targets: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg in ("-s", "-n") and i + 1 < len(args):
                i += 1
                number = signal_number(args[i])
                if number is None:
                    state.write_error("bash: kill: %s: invalid signal specification\n" % args[i])
                    return CommandResult(stdout="", exit_code=1)
                signal = number
            elif arg == "-l":
                names = sorted(SIGNALS, key=SIGNALS.__getitem__)
                return CommandResult(stdout=" ".join(names) + "\n", exit_code=0)
            elif arg.startswith("-") and len(arg) > 1 and not targets:
                number = signal_number(arg[1:])
                if number is None:
                    state.write_error("bash: kill: %s: invalid signal specification\n" % arg[1:])
                    return CommandResult(stdout="", exit_code=1)
                signal = number
            else:
                targets.append(arg)
            i += 1
        if not targets:
            state.write_error("kill: usage: kill [-s sigspec | -n signum | -sigspec] pid | jobspec ... or "
                              "kill -l [sigspec]\n")
            return CommandResult(stdout="", exit_code=2)
        status = 0
        jobs = state.job_table.jobs
        for target in targets:
            if target.startswith("%") or (target.isdigit() and int(target) in jobs):
                if signal == 0:  # only whether it runs
                    job = state.job_table.job_for_spec(target) if target.startswith("%") else jobs.get(int(target))
                    if job is None or job.status != JobStatus.RUNNING:
                        state.write_error("bash: kill: %s: no such job\n" % target)
                        status = 1
                    continue
                if super().run(dataclasses.replace(invocation, arguments=[target])).exit_code:
                    status = 1
            elif target.isdigit():
                if not kill_command(int(target), signal):
                    state.write_error("bash: kill: (%s) - No such process\n" % target)
                    status = 1
            else:
                state.write_error("bash: kill: %s: arguments must be process or job IDs\n" % target)
                status = 1
        return CommandResult(stdout="", exit_code=status)


PGREP_HELP = """
Usage:
 %s [options] <pattern>

Options:
 -f, --full                use full process name to match
 -x, --exact               match exactly with the command name
 -i, --ignore-case         match case insensitively
 -n, --newest              select most recently started
 -o, --oldest              select least recently started
 -l, --list-name           list PID and process name (pgrep)
 -a, --list-full           list PID and full command line (pgrep)
 -c, --count               count of matching processes
 -<sig>, --signal <sig>    signal to send (pkill; every signal but 0 ends the process)
     --help     display this help and exit
 -V, --version  output version information and exit

Processes are the sandbox's commands (`ps`), never the asking command itself.
"""


class PgrepCommand(Command):
    """pgrep / pkill over the sandbox's commands (the door's `sysinfo`, `kill`)."""

    input_kinds = ARGS_ONLY
    output_kinds = TEXT_OUT

    def __init__(self, name: str) -> None:
        self.name = name
        self.summary = "find the sandbox's processes by name" if name == "pgrep" else \
            "end the sandbox's processes by name"

    def run(self, invocation: Invocation) -> CommandResult:  # noqa: C901 (procps's option grammar, one flat loop)
        import re

        state, name = invocation.state, self.name
        args = list(invocation.arguments)
        full = exact = ignore_case = newest = oldest = list_name = list_full = count = False
        signal, pattern = 15, None
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--help":
                return CommandResult(stdout=PGREP_HELP % name, exit_code=0)
            if arg in ("-V", "--version"):
                return CommandResult(stdout="%s from procps-ng 4.0.2 %s\n" % (name, VERSION_NOTE), exit_code=0)
            if arg == "--signal" and name == "pkill":
                i += 1
                number = signal_number(args[i]) if i < len(args) else None
                if number is None:
                    return _usage(state, name, "invalid signal")
                signal = number
            elif arg.startswith("--"):
                flag = {"--full": "f", "--exact": "x", "--ignore-case": "i", "--newest": "n", "--oldest": "o",
                        "--list-name": "l", "--list-full": "a", "--count": "c"}.get(arg)
                if flag is None:
                    return _usage(state, name, "unrecognized option '%s'" % arg)
                args[i] = "-" + flag
                continue
            elif arg.startswith("-") and len(arg) > 1 and pattern is None:
                if name == "pkill" and signal_number(arg[1:]) is not None:
                    signal = signal_number(arg[1:]) or 0
                elif all(ch in "fxinolac" for ch in arg[1:]):
                    full = full or "f" in arg
                    exact = exact or "x" in arg
                    ignore_case = ignore_case or "i" in arg
                    newest = newest or "n" in arg
                    oldest = oldest or "o" in arg
                    list_name = list_name or "l" in arg
                    list_full = list_full or "a" in arg
                    count = count or "c" in arg
                else:
                    return _usage(state, name, "invalid option -- '%s'" % arg[1:])
            elif pattern is None:
                pattern = arg
            else:
                state.write_error("%s: only one pattern can be provided\n" % name)
                return CommandResult(stdout="", exit_code=2)
            i += 1
        if pattern is None:
            state.write_error("%s: no matching criteria specified\nTry `%s --help' for more information.\n"
                              % (name, name))
            return CommandResult(stdout="", exit_code=2)
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            state.write_error("%s: cannot compile regular expression '%s': %s\n" % (name, pattern, exc))
            return CommandResult(stdout="", exit_code=2)
        info = door.call("sysinfo")
        rows = [row for row in _rows(info, []) if row["pid"] != info["pid"]]
        match = regex.fullmatch if exact else regex.search
        found = [row for row in rows if match(row["command"] if full else row["comm"])]
        found.sort(key=lambda row: row["started"])
        if found and (newest or oldest):
            found = [found[-1] if newest else found[0]]
        if name == "pkill":
            ended = [row for row in found if kill_command(row["pid"], signal)]
            return CommandResult(stdout="%d\n" % len(ended) if count else "", exit_code=0 if ended else 1)
        if count:
            out = "%d\n" % len(found)
        else:
            out = "".join("%d %s\n" % (row["pid"], row["command"]) if list_full else
                          "%d %s\n" % (row["pid"], row["comm"]) if list_name else "%d\n" % row["pid"]
                          for row in found)
        return CommandResult(stdout=out, exit_code=0 if found else 1)


def register(commands: Any) -> None:
    for command in (FreeCommand(), DfCommand(), PsCommand(), UptimeCommand(), LscpuCommand(), TopCommand(),
                    ArchCommand(), LocaleCommand(), KillCommand(), PgrepCommand("pgrep"), PgrepCommand("pkill")):
        commands.register(command)
