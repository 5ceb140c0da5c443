"""Guest-side start-up: runs a command line in the in-guest shell, and makes `python3 ARGS`
behave as CPython's command line.

Cold path: the guest's main program, as
``python /usr/local/lib/declaw/_declaw_boot.py --shell CWD SCRIPT`` (a command line),
``... --pty CWD`` (an interactive shell) or
``... CWD [python options] (-c CODE | -m MOD | FILE | -) ARGS`` (python3 alone).
Warm path: imported when the snapshot is built; each guest's first turn calls `shell()`,
`kernel()` or `start()`, which first renew what the snapshot froze (environment, random
seeds, tempfile names). A run_code context runs as turns on both paths: `kernel()` first (on
the cold path after loading this file), then one turn per cell.
The reactor runs CPython isolated (no site, no PYTHONPATH, no script folder on sys.path), so
this puts back what a user of `python3` expects: the working directory, `sys.argv`, a fresh
`__main__`, the script's folder (or the cwd for -c/-m) on `sys.path`, tracebacks that start at
the user's code, and an asyncio whose default loop works without `socketpair`.
"""

from __future__ import annotations

import io
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: start-up stays free
    import importlib.machinery
    from collections.abc import Callable, Iterable
    from types import ModuleType
    from typing import IO, Any, NoReturn

GUEST_SITE = "/usr/local/lib/declaw-site"  # declaw_shell and what it uses, byte-compiled
for _folder in (os.path.dirname(os.path.abspath(__file__)), GUEST_SITE):
    if _folder not in sys.path:
        sys.path.insert(0, _folder)


def _install_default_modes() -> None:
    """WASI has no permission bits: `os.stat` reports the file type alone (mode 0o000). Report
    what a fresh Linux file would have (0o644, directories 0o755, links 0o777), so `ls -l`,
    `stat` and user code see an ordinary system."""
    import stat as st

    extra = ("st_atime", "st_mtime", "st_ctime", "st_atime_ns", "st_mtime_ns", "st_ctime_ns",
             "st_blksize", "st_blocks", "st_rdev")
    perms = {st.S_IFDIR: 0o755, st.S_IFLNK: 0o777}

    def with_modes(fn: Callable[..., os.stat_result]) -> Callable[..., os.stat_result]:
        if getattr(fn, "_declaw_modes", False):
            return fn

        def wrapper(*args: Any, **kwargs: Any) -> os.stat_result:
            result = fn(*args, **kwargs)
            if result.st_mode & 0o7777:
                return result
            values = list(result)
            values[0] = result.st_mode | perms.get(st.S_IFMT(result.st_mode), 0o644)
            fields = {k: getattr(result, k) for k in extra if hasattr(result, k)}
            if not fields.get("st_blocks"):
                fields["st_blocks"] = _blocks(result.st_mode, result.st_size)
            return os.stat_result(values, fields)

        wrapper._declaw_modes = True  # type: ignore[attr-defined]  # marks the replacement as ours
        wrapper.__wrapped__ = fn  # type: ignore[attr-defined]  # as functools.wraps sets it
        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    def _blocks(mode: int, size: int) -> int:
        """WASI reports no blocks (0): what ext4 would allocate, in 512-byte units (a folder 4 KiB,
        a file its size rounded up to 4 KiB), so `du`, `ls -s` and `stat` are not all zero."""
        if st.S_ISDIR(mode):
            return 8
        if st.S_ISREG(mode):
            return -(-size // 4096) * 8
        return 0

    os.stat = with_modes(os.stat)
    os.lstat = with_modes(os.lstat)
    os.fstat = with_modes(os.fstat)


_install_default_modes()


def _install_unlink_slash() -> None:
    """Linux never unlinks a name written with a trailing slash: EISDIR for a folder, ENOTDIR
    for anything else (a link to a folder included: it is not followed), ENOENT for nothing.
    WASI follows a link there (EISDIR); rmdir's slash is fixed on the host side
    (declaw_wasm/_wasm/paths.py), where shadowing unlink would slow every unlink down."""
    import errno
    import stat as st

    def slashed(path: int | str | bytes | os.PathLike[str] | os.PathLike[bytes]) -> str | bytes | None:
        if isinstance(path, int):
            return None
        raw = os.fspath(path)
        if isinstance(raw, str):
            return raw if raw.endswith("/") and raw.strip("/") else None
        return raw if raw.endswith(b"/") and raw.strip(b"/") else None

    def with_slash_rule(fn: Callable[..., None]) -> Callable[..., None]:
        def unlink(path: Any, *, dir_fd: int | None = None) -> None:
            raw = slashed(path) if dir_fd is None else None
            if raw is None:
                return fn(path, dir_fd=dir_fd)
            try:
                mode = os.lstat(raw.rstrip("/") if isinstance(raw, str) else raw.rstrip(b"/")).st_mode
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, path) from None
            code = errno.EISDIR if st.S_ISDIR(mode) else errno.ENOTDIR
            raise OSError(code, os.strerror(code), path)

        unlink.__name__ = fn.__name__
        unlink.__doc__ = fn.__doc__
        unlink.__wrapped__ = fn  # type: ignore[attr-defined]  # as functools.wraps sets it
        if fn in os.supports_dir_fd:
            os.supports_dir_fd.add(unlink)
        return unlink

    if not hasattr(os.unlink, "__wrapped__"):
        os.unlink = with_slash_rule(os.unlink)
        os.remove = with_slash_rule(os.remove)


_install_unlink_slash()

USAGE = "usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
VERSION = "Python %d.%d.%d\n" % sys.version_info[:3]
IGNORED_FLAGS = set("bBdEhiIOqsSuvx")


def start(cwd: str, args: Iterable[str], env: dict[str, str], profile: dict[str, Any] | None = None) -> None:
    """The warm path's entry: make this instance the command's, then run it; never returns."""
    _renew(env, profile)
    _finish(_status_of(main, cwd, list(args)))


def shell(cwd: str, script: str, env: dict[str, str], tty: bool = False,
          profile: dict[str, Any] | None = None) -> None:
    """The warm path's entry for a command line (`tty`: an interactive shell on a PTY)."""
    _renew(env, profile, programs=False)
    _finish(_status_of(_shell, cwd, script, env, tty))


