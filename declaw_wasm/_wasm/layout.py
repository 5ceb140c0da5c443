"""The guest's side of the file system, written once: every guest path the host relies on, the
`Mount` a guest sees a host folder through, the read-only mounts every guest shares, and the
environment every guest starts from.

    guest path                                         host                             access
    /                                                  <sandbox>/root  (wasi-fs/ copy)  read-only
    /home/user, /tmp, /workspace                       <sandbox>/root/home/user, ...     read-write
    /root                                              <sandbox>/root/root (empty)       read-only
    /usr/local/lib                                     <cache>/runtime/.../lib (shared)  read-only
    /usr/local/lib/declaw                              the package's guest/ folder       read-only
    /usr/local/lib/declaw-site                         <cache>/runtime/guest-site-*      read-only
    /usr/local/lib/declaw-bundle   (code-interpreter)  <cache>/runtime/bundle-*          read-only
    /usr/local/lib/declaw-template (custom templates)  <cache>/templates/NAME/site       read-only
    /usr/local/lib/python315.zip/matplotlib/mpl-data   <cache>/runtime/.../mpl-data      read-only
    /usr/bin, /bin                                     <cache>/runtime/guest-site-*/bin  read-only
    /dev                                               <cache>/runtime/guest-site-*/dev  read-only

The guest-side code repeats some of these paths (guest/_declaw_boot.py's GUEST_SITE,
guest/declaw_shell/pip.py's USER_SITE, guest/declaw_shell's WRITABLE); tests/test_layers.py
checks they agree.
"""

from __future__ import annotations

import functools
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from .._owners import make_folder

