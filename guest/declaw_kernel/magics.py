"""IPython's escapes in a cell: `%magic`, `%%cell_magic`, `!cmd`, `!!cmd`, `x = !cmd`,
`x = %magic`, `obj?`, and the magics notebook code uses most.

No IPython shell runs in the guest (the kernel is ours; IPython is only a library of the
code-interpreter's bundle, and not in every template), yet the cells agents write come from
notebooks: `%matplotlib inline` heads half of them, `%%writefile`, `%timeit`, `%%capture` and
`files = !ls` are common. So a cell that is not Python as written is rewritten as IPython's
input transformer would (an escape counts only where a logical line starts, never inside a
string or brackets: found with `tokenize`), into calls of this module, which does what IPython's
magic does, with IPython's output and its error for a magic it does not know
(`UsageError: Line magic function `%x` not found.`). A cell that parses as Python runs as it is.

`!cmd`, `!!cmd` and the shell magics run through `subprocess` (the sandbox shell in this
process: declaw_shell/subprocesses.py). As in IPython, `{expr}` and `$name` in a shell line or
a magic's arguments are filled from the caller's variables, and the line is left as it was if
any of them cannot be (`!awk '{print $1}'` reaches the shell untouched).
"""

from __future__ import annotations

import ast
import io
import os
import re
import shlex
import string
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CALL = "__import__('declaw_kernel.magics').magics."
# a line that may be an escape; only where a logical line starts is it one
_MAYBE = re.compile(r"^[ \t]*[%!?]|\?[ \t]*$|=[ \t]*[%!]", re.MULTILINE)
_ASSIGN = re.compile(r"^(?P<indent>[ \t]*)(?P<target>[\w.\[\]'\",()* \t]+?)[ \t]*=[ \t]*(?P<kind>!!?|%)(?P<rest>.*)$")
_HELP = re.compile(r"^(?P<indent>[ \t]*)(?:\?{1,2}(?P<before>[\w.]+)|(?P<after>[\w.\[\]'\"()]+?)\?{1,2})[ \t]*$")


class UsageError(Exception):
    """IPython's error for a magic it does not know or arguments it cannot use."""


def transform(source: str) -> str:
    """The cell as Python: its escapes rewritten as calls of this module."""
    if not _MAYBE.search(source):
        return source
    try:
        ast.parse(source)
        return source
    except (SyntaxError, ValueError):
        pass
    lines = source.splitlines(True)
    out = list(lines)
    start = 0  # a logical line is known to start here: the cell's start, or after an escape line
    for number, line in enumerate(lines):
        python = _rewrite(line)
        if python is not None and _complete("".join(lines[start:number])):
            out[number] = python
            start = number + 1
    return "".join(out)


def _complete(source: str) -> bool:
    """Whether the lines before an escape line end a logical line (no string, bracket or
    backslash left open), so that the escape line starts one. Each line is read once per escape
    line after it only while they stay open: linear in the cell for all practical purposes."""
    if not source.strip():
        return True
    import tokenize

    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.OP and token.string in ("(", "[", "{"):
                depth += 1
            elif token.type == tokenize.OP and token.string in (")", "]", "}"):
                depth = max(0, depth - 1)
    except (tokenize.TokenError, SyntaxError) as exc:
        # open at the end: a bracket, a backslash, a triple-quoted string (3.12+'s tokenizer says
        # "unterminated triple-quoted string"); any other error is not Python: as if it ended
        message = str(exc)
        return "EOF" not in message and "unterminated triple" not in message
    return depth == 0


def _rewrite(line: str) -> str | None:
    """The Python for an escape line, or None if the line is not one."""
    text = line.rstrip("\r\n")
    stripped = text.lstrip()
    indent = text[: len(text) - len(stripped)]
    if stripped.startswith("!!"):
        return "%s%sgetoutput(%r)\n" % (indent, CALL, stripped[2:])
    if stripped.startswith("!") and not stripped.startswith("!="):
        return "%s%ssystem(%r)\n" % (indent, CALL, stripped[1:])
    if stripped.startswith("%") and len(stripped) > 1 and not stripped.startswith("%="):
        name, _, rest = stripped[1:].partition(" ")
        return "%s%sline(%r, %r)\n" % (indent, CALL, name, rest.strip())
    assign = _ASSIGN.match(text)
    if assign is not None and not assign["target"].strip().endswith(("!", "=", "<", ">")):
        rest = assign["rest"]
        if assign["kind"] == "%":
            name, _, args = rest.partition(" ")
            call = "line(%r, %r)" % (name, args.strip())
        else:
            call = "getoutput(%r)" % rest
        return "%s%s = %s%s\n" % (assign["indent"], assign["target"].strip(), CALL, call)
    help_line = _HELP.match(text)
    if help_line is not None:
        return "%s%spinfo(%r, %r)\n" % (help_line["indent"], CALL, help_line["before"] or help_line["after"],
                                         stripped.endswith("??") or stripped.startswith("??"))
    return None


