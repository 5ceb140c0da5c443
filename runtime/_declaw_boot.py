"""Guest-side start-up: makes `python3 ARGS` inside the sandbox behave as CPython's command line.

Cold path: the guest's main program, as
``python /usr/local/lib/declaw/_declaw_boot.py CWD [python options] (-c CODE | -m MOD | FILE | -) ARGS``.
Warm path: imported when the snapshot is built; each command's first turn calls `start()`,
which first renews what the snapshot froze (environment, random seeds, tempfile names).
The reactor runs CPython isolated (no site, no PYTHONPATH, no script folder on sys.path), so
this puts back what a user of `python3` expects: the working directory, `sys.argv`, a fresh
`__main__`, the script's folder (or the cwd for -c/-m) on `sys.path`, tracebacks that start at
the user's code, and an asyncio whose default loop works without `socketpair`.
"""

import os
import sys

USAGE = "usage: python3 [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
VERSION = "Python %d.%d.%d\n" % sys.version_info[:3]
IGNORED_FLAGS = set("bBdEhiIOqsSuvx")


def start(cwd, args, env):
    """The warm path's entry: make this instance the command's, then run it; never returns."""
    _renew(env)
    _finish(_status_of(main, cwd, list(args)))


def _renew(env):
    """Undo what a snapshot taken at build time would otherwise share with every instance."""
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]  # also unsetenv: C code sees the same environment
    os.environ.update(env)
    modules = sys.modules
    if "random" in modules:
        modules["random"].seed()
    if "numpy.random" in modules:
        modules["numpy.random"].seed()
    if "tempfile" in modules:
        modules["tempfile"]._name_sequence = None


def _status_of(fn, *args):
    try:
        return fn(*args)
    except SystemExit as exc:
        return _exit_status(exc)


def main(cwd, args):
    try:
        os.chdir(cwd)
    except OSError as exc:
        sys.stderr.write("python3: can't change to %s: %s\n" % (cwd, exc.strerror))
        return 2
    os.environ["PWD"] = cwd
    sys.executable = "/usr/local/bin/python3"
    sys.orig_argv = [sys.executable, *args]
    _install_asyncio_fix()

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
            import runpy

            return _run_user(lambda: runpy._run_module_as_main(module, alter_argv=True))
        if opt in ("-W", "-X"):
            if args:
                args.pop(0)
            continue
        if not all(ch in IGNORED_FLAGS for ch in opt[1:]):
            return _usage("Unknown option: %s" % opt)

    if not args or args[0] == "-":
        sys.argv = ["-", *args[1:]] if args else [""]
        sys.path.insert(0, "")
        return _run_source(sys.stdin.read(), "<stdin>", None)

    path = args[0]
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as exc:
        sys.stderr.write("python3: can't open file %r: [Errno %d] %s\n"
                         % (os.path.abspath(path), exc.errno, exc.strerror))
        return 2
    sys.argv = list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    return _run_source(source, path, os.path.abspath(path))


def _usage(message):
    sys.stderr.write(message + "\n" + USAGE + "Try `python -h' for more information.\n")
    return 2


def _run_source(source, filename, file_path):
    """Compile and run `source` as a fresh `__main__`."""
    import types

    main_module = types.ModuleType("__main__")
    main_module.__dict__.update(__builtins__=__builtins__, __spec__=None, __loader__=None)
    if file_path is not None:
        main_module.__file__ = file_path
        main_module.__cached__ = None
    sys.modules["__main__"] = main_module
    if file_path is None and isinstance(source, str):
        import linecache  # so tracebacks of -c code show its lines, as CPython's do

        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)

    def run():
        exec(compile(source, filename, "exec", dont_inherit=True), main_module.__dict__)

    return _run_user(run)


def _run_user(run):
    """Run user code; an uncaught exception prints as CPython prints it (without our frames)."""
    try:
        run()
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return 1
    return 0


def _exit_status(exc):
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


def _finish(status):
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
    os._exit(status)


def _install_asyncio_fix():
    """Make asyncio's default event loop one without a self-pipe (WASI has no socketpair).

    Installed lazily: a finder that patches asyncio right after it is first imported, so
    programs that never use asyncio do not pay for importing it. If asyncio is already loaded
    (say, the warm snapshot imported it), it is patched at once.
    """
    if "asyncio" in sys.modules:
        _patch_asyncio(sys.modules["asyncio"])
        return
    import importlib.abc
    import importlib.machinery

    class AsyncioPatcher(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            if fullname != "asyncio":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and spec.loader is not None:
                spec.loader = PatchingLoader(spec.loader)  # the zip's loader is shared: wrap it
            return spec

    class PatchingLoader(importlib.abc.Loader):
        def __init__(self, inner):
            self.inner = inner

        def create_module(self, spec):
            return self.inner.create_module(spec)

        def exec_module(self, module):
            self.inner.exec_module(module)
            _patch_asyncio(module)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    sys.meta_path.insert(0, AsyncioPatcher())


def _patch_asyncio(asyncio):
    """Give every selector loop a no-op self-pipe: with no threads or signals in the guest,
    nothing ever needs to wake the loop from outside, and `socketpair` does not exist."""
    import selectors

    loop_class = asyncio.selector_events.BaseSelectorEventLoop
    original_init = loop_class.__init__

    def __init__(self, selector=None):
        original_init(self, selector or selectors.SelectSelector())

    loop_class.__init__ = __init__
    loop_class._make_self_pipe = lambda self: None
    loop_class._close_self_pipe = lambda self: None
    loop_class._write_to_self = lambda self: None


if __name__ == "__main__":
    _finish(_status_of(main, sys.argv[1], sys.argv[2:]))
