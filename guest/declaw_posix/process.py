"""A program's interpreter state is its own, as a process's is.

The programs of a command line (`python3 a.py; python3 b.py`, a `subprocess.run` of Python) run
one after another in this guest's one interpreter (guest/_declaw_boot.py's `run_process`), and
the modules they import stay loaded: that is what makes a second `python3` cost milliseconds.
On Linux each would be a new process. So what one program changes in the interpreter must not
reach the next, nor the shell around them:

- **Put back when the program ends** (`Saved.restore`): `sys`'s hooks (`excepthook`,
  `displayhook`, `breakpointhook`, `unraisablehook`), trace and profile functions, recursion and
  int-digit limits, switch interval, `meta_path` and `path_hooks`; `builtins`; the collector's
  switch and thresholds; the umask; the entries of `sys.modules` it replaced or deleted;
  `warnings`' filters and hooks; `logging`'s loggers (handlers, levels, propagation — the
  program's own handlers flushed and closed, as logging's exit handler would); socket's default
  timeout; `tempfile.tempdir`; decimal's context.
- **Forgotten when the program ends**: the modules it imported from its own files (its folder,
  PYTHONPATH: anything outside the interpreter's own import path) and stand-ins it put in
  `sys.modules`, so that the next program's `import config` finds its own `config.py`. Modules of
  the standard library and installed packages stay loaded (imported once per guest).
- **Fresh when a program starts** (`fresh_start`): `random`'s and numpy's global generators are
  seeded from the OS, tempfile's names renewed, decimal's context a new default one, and every
  module's warnings registry invalidated (a warning shown once per location shows again).
- **Its standard streams are its own** (`Streams`): closing `sys.stdout` closes it for the
  program only (the shell's stream stays open: the next command writes on); `os.close(0|1|2)`
  closes nothing the shell uses; `os.write(1|2, ...)` and `sys.__stdout__` reach the program's
  stdout and stderr, wherever the line sends them (a file, a pipe), not the guest's own.

What still differs (docs/guest.md): a module of the standard library or a package stays as the
program left it (its globals, monkeypatches, a `reload`), and so does a `sys.modules` entry it
replaced in place (one it deleted, or deleted and re-added, is put back); a change to a logger
that makes no handler and touches neither the root nor the switch (`getLogger("lib").setLevel`)
carries over; `sys.stdout.fileno()` raises `io.UnsupportedOperation` for a captured stream
(`sys.stdin.fileno()` is 0, which the program's `os.read` and `open` read as its stdin).

Cost: nothing here walks `sys.modules` or the loggers when a program changed nothing there.
Touching an object writes its reference count, and each page of the warm image so written
becomes the guest's own: copying `sys.modules` at each program's start cost every running guest
~45 MiB, walking the loggers ~5 MiB. What a program finds is kept once (`baseline`, in the warm
image's own pages); new modules are found after the last one in `sys.modules`' insertion order.
Measured: ~1 MiB per running guest over the tree before (34 against 32.5 MiB).
"""

from __future__ import annotations

import builtins
import gc
import os
import sys
from types import ModuleType
from typing import Any

HOOKS = ("excepthook", "displayhook", "breakpointhook", "unraisablehook")
_MISSING = object()
_streams: list[Streams] = []  # the running programs' standard streams, innermost last
_saved: list[Saved] = []  # the interpreter's state before each running program, innermost last
_BASE: dict[str, Any] = {}  # `baseline`: sys.modules, and logging's loggers, as programs find them
_real_write = os.write
_len = len  # bound now: a program may have set builtins.len = None (code_ended puts it back)
_real_close = os.close
_real_read = os.read