# --- the shell -------------------------------------------------------------------------------


class SList(list[str]):
    """A shell command's output lines (IPython's SList): `.s` joined by spaces, `.n` by newlines."""

    @property
    def s(self) -> str:
        return " ".join(self)

    @property
    def n(self) -> str:
        return "\n".join(self)

    @property
    def l(self) -> list[str]:  # noqa: E743  # IPython's name
        return list(self)

    def grep(self, pattern: str, prune: bool = False) -> SList:
        found = re.compile(pattern).search
        return SList(line for line in self if bool(found(line)) != prune)

    def fields(self, *indexes: int) -> SList:
        rows = SList()
        for line in self:
            parts = line.split()
            rows.append(" ".join(parts[i] for i in indexes if -len(parts) <= i < len(parts)) if indexes else line)
        return rows


class _Expander(string.Formatter):
    def __init__(self, names: dict[str, Any]) -> None:
        self.names = names

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        return eval(field_name, self.names), field_name


def expand(text: str, depth: int = 2, names: dict[str, Any] | None = None) -> str:
    """`{expr}` and `$name` filled from the caller's variables (`$$` is a `$`), as IPython does
    for a shell line; the text as it was if any cannot be."""
    if "$" not in text and "{" not in text:
        return text
    if names is None:
        frame = sys._getframe(depth)
        names = {**frame.f_globals, **frame.f_locals}
    try:
        dollars = re.sub(r"\$\$|\$(\w+)", lambda m: "$" if m[0] == "$$" else "{%s}" % m[1], text)
        return _Expander(names).format(dollars)
    except Exception:
        return text


def system(command: str) -> None:
    """`!command`: the sandbox shell, output into the cell's streams; `_exit_code` as IPython."""
    import subprocess

    status = subprocess.call(expand(command), shell=True)
    sys._getframe(1).f_globals["_exit_code"] = status


