"""The gated delta rule (Gated DeltaNet: Qwen3-Next, Qwen3.5 / Qwen3.6 linear-attention layers),
with the semantics and tensor layouts of transformers' ``torch_recurrent_gated_delta_rule`` /
``torch_chunk_gated_delta_rule``.

Per value head, with a state ``S`` of shape ``(Dk, Dv)`` (float32), for each token::

    q, k = l2norm(q), l2norm(k)          # optional, x * rsqrt(sum(x^2) + 1e-6)
    S    = exp(g) * S                    # g <= 0: log of the decay
    d    = beta * (v - S^T k)            # the delta rule: what S does not yet predict
    S    = S + k d^T
    o    = S^T (scale * q)

Value heads ``HV`` may outnumber query/key heads ``HK`` (Qwen3.5: 32 and 16): value head ``h``
reads query/key head ``h // (HV // HK)``, as ``repeat_interleave`` in transformers.

Kernels:

* ``_recurrent_kernel``: one program per (sequence, value head, block of ``Dv``) holds its
  ``(Dk, BV)`` tile of the state in registers and loops over the tokens. With one token
  and the state updated in place it is the decode step (:func:`gated_delta_rule_step`); its
  ``KC`` variant also runs Qwen3.5's short conv of q, k, v on a ring state
  (:mod:`.gated_delta_conv`).
* ``_chunk_prep_kernel`` and ``_chunk_scan_kernel``: the chunked (WY / UT-transform) form
  for prefill (:func:`chunk_gated_delta_rule`). Within a chunk of ``C`` tokens, with
  ``gc`` the cumulative sum of ``g`` and ``A[i, j] = beta_i exp(gc_i - gc_j) k_i.k_j``
  (``j < i``), the deltas are ``D = U - W S0`` with ``U = (I + A)^-1 diag(beta) V`` and
  ``W = (I + A)^-1 diag(beta exp(gc)) K``. The first kernel, parallel over all chunks,
  inverts ``I + A`` by forward substitution and writes ``U``, ``W`` and ``gc``; the second,
  one program per (sequence, head, block of ``Dv``), walks the chunks with the state in
  registers: ``O = exp(gc) Q S0 + (causal(Q K^T) * exp(gc_i - gc_j)) D`` and
  ``S = exp(gc_C) S0 + (K exp(gc_C - gc))^T D``, all float32 dots (on the GPU, chunks of up
  to 32 tokens as three TF32 tensor-core passes: float32-level accuracy; see ``CHUNK_PREC``).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from .._core import alloc
from .._core.backend import (INTERPRET, num_sms, pdl_start, pdl_trigger, tl, triton, triton_reason, needs_grad,
                             use_triton)
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .norm import round_to

L2_EPS = 1e-6  # transformers' (and FLA's) l2norm epsilon


@triton.jit
def _l2norm(x, L2NORM: tl.constexpr, AXIS: tl.constexpr):
    if L2NORM:
        if AXIS == 0:
            x = x * tl.rsqrt(tl.sum(x * x, axis=0) + 1e-6)
        else:
            x = x * tl.rsqrt(tl.sum(x * x, axis=1) + 1e-6)[:, None]
    return x


@triton.jit
def _dot(a, b, PREC: tl.constexpr):
    return tl.dot(a, b, input_precision=PREC)


@triton.jit
def _raw_gates(a, b, decay, dtb):
    """Qwen3.5's gates from the raw projections (float32): ``g = decay * softplus(a + dt_bias)``
    with ``decay = -exp(A_log)`` (softplus as torch's, threshold 20; ``exp(x)`` where
    ``log(1 + exp(x))`` rounds to 0) and ``beta = sigmoid(b)``."""
    x = a + dtb
    sp = tl.where(x > 20.0, x, tl.where(x < -15.0, tl.exp(x), tl.log(1.0 + tl.exp(tl.minimum(x, 20.0)))))
    return decay * sp, tl.sigmoid(b)


@triton.jit
def _conv_hist(m, ch, ring, w_ptr, pos, scc, sct, swc, swk, KC: tl.constexpr):
    """Qwen3.5's depthwise causal conv for one token over channels ``ch``, the history part:
    taps ``0..KC-2`` from the ring state (token t's input in slot ``t % KC``) summed in
    float32, and the last tap's weight (for the token's own input, :func:`_conv_out`)."""
    acc = tl.zeros(ch.shape, dtype=tl.float32)
    for j in tl.static_range(KC - 1):  # token pos - (KC - 1) + j lives in slot (pos + 1 + j) % KC
        hist = tl.load(ring + ch * scc + ((pos + 1 + j) % KC) * sct, mask=m, other=0.0)
        acc += hist.to(tl.float32) * tl.load(w_ptr + ch * swc + j * swk, mask=m, other=0.0).to(tl.float32)
    return acc, tl.load(w_ptr + ch * swc + (KC - 1) * swk, mask=m, other=0.0).to(tl.float32)


@triton.jit
def _conv_out(x, acc, w_last):
    """The conv's last tap on the token's raw input ``x``, SiLU, rounded to the input dtype as
    the conv kernel stores it (float32)."""
    acc += x.to(tl.float32) * w_last
    acc = acc / (1.0 + tl.exp(-acc))
    return round_to(acc, x.dtype).to(tl.float32)


@triton.jit
def _delta_step(S, q, k, v, gt, bt, valid, scale, decay, dtb, L2NORM: tl.constexpr, RAW_GATES: tl.constexpr):
    """One token of the gated delta rule on the state tile S (BK, BV), float32: returns the
    new state and the token's output (zero where not ``valid``)."""
    if RAW_GATES:
        gt, bt = _raw_gates(gt, bt, decay, dtb)
    q = _l2norm(q, L2NORM, 0) * scale
    k = _l2norm(k, L2NORM, 0)
    S = S * tl.exp(gt)
    d = (v - tl.sum(S * k[:, None], axis=0)) * bt
    S = S + k[:, None] * d[None, :]
    return S, tl.where(valid, tl.sum(S * q[:, None], axis=0), 0.0)


