"""The code-interpreter kernel inside the guest: one long-lived namespace, cell after cell.

A context is one guest instance. Its first turn (the module's `turn` export) calls `setup()`;
then the host runs each cell as a turn of its own calling `cell(code, envs)`, which runs it as
IPython would — the value of a final expression is the main result, `display()` and figures left
open give display results, IPython's `!cmd`, `%magic` and `%%magic` work (magics.py), common
indentation is removed, a top-level `await` runs on the context's event loop — and reports what happens as
msgpack requests through the door: `stdout`, `stderr`, `result` (a MIME bundle), `error`.
Nothing is parsed from the guest's stdout. A bash context (E2B's `language="bash"`) runs its
cells with `bash_cell(code, envs)` instead: one shell session kept across cells.

A cell is over when its turn returns to the host, which no request can fake: the cell's own code
runs in this interpreter and can send any request it likes, so none of them ends a cell.
"""

from __future__ import annotations

import ast
import builtins
import io
import linecache
import os
import sys
import textwrap
import traceback
import types

from declaw_shell import door, tracebacks

from . import display as displays

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    import asyncio
    from typing import Any

    import declaw_shell

CELL_FILE = "<cell-%d>"
# Cells may `await` at the top level (IPython's autoawait): compiled with this flag, code that
# awaits is a coroutine (CO_COROUTINE) run on the context's event loop; other code runs as is.
TOP_LEVEL_AWAIT = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
CO_COROUTINE = 0x80  # inspect.CO_COROUTINE, without importing inspect
LAST_VALUE = "_declaw_last_value"  # where an awaiting cell's last expression is kept for display


