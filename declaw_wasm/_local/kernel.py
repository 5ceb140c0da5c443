"""`run_code` and code contexts (E2B code-interpreter's semantics), on the host side.

A context is one long-lived guest holding the kernel (guest/declaw_kernel), started from the
warm image. Its first turn (the module's `turn` export) sets the kernel up; each cell is then
one more turn, `declaw_kernel.cell(code, envs)`, run on the guest's thread while `run_code`
collects what the guest reports through the door (stdout, stderr, results, the error). The cell
is over when its turn returns: the host sees that itself, so nothing the cell's code sends
through the door can end it early or take the next cell's code (a forged `done` once could). One
cell at a time per context; contexts are independent guests, so they run at once.

Timeouts: a cell past its `timeout` stops the guest (an epoch deadline, and the interruptible
`poll_oneoff` for sleeps) and raises `TimeoutException` at once; the context starts afresh on
its next cell, which says on stderr that the state was lost. (A KeyboardInterrupt that kept the
namespace would need signal delivery into the guest, which WASI does not have.)
"""

from __future__ import annotations

import secrets
import sys
import threading
import weakref
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from pydantic import BaseModel

from .._wasm.boot import bash_cell_turn, cell_turn, kernel_turn
from .._wasm.guest import Guest
from ..exceptions import ConflictException, InvalidArgumentException, TimeoutException
from ..execution import MIME_FIELDS, Context, Execution, ExecutionError, OutputMessage, Result
from .._wasm.door import MAX_FRAME, PRINTABLE, Bool, Json, Keyed, Map, Op, RequestError, Str
from .doors import Routes, dispatch, routes
from .parking import parking
from .processes import DISK, KILL, STDIN, SYSINFO, WINSIZE, Spawner, kill_in
from .tools import Tools

if TYPE_CHECKING:
    from .launcher import GuestSandbox

# The door ops a code context's guest may use besides stdin, winsize, pip_install, the
# network's and host tools' (doors.py): what a cell reports. Their handlers are Kernel's below.
TEXT = Str(MAX_FRAME, doc="output text (the host keeps the sandbox's output limit)")
STDOUT = Op("stdout", {"text": TEXT}, "nil", "a cell's output")
STDERR = Op("stderr", {"text": TEXT}, "nil", "a cell's error output")
# a bundle's formats: text (base64 for binary ones) where E2B's Result has a str, a map of
# columns for e2b/data, any plain value for JSON, a chart (read leniently: charts.py) and others
BUNDLE_TEXT = Str(MAX_FRAME, null=True)
BUNDLE = Keyed({**{mime: BUNDLE_TEXT for mime, name in MIME_FIELDS.items()
                   if name not in ("text", "json", "data", "chart")},
                "e2b/data": Map(Str(MAX_FRAME), Json(), max_items=1 << 16, null=True)},
               Str(255, PRINTABLE, min_len=1), Json(), max_items=256,
               doc="MIME type -> value (text, base64, or JSON-like data)")
RESULT = Op("result", {"data": BUNDLE, "main": Bool(doc="the cell's own value (not a display())")},
            "nil", "a cell's rich result (a MIME bundle)")
ERROR = Op("error", {"name": Str(4096, doc="the exception's class"), "value": Str(MAX_FRAME),
                     "traceback": Str(MAX_FRAME)}, "nil", "a cell's uncaught exception")
KERNEL_OPS = (STDOUT, STDERR, RESULT, ERROR)

# What one log entry costs beyond its characters: its str object (49 bytes) and its list slot
# (8). Where a reader is behind (a pool's or Ray's driver, `serve`'s client), later writes join
# the entry waiting for it (_backend.CellNews), so that is all a write costs there too.
LOG_COST = 64
RESULT_COST = 1024  # what one result costs beyond the objects it holds (see `held`): its trip out
TRUNCATED = "\n[declaw-wasm] output truncated at the sandbox's output limit\n"
DROPPED = ("[declaw-wasm] results dropped: this cell's output (logs and results) reached the sandbox's "
           "output limit (Limits.output_limit)\n")
DEFAULT_CONTEXT = "default"
DEFAULT_CONTEXTS = {"python": DEFAULT_CONTEXT, "bash": "default-bash"}  # per language, made on first use


