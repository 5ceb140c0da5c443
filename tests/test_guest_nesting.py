"""Deeply nested data and deep recursion in the guest (declaw_wasm/_wasm/engine.py's
MAX_WASM_STACK).

CPython's own depth checks on WASI watch its shadow stack in linear memory; freeing nested
containers recurses in C without moving it, so only the native wasm stack bounds that depth. On
the old 2 MiB stack a 16 000-deep nested list freed, or `json.loads` of 8 000 brackets, trapped
the guest and ended the whole command line with 134 and no word on stderr. Each program below
runs natively (this machine's CPython) and in a guest, and the outputs are compared."""

from __future__ import annotations

import pytest

from declaw_wasm import Sandbox

from hostbash import host_bash  # tests/ is on sys.path

pytestmark = pytest.mark.guest

PROGRAMS = (
    # nested containers, made and freed
    "l = []\nfor i in range(100_000): l = [l]\ndel l\nprint('list')",
    "t = ()\nfor i in range(100_000): t = (t,)\ndel t\nprint('tuple')",
    "d = {}\nfor i in range(50_000): d = {'k': d}\ndel d\nprint('dict')",
    # parsers and walkers that check their depth say so, as natively
    "import json\ntry: json.loads('[' * 100_000 + ']' * 100_000)\nexcept RecursionError: print('json deep')",
    "l = []\nfor i in range(100_000): l = [l]\ntry: repr(l)\nexcept RecursionError: print('repr deep')",
    "import copy\nl = []\nfor i in range(100_000): l = [l]\n"
    "try: copy.deepcopy(l)\nexcept RecursionError: print('copy deep')",
    # the competitive programmer's idiom: a deep recursion, and one that fails and is caught
    "import sys\nsys.setrecursionlimit(10**6)\ndef depth(n): return 0 if n == 0 else depth(n - 1) + 1\n"
    "print(depth(100_000))",
    "import sys\nsys.setrecursionlimit(100_000)\ndef down(n): return down(n + 1)\n"
    "try: down(0)\nexcept RecursionError: print('caught')",
)
LINE = "; ".join(f"python3 -c \"{code}\"; echo $?" for code in PROGRAMS)


def test_deep_structures_and_recursion_as_natively(fresh: Sandbox) -> None:
    native = host_bash(["-c", LINE], capture_output=True, text=True, timeout=120)
    assert native.stdout.count("\n") == 2 * len(PROGRAMS), native
    guest = fresh.commands.run(LINE, timeout=120)
    assert (guest.stdout, guest.exit_code) == (native.stdout, 0), guest.stderr


def test_a_stack_overflow_ends_the_line_and_says_why(fresh: Sandbox) -> None:
    """Past the stack (here a 2 000 000-deep list, ~300 MB of native stack to free) the guest
    traps: the line ends with 134, the result says why, and the sandbox goes on."""
    r = fresh.commands.run("python3 -c \"l = []\nfor i in range(2_000_000): l = [l]\ndel l\"; echo never",
                           timeout=120)
    assert (r.stdout, r.exit_code) == ("", 134)
    assert r.error is not None and "C stack overflowed" in r.error, r.error
    assert fresh.commands.run("echo fine").stdout == "fine\n"
