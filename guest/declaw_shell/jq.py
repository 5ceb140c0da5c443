"""`jq`, the command-line JSON processor, as jq 1.7.1 behaves (the language is jqlang.py).

Agents pipe an API's answer through it (`curl -s URL | jq -r '.items[].name'`) and edit JSON
files with it; the guest had none (`bash: jq: command not found`). The options are jq's:
`-n -r -j -a -c -s -e -S -R -C -M`, `--tab`, `--indent N`, `--arg`, `--argjson`, `--slurpfile`,
`--rawfile`, `--args`, `--jsonargs`, `-f FILE`, `--raw-output0`, `--seq` (its output; input is read as plain JSON),
`--stream`, with its
messages and exit statuses: 2 for usage and input errors, 3 for a filter that does not compile,
5 for a runtime error (after the other inputs are processed), `-e`'s 1 and 4. Not here: colour
(`-C` prints plain JSON), modules (`import`, `include`, `-L`), `--stream-errors`,
`input_line_number` (always 0), `getpath`'s `--stream` truncation, and jq 1.7's
canonical forms of non-integer number literals (`1.000` prints `1`, as jq 1.6 prints it).
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from typing import Any

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

from . import jqlang as jl

TYPE_CHECKING = False
if TYPE_CHECKING:
    Invocation = Any  # bash_purepython's CommandInvocation (untyped)

VERSION = "jq-1.7.1"
USAGE = """Usage:\tjq [OPTIONS] FILTER [FILES...]
\tjq [OPTIONS] --args FILTER [ARGUMENTS...]
\tjq [OPTIONS] --jsonargs FILTER [JSON_VALUES...]

jq is a tool for processing JSON inputs, applying the given filter to
its JSON text inputs and producing the filter's results as JSON on
standard output.

The simplest filter is ., which copies jq's input to its output
unmodified except for formatting. For more advanced usage see
the jq(1) manpage ("man jq") and/or https://jqlang.github.io/jq/.

Example:

\t$ echo '{"foo": 0}' | jq .
\t{
\t  "foo": 0
\t}

Command options:
  -n, --null-input          use `null` as the single input value;
  -R, --raw-input           read each line as string instead of JSON;
  -s, --slurp               read all inputs into an array and use it as
                            the single input value;
  -c, --compact-output      compact instead of pretty-printed output;
  -r, --raw-output          output strings without escapes and quotes;
      --raw-output0         implies -r and output NUL after each output;
  -j, --join-output         implies -r and output without newline after
                            each output;
  -a, --ascii-output        output strings by only ASCII characters
                            using escape sequences;
  -S, --sort-keys           sort keys of each object on output;
  -C, --color-output        colorize JSON output (here: accepted, not coloured);
  -M, --monochrome-output   disable colored output;
      --tab                 use tabs for indentation;
      --indent n            use n spaces for indentation (max 7 spaces);
      --unbuffered          flush output stream after each output;
      --stream              parse the input value in streaming fashion;
      --seq                 parse input/output as application/json-seq;
  -f, --from-file file      load filter from the file;
      --arg name value      set $name to the string value;
      --argjson name value  set $name to the JSON value;
      --slurpfile name file set $name to an array of JSON values read
                            from the file;
      --rawfile name file   set $name to string contents of file;
      --args                consume remaining arguments as positional
                            string values;
      --jsonargs            consume remaining arguments as positional
                            JSON values;
  -e, --exit-status         set exit status code based on the output;
  -V, --version             show the version;
  -h, --help                show the help;
  --                        terminates argument processing;