def park(profile: dict[str, Any] | None = None) -> None:
    """A parked guest's first turn, before its command line is known: apply the sandbox's
    template, and run a throw-away line through the shell (`true`, and `python3 -c pass`), so
    that the pages a command line touches (~1500 copy-on-write faults, several ms) are this
    instance's own before the line arrives. The line's turn (`shell(..., profile=None)`) then
    renews what a fresh guest would have: the environment, working directory, seeds and
    tempfile names. The throw-away line changes no file, and its `python3` runs no atexit
    handler (running them would also forget them: the line's program must find them)."""
    import atexit

    if profile:
        _apply_profile(profile)
    _renew(dict(os.environ), programs=False)
    _as_the_system_python()
    import declaw_shell

    run_exitfuncs = atexit._run_exitfuncs
    atexit._run_exitfuncs = lambda: None
    try:
        declaw_shell.run_command("/", "true && python3 -c pass", dict(os.environ))
    finally:
        atexit._run_exitfuncs = run_exitfuncs


def kernel(cwd: str, env: dict[str, str], profile: dict[str, Any] | None = None) -> None:
    """A code context's first turn (both paths): set up the kernel and return; each cell is a
    turn of its own (`declaw_kernel.cell`), until the host stops the guest."""
    _renew(env, profile)
    _as_the_system_python()
    import declaw_kernel
    from declaw_posix import signals

    signals.IN_KERNEL[0] = True  # a signal left at SIG_DFL ends the interpreter, as it ends a kernel
    declaw_kernel.setup(cwd)


RUNTIME_ZIP = "/usr/local/lib/python315.zip"


def _apply_profile(profile: dict[str, Any]) -> None:
    """The sandbox's template: folders of packages to import from (user installs, the
    template's, the bundle: after the runtime's own, so they can add but never replace), and
    for `base`, the runtime's third-party packages hidden (stdlib only)."""
    for folder in profile.get("paths", ()):
        if folder not in sys.path:
            sys.path.append(folder)
    if profile.get("hidden"):
        _hide(frozenset(profile["hidden"]) - sys.stdlib_module_names)


