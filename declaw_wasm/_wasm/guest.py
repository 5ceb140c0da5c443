"""One guest: a fresh CPython-WASI instance that runs one program to completion, like a process.

Each guest gets its own Store (so its own memory, WASI context and limits), instantiated from
the runtime's shared compiled module. It runs on a thread of its own with a large native stack
(wasm frames use the calling thread's stack). The host stops it in three ways:

* CPU-bound code: every epoch tick calls the store's deadline callback, which traps the guest
  once it is cancelled or past its wall-clock deadline. wasmtime-py has no wrapper for
  `wasmtime_store_epoch_deadline_callback`, so we register it through wasmtime-py's ctypes
  bindings; a plain epoch deadline cannot be moved from another thread, the callback can.
* Sleeping code: `time.sleep` blocks in WASI `poll_oneoff`, where no epoch check runs, so we
  shadow `poll_oneoff` with our own implementation that sleeps in short, interruptible waits.
* Exit: `os._exit(n)` arrives as `wasmtime.ExitTrap`.

The guest talks back through the door, the module's `host.call` import (the guest's
`_host.call(bytes) -> bytes`): each call is one msgpack request answered by the guest's door
handler, on the guest's thread. A handler may block (waiting for stdin, say); it waits in short
slices and calls `check_stopped()` so a kill or timeout still ends the guest.

No host function of ours ever raises into wasmtime: wasmtime-py keeps the last exception raised
by *any* host function in one process-wide variable and re-raises it in whichever thread next
leaves wasm, so a `Trap` raised to stop guest A would end guest B on another thread (found by
benchmarks/load.py). Host functions that see their guest must stop just return (the door with an
error, the sleep early); the epoch deadline callback, which answers through the C API, then traps
the guest within one tick.
"""

from __future__ import annotations

import codecs
import ctypes
import os
import queue
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Optional

import wasmtime
from wasmtime import _bindings as _ffi

from .engine import Interpreter
from .layout import Mount
from .paths import shadow_path_calls
from .shims import (CallerMemory, ClockTimeGet, DoorHandler, DoorTransport, FdReaddir, PollOneoff, exiting,
                    memory_address)
from .timers import Timers

if TYPE_CHECKING:
    from .._blas.host import HostBlas
    from .image import BaseImage, GuestImage
    from .prefault import HotPages

GUEST_THREAD_STACK = 64 << 20
CLOSE_AFTER_S = 0.005  # a guest's store is freed this long after its outcome is out (_main)
TRAP_EXIT_CODE = 134  # what bash reports for a process that aborted
UNLIMITED_FUEL = (1 << 63) - 1
FUEL_PER_MADD = 1  # a routed BLAS call costs one instruction per multiply-add (docs/compute.md)

StopReason = Literal["timeout", "killed", "quota", "fuel"]
OutputCallback = Callable[[str], None]
TurnDone = Callable[[int], None]


@dataclass
class GuestSpec:
    """What one guest runs. With `turns`, the sources run one after another through the
    module's `turn` export (the warm image's way in); otherwise `run` runs `argv`."""

    argv: list[str]
    env: dict[str, str]
    mounts: list[Mount]
    turns: list[str] = field(default_factory=list)
    stdin: Optional[Path] = None
    timeout: Optional[float] = None
    memory_limit: int = 1 << 30
    output_limit: int = 16 << 20
    fuel: Optional[int] = None  # instructions per command or cell (on a fuel runtime only)
    # asked after the spec's turns: whether the guest is pristine (a standby sandbox's parked one,
    # not handed out): then its written pages are recorded as the runtime's hot pages (prefault.py)
    learn_pages: Optional[Callable[[], bool]] = None
    # A guest at rest to start as (image.py): applied to the fresh instance before its turns; its
    # monotonic clock continues from the image's reading. With its base (the module's initial memory).
    image: Optional[tuple["GuestImage", "BaseImage"]] = None


@dataclass
class GuestOutcome:
    exit_code: int
    stdout: str
    stderr: str
    stopped: Optional[StopReason] = None
    error: Optional[str] = None
    truncated: list[str] = field(default_factory=list)
    fuel_used: Optional[int] = None  # instructions the last turn (or program) ran, on a fuel runtime


