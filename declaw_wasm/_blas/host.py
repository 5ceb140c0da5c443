"""A routed BLAS call, computed on the guest's memory in place by the host's BLAS — or declined.

The guest's new routine body (`_wasm/routing.py`) leaves its arguments in a frame of 8-byte
slots and calls `host.call(frame, ROUTE_FLAG | route id, 0, 0)`. Everything in that frame, and
everything it points to, is the guest's and hostile: `HostBlas.call` reads each argument with an
explicit bounds check, validates every dimension, leading dimension and increment as the
reference BLAS does (a call the reference would reject with `xerbla` is declined, so the guest's
own routine reports it), and checks — with Python integers — that the last byte of every operand
lies inside the guest's memory before any work starts. Only then are numpy views made onto that
memory (numpy checks each view against the buffer a second time) and the call handed to SciPy's
wrappers of the host's BLAS (`scipy.linalg.blas`), whose argument conventions are the BLAS's own.
A call that is small (under the measured thresholds), malformed, or arrives without numpy/SciPy on
the host is declined: the guest runs its own copy of the routine, as before routing existed.

Large calls run in blocks of independent columns (or rows) of the output, asking `stop()` between
blocks; a stopped call returns as done (the guest is being stopped: the deadline callback traps it
at its next instruction). Every BLAS thread the host uses is its BLAS's own pool, joined before
each wrapper returns, and sized once per process (`configure`).
"""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .routines import ROUTINES, Routine

SLOT = 8
PARAMS = {("gemm", False): 13, ("syrk", False): 10, ("symm", False): 12, ("trsm", False): 11,
          ("trmm", False): 11, ("gemv", False): 11,
          ("gemm", True): 14, ("syrk", True): 11, ("gemv", True): 12,
          ("gesv", False): 8, ("getrf", False): 6, ("potrf", False): 5, ("gesdd", False): 14,
          ("syevd", False): 11}
# CBLAS enums (cblas.h)
ROW_MAJOR, COL_MAJOR = 101, 102
CBLAS_TRANS = {111: "N", 112: "T", 113: "C"}
CBLAS_UPLO = {121: "U", 122: "L"}
BLOCK_MADDS = 1 << 30  # multiply-adds between two stop checks (~0.1–0.3 s on one core)
# A LAPACK driver runs whole (it cannot be split): a larger one stays in the guest, where a kill
# or deadline stops it at once. ~0.1–0.5 s of host work.
MAX_UNSPLIT_MADDS = 1 << 31


class Declined(Exception):
    """The host will not compute this call: the guest's own routine runs."""


@dataclass
class Outcome:
    done: bool
    madds: int = 0  # multiply-adds computed (what the call is charged for)
    seconds: float = 0.0  # wall time on the host
    threads: int = 1


@dataclass(frozen=True)
class Thresholds:
    """The smallest calls the host takes (in multiply-adds): smaller ones stay in the guest,
    where a call costs no round trip (~10–15 µs here). Measured (docs/compute.md): a square
    `dgemm` costs the same both ways near n = 40, a square `dgemv` near n = 128."""

    level3: int = 40 ** 3
    level2: int = 128 * 128


_lock = threading.Lock()
_libs: Optional[tuple[Any, Any, Any]] = None  # numpy, scipy.linalg.blas, scipy.linalg.lapack
_missing = False


def configure(threads: int) -> bool:
    """Import numpy and SciPy (once) and size the host BLAS's thread pool to `threads` for the
    whole process (OpenBLAS's pool is process-wide: it is a budget all sandboxes share). False
    when the `blas` extra is not installed (then every call is declined)."""
    global _libs, _missing
    with _lock:
        if _libs is not None or _missing:
            return _libs is not None
        try:
            import numpy
            import scipy.linalg.blas as fblas
            import scipy.linalg.lapack as flapack
        except ImportError:
            _missing = True
            return False
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=max(1, threads), user_api="blas")
        except ImportError:
            pass
        _libs = (numpy, fblas, flapack)
        return True


