"""Routing named routines of the runtime module to the host, by rewriting the routines themselves.

For each routed routine (the guest's BLAS: `_blas/routines.py` names them), the module gets:

- the routine's original body appended as a new last function (same type), so nothing is
  renumbered: every call site, every table slot and every export keeps its index;
- a new small body at the routine's own index, which first multiplies its size arguments (read
  through their pointers for a Fortran routine) and, under the routine's threshold, calls the
  original body at once (a small call never leaves the guest); otherwise it stores its arguments
  in a frame it takes
  from the guest's shadow stack (global 0, the stack pointer), asks the host through the
  module's existing `host.call` import — with a request length no msgpack frame has
  (`ROUTE_FLAG | route id`) — and unless the host answers 1 (done), calls the original body
  with the same arguments.

Nothing else changes: every other function body, the data segments (the warm image's memory),
the tables and the exports stay byte for byte as they were; the name section only gains the
copies' names (`<name>.guest`). The result is validated by the engine before it is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, NamedTuple, Sequence

from . import binary as wb

ROUTE_FLAG = 0x8000_0000  # `host.call`'s length argument: bit 31 set is a route request
I32, I64, F32, F64 = 0x7F, 0x7E, 0x7D, 0x7C
_STORE = {I32: (0x36, 2), I64: (0x37, 3), F32: (0x38, 2), F64: (0x39, 3)}  # op, log2 align
SLOT = 8  # every argument has an 8-byte slot in the frame
BODY_VERSION = "router-body-v2"  # what the new bodies look like (a warm image key part)


class Route(NamedTuple):
    """What to route: the routine's name, its route id (what the host is told), the parameters
    whose product is its size, whether those are pointers to the values, and the smallest size
    the host is asked about."""

    route: int
    name: str
    sizes: tuple[int, ...] = ()
    by_pointer: bool = True
    threshold: int = 0


class RoutingError(ValueError):
    """The module cannot be routed as asked (a name missing or ambiguous, an unexpected type)."""


@dataclass(frozen=True)
class FuncType:
    params: tuple[int, ...]
    results: tuple[int, ...]


def _types(module: wb.Module) -> list[FuncType]:
    sec = module.section(wb.TYPE)
    if sec is None:
        raise RoutingError("the module has no type section")
    buf = sec.payload
    count, pos = wb.read_u(buf, 0)
    out = []
    for _ in range(count):
        if buf[pos] != 0x60:
            raise RoutingError(f"unsupported type form 0x{buf[pos]:02x}")
        n, pos = wb.read_u(buf, pos + 1)
        params = tuple(buf[pos:pos + n])
        pos += n
        n, pos = wb.read_u(buf, pos)
        results = tuple(buf[pos:pos + n])
        pos += n
        out.append(FuncType(params, results))
    return out


def _function_imports(module: wb.Module) -> list[tuple[str, str, int]]:
    """(module, name, type index) of each imported function, in index order."""
    sec = module.section(wb.IMPORT)
    if sec is None:
        return []
    buf = sec.payload
    count, pos = wb.read_u(buf, 0)
    out = []
    for _ in range(count):
        mod, pos = wb.read_name(buf, pos)
        field, pos = wb.read_name(buf, pos)
        kind = buf[pos]
        pos += 1
        if kind == 0:
            index, pos = wb.read_u(buf, pos)
            out.append((mod, field, index))
        elif kind == 1:
            flags = buf[pos + 1]
            _, pos = wb.read_u(buf, pos + 2)
            if flags & 1:
                _, pos = wb.read_u(buf, pos)
        elif kind == 2:
            flags = buf[pos]
            _, pos = wb.read_u(buf, pos + 1)
            if flags & 1:
                _, pos = wb.read_u(buf, pos)
        elif kind == 3:
            pos += 2
        else:
            raise RoutingError(f"unsupported import kind {kind}")
    return out


def _function_types(module: wb.Module) -> list[int]:
    sec = module.section(wb.FUNCTION)
    if sec is None:
        raise RoutingError("the module has no function section")
    buf = sec.payload
    count, pos = wb.read_u(buf, 0)
    out = []
    for _ in range(count):
        index, pos = wb.read_u(buf, pos)
        out.append(index)
    return out


def function_bodies(module: wb.Module) -> list[bytes]:
    """Each defined function's body (its locals and code, without the size prefix)."""
    sec = module.section(wb.CODE)
    if sec is None:
        raise RoutingError("the module has no code section")
    buf = sec.payload
    view = memoryview(buf)
    count, pos = wb.read_u(buf, 0)
    out = []
    for _ in range(count):
        size, pos = wb.read_u(buf, pos)
        out.append(bytes(view[pos:pos + size]))
        pos += size
    if pos != len(buf):
        raise RoutingError("the code section has trailing bytes")
    return out


