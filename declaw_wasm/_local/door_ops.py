"""Every door op a guest may ask for, by name: the declarations, gathered from beside their
handlers (doors.py says where each lives). For tests and docs; the dispatcher gets each op's
declaration with its handler (doors.py's routes), so nothing at run time imports this."""

from __future__ import annotations

from .._egress.ops import OPS as NET_OPS
from .._media.door import JPEG_OPS
from .._packages.install_op import PIP_INSTALL
from .._wasm.door import Op
from .._wasm.shims import EXIT
from .._wasm.timers import TIMER
from .kernel import KERNEL_OPS
from .processes import COMMAND_OPS
from .tools import TOOL_OPS


def _gather() -> dict[str, Op]:
    found: dict[str, Op] = {}
    for op in [EXIT, TIMER, *COMMAND_OPS, PIP_INSTALL, *JPEG_OPS, *KERNEL_OPS, *TOOL_OPS, *NET_OPS.values()]:
        assert op.name not in found, f"{op.name} is declared twice"
        found[op.name] = op
    return found


OPS = _gather()