def fresh_start(programs: bool = True) -> None:
    """What a new process's interpreter starts with (module docstring). `programs`: False for the
    shell's own start (random's generator and tempfile's names, which its commands use), whose
    programs each get the rest at their own start (`program_starting`)."""
    modules: dict[str, Any] = sys.modules
    if "random" in modules:
        modules["random"].seed()
    if "tempfile" in modules:
        modules["tempfile"]._name_sequence = None
    if not programs:
        return
    if "numpy.random" in modules:
        if "numpy" in modules:  # 624 words of OS entropy, without seed()'s SeedSequence (0.6 ms)
            import array

            modules["numpy.random"].seed(array.array("I", os.urandom(2496)))
        else:  # the `base` template hides numpy, and seeding from an array imports it
            modules["numpy.random"].seed()
    if "decimal" in modules:
        decimal = modules["decimal"]
        decimal.setcontext(decimal.Context())
    if "warnings" in modules:
        modules["warnings"]._filters_mutated()  # the once-per-location registries start over


class Saved:
    """The interpreter's state before a program (module docstring): `restore` puts it back."""

    def __init__(self, import_path: list[str]) -> None:
        # where the interpreter's own modules come from: the shell's import path, absolute entries
        self.roots = tuple(entry.rstrip("/") + "/" for entry in import_path if entry.startswith("/"))
        self.hooks = [getattr(sys, name) for name in HOOKS]
        self.trace, self.profile = sys.gettrace(), sys.getprofile()
        self.limits = (sys.getrecursionlimit(), sys.get_int_max_str_digits(), sys.getswitchinterval())
        self.meta_path, self.path_hooks = list(sys.meta_path), list(sys.path_hooks)
        # sys.modules and builtins are not copied (a copy touches every module object, and the
        # pages of the warm image it touches become each guest's own): the program's new
        # modules are those after the last one now, in the dict's insertion order
        self.modules_count = len(sys.modules)
        self.last_module = next(reversed(sys.modules), None)
        self.builtins = dict(builtins.__dict__)  # ~160 (a kernel adds `display`: not the baseline's)
        self.gc = (gc.isenabled(), gc.get_threshold())
        self.umask = os.umask(0o022)
        os.umask(self.umask)
        modules: dict[str, Any] = sys.modules
        self.warnings = _WarningsState(modules["warnings"]) if "warnings" in modules else None
        self.logging = _mark(modules["logging"]) if "logging" in modules else None
        # a cell's `!python3`: the cells' own logging is not the baseline's, so it is kept whole
        from declaw_posix import signals

        self.logging_state = _LoggingState(modules["logging"]) if signals.IN_KERNEL[0] and "logging" in modules \
            else None
        if self.logging_state is not None and self.logging != _BASE.get("logging_mark"):
            base = _BASE.get("logging") or _LoggingState.fresh(modules["logging"])
            base.restore(modules["logging"], close=False)  # the program starts as a new process would
        socket = modules.get("socket")
        self.socket_timeout = socket.getdefaulttimeout() if socket is not None else None
        tempfile = modules.get("tempfile")
        self.tempdir = tempfile.tempdir if tempfile is not None else None
        decimal = modules.get("decimal")
        self.decimal = decimal.getcontext() if decimal is not None else None

    def restore(self) -> None:
        """Each part on its own: a program that broke one (a `logging` it rewired beyond
        recognition) still gets the others put back, and the shell goes on."""
        for step in (self._logging, self._warnings, self._sys, self._restore_modules, self._rest):
            try:
                step()
            except Exception:  # noqa: BLE001 -- see above
                pass

    def _logging(self) -> None:
        """If the program configured logging (a handler made, the root's handlers or level, the
        switch, a new logger), every logger goes back to the baseline's state (a later one keeps
        only its NullHandlers, which libraries add at import). Walking the loggers is left for
        then: it made ~5 MiB of the warm image's pages each guest's own."""
        logging = sys.modules.get("logging")
        if logging is None or _mark(logging) == (self.logging or _FRESH_MARK):
            return
        state = self.logging_state or _BASE.get("logging") or _LoggingState.fresh(logging)
        state.restore(logging)  # first: the program's handlers flush while its modules are there

    def _warnings(self) -> None:
        if self.warnings is not None:
            self.warnings.restore(sys.modules.get("warnings"))

    def _sys(self) -> None:
        """Only what changed is set: setting a trace function, even None, re-instruments every
        code object of the interpreter (CPython's monitoring), which made each guest's copy of
        the warm image's pages private (+45 MiB per guest)."""
        for name, hook in zip(HOOKS, self.hooks, strict=True):
            if getattr(sys, name) is not hook:
                setattr(sys, name, hook)
        if sys.gettrace() is not self.trace:
            sys.settrace(self.trace)
        if sys.getprofile() is not self.profile:
            sys.setprofile(self.profile)
        recursion, digits, interval = self.limits
        if sys.getrecursionlimit() != recursion:
            sys.setrecursionlimit(recursion)
        if sys.get_int_max_str_digits() != digits:
            sys.set_int_max_str_digits(digits)
        if sys.getswitchinterval() != interval:
            sys.setswitchinterval(interval)
        if sys.meta_path != self.meta_path:
            sys.meta_path[:] = self.meta_path
        if sys.path_hooks != self.path_hooks:
            sys.path_hooks[:] = self.path_hooks

    def _rest(self) -> None:
        modules: dict[str, Any] = sys.modules
        _restore_dict(builtins.__dict__, self.builtins)
        enabled, thresholds = self.gc
        if gc.isenabled() != enabled:
            (gc.enable if enabled else gc.disable)()
        if gc.get_threshold() != thresholds:
            gc.set_threshold(*thresholds)
        os.umask(self.umask)
        socket = modules.get("socket")
        if socket is not None:
            socket.setdefaulttimeout(self.socket_timeout)
        tempfile = modules.get("tempfile")
        if tempfile is not None:
            tempfile.tempdir = self.tempdir
        decimal = modules.get("decimal")
        if decimal is not None:
            decimal.setcontext(self.decimal if self.decimal is not None else decimal.Context())

    def _restore_modules(self) -> None:
        """The modules the program imported that are not the interpreter's own are forgotten;
        entries it deleted, or replaced by deleting and adding, are put back from the guest's
        baseline (one it replaced in place stays replaced: finding it means touching every
        module)."""
        modules: dict[str, Any] = sys.modules
        added: list[str] = []
        for name in reversed(modules):
            if name == self.last_module:
                break
            added.append(name)
        base = _BASE["modules"]
        for name in added:
            module = modules[name]
            if name in base and base[name] is not module:
                modules[name] = base[name]
            elif name not in base and not self._stays(module):
                del modules[name]
        if len(modules) < self.modules_count or self.last_module not in modules:
            _restore_found(modules, base)  # it deleted some: a whole look, rare

    def _stays(self, module: Any) -> bool:
        """Whether a module a program imported stays loaded for the next: the interpreter's own
        (the standard library, the bundle, installed packages, built in), not one of the
        program's own files nor a stand-in it made."""
        if not isinstance(module, ModuleType):
            return False
        spec = getattr(module, "__spec__", None)
        if spec is None:
            return False
        origin = spec.origin
        if origin is not None and not origin.startswith("/"):
            return True  # built in, frozen, or linked into the interpreter ('<reactor>...')
        places = [origin] if origin is not None else list(spec.submodule_search_locations or ())
        return bool(places) and all(place.startswith(self.roots) for place in places)