@triton.jit
def _recurrent_kernel(q_ptr, k_ptr, v_ptr, g_ptr, b_ptr, o_ptr, si_ptr, so_ptr, idx_ptr, alog_ptr, dtb_ptr,
                      cs_ptr, cw_ptr, pos_ptr,
                      T, HV, GROUP, Dk, Dv, scale,
                      sqb, sqt, sqh, sqd, skb, skt, skh, skd, svb, svt, svh, svd,
                      sgb, sgt, sgh, sbb, sbt, sbh, sob, sot, soh,
                      sib, sih, sik, siv, ssb, ssh, ssk, ssv, scb, scc, sct, swc, swk, kd,
                      L2NORM: tl.constexpr, HAS_INIT: tl.constexpr, HAS_IDX: tl.constexpr,
                      RAW_GATES: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, KC: tl.constexpr = 0,
                      PDL: tl.constexpr = 0):
    # KC > 0: q, k, v are the raw inputs of a KC-tap conv whose ring state cs (B, C, KC) is
    # indexed by token position (pos_ptr); channels q: [0, kd), k: [kd, 2 kd), v: [2 kd, C).
    # One token (T == 1), without the token loop: every load that depends on no other (the
    # token's inputs and gates, the slot, the position) is issued before the state and the
    # ring are read, so their latencies overlap. Reads touch the KC - 1 slots of earlier
    # tokens, writes only slot pos % KC: programs sharing a key head never race.
    pdl_start(PDL)
    pid_v = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // HV).to(tl.int64)
    h = pid_bh % HV
    hk = h // GROUP
    ok = tl.arange(0, BK)
    ov = pid_v * BV + tl.arange(0, BV)
    mk = ok < Dk
    mv = ov < Dv
    q_ptr += b * sqb + hk * sqh + ok * sqd
    k_ptr += b * skb + hk * skh + ok * skd
    v_ptr += b * svb + h * svh + ov * svd
    g_ptr += b * sgb + h * sgh
    b_ptr += b * sbb + h * sbh
    o_ptr += b * sob + h * soh + ov
    if KC > 0:
        xq = tl.load(q_ptr, mask=mk, other=0.0)
        xk = tl.load(k_ptr, mask=mk, other=0.0)
        xv = tl.load(v_ptr, mask=mv, other=0.0)
        gt = tl.load(g_ptr).to(tl.float32)
        bt = tl.load(b_ptr).to(tl.float32)
        pos = tl.load(pos_ptr + b)
    if HAS_IDX:  # a slot of a state pool; a negative slot is padding: zero output, no update
        slot = tl.load(idx_ptr + b).to(tl.int64)
    else:
        slot = b
    valid = (tl.zeros([BV], dtype=tl.int64) + slot) >= 0  # as a vector: the interpreter needs it
    smask = mk[:, None] & (mv & valid)[None, :]
    if HAS_INIT:
        S = tl.load(si_ptr + slot * sib + h * sih + ok[:, None] * sik + ov[None, :] * siv,
                    mask=smask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    pdl_trigger(PDL)  # (a no-op unless backend.PDL_LATE names this module: it cost Qwen3.6 2%)
    decay = 0.0
    dtb = 0.0
    if RAW_GATES:  # Qwen3.5's gating from the raw projections: g = -exp(A_log) softplus(a + dt_bias)
        decay = -tl.exp(tl.load(alog_ptr + h).to(tl.float32))
        dtb = tl.load(dtb_ptr + h).to(tl.float32)
    if KC > 0:
        ring = cs_ptr + b * scb
        cq = hk * Dk + ok
        cv = 2 * kd + h * Dv + ov
        aq, wq = _conv_hist(mk, cq, ring, cw_ptr, pos, scc, sct, swc, swk, KC)
        ak, wk = _conv_hist(mk, cq + kd, ring, cw_ptr, pos, scc, sct, swc, swk, KC)
        av, wv = _conv_hist(mv, cv, ring, cw_ptr, pos, scc, sct, swc, swk, KC)
        mine = ring + (pos % KC) * sct  # this token's ring slot
        cdt = cs_ptr.dtype.element_ty
        tl.store(mine + cv * scc, xv.to(cdt), mask=mv)
        # one writer for the shared q/k channels (a vector mask: the interpreter needs it)
        own = mk & ((tl.zeros([BK], dtype=tl.int32) + (h % GROUP) + pid_v) == 0)
        tl.store(mine + cq * scc, xq.to(cdt), mask=own)
        tl.store(mine + (cq + kd) * scc, xk.to(cdt), mask=own)
        S, o = _delta_step(S, _conv_out(xq, aq, wq), _conv_out(xk, ak, wk), _conv_out(xv, av, wv), gt, bt,
                           valid, scale, decay, dtb, L2NORM, RAW_GATES)
        tl.store(o_ptr, round_to(o, o_ptr.dtype.element_ty), mask=mv)
    else:
        for _ in range(T):  # the pointers advance by a token each step (64-bit arithmetic)
            q = tl.load(q_ptr, mask=mk, other=0.0).to(tl.float32)
            k = tl.load(k_ptr, mask=mk, other=0.0).to(tl.float32)
            v = tl.load(v_ptr, mask=mv, other=0.0).to(tl.float32)
            gt = tl.load(g_ptr).to(tl.float32)
            bt = tl.load(b_ptr).to(tl.float32)
            S, o = _delta_step(S, q, k, v, gt, bt, valid, scale, decay, dtb, L2NORM, RAW_GATES)
            tl.store(o_ptr, round_to(o, o_ptr.dtype.element_ty), mask=mv)
            q_ptr += sqt
            k_ptr += skt
            v_ptr += svt
            g_ptr += sgt
            b_ptr += sbt
            o_ptr += sot
    tl.store(so_ptr + slot * ssb + h * ssh + ok[:, None] * ssk + ov[None, :] * ssv, S, mask=smask)


@triton.jit
def _chunk_prep_kernel(k_ptr, v_ptr, g_ptr, b_ptr, w_ptr, u_ptr, gc_ptr, alog_ptr, dtb_ptr,
                       T, Tp, HV, GROUP, Dk, Dv,
                       skb, skt, skh, skd, svb, svt, svh, svd, sgb, sgt, sgh, sbb, sbt, sbh,
                       L2NORM: tl.constexpr, RAW_GATES: tl.constexpr, C: tl.constexpr, BK: tl.constexpr,
                       BV: tl.constexpr, PREC: tl.constexpr):
    c = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // HV).to(tl.int64)
    h = pid_bh % HV
    hk = h // GROUP
    i = tl.arange(0, C)
    t = (c * C + i).to(tl.int64)  # 64-bit: t * stride can pass 2**31 on long prompts
    tm = t < T
    ok = tl.arange(0, BK)
    mk = ok < Dk
    K = tl.load(k_ptr + b * skb + hk * skh + t[:, None] * skt + ok[None, :] * skd,
                mask=tm[:, None] & mk[None, :], other=0.0).to(tl.float32)
    K = _l2norm(K, L2NORM, 1)
    g = tl.load(g_ptr + b * sgb + h * sgh + t * sgt, mask=tm, other=0.0).to(tl.float32)
    beta = tl.load(b_ptr + b * sbb + h * sbh + t * sbt, mask=tm, other=0.0).to(tl.float32)
    if RAW_GATES:  # the raw projections a, b; tokens past T keep g = beta = 0
        g, beta = _raw_gates(g, beta, -tl.exp(tl.load(alog_ptr + h).to(tl.float32)),
                             tl.load(dtb_ptr + h).to(tl.float32))
        g = tl.where(tm, g, 0.0)
        beta = tl.where(tm, beta, 0.0)
    gc = tl.cumsum(g, axis=0)
    # At[r, s] = A[s, r] = beta_s exp(gc_s - gc_r) k_s.k_r for s > r (A transposed, so that
    # row j of A is a column reduction below)
    rr = i[:, None]
    cc = i[None, :]
    low = cc > rr
    At = tl.where(low, beta[None, :] * tl.exp(tl.where(low, gc[None, :] - gc[:, None], 0.0))
                  * _dot(K, tl.trans(K), PREC), 0.0)
    # Tm = (I + A)^-1 by forward substitution: row j = e_j - sum_{r<j} A[j, r] Tm[r, :]
    Tm = tl.where(rr == cc, 1.0, 0.0)
    for j in range(1, C):
        a = tl.sum(tl.where(cc == j, At, 0.0), axis=1)
        Tm = tl.where(rr == j, Tm - tl.sum(a[:, None] * Tm, axis=0)[None, :], Tm)
    base = pid_bh.to(tl.int64) * Tp + c * C
    W = _dot(Tm, K * (beta * tl.exp(gc))[:, None], PREC)
    tl.store(w_ptr + (base + i)[:, None] * Dk + ok[None, :], W, mask=mk[None, :])
    tl.store(gc_ptr + base + i, gc)
    for v0 in range(0, Dv, BV):
        ov = v0 + tl.arange(0, BV)
        mv = ov < Dv
        V = tl.load(v_ptr + b * svb + h * svh + t[:, None] * svt + ov[None, :] * svd,
                    mask=tm[:, None] & mv[None, :], other=0.0).to(tl.float32)
        U = _dot(Tm, V * beta[:, None], PREC)
        tl.store(u_ptr + (base + i)[:, None] * Dv + ov[None, :], U, mask=mv[None, :])


@triton.jit
def _chunk_scan_kernel(q_ptr, k_ptr, w_ptr, u_ptr, gc_ptr, o_ptr, si_ptr, so_ptr,
                       T, Tp, HV, GROUP, Dk, Dv, scale,
                       sqb, sqt, sqh, sqd, skb, skt, skh, skd, sob, sot, soh,
                       sib, sih, sik, siv,
                       L2NORM: tl.constexpr, HAS_INIT: tl.constexpr,
                       C: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PREC: tl.constexpr):
    pid_v = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // HV).to(tl.int64)
    h = pid_bh % HV
    hk = h // GROUP
    i = tl.arange(0, C)
    ok = tl.arange(0, BK)
    ov = pid_v * BV + tl.arange(0, BV)
    mk = ok < Dk
    mv = ov < Dv
    smask = mk[:, None] & mv[None, :]
    if HAS_INIT:
        S = tl.load(si_ptr + b * sib + h * sih + ok[:, None] * sik + ov[None, :] * siv,
                    mask=smask, other=0.0).to(tl.float32)
    else:
        S = tl.zeros([BK, BV], dtype=tl.float32)
    causal = i[None, :] <= i[:, None]
    for c in range(0, tl.cdiv(T, C)):
        t = (c * C + i).to(tl.int64)
        tm = t < T
        lmask = tm[:, None] & mk[None, :]
        Q = tl.load(q_ptr + b * sqb + hk * sqh + t[:, None] * sqt + ok[None, :] * sqd,
                    mask=lmask, other=0.0).to(tl.float32)
        K = tl.load(k_ptr + b * skb + hk * skh + t[:, None] * skt + ok[None, :] * skd,
                    mask=lmask, other=0.0).to(tl.float32)
        Q = _l2norm(Q, L2NORM, 1) * scale
        K = _l2norm(K, L2NORM, 1)
        base = pid_bh.to(tl.int64) * Tp + c * C
        gc = tl.load(gc_ptr + base + i)
        gl = tl.load(gc_ptr + base + C - 1)  # padding has g = 0: the last valid token's gc
        W = tl.load(w_ptr + (base + i)[:, None] * Dk + ok[None, :], mask=mk[None, :], other=0.0)
        U = tl.load(u_ptr + (base + i)[:, None] * Dv + ov[None, :], mask=mv[None, :], other=0.0)
        D = U - _dot(W, S, PREC)
        P = tl.where(causal, _dot(Q, tl.trans(K), PREC)
                     * tl.exp(tl.where(causal, gc[:, None] - gc[None, :], 0.0)), 0.0)
        O = tl.exp(gc)[:, None] * _dot(Q, S, PREC) + _dot(P, D, PREC)
        tl.store(o_ptr + b * sob + h * soh + t[:, None] * sot + ov[None, :],
                 round_to(O, o_ptr.dtype.element_ty), mask=tm[:, None] & mv[None, :])
        S = tl.exp(gl) * S + _dot(tl.trans(K * tl.exp(gl - gc)[:, None]), D, PREC)
    tl.store(so_ptr + pid_bh.to(tl.int64) * Dk * Dv + ok[:, None] * Dv + ov[None, :], S, mask=smask)


# ---------------------------------------------------------------------------- launchers

#: The chunked form's plan (tuning knobs, scripts/tune_gated_delta.py): chunk size when the
#: caller gives none, the dots' precision for chunks of up to 32 tokens ("ieee": exact float32
#: on the FMA units; "tf32x3": three TF32 tensor-core passes, float32-level accuracy), value
#: columns per program of the scan and of the prep kernel, warps (None: by tile size). H200,
#: Qwen3.6's 16 / 32 heads of 128, bf16 (tune_gated_delta-{9434355,815d993}): 512 tokens
#: 5103 us with 64-token chunks and ieee dots (the scan kernel spills: ptxas gives it 32
#: registers and a 7.8 KB stack), 433 us with 16 (ieee, 4 warps), 257 us with 16 and tf32x3
#: (4096 tokens: 40.1 ms -> 1.69 ms); the same errors against float64 (state 2.5e-7). The
#: recurrent kernel over the tokens: 623 us / 6.4 ms.
DEFAULT_CHUNK = 16
CHUNK_PREC = "tf32x3"
SCAN_BV = 32
PREP_BV = 64
CHUNK_WARPS = 4
#: Widest key dim (padded) of the chunked kernels: wider keys take the recurrent kernel (the
#: chunk tiles would not fit shared memory).
CHUNK_MAX_DK = 128

_RECURRENT = Launcher(_recurrent_kernel, pdl=True)
_PREP = Launcher(_chunk_prep_kernel)
_SCAN = Launcher(_chunk_scan_kernel)


def _step_bv(n_bh: int, Dv: int, device) -> int:
    """Block of Dv per program: as wide as keeps >= 2 programs per SM (decode batch 1 has
    few (sequence, head) pairs)."""
    if INTERPRET:
        return min(16, next_pow2(Dv))
    sms, bv = num_sms(device), 64
    while bv > 16 and n_bh * cdiv(Dv, bv) < 2 * sms:
        bv //= 2
    return min(bv, next_pow2(Dv))


#: The kernels' grids hold batch x value heads in their second dimension, whose CUDA limit is
#: 65535: larger batches are launched in slices (a knob for tests).
GRID_Y_MAX = 65535


def _batch_slices(B: int, HV: int) -> list:
    per = max(1, GRID_Y_MAX // max(1, HV))
    return [slice(b0, min(B, b0 + per)) for b0 in range(0, B, per)]


def _launch_recurrent(q, k, v, g, beta, scale, l2, state_in, state_out, idx, a_log=None, dt_bias=None, conv=None):
    """q, k (B, T, HK, Dk); v (B, T, HV, Dv); g, beta (B, T, HV). Writes o (B, T, HV, Dv)
    and state_out (may be state_in: in place). ``conv``: (ring (B, C, KC), weight (C, KC),
    pos (B,)): q, k, v are views of the conv's raw input (channels q | k | v), T == 1."""
    B, T, HK, Dk = q.shape
    HV, Dv = v.shape[2], v.shape[3]
    parts = _batch_slices(B, HV)
    if len(parts) > 1:  # (a state pool indexed by idx is shared; per-sequence states are sliced)
        def per(t, s):
            return t if t is None or idx is not None else t[s]
        return torch.cat([_launch_recurrent(
            q[s], k[s], v[s], g[s], beta[s], scale, l2, per(state_in, s), per(state_out, s),
            idx[s] if idx is not None else None, a_log, dt_bias,
            None if conv is None else (conv[0][s], conv[1], conv[2][s])) for s in parts])
    o = alloc.empty(B, T, HV, Dv, dtype=q.dtype, device=q.device)
    if B * HV == 0 or Dv == 0:
        return o
    bk = next_pow2(Dk)
    bv = _step_bv(B * HV, Dv, q.device)
    si = state_in if state_in is not None else state_out
    ring, cw, pos = conv if conv is not None else (o, o, o)
    cstr = (*ring.stride(), *cw.stride()) if conv is not None else (0,) * 5
    _RECURRENT[(cdiv(Dv, bv), B * HV)](
        q, k, v, g, beta, o, si, state_out, idx if idx is not None else o,
        a_log if a_log is not None else o, dt_bias if dt_bias is not None else o, ring, cw, pos,
        T, HV, HV // HK, Dk, Dv, float(scale),
        *q.stride(), *k.stride(), *v.stride(), *g.stride(), *beta.stride(), *o.stride()[:3],
        *si.stride(), *state_out.stride(), *cstr, HK * Dk,
        L2NORM=l2, HAS_INIT=state_in is not None, HAS_IDX=idx is not None, RAW_GATES=a_log is not None,
        BK=bk, BV=bv, KC=cw.shape[1] if conv is not None else 0,
        num_warps=max(1, min(8, bk * bv // 512)))
    return o


def _launch_chunk(q, k, v, g, beta, scale, l2, initial_state, chunk_size, a_log=None, dt_bias=None):
    B, T, HK, Dk = q.shape
    HV, Dv = v.shape[2], v.shape[3]
    parts = _batch_slices(B, HV)
    if len(parts) > 1:
        outs = [_launch_chunk(q[s], k[s], v[s], g[s], beta[s], scale, l2,
                              None if initial_state is None else initial_state[s], chunk_size, a_log, dt_bias)
                for s in parts]
        return torch.cat([o for o, _ in outs]), torch.cat([st for _, st in outs])
    o = alloc.empty(B, T, HV, Dv, dtype=q.dtype, device=q.device)
    state = alloc.empty(B, HV, Dk, Dv, dtype=torch.float32, device=q.device)
    if B * HV * Dk * Dv == 0:
        return o, state
    if T == 0:
        if initial_state is None:
            state.zero_()
        else:
            state.copy_(initial_state)
        return o, state
    C = chunk_size
    nc = cdiv(T, C)
    Tp = nc * C
    w = alloc.empty(B * HV * Tp * Dk, dtype=torch.float32, device=q.device)
    u = alloc.empty(B * HV * Tp * Dv, dtype=torch.float32, device=q.device)
    gc = alloc.empty(B * HV * Tp, dtype=torch.float32, device=q.device)
    bk = max(16, next_pow2(Dk))
    if INTERPRET or C > 32:  # (64-token tf32x3 tiles overflow shared memory)
        prec, warps = "ieee", 4 if C * bk <= 4096 else 8
    else:
        prec, warps = CHUNK_PREC, CHUNK_WARPS or (4 if C * bk <= 4096 else 8)
    bv = 16 if INTERPRET else min(PREP_BV, max(16, next_pow2(Dv)))
    _PREP[(nc, B * HV)](
        k, v, g, beta, w, u, gc, a_log if a_log is not None else gc, dt_bias if dt_bias is not None else gc,
        T, Tp, HV, HV // HK, Dk, Dv,
        *k.stride(), *v.stride(), *g.stride(), *beta.stride(),
        L2NORM=l2, RAW_GATES=a_log is not None, C=C, BK=bk, BV=bv, PREC=prec, num_warps=warps)
    bv = 16 if INTERPRET else min(SCAN_BV, max(16, next_pow2(Dv)))
    si = initial_state if initial_state is not None else state
    _SCAN[(cdiv(Dv, bv), B * HV)](
        q, k, w, u, gc, o, si, state, T, Tp, HV, HV // HK, Dk, Dv, float(scale),
        *q.stride(), *k.stride(), *o.stride()[:3], *si.stride(),
        L2NORM=l2, HAS_INIT=initial_state is not None, C=C, BK=bk, BV=bv, PREC=prec,
        num_warps=warps)
    return o, state


# ---------------------------------------------------------------------------- reference

def _l2n(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS)


def reference_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                               beta: torch.Tensor, *, scale: Optional[float] = None,
                               initial_state: Optional[torch.Tensor] = None,
                               output_final_state: bool = True, use_qk_l2norm: bool = True):
    """The recurrence token by token in plain PyTorch, in float32 (float64 when any input is
    float64): the oracle of the tests and the path where the kernels do not run.
    Layouts as :func:`chunk_gated_delta_rule`; returns ``(o, final_state or None)``."""
    B, T, HK, Dk = q.shape
    HV, Dv = v.shape[2], v.shape[3]
    dt = torch.float32
    for t in (q, k, v, g, beta, initial_state):
        if t is not None:
            dt = torch.promote_types(dt, t.dtype)
    rep = HV // HK
    qf, kf = (x.to(dt).repeat_interleave(rep, dim=2) for x in (q, k))
    if use_qk_l2norm:
        qf, kf = _l2n(qf), _l2n(kf)
    qf = qf * (Dk ** -0.5 if scale is None else scale)
    vf, gf, bf = v.to(dt), g.to(dt), beta.to(dt)
    S = (torch.zeros(B, HV, Dk, Dv, dtype=dt, device=q.device) if initial_state is None
         else initial_state.to(dt).clone())
    o = torch.empty(B, T, HV, Dv, dtype=dt, device=q.device)
    for t in range(T):
        S = S * gf[:, t].exp()[..., None, None]
        kt = kf[:, t]
        d = (vf[:, t] - torch.einsum("bhk,bhkv->bhv", kt, S)) * bf[:, t, :, None]
        S = S + kt[..., :, None] * d[..., None, :]
        o[:, t] = torch.einsum("bhk,bhkv->bhv", qf[:, t], S)
    return o.to(q.dtype), (S if output_final_state else None)


# ---------------------------------------------------------------------------- ops

def _kernel_ok(*ts) -> bool:
    return use_triton(ts[0]) and all(t.dtype in KERNEL_DTYPES for t in ts if t is not None)


def _step_fake(q, k, v, g, beta, state, state_indices, scale, l2, a_log, dt_bias):
    return q.new_empty(v.shape)


def raw_gates(a: torch.Tensor, b: torch.Tensor, a_log: torch.Tensor, dt_bias: torch.Tensor):
    """``(g, beta)`` from Qwen3.5's raw projections, as transformers computes them (float32)."""
    g = -torch.exp(a_log.float()) * torch.nn.functional.softplus(a.float() + dt_bias.float())
    return g, torch.sigmoid(b.float())


@register_op("gated_delta_rule_step", fake=_step_fake, mutates_args=("state",))
def _step_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
             state: torch.Tensor, state_indices: Optional[torch.Tensor], scale: float,
             l2: bool, a_log: Optional[torch.Tensor], dt_bias: Optional[torch.Tensor]) -> torch.Tensor:
    """q, k (B, HK, Dk); v (B, HV, Dv); g, beta (B, HV) (raw a, b with a_log, dt_bias (HV,));
    state (N, HV, Dk, Dv) float32."""
    q4, k4, v4, g3, b3 = (x.unsqueeze(1) for x in (q, k, v, g, beta))
    if _kernel_ok(q, k, v, g, beta, a_log, dt_bias):
        return _launch_recurrent(q4, k4, v4, g3, b3, scale, l2, state, state, state_indices, a_log, dt_bias)[:, 0]
    if a_log is not None:
        g3, b3 = raw_gates(g3, b3, a_log, dt_bias)
    sel = slice(None) if state_indices is None else state_indices.long().clamp(min=0)
    o, new = reference_gated_delta_rule(q4, k4, v4, g3, b3, scale=scale, initial_state=state[sel],
                                        use_qk_l2norm=l2)
    o = o[:, 0]
    if state_indices is None:
        state.copy_(new)
        return o
    keep = state_indices >= 0  # padding slots: zero output, state untouched
    state.index_copy_(0, sel[keep], new[keep].to(state.dtype))
    return torch.where(keep[:, None, None], o, torch.zeros((), dtype=o.dtype, device=o.device))


def _seq_fake(q, k, v, g, beta, initial_state, scale, l2, chunk_size, a_log, dt_bias):
    B, T, HK, Dk = q.shape
    return q.new_empty(v.shape), q.new_empty(B, v.shape[2], Dk, v.shape[3], dtype=torch.float32)


@register_op("chunk_gated_delta_rule", fake=_seq_fake)
def _chunk_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
              initial_state: Optional[torch.Tensor], scale: float, l2: bool,
              chunk_size: int, a_log: Optional[torch.Tensor],
              dt_bias: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """chunk_size 0: the recurrent kernel over the tokens. a_log, dt_bias: g and beta are the
    raw projections a and b."""
    if chunk_size not in (0, 16, 32, 64):  # (the op is callable directly: its chunk dots need K >= 16)
        raise ValueError(f"chunk_gated_delta_rule: chunk_size expected 0, 16, 32 or 64, got {chunk_size!r}")
    if not _kernel_ok(q, k, v, g, beta, initial_state, a_log, dt_bias):
        if a_log is not None:
            g, beta = raw_gates(g, beta, a_log, dt_bias)
        o, s = reference_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                                          use_qk_l2norm=l2)
        return o, s.float()
    if chunk_size and (INTERPRET or next_pow2(q.shape[3]) <= CHUNK_MAX_DK):
        return _launch_chunk(q, k, v, g, beta, scale, l2, initial_state, chunk_size, a_log, dt_bias)
    B, T, HK, Dk = q.shape
    state = alloc.empty(B, v.shape[2], Dk, v.shape[3], dtype=torch.float32, device=q.device)
    return _launch_recurrent(q, k, v, g, beta, scale, l2, initial_state, state, None, a_log, dt_bias), state


# ---------------------------------------------------------------------------- checks

def _shape(name, t, want, what):
    if tuple(t.shape) != tuple(want):
        raise ValueError(f"{name}: expected shape {tuple(want)} {what}, got {tuple(t.shape)}")


def _check_raw(A_log, dt_bias, HV: int, device, *tensors) -> None:
    """Qwen3.5's raw-gate parameters: both or neither, float ``(HV,)`` on ``device``; and no
    input that autograd would need a gradient of (``tensors``: the kernels have no backward)."""
    if needs_grad(A_log, dt_bias, *tensors):
        raise NotImplementedError(
            "q, k, v, g, beta: the gated delta kernels are inference-only (no backward), and an input requires "
            "grad with autograd recording; run under torch.no_grad() / inference_mode(), or use "
            "fastpath.reference_gated_delta_rule (PyTorch ops) for gradients")
    if (A_log is None) != (dt_bias is None):
        raise ValueError("A_log, dt_bias: give both (raw gates) or neither")
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias)):
        if t is not None:
            check_tensor(name, t)
            if not t.dtype.is_floating_point or tuple(t.shape) != (HV,) or t.device != device:
                raise ValueError(f"{name}: expected a float ({HV},) tensor on {device}, "
                                 f"got {t.dtype} {tuple(t.shape)} on {t.device}")


