"""The host functions a guest imports besides WASI's own, and the WASI calls we shadow.

- `DoorTransport`: the `host.call` import, the guest's door to the host (msgpack frames, decoded
  within door.py's bounds; `answer_frame` answers one), and the routed BLAS calls' fast path
  ahead of msgpack (a length with bit 31 set: `_wasm/routing.py`, `_blas/host.py`).
- `PollOneoff`: WASI `poll_oneoff`, so a sleeping guest can be stopped.
- `FdReaddir`: WASI `fd_readdir`, so listing a big folder is not quadratic.

None of them ever raises into wasmtime (see guest.py's module docstring): each answers an
error code instead, and the deadline callback stops the guest on its next epoch tick.
"""

from __future__ import annotations

import atexit
import ctypes
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import msgpack
import wasmtime
from wasmtime import _bindings as _ffi

from .. import settings
from .door import MAX_FRAME, Int, Op, RequestError, decode
from .routing import ROUTE_FLAG
from .timers import INTERRUPT_EXPORT, TIMER, call_i32

if TYPE_CHECKING:
    from .guest import Guest

DoorHandler = Callable[["Guest", Any], Any]
MAX_ANSWER = MAX_FRAME  # bytes of one answer


class Encoded(bytes):
    """A door answer a handler has already encoded as msgpack: sent as is (a host tool's reply
    is encoded where its value is made, and checked against the size limit there)."""


EXIT = Op("exit", {"code": Int(required=True, doc="the status; the host keeps its low 8 bits")}, "nil",
          "the exit status before os._exit (WASI's proc_exit carries 0..125 only); answered by "
          "the transport itself (DoorTransport), for every guest")


def answer_frame(guest: Guest, handler: Optional[DoorHandler], frame: bytes) -> tuple[int, bytes]:
    """One door request, start to end: (0, the answer's msgpack), or (-1, b"") when the guest
    has no door, or (-2, b"") when the frame breaks the door's bounds (door.py), is not a
    request, the handler failed, or its answer cannot be encoded or is over MAX_ANSWER. Exactly
    one answer, whatever happens: nothing raises. (`exit` and `timer` are answered here, for
    every guest, door or none; a request the declarations refuse is answered by the dispatcher
    with an error reply.)"""
    try:
        request = decode(frame)
    except BaseException:
        return -2, b""
    return answer_request(guest, handler, request)


def answer_request(guest: Guest, handler: Optional[DoorHandler], request: Any) -> tuple[int, bytes]:
    """`answer_frame` for a frame decoded already (the transport lets go of the frame's bytes
    before the handler runs: a 16 MiB frame is not held twice)."""
    try:
        op = request.get("op") if type(request) is dict else None
        if op == "exit" or op == "timer":
            try:
                if op == "exit":
                    guest.declare_exit(EXIT.check(request)["code"])
                    reply: Any = None
                else:
                    reply = guest.timers.answer(TIMER.check(request))
            except RequestError as exc:
                reply = exc.reply()
        elif handler is None:
            return -1, b""
        else:
            reply = handler(guest, request)
        answer = reply if isinstance(reply, Encoded) else msgpack.packb(reply, use_bin_type=True)
    except BaseException:  # the handler's failure, GuestStopping, an unencodable reply
        return -2, b""
    if len(answer) > MAX_ANSWER:
        return -2, b""
    return 0, answer