class DoorStream(io.TextIOBase):
    """sys.stdout/sys.stderr of a cell: whole lines go to the host as they are written (a
    partial line at `flush()` or the end of the cell), in order with the cell's results, which
    travel through the same door."""

    # what the host shows as this context's output: a Popen child left on it writes there
    # straight (declaw_shell/subprocesses.py, spawn's `parent`)
    declaw_top = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        self.pending += text
        end = self.pending.rfind("\n") + 1
        if end:
            door.call(self.name, text=self.pending[:end])
            self.pending = self.pending[end:]
        return len(text)

    def flush(self) -> None:
        if self.pending:
            text, self.pending = self.pending, ""
            door.call(self.name, text=text)

    def isatty(self) -> bool:
        return False

    @property  # read-only, as on a real text stream (typeshed has a plain attribute)
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class Kernel:
    def __init__(self, cwd: str) -> None:
        self.count = 0
        # the event loop of cells that await, made by the first of them
        self.loop: asyncio.AbstractEventLoop | None = None
        module = types.ModuleType("__main__")
        module.__dict__.update(__builtins__=builtins, __name__="__main__")
        sys.modules["__main__"] = module
        self.namespace = module.__dict__
        self.namespace["display"] = displays.display
        self.namespace["get_ipython"] = self.shell  # IPython's, for code that calls its magics
        builtins.display = displays.display  # type: ignore[attr-defined]  # a builtin in IPython too
        import _declaw_boot

        _declaw_boot.patch_on_import("IPython.core.display_functions", displays.patch_ipython)
        _declaw_boot.patch_on_import("plotly.io", displays.patch_plotly)
        _declaw_boot.patch_on_import("PIL.Image", displays.patch_pil)
        _declaw_boot.patch_on_import("matplotlib.axes", lambda module: displays.patch_boxplot(module.Axes))
        _declaw_boot.patch_on_import("matplotlib.pyplot", displays.patch_boxplot)
        os.chdir(cwd)
        os.environ["PWD"] = cwd
        sys.path.insert(0, "")
        sys.argv = [""]
        self.stdout, self.stderr = DoorStream("stdout"), DoorStream("stderr")
        self.bash: declaw_shell.Session | None = None  # a bash context's shell session, made by its first cell

    def shell(self) -> Any:
        """What `get_ipython()` gives in a cell (magics.Shell: IPython's magic methods)."""
        from . import magics

        return magics.Shell(self.namespace)

    def run_cell(self, cell: dict[str, Any]) -> None:
        """Run one cell, reporting through the door."""
        self.count += 1
        envs = cell.get("envs") or {}
        saved = {key: os.environ.get(key) for key in envs}
        os.environ.update(envs)
        real = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr
        error = None
        try:
            displays.install_hooks()  # pyplot/PIL may have been imported since
            self._execute(cell["code"])
        except KeyboardInterrupt as exc:
            error = _error(exc, self._cell_frames(exc))
        except SystemExit as exc:  # ends the cell, not the kernel (IPython does the same)
            if exc.code not in (None, 0):
                error = _error(exc, None)
        except BaseException as exc:
            error = _error(exc, self._cell_frames(exc))
        finally:
            try:
                displays.flush_figures()
            except Exception:
                pass
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            sys.stdout, sys.stderr = real
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        if error is not None:
            door.call("error", **error)

    def run_bash(self, code: str, envs: dict[str, str]) -> None:
        """One cell of a bash context, through the sandbox shell in one session kept across
        cells (variables, functions, `cd`), as Jupyter's bash_kernel keeps one bash process;
        `envs` hold for this cell only. A non-zero status is the cell's error as bash_kernel
        reports it (no name, the status as the value); `exit` starts the next cell afresh."""
        import asyncio

        import declaw_shell

        self.count += 1
        if self.bash is None:
            self.bash = declaw_shell.Session(os.getcwd(), dict(os.environ))
            self.bash.stdout, self.bash.stderr = self.stdout, self.stderr
        session = self.bash
        state = session.state
        saved = {key: (state.variables.get(key), key in state.exported_names) for key in envs}
        state.variables.update(envs)
        state.exported_names.update(envs)
        real = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.stdout, self.stderr  # python3 in the cell writes here
        status = 1
        try:
            status = asyncio.run(session.executor.execute_script(code, state))
        except door.Interrupted:
            status = declaw_shell.EXIT_INTERRUPTED
        finally:
            for stream in (self.stdout, self.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            sys.stdout, sys.stderr = real
            for key, (value, exported) in saved.items():
                if value is None:
                    state.variables.pop(key, None)
                else:
                    state.variables[key] = value
                if not exported:
                    state.exported_names.discard(key)
            if session.executor.exited:
                self.bash = None
        if status:
            door.call("error", name="", value=str(status), traceback="")

    def _execute(self, code: str) -> None:
        self.run_source(textwrap.dedent(code))

    def run_source(self, source: str) -> None:
        """A cell's source (a cell magic's body too): IPython's escapes, then Python."""
        if "%" in source or "!" in source or "?" in source:  # IPython's escapes (magics.py)
            from . import magics

            split = magics.split_cell_magic(source)
            if split is not None:
                value = magics.cell(*split, self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    displays.display(value, main=True)
                return
            source = magics.transform(source)
        self.execute_source(source)

    def execute_source(self, source: str) -> None:
        """Run Python source as a cell does (a cell magic's body too): its last expression's
        value is the main result."""
        filename = CELL_FILE % self.count
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        tree = ast.parse(source, filename)
        if _awaits(tree):  # one coroutine for the whole cell, its last expression kept
            final_statement = tree.body[-1]
            last = final_statement if isinstance(final_statement, ast.Expr) else None
            if last is not None:
                tree.body[-1] = ast.copy_location(
                    ast.Assign(targets=[ast.Name(LAST_VALUE, ast.Store())], value=last.value), last)
                ast.fix_missing_locations(tree)
            self._run(compile(tree, filename, "exec", flags=TOP_LEVEL_AWAIT))
            value = self.namespace.pop(LAST_VALUE, None) if last is not None else None
        else:
            final = None
            ending = tree.body[-1] if tree.body else None
            if isinstance(ending, ast.Expr):
                final = ast.Expression(ending.value)
                tree.body.pop()
            if tree.body:
                exec(compile(tree, filename, "exec"), self.namespace)
            value = eval(compile(final, filename, "eval"), self.namespace) if final is not None else None
        if value is not None:
            self.namespace["_"] = value
            displays.display(value, main=True)

    def _run(self, code: types.CodeType) -> Any:
        """Run a cell that awaits at the top level: compiled with the flag, it is a coroutine,
        run to its end on the context's event loop (one per context, as IPython keeps one, so
        tasks a cell starts live on into the next; it is also the thread's current loop)."""
        if not code.co_flags & CO_COROUTINE:
            return eval(code, self.namespace)
        import asyncio

        if self.loop is None or self.loop.is_closed():
            import warnings

            self.loop = asyncio.new_event_loop()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                asyncio.set_event_loop(self.loop)
        return self.loop.run_until_complete(eval(code, self.namespace))

    def _cell_frames(self, exc: BaseException) -> types.TracebackType | None:
        """The traceback from the first frame of the user's cell on (none of ours)."""
        tb = exc.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        return tb


def _awaits(tree: ast.Module) -> bool:
    """Whether a cell awaits at its top level (`await`, `async for`/`with`, an async
    comprehension) rather than only inside the functions it defines."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Await, ast.AsyncFor, ast.AsyncWith)) or \
                (isinstance(node, ast.comprehension) and node.is_async):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _error(exc: BaseException, tb: types.TracebackType | None) -> dict[str, str]:
    lines = tracebacks.format_exception(exc, tb) if tb is not None else \
        traceback.format_exception_only(type(exc), exc)
    error = {"name": type(exc).__name__, "value": str(exc), "traceback": "".join(lines)}
    tracebacks.release(exc)
    return error


_kernel: Kernel | None = None


def setup(cwd: str) -> None:
    """The context's first turn: a fresh namespace in `cwd`."""
    global _kernel
    _kernel = Kernel(cwd)


def _kernel_set_up() -> Kernel:
    if _kernel is None:
        raise RuntimeError("the context's first turn (setup) has not run")
    return _kernel


def cell(code: str, envs: dict[str, str]) -> None:
    """One cell: a turn of its own, over when this returns."""
    _kernel_set_up().run_cell({"code": code, "envs": envs})


def bash_cell(code: str, envs: dict[str, str]) -> None:
    """One cell of a bash context: a turn of its own, over when this returns."""
    _kernel_set_up().run_bash(code, envs)
