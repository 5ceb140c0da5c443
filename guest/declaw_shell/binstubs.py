"""The files in the guest's /usr/bin and /bin: one small script per program of the shell.

The shell runs programs by name, not from files, but agents and their tools look for the files
(`which python3`, `[ -x /bin/bash ]`, `ls /usr/bin`, `command -v rg`), so each program the
shell has exists there, as a script that runs it (`exec NAME "$@"`). declaw_wasm/guest_site.py
writes them once, in a guest, into the read-only folder it mounts at both paths.
"""

from __future__ import annotations

import os
import sys

STUB = '#!/bin/sh\nexec %s "$@"\n'


def names() -> list[str]:
    from . import GuestExecutor, programs

    return GuestExecutor(programs.registry(None), None).program_names()


def write(folder: str) -> None:
    os.makedirs(folder, exist_ok=True)
    for name in names():
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(STUB % name)


if __name__ == "__main__":
    write(sys.argv[1])