def _hide(hidden: frozenset[str]) -> None:
    """Forget the runtime's third-party packages (top-level names in `hidden`) that the snapshot
    imported, and make the runtime's zip not find them: `import numpy` fails as on a bare Python
    (from the import system itself, so no frame of ours in the traceback). The same names
    installed elsewhere (pip) still import."""
    # a marker on sys: pip (declaw_shell/pip.py) leaves them out of its lists too
    sys._declaw_hiding = True  # type: ignore[attr-defined]

    # Only the top-level modules leave sys.modules, and they are kept alive: touching every
    # submodule the snapshot loaded (~1000) costs ~28 ms per start in copy-on-write faults, and
    # freeing them more. `import numpy` (and so `import numpy.linalg`) then fails; only
    # `from numpy.linalg import x`, for a submodule the snapshot already loaded, still works.
    kept = sys.__dict__.setdefault("_declaw_hidden_modules", [])
    for name in hidden:
        module = sys.modules.pop(name, None)
        if module is not None:
            kept.append(module)
            if not str(getattr(module, "__file__", "")).startswith(RUNTIME_ZIP + "/"):
                sys.modules[name] = module  # not the runtime's: leave it

    class HidingZip:
        """The zip's importer, minus the hidden top-level names."""

        def __init__(self, inner: zipimport.zipimporter) -> None:
            self._inner = inner

        def find_spec(self, fullname: str, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
            if fullname in hidden:
                return None
            return self._inner.find_spec(fullname, target)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    import zipimport

    sys.path_importer_cache[RUNTIME_ZIP] = HidingZip(zipimport.zipimporter(RUNTIME_ZIP))


def _as_the_system_python() -> None:
    """What every program here expects of its interpreter, whatever the entry."""
    sys.executable = "/usr/local/bin/python3"
    _install_import_patches()


def _shell(cwd: str, script: str, env: dict[str, str], tty: bool) -> int:
    _as_the_system_python()
    import declaw_shell

    if tty:
        return declaw_shell.run_terminal(cwd, env)
    return declaw_shell.run_command(cwd, script, env)


class _ProcessExit(BaseException):
    """`os._exit(n)` inside a pipeline stage: ends that stage, not the whole guest."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def run_process(cwd: str, args: Iterable[str], env: dict[str, str], stdin: IO[str], stdout: IO[str],
                stderr: IO[str]) -> int:
    """`python3 ARGS` as a stage of the in-guest shell, looking from the inside like a process
    of its own: its own `__main__`, argv, environment, working directory, standard streams,
    exit status and atexit handlers; all put back afterwards, with what else it may change in the
    interpreter (declaw_posix/process.py: the standard library's modules it imports stay loaded)."""
    import atexit

    global _PROCESS
    from declaw_posix import process

    _PROCESS = process  # (this module's copy: on the cold path the boot's __main__ is another)
    saved = (sys.stdin, sys.stdout, sys.stderr, sys.argv, list(sys.path), dict(os.environ),
             os.getcwd(), sys.modules.get("__main__"), os._exit, sys.orig_argv)
    interpreter = process.program_starting(sys.path)  # what else it may change (declaw_posix/process.py)
    streams = process.program_streams(stdin, stdout, stderr)

    def _exit(status: int) -> NoReturn:
        raise _ProcessExit(status)

    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    os.environ.clear()
    os.environ.update(env)
    os._exit = _exit
    # the shell's event loop and task are running below us: hide them, so that the program's
    # own asyncio.run() works
    aio: Any = sys.modules.get("asyncio")  # its private running-loop and task functions
    shell_loop = aio.events._get_running_loop() if aio is not None else None
    shell_task = aio.current_task(shell_loop) if shell_loop is not None else None
    if shell_loop is not None:
        if shell_task is not None:
            aio.tasks._leave_task(shell_loop, shell_task)
        aio.events._set_running_loop(None)
    try:
        try:
            status = _status_of(main, cwd, list(args))
            atexit._run_exitfuncs()
            _drain_children()
        except _ProcessExit as exc:
            atexit._clear()  # os._exit: its handlers never run, not even later
            status = int(exc.code) & 0xFF
        except BaseException:  # stopped by `timeout` (declaw_shell/deadlines.py)
            atexit._clear()
            raise
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        return status
    finally:
        (sys.stdin, sys.stdout, sys.stderr, sys.argv, sys.path[:], environ, cwd_before, main_module,
         os._exit, sys.orig_argv) = saved
        os.environ.clear()
        os.environ.update(environ)
        try:
            os.chdir(cwd_before)
        except OSError:
            pass
        if main_module is not None:
            sys.modules["__main__"] = main_module
        if shell_loop is not None:
            aio.events._set_running_loop(shell_loop)
            if shell_task is not None:
                aio.tasks._enter_task(shell_loop, shell_task)
        process.program_streams_end(streams)
        process.program_ended(interpreter)


def _renew(env: dict[str, str], profile: dict[str, Any] | None = None, programs: bool = True) -> None:
    """Undo what a snapshot taken at build time would otherwise share with every instance, and
    apply the sandbox's template. `programs`: False for a shell, whose programs each get a fresh
    start of their own (run_process): only what the shell itself uses is renewed."""
    if profile:
        _apply_profile(profile)
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]  # also unsetenv: C code sees the same environment
    os.environ.update(env)
    from declaw_posix import process

    process.fresh_start(programs)  # seeds, tempfile's names


def _status_of(fn: Callable[..., int], *args: Any) -> int:
    from declaw_posix.signals import SignalExit

    try:
        return fn(*args)
    except SystemExit as exc:
        return _exit_status(exc)
    except SignalExit as exc:  # a signal's default action ended the program: no atexit handlers
        import atexit

        atexit._clear()
        return exc.status


def main(cwd: str, args: list[str]) -> int:
    """`python3 ARGS`: its timers and signal handlers are its own (declaw_posix/signals.py)."""
    from declaw_posix import signals

    signals.program_started()
    try:
        return _main(cwd, args)
    finally:
        signals.program_ended()


def _main(cwd: str, args: list[str]) -> int:
    try:
        os.chdir(cwd)
    except OSError as exc:
        sys.stderr.write("python3: can't change to %s: %s\n" % (cwd, exc.strerror))
        return 2
    os.environ["PWD"] = cwd
    _as_the_system_python()
    sys.orig_argv = [sys.executable, *args]
    _unbuffered(bool(os.environ.get("PYTHONUNBUFFERED")))
    _python_path(args)
    _warning_options([option.strip() for option in os.environ.get("PYTHONWARNINGS", "").split(",") if option.strip()])

    while args and args[0].startswith("-") and args[0] != "-":
        opt = args.pop(0)
        if opt in ("-V", "--version"):
            sys.stdout.write(VERSION)
            return 0
        if opt == "--":
            break
        if opt.startswith("-c"):
            code = opt[2:] or (args.pop(0) if args else None)
            if code is None:
                return _usage("Argument expected for the -c option")
            sys.argv = ["-c", *args]
            sys.path.insert(0, "")
            return _run_source(code, "<string>", None)
        if opt.startswith("-m"):
            module = opt[2:] or (args.pop(0) if args else None)
            if module is None:
                return _usage("Argument expected for the -m option")
            sys.argv = [module, *args]
            sys.path.insert(0, os.getcwd())
            return _run_module(module)
        if opt.startswith(("-W", "-X")):
            if not _interpreter_option(opt, args):
                return _usage("Argument expected for the %s option" % opt)
            continue
        if not all(ch in IGNORED_FLAGS for ch in opt[1:]):
            return _usage("Unknown option: %s" % opt)
        _unbuffered("u" in opt)

    if not args and _isatty(sys.stdin):
        sys.argv = [""]
        return _interactive()
    if not args or args[0] == "-":
        sys.argv = ["-", *args[1:]] if args else [""]
        sys.path.insert(0, "")
        return _run_source(sys.stdin.read(), "<stdin>", None)

    path = args[0]
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        sys.stderr.write("python3: can't open file %r: [Errno %s] %s\n"
                         % (os.path.abspath(path), exc.errno, exc.strerror))
        return 2
    sys.argv = list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    return _run_source(source, path, os.path.abspath(path))


class _WriteThrough:
    """A text stream whose every write is flushed: `python3 -u`, PYTHONUNBUFFERED (a server's
    log read while it runs)."""

    def __init__(self, inner: IO[str]) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        written = self._inner.write(text)
        self._inner.flush()
        return written

    def writelines(self, lines: Iterable[str]) -> None:
        self._inner.writelines(lines)
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _python_path(args: list[str]) -> None:
    """PYTHONPATH's folders on sys.path (ahead of everything but the program's own folder, which
    goes first later), absolute against the working folder ("" is that folder), as CPython puts
    them; not with -E or -I before the program (`PYTHONPATH=src python3 -m pkg.mod`)."""
    for arg in args:
        if not arg.startswith("-") or arg.startswith(("--", "-c", "-m", "-W", "-X")) or arg == "-":
            break
        if "E" in arg or "I" in arg:
            return
    value = os.environ.get("PYTHONPATH")
    if value:
        sys.path[:0] = [os.path.abspath(entry) if entry else os.getcwd() for entry in value.split(":")]


def _unbuffered(asked: bool) -> None:
    """If `asked`: the program's stdout and stderr flushed at every write (run_process puts them
    back)."""
    if not asked:
        return
    if not isinstance(sys.stdout, _WriteThrough):
        sys.stdout = _WriteThrough(sys.stdout)
    if not isinstance(sys.stderr, _WriteThrough):
        sys.stderr = _WriteThrough(sys.stderr)


def _run_module(module: str) -> int:
    """`-m MODULE`, as CPython runs it (runpy's private _run_module_as_main)."""
    import runpy

    runner: Any = runpy
    return _run_user(lambda: runner._run_module_as_main(module, alter_argv=True))


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except Exception:
        return False


def _interactive() -> int:
    """The REPL, for `python3` typed at a PTY's prompt."""
    import builtins
    import code
    import types

    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__builtins__=builtins)
    sys.modules["__main__"] = main_module
    for name in ("exit", "quit"):  # site would add these; the reactor runs without site
        if not hasattr(builtins, name):
            setattr(builtins, name, _Quitter(name))

    class Console(code.InteractiveConsole):
        def raw_input(self, prompt: str = "") -> str:
            sys.stdout.write(prompt)
            sys.stdout.flush()
            try:
                line = sys.stdin.readline()
            except Exception as exc:  # ^C at the prompt
                if type(exc).__name__ == "Interrupted":
                    raise KeyboardInterrupt from None
                raise
            if not line:
                raise EOFError
            return line.rstrip("\n")

    banner = "Python %s on %s\nType \"help\", \"copyright\", \"credits\" or \"license\" for more information." % (
        sys.version, sys.platform)
    try:
        Console(main_module.__dict__).interact(banner=banner, exitmsg="")
    except SystemExit as exc:
        return _exit_status(exc)
    return 0