class DoorTransport:
    """The `host.call(ptr, len, out_ptr_ptr, out_len_ptr) -> i32` import: reads one msgpack
    request from guest memory, has `answer_request` answer it, writes the answer into memory the
    guest allocates (`host_alloc`). 0: answered; -1: no door; -2: the request or the handler
    failed (the guest's `_host.call` raises OSError). Every address the guest gives is
    bounds-checked; the frame is decoded within door.py's bounds.

    One request is the guest's own: `{"op": "exit", "code": n}` declares the exit status before
    `os._exit`, because WASI's `proc_exit` only carries 0..125 (wasmtime traps on more, and bash
    needs 126, 127, 130...)."""

    MAX_REQUEST = MAX_FRAME

    def __init__(self, guest: Guest, handler: Optional[DoorHandler]) -> None:
        self.guest = guest
        self.handler = handler
        self._exports: Optional[tuple[wasmtime.Memory, wasmtime.Func]] = None  # this store's

    def __call__(self, caller: wasmtime.Caller, ptr: int, length: int, out_ptr_ptr: int,
                 out_len_ptr: int) -> int:
        try:
            return self._answer(caller, ptr, length, out_ptr_ptr, out_len_ptr)
        except BaseException:  # never into wasmtime (see the module docstring)
            return -2

    def _answer(self, caller: wasmtime.Caller, ptr: int, length: int, out_ptr_ptr: int,
                out_len_ptr: int) -> int:
        if self._exports is None:  # looked up once: each lookup is a slow FFI call
            memory, alloc = caller["memory"], caller["host_alloc"]
            assert isinstance(memory, wasmtime.Memory) and isinstance(alloc, wasmtime.Func)
            self._exports = memory, alloc
        memory, alloc = self._exports
        if length & ROUTE_FLAG:  # a routed BLAS call (wasmtime passes i32s signed: also < 0)
            return self._route(caller, memory, ptr, length & (ROUTE_FLAG - 1))
        size = memory.data_len(caller)
        if not (0 <= length <= self.MAX_REQUEST and 0 <= ptr and ptr + length <= size
                and _fits(out_ptr_ptr, 4, size) and _fits(out_len_ptr, 4, size)):
            return -2
        base = memory_address(memory, caller)
        try:
            request = decode(ctypes.string_at(base + ptr, length))
        except Exception:
            return -2
        if type(request) is dict and request.get("op") == "timer" and self.guest.timers.interrupt is None:
            interrupt = caller.get(INTERRUPT_EXPORT)  # a module built before the export: timers that trip nothing
            self.guest.timers.interrupt = interrupt if isinstance(interrupt, wasmtime.Func) else None
        self.guest.door_memory = CallerMemory(caller, memory)  # for ops that move bulk data by address
        try:
            status, answer = answer_request(self.guest, self.handler, request)
        finally:
            self.guest.door_memory = None
        del request
        if status:
            return status
        out = call_i32(caller._context(), alloc, len(answer))
        if not out or not _fits(out, len(answer), memory.data_len(caller)):
            return -2
        base = memory_address(memory, caller)  # alloc may have grown memory
        ctypes.memmove(base + out, answer, len(answer))
        ctypes.memmove(base + out_ptr_ptr, struct.pack("<I", out), 4)
        ctypes.memmove(base + out_len_ptr, struct.pack("<I", len(answer)), 4)
        return 0


    def _route(self, caller: wasmtime.Caller, memory: wasmtime.Memory, frame: int, route: int) -> int:
        """A routed BLAS call: 1 when the host computed it, 0 when the guest's own routine is to
        run (routing off, no host BLAS, a small or malformed call: `_blas/host.py` validates)."""
        if not settings.host_blas():
            return 0
        from .._blas.host import HostBlas

        router = self.guest.host_blas
        if router is None:
            router = self.guest.host_blas = HostBlas(settings.blas_threads())
        base = memory_address(memory, caller)
        outcome = router.call(base, memory.data_len(caller), frame, route, self.guest.stop_requested,
                              self.guest.host_work_budget(caller))
        if not outcome.done:
            return 0
        self.guest.charge_host_work(caller, outcome.madds, outcome.seconds, outcome.threads, outcome.over_budget)
        return 1


def _fits(ptr: int, length: int, size: int) -> bool:
    return 0 <= ptr and ptr + length <= size