def held(value: Any, limit: Optional[int] = None) -> int:
    """Bytes of host memory `value` holds (what the door decoded, and the models made of it):
    each object's own size (`sys.getsizeof`: a list's slots, a dict's table, a str's
    characters) over everything it reaches, but nothing for the objects CPython shares (None,
    booleans, small ints, one-character latin-1 strings, enum members). About 1 µs a value
    (the door bounds a frame's values: MAX_ITEMS); it stops early once past `limit`."""
    total = 0
    stack = [value]
    size = sys.getsizeof
    bound = sys.maxsize if limit is None else limit
    while stack and total <= bound:
        item = stack.pop()
        kind = type(item)
        if kind is list or kind is tuple:
            total += size(item)
            stack.extend(item)
        elif kind is dict:
            total += size(item)
            stack.extend(item)
            stack.extend(item.values())
        elif kind is str:
            if len(item) > 1 or (item and ord(item) > 255):
                total += size(item)
        elif kind is int:
            if not -5 <= item <= 256:
                total += size(item)
        elif isinstance(item, BaseModel):
            total += size(item) + size(item.__dict__) + size(item.__pydantic_fields_set__)
            stack.extend(item.__dict__.values())
            stack.append(item.__pydantic_extra__)
        elif not (item is None or kind is bool or isinstance(item, Enum)):
            total += size(item)  # float, bytes; nothing else comes through the door (counted whole if it does)
    return total


class _Cell:
    """One `run_code` in flight: what the guest has reported so far.

    Its logs and its results share one budget, the sandbox's output limit (`room`): each log
    entry costs its characters and `LOG_COST`, each result the objects it holds (`held`) and
    `RESULT_COST`, so what the host holds for a cell stays proportional to the limit whatever
    the guest sends — a million one-character prints, a thousand `display()` calls, one
    enormous image. Past it, text is cut (once, with a note) and results are dropped (with a
    note on stderr)."""

    def __init__(self, code: str, envs: dict[str, str], timeout: Optional[float],
                 output_limit: int, callbacks: dict[str, Optional[Callable[[Any], Any]]],
                 tools: Optional[Tools] = None) -> None:
        self.timeout = timeout
        self.tools = tools  # the cell's own host tools (run_code(tools=)), before the sandbox's
        self.callbacks = callbacks
        self.execution = Execution()
        self.finished = threading.Event()
        self.room = output_limit  # what is still kept of logs and results (see above)
        self._dropped = False

    def log(self, stream: str, text: str) -> None:
        if self.room <= 0:
            return
        cost = len(text) + LOG_COST
        if cost > self.room:
            text = text[: max(0, self.room - LOG_COST)] + TRUNCATED
        self.room -= cost
        self._keep(stream, text)

    def _keep(self, stream: str, text: str) -> None:
        getattr(self.execution.logs, stream).append(text)
        self._call(f"on_{stream}", OutputMessage(line=text, error=stream == "stderr"))

    def result(self, bundle: dict[str, Any], main: bool) -> Any:
        """Keep a result within the cell's output budget; a bundle E2B's Result cannot hold (the
        declaration lets through only what it should) is answered with an error, never raised
        into the door. A result costs what its objects hold in this process (`held`), not the
        size of the frame it came in: a small frame can decode to many times its size (16 000
        empty lists in 16 KB: a megabyte of lists)."""
        if self.room <= RESULT_COST:
            return self._drop()
        try:
            result = Result.from_bundle(bundle, main)
        except ValueError as exc:  # pydantic's ValidationError
            return RequestError("result", "data", f"not a result bundle ({str(exc).splitlines()[0]})").reply()
        cost = held(result, self.room) + RESULT_COST
        if cost > self.room:
            return self._drop()
        self.room -= cost
        self.execution.results.append(result)
        self._call("on_result", result)
        return None

    def _drop(self) -> None:
        if not self._dropped:  # said once, whatever the room
            self._dropped = True
            self._keep("stderr", DROPPED)

    def error(self, name: str, value: str, traceback: str) -> None:
        self.execution.error = ExecutionError(name=name, value=value, traceback=traceback)
        self._call("on_error", self.execution.error)

    def _call(self, name: str, value: Any) -> None:
        callback = self.callbacks.get(name)
        if callback is not None:
            try:
                callback(value)
            except Exception:  # the caller's bug must not break the guest
                pass


