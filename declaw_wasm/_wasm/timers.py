"""A guest's interval timers (`signal.alarm`, `signal.setitimer`, `timeout`'s deadline) and the
signals they deliver.

WASI has no signals and WASI's CPython has no `alarm`, `setitimer` or `getitimer`. The host keeps
each guest's timers; the door op `timer` (answered by the transport for every guest, as `exit`
is: shims.py) sets and reads them. When a timer comes due, the host trips its signal in the
guest's interpreter by calling the module's `declaw_interrupt` export — CPython's own
`PyErr_SetInterruptEx(signum)`, the async-signal-safe "signal N arrived" that C signal handlers
call (it sets two flags and the eval breaker, nothing else) — on the guest's own thread, at a
point where the guest is between two wasm instructions of its own:

* computing: from the epoch deadline callback (guest.py), within one epoch tick of the due time;
* sleeping in WASI `poll_oneoff` (shims.py's `PollOneoff`): the sleep ends at the due time.

CPython then runs the signal's Python handler between two bytecodes, as it does on Linux. A
signal whose handler is SIG_DFL or SIG_IGN is not tripped (`PyErr_SetInterruptEx`'s rule): the
guest keeps handlers of its own that act out the default action (guest/declaw_posix/signals.py).

The timers (`which`): 0 ITIMER_REAL (wall clock, SIGALRM), 1 ITIMER_VIRTUAL (SIGVTALRM) and
2 ITIMER_PROF (SIGPROF), which count the guest thread's CPU time, and 3 the shell's `timeout`
deadline (SIGTERM, as GNU timeout sends). Bounded: at most these four per guest, values and
intervals finite and at most MAX_SECONDS, a timer fires at most once per look (a due periodic
timer is re-armed from now, as Linux coalesces a pending signal), and every timer ends with the
guest's turn (a command line, a cell): nothing of one turn's survives into the next.
"""

from __future__ import annotations

import ctypes
import math
import time
from typing import Any, Optional

import wasmtime
from wasmtime import _bindings as _ffi

from . import binary as wb
from .door import Int, Num, Op

INTERRUPT_EXPORT = "declaw_interrupt"  # the modules' export of CPython's PyErr_SetInterruptEx
INTERRUPT_FUNCTION = "PyErr_SetInterruptEx"
REAL, VIRTUAL, PROF, DEADLINE = range(4)
SIGNALS = {REAL: 14, VIRTUAL: 26, PROF: 27, DEADLINE: 15}  # SIGALRM, SIGVTALRM, SIGPROF, SIGTERM
MAX_SECONDS = 1e10  # above what CPython takes (9.2e9 s: nanoseconds in 64 bits); longer than any sandbox lives

TIMER = Op("timer", {
    "which": Int(0, 3, required=True, doc="0 ITIMER_REAL, 1 ITIMER_VIRTUAL, 2 ITIMER_PROF, 3 the "
                 "shell's `timeout` deadline"),
    "value": Num(0, MAX_SECONDS, doc="seconds until it fires; 0 disarms it; absent: only read it"),
    "interval": Num(0, MAX_SECONDS, doc="seconds between later firings; 0: fires once"),
}, "[value, interval] (the timer before this request)",
    "set or read one of the guest's interval timers (timers.py); answered by the transport itself, for "
    "every guest")


def export_interrupt(module: wb.Module) -> None:
    """Add the `declaw_interrupt` export (CPython's PyErr_SetInterruptEx, found by its name in
    the module's name section) to a runtime module being built: the warm module and the plain
    one both carry it."""
    index = module.function_names().get(INTERRUPT_FUNCTION)
    if index is None:
        raise RuntimeError(f"the runtime module has no {INTERRUPT_FUNCTION}")
    module.set_exports(module.exports() + [(INTERRUPT_EXPORT, wb.EXPORT_FUNC, index)])


