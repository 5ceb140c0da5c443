"""`sqlite3`, the SQLite command-line shell, over Python's sqlite3 module (the guest's CPython has
SQLite 3.5x built in; the CLI program was missing: `sqlite3 data.db '.tables'` said "command not
found").

What agents use, as sqlite3 3.40's shell prints it: `sqlite3 [OPTIONS] [DB [SQL|.COMMAND]...]`
(each argument run in turn, stopping at the first error), or a script on stdin (errors reported
with their line, the rest run); several statements in one argument; the output modes list, csv,
json, line, column, table, box, markdown, html, quote, tabs, ascii, insert with `-header`,
`-separator`, `-nullvalue`, `-cmd`, `-bail`, `-readonly`; the dot commands .tables, .schema,
.indexes, .headers, .mode, .separator, .nullvalue, .import (CSV into a new or existing table),
.dump, .read, .output/.once, .print, .databases, .bail, .echo, .quit/.exit, .help; values printed
as SQLite prints them (reals with 15 significant digits and a decimal point, Inf, blobs raw).
Errors name the statement's problem as the shell does ("Error: in prepare, no such table: x",
"Parse error near line 2: ..."), exit status 1. Not here: interactive line editing, .excel,
.backup/.restore, .timer's figures, the shell's own extension functions.
"""

from __future__ import annotations

import io
import sqlite3

from bash_purepython.command.command import Command, CommandResult, InputKind, OutputKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MODES = ("list", "csv", "json", "line", "column", "table", "box", "markdown", "html", "quote", "tabs",
         "ascii", "insert")
HELP = """Usage: sqlite3 [OPTIONS] [FILENAME [SQL...]]
FILENAME is the name of an SQLite database. A new database is created
if the file does not previously exist. Defaults to :memory:.
OPTIONS include:
   -ascii -box -column -csv -html -json -line -list -markdown -quote -table -tabs
   -bail -batch -cmd COMMAND -echo -header -noheader -nullvalue TEXT -readonly
   -separator SEP -newline SEP -version -help
"""
DOT_HELP = """.bail on|off             Stop after hitting an error.  Default OFF
.databases               List names and files of attached databases
.dump ?TABLE?            Render database content as SQL
.echo on|off             Turn command echo on or off
.exit ?CODE?             Exit this program with return-code CODE
.headers on|off          Turn display of headers on or off
.help                    Show this message
.import FILE TABLE       Import data from FILE into TABLE (--csv, --skip N)
.indexes ?TABLE?         Show names of indexes
.mode MODE ?TABLE?       Set output mode
.nullvalue STRING        Use STRING in place of NULL values
.once FILE               Output for the next SQL command only to FILE
.output ?FILE?           Send output to FILE or stdout if FILE is omitted
.print STRING...         Print literal STRING
.quit                    Exit this program
.read FILE               Read input from FILE
.schema ?PATTERN?        Show the CREATE statements matching PATTERN
.separator COL ?ROW?     Change the column and row separators
.tables ?TABLE?          List names of tables matching LIKE pattern TABLE
"""


class Quit(Exception):
    def __init__(self, code: int = 0) -> None:
        self.code = code


class ShellError(Exception):
    """A dot command's error: said as `Error: ...`."""


def value_text(value: Any) -> str:
    """A value as the shell prints it in text modes."""
    if isinstance(value, float):
        if value != value:
            return ""  # NULL (SQLite has no NaN)
        if value in (float("inf"), float("-inf")):
            return "Inf" if value > 0 else "-Inf"
        text = "%.15g" % value
        if "e" in text:
            mantissa, exponent = text.split("e")
            return (mantissa if "." in mantissa else mantissa + ".0") + "e" + exponent
        return text if "." in text or "n" in text else text + ".0"
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _needs_quote(text: str, separator: str) -> bool:
    return text == "" or separator in text or any(c <= " " or c == '"' or c >= "\x7f" for c in text)


