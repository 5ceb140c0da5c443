"""A routed BLAS call, computed on the guest's memory in place by the host's BLAS — or declined.

The guest's new routine body (`_wasm/routing.py`) leaves its arguments in a frame of 8-byte
slots and calls `host.call(frame, ROUTE_FLAG | route id, 0, 0)`. Everything in that frame, and
everything it points to, is the guest's and hostile: `HostBlas.call` reads each argument with an
explicit bounds check, validates every dimension, leading dimension and increment as the
reference BLAS does (a call the reference would reject with `xerbla` is declined, so the guest's
own routine reports it), and checks — with Python integers — that the last byte of every operand
lies inside the guest's memory before any work starts. Only then is the host's routine called,
with scalars the host re-serialised into its own memory and the operands' addresses inside the
guest's memory: no copy of any operand.

The host's routines are SciPy's BLAS and LAPACK (the `blas` extra), taken from the function
pointers `scipy.linalg.cython_blas` and `cython_lapack` publish, and called through ctypes, which
releases the GIL for the call: a routed call never stalls the host's other threads (other
sandboxes, the door, the server). Their semantics are the Fortran BLAS's own, with one exception
made good here: with alpha = 0 the reference BLAS does not read A and B, while OpenBLAS's
small-matrix kernels multiply them by zero (NaN · 0), so that case is computed here with numpy.

A call that is small (under the thresholds), malformed, arrives without numpy/SciPy on the host,
or costs more than the instruction budget left is not computed: declined (the guest runs its own
copy of the routine) or, for the budget, answered as done with the budget emptied (the guest stops
at its next instruction, as it would have in its own routine). Level-3 calls run in blocks of
independent columns (or rows) of the output, asking `stop()` between blocks; a stopped call
returns as done (the deadline callback traps the guest at its next instruction). A LAPACK driver
runs whole, so it is routed only up to MAX_UNSPLIT_MADDS. The BLAS's threads are its own pool,
finished before each call returns, sized once per process (`configure`).
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
_REAL = {"s": ctypes.c_float, "d": ctypes.c_double, "c": ctypes.c_float, "z": ctypes.c_double}


class Declined(Exception):
    """The host will not compute this call: the guest's own routine runs."""


class OverBudget(Exception):
    """The call costs more instructions than the guest has left."""


@dataclass
class Outcome:
    done: bool
    madds: int = 0  # multiply-adds computed (what the call is charged for)
    seconds: float = 0.0  # wall time on the host
    threads: int = 1
    over_budget: bool = False  # not computed: the guest's instruction budget is to be emptied


@dataclass(frozen=True)
class Thresholds:
    """The smallest calls the host takes (in multiply-adds), a second filter behind the guest's
    own size check (`routines.py`): smaller ones stay in the guest, where a call costs no round
    trip (~10–15 µs here). Measured (docs/compute.md): a square `dgemm` costs the same both ways
    near n = 40, a square `dgemv` near n = 128."""

    level3: int = 40 ** 3
    level2: int = 128 * 128


class _Libraries:
    """numpy, and the host's BLAS and LAPACK routines as ctypes functions (made once each)."""

    def __init__(self) -> None:
        import numpy
        import scipy.linalg.cython_blas as cython_blas
        import scipy.linalg.cython_lapack as cython_lapack

        self.np = numpy
        self._capi = {**cython_lapack.__pyx_capi__, **cython_blas.__pyx_capi__}
        self._functions: dict[str, Any] = {}
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        self._get_name, self._get_pointer = get_name, get_pointer

    def function(self, name: str) -> Any:
        """SciPy's `name` (void, every argument a pointer), callable with addresses; ctypes
        releases the GIL while it runs."""
        found = self._functions.get(name)
        if found is None:
            capsule = self._capi[name]
            signature = self._get_name(capsule).decode()
            if not signature.startswith("void ("):
                raise RuntimeError(f"SciPy's {name} returns a value")
            nargs = signature.count(",") + 1
            address = self._get_pointer(capsule, self._get_name(capsule))
            found = self._functions[name] = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * nargs)(address)
        return found


