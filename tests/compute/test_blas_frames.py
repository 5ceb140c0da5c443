"""The host side of routed BLAS calls against hostile frames (pure: no runtime).

A routed call's frame and everything it points to are the guest's. Here a ctypes buffer stands
in for the guest's linear memory (the host reads it the same way: base address and size), and
frames are written into it as the routed bodies would; the property is that a call either
computes exactly what the BLAS would, or declines — and never reads or writes a byte outside
the buffer (the guard zones around it stay as they were).
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from declaw_wasm._blas.host import HostBlas, Thresholds
from declaw_wasm._blas.routines import ROUTINES

pytest.importorskip("scipy.linalg.blas")

GUARD = 4096
SIZE = 1 << 20
ROUTE = {r.name: i for i, r in enumerate(ROUTINES)}


class Memory:
    """SIZE bytes of "guest memory" between two guard zones of 0xAB bytes."""

    def __init__(self) -> None:
        self.buf = (ctypes.c_ubyte * (SIZE + 2 * GUARD))()
        ctypes.memset(self.buf, 0xAB, GUARD)
        ctypes.memset(ctypes.addressof(self.buf) + GUARD + SIZE, 0xAB, GUARD)
        self.base = ctypes.addressof(self.buf) + GUARD
        self.top = 1024  # allocation cursor (offsets into guest memory)

    def alloc(self, data: bytes) -> int:
        at = self.top
        ctypes.memmove(self.base + at, data, len(data))
        self.top += (len(data) + 15) & ~15
        return at

    def read(self, at: int, n: int) -> bytes:
        return ctypes.string_at(self.base + at, n)

    def guards_intact(self) -> bool:
        raw = bytes(self.buf)
        return raw[:GUARD] == b"\xab" * GUARD and raw[GUARD + SIZE:] == b"\xab" * GUARD

    def frame(self, *slots: tuple[str, float | int]) -> int:
        return self.alloc(b"".join(struct.pack(fmt, v).ljust(8, b"\0") for fmt, v in slots))


def dgemm_frame(mem: Memory, ta: bytes, tb: bytes, m: int, n: int, k: int, a: int, lda: int, b: int,
                ldb: int, c: int, ldc: int, alpha: float = 1.0, beta: float = 0.0) -> int:
    p = [mem.alloc(ta), mem.alloc(tb), mem.alloc(struct.pack("<i", m)), mem.alloc(struct.pack("<i", n)),
         mem.alloc(struct.pack("<i", k)), mem.alloc(struct.pack("<d", alpha)), a,
         mem.alloc(struct.pack("<i", lda)), b, mem.alloc(struct.pack("<i", ldb)),
         mem.alloc(struct.pack("<d", beta)), c, mem.alloc(struct.pack("<i", ldc))]
    return mem.frame(*(("<I", v) for v in p))


ROUTER = HostBlas(threads=1, thresholds=Thresholds(level3=1, level2=1))


def never() -> bool:
    return False


def test_a_valid_fortran_dgemm_is_computed_in_place_as_the_blas_would() -> None:
    mem = Memory()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((5, 6))
    c0 = rng.standard_normal((9, 6))  # ldc 9 > m 7: rows 7, 8 of each column must stay
    pa, pb = mem.alloc(a.tobytes(order="F")), mem.alloc(b.tobytes(order="F"))
    pc = mem.alloc(c0.tobytes(order="F"))
    frame = dgemm_frame(mem, b"N", b"N", 7, 6, 5, pa, 7, pb, 5, pc, 9, alpha=2.0, beta=0.5)
    outcome = ROUTER.call(mem.base, SIZE, frame, ROUTE["dgemm_"], never)
    assert outcome.done and outcome.madds == 7 * 6 * 5
    c = np.frombuffer(mem.read(pc, c0.nbytes)).reshape((9, 6), order="F")
    expected = c0.copy()
    expected[:7] = 2.0 * a @ b + 0.5 * c0[:7]
    np.testing.assert_allclose(c, expected, rtol=1e-12)
    assert mem.guards_intact()


def test_a_beta_of_zero_ignores_what_c_held_as_the_blas_does() -> None:
    mem = Memory()
    a = np.ones((4, 4))
    pa = mem.alloc(a.tobytes(order="F"))
    pc = mem.alloc(np.full((4, 4), np.nan).tobytes(order="F"))
    outcome = ROUTER.call(mem.base, SIZE, dgemm_frame(mem, b"T", b"n", 4, 4, 4, pa, 4, pa, 4, pc, 4),
                          ROUTE["dgemm_"], never)
    assert outcome.done
    assert np.array_equal(np.frombuffer(mem.read(pc, 128)), np.full(16, 4.0))


@settings(max_examples=300, deadline=None)
@given(m=st.integers(-3, 40), n=st.integers(-3, 40), k=st.integers(-3, 40),
       lda=st.integers(-5, 2**31 - 1), ldb=st.integers(-5, 80), ldc=st.integers(-5, 80),
       a=st.integers(-2**31, 2**32 - 1), c=st.integers(0, SIZE + 64),
       ta=st.sampled_from([b"N", b"T", b"C", b"x", b"\0"]))
def test_a_hostile_dgemm_is_computed_within_memory_or_declined(m: int, n: int, k: int, lda: int, ldb: int,
                                                             ldc: int, a: int, c: int, ta: bytes) -> None:
    mem = Memory()
    pb = mem.alloc(np.ones(80 * 40).tobytes())
    frame = dgemm_frame(mem, ta, b"N", m, n, k, a & 0xFFFFFFFF, lda, pb, ldb, c & 0xFFFFFFFF, ldc)
    before = bytes(mem.buf)
    outcome = ROUTER.call(mem.base, SIZE, frame, ROUTE["dgemm_"], never)
    assert mem.guards_intact()
    if not outcome.done:
        assert bytes(mem.buf) == before  # a declined call wrote nothing
    else:  # what was computed lay inside memory, with dimensions the BLAS accepts
        rows_a = m if ta == b"N" else k
        assert min(m, n, k) > 0 and lda >= rows_a and ldb >= k and ldc >= m
        assert 0 <= c and c + ((m - 1) + (n - 1) * ldc + 1) * 8 <= SIZE


@settings(max_examples=200, deadline=None)
@given(route=st.integers(-5, len(ROUTINES) + 5), frame=st.integers(-16, SIZE + 16),
       junk=st.binary(min_size=0, max_size=160))
def test_any_frame_for_any_route_is_declined_or_stays_in_memory(route: int, frame: int, junk: bytes) -> None:
    mem = Memory()
    if 0 <= frame <= SIZE - len(junk):
        ctypes.memmove(mem.base + frame, junk, len(junk))
    outcome = ROUTER.call(mem.base, SIZE, frame, route, never)
    assert mem.guards_intact()
    assert outcome.done in (True, False)


def test_a_negative_increment_walks_the_vector_backwards() -> None:
    mem = Memory()
    rng = np.random.default_rng(2)
    a, x = rng.standard_normal((3, 4)), rng.standard_normal(4)
    pa, px = mem.alloc(a.tobytes(order="F")), mem.alloc(x.tobytes())
    py = mem.alloc(np.zeros(6).tobytes())  # y with increment -2: elements at 4, 2, 0
    p = [mem.alloc(b"N"), mem.alloc(struct.pack("<i", 3)), mem.alloc(struct.pack("<i", 4)),
         mem.alloc(struct.pack("<d", 1.0)), pa, mem.alloc(struct.pack("<i", 3)), px,
         mem.alloc(struct.pack("<i", 1)), mem.alloc(struct.pack("<d", 0.0)), py, mem.alloc(struct.pack("<i", -2))]
    outcome = ROUTER.call(mem.base, SIZE, mem.frame(*(("<I", v) for v in p)), ROUTE["dgemv_"], never)
    assert outcome.done
    y = np.frombuffer(mem.read(py, 48))
    np.testing.assert_allclose(y[[4, 2, 0]], a @ x, rtol=1e-12)
    assert y[1] == y[3] == y[5] == 0
    assert mem.guards_intact()


def test_a_stop_between_blocks_ends_the_call() -> None:
    from declaw_wasm._blas import host

    mem = Memory()
    n = 64
    pa = mem.alloc(np.ones((n, n)).tobytes())
    pc = mem.alloc(np.zeros((n, n)).tobytes())
    old = host.BLOCK_MADDS
    host.BLOCK_MADDS = n * n  # one column per block
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    try:
        outcome = ROUTER.call(mem.base, SIZE, dgemm_frame(mem, b"N", b"N", n, n, n, pa, n, pa, n, pc, n),
                              ROUTE["dgemm_"], stop)
    finally:
        host.BLOCK_MADDS = old
    assert outcome.done and len(calls) == 4  # three blocks ran, the fourth check stopped it
    c = np.frombuffer(mem.read(pc, n * n * 8)).reshape((n, n), order="F")
    assert (c[:, :3] == n).all() and (c[:, 3:] == 0).all()


@settings(max_examples=400, deadline=None)
@given(route=st.integers(0, len(ROUTINES) - 1), data=st.data())
def test_every_routine_with_hostile_arguments_stays_in_memory(route: int, data: st.DataObject) -> None:
    """Each slot holds what the routine might read there: a pointer to a small integer, to a
    character the BLAS knows, to a scalar, into a matrix-sized region, or any 32-bit value; the
    call computes within memory or declines, for every routine."""
    mem = Memory()
    matrix = mem.alloc(np.ones(40 * 40).tobytes())
    slots = []
    for _ in range(15):
        kind = data.draw(st.sampled_from(["int", "char", "scalar", "matrix", "raw", "enum"]))
        if kind == "int":
            slots.append(("<I", mem.alloc(struct.pack("<i", data.draw(st.integers(-3, 60))))))
        elif kind == "char":
            slots.append(("<I", mem.alloc(data.draw(st.sampled_from(list(b"NTCULRVSAO")))
                                          .to_bytes(1, "little"))))
        elif kind == "scalar":
            slots.append(("<I", mem.alloc(struct.pack("<dd", 1.5, -0.5))))
        elif kind == "matrix":
            slots.append(("<I", matrix + 8 * data.draw(st.integers(0, 1600))))
        elif kind == "enum":
            slots.append(("<i", data.draw(st.sampled_from([101, 102, 111, 112, 113, 121, 122, 0, 40, -1]))))
        else:
            slots.append(("<I", data.draw(st.integers(0, 2**32 - 1))))
    frame = mem.frame(*slots)
    ROUTER.call(mem.base, SIZE, frame, route, never)
    assert mem.guards_intact()