class Timers:
    """One guest's timers. Used on the guest's thread only (door handlers, `poll_oneoff`, the
    epoch deadline callback all run there), so no lock."""

    __slots__ = ("_armed", "next_wall", "cpu_armed", "interrupt")

    def __init__(self) -> None:
        self._armed: dict[int, list[float]] = {}  # which -> [due, interval] (due: this timer's clock)
        self.next_wall = math.inf  # the earliest due time of the wall-clock timers (time.monotonic)
        self.cpu_armed = False
        self.interrupt: Optional[wasmtime.Func] = None  # the instance's export, looked up at the first request

    @staticmethod
    def clock(which: int) -> float:
        return time.thread_time() if which in (VIRTUAL, PROF) else time.monotonic()

    def answer(self, fields: dict[str, Any]) -> list[float]:
        """The `timer` request (checked against TIMER): the timer's [value, interval] before it."""
        which = fields["which"]
        entry = self._armed.get(which)
        old = [max(0.0, entry[0] - self.clock(which)), entry[1]] if entry else [0.0, 0.0]
        value = fields.get("value")
        if value is not None:
            if value > 0:
                self._armed[which] = [self.clock(which) + value, float(fields.get("interval") or 0.0)]
            else:
                self._armed.pop(which, None)
            self._recompute()
        return old

    def clear(self) -> None:
        if self._armed:
            self._armed.clear()
            self._recompute()

    def _recompute(self) -> None:
        wall = [entry[0] for which, entry in self._armed.items() if which in (REAL, DEADLINE)]
        self.next_wall = min(wall, default=math.inf)
        self.cpu_armed = any(which in (VIRTUAL, PROF) for which in self._armed)

    def due(self) -> bool:
        """Whether a timer is due now (cheap: the epoch callback asks at every tick)."""
        if self.next_wall <= time.monotonic():
            return True
        if self.cpu_armed:
            now = time.thread_time()
            return any(entry[0] <= now for which, entry in self._armed.items() if which in (VIRTUAL, PROF))
        return False

    def fire_due(self, context: Any) -> None:
        """Trip the signal of every due timer in the guest whose store `context` is (a
        `wasmtime_context_t*`), re-arming the periodic ones from now."""
        fired = False
        for which, entry in list(self._armed.items()):
            now = self.clock(which)
            if entry[0] > now:
                continue
            if entry[1] > 0:
                entry[0] = now + entry[1]
            else:
                del self._armed[which]
            fired = True
            if self.interrupt is not None:
                trip(context, self.interrupt, SIGNALS[which])
        if fired:
            self._recompute()


def trip(context: Any, func: wasmtime.Func, signum: int) -> None:
    """`PyErr_SetInterruptEx(signum)` in the guest, from the guest's own thread. The store's
    epoch deadline is moved a tick ahead first: the callback that calls this runs because the
    deadline was reached, and the call would otherwise trap at its entry."""
    _ffi.wasmtime_context_set_epoch_deadline(context, 1)
    call_i32(context, func, signum)


def call_i32(context: Any, func: wasmtime.Func, arg: int) -> int:
    """`func(arg)` for an (i32) -> i32 export of the store whose `wasmtime_context_t*` is
    `context` (a host function's `caller._context()`), straight through the C API:
    wasmtime-py's `Func.__call__` asks for the function's type on every call (~0.2 ms, per door
    request). 0 if the call trapped or failed (a guest being stopped, say)."""
    params = (_ffi.wasmtime_val_t * 1)()
    params[0].kind = 0  # type: ignore[assignment]  # WASMTIME_I32
    params[0].of.i32 = arg
    results = (_ffi.wasmtime_val_t * 1)()
    trap = ctypes.POINTER(_ffi.wasm_trap_t)()
    error = _ffi.wasmtime_func_call(context, ctypes.byref(func._func), params, 1, results, 1, ctypes.byref(trap))
    if error:
        _ffi.wasmtime_error_delete(error)
        return 0
    if trap:
        _ffi.wasm_trap_delete(trap)
        return 0
    return int(results[0].of.i32) & 0xFFFFFFFF
