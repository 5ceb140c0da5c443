"""The guest's BLAS on the host: both paths agree, hostile operands are declined, limits hold.

Each case runs the same guest code in a sandbox whose large BLAS calls go to the host and in
one where they stay in the guest (`DECLAW_WASM_HOST_BLAS=0`), and compares what they computed.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterator

import numpy as np
import pytest

from declaw_wasm import Limits, Sandbox, TimeoutException
from declaw_wasm._blas import host
from declaw_wasm._blas.routines import ROUTINES
from declaw_wasm._wasm.engine import FUEL_FLAGS
from declaw_wasm._wasm.warm_image import get_interpreter

pytestmark = pytest.mark.guest

CASES = r'''
import io, numpy as np
import scipy.linalg.blas as fb
rng = np.random.default_rng(7)
out = {}
def mat(r, c, dt, order="F"):
    m = rng.standard_normal((r, c))
    if np.dtype(dt).kind == "c":
        m = m + 1j * rng.standard_normal((r, c))
    return np.asarray(m, dtype=dt, order=order)
for dt in ("float32", "float64", "complex64", "complex128"):
    p = np.dtype(dt).char.lower().replace("f", "s").replace("g", "z")
    p = {"float32": "s", "float64": "d", "complex64": "c", "complex128": "z"}[dt]
    gemm, gemv = getattr(fb, p + "gemm"), getattr(fb, p + "gemv")
    a, b = mat(70, 90, dt), mat(90, 60, dt)
    for ta, tb in ((0, 0), (1, 0), (0, 1), (2, 2)):
        sq1, sq2 = mat(80, 80, dt), mat(80, 80, dt)
        out[f"{dt}-gemm-{ta}{tb}"] = gemm(1.5, sq1, sq2, trans_a=ta, trans_b=tb)
    c = mat(70, 60, dt); c[0, 0] = np.nan
    out[f"{dt}-gemm-beta0-nan"] = gemm(1.0, a, b, 0.0, c)
    big = mat(100, 80, dt)
    out[f"{dt}-gemm-strided"] = gemm(2.0, big[5:75, :], big[10:90, 5:65])  # lda 100 > rows
    out[f"{dt}-matmul"] = mat(80, 120, dt, "C") @ mat(120, 70, dt, "C")
    out[f"{dt}-matmul-noncontig"] = mat(160, 120, dt, "C")[::2] @ mat(120, 140, dt, "C")[:, ::2]
    out[f"{dt}-matmul-T"] = mat(120, 80, dt, "C").T @ mat(120, 70, dt, "F")
    sq = mat(150, 150, dt)
    x = mat(150, 1, dt)[:, 0]
    out[f"{dt}-gemv"] = gemv(1.0, sq, x)
    out[f"{dt}-gemv-T"] = gemv(0.5, sq, x, 2.0, x.copy(), trans=1)
    out[f"{dt}-gemv-inc"] = gemv(1.0, sq, mat(300, 1, dt)[:, 0], incx=2)
    out[f"{dt}-matvec"] = np.ascontiguousarray(sq) @ x
    syrk, symm = getattr(fb, p + "syrk"), getattr(fb, p + "symm")
    trsm, trmm = getattr(fb, p + "trsm"), getattr(fb, p + "trmm")
    for lower in (0, 1):
        out[f"{dt}-syrk-{lower}"] = syrk(1.0, mat(80, 60, dt), lower=lower)
        out[f"{dt}-syrk-T-{lower}"] = syrk(1.0, mat(60, 80, dt), 0.5, mat(80, 80, dt), trans=1, lower=lower)
        out[f"{dt}-symm-{lower}"] = symm(1.0, sq[:60, :60], mat(60, 70, dt), lower=lower)
        out[f"{dt}-symm-R-{lower}"] = symm(1.0, sq[:70, :70], mat(60, 70, dt), side=1, lower=lower)
        tri = sq[:80, :80] + 80 * np.eye(80, dtype=dt)
        for side in (0, 1):
            B = mat(80, 60, dt) if side == 0 else mat(60, 80, dt)
            for trans in (0, 1, 2):
                for diag in (0, 1):
                    key = f"{dt}-tr-{lower}{side}{trans}{diag}"
                    out[key + "-sm"] = trsm(1.0, tri, B, side=side, lower=lower, trans_a=trans, diag=diag)
                    out[key + "-mm"] = trmm(2.0, tri, B, side=side, lower=lower, trans_a=trans, diag=diag)
    out[f"{dt}-zero"] = mat(0, 50, dt) @ mat(50, 40, dt)
    out[f"{dt}-one-row"] = mat(1, 500, dt, "C") @ mat(500, 300, dt, "C")
    inf = mat(60, 60, dt); inf[3, 4] = np.inf
    out[f"{dt}-inf"] = inf @ mat(60, 60, dt)
import scipy.linalg as sl
for dt in ("float32", "float64", "complex64", "complex128"):
    a = mat(200, 200, dt, "C")
    out[f"{dt}-solve"] = np.linalg.solve(a, mat(200, 5, dt, "C"))
    out[f"{dt}-inv"] = np.linalg.inv(a)
    lu, piv = sl.lu_factor(a)
    out[f"{dt}-lu"], out[f"{dt}-piv"] = lu, piv
    out[f"{dt}-lu-wide"] = sl.lu_factor(mat(120, 260, dt))[0]
    spd = a @ a.conj().T + 200 * np.eye(200, dtype=dt)
    out[f"{dt}-chol-L"] = np.linalg.cholesky(spd)
    out[f"{dt}-chol-U"] = sl.cholesky(spd, lower=False)
    out[f"{dt}-det"] = np.asarray(np.linalg.det(a[:100, :100]))
for dt in ("float32", "float64"):
    for shape in ((300, 100), (100, 300)):
        m = mat(*shape, dt, "C")
        out[f"{dt}-sv-{shape}"] = np.linalg.svd(m, compute_uv=False)
        u, sv, vt = np.linalg.svd(m, full_matrices=False)
        out[f"{dt}-svd-thin-{shape}"] = (u * sv) @ vt  # the product: singular vectors' signs may differ
        u, sv, vt = np.linalg.svd(m[:120, :90], full_matrices=True)
        out[f"{dt}-svd-full-{shape}"] = np.abs(np.diag(u.T @ u)) + np.abs(np.diag(vt @ vt.T)).sum()
    out[f"{dt}-singular"] = np.asarray(np.linalg.matrix_rank(np.ones((150, 150), dtype=dt)))
    sym = mat(150, 150, dt); sym = sym + sym.T
    out[f"{dt}-eigvalsh"] = np.linalg.eigvalsh(sym)
    vals, vecs = np.linalg.eigh(sym)
    out[f"{dt}-eigh"] = (vecs * vals) @ vecs.T  # the eigenvectors' signs may differ
    out[f"{dt}-eigh-U"] = sl.eigh(sym, lower=False, eigvals_only=True, driver="evd")
buf = io.BytesIO(); np.savez(buf, **out)
open("/tmp/blas-cases.npz", "wb").write(buf.getvalue())
print(len(out))
'''


def computed(sandbox: Sandbox) -> dict[str, Any]:
    result = sandbox.run_code(CASES, timeout=300)
    assert result.error is None, result.error
    data = sandbox.files.read("/tmp/blas-cases.npz", format="bytes")
    with np.load(io.BytesIO(bytes(data))) as npz:
        return {k: npz[k] for k in npz.files}


@pytest.fixture
def routed_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Which routines the host computed (a spy on the real router: it still runs)."""
    counts: Counter[str] = Counter()
    real = host.HostBlas.call

    def spy(self: host.HostBlas, *args: Any) -> host.Outcome:
        outcome = real(self, *args)
        if outcome.done:
            counts[ROUTINES[args[3]].name] += 1
        return outcome

    monkeypatch.setattr(host.HostBlas, "call", spy)
    yield counts