class OutputSink:
    """Collects one stream up to a byte limit; streams decoded text to a callback.

    wasmtime calls it from its own threads, so it locks, and it never raises (an exception
    here would surface as an I/O error in the guest). What it holds is one buffer of at most
    `limit` bytes, whatever the sizes of the writes (a million 1-byte writes cost no more than
    one write of a megabyte). `keep=False`: only counted and streamed to the callback, not
    kept (its owner keeps the text: a command's event log), so `text()` is empty.
    """

    def __init__(self, limit: int, callback: Optional[OutputCallback], keep: bool = True) -> None:
        self.limit = limit
        self.callback = callback
        self.keep = keep
        self.size = 0
        self.truncated = False
        self._data = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = threading.Lock()

    def __call__(self, data: bytes) -> int:
        with self._lock:
            room = self.limit - self.size
            kept = data if len(data) <= room else data[: max(room, 0)]
            if len(kept) < len(data):
                self.truncated = True
            if kept:
                if self.keep:
                    self._data += kept
                self.size += len(kept)
                if self.callback is not None:
                    text = self._decoder.decode(kept)
                    if text:
                        try:
                            self.callback(text)
                        except Exception:  # a user callback's bug must not break the guest
                            pass
        return len(data)

    def finish(self) -> None:
        """The stream has ended: a trailing incomplete UTF-8 sequence reaches the callback as
        U+FFFD (as E2B decodes), so streamed text and `text()` agree."""
        with self._lock:
            rest = self._decoder.decode(b"", final=True)
            if rest and self.callback is not None:
                try:
                    self.callback(rest)
                except Exception:
                    pass

    def text(self) -> str:
        with self._lock:
            return self._data.decode("utf-8", "replace")

    def rebind(self, callback: Optional[OutputCallback], keep: bool = True) -> None:
        """Start afresh with another callback (a parked guest's sinks, when its command comes)."""
        with self._lock:
            self.callback = callback
            self.keep = keep
            self.size, self.truncated, self._data = 0, False, bytearray()
            self._decoder = codecs.getincrementaldecoder("utf-8")("replace")


_DeadlineFn = _ffi._wasmtime_store_epoch_deadline_callback.argtypes[1]
_FinalizerFn = _ffi._wasmtime_store_epoch_deadline_callback.argtypes[3]
_no_finalizer = _FinalizerFn(lambda _data: None)
_thread_stack_lock = threading.Lock()