HOME = "/home/user"
WORKSPACE = "/workspace"  # declaw's and OpenAI Agents' default root; writable, in the disk quota
GUEST_LIB = "/usr/local/lib"
GUEST_PYTHON = "/usr/local/bin/python3"
GUEST_DECLAW = "/usr/local/lib/declaw"  # guest/: start-up, shell and kernel sources
BOOT_SCRIPT = f"{GUEST_DECLAW}/_declaw_boot.py"
GUEST_SITE = "/usr/local/lib/declaw-site"  # the shell, msgpack and guest/'s packages, compiled
BIN_STUBS = f"{GUEST_SITE}/bin"  # one script per shell program (guest/declaw_shell/binstubs.py)
BIN_FOLDERS = ("/usr/bin", "/bin")  # where BIN_STUBS is mounted
# /dev: an empty file per device the guest answers (guest/_declaw_boot.py's _DEVICES: open()
# reads and writes them as Linux's devices), so that `test -e /dev/null`, `os.path.exists(os.devnull)`,
# `cp /dev/null f` and `ls /dev` find them; one read-only folder of the guest site, shared
GUEST_DEVICES = "/dev"
DEVICES = ("null", "zero", "random", "urandom", "stdin", "stdout", "stderr")
# /proc's files the guest's open() answers with the sandbox's own figures (`cat /proc/cpuinfo`,
# `grep MemTotal /proc/meminfo`): empty files of the sandbox's root (read-only to the guest), as /dev's
# are of the site; /proc is the sandbox's own (its boot id: _local/sandbox.py)
GUEST_PROC = "/proc"
PROC_FILES = ("cpuinfo", "meminfo")
GUEST_BUNDLE = "/usr/local/lib/declaw-bundle"
GUEST_TEMPLATE_SITE = "/usr/local/lib/declaw-template"
MPL_DATA = "/usr/local/lib/python315.zip/matplotlib/mpl-data"
USER_SITE = "/home/user/.local/lib/python3.15/site-packages"  # `pip install` in a sandbox
USER_BIN = "/home/user/.local/bin"
WRITABLE = (HOME, "/tmp", WORKSPACE)  # the folders a guest (and the files API) may write
PTY_ENV = {"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


@dataclass(frozen=True)
class Mount:
    """A host folder the guest sees at `guest` (read-only unless `writable`)."""

    guest: str
    host: Path
    writable: bool


def base_env() -> dict[str, str]:
    """The environment every guest starts from. Nothing comes from the host's environment."""
    return {
        "HOME": HOME, "USER": "user", "LOGNAME": "user", "SHELL": "/bin/bash",
        # ~/.local/bin first, as Debian's ~/.profile puts it: what `pip install` puts there runs by name
        "PATH": f"{USER_BIN}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
        "HOSTNAME": "sandbox", "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{HOME}/.config/matplotlib",
    }


def shared_mounts(lib_dir: Path, mpl_data_dir: Path, guest_code: Path,
                  site: Path) -> list[Mount]:
    """The read-only mounts every guest shares: stdlib + packages, boot and shell code, the
    guest's own site-packages (its bin/ also at /usr/bin and /bin), matplotlib data."""
    return [
        Mount(GUEST_LIB, lib_dir, writable=False),
        Mount(GUEST_DECLAW, guest_code, writable=False),
        Mount(GUEST_SITE, site, writable=False),
        Mount(MPL_DATA, mpl_data_dir, writable=False),
        *(Mount(folder, site / "bin", writable=False) for folder in BIN_FOLDERS),  # BIN_STUBS
        Mount(GUEST_DEVICES, site / "dev", writable=False),
    ]


def root_mounts(root: Path) -> list[Mount]:
    """A sandbox's own folder as the guest sees it: `/` read-only, WRITABLE writable."""
    return [Mount("/", root, writable=False),
            *(Mount(folder, root / folder.lstrip("/"), writable=True) for folder in WRITABLE)]


ROOT_FOLDERS = ("home", "home/user", "home/user/.config", "home/user/.config/matplotlib", "tmp", "workspace",
                "root", "usr", "usr/local", "usr/local/lib", "usr/local/bin", "usr/bin", "bin", "dev", "proc",
                "proc/sys", "proc/sys/kernel", "proc/sys/kernel/random")  # parents first
ROOT_FILES = tuple(f"{GUEST_PROC.lstrip('/')}/{name}" for name in PROC_FILES)  # empty, made with the folders


def make_root(root: Path, skeleton: Path) -> None:
    """Lay out a sandbox's root folder from the skeleton (wasi-fs/) and the folders guests need.

    The skeleton's folders and files (a few small ones) are read once per process and written
    with a few calls each: every create pays this (~0.5 ms instead of copytree's ~1.4 ms beside
    a loop of creates). A skeleton holding anything but plain folders and files is copied as it
    is (copytree)."""
    import os

    layout = _skeleton(skeleton, *_stamp(skeleton))
    if layout is None:
        shutil.copytree(skeleton, root, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"),
                        dirs_exist_ok=True)
        for folder in ROOT_FOLDERS:
            (root / folder).mkdir(exist_ok=True)
        for name in ROOT_FILES:
            (root / name).touch()
        return
    folders, files = layout
    top = str(root)
    for folder, _mode, _mtime in folders:
        os.makedirs(os.path.join(top, folder), exist_ok=True)
    for name, data, mode, mtime in files:
        fd = os.open(os.path.join(top, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     mode)
        try:
            os.write(fd, data)
            os.fchmod(fd, mode)
            os.utime(fd, ns=(mtime, mtime))
        finally:
            os.close(fd)
    for folder, mode, mtime in reversed(folders):  # as copytree leaves them: the skeleton's mode and time
        os.chmod(os.path.join(top, folder), mode)
        os.utime(os.path.join(top, folder), ns=(mtime, mtime))
    for folder in ROOT_FOLDERS:
        try:
            os.mkdir(os.path.join(top, folder))
        except FileExistsError:
            pass
    for name in ROOT_FILES:
        os.close(os.open(os.path.join(top, name), os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))


def _stamp(skeleton: Path) -> tuple[int, int]:
    """What tells a changed skeleton folder (its top folder's inode and time: a file added or
    removed at its top; a file edited in place is seen by the next process)."""
    import os

    st = os.stat(skeleton)
    return st.st_ino, st.st_mtime_ns


@functools.lru_cache(maxsize=4)
def _skeleton(skeleton: Path, _ino: int, _mtime: int) -> Optional[tuple[list[tuple[str, int, int]],
                                                                       list[tuple[str, bytes, int, int]]]]:
    """The skeleton's folders (relative path, mode, mtime; itself and parents first) and files (relative
    path, bytes, mode, mtime), as copytree would copy them; None if it holds anything else."""
    import os
    import stat

    top = os.stat(skeleton)
    folders: list[tuple[str, int, int]] = [(".", stat.S_IMODE(top.st_mode), top.st_mtime_ns)]
    files: list[tuple[str, bytes, int, int]] = []
    for folder, subfolders, names in os.walk(skeleton):
        subfolders[:] = sorted(sub for sub in subfolders if sub != "__pycache__")
        relative = os.path.relpath(folder, skeleton)
        for sub in subfolders:
            st = os.lstat(os.path.join(folder, sub))
            if not stat.S_ISDIR(st.st_mode):
                return None
            folders.append((os.path.normpath(os.path.join(relative, sub)), stat.S_IMODE(st.st_mode), st.st_mtime_ns))
        for name in sorted(names):
            if name == "__init__.py":
                continue
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
                return None
            with open(path, "rb") as f:
                files.append((os.path.normpath(os.path.join(relative, name)), f.read(), stat.S_IMODE(st.st_mode),
                              st.st_mtime_ns))
    return folders, files


@contextmanager
def scratch_root(skeleton: Path) -> Iterator[list[Mount]]:
    """A throw-away root for the host's own guests (the warm image's build, its self-check): its
    mounts, deleted on exit."""
    base = make_folder("scratch")
    try:
        make_root(base / "root", skeleton)
        yield root_mounts(base / "root")
    finally:
        shutil.rmtree(base, ignore_errors=True)
