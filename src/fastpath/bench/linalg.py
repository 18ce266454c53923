"""linalg suite: fastpath.linalg against torch.linalg on the shapes of issue 8 (camera geometry,
physics, signal processing: millions of small solves, complex factorisations).

Shapes are (batch, m, n) for factorisations and (batch, n, k) for solves with k right-hand
sides. Inputs are well conditioned (random plus a multiple of the identity, or random
triangles with a strong diagonal), so every comparison is meaningful in float32. Checks:
inverses, solves, determinants and pseudo-inverses against torch's result; LU by ``P L U = A``
(pivots may differ on near-ties), QR and SVD by reconstruction, orthonormality and singular
values (factors are unique only up to signs).

The ``target`` of a case is the issue's ratio turned into microseconds with the torch
timing the issue quotes (H200, torch 2.11): e.g. 1M 4x4 inverses, torch 2150 us, 20x ->
<= 107.5 us. The ratio column gives the same run's torch time. The harness tables have no
complex dtype: complex64 cases say so in their name and carry "float32" (their components).
"""
from __future__ import annotations

from .harness import Case, rel_error

#: The issue's torch timings (us) and ratios: target = torch_us / ratio.
ISSUE = {
    "inv 4x4": (2150.0, 20), "inv 3x3": (1718.0, 20), "inv 16x16": (1230.0, 5),
    "lu_factor c64": (2181.0, 3), "lu_solve c64": (543.0, 3), "lu_factor c64 2048": (5718.0, 1),
    "qr 32x32": (730000.0, 100), "qr 4096": (28200.0, 1.5), "svd 8x8": (4000.0, 10),
    "pinv 8x8": (900.0, 10), "solve_triangular 4096": (1300.0, 1),
}


def _target(key):
    us, ratio = ISSUE[key]
    return ("us", round(us / ratio, 1))


def _square(shape, cplx, device, g):
    import torch
    b, n = shape[0], shape[1]
    dt = torch.complex64 if cplx else torch.float32
    a = torch.randn(b, n, n, generator=g, device=device, dtype=dt)
    return a + 2 * n ** 0.5 * torch.eye(n, device=device, dtype=dt)  # cond O(10)


def _inputs(kind, cplx=False):
    """make(shape, dtype, device, seed) for the case kinds."""
    def make(shape, dtype, device, seed):
        import torch
        g = torch.Generator(device=device).manual_seed(seed)
        if kind == "square":
            return (_square(shape, cplx, device, g),)
        if kind == "rect":
            b, m, n = shape
            return (torch.randn(b, m, n, generator=g, device=device),)
        if kind == "lu_solve":
            A = _square(shape, cplx, device, g)
            LU, piv = torch.linalg.lu_factor(A)
            B = torch.randn(shape[0], shape[1], shape[2], generator=g, device=device, dtype=A.dtype)
            return LU, piv, B
        if kind == "solve":
            A = _square(shape, cplx, device, g)
            return A, torch.randn(shape[0], shape[1], shape[2], generator=g, device=device, dtype=A.dtype)
        if kind == "tri":
            b, n, k = shape
            A = torch.randn(b, n, n, generator=g, device=device) * n ** -0.5
            A = A.triu() + 2 * torch.eye(n, device=device)
            return A, torch.randn(b, n, k, generator=g, device=device)
        raise ValueError(kind)
    return make


def _close(tol):
    """Ours vs torch's result: same shape and dtype, ||ours - torch|| / ||torch|| <= tol."""
    def check(inputs, out, ref):
        import torch
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return False, f"got {out.dtype} {tuple(out.shape)}, torch gives {ref.dtype} {tuple(ref.shape)}"
        if out.is_complex():
            out, ref = torch.view_as_real(out), torch.view_as_real(ref)
        err = rel_error(out, ref)
        return err <= tol, f"rel err {err:.1e} (bound {tol:.0e})"
    return check


