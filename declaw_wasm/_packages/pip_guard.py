"""The host's pip, run under guards that no input to pip can turn off: it starts no process,
reaches no host but the package indexes the host configured, touches no file but the folders
pip was given, and its memory and file sizes are bounded.

pip.py never runs `python -m pip` itself; it runs this file as a program
(`python -c BOOT pip_guard.py POLICY ARGS...`, see `pip.pip_command`), which sets resource limits,
installs an audit hook (`sys.addaudithook`, PEP 578) and then runs pip's own `__main__`, exactly
as `-m pip` would. POLICY (JSON, written by pip.py) holds the run's own temporary folder, hosts
the operator added (`DECLAW_WASM_PIP_HOSTS`), and the limits.

**No process.** The hook refuses, before the process exists, every way Python starts one:
`subprocess.Popen`, `os.exec*`, `os.posix_spawn*`, `os.spawn*`, `os.system`, `os.fork`,
`os.forkpty`, and ctypes looking up libc's fork/exec/spawn/system; `_posixsubprocess.fork_exec`
(which multiprocessing calls without an audit event) is replaced by one that refuses too.
Everything that would run a package's code on the host starts a process — building a source
distribution (the PEP 517 hooks run in a subprocess), a legacy `setup.py`, installing build
dependencies into an isolated environment — while resolving and downloading wheels starts none.
The only processes pip starts on its wheel-only paths are probes for its User-Agent header
(`lsb_release -a`, `uname -rs`, `rustc --version`); pip ignores their failure, so they are
refused quietly. Keyring lookups, the other place pip may start a program, are off: pip.py
always passes `--no-input`, and pip then uses no keyring unless `keyring-provider` is
configured explicitly (`subprocess` would be refused here).

**No host but the indexes.** `socket.getaddrinfo` (and the other name lookups) may only look up
a host of pip's own configuration — its index URL and extra index URLs, HTTP find-links, its
proxy and the environment's proxies, as pip parsed them (from pip.conf, `PIP_*` and the command
line: learned when pip's command parses its options), `files.pythonhosted.org` for PyPI, and the
hosts in POLICY; `socket.connect` may only reach an address such a lookup returned. A URL a
wheel's metadata names (pip.py refuses those first) reaches nothing else, not the loopback, not
the cloud's metadata service.

**No file but pip's folders.** Opening a file (and listing a folder) is allowed only inside the
Python installation (its stdlib and site-packages, `sys.path`: pip's own code, certifi), pip's
configuration files, `~/.netrc`, the MIME-type files, and what pip's parsed options name: local
indexes (a `file:` index and the folder above it, where such indexes keep their files),
find-links, constraint and requirement files, `--cert`, the report, target and download folders,
pip's cache folder; and POLICY's temporary folder, which pip.py makes for this run and hands to
pip as TMPDIR. Writing, creating, renaming and deleting are allowed only in the temporary
folder, the cache, and the report, target and download folders. pip's User-Agent probe (which
reads /etc/os-release and the like) reads what it reads. A `file:` URL a wheel's metadata names
(pip.py refuses those first) opens nothing.

**Markers are the guest's.** pip judges environment markers (a requirement's `; sys_platform ==
...`, a dependency's `Requires-Dist` markers) against `packaging.markers.default_environment()`,
which describes the Python running pip: the host's platform, machine and kernel release. The
guard replaces that function (in pip's vendored `packaging`) by one answering GUEST_MARKERS, the
environment the guest's CPython reports, before pip's code runs: pip installs what the guest's
own environment asks for, and no guest learns the host's platform, machine or kernel from which
requirements pip skipped (pip's `--platform`, `--python-version`, `--implementation` and `--abi`
set the wheel tags it accepts, not the markers).

**Bounded.** `RLIMIT_AS` bounds pip's memory (a MemoryError, not the host's OOM killer) and
`RLIMIT_FSIZE` every file it writes (EFBIG, with SIGXFSZ ignored).

So `--only-binary :all:` and pip.py's checks of every guest wheel are the first line and this is
the second: whatever pip's inputs say (a constraints file, the host's pip.conf, an index that
serves only an sdist, a wheel's dependency on a URL), nothing gets built or run, fetched from
elsewhere or read from elsewhere. A refusal writes a line starting with `MARK` and the kind
(`process`, `network`, `file`) to stderr, which the host turns into a clear error.

This file is a standalone program: it imports only the standard library (and, once running,
pip's own modules; pip.py imports it only for its constants).
"""

from __future__ import annotations

import ipaddress
import json
import os
import runpy
import socket
import sys
from types import FrameType
from typing import Any, Iterable, Optional
from urllib.parse import unquote, urlsplit