Named arguments are also available as $ARGS.named[], while
positional arguments are available as $ARGS.positional[].
"""
HINT = ("Use jq --help for help with command-line options,\n"
        "or see the jq manpage, or online docs  at https://jqlang.github.io/jq\n")

_SHORT = {"n": "null_input", "r": "raw", "j": "join", "a": "ascii", "c": "compact", "s": "slurp",
          "e": "exit_status", "S": "sort_keys", "R": "raw_input", "C": "color", "M": "mono", "h": "help",
          "V": "version", "f": "from_file"}
_LONG = {"null-input": "null_input", "raw-output": "raw", "join-output": "join", "ascii-output": "ascii",
         "compact-output": "compact", "slurp": "slurp", "exit-status": "exit_status", "sort-keys": "sort_keys",
         "raw-input": "raw_input", "color-output": "color", "monochrome-output": "mono", "help": "help",
         "version": "version", "from-file": "from_file", "tab": "tab", "unbuffered": "unbuffered",
         "stream": "stream", "seq": "seq", "raw-output0": "raw0"}


class UsageError(Exception):
    """A bad command line: jq's message, then (`hint`) where to find help; exit 2."""

    def __init__(self, message: str, hint: bool = True) -> None:
        super().__init__(message)
        self.hint = hint


class Options:
    def __init__(self) -> None:
        self.flags: set[str] = set()
        self.indent = 2
        self.tab = False
        self.named: dict[str, Any] = {}
        self.positional: list[Any] = []
        self.program: str | None = None
        self.files: list[str] = []


def _optish(a: str) -> bool:
    return len(a) > 1 and a[0] == "-" and (a[1] == "-" or a[1].isalpha())


def parse_args(argv: list[str], read_file: Callable[[str], str]) -> Options:  # noqa: C901 - jq's options
    opts = Options()
    rest_mode: str | None = None
    done = False
    i = 0
    while i < len(argv):
        a = argv[i]
        if done or not _optish(a):
            if opts.program is None:
                opts.program = a
            elif rest_mode == "args":
                opts.positional.append(a)
            elif rest_mode == "jsonargs":
                try:
                    opts.positional.append(jl.fromjson(a))
                except jl.InputError:
                    raise UsageError("jq: invalid JSON text passed to --jsonargs") from None
            else:
                opts.files.append(a)
        elif a == "--":
            done = True
        elif a.startswith("--"):
            name = a[2:]
            if name in _LONG:
                opts.flags.add(_LONG[name])
                if name == "tab":
                    opts.tab, opts.indent = True, 2
                elif name == "compact-output":
                    opts.tab, opts.indent = False, 0
            elif name == "indent":
                if i + 1 >= len(argv):
                    raise UsageError("jq: --indent takes one parameter")
                value = argv[i + 1]
                digits = re.match(r"\s*[-+]?\d+", value)
                indent = int(digits.group()) if digits else 0
                if not -1 <= indent <= 7:
                    raise UsageError("jq: --indent takes a number between -1 and 7")
                opts.tab, opts.indent = indent == -1, max(indent, 0)
                i += 1
            elif name in ("arg", "argjson", "slurpfile", "rawfile"):
                if i + 2 >= len(argv):
                    example = {"arg": "value", "argjson": "text"}.get(name, "filename")
                    raise UsageError("jq: --%s takes two parameters (e.g. --%s varname %s)" % (name, name, example))
                key, value = argv[i + 1], argv[i + 2]
                if key not in opts.named:
                    opts.named[key] = _named_value(name, key, value, read_file)
                i += 2
            elif name in ("args", "jsonargs"):
                rest_mode = name
            elif name == "stream-errors":
                opts.flags.add("stream")
            else:
                raise UsageError("jq: Unknown option %s" % a)
        else:
            if a[1] == "L":
                if len(a) == 2:
                    if i + 1 >= len(argv):
                        raise UsageError("-L takes a parameter: (e.g. -L /search/path or -L/search/path)")
                    i += 1
                i += 1
                continue
            for letter in a[1:]:
                if letter not in _SHORT:
                    raise UsageError("jq: Unknown option %s" % a)
            for letter in a[1:]:
                opts.flags.add(_SHORT[letter])
                if letter == "c":
                    opts.tab, opts.indent = False, 0
        i += 1
    return opts