class CallerMemory:
    """The asking guest's linear memory while one of its door calls is answered (the guest's
    one thread waits in `host.call`: nothing of the guest runs, and the memory neither moves nor
    grows until the handler returns). For ops that move bulk data by address (the guest's JPEG
    codec, _media/door.py) instead of inside the door's 16 MiB frames. Every address is the
    guest's and hostile: each read or write is checked, with Python integers, to lie inside the
    memory; a guest can only ever read or overwrite its own memory."""

    __slots__ = ("_caller", "_memory")

    def __init__(self, caller: wasmtime.Caller, memory: wasmtime.Memory) -> None:
        self._caller = caller
        self._memory = memory

    def size(self) -> int:
        return int(self._memory.data_len(self._caller))

    def check(self, ptr: int, length: int) -> Optional[str]:
        """Why `length` bytes at `ptr` are not the guest's memory, or None."""
        size = self.size()
        if type(ptr) is not int or type(length) is not int or not _fits(ptr, length, size) or length < 0:
            return f"{length} bytes at {ptr} do not lie inside the guest's memory ({size} bytes)"
        return None

    def read(self, ptr: int, length: int) -> bytes:
        """A copy of `length` bytes at `ptr` (ValueError: outside the memory)."""
        problem = self.check(ptr, length)
        if problem is not None:
            raise ValueError(problem)
        return ctypes.string_at(memory_address(self._memory, self._caller) + ptr, length)

    def fuel_left(self) -> Optional[int]:
        """The guest's instructions left (Limits.cpu_instructions), None without a limit: work the
        host does for the guest on this budget (the codec's instructions) is charged to it."""
        left = ctypes.c_uint64(0)
        error = _ffi.wasmtime_context_get_fuel(self._caller._context(), ctypes.byref(left))
        if error:  # a store without fuel: no instruction limit
            _ffi.wasmtime_error_delete(error)
            return None
        return left.value

    def spend_fuel(self, spent: int) -> None:
        """Take `spent` instructions from the guest's budget (all that is left, at most: the
        guest then stops at its next instruction, as past its limit)."""
        left = self.fuel_left()
        if left is None or spent <= 0:
            return
        error = _ffi.wasmtime_context_set_fuel(self._caller._context(), left - min(left, spent))
        if error:
            _ffi.wasmtime_error_delete(error)

    def write(self, ptr: int, data: bytes) -> None:
        """`data` written at `ptr` (ValueError: outside the memory, nothing written)."""
        problem = self.check(ptr, len(data))
        if problem is not None:
            raise ValueError(problem)
        ctypes.memmove(memory_address(self._memory, self._caller) + ptr, data, len(data))