def _check_seq(q, k, v, g, beta, initial_state, scale, names=("q", "k", "v", "g", "beta")):
    for name, t in zip(names, (q, k, v, g, beta)):
        check_tensor(name, t)
        if not t.dtype.is_floating_point:
            raise TypeError(f"{name}: expected a floating-point tensor, got {t.dtype}")
        if t.device != q.device:
            raise ValueError(f"{name}: expected a tensor on {q.device}, got {t.device}")
    if q.dim() != 4:
        raise ValueError(f"q: expected 4 dimensions (batch, tokens, key heads, key dim), got shape {tuple(q.shape)}")
    B, T, HK, Dk = q.shape
    _shape("k", k, q.shape, "(q's shape)")
    if v.dim() != 4 or v.shape[:2] != q.shape[:2]:
        raise ValueError(f"v: expected shape ({B}, {T}, value heads, value dim), got {tuple(v.shape)}")
    HV, Dv = v.shape[2], v.shape[3]
    if HK == 0 or HV % HK:
        raise ValueError(f"v: the value heads ({HV}) must be a multiple of the query/key heads ({HK})")
    _shape("g", g, (B, T, HV), "(batch, tokens, value heads)")
    _shape("beta", beta, (B, T, HV), "(batch, tokens, value heads)")
    if initial_state is not None:
        check_tensor("initial_state", initial_state)
        if not initial_state.dtype.is_floating_point:
            raise TypeError(f"initial_state: expected a floating-point tensor, got {initial_state.dtype}")
        _shape("initial_state", initial_state, (B, HV, Dk, Dv), "(batch, value heads, key dim, value dim)")
        if initial_state.device != q.device:
            raise ValueError(f"initial_state: expected a tensor on {q.device}, got {initial_state.device}")
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"scale: expected a float or None, got {type(scale).__name__}")
    return float(Dk ** -0.5 if scale is None else scale)