def _vs_f64(fn64, tol):
    """Ours and torch's against ``fn64`` on the float64 input: a batch of a million random
    matrices holds some ill-conditioned ones, where float32 results differ from each other
    far beyond ``tol``; ours passes when its error is within ``tol`` or twice torch's."""
    def check(inputs, out, ref):
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return False, f"got {out.dtype} {tuple(out.shape)}, torch gives {ref.dtype} {tuple(ref.shape)}"
        import torch
        exact = fn64(*(t.to(torch.complex128 if t.is_complex() else torch.float64) for t in inputs))
        real = (lambda t: torch.view_as_real(t)) if exact.is_complex() else (lambda t: t)
        ours, theirs = rel_error(real(out), real(exact)), rel_error(real(ref), real(exact))
        return ours <= max(tol, 2 * theirs), f"rel err vs float64 {ours:.1e} (torch {theirs:.1e})"
    return check


def _rel(a, b) -> float:
    return float((a - b).abs().norm() / b.abs().norm().clamp_min(1e-30))


def _lu_check(inputs, out, ref):
    import torch
    (A,) = inputs
    LU, piv = out[0], out[1]
    P, L, U = torch.lu_unpack(LU, piv)
    err = _rel(P @ L @ U, A)
    return err <= 1e-5, f"||P L U - A|| / ||A|| = {err:.1e}"


def _qr_check(inputs, out, ref):
    import torch
    (A,) = inputs
    Q, R = out
    orth = float((Q.mH @ Q - torch.eye(Q.shape[-1], device=Q.device)).abs().max())
    err = _rel(Q @ R, A)
    ok = err <= 1e-5 and orth <= 1e-5 and torch.equal(R, R.triu())
    return ok, f"||QR - A|| / ||A|| = {err:.1e}, max|Q^T Q - I| = {orth:.1e}"


def _svd_check(inputs, out, ref):
    import torch
    (A,) = inputs
    U, S, Vh = out
    k = S.shape[-1]
    err = _rel((U[..., :k] * S[..., None, :]) @ Vh[..., :k, :], A)
    orth = max(float((U.mT @ U - torch.eye(U.shape[-1], device=U.device)).abs().max()),
               float((Vh @ Vh.mT - torch.eye(Vh.shape[-2], device=U.device)).abs().max()))
    serr = _rel(S, ref[1])
    ok = err <= 1e-5 and orth <= 1e-5 and serr <= 1e-5
    return ok, f"||U S Vh - A|| / ||A|| = {err:.1e}, orth {orth:.1e}, S rel err {serr:.1e}"


def _bytes(per_matrix, cplx=False):
    """nbytes(shape, itemsize): batch * per_matrix(shape) elements read + written."""
    return lambda shape, itemsize: shape[0] * per_matrix(shape) * itemsize * (2 if cplx else 1)