_lock = threading.Lock()
_libs: Optional[_Libraries] = None
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
            libs = _Libraries()
        except (ImportError, AttributeError, KeyError):
            _missing = True
            return False
        _size_pool(max(1, threads))
        _libs = libs
        return True


def _size_pool(threads: int) -> None:
    """Set the thread count of SciPy's own BLAS — the one routed calls use — and leave any other
    BLAS of the process alone (numpy's wheels bundle their own OpenBLAS: a program embedding
    sandboxes keeps its numpy's threads). Where SciPy shares one BLAS with numpy (a distribution's
    build), that one is set. Without threadpoolctl, the BLAS's own default stays."""
    import os

    try:
        import scipy
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return
    blas = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
    home = os.path.dirname(scipy.__file__)
    own = [lib for lib in blas if "scipy.libs" in lib.filepath or lib.filepath.startswith(home)]
    for lib in own or blas:
        lib.set_num_threads(threads)


class _Memory:
    """Bounds-checked reads of the guest's memory, and numpy views onto it."""

    def __init__(self, base: int, size: int) -> None:
        self.base = base
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

    def call(self, base: int, size: int, frame: int, route: int, stop: Callable[[], bool],
             budget: Optional[int] = None) -> Outcome:
        """Compute routed call `route` whose arguments are at `frame`, or decline (done False).
        `budget`: the multiply-adds the guest can still pay for (None: no instruction limit)."""
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
        call = _Call(_libs, _Memory(base, size), frame, routine, self.thresholds, stop, budget)
        try:
            madds = call.run()
        except Declined:
            return Outcome(False)
        except OverBudget:
            return Outcome(True, call.madds, time.monotonic() - start, self.threads, over_budget=True)
        return Outcome(True, madds, time.monotonic() - start, self.threads)