try:
    import fcntl
    F_GETPATH: Optional[int] = getattr(fcntl, "F_GETPATH", None)  # macOS
except ImportError:  # not POSIX
    F_GETPATH = None

MARK = "declaw-wasm-guard: refused "
MEMORY_BYTES = 1 << 30  # pip resolving 42 packages peaks at ~85 MiB of address space (VmPeak)
FILE_BYTES = 2 << 30  # one file pip writes (a downloaded wheel)
EVENTS = frozenset({"subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                    "os.fork", "os.forkpty", "os.startfile", "pty.spawn"})
# libc functions that start a program, looked up through ctypes
SYMBOLS = frozenset({"fork", "vfork", "clone", "clone3", "execv", "execve", "execvp", "execvpe",
                     "execl", "execle", "execlp", "fexecve", "execveat", "posix_spawn",
                     "posix_spawnp", "system", "popen", "forkpty", "syscall"})
LOOKUPS = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                     "socket.gethostbyaddr", "socket.getnameinfo"})
SENDS = frozenset({"socket.connect", "socket.sendto", "socket.sendmsg"})
# events that change a path: (index of a path argument, index of its dir_fd argument or None)
CHANGES = {"os.mkdir": ((0, 2),), "os.remove": ((0, 1),), "os.rmdir": ((0, 1),),
           "os.rename": ((0, 2), (1, 3)), "os.link": ((1, 3),), "os.symlink": ((1, 2),),
           "shutil.rmtree": ((0, 1),), "os.truncate": ((0, None),), "os.chmod": ((0, 2),),
           "os.chown": ((0, 3),), "os.utime": ((0, 3),)}
FILE_HOSTS = {"pypi.org": "files.pythonhosted.org", "test.pypi.org": "test-files.pythonhosted.org"}
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# PEP 508's marker environment as the guest's CPython reports it (`packaging.markers.
# default_environment()` inside a sandbox: tests/packages/test_pip_markers.py checks that it
# does). platform_release and platform_version are wasi-libc's fixed `uname` answers, nothing of
# the host's.
GUEST_MARKERS = {
    "implementation_name": "cpython",
    "implementation_version": "3.15.0",
    "os_name": "posix",
    "platform_machine": "wasm32",
    "platform_python_implementation": "CPython",
    "platform_release": "0.0.0",
    "platform_system": "wasi",
    "platform_version": "0.0.0",
    "python_full_version": "3.15.0",
    "python_version": "3.15",
    "sys_platform": "wasi",
}


def _in_function(frame: Optional[FrameType], module: str, function: str) -> bool:
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return True
        frame = frame.f_back
    return False


def _in_rmtree(frame: Optional[FrameType]) -> bool:
    """Whether the call comes from shutil.rmtree's walk (it opens folders by relative name)."""
    while frame is not None:
        if frame.f_globals.get("__name__") == "shutil" and frame.f_code.co_name.startswith("_rmtree"):
            return True
        frame = frame.f_back
    return False


def _user_agent_probe(frame: Optional[FrameType]) -> bool:
    """Whether the refused call comes from pip's User-Agent probes (distro, rustc)."""
    return _in_function(frame, "pip._internal.network.session", "user_agent")


class NetworkRefused(BaseException):
    """A connection the guard refused: not an OSError, so that no retry loop (urllib3's, with its
    backoff) takes it for a network hiccup; pip ends, and the host reports the refusal."""


def _refuse(kind: str, what: str, quiet: bool = False) -> None:
    if not quiet:
        os.write(2, f"{MARK}{kind} {what}\n".encode("utf-8", "replace"))
    if kind == "network":
        raise NetworkRefused(f"declaw-wasm: pip may not reach that host ({what})")
    raise PermissionError(f"declaw-wasm: pip may not do that on the host ({kind}: {what})")