def getoutput(command: str) -> SList:
    """`!!command`, `x = !command`: its output (stderr with it), a line each."""
    import subprocess

    run = subprocess.run(expand(command), shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace")
    return SList(run.stdout.splitlines())


# --- magics ----------------------------------------------------------------------------------

_LINE: dict[str, Callable[[str, dict[str, Any]], Any]] = {}
_CELL: dict[str, Callable[[str, str, dict[str, Any]], Any]] = {}


def _line_magic(*names: str, expands: bool = True) -> Callable[[Any], Any]:
    def register(function: Any) -> Any:
        function.expands = expands
        for name in names:
            _LINE[name] = function
        return function

    return register


def _cell_magic(*names: str) -> Callable[[Any], Any]:
    def register(function: Any) -> Any:
        for name in names:
            _CELL[name] = function
        return function

    return register


def line(name: str, args: str) -> Any:
    """`%name args` (its value, which a cell's last line displays)."""
    function = _LINE.get(name)
    if function is None:
        if name in _CELL:
            raise UsageError("Line magic function `%%%s` not found (But cell magic `%%%%%s` exists, "
                             "did you mean that instead?)." % (name, name))
        raise UsageError("Line magic function `%%%s` not found." % name)
    frame = sys._getframe(1)
    if getattr(function, "expands", True):
        args = expand(args)
    return function(args, frame.f_globals)


def cell(name: str, args: str, body: str, names: dict[str, Any]) -> Any:
    """`%%name args` heading a cell, run on the rest of it."""
    function = _CELL.get(name)
    if function is None:
        raise UsageError("Cell magic `%%%%%s` not found." % name)
    if name not in ("time", "timeit"):
        args = expand(args, names=names)
    return function(args, body, names)


def split_cell_magic(source: str) -> tuple[str, str, str] | None:
    """(name, args, body) if the cell starts with `%%name args`."""
    head, _, body = source.lstrip("\n").partition("\n")
    if not head.startswith("%%") or len(head) < 3:
        return None
    if body and not body.endswith("\n"):
        body += "\n"  # IPython's cells end with a newline: %%writefile's file does too
    name, _, args = head[2:].partition(" ")
    return name, args.strip(), body


def _noop(args: str, names: dict[str, Any]) -> None:
    return None


# notebook settings with nothing to set here: figures are PNG results at a cell's end already
for _name in ("matplotlib", "config", "autoreload", "aimport", "xmode", "colors", "autocall",
              "automagic", "pprint", "precision", "pdb", "doctest_mode", "unload_ext", "notebook",
              "gui"):
    _LINE[_name] = _noop


def _load_ext(args: str, names: dict[str, Any]) -> None:
    """`%load_ext module`: the module imported, its IPython hook not called (no IPython shell);
    autoreload, IPython's own, is accepted as is."""
    import importlib

    for module in args.split():
        if module != "autoreload" and not module.startswith("IPython."):
            importlib.import_module(module)


_LINE["load_ext"] = _LINE["reload_ext"] = _load_ext


def _shell(command: str) -> Callable[[str, dict[str, Any]], None]:
    def alias(args: str, names: dict[str, Any]) -> None:
        import subprocess

        subprocess.call("%s %s" % (command, args) if args else command, shell=True)

    return alias


for _name, _command in (("ls", "ls"), ("ll", "ls -F -l"), ("lf", "ls -F -l"), ("cat", "cat"), ("cp", "cp"),
                        ("mv", "mv"), ("rm", "rm"), ("rmdir", "rmdir"), ("mkdir", "mkdir"), ("pip", "pip"),
                        ("conda", "conda"), ("mamba", "mamba"), ("uv", "uv"), ("less", "cat"), ("more", "cat")):
    _LINE[_name] = _shell(_command)


@_line_magic("system", "sx")
def _sx(args: str, names: dict[str, Any]) -> SList:
    return getoutput(args)


@_line_magic("pwd")
def _pwd(args: str, names: dict[str, Any]) -> str:
    return os.getcwd()


_previous_dir: list[str] = []


@_line_magic("cd")
def _cd(args: str, names: dict[str, Any]) -> None:
    target = args.strip()
    if target.startswith("-q "):
        target, quiet = target[3:].strip(), True
    else:
        quiet = target == "-q"
        target = "" if quiet else target
    if target == "-":
        if not _previous_dir:
            raise UsageError("%cd -: No previous directory to change to.")
        target = _previous_dir[-1]
    if len(target) > 1 and target[0] == target[-1] and target[0] in "'\"":
        target = target[1:-1]
    target = os.path.expanduser(target or "~")
    before = os.getcwd()
    try:
        os.chdir(target)
    except OSError as exc:
        print("[Errno %s] %s: %r" % (exc.errno, exc.strerror, target))
        return
    _previous_dir[:] = [before]
    os.environ["PWD"] = os.getcwd()
    if not quiet:
        print(os.getcwd())


@_line_magic("env", "set_env")
def _env(args: str, names: dict[str, Any]) -> Any:
    args = args.strip()
    if not args:
        return dict(os.environ)
    if "=" in args:
        key, _, value = args.partition("=")
    else:
        key, _, value = args.partition(" ")
        if not value:
            if key not in os.environ:
                raise UsageError("Environment does not have key: %s" % key)
            return os.environ[key]
    key, value = key.strip(), value.strip()
    if len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
    os.environ[key] = value
    print("env: %s=%s" % (key, value))
    return None


def _user_names(names: dict[str, Any]) -> list[str]:
    """The cell's own names, as IPython's `%who` lists them (modules included)."""
    return sorted(name for name in names if not name.startswith("_") and name not in _HIDDEN)


_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "display"}


@_line_magic("who")
def _who(args: str, names: dict[str, Any]) -> None:
    found = _user_names(names)
    print("".join(name + "\t " for name in found) if found else "Interactive namespace is empty.")


@_line_magic("who_ls")
def _who_ls(args: str, names: dict[str, Any]) -> list[str]:
    return _user_names(names)


@_line_magic("whos")
def _whos(args: str, names: dict[str, Any]) -> None:
    found = _user_names(names)
    if not found:
        print("Interactive namespace is empty.")
        return
    kinds = [type(names[name]).__name__ for name in found]
    name_width = max(len("Variable"), *map(len, found)) + 3
    kind_width = max(len("Type"), *map(len, kinds)) + 3
    print("Variable".ljust(name_width) + "Type".ljust(kind_width) + " Data/Info")
    print("-" * (name_width + kind_width + len("Data/Info") + 1))
    for name, kind in zip(found, kinds, strict=True):
        print(name.ljust(name_width) + kind.ljust(kind_width) + " " + _short(names[name]))