def baseline() -> None:
    """`sys.modules` as every program finds it: taken once, as the warm image
    is built (declaw_wasm/_wasm/warm_image.py), so that its references are in the image's pages
    and no guest's program copies them (on the cold path, at the first program)."""
    _BASE["modules"] = dict(sys.modules)
    if "logging" in sys.modules:
        _BASE["logging"] = _LoggingState(sys.modules["logging"])
        _BASE["logging_mark"] = _mark(sys.modules["logging"])


def has_baseline() -> bool:
    return bool(_BASE)


def program_starting(import_path: list[str]) -> Saved:
    """A program is about to run: the interpreter's state now, and a fresh start for it."""
    if not _BASE:
        baseline()
    saved = Saved(import_path)
    _saved.append(saved)
    fresh_start()
    return saved


def code_ended() -> None:
    """The program's own code has ended (returned or raised): `builtins` and the modules it
    found loaded are put back at once, before its traceback is printed and the guest's
    bookkeeping runs (which a program that set `builtins.len = None` or cleared `sys.modules`
    would break); its atexit handlers then run, and `program_ended` puts back the rest."""
    if not _saved:
        return
    saved = _saved[-1]
    try:
        _restore_dict(builtins.__dict__, saved.builtins)
        if _len(sys.modules) < saved.modules_count:  # emptied or thinned: put back what was there
            _restore_found(sys.modules, _BASE["modules"])
    except Exception:  # noqa: BLE001 -- as Saved.restore
        pass