def cases() -> list:
    import torch

    from ..ops import linalg as L

    def case(name, shape, cpu_shape, ours, native, check, nbytes, make, key=None, **kw):
        return Case(suite="linalg", name=name, shape=shape, dtype="float32", ours=ours, native=native,
                    check=check, nbytes=nbytes, cpu_shape=cpu_shape, make=make,
                    target=_target(key) if key else None, **kw)

    sq = _bytes(lambda s: 2 * s[1] * s[1])  # read A, write the result
    # inv_ex on both sides: inv reads info on the host (a sync no CUDA graph can capture)
    inv, inv_t = (lambda a: L.inv_ex(a).inverse), (lambda a: torch.linalg.inv_ex(a).inverse)
    inv_chk = _vs_f64(torch.linalg.inv, 1e-5)
    return [
        case("inv 4x4", (1_000_000, 4), (7, 4), inv, inv_t, inv_chk, sq,
             _inputs("square"), "inv 4x4", graphs=True, quick=True),
        case("inv 3x3", (1_000_000, 3), (7, 3), inv, inv_t, inv_chk, sq,
             _inputs("square"), "inv 3x3", graphs=True),
        case("inv 16x16", (100_000, 16), (5, 16), inv, inv_t, inv_chk, sq,
             _inputs("square"), "inv 16x16", graphs=True),
        case("inv 4x4 complex64", (1_000_000, 4), (7, 4), inv, inv_t, inv_chk, _bytes(lambda s: 2 * s[1] * s[1], True),
             _inputs("square", True), graphs=True),
        case("inv 16x16 complex64", (100_000, 16), (5, 16), inv, inv_t, inv_chk,
             _bytes(lambda s: 2 * s[1] * s[1], True), _inputs("square", True), graphs=True),
        case("det 4x4", (1_000_000, 4), (7, 4), L.det, torch.linalg.det, _close(1e-5),
             _bytes(lambda s: s[1] * s[1] + 1), _inputs("square"), graphs=True),
        # lu_factor (not _ex) reads info on the host on both sides: no graph rows (a failed capture
        # would only be noise in the records)
        case("lu_factor complex64", (64, 256), (2, 40), lambda a: L.lu_factor(a), torch.linalg.lu_factor,
             _lu_check, _bytes(lambda s: 2 * s[1] * s[1], True), _inputs("square", True), "lu_factor c64",
             quick=True, capturable=False),
        case("lu_factor float32", (64, 256), (2, 40), lambda a: L.lu_factor(a), torch.linalg.lu_factor,
             _lu_check, _bytes(lambda s: 2 * s[1] * s[1]), _inputs("square"), capturable=False),
        case("lu_solve complex64", (64, 256, 256), (2, 40, 3), L.lu_solve, torch.linalg.lu_solve, _close(1e-5),
             _bytes(lambda s: s[1] * s[1] + 2 * s[1] * s[2], True), _inputs("lu_solve", True), "lu_solve c64"),
        case("lu_solve float32", (64, 256, 256), (2, 40, 3), L.lu_solve, torch.linalg.lu_solve, _close(1e-5),
             _bytes(lambda s: s[1] * s[1] + 2 * s[1] * s[2]), _inputs("lu_solve"), graphs=True),
        case("lu_solve complex64 k=1", (64, 256, 1), (2, 40, 1), L.lu_solve, torch.linalg.lu_solve,
             _close(1e-5), _bytes(lambda s: s[1] * s[1] + 2 * s[1] * s[2], True), _inputs("lu_solve", True),
             graphs=True),
        # solve past the small kernel: lu_factor_ex + lu_solve (small.SOLVE_VIA_LU; False: torch's solve_ex)
        case("solve_ex complex64", (64, 256, 256), (2, 40, 20), lambda a, b: L.solve_ex(a, b).result,
             lambda a, b: torch.linalg.solve_ex(a, b).result, _close(1e-5),
             _bytes(lambda s: s[1] * s[1] + 2 * s[1] * s[2], True), _inputs("solve", True)),
        case("lu_factor complex64 2048", (1, 2048), (1, 20), lambda a: L.lu_factor(a), torch.linalg.lu_factor,
             _lu_check, _bytes(lambda s: 2 * s[1] * s[1], True), _inputs("square", True),
             "lu_factor c64 2048", capturable=False),
        case("qr 32x32", (10_000, 32, 32), (5, 32, 32), L.qr, torch.linalg.qr, _qr_check,
             _bytes(lambda s: 3 * s[1] * s[2]), _inputs("rect"), "qr 32x32", quick=True),
        case("qr 4096x4096", (1, 4096, 4096), (1, 40, 30), L.qr, torch.linalg.qr, _qr_check,
             _bytes(lambda s: 3 * s[1] * s[2]), _inputs("rect"), "qr 4096"),
        case("qr 2048x2048", (1, 2048, 2048), (1, 70, 60), L.qr, torch.linalg.qr, _qr_check,
             _bytes(lambda s: 3 * s[1] * s[2]), _inputs("rect")),
        case("qr 64x256x256", (64, 256, 256), (2, 70, 60), L.qr, torch.linalg.qr, _qr_check,
             _bytes(lambda s: 3 * s[1] * s[2]), _inputs("rect")),
        case("svd 8x8", (10_000, 8, 8), (3, 8, 8), L.svd, torch.linalg.svd, _svd_check,
             _bytes(lambda s: 3 * s[1] * s[2] + s[2]), _inputs("rect"), "svd 8x8", quick=True),
        case("pinv 8x8", (1_000, 8, 8), (3, 8, 8), L.pinv, torch.linalg.pinv, _vs_f64(torch.linalg.pinv, 1e-4),
             _bytes(lambda s: 2 * s[1] * s[2]), _inputs("rect"), "pinv 8x8", graphs=True),
        case("solve_triangular 4096x512", (1, 4096, 512), (1, 50, 7),
             lambda a, b: L.solve_triangular(a, b, upper=True),
             lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), _close(1e-5),
             _bytes(lambda s: s[1] * s[1] // 2 + 2 * s[1] * s[2]), _inputs("tri"), "solve_triangular 4096"),
    ]
