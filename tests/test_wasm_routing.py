"""The BLAS routing rewrite (`_wasm/routing.py`) on the real CPython-WASI module: it validates,
renumbers nothing, and changes nothing but the routed bodies (and adds their copies)."""

from __future__ import annotations

import pytest
import wasmtime

from declaw_wasm._blas.routines import ROUTINES
from declaw_wasm._wasm import binary as wb
from declaw_wasm._wasm.artifacts import ensure_artifacts
from declaw_wasm._wasm.routing import Route, function_bodies, names_by_function, route_functions
from declaw_wasm._wasm.warm_image import blas_routes

pytestmark = pytest.mark.guest  # needs the interpreter's files (not a guest)


@pytest.fixture(scope="session")
def guest_path() -> str:
    return "warm"  # no guest runs: one path is enough


@pytest.fixture(scope="module")
def module_bytes() -> bytes:
    return ensure_artifacts().module.read_bytes()


def test_the_routed_module_validates_and_only_the_routed_bodies_change(module_bytes: bytes) -> None:
    routed, skipped = route_functions(module_bytes, blas_routes())
    assert skipped == []
    wasmtime.Module.validate(wasmtime.Engine(), routed)
    before, after = wb.Module.parse(module_bytes), wb.Module.parse(routed)
    names = names_by_function(before)
    first = before.imported_count(0)
    targets = {names[r.name][0] - first for r in ROUTINES}
    old, new = function_bodies(before), function_bodies(after)
    assert len(new) == len(old) + len(targets)
    for i, body in enumerate(old):  # every other body byte for byte; the routed ones moved to the end
        assert (new[i] == body) != (i in targets)
    assert sorted(new[len(old):]) == sorted(old[i] for i in targets)
    for sid in (wb.DATA, wb.ELEMENT, wb.EXPORT, wb.GLOBAL, wb.MEMORY, wb.IMPORT, wb.TYPE, wb.TABLE):
        a, b = before.section(sid), after.section(sid)
        assert (a.payload if a else None) == (b.payload if b else None), sid  # the memory image untouched
    after_names = names_by_function(after)
    for r in ROUTINES:
        assert after_names[r.name] == names[r.name]  # nothing renumbered
        assert len(after_names[f"{r.name}.guest"]) == 1


def test_a_name_given_to_two_functions_is_not_routed(module_bytes: bytes) -> None:
    module = wb.Module.parse(module_bytes)
    names = names_by_function(module)
    # rename `dgemv_` to `dgemm_` in the name section (same length): two functions named dgemm_
    sec = module.section(wb.CUSTOM, "name")
    assert sec is not None
    entry = wb.u(names["dgemv_"][0]) + wb.name("dgemv_")
    assert sec.payload.count(entry) == 1
    sec.payload = sec.payload.replace(entry, wb.u(names["dgemv_"][0]) + wb.name("dgemm_"))
    routed, skipped = route_functions(module.encode(), [Route(0, "dgemm_"), Route(1, "no_such_routine")])
    assert skipped == ["dgemm_: names 2 functions", "no_such_routine: not in the module"]
    assert function_bodies(wb.Module.parse(routed)) == function_bodies(module)