class _Quitter:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code: object = None) -> None:
        raise SystemExit(code)


def _usage(message: str) -> int:
    sys.stderr.write(message + "\n" + USAGE + "Try `python -h' for more information.\n")
    return 2


def _run_source(source: str | bytes, filename: str, file_path: str | None) -> int:
    """Compile and run `source` as a fresh `__main__`."""
    import types

    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__builtins__=__builtins__, __spec__=None, __loader__=None)
    if file_path is not None:
        main_module.__file__ = file_path
        main_module.__cached__ = None  # type: ignore[attr-defined]  # a module attribute typeshed leaves out
    sys.modules["__main__"] = main_module
    if file_path is None and isinstance(source, str):
        import linecache  # so tracebacks of -c code show its lines, as CPython's do

        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)

    def run() -> None:
        exec(compile(source, filename, "exec", dont_inherit=True), main_module.__dict__)

    return _run_user(run)


def _interpreter_option(opt: str, args: list[str]) -> bool:
    """`-W ARG` (a warnings filter) or `-X ARG` (ignored), joined or not; False if ARG is missing."""
    value = opt[2:] or (args.pop(0) if args else None)
    if value is None:
        return False
    if opt.startswith("-W"):
        _warning_options([value])
    return True


def _warning_options(options: list[str]) -> None:
    """PYTHONWARNINGS' and `-W`'s filters, as CPython applies them at its start (an invalid one
    is reported on stderr and ignored)."""
    if options:
        import warnings

        warnings._processoptions(options)  # type: ignore[attr-defined]  # CPython's own, for -W


_PROCESS: Any = None  # declaw_posix.process, once the guest's patches are installed


def _run_user(run: Callable[[], object]) -> int:
    """Run user code; an uncaught exception prints as CPython prints it (without our frames)."""
    try:
        try:
            _user_code(run)
        finally:
            if _PROCESS is not None:  # bound before the program ran: it may empty sys.modules
                _PROCESS.code_ended()  # builtins and modules back for what follows
    except (SystemExit, _ProcessExit):
        raise
    except BaseException as exc:
        if getattr(exc, "passes_through_programs", False):  # `timeout` stopping the program
            raise
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        from declaw_shell import tracebacks  # bounded for 10**6-frame tracebacks

        tracebacks.print_uncaught(exc, tb)
        # CPython ends by SIGINT on an uncaught KeyboardInterrupt: the shell sees 128 + 2
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    return 0


def _user_code(run: Callable[[], object]) -> None:
    """The one frame a program's own code runs under: a signal whose handler would run outside it
    (in `_run_user` returning, or printing a traceback) is bookkeeping's, not the program's
    (declaw_posix/signals.py's `_in_bookkeeping`)."""
    run()