class _Call:
    """One call: its arguments read and validated (`Declined` on anything the reference BLAS
    would reject, or that reaches outside the guest's memory), then computed."""

    def __init__(self, libs: _Libraries, memory: _Memory, frame: int, routine: Routine,
                 thresholds: Thresholds, stop: Callable[[], bool], budget: Optional[int]) -> None:
        self.libs = libs
        self.np = libs.np
        self.memory = memory
        self.frame = frame
        self.routine = routine
        self.thresholds = thresholds
        self.stop = stop
        self.budget = budget
        self.madds = 0
        self.p = routine.precision
        self.dtype = self.np.dtype({"s": "float32", "d": "float64", "c": "complex64", "z": "complex128"}[self.p])
        self.isz = self.dtype.itemsize
        self.complex = self.p in "cz"
        self._keep: list[Any] = []  # the host's copies of the scalar arguments, alive for the call

    # -- reading the guest's arguments ----------------------------------------------------------
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
        if self.p == "s":
            return float(self.memory.read("<f", ptr))
        if self.p == "d":
            return float(self.memory.read("<d", ptr))
        fmt, half = ("<f", 4) if self.p == "c" else ("<d", 8)
        return complex(self.memory.read(fmt, ptr), self.memory.read(fmt, ptr + half))

    def scalar_arg(self, i: int) -> complex | float:
        """alpha/beta: a pointer to the scalar, except CBLAS's real ones, passed by value."""
        if self.routine.cblas and self.p == "s":
            return float(self.memory.read("<f", self.frame + i * SLOT))
        if self.routine.cblas and self.p == "d":
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

    # -- validating operands --------------------------------------------------------------------
    def matrix(self, ptr: int, rows: int, cols: int, ld: int) -> int:
        """The column-major rows×cols matrix at `ptr` with leading dimension `ld`: checked to lie
        in the guest's memory; its host address."""
        if ld < max(1, rows) or rows < 0 or cols < 0:
            raise Declined("leading dimension smaller than the rows")
        if rows and cols and not _fits(self.memory.size, ptr, (rows - 1) + (cols - 1) * ld, self.isz):
            raise Declined("a matrix reaches outside the guest's memory")
        return self.memory.base + ptr

    def view(self, ptr: int, rows: int, cols: int, ld: int) -> Any:
        """A numpy view of a matrix `matrix` has checked."""
        return self.np.ndarray((rows, cols), self.dtype, buffer=self.memory.raw, offset=ptr,
                               strides=(self.isz, ld * self.isz))

    def vector(self, ptr: int, n: int, inc: int) -> int:
        if inc == 0:
            raise Declined("zero increment")
        if n and not _fits(self.memory.size, ptr, (n - 1) * abs(inc), self.isz):
            raise Declined("a vector reaches outside the guest's memory")
        return self.memory.base + ptr

    def vector_view(self, ptr: int, n: int, inc: int) -> Any:
        first = ptr if inc > 0 else ptr + (n - 1) * -inc * self.isz  # BLAS: a negative increment walks backwards
        return self.np.ndarray((n,), self.dtype, buffer=self.memory.raw, offset=first, strides=(inc * self.isz,))

    def ints(self, ptr: int, n: int) -> int:
        """n int32s at `ptr` (pivots, info): checked; their host address."""
        if not _fits(self.memory.size, ptr, max(n, 1) - 1, 4):
            raise Declined("an integer array reaches outside the guest's memory")
        return self.memory.base + ptr

    def check_trans(self, trans: str, allowed: str) -> str:
        if trans == "C" and not self.complex and "C" in allowed:
            return "T"  # real: conjugate transpose is transpose
        if trans not in allowed:
            raise Declined(f"bad transpose {trans!r}")
        return trans

    def cost(self, madds: int, level3: bool = True, whole: bool = False) -> None:
        """Decline a small call (the guest's is faster) or an unsplittable one over the cap;
        raise OverBudget if the guest cannot pay for it."""
        if madds <= 0 or madds < (self.thresholds.level3 if level3 else self.thresholds.level2):
            raise Declined("small: the guest computes it")
        if whole and madds > MAX_UNSPLIT_MADDS:
            raise Declined("too large to run without a stop check: the guest computes it")
        self.madds = madds * (4 if self.complex else 1)  # a complex multiply-add is four real ones
        if self.budget is not None and self.madds > self.budget:
            raise OverBudget()

    # -- the host's arguments (re-serialised, alive until the call ends) --------------------------
    def c_int(self, value: int) -> int:
        box = ctypes.c_int(value)
        self._keep.append(box)
        return ctypes.addressof(box)

    def c_char(self, value: str) -> int:
        box = ctypes.c_char(value.encode())
        self._keep.append(box)
        return ctypes.addressof(box)

    def c_scalar(self, value: complex | float) -> int:
        real = _REAL[self.p]
        box: Any = (real * 2)(value.real, value.imag) if self.complex else real(float(value.real))
        self._keep.append(box)
        return ctypes.addressof(box)

    def blas(self, family: str) -> Any:
        return self.libs.function(self.p + family)

    # -- the routines ---------------------------------------------------------------------------
    def run(self) -> int:
        """Compute the call; what it is charged: its multiply-adds (a complex one counts four)."""
        getattr(self, "_" + self.routine.family)()
        return self.madds

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
        ta, tb = self.check_trans(ta, "NTC"), self.check_trans(tb, "NTC")
        if min(m, n, k) < 0:
            raise Declined("negative dimension")
        A = self.matrix(a, m if ta == "N" else k, k if ta == "N" else m, lda)
        B = self.matrix(b, k if tb == "N" else n, n if tb == "N" else k, ldb)
        C = self.matrix(c, m, n, ldc)
        self.cost(m * n * k)
        if alpha == 0:
            return self._scale(self.view(c, m, n, ldc), beta)
        gemm, isz = self.blas("gemm"), self.isz
        args = (self.c_char(ta), self.c_char(tb), self.c_int(m))
        k_, alpha_, lda_, ldb_, beta_, ldc_ = (self.c_int(k), self.c_scalar(alpha), self.c_int(lda),
                                               self.c_int(ldb), self.c_scalar(beta), self.c_int(ldc))
        step = max(1, BLOCK_MADDS // max(1, m * k))
        for j0 in range(0, n, step):  # independent column blocks of C
            if self.stop():
                break
            nb = min(step, n - j0)
            Bj = B + (j0 * ldb if tb == "N" else j0) * isz
            gemm(*args, self.c_int(nb), k_, alpha_, A, lda_, Bj, ldb_, beta_, C + j0 * ldc * isz, ldc_)
        return m * n * k

    def _syrk(self) -> int:
        if self.routine.cblas:
            row = self.order()
            uplo, trans = self.enum(1, CBLAS_UPLO), self.enum(2, CBLAS_TRANS)
            n, k = self.slot_i32(3), self.slot_i32(4)
            alpha, a, lda = self.scalar_arg(5), self.slot_ptr(6), self.slot_i32(7)
            beta, c, ldc = self.scalar_arg(8), self.slot_ptr(9), self.slot_i32(10)
            if row:  # the row-major C is the column-major C^T: flip the triangle and the transpose
                if trans == "C" and self.complex:
                    raise Declined("syrk takes no conjugate transpose")
                uplo = "L" if uplo == "U" else "U"
                trans = "T" if trans == "N" else "N"
        else:
            uplo, trans = self.char_arg(0), self.char_arg(1)
            n, k = self.int_arg(2), self.int_arg(3)
            alpha, a, lda = self.scalar_arg(4), self.slot_ptr(5), self.int_arg(6)
            beta, c, ldc = self.scalar_arg(7), self.slot_ptr(8), self.int_arg(9)
        if uplo not in ("U", "L"):
            raise Declined("bad uplo")
        t = self.check_trans(trans, "NT" if self.complex else "NTC")
        if min(n, k) < 0:
            raise Declined("negative dimension")
        A = self.matrix(a, n if t == "N" else k, k if t == "N" else n, lda)
        C = self.matrix(c, n, n, ldc)
        madds = n * n * k // 2 + 1
        self.cost(madds)
        if alpha == 0:
            return self._scale(self.view(c, n, n, ldc), beta, uplo)
        syrk, gemm, isz = self.blas("syrk"), self.blas("gemm"), self.isz
        k_, alpha_, lda_, beta_, ldc_ = (self.c_int(k), self.c_scalar(alpha), self.c_int(lda),
                                         self.c_scalar(beta), self.c_int(ldc))
        # column blocks of C: the block's diagonal square by syrk, its other part of the
        # triangle (above it for U, below for L) by gemm of the rows (t N) / columns (t T) of A
        def rows_of(j: int) -> int:  # the address of op(A)'s row j
            return A + (j if t == "N" else j * lda) * isz

        ga, gb = ("N", "T") if t == "N" else ("T", "N")
        step = max(1, BLOCK_MADDS // max(1, n * k))
        for j0 in range(0, n, step):
            if self.stop():
                break
            j1 = min(n, j0 + step)
            nb = j1 - j0
            syrk(self.c_char(uplo), self.c_char(t), self.c_int(nb), k_, alpha_, rows_of(j0), lda_, beta_,
                 C + (j0 + j0 * ldc) * isz, ldc_)
            lo, hi = (0, j0) if uplo == "U" else (j1, n)
            if hi > lo:
                gemm(self.c_char(ga), self.c_char(gb), self.c_int(hi - lo), self.c_int(nb), k_, alpha_,
                     rows_of(lo), lda_, rows_of(j0), lda_, beta_, C + (lo + j0 * ldc) * isz, ldc_)
        return madds

    def _symm(self) -> int:
        side, uplo = self.char_arg(0), self.char_arg(1)
        m, n = self.int_arg(2), self.int_arg(3)
        alpha, a, lda = self.scalar_arg(4), self.slot_ptr(5), self.int_arg(6)
        b, ldb, beta = self.slot_ptr(7), self.int_arg(8), self.scalar_arg(9)
        c, ldc = self.slot_ptr(10), self.int_arg(11)
        if side not in ("L", "R") or uplo not in ("U", "L") or min(m, n) < 0:
            raise Declined("bad side, uplo or dimension")
        ka = m if side == "L" else n
        A, B, C = self.matrix(a, ka, ka, lda), self.matrix(b, m, n, ldb), self.matrix(c, m, n, ldc)
        self.cost(m * n * ka)
        if alpha == 0:
            return self._scale(self.view(c, m, n, ldc), beta)
        symm, isz = self.blas("symm"), self.isz
        fixed = (self.c_char(side), self.c_char(uplo))
        alpha_, lda_, ldb_, beta_, ldc_ = (self.c_scalar(alpha), self.c_int(lda), self.c_int(ldb),
                                           self.c_scalar(beta), self.c_int(ldc))
        step = max(1, BLOCK_MADDS // max(1, ka * ka))
        for i0 in range(0, n if side == "L" else m, step):  # side L: C's columns; side R: its rows
            if self.stop():
                break
            if side == "L":
                nb = min(step, n - i0)
                symm(*fixed, self.c_int(m), self.c_int(nb), alpha_, A, lda_, B + i0 * ldb * isz, ldb_, beta_,
                     C + i0 * ldc * isz, ldc_)
            else:
                mb = min(step, m - i0)
                symm(*fixed, self.c_int(mb), self.c_int(n), alpha_, A, lda_, B + i0 * isz, ldb_, beta_,
                     C + i0 * isz, ldc_)
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
        A, B = self.matrix(a, ka, ka, lda), self.matrix(b, m, n, ldb)
        madds = m * n * ka // 2 + 1
        self.cost(madds)
        if alpha == 0:  # the reference: B = 0, A not read
            return self._scale(self.view(b, m, n, ldb), 0.0, madds=madds)
        fn, isz = self.blas(family), self.isz
        fixed = (self.c_char(side), self.c_char(uplo), self.c_char(t), self.c_char(diag))
        alpha_, lda_, ldb_ = self.c_scalar(alpha), self.c_int(lda), self.c_int(ldb)
        step = max(1, BLOCK_MADDS // max(1, ka * ka))
        for i0 in range(0, n if side == "L" else m, step):  # side L: B's columns; side R: its rows
            if self.stop():
                break
            if side == "L":
                fn(*fixed, self.c_int(m), self.c_int(min(step, n - i0)), alpha_, A, lda_, B + i0 * ldb * isz, ldb_)
            else:
                fn(*fixed, self.c_int(min(step, m - i0)), self.c_int(n), alpha_, A, lda_, B + i0 * isz, ldb_)
        return madds

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
            if row:  # row-major A (m×n) is column-major A^T (n×m)
                if trans == "C" and self.complex:
                    raise Declined("row-major conjugate transpose")  # y = conj(A)·x: no BLAS transpose
                m, n = n, m
                trans = "T" if trans == "N" else "N"
        else:
            trans = self.char_arg(0)
            m, n = self.int_arg(1), self.int_arg(2)
            alpha, a, lda = self.scalar_arg(3), self.slot_ptr(4), self.int_arg(5)
            x, incx = self.slot_ptr(6), self.int_arg(7)
            beta, y, incy = self.scalar_arg(8), self.slot_ptr(9), self.int_arg(10)
        t = self.check_trans(trans, "NTC")
        if min(m, n) < 0:
            raise Declined("negative dimension")
        lx, ly = (n, m) if t == "N" else (m, n)
        A, X, Y = self.matrix(a, m, n, lda), self.vector(x, lx, incx), self.vector(y, ly, incy)
        self.cost(m * n, level3=False)
        if alpha == 0:  # the reference: y = beta·y, A and x not read
            Yv = self.vector_view(y, ly, incy)
            if beta == 0:
                Yv[...] = 0
            elif beta != 1:
                Yv *= beta
            return m * n
        self.blas("gemv")(self.c_char(t), self.c_int(m), self.c_int(n), self.c_scalar(alpha), A, self.c_int(lda),
                          X, self.c_int(incx), self.c_scalar(beta), Y, self.c_int(incy))
        return m * n

    def _scale(self, C: Any, beta: complex | float, uplo: Optional[str] = None, madds: int = 0) -> int:
        """alpha = 0: C = beta·C (0 for beta = 0: what C held, NaN included, is not read), on
        one triangle for syrk."""
        np = self.np
        if uplo is not None:
            mask = np.triu(np.ones(C.shape, bool)) if uplo == "U" else np.tril(np.ones(C.shape, bool))
            C[mask] = 0 if beta == 0 else C[mask] * beta
        elif beta == 0:
            C[...] = 0
        elif beta != 1:
            C *= beta
        return madds or self.madds

    # -- LAPACK drivers (run whole: bounded by MAX_UNSPLIT_MADDS) -----------------------------------
    def _gesv(self) -> int:
        n, nrhs = self.int_arg(0), self.int_arg(1)
        a, lda, ipiv = self.slot_ptr(2), self.int_arg(3), self.slot_ptr(4)
        b, ldb, info = self.slot_ptr(5), self.int_arg(6), self.slot_ptr(7)
        if min(n, nrhs) < 0:
            raise Declined("negative dimension")
        A, B = self.matrix(a, n, n, lda), self.matrix(b, n, nrhs, ldb)
        piv, code = self.ints(ipiv, n), self.ints(info, 1)
        madds = n * n * n // 3 + n * n * nrhs
        self.cost(madds, whole=True)
        self.blas("gesv")(self.c_int(n), self.c_int(nrhs), A, self.c_int(lda), piv, B, self.c_int(ldb), code)
        return madds

    def _getrf(self) -> int:
        m, n, a, lda = self.int_arg(0), self.int_arg(1), self.slot_ptr(2), self.int_arg(3)
        ipiv, info = self.slot_ptr(4), self.slot_ptr(5)
        if min(m, n) < 0:
            raise Declined("negative dimension")
        k = min(m, n)
        A, piv, code = self.matrix(a, m, n, lda), self.ints(ipiv, k), self.ints(info, 1)
        madds = max(1, m * n * k - (m + n) * k * k // 2 + k * k * k // 3)
        self.cost(madds, whole=True)
        self.blas("getrf")(self.c_int(m), self.c_int(n), A, self.c_int(lda), piv, code)
        return madds

    def _potrf(self) -> int:
        uplo, n, a, lda, info = self.char_arg(0), self.int_arg(1), self.slot_ptr(2), self.int_arg(3), self.slot_ptr(4)
        if uplo not in ("U", "L") or n < 0:
            raise Declined("bad uplo or dimension")
        A, code = self.matrix(a, n, n, lda), self.ints(info, 1)
        madds = n * n * n // 6 + 1
        self.cost(madds, whole=True)
        self.blas("potrf")(self.c_char(uplo), self.c_int(n), A, self.c_int(lda), code)
        return madds

    def _finite(self, ptr: int, rows: int, cols: int, ld: int, uplo: Optional[str] = None) -> None:
        """Decline a matrix holding inf or NaN (in its referenced triangle): LAPACK's drivers
        report those through xerbla (DLASCL), which prints on the host's stdout; the guest's own
        routine prints them as the guest's output."""
        m = self.view(ptr, rows, cols, ld)
        np = self.np
        if uplo is not None:
            m = np.triu(m) if uplo == "U" else np.tril(m)
        if not np.isfinite(m).all():
            raise Declined("inf or NaN in the input")

    def _workspace(self, family: str, args: Callable[[int, int, int, int], tuple[int, ...]],
                   iwork_size: Optional[int] = None) -> tuple[int, int, int, int]:
        """The host's own workspace for a LAPACK driver: asked of the host's LAPACK (a query;
        `iwork_size` when the driver's integer workspace is fixed, not queried), allocated here
        (the guest's workspace is not used: a query, lwork = -1, is the guest's)."""
        np = self.np
        work1 = (_REAL[self.p] * 2)()
        iwork1 = ctypes.c_int(0)
        status = ctypes.c_int(0)
        self.blas(family)(*args(ctypes.addressof(work1), self.c_int(-1), ctypes.addressof(iwork1),
                                ctypes.addressof(status)))
        if status.value != 0:
            raise Declined("the host's workspace query failed")
        work = np.zeros(max(1, int(work1[0])) + 1, self.dtype)
        iwork = np.zeros(max(1, iwork_size if iwork_size is not None else iwork1.value) + 1, np.int32)
        self._keep += [work, iwork]
        return work.ctypes.data, self.c_int(len(work) - 1), iwork.ctypes.data, self.c_int(len(iwork) - 1)

    def _gesdd(self) -> int:
        jobz, m, n = self.char_arg(0), self.int_arg(1), self.int_arg(2)
        a, lda, s_ptr = self.slot_ptr(3), self.int_arg(4), self.slot_ptr(5)
        u, ldu, vt, ldvt = self.slot_ptr(6), self.int_arg(7), self.slot_ptr(8), self.int_arg(9)
        lwork, info = self.int_arg(11), self.slot_ptr(13)
        if jobz not in ("N", "S", "A") or min(m, n) < 0 or min(ldu, ldvt) < 1:
            raise Declined("bad jobz (O is the guest's) or dimension")
        if lwork < 1:  # a workspace query: the guest's (its answer sizes the guest's call)
            raise Declined("a workspace query")
        mn = min(m, n)
        A = self.matrix(a, m, n, lda)
        S = self.vector(s_ptr, mn, 1)
        U = VT = self.memory.base  # not referenced for jobz N
        if jobz != "N":
            U = self.matrix(u, m, m if jobz == "A" else mn, ldu)
            VT = self.matrix(vt, n if jobz == "A" else mn, n, ldvt)
        code = self.ints(info, 1)
        # bidiagonalisation and the vectors; forming a full U or V^T costs its square more
        madds = 4 * m * n * mn + (2 * (m * m + n * n) * mn if jobz == "A" else 0)
        self.cost(madds, whole=True)
        self._finite(a, m, n, lda)
        fixed = (self.c_char(jobz), self.c_int(m), self.c_int(n), A, self.c_int(lda), S, U, self.c_int(ldu), VT,
                 self.c_int(ldvt))
        work, lwork_, iwork, _ = self._workspace("gesdd", lambda w, lw, iw, st: (*fixed, w, lw, iw, st), 8 * mn)
        self.blas("gesdd")(*fixed, work, lwork_, iwork, code)
        return madds

    def _syevd(self) -> int:
        jobz, uplo, n = self.char_arg(0), self.char_arg(1), self.int_arg(2)
        a, lda, w = self.slot_ptr(3), self.int_arg(4), self.slot_ptr(5)
        lwork, liwork, info = self.int_arg(7), self.int_arg(9), self.slot_ptr(10)
        if jobz not in ("N", "V") or uplo not in ("U", "L") or n < 0:
            raise Declined("bad jobz, uplo or dimension")
        if lwork < 1 or liwork < 1:  # a workspace query is the guest's (as for gesdd)
            raise Declined("a workspace query")
        A, W, code = self.matrix(a, n, n, lda), self.vector(w, n, 1), self.ints(info, 1)
        madds = 4 * n * n * n if jobz == "V" else n * n * n
        self.cost(madds, whole=True)
        self._finite(a, n, n, lda, uplo)
        fixed = (self.c_char(jobz), self.c_char(uplo), self.c_int(n), A, self.c_int(lda), W)
        work, lwork_, iwork, liwork_ = self._workspace(
            "syevd", lambda wk, lw, iw, st: (*fixed, wk, lw, iw, self.c_int(-1), st))
        self.blas("syevd")(*fixed, work, lwork_, iwork, liwork_, code)
        return madds