def _short(value: Any) -> str:
    """IPython's `%whos` data column: str() on one line, long ones cut in the middle."""
    try:
        text = str(value).replace("\n", "\\n")
    except Exception:
        text = "<unprintable>"
    return text if len(text) <= 50 else text[:25] + "<...>" + text[-25:]


@_line_magic("reset")
def _reset(args: str, names: dict[str, Any]) -> None:
    """`%reset -f`: the cell's names gone (asking first is not possible here: -f is assumed)."""
    for name in _user_names(names):
        del names[name]


@_line_magic("run")
def _run(args: str, names: dict[str, Any]) -> None:
    """`%run [-i] script.py args` / `%run -m module args`: run as `__main__`, its names left in
    the cell's namespace (with -i it runs in that namespace)."""
    import runpy

    argv = shlex.split(args)
    in_namespace = module = False
    while argv and argv[0].startswith("-") and argv[0] in ("-i", "-m", "-t", "-e", "-n"):
        flag = argv.pop(0)
        in_namespace |= flag == "-i"
        module |= flag == "-m"
    if not argv:
        raise UsageError("%run: you must provide a filename or a module (-m)")
    saved = sys.argv
    sys.argv = list(argv)
    try:
        if module:
            result = runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            path = os.path.expanduser(argv[0])
            if not os.path.exists(path) and os.path.exists(path + ".py"):
                path += ".py"
            if not os.path.isfile(path):
                raise Exception("File `%r` not found." % argv[0])
            sys.argv[0] = path
            if in_namespace:
                with open(path, "rb") as file:
                    code = compile(file.read(), path, "exec")
                main = names.get("__name__")
                names["__name__"] = "__main__"
                try:
                    exec(code, names)
                finally:
                    names["__name__"] = main
                return
            result = runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise
        return
    finally:
        sys.argv = saved
    names.update({key: value for key, value in result.items() if not key.startswith("__")})


