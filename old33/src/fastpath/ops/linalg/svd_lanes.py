"""One matrix a thread: the one-sided Jacobi SVD of :mod:`svd` for matrices small enough that
one thread holds its working matrix X (R x K) and the rotations V (K x K) in registers.

The tile kernel of :mod:`svd` spreads each matrix over a warp's lanes, so every one of a
rotation's reductions (column maxima, the three dot products, the column selections) crosses
lanes, and a sweep chains 28 rotations of an 8x8 matrix: a small batch (1000 matrices) is
bound by that latency. Here every entry is a tensor of ``BLOCK_B`` values (one matrix a lane)
held in a tuple: a rotation is straight-line arithmetic inside each thread, with no shuffle.
Pairs come in round-robin order (the circle method): each round rotates the KE/2 disjoint
pairs of positions (i, KE/2 + i), which are independent of each other, then turns the
columns one step round a circle; KE - 1 rounds make a sweep and restore the order. Rounds,
sort phases and the completion of U are runtime loops over one round's code (an unrolled
8x8 sweep took 20-120 s to compile). Same numerics as the tile kernel: the matrix scaled by
a power of two to a largest entry in [1, 2), each rotation's quantities computed on columns
scaled by powers of two (exact), the same convergence test ``|x_p . x_q| <= tol |x_p|
|x_q|``, the same pinv cut and the same Gram-Schmidt completion of U for rank-deficient
inputs.

Layout of the tuples: X's column c is ``x[c * R : c * R + R]``; V's column c is
``v[c * KE : c * KE + KE]``; U (MODE 1) has CC columns of R.
"""
from __future__ import annotations

from ..._core.backend import tl, triton
from ..._core.launch import Launcher
from .tiles import pow2_scale

#: Largest register footprint (4-byte words a thread: X and V, twice for float64) this path
#: takes; larger matrices take the tile kernel.
LANE_WORDS = 128
#: Warps a program (32 matrices a warp).
LANE_WARPS = 1


@triton.constexpr_function
def _log2(n):
    return n.bit_length() - 1


@triton.jit
def _bit_reversed(m, LEVELS: tl.constexpr):
    """m with its LEVELS low bits in reverse order."""
    j = m * 0
    for b in tl.static_range(LEVELS):
        j = j | (((m >> b) & 1) << (LEVELS - 1 - b))
    return j