def _exit_status(exc: SystemExit) -> int:
    """The process exit status for a SystemExit, as CPython computes it."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write("%s\n" % (code,))
    except Exception:
        pass
    return 1


def _finish(status: int) -> None:
    """Exit as CPython's finalisation would look from outside (atexit handlers run, files
    flushed and closed, streams flushed) without tearing down the heap, which costs 0.3 s
    once pandas is loaded and shows nothing to the user."""
    import atexit
    import gc

    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    main_module = sys.modules.get("__main__")
    if main_module is not None and main_module.__dict__ is not globals() and main_module.__name__ == "__main__":
        main_module.__dict__.clear()  # drops the user's objects: their files flush and close
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    if not 0 <= status < 126:  # WASI's proc_exit carries 0..125 only: tell the host first
        try:
            from declaw_shell import door

            door.call("exit", code=status)
            status = 0  # the host reports the declared status
        except Exception:
            pass
    os._exit(status)


# module name -> patch, run right after the module is first imported. Kept on `sys`: on the cold
# path this file runs as __main__ and is imported again as _declaw_boot, and both must share it.
_IMPORT_PATCHES: dict[str, Callable[[ModuleType], None]] = sys.__dict__.setdefault("_declaw_import_patches", {})


def patch_on_import(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Run `patch(module)` right after `name` is first imported, or at once if it already is
    (so programs that never import it do not pay for importing it)."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    _IMPORT_PATCHES[name] = patch
    if getattr(sys, "_declaw_patcher", None) in sys.meta_path:
        return
    import importlib.abc
    import importlib.machinery

    class Patcher(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname: str, path: Any,
                      target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
            patch = _IMPORT_PATCHES.pop(fullname, None)
            if patch is None:
                return None
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                spec.loader = PatchingLoader(spec.loader, patch)
            return spec

    class PatchingLoader(importlib.abc.Loader):
        def __init__(self, inner: importlib.abc.Loader, patch: Callable[[ModuleType], None]) -> None:
            self.inner = inner  # the zip's loader is shared: wrap it, do not change it
            self.patch = patch

        def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
            return self.inner.create_module(spec)

        def exec_module(self, module: ModuleType) -> None:
            self.inner.exec_module(module)
            self.patch(module)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    patcher = Patcher()
    sys._declaw_patcher = patcher  # type: ignore[attr-defined]  # kept on sys, as _IMPORT_PATCHES is
    sys.meta_path.insert(0, patcher)


def _install_import_patches() -> None:
    """Patch modules that assume what WASI lacks: the network (socket, ssl, select: the host's
    door, guest/declaw_net), asyncio (no socketpair), http.client (no ssl), subprocess and
    `os.system` (no processes), `os.times` (wrong units), threading's locks and the pools of
    workers (one thread: guest/declaw_posix/threads.py), signal's timers (declaw_posix/signals.py),
    the disk and load figures (declaw_posix/system.py); and supply `pwd`, `grp`, `resource`,
    `fcntl` (guest/declaw_posix).

    Once per interpreter (the warm image's build does it; on the cold path the first program):
    every program's start ran it again, re-applying each patch to the modules already imported
    (~0.3 ms of each command line's turn, and of each `python3` in it). What a program changes
    in a patched module stays as it left it, as with any module (declaw_posix/process.py)."""
    if sys.__dict__.get("_declaw_patched"):  # on sys: the cold path's two copies of this file share it
        return
    import declaw_net
    import declaw_posix
    from declaw_posix import signals  # alarm, setitimer: the host's timers; abort, raise_signal

    declaw_posix.install()

    declaw_net.install(patch_on_import)
    patch_on_import("asyncio", _patch_asyncio)
    patch_on_import("http.client", _patch_http_client)
    patch_on_import("subprocess", _patch_subprocess)
    os.system = _system
    os.times = _times
    if not hasattr(os, "kill"):
        os.kill = _kill
    os.abort = signals.abort
    from declaw_posix import dup

    os.dup = dup.dup  # of a file opened by name: numpy's tofile and fromfile (WASI has no dup)
    from declaw_posix import process

    process.install()  # a program's os.write(1, ...) and os.close(1) are its own streams'
    if not process.has_baseline():  # (the cold path: no warm image took it)
        process.baseline()  # what programs find (the warm image takes it again once its imports are done)
    _add_identity(os)
    _add_one_thread_clocks()
    from declaw_posix import system  # statvfs, disk_usage, getloadavg: the sandbox's figures

    system.add_to_os(os)
    patch_on_import("shutil", system.patch_shutil)
    from declaw_posix import mmaps  # mmap.mmap: a copy of the mapped bytes, written back (no mapping in WASI)

    patch_on_import("mmap", mmaps.patch_mmap)
    from declaw_posix import jpeg  # Pillow's JPEG codec, which its build lacks: the host's, by the door

    patch_on_import("PIL.Image", jpeg.patch_pillow)
    from declaw_posix import fonts  # Pillow's TrueType fonts, which its build lacks: matplotlib's FreeType

    patch_on_import("PIL.ImageFont", fonts.patch_imagefont)
    import builtins

    _install_devices(builtins)  # open("/dev/null"), /dev/stdout... (/dev holds empty files only)
    patch_on_import("_pytest.capture", _patch_pytest_capture)
    patch_on_import("_pytest.faulthandler", _patch_pytest_faulthandler)
    patch_on_import("traceback", _patch_traceback)
    patch_on_import("hashlib", _patch_hashlib)
    patch_on_import("tqdm.std", _patch_tqdm)
    patch_on_import("matplotlib.backend_bases", _patch_matplotlib)
    from declaw_posix import threads  # one thread: locks that wait, pools that run inline

    patch_on_import("signal", signals.patch_signal)
    patch_on_import("threading", threads.patch_threading)
    patch_on_import("queue", threads.patch_queue)
    patch_on_import("concurrent.futures.thread", threads.patch_thread_pool)
    patch_on_import("concurrent.futures.process", threads.patch_process_pool)
    patch_on_import("multiprocessing.pool", threads.patch_multiprocessing_pool)
    patch_on_import("multiprocessing.process", threads.patch_multiprocessing_process)
    patch_on_import("multiprocessing.context", threads.patch_multiprocessing_context)
    sys._declaw_patched = True  # type: ignore[attr-defined]  # see the docstring


_umask = [0o022]


def _add_identity(module: Any) -> None:
    """What WASI's os lacks and Linux code calls freely: `umask` (pytest's cache calls it), the
    user's ids and name as the shell's `id` gives them (uid=1000(user)), `getppid`, `chown`
    (`shutil.chown`) as the user may call it, `time.tzset`; and `uname` with the sandbox's node
    name."""

    def umask(mask: int) -> int:
        previous, _umask[0] = _umask[0], int(mask) & 0o777
        return previous

    ids = {"getuid": 1000, "geteuid": 1000, "getgid": 1000, "getegid": 1000, "getppid": 1}
    for name, value in ids.items():
        if not hasattr(module, name):
            setattr(module, name, (lambda value=value: value))
    def owned(check: Callable[[Any], Any], target: Any, uid: int, gid: int) -> None:
        """`chown` as Linux answers the sandbox's one user: its own ids (or -1, unchanged) on a
        file that exists change nothing; any other owner needs root (EPERM)."""
        check(target)  # FileNotFoundError, EBADF... as the call itself would raise them
        if int(uid) not in (-1, 1000) or int(gid) not in (-1, 1000):
            import errno

            raise PermissionError(errno.EPERM, os.strerror(errno.EPERM), target if isinstance(target, str) else None)

    def chown(path: Any, uid: int, gid: int, *, dir_fd: Any = None, follow_symlinks: bool = True) -> None:
        owned(lambda p: os.stat(p, dir_fd=dir_fd, follow_symlinks=follow_symlinks), path, uid, gid)

    def lchown(path: Any, uid: int, gid: int) -> None:
        owned(lambda p: os.stat(p, follow_symlinks=False), path, uid, gid)

    def fchown(fd: int, uid: int, gid: int) -> None:
        owned(os.fstat, fd, uid, gid)

    for name, function in (("umask", umask), ("getlogin", lambda: "user"), ("getgroups", lambda: [1000]),
                           ("chown", chown), ("lchown", lchown), ("fchown", fchown)):
        if not hasattr(module, name):
            setattr(module, name, function)
    import time

    if not hasattr(time, "tzset"):  # WASI's libc knows one zone, UTC: TZ=UTC (what programs set
        # before calling it, tests above all) is what they get; another zone stays UTC too
        time.tzset = lambda: None
    if hasattr(module.uname, "__wrapped__"):  # every guest's start comes here: wrapped once
        return
    from declaw_net.sockets import HOSTNAME

    wasi_uname = module.uname

    def uname() -> os.uname_result:
        """The node name is the sandbox's, as `uname -n` and `hostname` say (WASI's: "(none)")."""
        sysname, _, release, version, machine = wasi_uname()
        return os.uname_result((sysname, HOSTNAME, release, version, machine))

    uname.__wrapped__ = wasi_uname  # type: ignore[attr-defined]
    module.uname = uname
    platform = sys.modules.get("platform")
    if platform is not None:
        platform._uname_cache = None  # type: ignore[attr-defined]  # read before: read again


def _add_one_thread_clocks() -> None:
    """What Linux has and WASI's CPython lacks, for a process of one thread on one CPU (as
    `nproc` and `os.cpu_count()` say): `time.thread_time` is the process's CPU time, and
    `os.sched_getaffinity` the one CPU (`len(os.sched_getaffinity(0))`, how joblib and others
    count the CPUs they may use)."""
    import time

    if not hasattr(time, "thread_time"):
        time.thread_time = time.process_time
        time.thread_time_ns = time.process_time_ns
    if not hasattr(os, "sched_getaffinity"):
        def sched_getaffinity(pid: int, /) -> set[int]:
            return set(range(os.cpu_count() or 1))

        os.sched_getaffinity = sched_getaffinity


def _times() -> os.times_result:
    """`os.times()`: wasi-libc's times() counts in other units than CPython divides by (user
    time grew ~10^7 a second, and equalled elapsed); the process's CPU time as user time and
    the monotonic clock as elapsed, as Linux gives them (no system or children time here)."""
    import time

    return os.times_result((time.process_time(), 0.0, 0.0, 0.0, time.monotonic()))



# --- devices --------------------------------------------------------------------------------
# `/dev/null`, `/dev/zero`, `/dev/urandom`, `/dev/random`, `/dev/stdin`, `/dev/stdout` and
# `/dev/stderr` for Python's `open()` in the sandbox.
#
# The sandbox's file tree has no device files (WASI has none, and a host folder cannot hold them
# safely), so `open(os.devnull, "w")` — how Python code silences output, and what it hands to
# `subprocess` — raised `PermissionError`. `open()` (builtins and `io`, so `pathlib` too) answers
# these paths itself with an in-memory file that behaves as the device: writes to null and zero
# are thrown away; reads give nothing, zeros or random bytes (`os.urandom`); the std ones read
# and write the program's current `sys.stdin`/`sys.stdout`/`sys.stderr`. The shell answers its
# own redirections to `/dev/null` already. /dev itself is a read-only folder of empty files of these
# names (declaw_wasm/_wasm/layout.py's GUEST_DEVICES), so `os.path.exists(os.devnull)`, `os.stat`,
# `test -e /dev/null`, `cp /dev/null f` and `ls /dev` find them: a regular empty file, not a
# character device. Not covered: `os.open()` of them reads that empty file (no file descriptor
# can stand for a device), and writing through it is refused (read-only).

_STD_DEVICES = ("/dev/stdin", "/dev/stdout", "/dev/stderr")
_DEVICES = frozenset({"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/dev/stdin", "/dev/stdout",
                     "/dev/stderr"})
# /proc's files the same way, read-only, with the sandbox's figures at each open (`cat /proc/cpuinfo`,
# `grep MemTotal /proc/meminfo`: agents look there; the files were missing): its CPUs (os.cpu_count)
# and its memory (the limit, and what its programs leave: what `free` prints), never the host's
_PROC_FILES = frozenset({"/proc/cpuinfo", "/proc/meminfo"})


def _device_of(file: Any) -> str | None:
    """The device a path names (after `.`, `..` and the working directory), or None."""
    if isinstance(file, int):
        return None
    try:
        path = os.fspath(file)
    except TypeError:
        return None
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    if "dev" not in path and "proc" not in path:
        return None
    if not path.startswith("/"):
        path = os.path.join(os.getcwd(), path)
    path = os.path.normpath(path)
    return path if path in _DEVICES or path in _PROC_FILES else None


def _proc_text(name: str) -> bytes:
    """What /proc/cpuinfo or /proc/meminfo says in this sandbox, in Linux's layout."""
    if name == "/proc/cpuinfo":
        count = os.cpu_count() or 1
        return "".join(f"processor\t: {n}\nvendor_id\t: declaw-wasm\nmodel name\t: WebAssembly (a declaw-wasm "
                       f"sandbox)\ncpu MHz\t\t: 0.000\nphysical id\t: 0\nsiblings\t: {count}\ncore id\t\t: {n}\n"
                       f"cpu cores\t: {count}\nflags\t\t:\n\n" for n in range(count)).encode()
    from declaw_posix import system

    page = system.PAGE // 1024
    total, available = system._memory(False), system._memory(True)
    rows = [("MemTotal", max(total, 0) * page), ("MemFree", max(available, 0) * page),
            ("MemAvailable", max(available, 0) * page), ("Buffers", 0), ("Cached", 0), ("SwapCached", 0),
            ("SwapTotal", 0), ("SwapFree", 0)]
    return "".join(f"{key + ':':<16}{value:>8} kB\n" for key, value in rows).encode()