def assert_agree(routed: dict[str, Any], guest: dict[str, Any]) -> None:
    assert routed.keys() == guest.keys()
    for key in routed:
        r, g = routed[key], guest[key]
        assert r.shape == g.shape and r.dtype == g.dtype, key
        tol = 2e-3 if r.dtype in (np.float32, np.complex64) else 1e-9
        finite = np.abs(g[np.isfinite(g)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(r, g, rtol=tol, atol=tol * scale, err_msg=key)  # NaN/inf must match


def test_routed_and_guest_blas_compute_the_same(monkeypatch: pytest.MonkeyPatch, routed_calls: Counter[str]) -> None:
    monkeypatch.setenv("DECLAW_WASM_HOST_BLAS", "1")
    with Sandbox.create(timeout=600) as sandbox:
        routed = computed(sandbox)
    monkeypatch.setenv("DECLAW_WASM_HOST_BLAS", "0")
    with Sandbox.create(timeout=600) as sandbox:
        guest = computed(sandbox)
    assert_agree(routed, guest)
    families = {name.rstrip("_").removeprefix("cblas_")[1:] for name in routed_calls}
    assert families >= {"gemm", "gemv", "syrk", "symm", "trsm", "trmm", "gesv", "getrf", "potrf", "gesdd", "syevd"}, \
        routed_calls
    assert {r.precision for r in ROUTINES if routed_calls[r.name]} == set("sdcz")
    assert any(name.startswith("cblas_") for name in routed_calls)


def test_a_process_pool_worker_routes_to_its_own_host(pool_sbx: Sandbox) -> None:
    with Sandbox.create(timeout=600) as local:
        expected = computed(local)
    assert_agree(computed(pool_sbx), expected)


def test_a_view_past_the_end_of_memory_is_declined_and_the_guest_traps_as_before() -> None:
    with Sandbox.create(timeout=120) as sandbox:
        result = sandbox.run_code(
            "import numpy as np\n"
            "a = np.ones((200, 200))\n"
            "v = np.lib.stride_tricks.as_strided(a, shape=(200, 200), strides=(8 * 10**7, 8))\n"
            "v @ a\n", timeout=60)
        assert result.error is not None  # the guest's own dgemm reads past its memory: a trap
    with Sandbox.create(timeout=60) as other:  # the host is fine
        square = "import numpy as np; float((np.ones((300, 300)) @ np.ones((300, 300)))[0, 0])"
        assert other.run_code(square).text == "300.0"


BIG = "import numpy as np\na = np.ones((6000, 6000))\nb = a @ a\nprint(b[0, 0])\n"


BACKENDS = pytest.mark.parametrize("mode", ["in-process", "processes"], indirect=True)


@BACKENDS
@pytest.mark.timeout(300)
def test_a_huge_routed_matmul_ends_within_a_second_of_its_deadline(make: Callable[..., Sandbox]) -> None:
    with make(timeout=300, limits=Limits(memory_limit=2 << 30)) as sandbox:
        sandbox.run_code("import numpy as np")
        start = time.monotonic()
        with pytest.raises(TimeoutException):
            sandbox.run_code(BIG, timeout=4)
        elapsed = time.monotonic() - start
        assert elapsed < 4 + 1.0, elapsed


@BACKENDS
@pytest.mark.timeout(300)
def test_a_huge_routed_matmul_ends_within_a_second_of_kill(make: Callable[..., Sandbox]) -> None:
    sandbox = make(timeout=300, limits=Limits(memory_limit=2 << 30))
    sandbox.run_code("import numpy as np")
    ended: list[float] = []

    def run() -> None:
        try:
            sandbox.run_code(BIG, timeout=120)
        except Exception:
            pass
        ended.append(time.monotonic())

    worker = threading.Thread(target=run)
    worker.start()
    time.sleep(3.0)  # the arrays are made and the matmul is under way
    killed = time.monotonic()
    sandbox.kill()
    worker.join(30)
    assert ended and ended[0] - killed < 1.0, ended[0] - killed if ended else None


@pytest.mark.fuel
@pytest.mark.timeout(900)  # may compile the fuel build (tests/test_fuel.py)
def test_host_work_is_charged_to_the_instruction_budget() -> None:
    os.environ["DECLAW_WASM_WARM_IMAGE"] = "1"
    get_interpreter(FUEL_FLAGS, build=True)
    code = "import numpy as np\na = np.ones((1200, 1200))\nb = a @ a\nprint('done')\n"
    with Sandbox.create(timeout=600, limits=Limits(cpu_instructions=1_000_000_000)) as sandbox:
        result = sandbox.run_code(code, timeout=300)
        assert result.error is not None  # 1.7e9 multiply-adds: over a budget of 1e9
        assert "done" not in "".join(result.logs.stdout)
        cheap = sandbox.run_code("import numpy as np\nb = np.ones((400, 400)) @ np.ones((400, 400))\nprint('done')")
        assert cheap.error is None and cheap.cpu_instructions_used is not None
        assert cheap.cpu_instructions_used >= 400 ** 3  # each multiply-add costs one instruction


def test_host_work_counts_in_the_sandboxes_cpu_time() -> None:
    with Sandbox.create(timeout=300) as sandbox:
        sandbox.run_code("import numpy as np\na = np.ones((1500, 1500))")
        before = sandbox.get_metrics()[-1].cpu_time_seconds
        sandbox.run_code("for _ in range(3): b = a @ a")  # 1e10 multiply-adds on the host
        after = sandbox.get_metrics()[-1].cpu_time_seconds
        assert after - before >= 0.1, (before, after)  # ~0.3 s of one core here
