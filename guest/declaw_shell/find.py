"""`find`, with the expression language agents use.

The library's find knows -name, -iname, -type, -maxdepth and -mindepth only; anything else
(`-exec … {} \\;`, `-print0 | xargs -0`, `-not -path './.git/*'`, `-o`, `-size`, `-mtime`,
`-delete`) fails with "unrecognized arguments". This one parses GNU find's expressions:
operators `( )`, `!`/`-not`, `-a`/`-and`, `-o`/`-or`, `,`; tests -name -iname -path -ipath
-wholename -regex -iregex -type -size -empty -newer -mtime -mmin -atime -amin -ctime -cmin -user
-group -true -false -readable -writable -executable; actions -print -print0 -printf -delete
-exec/-execdir/-ok … `;` or `+`, -prune -quit; options -maxdepth -mindepth -depth -L/-H/-P
(-xdev, -mount, -noleaf, -daystart, -regextype are accepted). Entries are listed in sorted
order (GNU's is the file system's). `-exec` runs the shell's own programs; `-perm` and
ownership tests cannot mean anything under WASI (no modes, one user): `-user`/`-group` match
"user", `-perm` matches every entry.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import stat
import time

from bash_purepython.execute_command import ErrorDestination

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from bash_purepython.execute_command import ExecutionResult, StdinValue

    from .shells import Destination, GuestState, ShellFeatures

OPERATORS = {"(", ")", "!", "-not", "-a", "-and", "-o", "-or", ","}
NO_ARG_TESTS = {"-empty", "-true", "-false", "-readable", "-writable", "-executable", "-nouser", "-nogroup"}
ARG_TESTS = {"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-type",
             "-xtype", "-size", "-newer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-user",
             "-group", "-perm", "-links", "-inum", "-uid", "-gid", "-lname", "-ilname", "-samefile"}
ACTIONS = {"-print", "-print0", "-delete", "-prune", "-quit", "-ls", "-printf", "-fprint", "-exec", "-execdir",
           "-ok", "-okdir"}
OPTIONS_NO_ARG = {"-depth", "-d", "-xdev", "-mount", "-noleaf", "-daystart", "-ignore_readdir_race",
                  "-follow", "-nowarn", "-warn"}
OPTIONS_ARG = {"-maxdepth", "-mindepth", "-regextype"}
SIZE_UNITS = {"c": 1, "w": 2, "b": 512, "k": 1024, "M": 1 << 20, "G": 1 << 30}
TYPE_BITS = {"f": stat.S_ISREG, "d": stat.S_ISDIR, "l": stat.S_ISLNK, "p": stat.S_ISFIFO,
             "s": stat.S_ISSOCK, "b": stat.S_ISBLK, "c": stat.S_ISCHR}


class FindError(Exception):
    """A command line find refuses (status 1)."""


class Quit(Exception):
    """-quit: stop at once."""


class Node:
    def __init__(self, kind: str, *parts: Any) -> None:
        self.kind, self.parts = kind, parts


class Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.index = tokens, 0
        self.has_action = False
        self.options: dict[str, Any] = {"maxdepth": None, "mindepth": 0, "depth": False, "follow": False}

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.index += 1
        return token

    def parse(self) -> Node | None:
        if self.peek() is None:
            return None
        node = self.comma()
        if self.peek() is not None:
            raise FindError("find: paths must precede expression: `%s'" % self.peek()
                            if self.peek() != ")" else "find: invalid expression; you have too many ')'")
        return node

    def comma(self) -> Node:
        node = self.disjunction()
        while self.peek() == ",":
            self.take()
            node = Node("comma", node, self.disjunction())
        return node

    def disjunction(self) -> Node:
        node = self.conjunction()
        while self.peek() in ("-o", "-or"):
            self.take()
            node = Node("or", node, self.conjunction())
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.peek() is not None and self.peek() not in ("-o", "-or", ")", ","):
            if self.peek() in ("-a", "-and"):
                self.take()
            node = Node("and", node, self.negation())
        return node

    def negation(self) -> Node:
        if self.peek() in ("!", "-not"):
            self.take()
            return Node("not", self.negation())
        return self.primary()

    def primary(self) -> Node:  # noqa: C901 (find's expression grammar, one token at a time)
        token = self.take()
        if token is None:
            raise FindError("find: expected an expression at the end")
        if token == "(":
            node = self.comma()
            if self.take() != ")":
                raise FindError("find: invalid expression; I was expecting to find a ')' somewhere")
            return node
        if token in OPTIONS_NO_ARG:
            if token in ("-depth", "-d"):
                self.options["depth"] = True
            elif token == "-follow":
                self.options["follow"] = True
            return Node("true")
        if token in OPTIONS_ARG:
            value = self.argument(token)
            if token in ("-maxdepth", "-mindepth"):
                if not value.isdigit():
                    raise FindError("find: Expected a positive decimal integer argument to %s, but got `%s'"
                                    % (token, value))
                self.options[token[1:]] = int(value)
            return Node("true")
        if token in NO_ARG_TESTS:
            return Node(token)
        if token in ARG_TESTS:
            return Node(token, self.argument(token))
        if token in ("-exec", "-execdir", "-ok", "-okdir"):
            self.has_action = True
            command: list[str] = []
            while True:
                part = self.take()
                if part is None:
                    raise FindError("find: missing argument to `%s'" % token)
                if part == ";" or (part == "+" and command and command[-1] == "{}"):
                    break
                command.append(part)
            if not command:
                raise FindError("find: missing argument to `%s'" % token)
            return Node("exec", command, part == "+", token in ("-execdir", "-okdir"))
        if token in ("-printf", "-fprint"):
            self.has_action = True
            return Node(token, self.argument(token))
        if token in ACTIONS:
            if token not in ("-prune", "-quit"):
                self.has_action = True
            if token == "-delete":
                self.options["depth"] = True
            return Node(token)
        if token.startswith("-"):
            raise FindError("find: unknown predicate `%s'" % token)
        raise FindError("find: paths must precede expression: `%s'" % token)

    def argument(self, token: str) -> str:
        value = self.take()
        if value is None:
            raise FindError("find: missing argument to `%s'" % token)
        return value


def split_arguments(arguments: list[str]) -> tuple[bool, list[str], list[str]]:
    """(global -H/-L/-P, roots, expression tokens)."""
    args = list(arguments)
    follow = False
    while args and args[0] in ("-H", "-L", "-P"):
        follow = args.pop(0) == "-L"
    roots = []
    while args and not (args[0].startswith("-") and len(args[0]) > 1) and args[0] not in ("(", "!", ")", ","):
        roots.append(args.pop(0))
    return follow, roots, args


def _compare(spec: str, value: float) -> bool:
    """GNU's numeric argument: +N more than N, -N less than N, N exactly N."""
    if spec.startswith("+"):
        return value > int(spec[1:])
    if spec.startswith("-"):
        return value < int(spec[1:])
    return value == int(spec)