def names_by_function(module: wb.Module) -> dict[str, list[int]]:
    """Every function name of the name section → all the indices that carry it."""
    sec = module.section(wb.CUSTOM, "name")
    if sec is None:
        raise RoutingError("the module has no name section")
    buf = sec.payload
    _, pos = wb.read_name(buf, 0)
    names: dict[str, list[int]] = {}
    while pos < len(buf):
        kind = buf[pos]
        size, pos = wb.read_u(buf, pos + 1)
        end = pos + size
        if kind == 1:
            count, p = wb.read_u(buf, pos)
            for _ in range(count):
                index, p = wb.read_u(buf, p)
                fname, p = wb.read_name(buf, p)
                names.setdefault(fname, []).append(index)
        pos = end
    return names


def _add_function_names(module: wb.Module, added: Sequence[tuple[int, str]]) -> None:
    """Append (index, name) pairs, all above every named index, to the function-names part."""
    sec = module.section(wb.CUSTOM, "name")
    assert sec is not None
    buf = sec.payload
    _, pos = wb.read_name(buf, 0)
    out = [bytes(buf[:pos])]
    while pos < len(buf):
        kind = buf[pos]
        size, body = wb.read_u(buf, pos + 1)
        end = body + size
        if kind == 1:
            count, p = wb.read_u(buf, body)
            entries = bytes(buf[p:end]) + b"".join(wb.u(i) + wb.name(n) for i, n in added)
            part = wb.u(count + len(added)) + entries
            out.append(bytes([1]) + wb.u(len(part)) + part)
        else:
            out.append(bytes(buf[pos:end]))
        pos = end
    sec.payload = b"".join(out)


def _router_body(ftype: FuncType, host_call: int, original: int, spec: Route) -> bytes:
    nparams = len(ftype.params)
    frame = (nparams * SLOT + 15) & ~15
    local = nparams  # the one local: the frame's address
    code = bytearray()
    if spec.sizes:  # product of the sizes (i64: no overflow) < threshold: the original, at once
        code += b"\x42\x01"  # i64.const 1
        for i in spec.sizes:
            code += b"\x20" + wb.u(i) + (b"\x28\x02\x00" if spec.by_pointer else b"")  # local.get; i32.load
            code += b"\xac\x7e"  # i64.extend_i32_s; i64.mul
        code += b"\x42" + wb.s(spec.threshold) + b"\x53\x04\x40"  # i64.const; i64.lt_s; if
        for i in range(nparams):
            code += b"\x20" + wb.u(i)
        code += b"\x10" + wb.u(original) + b"\x0f\x0b"  # call original; return; end
    code += b"\x23\x00" + b"\x41" + wb.s(frame) + b"\x6b"  # global.get sp; i32.const; i32.sub
    code += b"\x22" + wb.u(local) + b"\x24\x00"  # local.tee frame; global.set sp
    for i, valtype in enumerate(ftype.params):
        op, align = _STORE[valtype]
        code += b"\x20" + wb.u(local) + b"\x20" + wb.u(i) + bytes([op]) + wb.u(align) + wb.u(i * SLOT)
    # host.call(frame, ROUTE_FLAG | route, 0, 0) -> 1: done by the host, 0: run the original
    code += b"\x20" + wb.u(local) + b"\x41" + wb.s((ROUTE_FLAG | spec.route) - (1 << 32))
    code += b"\x41\x00\x41\x00" + b"\x10" + wb.u(host_call)
    code += b"\x20" + wb.u(local) + b"\x41" + wb.s(frame) + b"\x6a\x24\x00"  # sp = frame + size
    code += b"\x41\x01\x47\x04\x40"  # i32.const 1; i32.ne; if (anything but 1: the guest's own)
    for i in range(nparams):
        code += b"\x20" + wb.u(i)
    code += b"\x10" + wb.u(original) + b"\x0b\x0b"  # call original; end if; end
    body = wb.u(1) + wb.u(1) + bytes([I32]) + bytes(code)
    return body