class Guest:
    """A running (or finished) guest instance. Create, `start()`, then `wait()`."""

    def __init__(self, interpreter: Interpreter, spec: GuestSpec,
                 stdout: Optional[OutputSink] = None, stderr: Optional[OutputSink] = None,
                 door: Optional[DoorHandler] = None, more_turns: bool = False,
                 on_done: Optional[Callable[["Guest"], None]] = None) -> None:
        """`door` answers the guest's `_host.call` requests (none: the guest is told no host
        is bound; it may be replaced while the guest runs). `more_turns`: after the spec's turns
        the guest stays alive and runs the turns given to `run_turn`, one at a time, until it is
        stopped (a code context, a parked guest). `on_done(guest)` runs on the guest's thread
        once the outcome is known."""
        self.interpreter = interpreter
        self.spec = spec
        self.door = door
        self.on_done = on_done
        self.fuel_used: Optional[int] = None
        self.stdout = stdout or OutputSink(spec.output_limit, None)
        self.stderr = stderr or OutputSink(spec.output_limit, None)
        self._cancel = threading.Event()
        self._stop_reason: Optional[StopReason] = None
        self._deadline = (time.monotonic() + spec.timeout) if spec.timeout else None
        self._outcome: Optional[GuestOutcome] = None
        self._done = threading.Event()
        self.ready = threading.Event()  # the spec's turns ran: waiting for `run_turn` (more_turns)
        self._thread: Optional[threading.Thread] = None
        self._declared_exit: Optional[int] = None
        # queued turns: (source or work between turns, starting, done, fuel, last)
        self._more: Optional["queue.Queue[Optional[tuple[Any, Callable[[], None], TurnDone, Optional[int], bool]]]"] = \
            queue.Queue() if more_turns else None
        self._store: Optional[wasmtime.Store] = None
        self._keepalive: object = None
        self._memory: Callable[[], int] = lambda: 0  # the linear memory's size, once instantiated
        self._native_id: Optional[int] = None
        self._cpu_at_end: Optional[float] = None
        self.host_blas: Optional[HostBlas] = None  # made at its first routed call (shims.py)
        # the guest's memory while a door call of it is answered (shims.DoorTransport), else None
        self.door_memory: Optional[CallerMemory] = None
        self.host_cpu_seconds = 0.0  # the host BLAS's other threads' share of its calls
        self.memory_at_end = 0  # the linear memory's size when the guest ended (the sandbox's events)
        self.clock_base_ns = 0  # the guest's monotonic clock reads time.monotonic_ns() minus this
        self.armed_timers: Optional[Timers] = None  # its signal.alarm/setitimer timers, once it sets one

    # -- measures, from any thread (metrics) --------------------------------------------------
    def memory_bytes(self) -> int:
        """The guest's linear memory now (0 before it starts and after it ends)."""
        try:
            return 0 if self.done else int(self._memory())
        except Exception:
            return 0

    def cpu_seconds(self) -> float:
        """CPU time of the guest's thread (user + system) so far, plus the host BLAS's other
        threads' share of its routed calls (`charge_host_work`)."""
        return self._thread_cpu_seconds() + self.host_cpu_seconds

    def _thread_cpu_seconds(self) -> float:
        if self._cpu_at_end is not None:
            return self._cpu_at_end
        if self._native_id is None:
            return 0.0
        try:  # fields 14 and 15 of the thread's stat: utime and stime, in clock ticks
            with open(f"/proc/self/task/{self._native_id}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return 0.0

    def host_work_budget(self, caller: wasmtime.Caller) -> Optional[int]:
        """The multiply-adds a routed BLAS call may still cost (`FUEL_PER_MADD` instructions
        each): None without an instruction limit."""
        if not self.interpreter.flags.consume_fuel:
            return None
        return (_fuel_left(caller) or 0) // FUEL_PER_MADD

    def charge_host_work(self, caller: wasmtime.Caller, madds: int, seconds: float, threads: int,
                         over_budget: bool = False) -> None:
        """Charge a routed BLAS call the host computed (on the guest's thread, inside it): its
        multiply-adds to the instruction budget, `FUEL_PER_MADD` each (a fuel runtime only; a
        call the budget cannot pay was not computed, `over_budget`, and empties it, so the guest
        stops at its next instruction as in its own routine), and the CPU time of the host
        BLAS's other threads, estimated as wall time × (threads - 1) (the calling thread's own
        is in its CPU time already)."""
        self.host_cpu_seconds += seconds * max(0, threads - 1)
        left = _fuel_left(caller) if self.interpreter.flags.consume_fuel else None
        if left is None:
            return
        spent = left if over_budget else min(left, madds * FUEL_PER_MADD)
        error = _ffi.wasmtime_context_set_fuel(caller._context(), left - spent)
        if error:
            _ffi.wasmtime_error_delete(error)

    # -- control, from any thread -------------------------------------------------------------
    def start(self, name: str = "declaw-guest") -> None:
        with _thread_stack_lock:
            previous = threading.stack_size(GUEST_THREAD_STACK)
            try:
                self._thread = threading.Thread(target=self._main, name=name, daemon=True)
                self._thread.start()
            finally:
                threading.stack_size(previous)

    def rename(self, name: str) -> None:
        """Name the guest's thread (a parked guest's becomes a command's)."""
        if self._thread is not None and not self.done:
            self._thread.name = name

    def kill(self, reason: StopReason = "killed") -> None:
        if self._stop_reason is None:
            self._stop_reason = reason
        self._cancel.set()
        if self._more is not None:
            self._more.put(None)  # wake a guest waiting for its next turn

    def wait(self, timeout: Optional[float] = None) -> Optional[GuestOutcome]:
        """The outcome, or None if the guest is still running after `timeout` seconds."""
        self._done.wait(timeout)
        return self._outcome

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def set_deadline(self, timeout: Optional[float]) -> None:
        """Stop the guest `timeout` seconds from now (None: no deadline); a long-lived guest
        (a code context) gets one per cell."""
        self._deadline = (time.monotonic() + timeout) if timeout else None

    @property
    def timers(self) -> Timers:
        """The guest's interval timers (timers.py), made at its first `timer` request."""
        if self.armed_timers is None:
            self.armed_timers = Timers()
        return self.armed_timers

    def stop_requested(self) -> bool:
        """For a door handler doing long host work: whether to give up now."""
        return self._should_stop()

    def run_turn(self, source: str, starting: Callable[[], None], done: TurnDone,
                 fuel: Optional[int] = None, last: bool = False) -> None:
        """Queue `source` as the guest's next turn: `starting()` runs on the guest's thread just
        before it, `done(code)` right after it returns (not if the guest ends in it: then the
        guest is `done`). `fuel`: the turn's instruction budget (a fuel runtime only; None:
        unlimited). `last`: the guest ends when the turn returns, its code the exit status (a
        program's turn, which normally exits itself, may return on an exception escaping it).
        For a guest made with `more_turns`."""
        assert self._more is not None, "this guest runs its spec's turns only"
        self._more.put((source, starting, done, fuel, last))

    def between_turns(self, work: Callable[[wasmtime.Store, wasmtime.Instance], Any]) -> Any:
        """Run `work(store, instance)` on the guest's thread once no turn is running (after the
        queued ones) and return what it returns: the guest is at rest, no wasm frame is live
        (snapshots, image.py). For a guest made with `more_turns`; raises GuestStopping if the
        guest ends first."""
        assert self._more is not None, "this guest runs its spec's turns only"
        future: "Future[Any]" = Future()

        def task(store: wasmtime.Store, instance: wasmtime.Instance) -> None:
            try:
                future.set_result(work(store, instance))
            except BaseException as exc:
                future.set_exception(exc)

        self._more.put((task, lambda: None, lambda _code: None, None, False))
        while not self.done:
            try:
                return future.result(0.05)
            except TimeoutError:
                continue
        if future.done():
            return future.result()
        raise GuestStopping()

    def wait_stopping(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for a kill; whether the guest is to stop now."""
        self._cancel.wait(timeout)
        return self._should_stop()

    def declare_exit(self, code: int) -> None:
        """The exit status the guest declared before `os._exit` (WASI's own carries 0..125)."""
        self._declared_exit = code & 0xFF

    def check_stopped(self) -> None:
        """For a door handler waiting on the host: give up (the door answers with an error and
        the deadline callback stops the guest) once the guest is to stop."""
        if self._should_stop():
            raise GuestStopping()

    # -- the guest thread ----------------------------------------------------------------------
    def _door_call(self, guest: "Guest", request: object) -> object:
        door = self.door  # read at each call: a parked guest's is set when its command comes
        if door is None:
            raise GuestStopping()
        return door(guest, request)

    def _should_stop(self) -> bool:
        if self._cancel.is_set():
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.kill("timeout")
            return True
        return False

    def _main(self) -> None:
        self._native_id = threading.get_native_id()
        try:
            code, error = self._run()
        except BaseException as exc:  # the host must survive anything the guest does
            code, error = TRAP_EXIT_CODE, f"host error: {exc!r}"
        self._cpu_at_end = time.thread_time()
        try:
            self.memory_at_end = int(self._memory())  # its peak: a linear memory never shrinks
        except Exception:  # noqa: BLE001 -- an instance that failed to start has none
            pass
        # No guest code runs on this thread any more; what is left is bookkeeping and freeing
        # the instance, which outlives the outcome: say so in thread listings.
        threading.current_thread().name = "declaw-guest-ended"
        try:
            self._finish(code, error)
        finally:
            # Closed after the outcome is out: freeing the instance's memory takes a while and
            # nobody waits on it. (The output is complete: fd_write returns once it is written.)
            self._memory = lambda: 0
            store, self._store = self._store, None
            if store is not None:
                # First let the caller woken by the outcome take the GIL: freeing the store calls
                # back into Python many times (finalizers of the host functions and streams), and
                # a thread that takes and drops the GIL that often keeps a waiting one out for up
                # to the switch interval (2-3 ms of every command's latency here).
                exiting.wait(CLOSE_AFTER_S)  # not when the process exits: its exit waits for this
                store.close()
            self._keepalive = None

    def _finish(self, code: int, error: Optional[str]) -> None:
        self.stdout.finish()
        self.stderr.finish()
        if self._stop_reason is not None:
            code, error = -1, None
        truncated = [name for name, sink in (("stdout", self.stdout), ("stderr", self.stderr))
                     if sink.truncated]
        self._outcome = GuestOutcome(code, self.stdout.text(), self.stderr.text(),
                                     self._stop_reason, error, truncated, self.fuel_used)
        self._done.set()
        if self.on_done is not None:
            try:
                self.on_done(self)
            except Exception:  # the host's bookkeeping must not take the thread down noisily
                pass

    def _run(self) -> tuple[int, Optional[str]]:
        engine = self.interpreter.engine
        image = self.spec.image
        # the WASI context's monotonic clock starts about here (a restored guest's goes on from its image's)
        clock_base = self.clock_base_ns = time.monotonic_ns() - (image[0].clock_ns if image else 0)
        wasi = wasmtime.WasiConfig()
        wasi.argv = self.spec.argv
        wasi.env = list(self.spec.env.items())
        for mount in self.spec.mounts:
            wasi.preopen_dir(str(mount.host), mount.guest, mount.writable)
        if self.spec.stdin is not None:
            wasi.stdin_file(str(self.spec.stdin))
        wasi.stdout_custom = self.stdout
        wasi.stderr_custom = self.stderr

        store = self._store = wasmtime.Store(engine)
        store.set_limits(memory_size=self.spec.memory_limit)
        if self.interpreter.flags.consume_fuel:
            store.set_fuel(self.spec.fuel if self.spec.fuel is not None else UNLIMITED_FUEL)
        self._keepalive = self._install_deadline_callback(store)  # until the store is closed
        store.set_wasi(wasi)
        linker = wasmtime.Linker(engine)
        linker.define_wasi()
        linker.allow_shadowing = True
        i32 = wasmtime.ValType.i32()
        linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]),
                           DoorTransport(self, self._door_call if self.door else None),
                           access_caller=True)
        linker.define_func("wasi_snapshot_preview1", "poll_oneoff",
                           wasmtime.FuncType([i32] * 4, [i32]),
                           PollOneoff(self, clock_base), access_caller=True)
        readdir = linker.get(store, "wasi_snapshot_preview1", "fd_readdir")
        assert isinstance(readdir, wasmtime.Func)
        linker.define_func("wasi_snapshot_preview1", "fd_readdir",
                           wasmtime.FuncType([i32, i32, i32, wasmtime.ValType.i64(), i32], [i32]),
                           FdReaddir(engine, readdir), access_caller=True)
        if image is not None:
            linker.define_func("wasi_snapshot_preview1", "clock_time_get",
                               wasmtime.FuncType([i32, wasmtime.ValType.i64(), i32], [i32]),
                               ClockTimeGet(clock_base), access_caller=True)
        shadow_path_calls(engine, linker, store)
        if self._should_stop():
            return -1, None
        instance = linker.instantiate(store, self.interpreter.module)
        if image is not None:
            image[0].apply(store, instance, image[1])
        memory = instance.exports(store)["memory"]
        if isinstance(memory, wasmtime.Memory):
            self._memory = lambda: memory.data_len(store)
            if image is None and self.interpreter.warm:
                self._prefault(store, memory)
        try:
            return self._drive(store, instance), None
        except wasmtime.ExitTrap as exit_trap:
            if self._declared_exit is not None:
                return self._declared_exit, None
            return int(exit_trap.code), None
        except (wasmtime.Trap, wasmtime.WasmtimeError) as trap:
            if self._stop_reason is not None:
                return -1, None
            if isinstance(trap, wasmtime.Trap) and trap.trap_code == wasmtime.TrapCode.OUT_OF_FUEL:
                self.kill("fuel")
                return -1, None
            return TRAP_EXIT_CODE, f"guest trapped: {_trap_message(trap)}"

    def _drive(self, store: wasmtime.Store, instance: wasmtime.Instance) -> int:
        """Run the program in the fresh instance; return its exit code."""
        with self._counting_fuel(store, self.spec.fuel):
            if not self.spec.turns and self.spec.image is None:
                return int(_export(store, instance, "run")(store))
            for source in self.spec.turns:
                code = self._turn(store, instance, source)
                if code != 0:
                    return code
        if self.spec.learn_pages is not None and self.spec.learn_pages():
            self._learn_pages(store, instance)
        self.ready.set()
        while self._more is not None:
            try:
                item = self._more.get(timeout=1.0)  # kill() wakes it at once
            except queue.Empty:
                item = None
            if item is None:
                if self._should_stop():
                    return 0
                continue
            source, starting, done, fuel, last = item
            if callable(source):  # work between turns (between_turns)
                source(store, instance)
                continue
            with self._counting_fuel(store, fuel, reset=True):
                starting()
                code = self._turn(store, instance, source)
            if self._cancel.is_set():
                # stopped during the turn (killed, timed out, its context restarted), which still
                # returned: a sleep woken to stop returns before the deadline callback's next tick
                # stops the guest. It ends here, as stopped, not as a turn done
                return code
            done(code)
            if last:
                return code
        return 0

    def _hot_pages(self) -> "HotPages":
        hot = self.interpreter.hot_pages
        if hot is None:
            from .prefault import HotPages

            hot = self.interpreter.hot_pages = HotPages()
        return hot

    def _prefault(self, store: wasmtime.Store, memory: wasmtime.Memory) -> None:
        """Take the runtime's hot pages' copy-on-write faults in one batch (prefault.py)."""
        hot = self.interpreter.hot_pages
        if hot is not None and hot.runs is not None:
            hot.populate(memory_address(memory, store), memory.data_len(store))

    def _learn_pages(self, store: wasmtime.Store, instance: wasmtime.Instance) -> None:
        """A pristine guest after its park turn: its written pages are the runtime's hot pages."""
        memory = instance.exports(store)["memory"]
        if isinstance(memory, wasmtime.Memory) and self.interpreter.warm:
            self._hot_pages().learn(memory_address(memory, store), memory.data_len(store))

    @contextmanager
    def _counting_fuel(self, store: wasmtime.Store, budget: Optional[int], reset: bool = False) -> Iterator[None]:
        """On a fuel runtime: run the body on `budget` instructions (None: unlimited; `reset`:
        refill the store first) and record how many it used, however it ends."""
        if not self.interpreter.flags.consume_fuel:
            yield
            return
        budget = UNLIMITED_FUEL if budget is None else budget
        if reset:
            store.set_fuel(budget)
        try:
            yield
        finally:
            self.fuel_used = budget - store.get_fuel()

    def _turn(self, store: wasmtime.Store, instance: wasmtime.Instance, source: str) -> int:
        """One turn; the timers it armed end with it (timers.py)."""
        try:
            return self.turn(store, instance, source)
        finally:
            if self.armed_timers is not None:
                self.armed_timers.clear()

    @staticmethod
    def turn(store: wasmtime.Store, instance: wasmtime.Instance, source: str) -> int:
        """Run `source` in the guest's `__main__` (0 ok, 1 exception, n for sys.exit(n))."""
        raw = source.encode()
        ptr = int(_export(store, instance, "host_alloc")(store, len(raw)))
        memory = instance.exports(store)["memory"]
        assert isinstance(memory, wasmtime.Memory)
        if not ptr or ptr + len(raw) > memory.data_len(store):
            raise wasmtime.WasmtimeError("host_alloc returned an unusable address")
        memory.write(store, raw, ptr)
        return int(_export(store, instance, "turn")(store, ptr, len(raw)))

    def _install_deadline_callback(self, store: wasmtime.Store) -> object:
        def on_deadline(_ctx: object, _data: object, delta: ctypes._Pointer, kind: ctypes._Pointer) -> int:
            try:
                if self._should_stop():
                    err = _ffi.wasmtime_error_new(b"declaw-wasm: guest stopped")
                    return ctypes.cast(err, ctypes.c_void_p).value or 0
                timers = self.armed_timers
                if timers is not None and timers.due():
                    timers.fire_due(_ctx)  # the signal's handler runs once the guest goes on
            except BaseException:
                pass
            delta[0] = 1
            kind[0] = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
            return 0

        callback = _DeadlineFn(on_deadline)
        _ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), callback, None, _no_finalizer)
        store.set_epoch_deadline(1)
        return callback