class Kernel:
    """One context's guest and the cell it is running."""

    def __init__(self, sandbox: "GuestSandbox", context: Context, image: Any = None, count: int = 0,
                 first_turn: Optional[str] = None) -> None:
        """`image`: a restored context's (GuestImage, BaseImage) (snapshots.py), applied when its
        guest starts (on first use), with its execution `count`; `first_turn` runs before its
        first cell (a fork's new random seeds)."""
        self.sandbox = sandbox
        self.context = context
        self.guest: Optional[Guest] = None
        self._run_lock = threading.Lock()  # one cell at a time
        self._current: Optional[_Cell] = None  # the cell whose turn is running
        self._count = count  # cells run by this guest (execution_count)
        self.turns = 0  # cells started here, never reset (checkpoints.py: has it changed?)
        self._image = image
        self._first_turn = first_turn
        self._lost: Optional[str] = None  # why the last guest ended, told to the next cell
        # a guest its context's owner stopped (restart_code_context, remove_code_context) and
        # why: a cell it was running ends with that error, not the sandbox's kill
        self._stopped_by_owner: tuple[Optional["weakref.ref[Guest]"], str] = (None, "")
        self._quota_message = ""
        # What a cell's guest may ask (doors.py). Nothing here ends a cell (its turn's return
        # does), so any request the cell's own code forges can at most add to its own output.
        # host tools (tools.py): the running cell's, then the sandbox's
        self._tools = sandbox.launcher.tool_door(
            lambda: (self._current.tools if self._current else None, sandbox.tools))
        # programs a cell starts beside it (a Popen of a Python program): they run on between
        # cells and end with the context's guest; what they send to its output goes to the
        # cell running then (none: dropped)
        self._spawner = Spawner(sandbox, self._fd_output, lambda: self.guest is None or self.guest.done)
        self._routes: Routes = routes(
            (STDOUT, lambda guest, r: self._cell().log("stdout", r.get("text", ""))),
            (STDERR, lambda guest, r: self._cell().log("stderr", r.get("text", ""))),
            (RESULT, lambda guest, r: self._cell().result(r.get("data") or {}, bool(r.get("main")))),
            (ERROR, lambda guest, r: self._cell().error(r.get("name", ""), r.get("value", ""),
                                                        r.get("traceback", ""))),
            (STDIN, lambda guest, r: b""),  # cells have no stdin (E2B's neither)
            (WINSIZE, lambda guest, r: [24, 80]),
            # `!free`, `!ps` and `resource.getrusage` in a cell: the sandbox's view, as a
            # command's; the kernel is no command, so no row is marked as the asker's (pid 0)
            (SYSINFO, lambda guest, r: sandbox.system_view(0, guest)),
            (DISK, lambda guest, r: sandbox.disk_view()),  # `!df`, shutil.disk_usage in a cell
            *self._spawner.routes(), (KILL, lambda guest, r: kill_in(sandbox, r)),  # `!kill`, os.kill
            # `!pip install` / `%pip install` in a cell, the guest's network (_egress), host tools
            *sandbox.launcher.routes(self._tools))

    # -- the guest's side ------------------------------------------------------------------------
    def _door(self, guest: Guest, request: Any) -> Any:
        return dispatch(self._routes, guest, request)

    def _cell(self) -> "_Cell":
        cell = self._current
        if cell is None:
            raise ValueError("a cell's report outside a cell")
        return cell

    def _fd_output(self, stream: str) -> Callable[[str], None]:
        """Output written to the guest's fd 1/2 directly (C code), not through sys.stdout."""
        def deliver(text: str) -> None:
            cell = self._current
            if cell is not None:
                cell.log(stream, text)
        return deliver

    # -- the caller's side -------------------------------------------------------------------------
    def _start(self) -> Guest:
        sandbox, launcher = self.sandbox, self.sandbox.launcher
        cwd = self.context.cwd or "/home/user"
        stdout, stderr = self._fd_output("stdout"), self._fd_output("stderr")
        parked = parking.take(sandbox) if self._image is None else None  # a restored context: its image
        if parked is not None:  # booted already: the kernel's set-up is its next turn
            self._count = 0
            launcher.bind(parked, stdout, stderr, self._door)

            def set_up(code: int) -> None:
                if code != 0:  # the set-up failed (printed on stderr): no kernel to run cells
                    parked.kill("killed")

            parked.run_turn(kernel_turn(cwd, sandbox.guest_env()), lambda: None, set_up)
            sandbox.park_later()  # the sandbox's next command finds a guest parked again
            return parked
        first_turn = None
        image, self._image = self._image, None
        if image is not None:  # a restored context: its state instead of the setup turn, once
            first_turn, self._first_turn = self._first_turn, None
        else:
            self._count = 0
        guest = launcher.kernel(cwd, stdout, stderr, self._door, image)
        guest.start()
        if first_turn:
            guest.run_turn(first_turn, lambda: None, lambda _code: None)
        return guest

    @contextmanager
    def held(self, wait: float) -> Iterator[None]:
        """No cell runs in this context while held (snapshots): a cell in flight is waited for up
        to `wait` s, then ConflictException."""
        if not self._run_lock.acquire(timeout=wait):
            raise ConflictException(f"code context {self.context.id!r}: a cell is still running after "
                                    f"{wait:g} s; snapshot once it is done")
        try:
            yield
        finally:
            self._run_lock.release()

    def state(self, capture: Callable[[Guest], Any]) -> tuple[Any, int]:
        """For a snapshot, while `held`: `capture(guest)` and the execution count. A restored
        context not started yet gives its pending image; one without a guest gives None (it
        starts afresh)."""
        if self._image is not None:
            return self._image[0], self._count
        guest = self.guest
        if guest is None or guest.done:
            return None, 0
        return capture(guest), self._count

    def run(self, code: str, envs: dict[str, str], timeout: Optional[float],
            callbacks: dict[str, Optional[Callable[[Any], Any]]], tools: Optional[Tools] = None) -> Execution:
        with self._run_lock:
            self.sandbox.ensure_running()
            if self.guest is None or self.guest.done:
                self.guest = self._start()
            guest = self.guest
            cell = _Cell(code, envs, timeout, self.sandbox.limits.output_limit, callbacks, tools)
            if self._lost:
                cell.log("stderr", f"[declaw-wasm] this context was restarted ({self._lost}): "
                                   "its variables and imports are gone\n")
                self._lost = None
            self.turns += 1
            self._count += 1
            cell.execution.execution_count = self._count

            def starting() -> None:  # on the guest's thread: the cell's time starts now
                self._current = cell
                guest.set_deadline(cell.timeout)
                # what C code writes to fd 1/2: the cell's, within the output limit of each cell
                # (the sinks would otherwise keep the context's whole life's output, and then none)
                guest.stdout.rebind(self._fd_output("stdout"))
                guest.stderr.rebind(self._fd_output("stderr"))

            def done(_code: int) -> None:  # the turn returned (an exception in it was printed)
                guest.set_deadline(None)
                self._tools.reset()
                self._current = None
                self._count_fuel(guest, cell)
                cell.finished.set()

            turn = bash_cell_turn if self.context.language == "bash" else cell_turn
            guest.run_turn(turn(code, envs), starting, done, fuel=self.sandbox.limits.cpu_instructions)
            while not cell.finished.wait(0.02):
                if guest.done:
                    return self._ended(guest, cell, timeout)
            if not self.sandbox.running:  # killed meanwhile: the kill may end a cell's wait first
                return self._ended(guest, cell, timeout)
            return cell.execution

    def _ended(self, guest: Guest, cell: _Cell, timeout: Optional[float]) -> Execution:
        outcome = guest.wait()
        assert outcome is not None
        self.sandbox.launcher.released(guest)
        self._tools.reset()
        self.guest, self._current = None, None
        self._spawner.end_all()
        if outcome.stopped == "timeout":
            self._lost = f"the previous cell timed out after {timeout:g} s"
            raise TimeoutException(f"Execution timed out after {timeout:g} s")
        if outcome.stopped == "quota":
            self._lost = "the previous cell went over the disk quota"
            cell.error("DiskQuotaExceeded", self._quota_message, "")
            return cell.execution
        if outcome.stopped == "fuel":
            budget = self.sandbox.limits.cpu_instructions or 0
            self._lost = f"the previous cell used its CPU budget of {budget:,} instructions"
            self._count_fuel(guest, cell)
            cell.error("CpuLimitExceeded", f"the cell used its budget of {budget:,} instructions "
                       "(Limits.cpu_instructions) and was stopped", "")
            return cell.execution
        stopped, why = self._stopped_by_owner
        if self.sandbox.running and outcome.stopped == "killed" and stopped is not None and stopped() is guest:
            cell.error(f"Context{why.capitalize()}", f"the code context was {why} while the cell ran "
                       "(its variables and imports are gone)", "")
            return cell.execution
        if not self.sandbox.running or outcome.stopped == "killed":
            raise TimeoutException(f"sandbox {self.sandbox.sandbox_id}: the sandbox was killed while the request "
                                   "was in progress (killed or reached its end of life while the cell ran)")
        # the cell ended the process (os._exit, a crash): report it, start afresh next time
        self._lost = f"the previous cell ended the interpreter (exit {outcome.exit_code})"
        cell.error("KernelExit", f"the interpreter exited with status {outcome.exit_code}"
                   + (f": {outcome.error}" if outcome.error else ""), outcome.stderr[-2000:])
        return cell.execution

    def _count_fuel(self, guest: Guest, cell: _Cell) -> None:
        if self.sandbox.limits.cpu_instructions:
            cell.execution.cpu_instructions_used = guest.fuel_used
            self.sandbox.count_fuel(guest.fuel_used)

    def busy(self) -> bool:
        return self._current is not None and self.guest is not None

    def stop_for_quota(self, message: str) -> None:
        guest = self.guest
        if guest is not None:
            self._quota_message = message
            guest.kill("quota")

    def stop(self, wait: bool = True, lost: Optional[str] = None, by_owner: str = "") -> None:
        """Stop the context's guest (`lost`: why, told to its next cell; `by_owner`: "restarted"
        or "removed", the error of a cell it is running)."""
        guest = self.guest
        self.guest = None
        if by_owner and guest is not None:
            self._stopped_by_owner = (weakref.ref(guest), by_owner)  # not kept alive by it
        if lost is not None and guest is not None:
            self._lost = lost
        self._spawner.end_all()
        if guest is not None:
            guest.kill("killed")
            if wait:
                guest.wait(5.0)
                self.sandbox.launcher.released(guest)


