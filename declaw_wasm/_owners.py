"""Host folders that outlive a killed program are found and deleted the next time one starts.

A program killed hard (SIGKILL, an OOM kill, `os._exit`) cannot delete its sandboxes' folders.
So every folder we make under the temporary directory carries its owner in its name:
`declaw-wasm-sbx-p<pid>.<start>.<boot>-XXXXXXXX`, where `<start>` is the process's start time
(clock ticks since boot, from /proc) and `<boot>` the start of the kernel's boot id, because a
pid alone is reused. Putting the mark in the name costs nothing per sandbox (no marker file to
write) and the guest never sees it (it only sees the folder's `root/`).

The first folder a process makes starts one background thread that looks at the others and
deletes those whose owner is gone: no process with that pid, or one that started at another
time, or on another boot. A live process's folders are never touched; a folder we cannot parse
(an older release's, someone else's) is left alone; only real directories owned by our own user
are deleted (`shutil.rmtree` does not follow symlinks). Where /proc is missing (not Linux) the
start time is 0 and a pid that exists counts as alive: never wrong in the deleting direction.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Optional

KINDS = ("sbx", "standby", "scratch", "volumes")  # a sandbox's, a pre-created sandbox's, a host
# guest's, the process's attached volumes (_volumes/attach.py)
# ... and "trash": a killed sandbox's folder, renamed, waiting for the background deleter
_NAME = re.compile(r"^declaw-wasm-(?:sbx|standby|scratch|volumes|trash)-p(\d+)\.(\d+)\.([0-9a-f]{8})-")
_lock = threading.Lock()
_tag: Optional[tuple[int, str]] = None  # (pid, tag): a forked child makes its own
_reaper: Optional[threading.Thread] = None


def _start_time(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (None: no such process); 0 where
    /proc cannot say."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        return 0 if not os.path.isdir("/proc/self") else None
    try:
        return int(stat.rsplit(b")", 1)[1].split()[19])  # field 22 of stat(5)
    except (IndexError, ValueError):
        return 0


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip().replace("-", "")[:8]
    except OSError:
        return "0" * 8


def _alive(pid: int, start: int, boot: str) -> bool:
    if not os.path.isdir("/proc/self"):  # no /proc: whether the pid exists at all
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
    if boot != _boot_id():
        return False
    now = _start_time(pid)
    return now is not None and (now == start or now == 0 or start == 0)


def owner_tag() -> str:
    """`p<pid>.<start>.<boot>` for this process."""
    global _tag
    pid = os.getpid()
    with _lock:
        if _tag is None or _tag[0] != pid:
            _tag = (pid, f"p{pid}.{_start_time(pid) or 0}.{_boot_id()}")
        return _tag[1]


def make_folder(kind: str) -> Path:
    """A new private (0700) folder `declaw-wasm-<kind>-<owner>-XXXXXXXX` in the temporary
    directory; the first one a process makes starts the reaper of dead owners' folders."""
    if kind not in KINDS:
        raise ValueError(f"unknown folder kind {kind!r}")
    path = Path(tempfile.mkdtemp(prefix=f"declaw-wasm-{kind}-{owner_tag()}-"))
    start_reaper(path.parent)
    return path


def trash_name(name: str) -> str:
    """The name a folder of ours takes once its sandbox is killed (same owner, same suffix)."""
    for kind in KINDS:
        prefix = f"declaw-wasm-{kind}-"
        if name.startswith(prefix):
            return "declaw-wasm-trash-" + name[len(prefix):]
    return "declaw-wasm-trash-" + name


def start_reaper(where: Path) -> None:
    """Reap dead owners' folders in `where`, once per process, in a background thread."""
    global _reaper
    with _lock:
        if _reaper is not None:
            return
        _reaper = threading.Thread(target=reap, args=(where,), name="declaw-leftovers", daemon=True)
        _reaper.start()


def reap(where: Path) -> list[Path]:
    """Delete the folders in `where` whose owner process is gone; the ones deleted."""
    uid = os.getuid() if hasattr(os, "getuid") else None
    reaped: list[Path] = []
    try:
        entries = list(os.scandir(where))
    except OSError:
        return reaped
    for entry in entries:
        match = _NAME.match(entry.name)
        if match is None:
            continue
        pid, start, boot = int(match.group(1)), int(match.group(2)), match.group(3)
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not entry.is_dir(follow_symlinks=False) or (uid is not None and st.st_uid != uid):
            continue
        if _alive(pid, start, boot):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        reaped.append(Path(entry.path))
    return reaped


def wait_for_reaper(timeout: float = 30.0) -> None:
    """For tests: wait until this process's reaper has finished."""
    thread = _reaper
    if thread is not None:
        thread.join(timeout)
