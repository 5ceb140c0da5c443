"""The host half of guest/_declaw_boot.py: `GuestSpec`s whose program is one of its entries.

On the warm image the boot module is already imported, so a guest's program is one `turn`
calling `_declaw_boot.<entry>(...)`; on the cold module it is `run` with the boot script and
an argv. A code context runs as turns on both paths (its first turn sets the kernel up, each
cell is one more turn).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from .guest import GuestSpec
from .layout import BOOT_SCRIPT, GUEST_PYTHON


def boot_spec(warm: bool, entry: str, args: list[Any], cold_args: list[str], env: dict[str, str],
              profile: Optional[dict[str, Any]] = None, **spec: Any) -> GuestSpec:
    """A guest running `_declaw_boot.<entry>(*args)`: one turn on the warm image (the module
    is already imported), `run` with the boot script and `cold_args` on the cold module.
    `profile` is the template's (what the guest's start-up applies); `spec` holds GuestSpec's
    other fields."""
    if warm:
        call = ", ".join([*(repr(arg) for arg in args), f"profile={profile!r}"])
        return GuestSpec(argv=[GUEST_PYTHON], env=env,
                         turns=[f"import _declaw_boot\n_declaw_boot.{entry}({call})\n"], **spec)
    profile_args = ["--profile", json.dumps(profile)] if profile else []
    return GuestSpec(argv=[GUEST_PYTHON, BOOT_SCRIPT, *profile_args, *cold_args], env=env, **spec)


def turns_spec(warm: bool, entry: str, args: list[Any], env: dict[str, str],
               profile: Optional[dict[str, Any]] = None, **spec: Any) -> GuestSpec:
    """A guest that runs as turns on both paths (a code context): its first turn calls
    `_declaw_boot.<entry>(*args, profile=...)`, on the cold module after loading the boot module
    from its file (there, nothing has imported it)."""
    call = ", ".join([*(repr(arg) for arg in args), f"profile={profile!r}"])
    load = "import _declaw_boot\n" if warm else (
        "import sys, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('_declaw_boot', {BOOT_SCRIPT!r})\n"
        "_declaw_boot = importlib.util.module_from_spec(spec)\n"
        "sys.modules['_declaw_boot'] = _declaw_boot\n"
        "spec.loader.exec_module(_declaw_boot)\n"
        "del spec\n")
    return GuestSpec(argv=[GUEST_PYTHON], env=env, turns=[f"{load}_declaw_boot.{entry}({call})\n"], **spec)


def shell_spec(warm: bool, cwd: str, script: str, env: dict[str, str], tty: bool,
               **spec: Any) -> GuestSpec:
    """The shell running `script` in `cwd` (or, with `tty`, an interactive shell)."""
    cold_args = ["--pty", cwd] if tty else ["--shell", cwd, script]
    return boot_spec(warm, "shell", [cwd, script, env, tty], cold_args, env, **spec)


def python_spec(warm: bool, cwd: str, args: list[str], env: dict[str, str], **spec: Any) -> GuestSpec:
    """`python3 ARGS` alone, without the shell (the warm image's self-check, byte-compiling)."""
    return boot_spec(warm, "start", [cwd, args, env], [cwd, *args], env, **spec)


def kernel_spec(warm: bool, cwd: str, env: dict[str, str], **spec: Any) -> GuestSpec:
    """A code context's guest: its first turn sets up the kernel in `cwd`."""
    return turns_spec(warm, "kernel", [cwd, env], env, **spec)


def cell_turn(code: str, envs: dict[str, str]) -> str:
    """The turn that runs one cell (the code travels as a literal: repr escapes NULs and
    surrogates, so any str survives)."""
    return f"__import__('declaw_kernel').cell({code!r}, {envs!r})\n"


def bash_cell_turn(code: str, envs: dict[str, str]) -> str:
    """The turn that runs one cell of a bash context (through the guest's shell)."""
    return f"__import__('declaw_kernel').bash_cell({code!r}, {envs!r})\n"


def park_spec(env: dict[str, str], profile: Optional[dict[str, Any]] = None, **spec: Any) -> GuestSpec:
    """A parked guest (warm image only): its first turn applies the template and warms the
    shell's pages (`_declaw_boot.park`); its command line comes later as `shell_turn`."""
    return GuestSpec(argv=[GUEST_PYTHON], env=env,
                     turns=[f"import _declaw_boot\n_declaw_boot.park(profile={profile!r})\n"], **spec)


def kernel_turn(cwd: str, env: dict[str, str]) -> str:
    """A parked guest becoming a code context: the kernel's set-up as its next turn."""
    return f"import _declaw_boot\n_declaw_boot.kernel({cwd!r}, {env!r}, profile=None)\n"


def shell_turn(cwd: str, script: str, env: dict[str, str], tty: bool) -> str:
    """A parked guest's command line: renews the guest (environment, cwd, seeds, tempfile
    names) and runs the line, as `shell_spec`'s turn does in a fresh guest."""
    return (f"import _declaw_boot\n"
            f"_declaw_boot.shell({cwd!r}, {script!r}, {env!r}, {tty!r}, profile=None)\n")