class PollOneoff:
    """WASI `poll_oneoff`, reimplemented so that a sleeping guest can be stopped.

    Clock subscriptions sleep in waits of at most 50 ms on the guest's cancel event, and end
    early once the guest is to stop, or when one of its wall-clock timers comes due (its signal
    tripped: timers.py); fd subscriptions (stdin, files) are reported ready at once,
    as regular files always are.
    """

    SUB = 48
    EVENT = 32
    EINVAL, EFAULT = 28, 21

    def __init__(self, guest: Guest, clock_base_ns: int) -> None:
        self.guest = guest
        self.clock_base_ns = clock_base_ns

    def __call__(self, caller: wasmtime.Caller, in_ptr: int, out_ptr: int, nsubs: int,
                 nevents_ptr: int) -> int:
        try:
            return self._poll(caller, in_ptr, out_ptr, nsubs, nevents_ptr)
        except BaseException:  # never into wasmtime (see the module docstring)
            return self.EFAULT

    def _poll(self, caller: wasmtime.Caller, in_ptr: int, out_ptr: int, nsubs: int,
              nevents_ptr: int) -> int:
        memory = caller["memory"]
        assert isinstance(memory, wasmtime.Memory)
        if nsubs <= 0 or nsubs > 4096:
            return self.EINVAL
        size = memory.data_len(caller)
        if not (0 <= in_ptr and in_ptr + nsubs * self.SUB <= size
                and 0 <= out_ptr and out_ptr + nsubs * self.EVENT <= size
                and 0 <= nevents_ptr and nevents_ptr + 4 <= size):
            return self.EFAULT
        raw = memory.read(caller, in_ptr, in_ptr + nsubs * self.SUB)
        clocks: list[tuple[int, int]] = []  # (userdata, absolute host-monotonic deadline ns)
        ready: list[tuple[int, int]] = []  # (userdata, tag) of fd subscriptions
        for i in range(nsubs):
            base = i * self.SUB
            userdata, tag = struct.unpack_from("<QB", raw, base)
            if tag == 0:
                clock_id, timeout = struct.unpack_from("<I4xQ", raw, base + 16)
                flags = struct.unpack_from("<H", raw, base + 40)[0]
                clocks.append((userdata, self._deadline_ns(clock_id, timeout, bool(flags & 1))))
            else:
                ready.append((userdata, tag))
        events = [(ud, tag) for ud, tag in ready]
        if not events and clocks:
            first = min(deadline for _, deadline in clocks)
            timers = self.guest.armed_timers
            while True:
                now = time.monotonic_ns()
                if timers is not None and timers.next_wall * 1e9 <= now:
                    timers.fire_due(caller._context())  # its signal's handler runs once the sleep returns
                    break
                remaining = first - now
                if remaining <= 0:
                    break
                if timers is not None and timers.next_wall < first / 1e9:
                    remaining = max(0, int(timers.next_wall * 1e9) - now)
                if self.guest.wait_stopping(min(remaining / 1e9, 0.05)):
                    break  # wake early: the deadline callback stops the guest on its next tick
            now = time.monotonic_ns()
            events = [(ud, 0) for ud, deadline in clocks if deadline <= now] or \
                [(ud, 0) for ud, _ in clocks]
        out = b"".join(struct.pack("<QHBxxxxxQHxxxxxx", ud, 0, tag, 0, 0) for ud, tag in events)
        memory.write(caller, out, out_ptr)
        memory.write(caller, struct.pack("<I", len(events)), nevents_ptr)
        return 0

    def _deadline_ns(self, clock_id: int, timeout: int, absolute: bool) -> int:
        now = time.monotonic_ns()
        if not absolute:
            return now + timeout
        if clock_id == 0:  # realtime: an absolute wall-clock time
            return now + (timeout - time.time_ns())
        return self.clock_base_ns + timeout  # monotonic, counted from the WASI context's start


_TRAMPOLINE_WAT = """
(module
  (import "guest" "memory" (memory 0))
  (import "wasi_snapshot_preview1" "fd_readdir" (func $readdir (param i32 i32 i32 i64 i32) (result i32)))
  (export "memory" (memory 0))
  (func (export "fd_readdir") (param i32 i32 i32 i64 i32) (result i32)
    (call $readdir (local.get 0) (local.get 1) (local.get 2) (local.get 3) (local.get 4))))
"""
_trampolines: dict[int, wasmtime.Module] = {}
_trampolines_lock = threading.Lock()


def _trampoline_module(engine: wasmtime.Engine) -> wasmtime.Module:
    with _trampolines_lock:
        module = _trampolines.get(id(engine))
        if module is None:
            module = _trampolines[id(engine)] = wasmtime.Module(engine, bytes(wasmtime.wat2wasm(_TRAMPOLINE_WAT)))
        return module