def _fd_path(fd: int) -> Optional[str]:
    """The path an open descriptor names, if the system says (Linux's /proc, macOS's F_GETPATH)."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    if F_GETPATH is None:
        return None
    try:
        raw = fcntl.fcntl(fd, F_GETPATH, bytes(1024))
        return os.fsdecode(raw.split(b"\0", 1)[0])
    except OSError:
        return None


def _host_name(host: str) -> str:
    """A host name as compared: lower case, no trailing dot, an address in its one spelling."""
    name = host.lower().rstrip(".").strip("[]")
    try:
        return str(ipaddress.ip_address(name.split("%", 1)[0]))
    except ValueError:
        return name


def _real(path: Any, dir_fd: Any = None, follow: bool = True) -> Optional[str]:
    """The absolute, symlink-free path an event names (None: cannot tell)."""
    if isinstance(path, int):
        return _fd_path(path)
    if not isinstance(path, (str, bytes, os.PathLike)):
        return None
    text = os.fsdecode(path)
    if not os.path.isabs(text) and isinstance(dir_fd, int) and dir_fd >= 0:
        base = _fd_path(dir_fd)
        if base is None:
            return None
        text = os.path.join(base, text)
    text = os.path.abspath(text)
    if follow:
        return os.path.realpath(text)
    return os.path.join(os.path.realpath(os.path.dirname(text)), os.path.basename(text))


class Guard:
    """What this pip may touch: hosts (and the addresses looked up for them), folders to read,
    folders to change, single files to read or write."""

    def __init__(self, policy: dict[str, Any]) -> None:
        self.hosts: set[tuple[str, int]] = set()  # (name or address, port)
        self.addresses: set[tuple[str, int]] = set()  # what looking those up answered
        self.read_trees: list[str] = []
        self.write_trees: list[str] = []
        self.read_files: set[str] = set()
        self.write_files: set[str] = set()
        for host in policy.get("hosts", []):
            self.allow_host(str(host))
        tmp = policy.get("tmp")
        if tmp:
            self.allow_tree(str(tmp), write=True)
        self._python_paths()

    # -- what is allowed --------------------------------------------------------------------------
    def allow_host(self, host: Optional[str], port: Optional[int] = None) -> None:
        """`host` on `port` (None: 80 and 443), and PyPI's file host with PyPI."""
        if host:
            name = _host_name(host)
            for each in (80, 443) if port is None else (port,):
                self.hosts.add((name, each))
            if name in FILE_HOSTS:
                self.hosts.add((FILE_HOSTS[name], 443))

    def allow_url(self, url: str) -> None:
        """The host and port of an http(s) URL (or of `host:port`, a proxy's usual spelling)."""
        parts = urlsplit(url if "://" in url else f"http://{url}")
        try:
            port = parts.port
        except ValueError:
            return
        default = {"http": 80, "https": 443}.get(parts.scheme)
        self.allow_host(parts.hostname, port or default)

    def allow_tree(self, path: Any, write: bool = False) -> None:
        real = _real(path)
        if real and real.rstrip("/"):  # never the whole file system
            (self.write_trees if write else self.read_trees).append(real.rstrip("/"))

    def allow_file(self, path: Any, write: bool = False) -> None:
        real = _real(path)
        if real:
            (self.write_files if write else self.read_files).add(real)

    def allow_location(self, location: Any, kind: str) -> None:
        """A URL or a path pip was told to use: an `index` (a `file:` one: its folder and the one
        above, where such indexes keep their files), `links` (a folder of wheels, or a page and
        its folder), a `file` (constraints, requirements)."""
        if not isinstance(location, str) or not location:
            return
        parts = urlsplit(location)
        if parts.scheme in ("http", "https"):
            self.allow_url(location)
            return
        if parts.scheme not in ("", "file"):
            return
        path = unquote(parts.path) if parts.scheme == "file" else location
        path = os.path.abspath(os.path.expanduser(path)) if path else ""
        if not path:
            return
        if kind == "index":
            self.allow_tree(path)
            self.allow_tree(os.path.dirname(path.rstrip("/")))
        elif kind == "links" and os.path.isdir(path):
            self.allow_tree(path)
        elif kind == "links":
            self.allow_file(path)
            self.allow_tree(os.path.dirname(path))
        else:
            self.allow_file(path)

    def _python_paths(self) -> None:
        import sysconfig

        paths = sysconfig.get_paths()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            if key in paths:
                self.allow_tree(paths[key])
        sys.path[:] = [entry for entry in sys.path if entry]  # not the working folder
        for entry in sys.path:
            self.allow_tree(entry)
        self.allow_file(os.devnull, write=True)
        for path in (sys.executable, os.path.expanduser("~/.netrc"),
                     os.path.expanduser("~/_netrc"), os.environ.get("NETRC")):
            if path:
                self.allow_file(path)
        import mimetypes

        for known in mimetypes.knownfiles:
            self.allow_file(known)

    def allow_configuration(self) -> None:
        """pip's configuration files, wherever this pip looks for them."""
        files: list[str] = []
        try:
            from pip._internal.configuration import get_configuration_files

            for found in get_configuration_files().values():
                files += found
        except Exception:  # another pip: the usual places
            home = os.path.expanduser("~")
            files += ["/etc/pip.conf", "/etc/xdg/pip/pip.conf", os.path.join(sys.prefix, "pip.conf"),
                      os.path.join(home, ".pip", "pip.conf"), os.path.join(home, ".config", "pip", "pip.conf")]
        given = os.environ.get("PIP_CONFIG_FILE")
        for path in [*files, *([given] if given else [])]:
            self.allow_file(path)

    def learn(self, options: Any) -> None:
        """What pip's command-line and configuration options name (pip parsed them)."""
        if not getattr(options, "no_index", False):
            self.allow_location(getattr(options, "index_url", None), "index")
            for url in getattr(options, "extra_index_urls", None) or []:
                self.allow_location(url, "index")
        for link in getattr(options, "find_links", None) or []:
            self.allow_location(link, "links")
        for listed in ("constraints", "requirements"):
            for location in getattr(options, listed, None) or []:
                self.allow_location(location, "file")
        import urllib.request

        for proxy in [getattr(options, "proxy", None), *urllib.request.getproxies().values()]:
            if proxy:
                self.allow_url(proxy)
        for name in ("cert", "client_cert"):
            if getattr(options, name, None):
                self.allow_file(getattr(options, name))
        self._learn_written(options)

    def _learn_written(self, options: Any) -> None:
        """The folders and files pip's options tell it to write: its cache, the report, the
        target and download folders, a log."""
        cache = getattr(options, "cache_dir", None)
        if cache:
            self.allow_tree(cache, write=True)
            parent = os.path.abspath(cache)
            while parent != os.path.dirname(parent):  # pip checks who owns the first that exists
                parent = os.path.dirname(parent)
                self.allow_file(parent)
        for name in ("json_report_file", "log"):
            path = getattr(options, name, None)
            if path and path != "-":
                self.allow_file(path, write=True)
        for name in ("target_dir", "download_dir"):
            if getattr(options, name, None):
                self.allow_tree(getattr(options, name), write=True)

    # -- the checks -----------------------------------------------------------------------------------
    @staticmethod
    def _under(path: str, trees: Iterable[str]) -> bool:
        return any(path == tree or path.startswith(tree + "/") for tree in trees)

    def may_read(self, path: Optional[str]) -> bool:
        return path is not None and (path in self.read_files or path in self.write_files or
                                     self._under(path, self.read_trees) or
                                     self._under(path, self.write_trees))

    def may_write(self, path: Optional[str]) -> bool:
        return path is not None and (path in self.write_files or self._under(path, self.write_trees))

    def lookup(self, event: str, args: tuple[Any, ...]) -> None:
        host = args[0] if args else None
        name = _host_name(os.fsdecode(host)) if isinstance(host, (str, bytes)) else ""
        port = args[1] if event == "socket.getaddrinfo" and len(args) > 1 else None
        if isinstance(port, (str, bytes)) and os.fsdecode(port).isdigit():
            port = int(port)
        allowed = (name, port) in self.hosts if isinstance(port, int) else \
            any(known == name for known, _ in self.hosts)
        if not allowed:
            _refuse("network", f"looking up {name or host!r} port {port}, not a configured package index")

    def reach(self, address: Any) -> None:
        if isinstance(address, tuple) and len(address) > 1 and isinstance(address[0], str):
            if (_host_name(address[0]), address[1]) in self.addresses | self.hosts:
                return
            _refuse("network", f"connecting to {address[0]} port {address[1]}, not a configured "
                    "package index")
        _refuse("network", f"connecting to {address!r}")

    def looked_up(self, answers: Any) -> None:
        for answer in answers:
            try:
                self.addresses.add((_host_name(str(answer[4][0])), int(answer[4][1])))
            except (IndexError, TypeError, ValueError):
                continue

    def open(self, args: tuple[Any, ...]) -> None:
        path, mode, flags = (list(args) + [None, None, None])[:3]
        if isinstance(path, int):
            return  # a descriptor already open
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and bool(flags & WRITE_FLAGS))
        if not writing and isinstance(path, (str, bytes)) and not os.path.isabs(os.fsdecode(path)) \
                and _in_rmtree(sys._getframe(2)):
            return  # a folder below one `shutil.rmtree` may delete (its own event was checked)
        real = _real(path)
        if writing and not self.may_write(real):
            _refuse("file", f"writing {real or path!r}, outside the folders pip was given")
        if not writing and not self.may_read(real):
            self._refuse_read(real or repr(path))

    def list(self, path: Any) -> None:
        if isinstance(path, int):
            return
        real = _real("." if path is None else path)
        if not self.may_read(real):
            self._refuse_read(real or repr(path))

    def change(self, event: str, args: tuple[Any, ...]) -> None:
        for at, fd_at in CHANGES[event]:
            if at < len(args) and not isinstance(args[at], int):
                dir_fd = args[fd_at] if fd_at is not None and fd_at < len(args) else None
                real = _real(args[at], dir_fd, follow=False)
                if not self.may_write(real):
                    _refuse("file", f"{event} {real or args[at]!r}, outside the folders pip was given")
        if event == "os.link" and not self.may_read(_real(args[0], args[2] if len(args) > 2 else None)):
            _refuse("file", f"linking {args[0]!r}, outside the folders pip was given")

    @staticmethod
    def _refuse_read(shown: str) -> None:
        if _user_agent_probe(sys._getframe(2)):
            return  # pip's User-Agent probe reads /etc/os-release and the like: no input of pip's
        _refuse("file", f"reading {shown}, outside the folders pip was given")