class CodeInterpreter:
    """A sandbox's contexts: the default one (made on first use) and those created."""

    def __init__(self, sandbox: "GuestSandbox") -> None:
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._kernels: dict[str, Kernel] = {}

    def _kernel(self, context_id: Optional[str], language: Optional[str] = None) -> Kernel:
        """The context `context_id`, or the default context of `language` (made on first use:
        `run_code(language="bash")` without a context runs in the sandbox's default bash one)."""
        self.sandbox.ensure_running()
        context_id = context_id or DEFAULT_CONTEXTS[language or "python"]
        with self._lock:
            kernel = self._kernels.get(context_id)
            defaults = {name: lang for lang, name in DEFAULT_CONTEXTS.items()}
            if kernel is None and context_id in defaults:
                kernel = Kernel(self.sandbox, Context(id=context_id, language=defaults[context_id]))
                self._kernels[context_id] = kernel
        if kernel is None:
            raise InvalidArgumentException(f"no code context {context_id!r} in this sandbox")
        return kernel

    def run_code(self, code: str, context_id: Optional[str], envs: dict[str, str],
                 timeout: Optional[float], callbacks: dict[str, Optional[Callable[[Any], Any]]],
                 tools: Optional[Tools] = None, language: Optional[str] = None) -> Execution:
        return self._kernel(context_id, language).run(code, envs, timeout, callbacks, tools)

    def create_context(self, cwd: Optional[str], language: str) -> Context:
        where = self.sandbox.fs.absolute(cwd) if cwd else "/home/user"
        if not self.sandbox.fs.exists(where):
            raise InvalidArgumentException(f"cwd {where} does not exist in the sandbox")
        context = Context(id=secrets.token_hex(8), language=language, cwd=where)
        with self._lock:
            self._kernels[context.id] = Kernel(self.sandbox, context)
        return context

    def list_contexts(self) -> list[Context]:
        self.sandbox.ensure_running()
        with self._lock:
            listed = [k.context for k in self._kernels.values()]
        if not any(c.id == DEFAULT_CONTEXT for c in listed):
            listed.insert(0, Context(id=DEFAULT_CONTEXT))
        return listed

    def restart_context(self, context_id: str) -> None:
        self._kernel(context_id).stop(by_owner="restarted")  # the next cell starts a fresh guest

    def remove_context(self, context_id: str) -> None:
        kernel = self._kernel(context_id)
        with self._lock:
            self._kernels.pop(kernel.context.id, None)
        kernel.stop(by_owner="removed")

    def kernels(self) -> list[Kernel]:
        """Every context's kernel (snapshots), the default one first."""
        with self._lock:
            return sorted(self._kernels.values(), key=lambda k: k.context.id != DEFAULT_CONTEXT)

    def install(self, kernel: Kernel) -> None:
        """A restored context (snapshots), before the sandbox is used."""
        with self._lock:
            self._kernels[kernel.context.id] = kernel

    def live_guests(self) -> list[Any]:
        with self._lock:
            return [k.guest for k in self._kernels.values()]

    def busy_guests(self) -> set[int]:
        with self._lock:
            kernels = list(self._kernels.values())
        return {id(k.guest) for k in kernels if k.busy()}

    def stop_for_quota(self, message: str, guest_ids: set[int]) -> None:
        with self._lock:
            kernels = [k for k in self._kernels.values() if id(k.guest) in guest_ids]
        for kernel in kernels:
            kernel.stop_for_quota(message)

    def stop_all(self, wait: bool = True) -> None:
        """Stop every context's guest (`wait`: until each has ended)."""
        with self._lock:
            kernels = list(self._kernels.values())
        for kernel in kernels:
            kernel.stop(wait)

