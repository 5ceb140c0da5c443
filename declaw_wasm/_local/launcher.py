"""A sandbox's guests, built in one place: `Launcher` starts, parks and binds them.

Every guest of a sandbox, a command line's (processes.py), a code context's (kernel.py) or a
parked one (parking.py), is built from the same parts: the sandbox's runtime, its template's
profile, its mounts, its memory and output limits, its environment, and the door handlers every
guest is offered (pip, the network, host tools). The launcher owns that list, so a part added
to a guest is added once, and the same limits reach every kind of guest. A parked guest, booted
with no command yet (its door answers nothing), becomes a command's or a context's guest by
`bind`: its output, its door and its end rebound.

The kernel, commands and parking know of a sandbox only `GuestSandbox`, the protocol below
(`LocalSandbox` is one); the launcher knows only `GuestParts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Protocol

from .._media.door import CodecShare
from .._media.door import routes as media_routes
from .._packages.install_op import PIP_INSTALL
from .._wasm.boot import kernel_spec, park_spec, shell_spec
from .._wasm.guest import Guest, GuestSpec, GuestStopping, OutputSink
from .._wasm.shims import DoorHandler
from .doors import Route, net_routes
from .tools import ToolDoor, Tools

if TYPE_CHECKING:
    from .._egress.session import EgressSession
    from .sandbox import EgressSlot
    from .._wasm.engine import Interpreter
    from ..limits import Limits
    from .files import SandboxFS
    from ..wire import RunCommand
    from .processes import Outputs, Process

Deliver = Optional[Callable[[str], None]]  # where a guest's fd 1 or 2 output goes (None: kept only)


class GuestParts(Protocol):
    """What a guest is built from: all the launcher reads of a sandbox."""

    @property
    def sandbox_id(self) -> str: ...
    @property
    def interpreter(self) -> "Interpreter": ...
    @property
    def profile(self) -> dict[str, Any]: ...
    @property
    def fs(self) -> "SandboxFS": ...
    @property
    def limits(self) -> "Limits": ...
    @property
    def egress(self) -> "EgressSession": ...
    @property
    def egress_slot(self) -> "EgressSlot": ...
    @property
    def tools(self) -> Optional[Tools]: ...
    def guest_env(self) -> dict[str, str]: ...


class GuestSandbox(GuestParts, Protocol):
    """What the kernel, commands and parking use of a sandbox, and nothing else."""

    @property
    def launcher(self) -> "Launcher": ...
    @property
    def running(self) -> bool: ...
    def ensure_running(self) -> None: ...
    def count_fuel(self, used: Optional[int]) -> None: ...
    def park_later(self) -> None: ...
    def system_view(self, pid: int, asker: Guest) -> dict[str, Any]: ...
    def disk_view(self) -> dict[str, int]: ...
    def forget_process(self, process: Any) -> None: ...
    # a command of the sandbox (a program a guest starts beside it: processes.py, `spawn`)
    def start(self, request: RunCommand, *, spawned: Optional[Outputs] = ...) -> Process: ...
    def process(self, pid: int) -> Process: ...  # a running command or PTY (NotFoundException if none)
    def release_spawned(self) -> None: ...


def _unbound(_guest: Guest, _request: Any) -> Any:
    """The door of a parked guest, with no command yet: nothing to answer."""
    raise GuestStopping()


class Launcher:
    """One sandbox's guests: each built from the sandbox's parts as they are when it starts (a
    standby sandbox gets its envs and network when handed out, after its launcher is made)."""

    def __init__(self, sandbox: GuestParts) -> None:
        self._sandbox = sandbox
        self._codec = CodecShare()  # the sandbox's one place at the JPEG codec (_media/door.py)

    @property
    def warm(self) -> bool:
        """Whether guests start from the warm image (only those park)."""
        return self._sandbox.interpreter.warm

    def _limits(self) -> dict[str, Any]:
        """The parts of a guest's spec that every guest of the sandbox shares."""
        sandbox = self._sandbox
        return {"profile": sandbox.profile, "mounts": sandbox.fs.mounts,
                "memory_limit": sandbox.limits.memory_limit, "output_limit": sandbox.limits.output_limit}

    def _guest(self, spec: GuestSpec, stdout: Deliver, stderr: Deliver, door: DoorHandler, keep: bool = True,
               on_done: Optional[Callable[[Guest], None]] = None, more_turns: bool = False) -> Guest:
        limit = self._sandbox.limits.output_limit
        return Guest(self._sandbox.interpreter, spec, stdout=OutputSink(limit, stdout, keep),
                     stderr=OutputSink(limit, stderr, keep), door=door, on_done=on_done, more_turns=more_turns)

    def shell(self, cwd: str, cmd: str, env: dict[str, str], tty: bool, timeout: Optional[float],
              stdout: Deliver, stderr: Deliver, door: DoorHandler, on_done: Callable[[Guest], None]) -> Guest:
        """A fresh guest running command line `cmd` (or, `tty`, an interactive shell), not started.
        A tty's sinks keep the raw text (a command's text is otherwise its event log's)."""
        spec = shell_spec(self.warm, cwd, cmd, env, tty=tty, timeout=timeout,
                          fuel=self._sandbox.limits.cpu_instructions, **self._limits())
        return self._guest(spec, stdout, stderr, door, keep=tty, on_done=on_done)

    def kernel(self, cwd: str, stdout: Deliver, stderr: Deliver, door: DoorHandler, image: Any = None) -> Guest:
        """A fresh code context's guest, not started: its first turn sets the kernel up, or
        (`image`, a restored context's) it starts from that state instead."""
        spec = kernel_spec(self.warm, cwd, self._sandbox.guest_env(), **self._limits())
        if image is not None:
            spec.turns, spec.image = [], image
        return self._guest(spec, stdout, stderr, door, more_turns=True)

    def park(self, pristine: Optional[Callable[[], bool]] = None) -> Guest:
        """A guest booted ahead of its command (parking.py), started: it waits for `bind`.
        `pristine()`, asked once its park turn is over: whether nothing of a sandbox's has
        reached it yet (a standby sandbox's, not handed out): then the runtime may learn its
        hot pages from it (_wasm/prefault.py)."""
        spec = park_spec(self._sandbox.guest_env(), **self._limits())
        spec.learn_pages = pristine
        guest = self._guest(spec, None, None, _unbound, more_turns=True)
        guest.start("declaw-parked")  # "declaw-guest" once it runs a command
        return guest

    @staticmethod
    def bind(guest: Guest, stdout: Deliver, stderr: Deliver, door: DoorHandler, keep: bool = True,
             on_done: Optional[Callable[[Guest], None]] = None) -> Guest:
        """Make a parked guest its new owner's: its output, its door and (if given) its end."""
        guest.stdout.rebind(stdout, keep)
        guest.stderr.rebind(stderr, keep)
        guest.door = door
        if on_done is not None:
            guest.on_done = on_done
        guest.rename("declaw-guest")
        return guest

    # -- what every guest may ask besides its own ops (doors.py) -----------------------------------------
    def tool_door(self, sources: Callable[[], Iterable[Optional[Tools]]]) -> ToolDoor:
        """A guest's host tools (tools.py): `sources()`, the tools it may call now, first match wins."""
        slot = self._sandbox.egress_slot  # this generation's network: its audit is built at a first call
        return ToolDoor(sources, lambda event: slot.session().audit.record(event), self._sandbox.sandbox_id)

    def routes(self, tools: ToolDoor) -> list[Route]:
        """The door routes every guest of the sandbox has: `pip install`, the JPEG codec (_media),
        the network (_egress) and its host tools."""
        # this generation's network (sandbox.py's EgressSlot), built at the guest's first network op
        return [(PIP_INSTALL, self.pip_install), *media_routes(self._codec),
                *net_routes(self._sandbox.egress_slot.session), *tools.routes()]

    def pip_install(self, guest: Guest, request: dict[str, Any]) -> Any:
        """`pip install` in the guest, done by the host (imported on first use: packaging & co.)."""
        from .._packages.pip import install_for_guest

        return install_for_guest(self._sandbox.fs, request, guest.stop_requested, self._sandbox.egress)

    def released(self, guest: Guest) -> None:
        """A guest ended: its network connections close with it."""
        if self._sandbox.egress_slot.built:
            self._sandbox.egress.release(guest)