class _Device(io.RawIOBase):
    """One open device (`_declaw_device` names it, for subprocess: a child's DEVNULL)."""

    def __init__(self, name: str, readable: bool, writable: bool) -> None:
        self._declaw_device = name
        self.name = name
        self._readable, self._writable = readable, writable
        self._text = io.BytesIO(_proc_text(name)) if name in _PROC_FILES else None

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def isatty(self) -> bool:
        stream = self._stream()
        return bool(stream is not None and stream.isatty())

    def _stream(self) -> Any:
        return {"/dev/stdin": sys.stdin, "/dev/stdout": sys.stdout, "/dev/stderr": sys.stderr}.get(self.name)

    def readinto(self, buffer: Any) -> int:
        if not self._readable:
            raise io.UnsupportedOperation("read")
        view = memoryview(buffer).cast("B")
        if self._text is not None:
            return self._text.readinto(view)
        if self.name == "/dev/zero":
            view[:] = bytes(len(view))
            return len(view)
        if self.name in ("/dev/urandom", "/dev/random"):
            view[:] = os.urandom(len(view))
            return len(view)
        stream = self._stream()
        if stream is None:  # null (and reading stdout/stderr, as from a pipe's other end)
            return 0
        raw = getattr(stream, "buffer", None)
        data = raw.read1(len(view)) if raw is not None and hasattr(raw, "read1") else \
            stream.read(len(view)).encode("utf-8", "surrogateescape")
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        """All of it: /dev/zero and /dev/urandom have no end (Linux reads until memory runs out;
        here the program is told so at once, and the shell's utilities print it as an error)."""
        if self._readable and self.name in ("/dev/zero", "/dev/urandom", "/dev/random"):
            import errno

            raise OSError(errno.ENOMEM, "Cannot allocate memory (the device has no end)", self.name)
        return bytes(super().readall() or b"")

    def write(self, data: Any) -> int:
        if not self._writable:
            raise io.UnsupportedOperation("write")
        view = memoryview(data).cast("B")
        stream = self._stream()
        if stream is not None and self.name != "/dev/stdin":
            raw = getattr(stream, "buffer", None)
            stream.flush()
            if raw is not None:
                raw.write(bytes(view))
                raw.flush()
            else:
                stream.write(bytes(view).decode("utf-8", "surrogateescape"))
                stream.flush()
        return len(view)