def _named_value(kind: str, key: str, value: str, read_file: Callable[[str], str]) -> Any:
    if kind == "arg":
        return value
    if kind == "argjson":
        try:
            return jl.fromjson(value)
        except jl.InputError:
            raise UsageError("jq: invalid JSON text passed to --argjson") from None
    try:
        text = read_file(value)
    except OSError as exc:
        raise UsageError("jq: Bad JSON in --%s %s %s: Could not open %s: %s" % (kind, key, value, value, exc.strerror),
                         hint=False) from None
    if kind == "rawfile":
        return text
    try:
        return list(jl.parse_values(text))
    except jl.InputError as exc:
        raise UsageError("jq: Bad JSON in --%s %s %s: %s" % (kind, key, value, exc), hint=False) from None


class Source:
    """The inputs, read one at a time (so `input`/`inputs` take from the same stream), with the
    name and line jq's error messages give ("<stdin>:1": the lines read so far)."""

    def __init__(self, opts: Options, stdin: str, read_file: Callable[[str], str],
                 write_error: Callable[[str], None]) -> None:
        self.opts = opts
        self.stdin = stdin
        self.read_file = read_file
        self.write_error = write_error
        self.current: str | None = None
        self.line = 0
        self.open_failed = False
        self.parse_error: str | None = None

    def texts(self) -> Iterator[tuple[str, str]]:
        for name in self.opts.files or ["-"]:
            if name == "-":
                yield "<stdin>", self.stdin
                continue
            try:
                text = self.read_file(name)
            except OSError as exc:
                self.write_error("jq: error: Could not open file %s: %s\n" % (name, exc.strerror))
                self.open_failed = True
                continue
            yield name, text

    def values(self) -> Iterator[Any]:
        flags = self.opts.flags
        if "raw_input" in flags:
            if "slurp" in flags:
                yield "".join(text for _, text in self.texts())
                return
            for name, text in self.texts():
                self.current = name
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()
                for n, line in enumerate(lines, 1):
                    self.line = n
                    yield line
            return
        if "slurp" in flags:
            everything = list(self._json_values())
            if self.parse_error is None:
                yield everything
            return
        yield from self._json_values()

    def _json_values(self) -> Iterator[Any]:
        stream = "stream" in self.opts.flags
        for name, text in self.texts():
            self.current = name
            counted, lines = 0, 0
            try:
                for value, end in jl.parse_values_at(text):
                    lines += text.count("\n", counted, end)  # from the last value on, not from the start
                    counted = end
                    self.line = lines + (1 if text.find("\n", end) >= 0 else 0)
                    if stream:
                        yield from jl._tostream(value)
                    else:
                        yield value
            except jl.InputError as exc:
                self.parse_error = str(exc)
                return


