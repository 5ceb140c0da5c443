"""The host's bash, started as a terminal starts it, for tests that compare the guest's shell with it.

A test process started under `nohup`, from a background job or by CI inherits ignored SIGHUP,
SIGINT or SIGQUIT, and a shell cannot undo a disposition it was started with ("signals ignored upon
entry to the shell cannot be trapped or reset"): `trap -p`, `kill -INT $$` and friends then differ
from a terminal's bash. So bash is exec'd from a small launcher that puts every signal back to its
default and unblocks them all (no `preexec_fn`: forking with a callback is unsafe in this
multi-threaded process).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from typing import Any

HOST_BASH = shutil.which("bash")

_LAUNCHER = (
    "import os, signal, sys\n"
    "for s in signal.valid_signals():\n"
    "    if s not in (signal.SIGKILL, signal.SIGSTOP):\n"
    "        try: signal.signal(s, signal.SIG_DFL)\n"
    "        except (OSError, ValueError): pass\n"
    "signal.pthread_sigmask(signal.SIG_SETMASK, set())\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def host_bash(args: list[str], **kwargs: Any) -> "subprocess.CompletedProcess[Any]":
    """`subprocess.run(["bash", *args], **kwargs)` with default signal dispositions."""
    bash = HOST_BASH or "/bin/bash"
    return subprocess.run([sys.executable, "-I", "-S", "-c", _LAUNCHER, bash, *args], **kwargs)