class FdReaddir:
    """WASI `fd_readdir`, in front of wasmtime's: whole listings read at once, then served from
    memory.

    wasmtime's `fd_readdir` reads the whole folder again on every call and skips to the cookie;
    wasi-libc's `readdir` calls it with a 4 KiB buffer (~100 entries), so a listing costs
    O(entries²) (8000 files: 18-32 s). Here a call at cookie 0 (the start of every listing)
    reads into a scratch buffer in the guest's memory (`host_alloc`, 256 KiB, ~3000 entries);
    the listing's later calls are answered from the records kept, and refilled by the real call
    (each one still re-reads the whole folder, ~50 µs an entry) only past the buffer, which then
    grows eightfold, up to 16 MiB: a few real calls per listing at most. A listing is a snapshot
    taken at its start. (Kept per fd, for the last few fds listed: `find` lists a folder while
    it walks another.) The guest has no `free` export: outgrown buffers stay allocated (< 3 MiB).

    wasmtime's WASI functions find the memory through their caller's `memory` export, so the
    host cannot call one directly: a two-line wasm module importing the guest's memory (and
    exporting it) calls it for us.
    """

    FIRST_SCRATCH, MAX_SCRATCH = 256 << 10, 16 << 20
    HEADER = 24  # d_next u64, d_ino u64, d_namlen u32, d_type u8, padding
    KEEP = 16  # listings kept (one per fd)
    EIO, EFAULT = 29, 21

    def __init__(self, engine: wasmtime.Engine, original: wasmtime.Func) -> None:
        self.engine = engine
        self.original = original
        self.call: Optional[wasmtime.Func] = None  # the trampoline, made on first use
        self.scratch = 0
        self.scratch_size = 0
        self.grow = False  # the last fill was full: the next gets a bigger buffer
        self.listings: dict[int, _Listing] = {}  # fd -> its listing, oldest first

    def __call__(self, caller: wasmtime.Caller, fd: int, buf: int, buf_len: int, cookie: int,
                 bufused_ptr: int) -> int:
        try:
            return self._readdir(caller, fd, buf, buf_len, cookie, bufused_ptr)
        except BaseException:  # never into wasmtime (see the module docstring)
            return self.EIO

    def _readdir(self, caller: wasmtime.Caller, fd: int, buf: int, buf_len: int, cookie: int,
                 bufused_ptr: int) -> int:
        memory = caller["memory"]
        assert isinstance(memory, wasmtime.Memory)
        size = memory.data_len(caller)
        if not (buf_len >= 0 and _fits(buf, buf_len, size) and _fits(bufused_ptr, 4, size)):
            return self.EFAULT
        listing = self.listings.get(fd)
        if cookie == 0 or listing is None or cookie not in listing.index:
            listing = _Listing()
            self.listings.pop(fd, None)
            while len(self.listings) >= self.KEEP:
                del self.listings[next(iter(self.listings))]
            self.listings[fd] = listing
            errno = self._fill(caller, memory, fd, cookie, listing)
            if errno:
                return errno
        out = bytearray()
        at = listing.index.get(cookie)
        while len(out) < buf_len:
            if at is None or at >= len(listing.records):
                resume = listing.next_cookie
                if resume is None:
                    break  # the real end of the folder
                errno = self._fill(caller, memory, fd, resume, listing)
                if errno:
                    return errno
                at = listing.index.get(resume)
                if at is None or at >= len(listing.records):
                    break
                continue
            out += listing.records[at]
            at += 1
        data = bytes(out[:buf_len])
        memory.write(caller, data, buf)
        memory.write(caller, struct.pack("<I", len(data)), bufused_ptr)
        return 0

    def _fill(self, caller: wasmtime.Caller, memory: wasmtime.Memory, fd: int, cookie: int,
              listing: "_Listing") -> int:
        """Read records from `cookie` on with the real call (one scratch buffer's worth)."""
        if self.call is None:
            instance = wasmtime.Instance(caller, _trampoline_module(self.engine), [memory, self.original])
            call = instance.exports(caller)["fd_readdir"]
            assert isinstance(call, wasmtime.Func)
            self.call = call
        if not self.scratch or self.grow:
            size = min(self.scratch_size * 8, self.MAX_SCRATCH) if self.scratch else self.FIRST_SCRATCH
            alloc = caller["host_alloc"]
            assert isinstance(alloc, wasmtime.Func)
            scratch = int(alloc(caller, size + 8))
            if not scratch or not _fits(scratch, size + 8, memory.data_len(caller)):
                return self.EIO
            self.scratch, self.scratch_size, self.grow = scratch, size, False
        size = self.scratch_size
        used_ptr = self.scratch + size
        errno = int(self.call(caller, fd, self.scratch, size, cookie, used_ptr))
        if errno:
            return errno
        used = min(struct.unpack("<I", memory.read(caller, used_ptr, used_ptr + 4))[0], size)
        raw = memory.read(caller, self.scratch, self.scratch + used)
        pos, start = 0, cookie
        while pos + self.HEADER <= len(raw):
            d_next, _ino, namlen = struct.unpack_from("<QQI", raw, pos)
            end = pos + self.HEADER + namlen
            if end > len(raw):
                break  # cut off at the end of the buffer: read again from its cookie
            listing.index[start] = len(listing.records)
            listing.records.append(bytes(raw[pos:end]))
            start, pos = d_next, end
        # a full buffer means more may follow (WASI); anything less is the end of the folder
        full = used >= size
        listing.next_cookie = start if full and start != cookie else None
        self.grow = full and size < self.MAX_SCRATCH
        return 0