class Run:
    """One jq command: `chunks()` yields its output as it is made (an endless `repeat` streams
    until the command is stopped), then `status` is its exit status."""

    def __init__(self, argv: list[str], stdin: str, environ: dict[str, str], read_file: Callable[[str], str],
                 write_error: Callable[[str], None]) -> None:
        self.argv, self.stdin, self.environ = argv, stdin, environ
        self.read_file, self.write_error = read_file, write_error
        self.status = 0

    def chunks(self) -> Iterator[str]:
        """The output; Python's recursion limit raised meanwhile, so that a recursive jq function
        can go about 2 000 calls deep (CPython's 1 000 frames allow some 150); deeper is jq's error
        "the filter recursed too deeply", measured well short of the guest's C stack."""
        previous = sys.getrecursionlimit()
        sys.setrecursionlimit(max(previous, RECURSION_LIMIT))
        try:
            yield from self._chunks()
        finally:
            sys.setrecursionlimit(previous)

    def _chunks(self) -> Iterator[str]:
        write_error = self.write_error
        try:
            opts = parse_args(self.argv, self.read_file)
        except UsageError as exc:
            write_error(str(exc) + "\n" + (HINT if exc.hint else ""))
            self.status = 2
            return
        flags = opts.flags
        if "help" in flags:
            yield USAGE
            return
        if "version" in flags:
            yield VERSION + "\n"
            return
        if opts.program is None:
            if "from_file" in flags:
                write_error(USAGE + "\n")
                self.status = 2
                return
            opts.program = "."  # as jq when stdin or stdout is not a terminal, which here they never are
        source = opts.program
        if "from_file" in flags:
            try:
                source = self.read_file(opts.program)
            except OSError as exc:
                write_error("jq: error: Could not open %s: %s\n" % (opts.program, exc.strerror))
                self.status = 2
                return
            if source.startswith("#!"):
                source = source[source.find("\n") + 1:] if "\n" in source else ""
        yield from self._execute(opts, source)

    def _execute(self, opts: Options, source: str) -> Iterator[str]:  # noqa: C901 - jq's main loop
        flags, write_error = opts.flags, self.write_error
        variables: dict[str, Any] = {"ENV": dict(self.environ),
                                     "ARGS": {"positional": opts.positional, "named": dict(opts.named)}}
        variables.update(opts.named)
        node = _compile(source, variables, write_error)
        if node is None:
            self.status = ERROR_COMPILE
            return
        printer = Printer(opts)
        feed = Source(opts, self.stdin, self.read_file, write_error)
        values = feed.values()
        interp = jl.Interp(values, write_error, lambda: feed.current)
        env = jl.root_env(variables)

        def where() -> str:
            return "<unknown>" if feed.current is None else "%s:%d" % (feed.current, feed.line)

        ret = OK_NO_OUTPUT
        last_result = -1
        try:
            if "null_input" in flags:
                ret = yield from _process(interp, node, None, env, printer, where, write_error)
            else:
                for value in values:
                    ret = yield from _process(interp, node, value, env, printer, where, write_error)
                    if ret <= 0 and ret != OK_NO_OUTPUT:
                        last_result = 1 if ret != OK_NULL_KIND else 0
                if feed.parse_error is not None:
                    ret = ERROR_UNKNOWN
                    write_error("jq: parse error: %s\n" % feed.parse_error)
        except jl.Halt as halt:
            message = halt.message
            if halt.has_message and isinstance(message, str):
                write_error(message)
            elif halt.has_message and message is not None:
                write_error(jl.tojson(message) + "\n")
            self.status = halt.status & 0xFF
            return
        if feed.open_failed:
            ret = ERROR_SYSTEM
        if "exit_status" in flags:
            self.status = abs(ret) if ret != OK_NO_OUTPUT else {-1: 4, 0: 1}.get(last_result, 0)
        else:
            self.status = ret if ret > 0 else 0


def run(argv: list[str], stdin: str, environ: dict[str, str], read_file: Callable[[str], str],
        write_error: Callable[[str], None]) -> tuple[str, int]:
    """jq's main, whole: (stdout, exit status); messages go to `write_error` as they happen."""
    job = Run(argv, stdin, environ, read_file, write_error)
    out = "".join(job.chunks())
    return out, job.status


def locate(source: str, pos: int) -> str:
    """jq's "at <top-level>, line N:" and the line, padded to the column (as jq's locfile)."""
    if pos < 0:
        return "\n<unknown location>"
    pos = min(pos, len(source))
    start = source.rfind("\n", 0, pos) + 1
    end = source.find("\n", start)
    line = source[start:] if end < 0 else source[start:end]
    return " at <top-level>, line %d:\n%s%s" % (source.count("\n", 0, pos) + 1, line, " " * (pos - start))