class _Memory:
    """Bounds-checked reads of the guest's memory, and numpy views onto it."""

    def __init__(self, base: int, size: int) -> None:
        self.size = size
        self.raw = (ctypes.c_ubyte * size).from_address(base)

    def read(self, fmt: str, ptr: int) -> Any:
        if not (0 <= ptr and ptr + struct.calcsize(fmt) <= self.size):
            raise Declined(f"an argument at {ptr} lies outside the guest's memory")
        return struct.unpack_from(fmt, self.raw, ptr)[0]


def _fits(size: int, ptr: int, last_element: int, itemsize: int) -> bool:
    return 0 <= ptr and ptr + (last_element + 1) * itemsize <= size


class HostBlas:
    """One sandbox's router: thresholds and how many host threads its calls may use."""

    def __init__(self, threads: int, thresholds: Thresholds = Thresholds()) -> None:
        self.threads = threads
        self.thresholds = thresholds

    def call(self, base: int, size: int, frame: int, route: int, stop: Callable[[], bool]) -> Outcome:
        """Compute routed call `route` whose arguments are at `frame`, or decline (done False)."""
        if not 0 <= route < len(ROUTINES):
            return Outcome(False)
        routine = ROUTINES[route]
        nparams = PARAMS[(routine.family, routine.cblas)]
        if not (0 <= frame and frame + nparams * SLOT <= size):
            return Outcome(False)
        if not configure(self.threads):
            return Outcome(False)
        assert _libs is not None
        start = time.monotonic()
        try:
            call = _Call(_libs, _Memory(base, size), frame, routine, self.thresholds, stop)
            madds = call.run()
        except Declined:
            return Outcome(False)
        return Outcome(True, madds, time.monotonic() - start, self.threads)


