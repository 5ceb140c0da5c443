"""`pwd`, `grp`, `resource` and `fcntl` for the guest: Linux modules WASI's CPython is built
without, which agents' code and libraries import freely (`pwd.getpwuid(os.getuid())`,
`os.path.expanduser("~root")`, `shutil.chown`, `resource.setrlimit` as a safety cap,
`resource.getrusage` in a timing script, `fcntl.flock` in filelock-style locking).

`install()` (guest/_declaw_boot.py, once per interpreter) puts one finder on `sys.meta_path`
that answers those four names with this package's modules, loaded under the standard names, on
first import only: a program that never imports them pays one dictionary lookup per import.
Each module says what it does here and how that differs from Linux; docs/guest.md sums it up.
"""

from __future__ import annotations

import os
import sys
import weakref
from types import ModuleType
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    import importlib.machinery
    from collections.abc import Sequence

MODULES = frozenset({"pwd", "grp", "resource", "fcntl"})
_HERE = os.path.dirname(__file__)


class _Finder:
    """Finds `pwd`, `grp`, `resource` and `fcntl` here (a real one, were the interpreter ever
    built with it, is found first: this finder is last on `sys.meta_path`). A plain class with
    `find_spec`, as the import system asks: importlib.abc would cost every guest's start."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES:
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, os.path.join(_HERE, f"_{fullname}.py"))


def install() -> None:
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())


_PROGRAMS: weakref.WeakKeyDictionary[ModuleType, dict[str, Any]] | None = None


def program_state(name: str) -> dict[Any, Any]:
    """A dict `name` of the running program's own: the programs of a command line run one after
    another in one interpreter (guest/_declaw_boot.py: run_process), where on Linux each is its
    own process, so what one sets (`setrlimit`, `F_SETFD`) must not reach the next. Kept by the
    program's `__main__` module, weakly: it goes when the program ends."""
    global _PROGRAMS
    if _PROGRAMS is None:
        _PROGRAMS = weakref.WeakKeyDictionary()
    main = sys.modules.get("__main__") or sys.modules[__name__]
    return _PROGRAMS.setdefault(main, {}).setdefault(name, {})