@triton.jit
def _gather(base, in_b, sr, sc, R: tl.constexpr, N: tl.constexpr, BLOCK_B: tl.constexpr):
    """The N entries ``base[(j % R) * sr + (j // R) * sc]`` of every lane as a tuple, in j
    order, from one load: column m of the loaded tile holds entry j = bit-reverse(m), and
    LEVELS halvings (``tl.split`` separates even and odd columns) leave entry j at tuple index
    j. (A load per entry made triton 3.6's coalescing pass take 40 s on an 8x8 kernel.)"""
    NP: tl.constexpr = triton.next_power_of_2(N)
    LEVELS: tl.constexpr = _log2(NP)
    j = _bit_reversed(tl.arange(0, NP), LEVELS)
    t = tl.load(base[:, None] + ((j % R) * sr + (j // R) * sc)[None, :], mask=in_b[:, None] & (j < N)[None, :],
                other=0.0)
    parts = (t,)
    for lvl in tl.static_range(LEVELS):
        halves = ()
        for i in tl.static_range(1 << lvl):
            a, b = tl.split(tl.reshape(parts[i], [BLOCK_B, NP >> (lvl + 1), 2]))
            halves = halves + (a, b)
        parts = halves
    out = ()
    for k in tl.static_range(N):
        out = out + (tl.reshape(parts[k], [BLOCK_B]),)
    return out


@triton.jit
def _scatter(base, vals, in_b, sr, sc, R: tl.constexpr, N: tl.constexpr, BLOCK_B: tl.constexpr):
    """Store the tuple ``vals`` (N entries a lane) at ``base[(j % R) * sr + (j // R) * sc]``:
    the inverse of :func:`_gather` (pairs joined level by level), one store."""
    NP: tl.constexpr = triton.next_power_of_2(N)
    LEVELS: tl.constexpr = _log2(NP)
    parts = ()
    for k in tl.static_range(NP):
        if k < N:
            parts = parts + (tl.reshape(vals[k], [BLOCK_B, 1]),)
        else:
            parts = parts + (tl.reshape(tl.zeros_like(vals[0]), [BLOCK_B, 1]),)
    for lvl in tl.static_range(LEVELS):
        joined = ()
        for i in tl.static_range(NP >> (lvl + 1)):
            joined = joined + (tl.reshape(tl.join(parts[2 * i], parts[2 * i + 1]), [BLOCK_B, 2 << lvl]),)
        parts = joined
    j = _bit_reversed(tl.arange(0, NP), LEVELS)
    tl.store(base[:, None] + ((j % R) * sr + (j // R) * sc)[None, :], parts[0],
             mask=in_b[:, None] & (j < N)[None, :])


@triton.jit
def _amax(t, LO: tl.constexpr, N: tl.constexpr):
    """max |t[LO + i]| over i < N."""
    m = tl.abs(t[LO])
    for i in tl.static_range(1, N):
        m = tl.maximum(m, tl.abs(t[LO + i]))
    return m


@triton.jit
def _norm(t, LO: tl.constexpr, N: tl.constexpr):
    """2-norm of t[LO : LO + N] without squaring raw entries (scaled by a power of two)."""
    s, u = pow2_scale(_amax(t, LO, N))
    acc = (t[LO] * s) * (t[LO] * s)
    for i in tl.static_range(1, N):
        y = t[LO + i] * s
        acc += y * y
    return u * tl.sqrt(acc)


@triton.jit
def _mix(t, cs, sn, P: tl.constexpr, Q: tl.constexpr, N: tl.constexpr, NC: tl.constexpr):
    """Columns P and Q (N entries each, NC columns) rotated: (cs p - sn q, sn p + cs q)."""
    out = ()
    for c in tl.static_range(NC):
        for i in tl.static_range(N):
            if c == P:
                out = out + (cs * t[P * N + i] - sn * t[Q * N + i],)
            elif c == Q:
                out = out + (sn * t[P * N + i] + cs * t[Q * N + i],)
            else:
                out = out + (t[c * N + i],)
    return out


@triton.jit
def _rotate(x, v, moved, tol, tiny, P: tl.constexpr, Q: tl.constexpr, R: tl.constexpr, K: tl.constexpr,
            WITH_V: tl.constexpr):
    """The Jacobi rotation of columns (P, Q), per lane; ``moved`` counts the rotated pairs."""
    dp = _amax(x, P * R, R)
    dq = _amax(x, Q * R, R)
    ok = (dp >= tiny) & (dq >= tiny)  # columns of denormals are not rotated
    sp, up = pow2_scale(dp)
    sq, uq = pow2_scale(dq)
    yp = x[P * R] * sp
    yq = x[Q * R] * sq
    a = yp * yp
    b = yq * yq
    g = yp * yq
    for i in tl.static_range(1, R):
        yp = x[P * R + i] * sp
        yq = x[Q * R + i] * sq
        a += yp * yp
        b += yq * yq
        g += yp * yq
    rot = ok & (tl.abs(g) > tol * tl.sqrt(a) * tl.sqrt(b))
    gs = tl.where(rot, g, 1.0)
    # zeta = (|xq|^2 - |xp|^2) / (2 xp.xq) = ((uq / up) b - (up / uq) a) / (2 g), exact ratios
    zeta = ((uq * sp) * b - (up * sq) * a) / (2.0 * gs)
    az = tl.abs(zeta)
    big = az > 1e15
    sgn = tl.where(zeta >= 0, 1.0, -1.0)
    t = tl.where(big, 0.5 / tl.where(big, zeta, 1.0), sgn / (az + tl.sqrt(1.0 + tl.where(big, 0.0, zeta * zeta))))
    cs = 1.0 / tl.sqrt(1.0 + t * t)
    sn = tl.where(rot, cs * t, 0.0)
    cs = tl.where(rot, cs, 1.0)
    x = _mix(x, cs, sn, P, Q, R, K)
    if WITH_V:
        v = _mix(v, cs, sn, P, Q, K, K)
    return x, v, moved + rot.to(tl.int32)


@triton.jit
def _circle(t, N: tl.constexpr, KE: tl.constexpr):
    """The columns (N entries each) moved one step round the circle of the round-robin order:
    positions 1..KE/2-1 (the top row, pairs i with KE/2 + i) and KE/2..KE-1 (the bottom row)
    form a ring that turns by one, position 0 stays. After KE - 1 steps every pair has met
    once and the order is back where it began."""
    out = ()
    for j in tl.static_range(KE):
        for i in tl.static_range(N):
            if j == 0:
                out = out + (t[i],)
            elif j == 1:
                out = out + (t[(KE // 2) * N + i],)
            elif j < KE // 2:
                out = out + (t[(j - 1) * N + i],)
            elif j == KE - 1:
                out = out + (t[(KE // 2 - 1) * N + i],)
            else:
                out = out + (t[(j + 1) * N + i],)
    return out


@triton.jit
def _round(x, v, moved, tol, tiny, R: tl.constexpr, KE: tl.constexpr, WITH_V: tl.constexpr):
    """One round of the round-robin order: the KE/2 independent rotations of positions
    (i, KE/2 + i), then the circle turns."""
    for i in tl.static_range(KE // 2):
        x, v, moved = _rotate(x, v, moved, tol, tiny, i, KE // 2 + i, R, KE, WITH_V)
    x = _circle(x, R, KE)
    if WITH_V:
        v = _circle(v, KE, KE)
    return x, v, moved


@triton.jit
def _swap(t, sw, I: tl.constexpr, J: tl.constexpr, N: tl.constexpr, NC: tl.constexpr):
    """Columns I and J (N entries each, NC columns) exchanged where ``sw``."""
    out = ()
    for c in tl.static_range(NC):
        for i in tl.static_range(N):
            if c == I:
                out = out + (tl.where(sw, t[J * N + i], t[I * N + i]),)
            elif c == J:
                out = out + (tl.where(sw, t[I * N + i], t[J * N + i]),)
            else:
                out = out + (t[c * N + i],)
    return out


@triton.jit
def _sort_phase(sig, x, v, START: tl.constexpr, R: tl.constexpr, K: tl.constexpr, KE: tl.constexpr,
                WITH_VECS: tl.constexpr):
    """One phase of an odd-even transposition sort, descending: neighbours (i, i + 1) for i =
    START, START + 2, ... exchanged (with their columns of X and V) where out of order."""
    for i in tl.static_range(START, K - 1, 2):
        sw = sig[i] < sig[i + 1]
        sig = _swap(sig, sw, i, i + 1, 1, K)
        if WITH_VECS:
            x = _swap(x, sw, i, i + 1, R, KE)
            v = _swap(v, sw, i, i + 1, KE, KE)
    return sig, x, v


@triton.jit
def _shift(t, N: tl.constexpr, NC: tl.constexpr):
    """Columns moved one position down, the first to the end (NC shifts restore the order)."""
    out = ()
    for c in tl.static_range(NC):
        for i in tl.static_range(N):
            out = out + (t[((c + 1) % NC) * N + i],)
    return out


@triton.jit
def _complete_first(u, good, R: tl.constexpr, CC: tl.constexpr):
    """Column 0 of U replaced, where it is not ``good``, by the unit vector least represented
    in the good columns, orthogonalised against them (Gram-Schmidt, twice) and normalised."""
    zero = tl.zeros_like(u[0])
    need = ~good[0]
    best = zero
    e = tl.zeros(zero.shape, dtype=tl.int32)
    for r in tl.static_range(R):
        rn = zero
        for c in tl.static_range(CC):
            rn += tl.where(good[c], u[c * R + r] * u[c * R + r], 0.0)
        if r == 0:
            best = rn
        else:
            better = rn < best
            best = tl.where(better, rn, best)
            e = tl.where(better, r, e)
    w = ()
    for r in tl.static_range(R):
        w = w + ((e == r).to(zero.dtype),)
    for _gs in tl.static_range(2):
        coef = ()
        for c in tl.static_range(CC):
            dot = zero
            for r in tl.static_range(R):
                dot += u[c * R + r] * w[r]
            coef = coef + (tl.where(good[c], dot, 0.0),)
        nw = ()
        for r in tl.static_range(R):
            acc = w[r]
            for c in tl.static_range(CC):
                acc -= u[c * R + r] * coef[c]
            nw = nw + (acc,)
        w = nw
    nrm = _norm(w, 0, R)
    nu = ()
    for c in tl.static_range(CC):
        for r in tl.static_range(R):
            if c == 0:
                nu = nu + (tl.where(need, w[r] / nrm, u[r]),)
            else:
                nu = nu + (u[c * R + r],)
    ng = (good[0] | need,)
    for c in tl.static_range(1, CC):
        ng = ng + (good[c],)
    return nu, ng


@triton.jit
def _svd_lanes_kernel(a_ptr, s_ptr, w_ptr, v_ptr, p_ptr, atol_ptr, rtol_ptr, atol_s, rtol_s, nbatch, tol, tiny, safe,
                      sab, sar, sac, ssb, swb, swr, swc, svb, svr, svc, spb, spr, spc,
                      BLOCK_B: tl.constexpr, R: tl.constexpr, K: tl.constexpr,
                      CC: tl.constexpr, MODE: tl.constexpr, MAX_SWEEPS: tl.constexpr, TOL_PTR: tl.constexpr):
    """MODE 0: S (sorted); 1: S, U (R x CC) and V; 2: P = V diag(1/s) U^T (K x R) with the cut
    max(atol, rtol * s_max). The matrix of lane l is A[program * BLOCK_B + l] (R x K, R >= K),
    held as KE = K rounded up to even columns (a zero column, never rotated, when K is odd)."""
    KE: tl.constexpr = K + K % 2
    bidx = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    in_b = bidx < nbatch
    b64 = bidx.to(tl.int64)
    x = _gather(a_ptr + b64 * sab, in_b, sar, sac, R, R * K, BLOCK_B)
    scale, unscale = pow2_scale(_amax(x, 0, R * K))
    xs = ()
    for j in tl.static_range(R * KE):
        if j < R * K:
            xs = xs + (x[j] * scale,)  # exact: A's scale no longer matters
        else:
            xs = xs + (tl.zeros_like(x[0]),)
    x = xs
    zero = tl.zeros_like(x[0])
    one = zero + 1.0
    v = (zero,)  # a stand-in when MODE == 0 (never read)
    if MODE != 0:
        v = ()
        for c in tl.static_range(KE):
            for k in tl.static_range(KE):
                if c == k:
                    v = v + (one,)
                else:
                    v = v + (zero,)
    # ---------------------------------------------------------------- sweeps
    # (for loops, the converged sweeps skipped: triton 3.6's layout pass fails on a while loop
    # carrying tuples)
    todo = tl.full([], 1, tl.int32)
    for _sweep in range(0, MAX_SWEEPS):
        if todo > 0:
            moved = tl.zeros([BLOCK_B], dtype=tl.int32)
            for _r in range(0, KE - 1):
                x, v, moved = _round(x, v, moved, tol, tiny, R, KE, MODE != 0)
            todo = tl.sum(moved, axis=0)
    sig = ()
    for c in tl.static_range(K):
        sig = sig + (_norm(x, c * R, R),)  # of the scaled A
    if MODE == 2:
        # ------------------------------------------------------------ pinv
        smax = sig[0]
        for c in tl.static_range(1, K):
            smax = tl.maximum(smax, sig[c])
        atol = atol_s
        rtol = rtol_s
        if TOL_PTR:  # per matrix; else one pair of scalars
            atol = tl.load(atol_ptr + bidx, mask=in_b, other=0.0)
            rtol = tl.load(rtol_ptr + bidx, mask=in_b, other=0.0)
        cut = tl.maximum(atol, rtol * (smax * unscale))
        pm = ()
        for j in tl.static_range(K * R):
            pm = pm + (zero,)
        for c in tl.static_range(K):
            keep = sig[c] * unscale > cut
            f = tl.where(keep, scale / tl.where(keep, sig[c], 1.0), 0.0)  # 1/s_c or 0
            sd = tl.where(sig[c] > 0, sig[c], 1.0)
            u = ()
            for r in tl.static_range(R):
                u = u + (x[c * R + r] / sd,)
            nxt = ()
            for k in tl.static_range(K):
                vk = v[c * KE + k] * f
                for r in tl.static_range(R):
                    nxt = nxt + (pm[k * R + r] + vk * u[r],)
            pm = nxt
        _scatter(p_ptr + b64 * spb, pm, in_b, spc, spr, R, K * R, BLOCK_B)
    else:
        # ------------------------------------------------------------ sort, descending
        for _ps in range(0, (K + 1) // 2):
            sig, x, v = _sort_phase(sig, x, v, 0, R, K, KE, MODE == 1)
            sig, x, v = _sort_phase(sig, x, v, 1, R, K, KE, MODE == 1)
        out_s = ()
        for c in tl.static_range(K):
            out_s = out_s + (sig[c] * unscale,)
        _scatter(s_ptr + b64 * ssb, out_s, in_b, 1, 0, K, K, BLOCK_B)
        if MODE == 1:
            # -------------------------------------------------------- U: normalised columns
            u = ()
            good = ()
            nbad = tl.zeros([BLOCK_B], dtype=tl.int32)
            for c in tl.static_range(CC):
                if c < K:
                    sd = tl.where(sig[c] > 0, sig[c], 1.0)
                    for r in tl.static_range(R):
                        u = u + (x[c * R + r] / sd,)
                    good = good + (sig[c] > safe,)  # a column this small cannot be normalised
                else:
                    for r in tl.static_range(R):
                        u = u + (zero,)
                    good = good + (bidx < 0,)
                nbad += (~good[c] & in_b).to(tl.int32)
            if tl.sum(nbad, axis=0) > 0:
                # each column in turn at position 0 (CC shifts restore the order)
                for _c in range(0, CC):
                    u, good = _complete_first(u, good, R, CC)
                    u = _shift(u, R, CC)
                    good = _shift(good, 1, CC)
            _scatter(w_ptr + b64 * swb, u, in_b, swr, swc, R, R * CC, BLOCK_B)
            vk = ()
            for c in tl.static_range(K):
                for k in tl.static_range(K):
                    vk = vk + (v[c * KE + k],)
            _scatter(v_ptr + b64 * svb, vk, in_b, svr, svc, K, K * K, BLOCK_B)


SVD_LANES = Launcher(_svd_lanes_kernel)


def lanes_fit(R: int, K: int, double: bool) -> bool:
    """Whether an R x K working matrix (R >= K) takes this path (the same rule with or without
    the vectors, so that svdvals gives svd's S)."""
    ke = K + K % 2
    return (R * ke + ke * ke) * (2 if double else 1) <= LANE_WORDS