class _Call:
    """One call: its arguments read and validated (`Declined` on anything the reference BLAS
    would reject, or that reaches outside the guest's memory), then computed."""

    def __init__(self, libs: tuple[Any, Any, Any], memory: _Memory, frame: int, routine: Routine,
                 thresholds: Thresholds, stop: Callable[[], bool]) -> None:
        self.np, self.fblas, self.flapack = libs
        self.memory = memory
        self.frame = frame
        self.routine = routine
        self.thresholds = thresholds
        self.stop = stop
        self.dtype = self.np.dtype({"s": "float32", "d": "float64", "c": "complex64",
                                    "z": "complex128"}[routine.precision])
        self.complex = routine.precision in "cz"

    # -- arguments ------------------------------------------------------------------------------
    def slot_i32(self, i: int) -> int:
        return int(self.memory.read("<i", self.frame + i * SLOT))

    def slot_ptr(self, i: int) -> int:
        return int(self.memory.read("<I", self.frame + i * SLOT))

    def int_arg(self, i: int) -> int:
        """An integer argument: a value (CBLAS) or a pointer to one (Fortran)."""
        return self.slot_i32(i) if self.routine.cblas else int(self.memory.read("<i", self.slot_ptr(i)))

    def char_arg(self, i: int) -> str:
        """A Fortran character argument (a pointer to one byte), upper-cased."""
        return chr(self.memory.read("<B", self.slot_ptr(i))).upper()

    def scalar_at(self, ptr: int) -> complex | float:
        p = self.routine.precision
        if p == "s":
            return float(self.memory.read("<f", ptr))
        if p == "d":
            return float(self.memory.read("<d", ptr))
        fmt = "<f" if p == "c" else "<d"
        half = 4 if p == "c" else 8
        return complex(self.memory.read(fmt, ptr), self.memory.read(fmt, ptr + half))

    def scalar_arg(self, i: int) -> complex | float:
        """alpha/beta: a pointer to the scalar, except CBLAS's real ones, passed by value."""
        if self.routine.cblas and self.routine.precision == "s":
            return float(self.memory.read("<f", self.frame + i * SLOT))
        if self.routine.cblas and self.routine.precision == "d":
            return float(self.memory.read("<d", self.frame + i * SLOT))
        return self.scalar_at(self.slot_ptr(i))

    def enum(self, i: int, table: dict[int, str]) -> str:
        value = self.slot_i32(i)
        if value not in table:
            raise Declined(f"argument {i} is {value}, not one of {sorted(table)}")
        return table[value]

    def order(self) -> bool:
        """CBLAS's order argument: True for row-major."""
        value = self.slot_i32(0)
        if value not in (ROW_MAJOR, COL_MAJOR):
            raise Declined("bad order")
        return value == ROW_MAJOR

    # -- operands -------------------------------------------------------------------------------
    def matrix(self, ptr: int, rows: int, cols: int, ld: int) -> Any:
        """The column-major rows×cols matrix at `ptr` with leading dimension `ld`, as a view."""
        if ld < max(1, rows):
            raise Declined("leading dimension smaller than the rows")
        isz = self.dtype.itemsize
        last = (rows - 1) + (cols - 1) * ld
        if not _fits(self.memory.size, ptr, last, isz):
            raise Declined("a matrix reaches outside the guest's memory")
        return self.np.ndarray((rows, cols), self.dtype, buffer=self.memory.raw, offset=ptr,
                               strides=(isz, ld * isz))

    def vector(self, ptr: int, n: int, inc: int) -> Any:
        if inc == 0:
            raise Declined("zero increment")
        isz = self.dtype.itemsize
        span = (n - 1) * abs(inc)
        if not _fits(self.memory.size, ptr, span, isz):
            raise Declined("a vector reaches outside the guest's memory")
        first = ptr if inc > 0 else ptr + span * isz  # BLAS: a negative increment walks backwards
        return self.np.ndarray((n,), self.dtype, buffer=self.memory.raw, offset=first, strides=(inc * isz,))

    def ints(self, ptr: int, n: int) -> Any:
        """n int32s at `ptr` (pivots, info), as a view."""
        if not _fits(self.memory.size, ptr, max(n, 1) - 1, 4):
            raise Declined("an integer array reaches outside the guest's memory")
        return self.np.ndarray((n,), self.np.int32, buffer=self.memory.raw, offset=ptr)

    def wrapper(self, family: str) -> Any:
        return getattr(self.fblas, self.routine.precision + family)

    def lapack(self, family: str) -> Any:
        return getattr(self.flapack, self.routine.precision + family)

    def unsplit(self, madds: int) -> None:
        self.enough(madds)
        if madds > MAX_UNSPLIT_MADDS:
            raise Declined("too large to run without a stop check: the guest computes it")

    def check_trans(self, trans: str, allowed: str) -> int:
        if trans == "C" and not self.complex and "C" in allowed:
            return 1  # real: conjugate transpose is transpose
        if trans not in allowed:
            raise Declined(f"bad transpose {trans!r}")
        return "NTC".index(trans)

    def enough(self, madds: int, level3: bool = True) -> None:
        if madds < (self.thresholds.level3 if level3 else self.thresholds.level2) or madds <= 0:
            raise Declined("small: the guest computes it")

    # -- the routines ---------------------------------------------------------------------------
    def run(self) -> int:
        return int(getattr(self, "_" + self.routine.family)())

    def _gemm(self) -> int:
        if self.routine.cblas:  # a row-major call is the column-major one of the transposes
            row = self.order()
            ta, tb = self.enum(1, CBLAS_TRANS), self.enum(2, CBLAS_TRANS)
            m, n, k = self.slot_i32(3), self.slot_i32(4), self.slot_i32(5)
            alpha, a, lda = self.scalar_arg(6), self.slot_ptr(7), self.slot_i32(8)
            b, ldb, beta = self.slot_ptr(9), self.slot_i32(10), self.scalar_arg(11)
            c, ldc = self.slot_ptr(12), self.slot_i32(13)
            if row:
                ta, tb, m, n, a, lda, b, ldb = tb, ta, n, m, b, ldb, a, lda
        else:
            ta, tb = self.char_arg(0), self.char_arg(1)
            m, n, k = self.int_arg(2), self.int_arg(3), self.int_arg(4)
            alpha, a, lda = self.scalar_arg(5), self.slot_ptr(6), self.int_arg(7)
            b, ldb, beta = self.slot_ptr(8), self.int_arg(9), self.scalar_arg(10)
            c, ldc = self.slot_ptr(11), self.int_arg(12)
        trans_a, trans_b = self.check_trans(ta, "NTC"), self.check_trans(tb, "NTC")
        if min(m, n, k) < 0:
            raise Declined("negative dimension")
        self.enough(m * n * k)
        A = self.matrix(a, m if trans_a == 0 else k, k if trans_a == 0 else m, lda)
        B = self.matrix(b, k if trans_b == 0 else n, n if trans_b == 0 else k, ldb)
        C = self.matrix(c, m, n, ldc)
        A, B = self.np.asfortranarray(A), self.np.asfortranarray(B)  # copied once if strided
        gemm = self.wrapper("gemm")
        step = max(1, BLOCK_MADDS // max(1, m * k))
        for j0 in range(0, n, step):
            if self.stop():
                break
            j1 = min(n, j0 + step)
            Bj = B[:, j0:j1] if trans_b == 0 else B[j0:j1, :]
            Cj = C[:, j0:j1]
            out = gemm(alpha, A, Bj, beta, Cj, trans_a=trans_a, trans_b=trans_b, overwrite_c=1)
            if out is not Cj:
                Cj[...] = out
        return m * n * k

    def _syrk(self) -> int:
        if self.routine.cblas:
            row = self.order()
            uplo, trans = self.enum(1, CBLAS_UPLO), self.enum(2, CBLAS_TRANS)
            n, k = self.slot_i32(3), self.slot_i32(4)
            alpha, a, lda = self.scalar_arg(5), self.slot_ptr(6), self.slot_i32(7)
            beta, c, ldc = self.scalar_arg(8), self.slot_ptr(9), self.slot_i32(10)
            if row:  # C^T = (A^T)^T-style: flip the triangle and the transpose
                uplo = "L" if uplo == "U" else "U"
                if trans == "C" and self.complex:
                    raise Declined("syrk takes no conjugate transpose")
                trans = "T" if trans == "N" else "N"
        else:
            uplo, trans = self.char_arg(0), self.char_arg(1)
            n, k = self.int_arg(2), self.int_arg(3)
            alpha, a, lda = self.scalar_arg(4), self.slot_ptr(5), self.int_arg(6)
            beta, c, ldc = self.scalar_arg(7), self.slot_ptr(8), self.int_arg(9)
        if uplo not in "UL" or len(uplo) != 1:
            raise Declined("bad uplo")
        t = self.check_trans(trans, "NT" if self.complex else "NTC")
        if min(n, k) < 0:
            raise Declined("negative dimension")
        self.enough(n * n * k // 2 + 1)
        A = self.np.asfortranarray(self.matrix(a, n if t == 0 else k, k if t == 0 else n, lda))
        C = self.matrix(c, n, n, ldc)
        if self.stop():
            return 0
        out = self.wrapper("syrk")(alpha, A, beta, C, trans=t, lower=int(uplo == "L"), overwrite_c=1)
        if out is not C:
            C[...] = out  # the untouched triangle comes back as it was: syrk leaves it
        return n * n * k // 2

    def _symm(self) -> int:
        side, uplo = self.char_arg(0), self.char_arg(1)
        m, n = self.int_arg(2), self.int_arg(3)
        alpha, a, lda = self.scalar_arg(4), self.slot_ptr(5), self.int_arg(6)
        b, ldb, beta = self.slot_ptr(7), self.int_arg(8), self.scalar_arg(9)
        c, ldc = self.slot_ptr(10), self.int_arg(11)
        if side not in ("L", "R") or uplo not in ("U", "L") or min(m, n) < 0:
            raise Declined("bad side, uplo or dimension")
        ka = m if side == "L" else n
        self.enough(m * n * ka)
        A = self.np.asfortranarray(self.matrix(a, ka, ka, lda))
        B = self.matrix(b, m, n, ldb)
        C = self.matrix(c, m, n, ldc)
        if self.stop():
            return 0
        out = self.wrapper("symm")(alpha, A, B, beta, C, side=int(side == "R"), lower=int(uplo == "L"),
                                   overwrite_c=1)
        if out is not C:
            C[...] = out
        return m * n * ka

    def _triangular(self, family: str) -> int:
        side, uplo, trans, diag = (self.char_arg(i) for i in range(4))
        m, n = self.int_arg(4), self.int_arg(5)
        alpha, a, lda = self.scalar_arg(6), self.slot_ptr(7), self.int_arg(8)
        b, ldb = self.slot_ptr(9), self.int_arg(10)
        if side not in ("L", "R") or uplo not in ("U", "L") or diag not in ("U", "N") or min(m, n) < 0:
            raise Declined("bad side, uplo, diag or dimension")
        t = self.check_trans(trans, "NTC")
        ka = m if side == "L" else n
        self.enough(m * n * ka // 2 + 1)
        A = self.np.asfortranarray(self.matrix(a, ka, ka, lda))
        B = self.matrix(b, m, n, ldb)
        fn = self.wrapper(family)
        # side L: B's columns are independent; side R: its rows
        step = max(1, BLOCK_MADDS // max(1, ka * ka))
        for i0 in range(0, n if side == "L" else m, step):
            if self.stop():
                break
            Bi = B[:, i0:i0 + step] if side == "L" else B[i0:i0 + step, :]
            out = fn(alpha, A, Bi, side=int(side == "R"), lower=int(uplo == "L"), trans_a=t,
                     diag=int(diag == "U"), overwrite_b=1)
            if out is not Bi:
                Bi[...] = out
        return m * n * ka // 2

    def _trsm(self) -> int:
        return self._triangular("trsm")

    def _trmm(self) -> int:
        return self._triangular("trmm")

    def _gemv(self) -> int:
        if self.routine.cblas:
            row = self.order()
            trans = self.enum(1, CBLAS_TRANS)
            m, n = self.slot_i32(2), self.slot_i32(3)
            alpha, a, lda = self.scalar_arg(4), self.slot_ptr(5), self.slot_i32(6)
            x, incx = self.slot_ptr(7), self.slot_i32(8)
            beta, y, incy = self.scalar_arg(9), self.slot_ptr(10), self.slot_i32(11)
            conj_row = False
            if row:  # row-major A (m×n) is column-major A^T (n×m)
                m, n = n, m
                if trans == "C" and self.complex:
                    conj_row = True  # y = conj(A)·x: not a plain BLAS transpose
                trans = "T" if trans == "N" else "N"
            if conj_row:
                raise Declined("row-major conjugate transpose")
        else:
            trans = self.char_arg(0)
            m, n = self.int_arg(1), self.int_arg(2)
            alpha, a, lda = self.scalar_arg(3), self.slot_ptr(4), self.int_arg(5)
            x, incx = self.slot_ptr(6), self.int_arg(7)
            beta, y, incy = self.scalar_arg(8), self.slot_ptr(9), self.int_arg(10)
        t = self.check_trans(trans, "NTC")
        if min(m, n) < 0:
            raise Declined("negative dimension")
        self.enough(m * n, level3=False)
        A = self.matrix(a, m, n, lda)
        lx, ly = (n, m) if t == 0 else (m, n)
        X = self.vector(x, lx, incx)
        Y = self.vector(y, ly, incy)
        out = self.wrapper("gemv")(alpha, A, X, beta, Y, trans=t, overwrite_y=1)
        if out is not Y:
            Y[...] = out
        return m * n

    # -- LAPACK drivers (run whole: bounded by MAX_UNSPLIT_MADDS) -----------------------------------
    def _gesv(self) -> int:
        n, nrhs = self.int_arg(0), self.int_arg(1)
        a, lda, ipiv = self.slot_ptr(2), self.int_arg(3), self.slot_ptr(4)
        b, ldb, info = self.slot_ptr(5), self.int_arg(6), self.slot_ptr(7)
        if min(n, nrhs) < 0:
            raise Declined("negative dimension")
        madds = n * n * n // 3 + n * n * nrhs
        self.unsplit(madds)
        A, B = self.matrix(a, n, n, lda), self.matrix(b, n, nrhs, ldb)
        piv, code = self.ints(ipiv, n), self.ints(info, 1)
        lu, p, x, status = self.lapack("gesv")(A, B, overwrite_a=1, overwrite_b=1)
        if status < 0:
            raise Declined("LAPACK refused an argument")  # nothing was written: it checks first
        self._store(A, lu)
        self._store(B, x)
        piv[...] = p + 1  # SciPy's pivots count from 0, LAPACK's from 1
        code[0] = status
        return madds

    def _getrf(self) -> int:
        m, n, a, lda = self.int_arg(0), self.int_arg(1), self.slot_ptr(2), self.int_arg(3)
        ipiv, info = self.slot_ptr(4), self.slot_ptr(5)
        if min(m, n) < 0:
            raise Declined("negative dimension")
        k = min(m, n)
        madds = m * n * k - (m + n) * k * k // 2 + k * k * k // 3
        self.unsplit(max(madds, 1))
        A = self.matrix(a, m, n, lda)
        piv, code = self.ints(ipiv, k), self.ints(info, 1)
        lu, p, status = self.lapack("getrf")(A, overwrite_a=1)
        if status < 0:
            raise Declined("LAPACK refused an argument")
        self._store(A, lu)
        piv[...] = p + 1
        code[0] = status
        return madds

    def _potrf(self) -> int:
        uplo, n, a, lda, info = self.char_arg(0), self.int_arg(1), self.slot_ptr(2), self.int_arg(3), self.slot_ptr(4)
        if uplo not in ("U", "L") or n < 0:
            raise Declined("bad uplo or dimension")
        madds = n * n * n // 6
        self.unsplit(madds)
        A, code = self.matrix(a, n, n, lda), self.ints(info, 1)
        c, status = self.lapack("potrf")(A, lower=int(uplo == "L"), clean=0, overwrite_a=1)
        if status < 0:
            raise Declined("LAPACK refused an argument")
        self._store(A, c)
        code[0] = status
        return madds

    def _gesdd(self) -> int:
        jobz, m, n = self.char_arg(0), self.int_arg(1), self.int_arg(2)
        a, lda, s_ptr = self.slot_ptr(3), self.int_arg(4), self.slot_ptr(5)
        u, ldu, vt, ldvt = self.slot_ptr(6), self.int_arg(7), self.slot_ptr(8), self.int_arg(9)
        lwork, info = self.int_arg(11), self.slot_ptr(13)
        if jobz not in ("N", "S", "A") or min(m, n) < 0:
            raise Declined("bad jobz (O is the guest's) or dimension")
        mn = min(m, n)
        # A workspace query (-1) is the guest's (its LAPACK's answer sizes its own call). The host
        # uses none of the guest's workspace, so a real call's size is not checked against
        # LAPACK's path-dependent minimum: a call too short for the guest's LAPACK (INFO = -12
        # there) is computed here (docs/compute.md says so).
        if lwork < 1:
            raise Declined("a workspace query")
        madds = 4 * m * n * mn
        self.unsplit(madds)
        A = self.matrix(a, m, n, lda)
        S = self.vector(s_ptr, mn, 1) if mn else None
        U = VT = None
        if jobz != "N":
            U = self.matrix(u, m, m if jobz == "A" else mn, ldu)
            VT = self.matrix(vt, n if jobz == "A" else mn, n, ldvt)
        code = self.ints(info, 1)
        if mn == 0:
            raise Declined("empty")
        uu, ss, vv, status = self.lapack("gesdd")(A, compute_uv=int(jobz != "N"),
                                                  full_matrices=int(jobz == "A"), overwrite_a=1)
        if status < 0:
            raise Declined("LAPACK refused an argument")
        assert S is not None
        S[...] = ss
        if U is not None and VT is not None:
            U[...] = uu
            VT[...] = vv
        code[0] = status
        return madds

    def _syevd(self) -> int:
        jobz, uplo, n = self.char_arg(0), self.char_arg(1), self.int_arg(2)
        a, lda, w = self.slot_ptr(3), self.int_arg(4), self.slot_ptr(5)
        lwork, liwork, info = self.int_arg(7), self.int_arg(9), self.slot_ptr(10)
        if jobz not in ("N", "V") or uplo not in ("U", "L") or n < 0:
            raise Declined("bad jobz, uplo or dimension")
        if lwork < 1 or liwork < 1:  # a workspace query is the guest's (as for gesdd)
            raise Declined("a workspace query")
        madds = 3 * n * n * n if jobz == "V" else n * n * n
        self.unsplit(madds)
        A, W, code = self.matrix(a, n, n, lda), self.vector(w, n, 1), self.ints(info, 1)
        vals, vecs, status = self.lapack("syevd")(A, compute_v=int(jobz == "V"), lower=int(uplo == "L"))
        if status < 0:
            raise Declined("LAPACK refused an argument")
        W[...] = vals
        if jobz == "V":
            A[...] = vecs
        code[0] = status
        return madds

    @staticmethod
    def _store(target: Any, value: Any) -> None:
        if value is not target:
            target[...] = value