def _format_time(seconds: float) -> str:
    """IPython's: three significant digits in s, ms, µs or ns."""
    if seconds >= 60:
        minutes, rest = divmod(seconds, 60)
        hours, minutes = divmod(minutes, 60)
        parts = [("h", hours), ("min", minutes), ("s", rest)]
        return " ".join("%s%s" % (int(value) if unit != "s" else round(value, 1), unit)
                        for unit, value in parts if value)
    import math

    # the unit from the value's decimal order, three digits (999.9999 ns prints 1e+03 ns there too)
    order = min(-(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0 else 3
    return "%.3g %s" % (seconds * (1.0, 1e3, 1e6, 1e9)[order], ("s", "ms", "µs", "ns")[order])


def _clock() -> tuple[float, float, float]:
    times = os.times()  # the boot's: the process's CPU time (WASI has no system time)
    return times.user, times.system, time.perf_counter()


def _report_time(before: tuple[float, float, float], after: tuple[float, float, float]) -> None:
    user, system_, wall = (b - a for a, b in zip(before, after, strict=True))
    print("CPU times: user %s, sys: %s, total: %s" % (_format_time(user), _format_time(system_),
                                                      _format_time(user + system_)))
    print("Wall time: %s" % _format_time(wall))


@_line_magic("time", expands=False)
def _time(args: str, names: dict[str, Any]) -> Any:
    """`%time statement`: run it, print its CPU and wall time, give an expression's value."""
    tree = ast.parse(args.strip() or "None")
    expression = len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
    code = compile(args.strip(), "<timed exec>", "eval" if expression else "exec")
    before = _clock()
    try:
        value = eval(code, names)
    finally:
        _report_time(before, _clock())
    return value if expression else None


class TimeitResult:
    """What `%timeit -o` gives (IPython's fields)."""

    def __init__(self, loops: int, repeat: int, all_runs: list[float]) -> None:
        self.loops, self.repeat, self.all_runs = loops, repeat, all_runs
        self.timings = [run / loops for run in all_runs]
        self.best, self.worst = min(self.timings), max(self.timings)
        self.average = sum(self.timings) / len(self.timings)
        self.stdev = (sum((t - self.average) ** 2 for t in self.timings) / len(self.timings)) ** 0.5

    def __str__(self) -> str:
        return "%s ± %s per loop (mean ± std. dev. of %d run%s, %s loop%s each)" % (
            _format_time(self.average), _format_time(self.stdev), self.repeat, "" if self.repeat == 1 else "s",
            "{:,}".format(self.loops), "" if self.loops == 1 else "s")

    def __repr__(self) -> str:
        return "<TimeitResult : %s>" % self


def _timeit(statement: str, setup: str, options: str, names: dict[str, Any]) -> TimeitResult | None:
    import timeit

    flags = shlex.split(options)
    loops = repeat = 0
    quiet = keep = False
    while flags:
        flag = flags.pop(0)
        if flag in ("-n", "-r") and flags:
            value = int(flags.pop(0))
            loops, repeat = (value, repeat) if flag == "-n" else (loops, value)
        elif flag == "-q":
            quiet = True
        elif flag == "-o":
            keep = True
        elif flag.startswith(("-n", "-r")) and flag[2:].isdigit():
            loops, repeat = (int(flag[2:]), repeat) if flag[1] == "n" else (loops, int(flag[2:]))
        elif flag in ("-t", "-c") or flag.startswith("-p"):
            pass
        else:
            raise UsageError("%%timeit: unknown option %r" % flag)
    repeat = repeat or 7
    timer = timeit.Timer(statement or "pass", setup or "pass", globals=names)
    if not loops:
        loops = 1
        while True:  # IPython's autorange: powers of ten until a run takes 0.2 s
            if timer.timeit(loops) >= 0.2 or loops >= 10**9:
                break
            loops *= 10
    result = TimeitResult(loops, repeat, timer.repeat(repeat, loops))
    if not quiet:
        print(result)
    return result if keep else None


@_line_magic("timeit", expands=False)
def _timeit_line(args: str, names: dict[str, Any]) -> Any:
    options, statement = _split_options(args, ("-n", "-r"))
    return _timeit(statement, "", options, names)


def _split_options(args: str, with_value: tuple[str, ...]) -> tuple[str, str]:
    """A magic's leading `-x [value]` options and the rest of its line."""
    words = args.split(" ")
    taken = []
    while words and words[0].startswith("-") and len(words[0]) > 1 and words[0][1].isalpha():
        flag = words.pop(0)
        taken.append(flag)
        if flag in with_value and words:
            taken.append(words.pop(0))
        while words and words[0] == "":
            words.pop(0)
    return " ".join(taken), " ".join(words)


@_cell_magic("timeit")
def _timeit_cell(args: str, body: str, names: dict[str, Any]) -> Any:
    options, setup = _split_options(args, ("-n", "-r"))
    return _timeit(body, setup, options, names)


@_cell_magic("time")
def _time_cell(args: str, body: str, names: dict[str, Any]) -> Any:
    from . import _kernel_set_up

    before = _clock()
    try:
        _kernel_set_up().run_source(body)
    finally:
        _report_time(before, _clock())


@_cell_magic("writefile", "file")
def _writefile(args: str, body: str, names: dict[str, Any]) -> None:
    argv = shlex.split(args)
    append = "-a" in argv or "--append" in argv
    paths = [arg for arg in argv if arg not in ("-a", "--append")]
    if len(paths) != 1:
        raise UsageError("%%writefile: one file name is needed (usage: %%writefile [-a] FILE)")
    path = os.path.expanduser(paths[0])
    if os.path.exists(path):
        print("Appending to %s" % paths[0] if append else "Overwriting %s" % paths[0])
    else:
        print("Writing %s" % paths[0])
    with open(path, "a" if append else "w", encoding="utf-8") as file:
        file.write(body)


def _script(program: str) -> Callable[[str, str, dict[str, Any]], None]:
    def run(args: str, body: str, names: dict[str, Any]) -> None:
        """The cell's body as the program's input (`%%bash`, `%%script python3`...); a failure
        raises CalledProcessError, as in IPython, unless `--no-raise-error`."""
        import subprocess

        words = shlex.split(args)
        raise_error = "--no-raise-error" not in words
        words = [word for word in words if not word.startswith("--")]
        command = program or (shlex.join(words) if words else "")
        if not command:
            raise UsageError("%%script: the program to run is needed (usage: %%script bash)")
        status = subprocess.run(command, shell=True, input=body, text=True).returncode
        if status and raise_error:
            raise subprocess.CalledProcessError(status, body.encode())

    return run


for _name, _program in (("bash", "bash"), ("sh", "sh"), ("script", ""), ("python", "python3"),
                        ("python3", "python3"), ("system", "bash"), ("!", "bash")):
    _CELL[_name] = _script(_program)


def _mime(kind: str) -> Callable[[str, str, dict[str, Any]], None]:
    def show(args: str, body: str, names: dict[str, Any]) -> None:
        from . import display

        display.send_bundle({"text/plain": "<IPython.core.display.%s object>" % _MIME_CLASS[kind], kind: body})

    return show


_MIME_CLASS = {"text/html": "HTML", "text/markdown": "Markdown", "text/latex": "Latex", "image/svg+xml": "SVG",
               "application/javascript": "Javascript"}
for _name, _kind in (("html", "text/html"), ("HTML", "text/html"), ("markdown", "text/markdown"),
                     ("latex", "text/latex"), ("svg", "image/svg+xml"), ("SVG", "image/svg+xml"),
                     ("javascript", "application/javascript"), ("js", "application/javascript")):
    _CELL[_name] = _mime(_kind)


class CapturedIO:
    """What `%%capture name` keeps (IPython's fields): the cell's output, shown again by `show()`."""

    def __init__(self, stdout: str, stderr: str, outputs: list[dict[str, Any]]) -> None:
        self.stdout, self.stderr, self.outputs = stdout, stderr, outputs

    def show(self) -> None:
        from . import display

        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        for bundle in self.outputs:
            display.send_bundle(bundle)

    __call__ = show


@_cell_magic("capture")
def _capture(args: str, body: str, names: dict[str, Any]) -> None:
    from . import _kernel_set_up, display

    argv = shlex.split(args)
    target = next((arg for arg in argv if not arg.startswith("-")), None)
    out, err = io.StringIO(), io.StringIO()
    outputs: list[dict[str, Any]] = []
    real = sys.stdout, sys.stderr
    if "--no-stdout" not in argv:
        sys.stdout = out
    if "--no-stderr" not in argv:
        sys.stderr = err
    try:
        with display.captured(None if "--no-display" in argv else outputs):
            _kernel_set_up().run_source(body)
    finally:
        sys.stdout, sys.stderr = real
        if target is not None:
            names[target] = CapturedIO(out.getvalue(), err.getvalue(), outputs)


def pinfo(name: str, detail: bool) -> None:
    """`obj?` / `obj??`: its signature, docstring (`??`: source) and type, as IPython lists them."""
    import inspect

    frame = sys._getframe(1)
    try:
        value = eval(name, {**frame.f_globals, **frame.f_locals})
    except Exception:
        print("Object `%s` not found." % name)
        return
    if callable(value):
        try:
            print("Signature: %s%s" % (name.rsplit(".", 1)[-1], inspect.signature(value)))
        except (TypeError, ValueError):
            pass
    else:
        print("String form: %s" % _short(value))
    source = None
    if detail:
        try:
            source = inspect.getsource(value)
        except (TypeError, OSError):
            pass
    if source is not None:
        print("Source:\n%s" % source.rstrip("\n"))
    else:
        doc = inspect.getdoc(value)
        if doc:
            print("Docstring:%s%s" % ("\n" if "\n" in doc else " ", doc))
    print("Type:      %s" % type(value).__name__)


class Shell:
    """What `get_ipython()` gives in a cell: the magics above, by IPython's method names."""

    def __init__(self, names: dict[str, Any]) -> None:
        self.user_ns = names
        self.config: dict[str, Any] = {}

    def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> Any:
        return line_magic_call(name, line, self.user_ns)

    def run_cell_magic(self, name: str, line: str, body: str) -> Any:
        return cell(name, line, body, self.user_ns)

    def magic(self, text: str) -> Any:
        name, _, args = text.lstrip("%").partition(" ")
        return line_magic_call(name, args, self.user_ns)

    def system(self, command: str) -> None:
        import subprocess

        self.user_ns["_exit_code"] = subprocess.call(command, shell=True)

    def getoutput(self, command: str) -> SList:
        return getoutput(command)

    def run_cell(self, code: str) -> None:
        from . import _kernel_set_up

        _kernel_set_up().run_source(code)


def line_magic_call(name: str, args: str, names: dict[str, Any]) -> Any:
    function = _LINE.get(name)
    if function is None:
        raise UsageError("Line magic function `%%%s` not found." % name)
    return function(args, names)