GUARD: Optional[Guard] = None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event in EVENTS:
        _refuse("process", event, quiet=_user_agent_probe(sys._getframe(1)))
    elif event == "ctypes.dlsym" and len(args) > 1:
        name = args[1].decode("ascii", "replace") if isinstance(args[1], bytes) else args[1]
        if isinstance(name, str) and name in SYMBOLS:
            _refuse("process", f"ctypes.dlsym {name}", quiet=_user_agent_probe(sys._getframe(1)))
    elif GUARD is None:
        return
    elif event == "open":
        GUARD.open(args)
    elif event in ("os.listdir", "os.scandir"):
        GUARD.list(args[0] if args else None)
    elif event in CHANGES:
        GUARD.change(event, args)
    elif event in LOOKUPS:
        GUARD.lookup(event, args)
    elif event in SENDS:
        if len(args) > 1 and args[1] is not None:
            GUARD.reach(args[1])


def _no_fork_exec(*args: Any, **kwargs: Any) -> Any:
    _refuse("process", "_posixsubprocess.fork_exec")


_getaddrinfo = socket.getaddrinfo


def _recording_getaddrinfo(*args: Any, **kwargs: Any) -> Any:
    """socket.getaddrinfo, whose answers (for a host the hook let through) may be connected to."""
    answers = _getaddrinfo(*args, **kwargs)
    if GUARD is not None:
        GUARD.looked_up(answers)
    return answers