def _compile(source: str, variables: dict[str, Any], write_error: Callable[[str], None]) -> jl.Node | None:
    try:
        node = jl.parse(source)
    except jl.CompileError as exc:
        write_error("jq: error: %s%s\njq: 1 compile error\n" % (exc, locate(source, exc.pos)))
        return None
    except RecursionError:
        write_error("jq: error: the filter nests too deeply\njq: 1 compile error\n")
        return None
    problems = jl.check(node, set(variables) | {"__loc__"})
    if problems:
        for problem, pos in problems:
            write_error("jq: error: %s%s\n" % (problem, locate(source, pos)))
        write_error("jq: %d compile error%s\n" % (len(problems), "s" if len(problems) > 1 else ""))
        return None
    return node


OK, OK_NULL_KIND, OK_NO_OUTPUT, ERROR_SYSTEM, ERROR_COMPILE, ERROR_UNKNOWN = 0, -1, -4, 2, 3, 5


class Printer:
    def __init__(self, opts: Options) -> None:
        flags = opts.flags
        self.raw = bool(flags & {"raw", "join", "raw0"})
        self.raw0 = "raw0" in flags
        self.ascii = "ascii" in flags
        self.dumper = jl.Dumper(indent=opts.indent, tab=opts.tab, sort_keys="sort_keys" in flags,
                                ascii_only=self.ascii)
        self.end = "" if flags & {"join", "raw0"} else "\n"
        self.end += "\0" if self.raw0 else ""
        self.seq = "\x1e" if "seq" in flags else ""

    def format(self, result: Any) -> tuple[str, int]:
        """One output's text, and jq's status for it (OK, or OK_NULL_KIND for false and null)."""
        if self.raw and isinstance(result, str):
            if self.ascii:
                text = jl.dump_str(result, True)
            elif self.raw0 and "\0" in result:
                raise jl.JqError("Cannot dump a string containing NUL with --raw-output0 option")
            else:
                text = result
            status = OK
        else:
            text = self.seq + self.dumper.dumps(result)
            status = OK_NULL_KIND if result is None or result is False else OK
        return text + self.end, status


def _process(interp: jl.Interp, node: jl.Node, value: Any, env: jl.Env, printer: Printer,
             where: Callable[[], str], write_error: Callable[[str], None]) -> Generator[str, None, int]:
    """One input through the filter, as jq's process(): its outputs, then the status of the last."""
    status = OK_NO_OUTPUT
    try:
        for result in interp.values(node, value, env):
            text, status = printer.format(result)
            yield text
    except jl.JqError as err:
        if isinstance(err.value, str):
            write_error("jq: error (at %s): %s\n" % (where(), err.value))
        else:
            write_error("jq: error (at %s) (not a string): %s\n" % (where(), jl.tojson(err.value)))
        return ERROR_UNKNOWN
    except jl.Break:
        write_error("jq: error (at %s): break\n" % where())
        return ERROR_UNKNOWN
    except RecursionError:
        write_error("jq: error (at %s): the filter recursed too deeply\n" % where())
        return ERROR_UNKNOWN
    return status


class JqCommand(Command):
    """jq [OPTIONS] FILTER [FILES...] (module docstring)."""

    name = "jq"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.STREAM_TEXT})
    summary = "command-line JSON processor"

    def run(self, invocation: Invocation) -> CommandResult:
        state = invocation.state

        def read_file(name: str) -> str:
            path = str(state.resolve_path(name))
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()

        stdin = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
        job = Run(list(invocation.arguments), stdin, dict(state.exported_variables()), read_file, state.write_error)

        async def output() -> AsyncIterator[str]:
            pending: list[str] = []
            size = 0
            for chunk in job.chunks():
                pending.append(chunk)
                size += len(chunk)
                if size >= CHUNK:
                    yield "".join(pending)
                    pending, size = [], 0
            if pending:
                yield "".join(pending)
            invocation.exit_status.code = job.status

        return CommandResult(stdout=output(), exit_code=0)


CHUNK = 1 << 16  # outputs are passed on in pieces of about this size
RECURSION_LIMIT = 12000