def _export(store: wasmtime.Store, instance: wasmtime.Instance, name: str) -> wasmtime.Func:
    func = instance.exports(store)[name]
    assert isinstance(func, wasmtime.Func), name
    return func




def _trap_message(trap: Exception) -> str:
    """What made the guest trap, in one line: wasmtime's text is a long wasm backtrace first."""
    if isinstance(trap, wasmtime.Trap) and trap.trap_code == wasmtime.TrapCode.STACK_OVERFLOW:
        from .engine import MAX_WASM_STACK

        return (f"its C stack overflowed ({MAX_WASM_STACK >> 20} MiB): a structure nested too deep "
                "to free, parse or compare, or a C extension recursing")
    lines = [line.strip() for line in str(trap).strip().splitlines() if line.strip()]
    caused = [line for line in lines if line.startswith("wasm trap:")]
    return (caused or lines or [repr(trap)])[-1]


def _fuel_left(caller: wasmtime.Caller) -> Optional[int]:
    """The fuel left in the calling guest's store (None if it cannot be read), through the C
    API: a host function has its caller, not its Store object."""
    left = ctypes.c_uint64(0)
    error = _ffi.wasmtime_context_get_fuel(caller._context(), ctypes.byref(left))
    if error:
        _ffi.wasmtime_error_delete(error)
        return None
    return left.value


class GuestStopping(Exception):
    """Raised inside a door handler whose guest is being stopped; the door turns it into an
    error answer (never into an exception out of the host function)."""