def _open_device(name: str, mode: str = "r", buffering: int = -1, encoding: str | None = None,
                errors: str | None = None, newline: str | None = None) -> Any:
    """What `open(name, mode, ...)` gives for a device, checked as `open` checks its mode."""
    if not isinstance(mode, str) or not set(mode) <= set("rwaxbt+") or len(set(mode)) != len(mode) \
            or sum(mode.count(c) for c in "rwax") != 1 or ("b" in mode and "t" in mode):
        raise ValueError("invalid mode: %r" % (mode,))
    binary = "b" in mode
    if binary and (encoding is not None or errors is not None or newline is not None):
        raise ValueError("binary mode doesn't take an encoding, errors or newline argument")
    if "x" in mode:
        raise FileExistsError(17, "File exists", name)
    readable = "r" in mode or "+" in mode
    writable = any(c in mode for c in "wax+")
    if writable and name in _PROC_FILES:
        raise PermissionError(13, "Permission denied", name)
    raw = _Device(name, readable, writable)
    if binary and buffering == 0:
        return raw
    size = io.DEFAULT_BUFFER_SIZE if buffering in (-1, 0, 1) else buffering
    buffered: Any
    if readable and writable:
        buffered = io.BufferedRWPair(raw, raw, size)
    elif readable:
        buffered = io.BufferedReader(raw, size)
    else:
        buffered = io.BufferedWriter(raw, size)
    if binary:
        return buffered
    text = io.TextIOWrapper(buffered, encoding=encoding or "utf-8", errors=errors, newline=newline,
                            line_buffering=buffering == 1, write_through=name in ("/dev/stdout", "/dev/stderr"))
    text.mode = mode  # type: ignore[misc]  # open() sets it too
    return text


def _install_devices(builtins_module: Any) -> None:
    """`open` (builtins and io, which pathlib calls) answers device paths itself."""
    original = io.open
    if getattr(original, "_declaw_devices", False):
        return
    from declaw_posix.dup import remember

    def open(file: Any, mode: str = "r", buffering: int = -1, encoding: str | None = None,
             errors: str | None = None, newline: str | None = None, closefd: bool = True,
             opener: Any = None) -> Any:
        name = _device_of(file) if opener is None else None
        if type(file) is int and opener is None:
            from declaw_posix import process

            if process.virtual_fd(file):  # `open(0)`: the program's stdin, as /dev/stdin (fd 0 is the guest's)
                name = _STD_DEVICES[file]
        if name is not None:
            return _open_device(name, mode, buffering, encoding, errors, newline)
        opened = original(file, mode, buffering, encoding, errors, newline, closefd, opener)
        if not isinstance(file, int):
            remember(opened, file)  # os.dup of its descriptor reopens the path (declaw_posix/dup.py)
        return opened

    open.__doc__ = original.__doc__
    open._declaw_devices = True  # type: ignore[attr-defined]
    io.open = open
    builtins_module.open = open


def _patch_tqdm(module: Any) -> None:
    """tqdm's monitor thread (it looks for stalled bars every 10 s) cannot start in a guest of
    one thread, and every first bar warned so on stderr (TqdmMonitorWarning): not started."""
    module.tqdm.monitor_interval = 0


def _patch_matplotlib(module: Any) -> None:
    """`plt.show()` in a script: matplotlib stays silent for a non-interactive backend on a Linux
    without a display (`FigureManagerBase.show` checks `sys.platform == "linux"`), and warned
    "FigureCanvasAgg is non-interactive, and thus cannot be shown" at every call here (the platform
    is "wasi"). A guest has no display: silent, as there. (A code context's cells show their
    figures as results.)"""
    manager: Any = getattr(module, "FigureManagerBase", None)
    show = getattr(manager, "show", None)
    if manager is None or show is None or getattr(show, "_declaw_headless", False):
        return

    def headless_show(self: Any) -> Any:
        if not os.environ.get("DISPLAY"):
            return None
        return show(self)

    headless_show._declaw_headless = True  # type: ignore[attr-defined]
    headless_show.__doc__ = show.__doc__
    manager.show = headless_show


def _patch_pytest_capture(module: Any) -> None:
    """pytest's default capture, `fd`, duplicates file descriptors (`os.dup`, which WASI lacks):
    it captures at the `sys` level instead, which sees everything a test's Python writes."""
    original = module._get_multicapture

    def multicapture(method: str) -> Any:
        return original("sys" if method == "fd" else method)

    module._get_multicapture = multicapture


def _patch_pytest_faulthandler(module: Any) -> None:
    """pytest's faulthandler plugin duplicates stderr's descriptor (`os.dup`): nothing to do
    here, where a crash cannot leave the interpreter to report (a trap ends the guest)."""
    module.pytest_configure = lambda config: None
    module.pytest_unconfigure = lambda config: None