def _limit(memory: int, file_size: int) -> None:
    try:
        import resource
        import signal
    except ImportError:  # not POSIX
        return
    for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_FSIZE, file_size)):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (value, hard if hard != resource.RLIM_INFINITY else value))
        except (ValueError, OSError):
            pass
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the bound fails (EFBIG)


def _learning_parse_args(original: Any) -> Any:
    def parse_args(self: Any, args: list[str]) -> Any:
        options, rest = original(self, args)
        if GUARD is not None:
            GUARD.learn(options)
        return options, rest
    return parse_args


def _guest_environment() -> dict[str, str]:
    return dict(GUEST_MARKERS)  # a new dict each time: Marker.evaluate updates what it gets


def judge_markers_for_the_guest() -> None:
    """Make pip's `packaging` describe the guest, not the host, to every marker it judges (and
    in its --report). Done before pip's own modules are imported, so that those that import
    `default_environment` by name get this one too. No pip without its vendored `packaging`
    runs (an ImportError ends the run: it fails closed)."""
    from pip._vendor.packaging import markers

    markers.default_environment = _guest_environment


def install_guard(policy: Optional[dict[str, Any]] = None) -> None:
    global GUARD
    policy = policy or {}
    judge_markers_for_the_guest()
    _limit(int(policy.get("memory", MEMORY_BYTES)), int(policy.get("file_size", FILE_BYTES)))
    guard = Guard(policy)
    socket.getaddrinfo = _recording_getaddrinfo
    sys.addaudithook(_hook)
    try:
        import _posixsubprocess
    except ImportError:  # not POSIX
        pass
    else:
        _posixsubprocess.fork_exec = _no_fork_exec
    GUARD = guard
    guard.allow_configuration()
    try:  # what pip's command parses (configuration and command line): its indexes and folders
        from pip._internal.cli.base_command import Command

        setattr(Command, "parse_args", _learning_parse_args(Command.parse_args))  # noqa: B010
    except (ImportError, AttributeError):
        pass  # another pip: no index is reachable and no option's folder readable (fails closed)


def main() -> None:
    policy = json.loads(sys.argv.pop(1)) if len(sys.argv) > 1 and sys.argv[1].startswith("{") else {}
    install_guard(policy)
    sys.argv = ["pip", *sys.argv[1:]]
    runpy.run_module("pip", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