def route_functions(data: bytes, routes: Iterable[Route]) -> tuple[bytes, list[str]]:
    """`route_module` on a module's bytes: the new bytes and what was skipped."""
    module = wb.Module.parse(data)
    skipped = route_module(module, routes)
    return module.encode(), skipped


def route_module(module: wb.Module, routes: Iterable[Route]) -> list[str]:
    """Route each routine to the host (module docstring), in place.

    A name the name section lacks, or has for more than one function, is skipped (and said so
    in the returned list): which of two functions a caller means cannot be known. A module
    without the `host.call` import, or whose global 0 is not the stack pointer, or a routine
    that returns a value, raises RoutingError."""
    types = _types(module)
    imports = _function_imports(module)
    host_calls = [i for i, (mod, field, _) in enumerate(imports) if (mod, field) == ("host", "call")]
    if len(host_calls) != 1:
        raise RoutingError("the module does not import host.call exactly once")
    host_call = host_calls[0]
    if types[imports[host_call][2]] != FuncType((I32,) * 4, (I32,)):
        raise RoutingError("host.call has an unexpected type")
    if module.imported_count(3) != 0:
        raise RoutingError("the module imports globals: global 0 is not its stack pointer")
    globals_ = module.globals()
    if not globals_ or globals_[0][:2] != (I32, True):
        raise RoutingError("global 0 is not a mutable i32 (the stack pointer)")
    ftypes = _function_types(module)
    bodies = function_bodies(module)
    if len(ftypes) != len(bodies):
        raise RoutingError("the function and code sections disagree")
    names = names_by_function(module)
    first_defined = len(imports)
    added_types: list[int] = []
    added_bodies: list[bytes] = []
    added_names: list[tuple[int, str]] = []
    skipped: list[str] = []
    for spec in routes:
        fname = spec.name
        indices = names.get(fname)
        if not indices:
            skipped.append(f"{fname}: not in the module")
            continue
        if len(indices) > 1:
            skipped.append(f"{fname}: names {len(indices)} functions")
            continue
        index = indices[0]
        if index < first_defined:
            skipped.append(f"{fname}: an import")
            continue
        at = index - first_defined
        ftype = types[ftypes[at]]
        if ftype.results:
            raise RoutingError(f"{fname!r} returns a value")
        if any(t not in _STORE for t in ftype.params):
            raise RoutingError(f"{fname!r} takes a parameter of an unsupported type")
        if any(not 0 <= i < len(ftype.params) or ftype.params[i] != I32 for i in spec.sizes):
            raise RoutingError(f"{fname!r}: a size parameter is not an i32 parameter")
        original = first_defined + len(bodies) + len(added_bodies)
        added_types.append(ftypes[at])
        added_bodies.append(bodies[at])
        added_names.append((original, f"{fname}.guest"))
        bodies[at] = _router_body(ftype, host_call, original, spec)
    if not added_bodies:
        return skipped
    ftypes += added_types
    bodies += added_bodies
    fsec = module.section(wb.FUNCTION)
    csec = module.section(wb.CODE)
    assert fsec is not None and csec is not None
    fsec.payload = wb.u(len(ftypes)) + b"".join(wb.u(t) for t in ftypes)
    csec.payload = wb.u(len(bodies)) + b"".join(wb.u(len(b)) + b for b in bodies)
    _add_function_names(module, added_names)
    return skipped