def program_ended(saved: Saved) -> None:
    if saved in _saved:
        _saved.remove(saved)
    saved.restore()


def _unchanged(saved: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether every saved entry is still there, the same object: a quick look in C (an entry is
    compared by identity first, and modules and functions equal only themselves)."""
    try:
        return saved.items() <= now.items()
    except Exception:  # noqa: BLE001 -- a value whose == raises (a numpy array): look one by one
        return False


def _restore_found(modules: dict[str, Any], saved: dict[str, Any]) -> None:
    if _unchanged(saved, modules):
        return
    for name, module in saved.items():
        if modules.get(name, _MISSING) is not module:
            modules[name] = module


def _restore_dict(now: dict[str, Any], saved: dict[str, Any]) -> None:
    """Put `saved` back in `now` (`builtins.__dict__`: no builtin may be called before it is back)."""
    if _len(now) == _len(saved) and _unchanged(saved, now):
        return
    for key in [key for key in now if key not in saved]:
        del now[key]
    for key, value in saved.items():
        if now.get(key, _MISSING) is not value:
            now[key] = value


class _WarningsState:
    def __init__(self, warnings: Any) -> None:
        self.filters = list(warnings.filters)
        self.attributes = {name: getattr(warnings, name) for name in ("showwarning", "formatwarning", "defaultaction")
                           if hasattr(warnings, name)}

    def restore(self, warnings: Any) -> None:
        if warnings is None:
            return
        for name, value in self.attributes.items():
            setattr(warnings, name, value)
        if list(warnings.filters) != self.filters:
            warnings.filters[:] = self.filters
            warnings._filters_mutated()


class _LoggingState:
    """Each logger's handlers, level, filters, propagation and switch (the root's too)."""

    def __init__(self, logging: Any, loggers: dict[Any, tuple[Any, ...]] | None = None) -> None:
        if loggers is None:
            loggers = {logger: (list(logger.handlers), logger.level, list(logger.filters), logger.propagate,
                                logger.disabled) for logger in _loggers(logging)}
        self.loggers = loggers
        manager = logging.Logger.manager
        self.disable = manager.disable
        self.attributes = {name: getattr(logging, name) for name in ("lastResort", "raiseExceptions",
                                                                     "_warnings_showwarning")
                           if hasattr(logging, name)}

    @classmethod
    def fresh(cls, logging: Any) -> _LoggingState:
        """The state of logging as a program that first imported it found it: nothing set."""
        state = cls(logging, loggers={})
        state.disable = 0
        return state

    def restore(self, logging: Any, close: bool = True) -> None:
        """Every logger as this state had it; handlers it did not have are flushed and closed
        (`close`: not when a cell's are set aside for a program, to be put back after it)."""
        kept = {handler for handlers, *_ in self.loggers.values() for handler in handlers}
        kept.update(handler for logger in _loggers(logging) if logger not in self.loggers
                    for handler in logger.handlers if isinstance(handler, logging.NullHandler))
        everyone = _loggers(logging)
        for logger in everyone:
            for handler in logger.handlers:
                if close and handler not in kept:  # the program's own: flushed and closed, as at its exit
                    kept.add(handler)
                    try:
                        handler.flush()
                        handler.close()
                    except Exception:  # noqa: BLE001 -- as logging.shutdown, which ignores them
                        pass
        for logger in everyone:
            handlers, level, filters, propagate, disabled = self.loggers.get(logger) or (
                [handler for handler in logger.handlers if isinstance(handler, logging.NullHandler)],
                logging.WARNING if logger is logging.root else logging.NOTSET, [], True, False)
            logger.handlers[:] = handlers
            logger.level, logger.propagate, logger.disabled = level, propagate, disabled
            logger.filters[:] = filters
        manager = logging.Logger.manager
        manager.disable = self.disable
        for name, value in self.attributes.items():
            setattr(logging, name, value)
        manager._clear_cache()


_FRESH_MARK = (1, (), 30, 0, 0)  # logging as a program importing it first finds it: lastResort, WARNING


def _mark(logging: Any) -> tuple[Any, ...]:
    """What a program that configures logging changes, looked at without walking the loggers."""
    root = logging.root
    return (len(logging._handlerList), tuple(root.handlers), root.level, logging.Logger.manager.disable,
            len(logging.Logger.manager.loggerDict))


def _loggers(logging: Any) -> list[Any]:
    found = [logging.root]
    found.extend(logger for logger in list(logging.Logger.manager.loggerDict.values())
                 if isinstance(logger, logging.Logger))
    return found


class Streams:
    """A running program's standard streams: closing one closes it for the program only, and
    `os.write`/`os.close` on fds 0–2 reach these (module docstring)."""

    def __init__(self, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.by_fd = (stdin, stdout, stderr)
        # the fds that are the program's Python streams, not the guest's own descriptors
        self.virtual = frozenset(fd for fd, stream in enumerate(self.by_fd) if _fd_of(stream) != fd)
        self.dunders = (sys.__stdin__, sys.__stdout__, sys.__stderr__)
        self.closed: set[int] = set()  # streams the program closed (sys.stdout.close())
        self.closed_fds: set[int] = set()  # fds it closed (os.close(1)): a stream's close leaves its fd
        self.shadowed: list[tuple[Any, str, Any]] = []
        for fd, stream in enumerate(self.by_fd):
            self._shadow(stream, "close", self._closer(fd, stream))
        if _fd_of(stdin) is None:  # a pipe's or a heredoc's text: fd 0, which os.read(0) and open(0) read
            self._shadow(stdin, "fileno", _fd_zero)
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = self.by_fd  # type: ignore[misc]

    def _shadow(self, stream: Any, name: str, value: Any) -> None:
        """Set `name` on this one stream object (an instance attribute hides the method), to be
        taken away at the program's end."""
        try:
            before = vars(stream).get(name, _MISSING)
            setattr(stream, name, value)
        except (TypeError, AttributeError):  # a stream without instance attributes
            return
        self.shadowed.append((stream, name, before))

    def _closer(self, fd: int, stream: Any) -> Any:
        def close() -> None:
            if fd in self.closed:
                return
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
            self.closed.add(fd)
            if fd:  # the program's writes to it now fail as on a closed file
                self._shadow(stream, "write", _closed_write)
        return close

    def end(self) -> None:
        for stream, name, before in reversed(self.shadowed):
            try:
                if before is _MISSING:
                    delattr(stream, name)
                else:
                    setattr(stream, name, before)
            except AttributeError:
                pass
        sys.__stdin__, sys.__stdout__, sys.__stderr__ = self.dunders  # type: ignore[misc]


def _fd_zero() -> int:
    """A program's stdin's `fileno()` when the shell hands it text: 0, the program's own fd 0
    (`os.read(sys.stdin.fileno(), n)`, `open(sys.stdin.fileno())`, `select([sys.stdin], ...)`,
    `subprocess.run(..., stdin=sys.stdin)`); it raised `io.UnsupportedOperation`."""
    return 0


def _closed_write(*_args: Any) -> int:
    raise ValueError("I/O operation on closed file.")


def program_streams(stdin: Any, stdout: Any, stderr: Any) -> Streams:
    streams = Streams(stdin, stdout, stderr)
    _streams.append(streams)
    return streams


def program_streams_end(streams: Streams) -> None:
    streams.end()
    if streams in _streams:
        _streams.remove(streams)


def _write(fd: int, data: Any) -> int:
    """`os.write`: fds 1 and 2 of a running program are its stdout and stderr."""
    if _streams and fd in (1, 2) and isinstance(fd, int):
        streams = _streams[-1]
        if fd in streams.closed_fds:
            raise OSError(9, "Bad file descriptor")
        stream = streams.by_fd[fd]
        if fd not in streams.virtual:  # the guest's own stdout (nothing redirected): straight out, as before
            stream.flush()
            return _real_write(fd, data)
        return _write_to(stream, data)
    return _real_write(fd, data)


def _fd_of(stream: Any) -> int | None:
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return fd if isinstance(fd, int) else None


def _write_to(stream: Any, data: Any) -> int:
    """`data` (bytes) into a program's text stream: its binary buffer when it has one."""
    size = memoryview(data).nbytes
    buffer = getattr(stream, "buffer", None)
    stream.flush()
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        from declaw_shell import rawbytes

        rawbytes.write(stream, rawbytes.from_bytes(bytes(data)))
    return size


def _read(fd: int, size: int) -> bytes:
    """`os.read`: fd 0 of a running program is its stdin (a pipe's or a file's the shell hands it:
    `os.read(0, n)` read the guest's own, empty, stdin)."""
    if _streams and fd == 0 and isinstance(fd, int):
        streams = _streams[-1]
        if 0 in streams.closed_fds:
            raise OSError(9, "Bad file descriptor")
        if 0 in streams.virtual:
            return _read_from(streams.by_fd[0], size)
    return _real_read(fd, size)


def _read_from(stream: Any, size: int) -> bytes:
    """At most `size` bytes of a program's text stdin, as they come: its binary buffer's when it has one."""
    if size < 0:
        raise ValueError("negative size")  # (os.read's own check comes first on a real descriptor)
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        read1 = getattr(buffer, "read1", None)
        return bytes(read1(size) if read1 is not None else buffer.read(size))
    from declaw_shell import rawbytes

    return rawbytes.to_bytes(stream.read(size))


def virtual_fd(fd: Any) -> bool:
    """Whether fd 0, 1 or 2 of the running program is one of its Python streams, not the guest's
    descriptor (`open(0)` then opens that stream, as /dev/stdin does)."""
    if not _streams or type(fd) is not int or fd not in (0, 1, 2):
        return False
    return fd in _streams[-1].virtual


def _close(fd: int) -> None:
    """`os.close`: a running program's fds 0–2 close for it alone (the shell's stay open)."""
    if _streams and fd in (0, 1, 2) and isinstance(fd, int):
        streams = _streams[-1]
        if fd in streams.closed_fds:
            raise OSError(9, "Bad file descriptor")
        streams.closed_fds.add(fd)
        return
    _real_close(fd)


def install() -> None:
    """At the guest's start (guest/_declaw_boot.py): `os.write`, `os.read` and `os.close` as above."""
    _write.__doc__, _close.__doc__, _read.__doc__ = _real_write.__doc__, _real_close.__doc__, _real_read.__doc__
    os.write, os.close, os.read = _write, _close, _read
