"""The routed routines. A routine's route id is its index, so the table only grows at its end
(the warm image's key hashes it: `ROUTES_TAG`).

Each routine's new body (`_wasm/routing.py`) first multiplies its size arguments (`sizes`:
parameter indices; pointers to the values for the Fortran interface, the values themselves for
CBLAS) and keeps a call whose product is under `threshold` in the guest without asking the host
— a small call costs a few instructions more than before routing, no round trip. The thresholds
were measured (docs/compute.md): a square `dgemm` costs the same both ways near n = 40, a square
`dgemv` near n = 128.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

LEVEL3 = 40 ** 3  # multiply-adds
LEVEL2 = 128 * 128
SIDED = 48 * 48  # symm, trsm, trmm: m·n (their cost is m·n times m or n, by side)
LAPACK = 64 * 64  # n² (their cost is ~n³)


class Routine(NamedTuple):
    name: str
    family: str  # gemm, syrk, symm, trsm, trmm, gemv, gesv, getrf, gesdd, potrf, syevd
    precision: str  # s, d, c, z
    cblas: bool  # C interface (values, enums, row or column order) or Fortran (all pointers)
    sizes: tuple[int, ...]  # the parameters whose product is compared with `threshold`
    threshold: int


_FORTRAN = {"gemm": ((2, 3, 4), LEVEL3), "syrk": ((2, 2, 3), LEVEL3), "symm": ((2, 3), SIDED),
            "trsm": ((4, 5), SIDED), "trmm": ((4, 5), SIDED), "gemv": ((1, 2), LEVEL2)}
_CBLAS = {"gemm": ((3, 4, 5), LEVEL3), "syrk": ((3, 3, 4), LEVEL3), "gemv": ((2, 3), LEVEL2)}
_LAPACK = {"gesv": ((0, 0), LAPACK), "getrf": ((0, 1), LAPACK), "potrf": ((1, 1), LAPACK),
           "gesdd": ((1, 2), LAPACK), "syevd": ((2, 2), LAPACK)}


def _table() -> tuple[Routine, ...]:
    out = []
    for family, (sizes, threshold) in _FORTRAN.items():
        for p in "sdcz":
            out.append(Routine(f"{p}{family}_", family, p, False, sizes, threshold))
    for family, (sizes, threshold) in _CBLAS.items():  # the CBLAS names the runtime has (numpy's)
        for p in "sdcz":
            out.append(Routine(f"cblas_{p}{family}", family, p, True, sizes, threshold))
    for family, (sizes, threshold) in _LAPACK.items():  # LAPACK drivers numpy and SciPy call
        for p in ("sd" if family in ("gesdd", "syevd") else "sdcz"):  # (complex ones take an rwork)
            out.append(Routine(f"{p}{family}_", family, p, False, sizes, threshold))
    return tuple(out)


ROUTINES: tuple[Routine, ...] = _table()
ROUTES_TAG = "blas-routes-" + hashlib.sha256(repr(ROUTINES).encode()).hexdigest()[:12]