def _patch_hashlib(module: Any) -> None:
    """`hashlib.pbkdf2_hmac` is OpenSSL's, which the guest's CPython is built without: RFC 8018's
    PBKDF2 over `hmac` (the inner and outer states keyed once, copied per block)."""
    if hasattr(module, "pbkdf2_hmac"):
        return

    def pbkdf2_hmac(hash_name: str, password: bytes, salt: bytes, iterations: int,
                    dklen: int | None = None) -> bytes:
        import hmac

        password, salt = memoryview(password).tobytes(), memoryview(salt).tobytes()
        if not isinstance(iterations, int) or isinstance(iterations, bool):
            raise TypeError("'%s' object cannot be interpreted as an integer" % type(iterations).__name__)
        if iterations < 1:
            raise ValueError("iteration value must be greater than 0.")
        keyed = hmac.new(password, digestmod=hash_name)  # ValueError for an unknown hash, as CPython
        size = keyed.digest_size
        if dklen is None:
            dklen = size
        if dklen < 1:
            raise ValueError("key length must be greater than 0.")
        blocks = []
        for index in range(1, -(-dklen // size) + 1):
            first = keyed.copy()
            first.update(salt + index.to_bytes(4, "big"))
            block = first.digest()
            total = int.from_bytes(block, "big")
            for _ in range(iterations - 1):
                step = keyed.copy()
                step.update(block)
                block = step.digest()
                total ^= int.from_bytes(block, "big")
            blocks.append(total.to_bytes(size, "big"))
        return b"".join(blocks)[:dklen]

    module.pbkdf2_hmac = pbkdf2_hmac


def _patch_traceback(module: Any) -> None:
    """CPython adds "Site initialization is disabled, did you forget to add the site-packages
    directory to sys.path...?" to every ModuleNotFoundError when `-S` is given, as the guest's
    interpreter is (its site is set up by the boot): wrong here, and it sends an agent to edit
    sys.path or make a venv instead of `pip install`. The hint is dropped."""
    cls = module.TracebackException
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        text = getattr(self, "_str", None)
        if isinstance(text, str) and ". Site initialization is disabled" in text:
            self._str = text.split(". Site initialization is disabled", 1)[0]

    cls.__init__ = init


def _patch_subprocess(module: Any) -> None:
    """No processes in WASI: a child runs through the sandbox shell (declaw_shell/subprocesses.py);
    a guest without the shell's site (a bare interpreter) keeps CPython's, which refuses."""
    try:
        from declaw_shell import subprocesses
    except ImportError:
        return

    subprocesses.install(module)


def _drain_children() -> None:
    """What the program's children beside it wrote so far, copied before its streams go
    (declaw_shell/subprocesses.py)."""
    children = sys.modules.get("declaw_shell.subprocesses")
    if children is not None:
        children.drain_children()


def _kill(pid: int, sig: int) -> None:
    """`os.kill` (which WASI's os lacks): a command of the sandbox by its `ps` PID (a Popen child
    running beside us, a server another command started) through the door's `kill`; every
    signal but 0 ends it. This process's own pid (os.getpid()) gets the signal as from
    `signal.raise_signal` (its handler, or its default action); ProcessLookupError for a pid the
    sandbox does not run."""
    import operator

    pid, sig = operator.index(pid), operator.index(sig)
    if not 0 <= sig <= 64:
        raise OSError(22, "Invalid argument")
    if pid == os.getpid():
        if sig:
            import signal  # its raise_signal: declaw_posix/signals.py's (a handler runs as on Linux)

            signal.raise_signal(sig)
        return
    from declaw_shell import sysinfo

    if pid <= 0 or not sysinfo.kill_command(pid, sig):
        raise ProcessLookupError(3, "No such process")


def _system(command: Any) -> int:
    """`os.system` (which WASI's os lacks): through the sandbox shell."""
    from declaw_shell import subprocesses

    return subprocesses.system(command)


def _patch_http_client(client: Any) -> None:
    """CPython built without ssl has no `http.client.HTTPSConnection`; libraries subclass it at
    import time (nltk, urllib3 paths). Give them one that fails on connect, as every network
    call in the sandbox does."""
    if hasattr(client, "HTTPSConnection"):
        return

    def no_network(*_args: object, **_kwargs: object) -> None:
        raise OSError(101, "Network is unreachable (the sandbox has no network, nor ssl)")

    class HTTPSConnection(client.HTTPConnection):
        default_port = client.HTTPS_PORT

        def __init__(self, host: str, port: int | None = None, *args: Any, context: object = None,
                     **kwargs: Any) -> None:
            super().__init__(host, port, *args, **kwargs)

        connect = no_network

    client.HTTPSConnection = HTTPSConnection
    client._create_https_context = no_network  # urllib.request's HTTPSHandler asks for one


def _patch_asyncio(asyncio: Any) -> None:
    """Give every selector loop a no-op self-pipe: with no threads or signals in the guest,
    nothing ever needs to wake the loop from outside, and `socketpair` does not exist."""
    import selectors

    loop_class = asyncio.selector_events.BaseSelectorEventLoop
    if getattr(loop_class, "_declaw_patched", False):
        return
    loop_class._declaw_patched = True
    original_init = loop_class.__init__

    # The loop's own wait is the interpreter's sleep, not the one that sleeps on after a signal's
    # handler (declaw_posix/signals.py): the loop looks at its timers again after a handler.
    from declaw_posix.signals import real_sleep as idle

    class GuestSelector(selectors.SelectSelector):
        """With nothing registered, a select only waits: skip the call (a trip to the host)
        when there is nothing to wait for, as on every turn of the shell's event loop."""

        _readers: set[int]  # SelectSelector's own, private
        _writers: set[int]

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            if timeout is None:  # nothing would wake the loop but its children (aio_subprocess.py)
                children = sys.modules.get("declaw_shell.aio_subprocess")
                if children is not None and children.run_waiting():
                    return []
            if not self._readers and not self._writers and timeout is not None:
                if timeout > 0:
                    idle(timeout)
                return []
            return super().select(timeout)

    def __init__(self: Any, selector: selectors.BaseSelector | None = None) -> None:
        original_init(self, selector or GuestSelector())

    loop_class.__init__ = __init__
    loop_class._make_self_pipe = lambda self: None
    loop_class._close_self_pipe = lambda self: None
    loop_class._write_to_self = lambda self: None
    original_run_in_executor = loop_class.run_in_executor

    def run_in_executor(self: Any, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
        """The default executor's threads do not exist here: its calls (`asyncio.to_thread`,
        so the official LLM clients' async `get_platform`) run inline, blocking the loop for
        that long, and the result comes back as a done future. A caller's own executor is its
        own business."""
        if executor is not None:
            return original_run_in_executor(self, executor, func, *args)
        self._check_closed()
        future = self.create_future()
        try:
            future.set_result(func(*args))
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            future.set_exception(exc)
        return future

    loop_class.run_in_executor = run_in_executor

    unix_loop = getattr(getattr(asyncio, "unix_events", None), "_UnixSelectorEventLoop", None)
    if unix_loop is not None:
        def add_signal_handler(self: Any, sig: int, callback: Callable[..., Any], *args: Any) -> None:
            """No signal reaches a guest: refused as on a platform without them (servers such as
            aiohttp's `run_app` then go on without their Ctrl-C handler)."""
            raise NotImplementedError("signal handlers do not exist in the sandbox")

        unix_loop.add_signal_handler = add_signal_handler
        unix_loop.remove_signal_handler = lambda self, sig: False

        async def _make_subprocess_transport(self: Any, *args: Any, **kwargs: Any) -> Any:
            """asyncio's subprocesses over the sandbox's Popen (declaw_shell/aio_subprocess.py,
            imported at the first)."""
            from declaw_shell import aio_subprocess

            aio_subprocess.patch(unix_loop)
            return await unix_loop._make_subprocess_transport(self, *args, **kwargs)

        unix_loop._make_subprocess_transport = _make_subprocess_transport


if __name__ == "__main__":
    if sys.argv[1:2] == ["--profile"]:
        import json

        _apply_profile(json.loads(sys.argv[2]))
        del sys.argv[1:3]
    if sys.argv[1:2] == ["--shell"]:
        _finish(_status_of(_shell, sys.argv[2], sys.argv[3], dict(os.environ), False))
    elif sys.argv[1:2] == ["--pty"]:
        _finish(_status_of(_shell, sys.argv[2], "", dict(os.environ), True))
    _finish(_status_of(main, sys.argv[1], sys.argv[2:]))