def _json_text(text: str) -> str:
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif char < " ":
            out.append("\\u%04x" % ord(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "X'%s'" % value.hex()
    if isinstance(value, (int, float)):
        return value_text(value)
    return "'" + str(value).replace("'", "''") + "'"


class Shell:
    """One run of the shell: its connection, settings and output."""

    def __init__(self, write_error: Any, cwd: str) -> None:
        self.write_error = write_error
        self.cwd = cwd
        self.out = io.StringIO()
        self.redirect: Any = None  # an .output/.once file
        self.once = False
        self.mode = "list"
        self.insert_table = "table"
        self.headers = False
        self.separator = "|"
        self.row_separator = "\n"
        self.null = ""
        self.bail = False
        self.echo = False
        self.readonly = False
        self.connection: sqlite3.Connection | None = None
        self.filename = ":memory:"
        self.failed_code = 1  # the status an argument's failed statement ends the shell with
        self.in_script = False
        self.depth = 0  # .read inside .read

    # -- the connection and the output ------------------------------------------------------------
    def path(self, name: str) -> str:
        import os

        return name if name.startswith((":", "file:")) or os.path.isabs(name) else os.path.join(self.cwd, name)

    def open(self, filename: str) -> None:
        self.filename = filename
        try:
            if self.readonly and not filename.startswith(":"):
                target = "file:%s?mode=ro" % self.path(filename)
                self.connection = sqlite3.connect(target, uri=True, isolation_level=None)
            else:
                self.connection = sqlite3.connect(self.path(filename), isolation_level=None,
                                                  uri=filename.startswith("file:"))
        except sqlite3.Error as error:
            raise ShellError('unable to open database "%s": %s' % (filename, error)) from None

    def db(self) -> sqlite3.Connection:
        if self.connection is None:
            self.open(self.filename)
        assert self.connection is not None
        return self.connection

    def write(self, text: str) -> None:
        (self.redirect if self.redirect is not None else self.out).write(text)

    def statement_done(self) -> None:
        """`.once`'s file closes after a script's next statement (an argument's `.once` lasts, as
        the shell's does)."""
        if self.once and self.in_script and self.redirect is not None:
            self.redirect.close()
            self.redirect, self.once = None, False

    # -- running ---------------------------------------------------------------------------------------
    def run_text(self, text: str, line: int | None = None) -> bool:
        """Run `text` (SQL statements, or one dot command); False after an error."""
        if text.lstrip().startswith("."):
            return self.run_dot(text.strip())
        for statement, at in _statements(text):
            if self.echo:
                self.write(statement.strip() + "\n")
            try:
                cursor = self.db().execute(statement)
                if cursor.description is not None:
                    self.show([c[0] for c in cursor.description], cursor.fetchall())
            except sqlite3.Error as error:
                # a constraint fails as the statement runs (its code shown), anything else as it is prepared
                code = getattr(error, "sqlite_errorcode", None)
                running = code is not None and code & 0xFF != 1  # SQLITE_ERROR is a prepare's; the rest a step's
                detail = "%s (%d)" % (error, code & 0xFF) if running and code is not None else str(error)
                if line is None:
                    self.write_error("Error: %s, %s\n" % ("stepping" if running else "in prepare", detail))
                    self.failed_code = (code & 0xFF) if running and code is not None else 1
                else:
                    self.write_error("%s error near line %d: %s\n" % ("Runtime" if running else "Parse",
                                                                      line + at, detail))
                return False
            except ShellError as error:
                self.write_error("Error: %s\n" % error)
                return False
            finally:
                self.statement_done()
        return True

    def run_script(self, script: str) -> int:
        """A script (stdin, .read): dot commands on lines of their own, SQL up to each complete
        statement; errors said and the rest run (unless -bail)."""
        status, pending, start = 0, "", 1
        self.in_script = True
        for number, line in enumerate(script.splitlines(keepends=True), 1):
            if not pending.strip() and line.lstrip().startswith("."):
                if not self.run_dot(line.strip()):
                    status = 1
                    if self.bail:
                        return status
                continue
            if not pending.strip():
                start = number
            pending += line
            if sqlite3.complete_statement(pending):
                if not self.run_text(pending, start):
                    status = 1
                    if self.bail:
                        return status
                pending = ""
        if pending.strip() and not self.run_text(pending, start):
            status = 1
        return status

    # -- output modes ----------------------------------------------------------------------------------
    def cell(self, value: Any) -> str:
        return self.null if value is None else value_text(value)

    def show(self, names: list[str], rows: list[tuple[Any, ...]]) -> None:  # noqa: C901 (one branch per mode)
        mode, write = self.mode, self.write
        if not rows:  # the shell writes a result's header with its first row
            return
        if mode in ("list", "tabs", "ascii"):
            separator = {"tabs": "\t", "ascii": "\x1f"}.get(mode, self.separator)
            ending = "\x1e" if mode == "ascii" else self.row_separator
            if self.headers:
                write(separator.join(names) + ending)
            for row in rows:
                write(separator.join(self.cell(v) for v in row) + ending)
        elif mode == "csv":
            separator = self.separator if self.separator != "|" else ","

            def field(value: Any) -> str:
                text = self.cell(value)
                if value is None or isinstance(value, (int, float)):
                    return text
                return '"%s"' % text.replace('"', '""') if _needs_quote(text, separator) else text

            if self.headers:
                write(separator.join(field(n) for n in names) + "\n")
            for row in rows:
                write(separator.join(field(v) for v in row) + "\n")
        elif mode == "json":
            if rows:
                records = []
                for row in rows:
                    items = []
                    for name, value in zip(names, row, strict=False):
                        text = "null" if value is None else (value_text(value) if isinstance(value, (int, float))
                                                             else _json_text(value_text(value)))
                        if text in ("Inf", "-Inf"):
                            text = "9.0e+999" if text == "Inf" else "-9.0e+999"
                        items.append("%s:%s" % (_json_text(name), text))
                    records.append("{" + ",".join(items) + "}")
                write("[" + ",\n".join(records) + "]\n")
        elif mode == "line":
            width = max([5] + [len(n) for n in names])  # the shell's names take 5 columns at least
            for index, row in enumerate(rows):
                if index:
                    write("\n")
                for name, value in zip(names, row, strict=False):
                    write("%*s = %s\n" % (width, name, self.cell(value)))
        elif mode == "column":
            cells = [[self.cell(v) for v in row] for row in rows]
            widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
            if self.headers:
                write("  ".join(n.ljust(w) for n, w in zip(names, widths, strict=False)) + "\n")
                write("  ".join("-" * w for w in widths) + "\n")
            for texts in cells:
                write("  ".join(c.ljust(w) for c, w in zip(texts, widths, strict=False)) + "\n")
        elif mode in ("table", "box", "markdown"):
            self.show_grid(names, [[self.cell(v) for v in row] for row in rows])
        elif mode == "html":
            if self.headers:
                write("<TR>" + "".join("<TH>%s</TH>\n" % _html(n) for n in names) + "</TR>\n")
            for row in rows:
                write("<TR>" + "".join("<TD>%s</TD>\n" % _html(self.cell(v)) for v in row) + "</TR>\n")
        elif mode == "quote":
            if self.headers:
                write(",".join(_sql_literal(n) for n in names) + "\n")
            for row in rows:
                write(",".join(_sql_literal(v) for v in row) + "\n")
        elif mode == "insert":
            for row in rows:
                write("INSERT INTO %s VALUES(%s);\n" % (_identifier(self.insert_table),
                                                      ",".join(_sql_literal(v) for v in row)))

    def show_grid(self, names: list[str], cells: list[list[str]]) -> None:
        if not names:
            return
        widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]

        def centred(text: str, width: int) -> str:
            left = (width - len(text)) // 2
            return " " * left + text + " " * (width - len(text) - left)

        write = self.write
        if self.mode == "markdown":
            write("| " + " | ".join(centred(n, w) for n, w in zip(names, widths, strict=False)) + " |\n")
            write("|" + "|".join("-" * (w + 2) for w in widths) + "|\n")
            for row in cells:
                write("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + " |\n")
            return
        if self.mode == "box":
            line, top, middle, bottom, side = "─", "┌┬┐", "├┼┤", "└┴┘", "│"
        else:
            line, top, middle, bottom, side = "-", "+++", "+++", "+++", "|"

        def rule(corners: str) -> str:
            return corners[0] + corners[1].join(line * (w + 2) for w in widths) + corners[2] + "\n"

        write(rule(top))
        write(side + side.join(" %s " % centred(n, w) for n, w in zip(names, widths, strict=False)) + side + "\n")
        write(rule(middle))
        for row in cells:
            write(side + side.join(" %s " % c.ljust(w) for c, w in zip(row, widths, strict=False)) + side + "\n")
        write(rule(bottom))

    # -- dot commands ----------------------------------------------------------------------------------
    def run_dot(self, line: str) -> bool:  # noqa: C901 (one branch per command)
        import shlex

        try:
            words = shlex.split(line[1:])
        except ValueError:
            words = line[1:].split()
        if not words:
            return True
        command, args = words[0], words[1:]
        try:
            if command in ("quit", "exit", "q"):
                raise Quit(int(args[0]) if command == "exit" and args else 0)
            if command == "help":
                self.write(DOT_HELP)
            elif command in ("headers", "header"):
                self.headers = _boolean(args)
            elif command == "mode":
                if not args:
                    self.write("current output mode: %s\n" % self.mode)
                elif args[0] not in MODES:
                    raise ShellError("mode should be one of: %s" % " ".join(MODES))
                else:
                    self.set_mode(args[0])
                    if args[0] == "insert" and len(args) > 1:
                        self.insert_table = args[1]
            elif command == "separator":
                if not args:
                    raise ShellError("usage: .separator COL ?ROW?")
                self.separator = _unescape(args[0])
                if len(args) > 1:
                    self.row_separator = _unescape(args[1])
            elif command == "nullvalue":
                self.null = args[0] if args else ""
            elif command == "bail":
                self.bail = _boolean(args)
            elif command == "echo":
                self.echo = _boolean(args)
            elif command == "print":
                self.write(" ".join(args) + "\n")
            elif command == "tables":
                self.tables(args[0] if args else "%")
            elif command == "schema":
                self.schema(args[0] if args and not args[0].startswith("-") else None)
            elif command in ("indexes", "indices"):
                pattern = args[0] if args else "%"
                rows = self.db().execute("SELECT name FROM sqlite_schema WHERE type='index' AND tbl_name LIKE ? "
                                         "ORDER BY 1", (pattern,)).fetchall()
                for (name,) in rows:
                    self.write(name + "\n")
            elif command == "databases":
                for _, name, file in self.db().execute("PRAGMA database_list").fetchall():
                    self.write('%s: %s r/%s\n' % (name, file or '""', "o" if self.readonly else "w"))
            elif command == "dump":
                self.dump(args[0] if args else None)
            elif command == "import":
                self.import_file(args)
            elif command == "read":
                if not args:
                    raise ShellError("usage: .read FILE")
                if self.depth >= 25:  # as the shell: 25 scripts deep
                    self.write_error("Input nesting limit (25) reached at line 1. Check recursion.\n")
                    return False
                with open(self.path(args[0]), encoding="utf-8", errors="replace") as handle:
                    script = handle.read()
                self.depth += 1
                try:
                    if self.run_script(script):
                        return False
                finally:
                    self.depth -= 1
            elif command in ("output", "once"):
                if self.redirect is not None:
                    self.redirect.close()
                    self.redirect = None
                if args and args[0] not in ("stdout", "-"):
                    try:
                        self.redirect = open(self.path(args[0]), "w", encoding="utf-8")
                    except OSError as error:
                        raise ShellError('cannot open "%s": %s' % (args[0], error.strerror)) from None
                    self.once = command == "once"
            elif command in ("timer", "width", "changes", "prompt", "show", "stats", "eqp", "explain"):
                pass  # display settings of the interactive shell: accepted, no effect here
            else:
                raise ShellError('unknown command or invalid arguments:  "%s". Enter ".help" for help'
                                 % command)
        except (ShellError, sqlite3.Error, OSError) as error:
            message = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            self.write_error("Error: %s\n" % message)
            return False
        return True

    def set_mode(self, mode: str) -> None:
        self.mode = mode
        if mode == "csv":
            self.separator = ","
        elif mode == "list" and self.separator in (",", "\t"):
            self.separator = "|"
        elif mode in ("table", "box", "markdown"):
            self.headers = True

    def tables(self, pattern: str) -> None:
        names = [name for (name,) in self.db().execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table','view') AND name NOT LIKE 'sqlite_%' "
            "AND name LIKE ? ORDER BY 1", (pattern,)).fetchall()]
        if not names:
            return
        width = max(len(n) for n in names)
        columns = max(1, 80 // (width + 2))
        rows = (len(names) + columns - 1) // columns
        for i in range(rows):
            line = ""
            for j in range(i, len(names), rows):
                line += ("" if j < rows else "  ") + names[j].ljust(width)
            self.write(line + "\n")

    def schema(self, pattern: str | None) -> None:
        rows = self.db().execute(
            "SELECT sql, type, name FROM sqlite_schema WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' "
            "AND (? IS NULL OR tbl_name LIKE ? OR name LIKE ?) ORDER BY rowid",
            (pattern, pattern, pattern)).fetchall()
        for sql, kind, name in rows:
            if kind == "view":  # the shell names a view's columns after it
                columns = [c[1] for c in self.db().execute('PRAGMA table_info("%s")' % name.replace('"', '""'))]
                sql += "\n/* %s(%s) */" % (name, ",".join(columns))
            self.write(sql + ";\n")

    def dump(self, pattern: str | None) -> None:
        """The database (or the tables matching `pattern`) as SQL, as the shell writes it: each
        table's CREATE and rows, then the indexes, triggers and views."""
        db, write = self.db(), self.write
        write("PRAGMA foreign_keys=OFF;\nBEGIN TRANSACTION;\n")
        like = pattern if pattern is not None else "%"
        tables = db.execute("SELECT name, sql FROM sqlite_schema WHERE type='table' AND sql IS NOT NULL "
                            "AND name NOT LIKE 'sqlite_%' AND tbl_name LIKE ? ORDER BY rowid", (like,)).fetchall()
        for name, sql in tables:
            write(sql + ";\n")
            for row in db.execute("SELECT * FROM %s" % _identifier(name, always=True)):
                write("INSERT INTO %s VALUES(%s);\n" % (_identifier(name), ",".join(_dump_literal(v) for v in row)))
        if pattern is None and db.execute("SELECT 1 FROM sqlite_schema WHERE name='sqlite_sequence'").fetchone():
            write("DELETE FROM sqlite_sequence;\n")
            for name, seq in db.execute("SELECT name, seq FROM sqlite_sequence"):
                write("INSERT INTO sqlite_sequence VALUES(%s,%s);\n" % (_sql_literal(name), seq))
        for (sql,) in db.execute("SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL AND type IN "
                                 "('index','trigger','view') AND name LIKE ? ORDER BY rowid", (like,)):
            write(sql + ";\n")
        write("COMMIT;\n")

    def import_file(self, args: list[str]) -> None:
        import csv

        skip, csv_mode, names = 0, self.mode == "csv", []
        index = 0
        while index < len(args):
            if args[index] == "--csv":
                csv_mode = True
            elif args[index] == "--skip" and index + 1 < len(args):
                index += 1
                skip = int(args[index])
            elif args[index].startswith("--"):
                pass  # --ascii, --schema: the defaults serve
            else:
                names.append(args[index])
            index += 1
        if len(names) != 2:
            raise ShellError("usage: .import FILE TABLE")
        path, table = names
        with open(self.path(path), encoding="utf-8", errors="replace", newline="") as handle:
            if csv_mode:
                rows = list(csv.reader(handle, delimiter=self.separator if self.separator != "|" else ","))
            else:
                rows = [line.rstrip("\r\n").split(self.separator) for line in handle]
        rows = rows[skip:]
        connection = self.db()
        quoted = '"%s"' % table.replace('"', '""')
        exists = connection.execute("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?", (table,)).fetchone()
        if not exists:
            if not rows:
                return
            header, rows = rows[0], rows[1:]
            columns = ", ".join('"%s" TEXT' % name.replace('"', '""') for name in header)
            connection.execute("CREATE TABLE IF NOT EXISTS %s(\n%s)" % (quoted, columns))  # (the shell's own words)
        width = len(connection.execute("SELECT * FROM %s LIMIT 0" % quoted).description or [])
        connection.execute("BEGIN")
        try:
            for row in rows:
                values: list[str | None] = [*row, *[None] * width][:width]
                connection.execute("INSERT INTO %s VALUES(%s)" % (quoted, ",".join("?" * width)), values)
            connection.execute("COMMIT")
        except sqlite3.Error:
            connection.execute("ROLLBACK")
            raise


def _identifier(name: str, always: bool = False) -> str:
    """A name as the shell writes it in SQL: bare when it is a plain identifier, else quoted."""
    import keyword

    plain = name.isidentifier() and name.isascii() and not keyword.iskeyword(name) and name.upper() not in _SQL_WORDS
    return name if plain and not always else '"%s"' % name.replace('"', '""')


_SQL_WORDS = frozenset("""ABORT ACTION ADD AFTER ALL ALTER ANALYZE AND AS ASC ATTACH AUTOINCREMENT BEFORE BEGIN
BETWEEN BY CASCADE CASE CAST CHECK COLLATE COLUMN COMMIT CONFLICT CONSTRAINT CREATE CROSS CURRENT_DATE CURRENT_TIME
CURRENT_TIMESTAMP DATABASE DEFAULT DEFERRABLE DEFERRED DELETE DESC DETACH DISTINCT DROP EACH ELSE END ESCAPE EXCEPT
EXCLUSIVE EXISTS EXPLAIN FAIL FOR FOREIGN FROM FULL GLOB GROUP HAVING IF IGNORE IMMEDIATE IN INDEX INDEXED INITIALLY
INNER INSERT INSTEAD INTERSECT INTO IS ISNULL JOIN KEY LEFT LIKE LIMIT MATCH NATURAL NO NOT NOTNULL NULL OF OFFSET ON
OR ORDER OUTER PLAN PRAGMA PRIMARY QUERY RAISE RECURSIVE REFERENCES REGEXP REINDEX RELEASE RENAME REPLACE RESTRICT
RIGHT ROLLBACK ROW SAVEPOINT SELECT SET TABLE TEMP TEMPORARY THEN TO TRANSACTION TRIGGER UNION UNIQUE UPDATE USING
VACUUM VALUES VIEW VIRTUAL WHEN WHERE WITH WITHOUT""".split())


def _dump_literal(value: Any) -> str:
    """A value in .dump's INSERT: text with newlines written through replace() and char(), as
    the shell does, so each INSERT is one line."""
    literal = _sql_literal(value)
    if isinstance(value, str):
        for char, code in (("\n", 10), ("\r", 13)):
            if char in value:
                literal = "replace(%s,'\\%s',char(%d))" % (literal.replace(char, "\\" + "nr"[code == 13]),
                                                          "nr"[code == 13], code)
    return literal


def _html(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#39;"))


def _boolean(args: list[str]) -> bool:
    if not args:
        raise ShellError("usage: on|off")
    return args[0].lower() in ("on", "yes", "true", "1")


def _unescape(text: str) -> str:
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def _statements(text: str) -> list[tuple[str, int]]:
    """`text` cut into complete statements (sqlite3.complete_statement: quotes, comments and
    triggers' BEGIN...END kept whole), each with the line its first word is on (from 0)."""
    out: list[tuple[str, int]] = []
    pending, before = "", 0  # before: newlines ahead of `pending` in text
    pieces = text.split(";")
    for number, piece in enumerate(pieces):
        pending += piece if number == len(pieces) - 1 else piece + ";"
        if number < len(pieces) - 1 and not sqlite3.complete_statement(pending):
            continue
        body = pending.lstrip()
        if body.strip(" \t\r\n;"):
            out.append((pending, before + pending[:len(pending) - len(body)].count("\n")))
        before += pending.count("\n")
        pending = ""
    return out


class SqliteCommand(Command):
    """sqlite3 [OPTIONS] [FILENAME [SQL...]] (module docstring)."""

    name = "sqlite3"
    input_kinds = frozenset({InputKind.TEXT, InputKind.ARGUMENTS})
    output_kinds = frozenset({OutputKind.TEXT})
    summary = "A command line interface for SQLite version 3"

    def run(self, invocation: Any) -> CommandResult:  # noqa: C901 (the options, one branch each)
        state = invocation.state
        shell = Shell(state.write_error, str(state.cwd))
        args = list(invocation.arguments)
        commands: list[str] = []
        rest: list[str] = []
        index = 0
        try:
            while index < len(args):
                arg = args[index]
                option = "-" + arg.lstrip("-") if arg.startswith("-") and len(arg) > 1 and not rest else None
                if option is None:
                    rest.append(arg)
                elif option in ("-header", "-headers"):
                    shell.headers = True
                elif option == "-noheader":
                    shell.headers = False
                elif option[1:] in MODES:
                    shell.set_mode(option[1:])
                elif option in ("-separator", "-newline", "-nullvalue", "-cmd", "-init"):
                    if index + 1 >= len(args):
                        state.write_error("sqlite3: Error: missing argument to %s\n" % arg)
                        return CommandResult(stdout="", exit_code=1)
                    index += 1
                    value = args[index]
                    if option == "-separator":
                        shell.separator = _unescape(value)
                    elif option == "-newline":
                        shell.row_separator = _unescape(value)
                    elif option == "-nullvalue":
                        shell.null = value
                    elif option == "-cmd":
                        commands.append(value)
                elif option == "-bail":
                    shell.bail = True
                elif option == "-echo":
                    shell.echo = True
                elif option == "-readonly":
                    shell.readonly = True
                elif option in ("-batch", "-interactive", "-safe", "-nofollow", "-memtrace", "-stats"):
                    pass
                elif option == "-version":
                    return CommandResult(stdout=sqlite3.sqlite_version + "\n", exit_code=0)
                elif option == "-help":
                    state.write_error(HELP)
                    return CommandResult(stdout="", exit_code=0)
                else:
                    state.write_error("sqlite3: Error: unknown option: %s\nUse -help for a list of options.\n" % arg)
                    return CommandResult(stdout="", exit_code=1)
                index += 1
            if rest:
                shell.filename = rest[0]
                if not rest[0].startswith(":"):
                    shell.open(rest[0])  # a folder that does not exist: said before any SQL
            status = 0
            for command in commands:
                if not shell.run_text(command) and shell.bail:
                    return CommandResult(stdout=shell.out.getvalue(), exit_code=1)
            if len(rest) > 1:
                for text in rest[1:]:
                    if not shell.run_text(text):
                        status = shell.failed_code
                        break
            else:
                stdin = invocation.stdin if invocation.stdin_kind == InputKind.TEXT and invocation.stdin else ""
                status = shell.run_script(stdin)
        except Quit as done:
            status = done.code
        except ShellError as error:
            state.write_error("Error: %s\n" % error)
            status = 1
        finally:
            if shell.redirect is not None:
                shell.redirect.close()
            if shell.connection is not None:
                shell.connection.close()
        return CommandResult(stdout=shell.out.getvalue(), exit_code=status)