def _numeric(spec: str, token: str) -> None:
    if not re.fullmatch(r"[-+]?\d+", spec):
        raise FindError("find: invalid argument `%s' to `%s'" % (spec, token))


class Entry:
    def __init__(self, path: str, shown: str, depth: int, root: str) -> None:
        self.path, self.shown, self.depth, self.root = path, shown, depth, root
        self._lstat: os.stat_result | None = None
        self._stat: os.stat_result | None = None

    def lstat(self) -> os.stat_result:
        if self._lstat is None:
            self._lstat = os.lstat(self.path)
        return self._lstat

    def stat(self, follow: bool) -> os.stat_result:
        if not follow:
            return self.lstat()
        if self._stat is None:
            try:
                self._stat = os.stat(self.path)
            except OSError:
                self._stat = self.lstat()
        return self._stat


class Find:
    """One find run: walks the roots, evaluates the expression, writes through the shell."""

    def __init__(self, executor: ShellFeatures, scope: GuestState, tree: Node | None, options: dict[str, Any],
                 follow: bool, write_error: Callable[[str], object]) -> None:
        self.executor, self.scope, self.tree = executor, scope, tree
        self.options, self.follow = options, follow or options["follow"]
        self.write_error = write_error
        self.status = 0
        self.batches: dict[Node, list[tuple[str, Entry]]] = {}  # exec node -> paths for `-exec … {} +`
        self.quit = False
        self.now = time.time()
        self.pruned = False  # -prune ran for the entry being visited

    async def out(self, text: str) -> None:
        await self.scope.output_sink.write(text)

    def error(self, message: str) -> None:
        self.write_error("find: %s\n" % message)
        self.status = 1

    async def run(self, roots: list[str]) -> int:
        for root in roots:
            if self.quit:
                break
            path = str(self.scope.resolve_path(root))
            if not os.path.lexists(path):
                self.error("\u2018%s\u2019: No such file or directory" % root)
                continue
            try:
                await self.visit(Entry(path, root, 0, root))
            except Quit:
                break
        for node, paths in self.batches.items():
            if paths:
                await self.execute(node, paths)
        return self.status

    async def visit(self, entry: Entry) -> None:
        maxdepth, mindepth, depth_first = self.options["maxdepth"], self.options["mindepth"], self.options["depth"]
        try:
            info = entry.stat(self.follow)
        except OSError as exc:
            self.error("\u2018%s\u2019: %s" % (entry.shown, exc.strerror))
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        self.pruned = False
        if not depth_first and entry.depth >= mindepth:
            await self.evaluate(self.tree, entry)
        pruned = self.pruned
        if is_dir and not pruned and not self.quit and (maxdepth is None or entry.depth < maxdepth):
            try:
                names = sorted(os.listdir(entry.path))
            except OSError as exc:
                self.error("\u2018%s\u2019: %s" % (entry.shown, exc.strerror))
                names = []
            for name in names:
                if self.quit:
                    break
                shown = entry.shown + name if entry.shown.endswith("/") else entry.shown + "/" + name
                await self.visit(Entry(os.path.join(entry.path, name), shown, entry.depth + 1, entry.root))
        if depth_first and entry.depth >= mindepth and not self.quit:
            await self.evaluate(self.tree, entry)

    async def evaluate(self, node: Node | None, entry: Entry) -> bool:
        if node is None:
            await self.out(entry.shown + "\n")
            return True
        result = await self.test(node, entry)
        return result

    async def test(self, node: Node, entry: Entry) -> bool:  # noqa: C901 (one branch per find predicate)
        kind, parts = node.kind, node.parts
        if kind == "and":
            return await self.test(parts[0], entry) and await self.test(parts[1], entry)
        if kind == "or":
            return await self.test(parts[0], entry) or await self.test(parts[1], entry)
        if kind == "not":
            return not await self.test(parts[0], entry)
        if kind == "comma":
            await self.test(parts[0], entry)
            return await self.test(parts[1], entry)
        if kind in ("true", "-true", "-readable", "-writable", "-executable"):
            return True
        if kind in ("-false", "-nouser", "-nogroup"):
            return False
        name = os.path.basename(entry.shown.rstrip("/")) or entry.shown
        if kind in ("-name", "-iname"):
            return fnmatch.fnmatchcase(name.lower() if kind == "-iname" else name,
                                       parts[0].lower() if kind == "-iname" else parts[0])
        if kind in ("-path", "-wholename", "-ipath", "-iwholename"):
            folded = kind in ("-ipath", "-iwholename")
            return fnmatch.fnmatchcase(entry.shown.lower() if folded else entry.shown,
                                       parts[0].lower() if folded else parts[0])
        if kind in ("-regex", "-iregex"):
            return re.fullmatch(parts[0], entry.shown, re.IGNORECASE if kind == "-iregex" else 0) is not None
        if kind in ("-lname", "-ilname"):
            try:
                target = os.readlink(entry.path)
            except OSError:
                return False
            return fnmatch.fnmatchcase(target.lower() if kind == "-ilname" else target,
                                       parts[0].lower() if kind == "-ilname" else parts[0])
        info = entry.stat(self.follow)
        if kind in ("-type", "-xtype"):
            mode = entry.stat(not self.follow).st_mode if kind == "-xtype" else info.st_mode
            return any(TYPE_BITS.get(letter, lambda m: False)(mode) for letter in parts[0].split(","))
        if kind == "-size":
            spec = parts[0]
            unit = SIZE_UNITS.get(spec[-1], None)
            number = spec[:-1] if unit is not None else spec
            _numeric(number, "-size")
            size = math.ceil(info.st_size / (unit or 512))
            return _compare(number, size)
        if kind == "-empty":
            if stat.S_ISDIR(info.st_mode):
                try:
                    return not os.listdir(entry.path)
                except OSError:
                    return False
            return stat.S_ISREG(info.st_mode) and info.st_size == 0
        if kind == "-newer":
            try:
                other = os.stat(self.scope.resolve_path(parts[0]))
            except OSError:
                raise FindError("find: \u2018%s\u2019: No such file or directory" % parts[0]) from None
            return info.st_mtime > other.st_mtime
        if kind in ("-mtime", "-atime", "-ctime", "-mmin", "-amin", "-cmin"):
            _numeric(parts[0], kind)
            stamp = {"m": info.st_mtime, "a": info.st_atime, "c": info.st_ctime}[kind[1]]
            unit = 60 if kind.endswith("min") else 86400
            age = (self.now - stamp) / unit
            return _compare(parts[0], math.ceil(age) if unit == 60 else math.floor(age))
        if kind in ("-user", "-group"):
            return parts[0] in ("user", "1000")
        if kind in ("-uid", "-gid"):
            return _compare(parts[0], 1000)
        if kind in ("-perm", "-inum", "-links", "-samefile"):
            return True
        if kind == "-print":
            await self.out(entry.shown + "\n")
            return True
        if kind == "-print0":
            await self.out(entry.shown + "\0")
            return True
        if kind in ("-printf", "-fprint"):
            await self.out(self.format(parts[0], entry, info) if kind == "-printf" else entry.shown + "\n")
            return True
        if kind == "-ls":
            await self.out("%s\n" % entry.shown)
            return True
        if kind == "-prune":
            self.pruned = True
            return True
        if kind == "-quit":
            self.quit = True
            raise Quit()
        if kind == "-delete":
            try:
                if stat.S_ISDIR(entry.lstat().st_mode):
                    os.rmdir(entry.path)
                else:
                    os.unlink(entry.path)
            except OSError as exc:
                self.error("cannot delete \u2018%s\u2019: %s" % (entry.shown, exc.strerror))
                return False
            return True
        if kind == "exec":
            command, batch, in_dir = parts
            shown = "./" + name if in_dir else entry.shown
            if batch:
                self.batches.setdefault(node, []).append((shown, entry))
                return True
            return await self.execute(node, [(shown, entry)]) == 0
        raise FindError("find: unknown predicate `%s'" % kind)

    async def execute(self, node: Node, items: list[tuple[str, Entry]]) -> int:
        command, batch, in_dir = node.parts
        shown = [s for s, _ in items]
        if batch:
            argv = [a for part in command for a in (shown if part == "{}" else [part])]
        else:
            argv = [part.replace("{}", shown[0]) for part in command]
        scope = self.scope
        if in_dir:
            scope = self.scope.copy()
            scope.cwd = scope.resolve_path(os.path.dirname(items[0][1].path))
        result = await self.executor.dispatch(argv[0], argv[1:], None, ErrorDestination.STDERR, scope,
                                              attached_to_terminal=scope.is_attached_to_terminal(),
                                              skip_functions=True)
        await self.executor.drain_to_sink(result, scope)
        if batch and result.exit_code != 0:
            self.status = 1
        return result.exit_code

    @staticmethod
    def format(template: str, entry: Entry, info: os.stat_result) -> str:
        """-printf's directives: %p %f %h %P %s %d %m %M? %t %T@ %y %%, and \\n \\t \\0."""
        out: list[str] = []
        index = 0
        name = os.path.basename(entry.shown.rstrip("/")) or entry.shown
        while index < len(template):
            char = template[index]
            if char == "\\" and index + 1 < len(template):
                escape = template[index + 1]
                out.append({"n": "\n", "t": "\t", "0": "\0", "\\": "\\", "a": "\a", "r": "\r"}.get(escape, escape))
                index += 2
                continue
            if char == "%" and index + 1 < len(template):
                directive = template[index + 1]
                index += 2
                if directive == "T" and index < len(template):
                    index += 1
                    out.append("%.10f" % info.st_mtime)
                    continue
                head = os.path.dirname(entry.shown.rstrip("/"))
                values = {"p": entry.shown, "f": name, "h": head or ".", "s": str(info.st_size),
                          "d": str(entry.depth), "%": "%", "m": "%o" % (info.st_mode & 0o777),
                          "y": "d" if stat.S_ISDIR(info.st_mode) else "l" if stat.S_ISLNK(info.st_mode) else "f",
                          "t": time.ctime(info.st_mtime), "u": "user", "g": "user",
                          "P": entry.shown[len(entry.root):].lstrip("/")}
                out.append(values.get(directive, "%" + directive))
                continue
            out.append(char)
            index += 1
        return "".join(out)


async def run(executor: ShellFeatures, arguments: list[str], stdin: StdinValue | None, error_destination: Destination,
              state: GuestState, in_pipeline: bool, attached: bool) -> ExecutionResult:
    write_error = executor.error_sink(error_destination, state, state.output_sink.write_sync)
    follow, roots, tokens = split_arguments(arguments)
    try:
        parser = Parser(tokens)
        tree = parser.parse()
    except FindError as exc:
        write_error("%s\n" % exc)
        return executor.empty(1)
    if tree is not None and not parser.has_action:
        tree = Node("and", tree, Node("-print"))

    async def body(scope: GuestState) -> int:
        finder = Find(executor, scope, tree, parser.options, follow, scope.write_error)
        try:
            return await finder.run(roots or ["."])
        except FindError as exc:
            scope.write_error("%s\n" % exc)
            return 1

    return await executor.run_compound(body, stdin, error_destination, state, in_pipeline, attached)