@dataclass
class _Listing:
    """One folder listing read by `_FdReaddir`: its dirent records in order."""

    records: list[bytes] = field(default_factory=list)
    index: dict[int, int] = field(default_factory=dict)  # cookie of an entry -> its record's index
    next_cookie: Optional[int] = None  # where the real listing goes on (None: it ended)


def memory_address(memory: wasmtime.Memory, store: "wasmtime.Store | wasmtime.Caller") -> int:
    """Where a guest's linear memory starts in this process now (it moves when the memory grows)."""
    return ctypes.addressof(memory.data_ptr(store).contents)


# Set as the process exits: guest threads that wait before freeing their store (guest.py,
# CLOSE_AFTER_S, so that the caller woken by the outcome gets the GIL first) free it at once.
exiting = threading.Event()


def wait_for_wasmtime_output_threads() -> None:
    """wasmtime frees output callbacks on its own threads after a store closes; exiting the
    process before they run makes Rust panic. Wait (briefly) until they are all freed: the
    guests' threads are told to free their stores now, and the handles are looked at every
    millisecond (a store is freed a few milliseconds after its last output; at 10 ms a look
    this wait was most of an exit's atexit work)."""
    exiting.set()
    try:
        from wasmtime import _wasi

        handles = _wasi.CUSTOM_OUTPUTS.handles
    except Exception:
        return
    deadline = time.monotonic() + 2.0
    while handles and time.monotonic() < deadline:
        time.sleep(0.001)


atexit.register(wait_for_wasmtime_output_threads)


class ClockTimeGet:
    """WASI `clock_time_get` for a guest restored from an image: its monotonic clock continues
    from the reading the image carries (wasmtime's would restart near 0 with the new WASI
    context, and `time.monotonic()` would go backwards). Monotonic readings are
    `time.monotonic_ns() - clock_base_ns`, the base set back by the image's reading, which is the
    same base `PollOneoff` counts absolute sleeps from; realtime is the host's wall clock. Only
    restored guests get it (a Python call per reading)."""

    EINVAL, EFAULT = 28, 21

    def __init__(self, clock_base_ns: int) -> None:
        self.clock_base_ns = clock_base_ns

    def __call__(self, caller: wasmtime.Caller, clock_id: int, precision: int, out_ptr: int) -> int:
        try:
            if clock_id == 0:
                now = time.time_ns()
            elif clock_id == 1:
                now = time.monotonic_ns() - self.clock_base_ns
            else:
                return self.EINVAL  # CPU-time clocks: wasmtime has none either
            memory = caller["memory"]
            assert isinstance(memory, wasmtime.Memory)
            if not _fits(out_ptr, 8, memory.data_len(caller)):
                return self.EFAULT
            memory.write(caller, struct.pack("<Q", now), out_ptr)
            return 0
        except BaseException:  # never into wasmtime (see the module docstring)
            return self.EFAULT