def gated_delta_rule_step(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                          beta: torch.Tensor, state: torch.Tensor, *, scale: Optional[float] = None,
                          use_qk_l2norm: bool = True, state_indices: Optional[torch.Tensor] = None,
                          A_log: Optional[torch.Tensor] = None, dt_bias: Optional[torch.Tensor] = None
                          ) -> torch.Tensor:
    """One decode step of the gated delta rule: updates ``state`` in place and returns the
    output (transformers' ``torch_recurrent_gated_delta_rule`` for one token, with the
    state kept).

    Parameters
    ----------
    q, k : ``(B, HK, Dk)``, or ``(B, 1, HK, Dk)`` as the model's ``(batch, tokens, heads,
        dim)`` tensors; any float dtype, any strides (e.g. views of the conv output).
    v : ``(B, HV, Dv)`` (or ``(B, 1, HV, Dv)``); ``HV`` a multiple of ``HK``.
    g : ``(B, HV)`` (or ``(B, 1, HV)``): log of the decay (``<= 0``), float32 in the models.
    beta : ``(B, HV)`` (or ``(B, 1, HV)``): the write strength, usually ``sigmoid(b)``.
    state : ``(B, HV, Dk, Dv)`` float32, any strides, updated in place; or a pool
        ``(N, HV, Dk, Dv)`` with ``state_indices``.
    scale : multiplies q; default ``Dk ** -0.5``.
    use_qk_l2norm : l2-normalise q and k first (``x * rsqrt(sum(x^2) + 1e-6)``), as the
        models do (``use_qk_l2norm_in_kernel=True``).
    state_indices : optional ``(B,)`` int32/int64: sequence ``b`` uses ``state[state_indices[b]]``;
        a negative index marks padding (output zeros, no state touched). Slots must be
        distinct; they are not checked against ``N`` (that would need a host sync).
    A_log, dt_bias : optional ``(HV,)`` float tensors, both or neither: then ``g`` and ``beta``
        are Qwen3.5's raw projections ``a`` and ``b`` and the kernel computes
        ``g = -exp(A_log) * softplus(a + dt_bias)`` and ``beta = sigmoid(b)`` itself (float32),
        saving the half-dozen small kernels of the eager gating on every decode step.

    Returns
    -------
    ``o`` of ``v``'s shape, in ``q``'s dtype. Float32 arithmetic, no host synchronisation:
    capturable in a CUDA graph. One program per (sequence, value head, block of Dv) holds
    its tile of the state in registers.

    Raises
    ------
    TypeError for non-float tensors or a state that is not float32; ValueError for shapes
    that do not fit together.

    Example
    -------
    >>> import torch, fastpath
    >>> q, k, v = torch.randn(2, 16, 128), torch.randn(2, 16, 128), torch.randn(2, 32, 128)
    >>> g, beta = -torch.rand(2, 32), torch.rand(2, 32)
    >>> state = torch.zeros(2, 32, 128, 128)
    >>> o = fastpath.gated_delta_rule_step(q, k, v, g, beta, state)  # state now holds the token
    """
    check_tensor("q", q)
    four = q.dim() == 4
    if four:
        for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
            check_tensor(name, t)
            if t.dim() < 2 or t.shape[1] != 1:
                raise ValueError(f"{name}: a step takes one token; expected dim 1 of size 1 in the 4-D "
                                 f"(batch, 1, ...) form, got shape {tuple(t.shape)}")
        q, k, v, g, beta = (t.squeeze(1) for t in (q, k, v, g, beta))
    elif q.dim() != 3:
        raise ValueError(f"q: expected (batch, key heads, key dim) or (batch, 1, key heads, key dim), "
                         f"got shape {tuple(q.shape)}")
    for name, t in (("k", k), ("v", v), ("g", g), ("beta", beta)):
        check_tensor(name, t)
    if v.dim() != 3 or g.dim() != 2 or beta.dim() != 2:
        raise ValueError(f"v, g, beta: expected (B, HV, Dv), (B, HV), (B, HV), got {tuple(v.shape)}, "
                         f"{tuple(g.shape)}, {tuple(beta.shape)}")
    sc = _check_seq(*(t.unsqueeze(1) for t in (q, k, v, g, beta)), None, scale)
    check_tensor("state", state)
    if state.dtype != torch.float32:
        raise TypeError(f"state: expected a float32 tensor (updated in place), got {state.dtype}")
    B, HV, Dv = v.shape
    Dk = q.shape[-1]
    if state.device != q.device:
        raise ValueError(f"state: expected a tensor on {q.device}, got {state.device}")
    if state_indices is None:
        _shape("state", state, (B, HV, Dk, Dv), "(batch, value heads, key dim, value dim)")
    else:
        check_tensor("state_indices", state_indices, dtypes=(torch.int32, torch.int64))
        _shape("state_indices", state_indices, (B,), "(one state slot per sequence)")
        if state_indices.device != q.device:
            raise ValueError(f"state_indices: expected a tensor on {q.device}, got {state_indices.device}")
        if state.dim() != 4 or tuple(state.shape[1:]) != (HV, Dk, Dv):
            raise ValueError(f"state: expected a pool of shape (N, {HV}, {Dk}, {Dv}), got {tuple(state.shape)}")
    _check_raw(A_log, dt_bias, HV, q.device, q, k, v, g, beta, state)
    o = _step_op(q, k, v, g, beta, state, state_indices, sc, bool(use_qk_l2norm), A_log, dt_bias)
    return o.unsqueeze(1) if four else o


def chunk_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                           beta: torch.Tensor, *, scale: Optional[float] = None,
                           initial_state: Optional[torch.Tensor] = None, output_final_state: bool = True,
                           use_qk_l2norm: bool = True, chunk_size: Optional[int] = None,
                           A_log: Optional[torch.Tensor] = None, dt_bias: Optional[torch.Tensor] = None
                           ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The gated delta rule over a sequence (prefill), in the chunked WY form: transformers'
    ``torch_chunk_gated_delta_rule`` (argument ``use_qk_l2norm`` is their
    ``use_qk_l2norm_in_kernel``, default on as the models call it).

    Parameters
    ----------
    q, k : ``(B, T, HK, Dk)``, float16 / bfloat16 / float32, any strides.
    v : ``(B, T, HV, Dv)``, ``HV`` a multiple of ``HK`` (value head ``h`` reads q/k head
        ``h // (HV // HK)``).
    g, beta : ``(B, T, HV)``: log-decay (``<= 0``) and write strength.
    scale : multiplies q; default ``Dk ** -0.5``.
    initial_state : optional ``(B, HV, Dk, Dv)`` (read as float32), e.g. the state a previous
        prefill chunk returned: prefilling in pieces equals one pass.
    output_final_state : return the final state (float32), else ``None``.
    use_qk_l2norm : l2-normalise q and k (eps 1e-6) first.
    chunk_size : 16, 32 or 64 tokens per chunk (the result does not depend on it); default
        :data:`DEFAULT_CHUNK` (16: the fastest on the H200, 20x 64-token chunks). Key dims
        above :data:`CHUNK_MAX_DK` run the recurrent kernel over the tokens instead.
    A_log, dt_bias : optional ``(HV,)`` float tensors, both or neither: then ``g`` and ``beta``
        are Qwen3.5's raw projections ``a`` and ``b``, and the kernels compute
        ``g = -exp(A_log) * softplus(a + dt_bias)`` and ``beta = sigmoid(b)`` (float32)
        themselves, as :func:`gated_delta_rule_step` does: no eager gating ops per layer.

    Returns
    -------
    ``(o, final_state)``: ``o`` ``(B, T, HV, Dv)`` in ``q``'s dtype; ``final_state``
    ``(B, HV, Dk, Dv)`` float32 or ``None``. Float32 arithmetic throughout (products as three TF32
    tensor-core passes on the GPU, float32-level accuracy). Two launches:
    one parallel over all chunks, one sequential over the chunks of each (sequence, head).

    Raises
    ------
    TypeError for non-float tensors; ValueError for shapes that do not fit together or
    another chunk size.

    Example
    -------
    >>> import torch, fastpath
    >>> q, k, v = torch.randn(1, 100, 16, 128), torch.randn(1, 100, 16, 128), torch.randn(1, 100, 32, 128)
    >>> g, beta = -torch.rand(1, 100, 32), torch.rand(1, 100, 32)
    >>> o, state = fastpath.chunk_gated_delta_rule(q, k, v, g, beta)
    """
    sc = _check_seq(q, k, v, g, beta, initial_state, scale)
    _check_raw(A_log, dt_bias, v.shape[2], q.device, q, k, v, g, beta, initial_state)
    if chunk_size is None:
        chunk_size = DEFAULT_CHUNK
    if chunk_size not in (16, 32, 64):
        raise ValueError(f"chunk_size: expected 16, 32 or 64, got {chunk_size!r}")
    o, s = _chunk_op(q, k, v, g, beta, initial_state, sc, bool(use_qk_l2norm), int(chunk_size), A_log, dt_bias)
    return o, (s if output_final_state else None)


def recurrent_gated_delta_rule(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor,
                               beta: torch.Tensor, *, scale: Optional[float] = None,
                               initial_state: Optional[torch.Tensor] = None, output_final_state: bool = True,
                               use_qk_l2norm: bool = True, A_log: Optional[torch.Tensor] = None,
                               dt_bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """:func:`chunk_gated_delta_rule` computed token by token (transformers'
    ``torch_recurrent_gated_delta_rule``): one program per (sequence, value head, block of
    Dv) loops over the tokens with its state tile in registers. For a few tokens (e.g.
    several tokens per decode step) it beats the chunked form; same arguments and results.
    """
    sc = _check_seq(q, k, v, g, beta, initial_state, scale)
    _check_raw(A_log, dt_bias, v.shape[2], q.device, q, k, v, g, beta, initial_state)
    o, s = _chunk_op(q, k, v, g, beta, initial_state, sc, bool(use_qk_l2norm), 0, A_log, dt_bias)
    return o, (s if output_final_state else None)


FAMILY = {"name": "gated_delta",
          "ops": ["gated_delta_rule_step", "chunk_gated_delta_rule", "recurrent_gated_delta_rule"],
          "reason": triton_reason}
