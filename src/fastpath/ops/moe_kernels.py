"""Triton kernels and block-size plans of :mod:`fastpath.ops.moe` (routing, expert MLPs).

* ``_route_kernel``: one program per token: softmax or sigmoid over the E router logits in
  float32, top-k by one bitonic network over packed (score, index) keys or by repeated
  arg-max, ties to the lowest expert index (a stable descending sort); optional
  renormalisation and scaling. ``_router_kernel``: the router matmul and that routing.
* Decode (9 to 16-48 tokens by default, see ``moe.MAX_DECODE_TOKENS``), no sort:
  ``_gate_up_kernel`` (grid: expert x block of I x block of tokens) finds the tokens routed to
  its expert, streams the expert's gate and up rows of its I-block once with ``tl.dot`` on a
  16..64-row token tile, applies the activation and writes ``h`` for each routed (token, slot)
  pair; ``_down_kernel`` (expert x block of H x block of tokens) does the same for
  ``down_proj`` and writes the weighted ``y`` of each pair in float32; ``_combine_kernel``
  adds the k slots of each token in the fixed order j = 0..k-1 (deterministic, no atomics).
  fp8 weights against bfloat16 x multiply in float16 with x scaled by a power of two per row:
  in every tile, or once by ``_prescale_kernel``. When the pairs are fewer than the experts
  (``BY_PAIR``) the grid runs over pairs instead: the first pair naming an expert computes it
  for every token and the others exit at once, so no program is spent on idle experts.
* Up to ``ROWS_MAX_T`` tokens: ``_gate_up_rows_kernel`` (grid: routed pair x block of I)
  streams the pair's gate and up rows whole, multiplies without tensor cores into a float32
  tile summed over H after the loop, and writes ``h``; ``_down_rows_kernel`` (block of H x token) streams the
  down rows of its outputs for every slot of the token and adds the slots in a fixed order,
  so no combine launch follows. Hundreds of programs keep enough bytes in flight.
* Prefill: ``_align_kernel`` sorts the (token, slot) pairs by expert in one program (the
  grouped GEMMs' row order and group ends), ``_act_kernel`` applies the activation to the
  grouped-GEMM output rows, and ``_combine_kernel`` (``GATHER``) un-permutes, weights and adds
  the k slots.

Expert ids are compared, never used as addresses (except after a range check), so ids
outside ``[0, E)`` select nothing and contribute nothing.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .._core.backend import INTERPRET, num_sms, pdl_start, pdl_trigger, tl, triton
from .._core.launch import cdiv, next_pow2
from .matvec import _dot16, _load_as, _mm, _pow2_of_amax
from .norm import normed_rows, rows_rstd

#: Activation codes of the kernels (``ACT``).
ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "gpt_oss": 3}
ALIASES = {"swish": "silu", "gelu_pytorch_tanh": "gelu_tanh", "gelu_new": "gelu_tanh", "swiglu_oai": "gpt_oss"}


# ---------------------------------------------------------------------------- routing

#: Top-k of the routing kernels by one bitonic network (:func:`_bitonic_topk`) where the k
#: slots (rounded up to a power of two, at least 2: triton 3.6 does not compile ``tl.topk``
#: with k = 1) fit the expert block; else, or when False, TOPK rounds of arg-max. H200, router
#: kernel at one token, H 2048 (scripts/moe_profile.py --router, 53d1f00), bitonic / arg-max:
#: E 128 top-8 4.91 / 7.22 us, E 256 + 1 top-8 5.15 / 7.36, E 32 top-4 4.05 / 4.22 (every
#: expert's rank in one pass, the method before, 8615270: 5.39, 8.61, 4.01). Tests set it to
#: cover both.
TOPK_BITONIC = True


def topk_blocks(E: int, k: int) -> tuple:
    """``(BLOCK_E, BLOCK_K, BITONIC)`` of the routing kernels for ``E`` experts and ``k`` slots
    (plain int math)."""
    block_e, block_k = next_pow2(E), max(2, next_pow2(k))
    return block_e, block_k, TOPK_BITONIC and block_k <= block_e


@triton.jit
def _bitonic_topk(c, offs, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr):
    """Lanes of the BLOCK_K largest ``c`` (no NaN), in descending order, ties to the lower lane
    (as a stable sort): one bitonic top-k (``tl.topk``) over int64 keys whose high word orders
    like the float and whose low word is the inverted lane."""
    bits = c.to(tl.int32, bitcast=True)
    ordered = bits ^ ((bits >> 31) & 0x7FFFFFFF)  # signed-int order of the floats
    key = (ordered.to(tl.int64) << 32) | (BLOCK_E - 1 - offs).to(tl.int64)
    top = tl.topk(key, BLOCK_K)
    return (BLOCK_E - 1 - (top & 0xFFFFFFFF)).to(tl.int32)


@triton.jit
def _route_row(x_ptr, t, sxt, sxe, bias_ptr, w_ptr, ids_ptr, E, swt, sit, scale, eps,
               TOPK: tl.constexpr, SIGMOID: tl.constexpr, HAS_BIAS: tl.constexpr, NORM: tl.constexpr,
               SHARED: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr, BITONIC: tl.constexpr):
    """Route token ``t`` (:func:`_route_vals`) and store its weights and ids."""
    iv, wv, kmask = _route_vals(x_ptr, t, sxt, sxe, bias_ptr, E, scale, eps, TOPK, SIGMOID, HAS_BIAS, NORM, SHARED,
                                BLOCK_E, BLOCK_K, BITONIC)
    kk = tl.arange(0, BLOCK_K)
    tl.store(w_ptr + t * swt + kk, wv, mask=kmask)
    tl.store(ids_ptr + t * sit + kk, iv.to(ids_ptr.dtype.element_ty), mask=kmask)


@triton.jit
def _route_vals(x_ptr, t, sxt, sxe, bias_ptr, E, scale, eps,
                TOPK: tl.constexpr, SIGMOID: tl.constexpr, HAS_BIAS: tl.constexpr, NORM: tl.constexpr,
                SHARED: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr, BITONIC: tl.constexpr):
    """Route token ``t`` from its E logits at ``x_ptr + t * sxt``: softmax or sigmoid in float32,
    top-k (ties to the lowest expert index, as a stable sort; :func:`_bitonic_topk` or TOPK
    rounds of arg-max), optional renormalisation and scaling. SHARED: logit E is a shared
    expert's gate; slot TOPK gets (id E, sigmoid(logit E)). Returns (ids, weights, the slots'
    mask), BLOCK_K each."""
    offs = tl.arange(0, BLOCK_E)
    emask = offs < E
    x = tl.load(x_ptr + t * sxt + offs * sxe, mask=emask, other=-float("inf"), cache_modifier=".cg").to(tl.float32)
    if SIGMOID:
        p = 1.0 / (1.0 + tl.exp(-x))
    else:
        m = tl.max(x, axis=0)
        ex = tl.exp(x - m)
        p = ex / tl.sum(ex, axis=0)
    c = p
    if HAS_BIAS:  # the bias only chooses; the weights come from the unbiased scores
        c = p + tl.load(bias_ptr + offs, mask=emask, other=0.0).to(tl.float32)
    c = tl.where(c != c, float("inf"), c)  # NaN ranks first, as in torch.topk
    kk = tl.arange(0, BLOCK_K)
    if BITONIC:
        iv = _bitonic_topk(tl.where(emask, c, -float("inf")), offs, BLOCK_E, BLOCK_K)
        wv = tl.where(kk < TOPK, tl.gather(p, iv, 0), 0.0)
    else:
        avail = emask
        wv = tl.zeros([BLOCK_K], dtype=tl.float32)
        iv = tl.zeros([BLOCK_K], dtype=tl.int32)
        for j in tl.static_range(TOPK):
            mx = tl.max(tl.where(avail, c, -float("inf")), axis=0)
            idx = tl.min(tl.where(avail & (c == mx), offs, BLOCK_E), axis=0)  # lowest index among ties
            idx = tl.minimum(idx, E - 1)
            wj = tl.sum(tl.where(offs == idx, p, 0.0), axis=0)
            wv = tl.where(kk == j, wj, wv)
            iv = tl.where(kk == j, idx, iv)
            avail = avail & (offs != idx)
    if NORM:
        wv = wv / (tl.sum(wv, axis=0) + eps)
    wv = wv * scale
    kmask = kk < TOPK
    if SHARED:
        g = tl.load(x_ptr + t * sxt + E * sxe, cache_modifier=".cg").to(tl.float32)
        wv = tl.where(kk == TOPK, 1.0 / (1.0 + tl.exp(-g)), wv)
        iv = tl.where(kk == TOPK, E, iv)
        kmask = kk <= TOPK
    return iv, wv, kmask


@triton.jit
def _route_kernel(x_ptr, bias_ptr, w_ptr, ids_ptr, E, sxt, sxe, swt, sit, scale, eps,
                  TOPK: tl.constexpr, SIGMOID: tl.constexpr, HAS_BIAS: tl.constexpr, NORM: tl.constexpr,
                  SHARED: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr, BITONIC: tl.constexpr,
                  PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # one program per token
    t = tl.program_id(0).to(tl.int64)
    _route_row(x_ptr, t, sxt, sxe, bias_ptr, w_ptr, ids_ptr, E, swt, sit, scale, eps,
               TOPK, SIGMOID, HAS_BIAS, NORM, SHARED, BLOCK_E, BLOCK_K, BITONIC)


@triton.jit
def _router_kernel(x_ptr, r_ptr, bias_ptr, lg_ptr, cnt_ptr, w_ptr, ids_ptr, T, H, E, sxt, sxh, srn, srh,
                   swt, sit, scale, eps, res_ptr, nw_ptr, nr_ptr, xn_ptr, srt, srk, snt, snw, norm_eps,
                   TOPK: tl.constexpr, SIGMOID: tl.constexpr, HAS_BIAS: tl.constexpr,
                   NORM: tl.constexpr, SHARED: tl.constexpr, RNE: tl.constexpr, BLOCK_T: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_K: tl.constexpr,
                   BITONIC: tl.constexpr, RMS: tl.constexpr = 0, HAS_RES: tl.constexpr = False,
                   RMS_DT: tl.constexpr = tl.float32, RMS_K: tl.constexpr = 16, W_FIRST: tl.constexpr = False,
                   ROUTE: tl.constexpr = True, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # ROUTE False: the logits only (the gate/up row kernel routes each token itself).
    # The router matmul and the routing in one launch, for a few tokens. Program p computes the
    # logits x_t . R[n] of its BLOCK_N router rows in float32, rounded to x's dtype (as
    # F.linear returns them), into lg ((T, E + SHARED) float32); the last program to take a
    # ticket (acq_rel: every other program's logits are visible to it) routes every token.
    # RMS (1 plain, 2 zero-centred): x is first RMS-normalised (weights nw; with HAS_RES, of
    # x + res), as norm.rms_norm does; program 0 stores the normalised rows into xn (and
    # x + res into nr) for the experts and the next layer.
    NE = E + SHARED
    offs_t = tl.arange(0, BLOCK_T)
    tmask = offs_t < T
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < NE
    x_rows = x_ptr + offs_t.to(tl.int64)[:, None] * sxt
    r_cols = r_ptr + offs_n.to(tl.int64)[None, :] * srn
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    if W_FIRST:  # one tile holds the whole row (BLOCK_H >= H): its router rows load first, so
        # their memory latency overlaps the row's (and the norm's sum of squares)
        offs_k = tl.arange(0, BLOCK_H).to(tl.int64)
        b_first = tl.load(r_cols + offs_k[:, None] * srh, mask=(offs_k < H)[:, None] & nmask[None, :], other=0.0)
    if RMS:
        rstd = rows_rstd(x_ptr, res_ptr, nr_ptr, offs_t.to(tl.int64), tmask, H, sxt, sxh, srt, srk, snt, norm_eps,
                         HAS_RES, False, BLOCK_T, RMS_K)
    for k0 in range(0, H, BLOCK_H):
        offs_k = (k0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        kmask = offs_k < H
        if RMS:
            a = normed_rows(x_ptr, res_ptr, nw_ptr, nr_ptr, xn_ptr, offs_t.to(tl.int64), offs_k,
                            tmask[:, None] & kmask[None, :], kmask, rstd, sxt, sxh, srt, srk, snt, snw,
                            tl.program_id(0) == 0, HAS_RES, True, RMS == 2, RMS_DT)
        else:
            a = tl.load(x_rows + offs_k[None, :] * sxh, mask=tmask[:, None] & kmask[None, :], other=0.0)
            a = a.to(tl.float32)
        if W_FIRST:
            b = b_first.to(tl.float32)
        else:
            b = tl.load(r_cols + offs_k[:, None] * srh, mask=kmask[:, None] & nmask[None, :],
                        other=0.0).to(tl.float32)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    pdl_trigger(PDL)
    acc = _cast(acc, x_ptr.dtype.element_ty, RNE).to(tl.float32)
    tl.store(lg_ptr + offs_t[:, None] * NE + offs_n[None, :], acc, mask=tmask[:, None] & nmask[None, :])
    if ROUTE:
        tl.debug_barrier()  # every thread's logits are written before the release below
        if tl.atomic_add(cnt_ptr, 1, sem="acq_rel") == tl.num_programs(0) - 1:
            tl.atomic_xchg(cnt_ptr, 0)
            for t in range(0, T):
                _route_row(lg_ptr, t, NE, 1, bias_ptr, w_ptr, ids_ptr, E, swt, sit, scale, eps,
                           TOPK, SIGMOID, HAS_BIAS, NORM, SHARED, BLOCK_E, BLOCK_K, BITONIC)


# ---------------------------------------------------------------------------- experts

@triton.jit
def _act(g, u, ACT: tl.constexpr, alpha, limit):
    """``act(gate) * up`` in float32."""
    if ACT == 0:  # SwiGLU
        return g / (1.0 + tl.exp(-g)) * u
    elif ACT == 1:  # GELU (erf) * up
        return 0.5 * g * (1.0 + tl.erf(g * 0.7071067811865476)) * u
    elif ACT == 2:  # GELU (tanh approximation) * up; tanh(z) = 2 sigmoid(2z) - 1
        z = 0.7978845608028654 * (g + 0.044715 * g * g * g)
        return g * (1.0 / (1.0 + tl.exp(-2.0 * z))) * u
    else:  # gpt-oss: clamped SwiGLU with alpha, (up + 1); `where` keeps NaN like torch.clamp
        g = tl.where(g > limit, limit, g)
        u = tl.where(u > limit, limit, tl.where(u < -limit, -limit, u))
        return (u + 1.0) * (g / (1.0 + tl.exp(-alpha * g)))


@triton.jit
def _cast(v, DTYPE: tl.constexpr, RNE: tl.constexpr):
    """float32 -> ``DTYPE``. ``RNE``: round bfloat16 to nearest even by hand (Triton's
    interpreter truncates float32 -> bfloat16; compiled code rounds)."""
    if RNE and DTYPE == tl.bfloat16:
        u = v.to(tl.int32, bitcast=True)
        u = (u + (0x7FFF + ((u >> 16) & 1))) & -65536
        v = u.to(tl.float32, bitcast=True)
    return v.to(DTYPE)


@triton.jit
def _expert_of_program(ids_ptr, sit, sij, E, TOPK: tl.constexpr, BY_PAIR: tl.constexpr, BLOCK_P: tl.constexpr):
    """(expert id as int64, skip flag). ``BY_PAIR``: program p serves the expert of pair p
    unless an earlier pair names the same expert or the id is out of range."""
    pid = tl.program_id(0)
    if BY_PAIR:
        e = tl.load(ids_ptr + (pid // TOPK) * sit + (pid % TOPK) * sij).to(tl.int64)
        q = tl.arange(0, BLOCK_P)
        qm = q < pid
        idq = tl.load(ids_ptr + (q // TOPK) * sit + (q % TOPK) * sij, mask=qm, other=-1)
        dup = tl.sum(((idq == e) & qm).to(tl.int32), axis=0)
        skip = (dup > 0) | (e < 0) | (e >= E)
    else:
        e = pid.to(tl.int64)
        skip = pid < 0
    return e, skip


@triton.jit
def _slots(ids_ptr, sit, sij, offs_t, tmask, e, TOPK: tl.constexpr):
    """For each token of the tile: the slot j with ``ids[t, j] == e`` (the last one), or -1."""
    slot = tl.where(tmask, -1, -1)
    for j in tl.static_range(TOPK):
        idj = tl.load(ids_ptr + offs_t * sit + j * sij, mask=tmask, other=-1)
        slot = tl.where(idj == e, j, slot)
    return slot


@triton.jit
def _routed_tile(ids_ptr, sit, sij, T, E, TOPK: tl.constexpr, BY_PAIR: tl.constexpr, BLOCK_P: tl.constexpr,
                 BLOCK_T: tl.constexpr):
    """This program's expert, its tile of tokens (and their mask), each token's slot routed
    to the expert (-1: none), and whether the program has nothing to do."""
    e, skip = _expert_of_program(ids_ptr, sit, sij, E, TOPK, BY_PAIR, BLOCK_P)
    offs_t = tl.program_id(2) * BLOCK_T + tl.arange(0, BLOCK_T)
    tmask = offs_t < T
    slot = _slots(ids_ptr, sit, sij, offs_t, tmask, e, TOPK)
    return e, offs_t, tmask, slot, skip | (tl.max(slot, axis=0) < 0)


@triton.jit
def _gate_up_acc(x_ptr, xs_ptr, w_ptr, e, offs_t, hit, rows_g, rows_u, imask, H, sxt, sxh, swe, swn, swk,
                 MODE: tl.constexpr, E5M2: tl.constexpr, DT: tl.constexpr, S16: tl.constexpr,
                 BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr):
    """float32 ``(x_t . W[e, gate row], x_t . W[e, up row])`` over ``H`` for the token rows
    of the tile (rows not ``hit`` read zeros). Weights load as ``DT``;
    ``S16``: bfloat16 activations against fp8 weights, through float16 (:func:`_dot16`): 1 =
    each x tile scaled in the loop; 2 = x already scaled to float16 by ``_prescale_kernel``
    (``xs_ptr``: each row's power-of-two scale, applied to the sums after the loop)."""
    w_e = w_ptr + e * swe
    x_rows = x_ptr + offs_t.to(tl.int64)[:, None] * sxt
    acc_g = tl.zeros([BLOCK_T, BLOCK_I], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_T, BLOCK_I], dtype=tl.float32)
    for k0 in range(0, H, BLOCK_H):
        offs_k = (k0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        kmask = offs_k < H
        x = tl.load(x_rows + offs_k[None, :] * sxh, mask=hit[:, None] & kmask[None, :], other=0.0)
        wmask = kmask[:, None] & imask[None, :]
        wk = w_e + offs_k[:, None] * swk
        wg = _load_as(wk + rows_g[None, :] * swn, wmask, MODE, E5M2, DT)
        wu = _load_as(wk + rows_u[None, :] * swn, wmask, MODE, E5M2, DT)
        if S16 == 2:
            acc_g += _mm(x.to(DT), wg, DT)
            acc_u += _mm(x.to(DT), wu, DT)
        else:
            acc_g += _dot16(x.to(tl.float32), wg, S16, DT, "ieee")
            acc_u += _dot16(x.to(tl.float32), wu, S16, DT, "ieee")
    if S16 == 2:
        xs = tl.load(xs_ptr + offs_t, mask=hit, other=0.0)[:, None]
        acc_g = acc_g * xs
        acc_u = acc_u * xs
    return acc_g, acc_u


@triton.jit
def _gate_up_finish(acc_g, acc_u, s_ptr, b_ptr, e, rows_g, rows_u, imask, sse, ssn, sbe, sbn, alpha, limit,
                    HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr):
    """Per-row scales and biases of the gate and up sums, then the activation (float32)."""
    if HAS_SCALE:
        acc_g = acc_g * tl.load(s_ptr + e * sse + rows_g * ssn, mask=imask, other=0.0)[None, :]
        acc_u = acc_u * tl.load(s_ptr + e * sse + rows_u * ssn, mask=imask, other=0.0)[None, :]
    if HAS_BIAS:
        acc_g = acc_g + tl.load(b_ptr + e * sbe + rows_g * sbn, mask=imask, other=0.0).to(tl.float32)[None, :]
        acc_u = acc_u + tl.load(b_ptr + e * sbe + rows_u * sbn, mask=imask, other=0.0).to(tl.float32)[None, :]
    return _act(acc_g, acc_u, ACT, alpha, limit)


@triton.jit
def _gate_up_tile(x_ptr, xs_ptr, w_ptr, s_ptr, b_ptr, e, offs_t, hit, offs_i, imask, H, sxt, sxh, swe, swn, swk,
                  sse, ssn, sbe, sbn, row_mul, up_off, alpha, limit, MODE: tl.constexpr, E5M2: tl.constexpr,
                  HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, DT: tl.constexpr,
                  S16: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr):
    """``act(x_t . W[e, gate row i], x_t . W[e, up row i])`` in float32 for the token rows of
    the tile and the I columns ``offs_i``; gate row i is ``i * row_mul``, up row
    ``i * row_mul + up_off``."""
    rows_g = (offs_i * row_mul).to(tl.int64)
    rows_u = rows_g + up_off
    acc_g, acc_u = _gate_up_acc(x_ptr, xs_ptr, w_ptr, e, offs_t, hit, rows_g, rows_u, imask, H, sxt, sxh, swe, swn,
                                swk,
                                MODE, E5M2, DT, S16, BLOCK_T, BLOCK_I, BLOCK_H)
    return _gate_up_finish(acc_g, acc_u, s_ptr, b_ptr, e, rows_g, rows_u, imask, sse, ssn, sbe, sbn, alpha, limit,
                           HAS_SCALE, HAS_BIAS, ACT)


@triton.jit
def _gate_up_kernel(x_ptr, xs_ptr, ids_ptr, w_ptr, s_ptr, b_ptr, h_ptr, T, H, NI, E,
                    sxt, sxh, sit, sij, swe, swn, swk, sse, ssn, sbe, sbn, row_mul, up_off, alpha, limit,
                    TOPK: tl.constexpr, BY_PAIR: tl.constexpr, MODE: tl.constexpr, E5M2: tl.constexpr,
                    HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, ACT: tl.constexpr, DT: tl.constexpr,
                    S16: tl.constexpr, RNE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_T: tl.constexpr,
                    BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # h[t * TOPK + slot, i] = act(gate, up) for the tokens t of this tile routed to expert e.
    e, offs_t, tmask, slot, idle = _routed_tile(ids_ptr, sit, sij, T, E, TOPK, BY_PAIR, BLOCK_P, BLOCK_T)
    if idle:
        return
    hit = slot >= 0
    offs_i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = offs_i < NI
    h = _gate_up_tile(x_ptr, xs_ptr, w_ptr, s_ptr, b_ptr, e, offs_t, hit, offs_i, imask, H, sxt, sxh, swe, swn, swk,
                      sse, ssn, sbe, sbn, row_mul, up_off, alpha, limit, MODE, E5M2, HAS_SCALE, HAS_BIAS, ACT, DT,
                      S16, BLOCK_T, BLOCK_I, BLOCK_H)
    rows_h = (offs_t * TOPK + slot).to(tl.int64)
    tl.store(h_ptr + rows_h[:, None] * NI + offs_i[None, :], _cast(h, h_ptr.dtype.element_ty, RNE),
             mask=hit[:, None] & imask[None, :])


@triton.jit
def _prescale_kernel(x_ptr, x16_ptr, xs_ptr, H, sxt, sxh, BLOCK_H: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # One program per row t: xs[t] = s and x16[t] = x[t] / s in float16 with s the power of two
    # of :func:`_pow2_of_amax` for the row's largest magnitude (exact for bfloat16 values down to
    # max|x[t]| * 2^-28), so the gate/up kernel's float16 dots need no per-tile scaling (S16 2).
    t = tl.program_id(0).to(tl.int64)
    row = x_ptr + t * sxt
    amax = tl.zeros([BLOCK_H], dtype=tl.float32)
    for k0 in range(0, H, BLOCK_H):
        offs = k0 + tl.arange(0, BLOCK_H)
        amax = tl.maximum(amax, tl.abs(tl.load(row + offs * sxh, mask=offs < H, other=0.0).to(tl.float32)))
    s, r = _pow2_of_amax(tl.max(amax, axis=0))
    for k0 in range(0, H, BLOCK_H):
        offs = k0 + tl.arange(0, BLOCK_H)
        v = tl.load(row + offs * sxh, mask=offs < H, other=0.0).to(tl.float32)
        tl.store(x16_ptr + t * H + offs, (v * r).to(tl.float16), mask=offs < H)
    tl.store(xs_ptr + t, s)


@triton.jit
def _entry(v, q, j):
    """Entry ``j`` of the register vector ``v`` indexed by ``q`` (``j`` may vary at run time)."""
    return tl.sum(tl.where(q == j, v, 0), axis=0)


@triton.jit
def _gate_up_rows_kernel(x_ptr, ids_ptr, w_ptr, s_ptr, b_ptr, h_ptr, H, NI, E,
                         sxt, sxh, sit, sij, swe, swn, swk, sse, ssn, sbe, sbn, row_mul, up_off, alpha, limit,
                         lg_ptr, rb_ptr, tw_ptr, stw, rscale, reps,
                         TOPK: tl.constexpr, MODE: tl.constexpr, E5M2: tl.constexpr, HAS_SCALE: tl.constexpr,
                         HAS_BIAS: tl.constexpr, ACT: tl.constexpr, RNE: tl.constexpr, BLOCK_K8: tl.constexpr,
                         BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr, STAGES: tl.constexpr,
                         ROUTE: tl.constexpr = False, SIGMOID: tl.constexpr = False, HAS_RBIAS: tl.constexpr = False,
                         RNORM: tl.constexpr = False, SHARED: tl.constexpr = 0, BLOCK_E: tl.constexpr = 2,
                         BITONIC: tl.constexpr = False, ROW_SUM: tl.constexpr = False, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # One (token t, slot j) pair and BLOCK_I columns of I, no tensor cores: the pair's gate
    # and up rows stream once, as whole contiguous rows, into float32 products with x_t that
    # are summed over H at the end; h[t * TOPK + j, i] = act(gate_i, up_i), rounded to h's
    # dtype. The last slot of t naming an expert computes it; the other slots and ids
    # outside [0, E) exit at once.
    # ROUTE: the ids come from routing t's router logits (lg, rows of E float32: E - SHARED
    # routed experts, then a stacked shared expert's gate; rb the expert bias, rscale / reps the
    # routing's scale and eps) here, as the router kernel would (_route_vals, TOPK - SHARED
    # routed slots); the program of slot 0 and column block 0 stores t's ids and weights (ids,
    # tw) for the down kernel.
    pair = tl.program_id(0)
    t = (pair // TOPK).to(tl.int64)
    j = pair % TOPK
    q = tl.arange(0, BLOCK_K8)
    if ROUTE:
        iv, wv, slots = _route_vals(lg_ptr, t, E, 1, rb_ptr, E - SHARED, rscale, reps, TOPK - SHARED, SIGMOID,
                                    HAS_RBIAS, RNORM, SHARED, BLOCK_E, BLOCK_K8, BITONIC)
        idq = tl.where(slots, iv, -1).to(ids_ptr.dtype.element_ty)
        if (j == 0) & (tl.program_id(1) == 0):
            tl.store(tw_ptr + t * stw + q, wv, mask=slots)
            tl.store(ids_ptr + t * sit + q * sij, idq, mask=slots)
    else:
        idq = tl.load(ids_ptr + t * sit + q * sij, mask=q < TOPK, other=-1)
    e = _entry(idq, q, j).to(tl.int64)
    later = tl.sum(((idq == e) & (q > j)).to(tl.int32), axis=0)
    if (later > 0) | (e < 0) | (e >= E):
        return
    offs_i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    imask = offs_i < NI
    rows_g = (offs_i * row_mul).to(tl.int64)
    rows_u = rows_g + up_off
    w_e = w_ptr + e * swe
    # ROW_SUM: each step's products summed into BLOCK_I sums at once (fewer registers, a reduction a step)
    acc_g = tl.zeros([BLOCK_I, 1 if ROW_SUM else BLOCK_H], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_I, 1 if ROW_SUM else BLOCK_H], dtype=tl.float32)
    for k0 in tl.range(0, H, BLOCK_H, num_stages=STAGES):
        offs_k = (k0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        kmask = offs_k < H
        x = tl.load(x_ptr + t * sxt + offs_k * sxh, mask=kmask, other=0.0).to(tl.float32)
        wmask = imask[:, None] & kmask[None, :]
        wk = w_e + offs_k[None, :] * swk
        pg = _load_as(wk + rows_g[:, None] * swn, wmask, MODE, E5M2, tl.float32) * x[None, :]
        pu = _load_as(wk + rows_u[:, None] * swn, wmask, MODE, E5M2, tl.float32) * x[None, :]
        if ROW_SUM:
            acc_g += tl.sum(pg, axis=1)[:, None]
            acc_u += tl.sum(pu, axis=1)[:, None]
        else:
            acc_g += pg
            acc_u += pu
    pdl_trigger(PDL)
    h = _gate_up_finish(tl.sum(acc_g, axis=1)[None, :], tl.sum(acc_u, axis=1)[None, :], s_ptr, b_ptr, e, rows_g,
                        rows_u, imask, sse, ssn, sbe, sbn, alpha, limit, HAS_SCALE, HAS_BIAS, ACT)
    tl.store(h_ptr + pair.to(tl.int64) * NI + offs_i[None, :], _cast(h, h_ptr.dtype.element_ty, RNE),
             mask=imask[None, :])


@triton.jit
def _down_rows_tile(hrow, wrow, offs_n, offs_k, rmask, kmask, swn, swk, MODE: tl.constexpr, E5M2: tl.constexpr):
    """(D[e, offs_n, offs_k], h[owner row, offs_k]) in float32 (``hrow`` / ``wrow``: the owner's h
    row and expert e's weights)."""
    hk = tl.load(hrow + offs_k, mask=kmask, other=0.0).to(tl.float32)
    wd = _load_as(wrow + offs_n.to(tl.int64)[:, None] * swn + offs_k.to(tl.int64)[None, :] * swk,
                  rmask[:, None] & kmask[None, :], MODE, E5M2, tl.float32)
    return wd, hk


@triton.jit
def _down_rows_kernel(h_ptr, ids_ptr, tw_ptr, w_ptr, s_ptr, b_ptr, out_ptr, H, NI, E,
                      sit, sij, stt, stj, swe, swn, swk, sse, ssn, sbe, sbn, sot, soh,
                      TOPK: tl.constexpr, MODE: tl.constexpr, E5M2: tl.constexpr, HAS_SCALE: tl.constexpr,
                      HAS_BIAS: tl.constexpr, RNE: tl.constexpr, BLOCK_K8: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, STAGES: tl.constexpr, BLOCK_K2: tl.constexpr = 0,
                      SLOT_SUM: tl.constexpr = False, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # Token t, BLOCK_N outputs, every slot: out[t, n] = sum_j w[t, j] * (s[e_j, n] * (D[e_j, n] .
    # h[t * TOPK + o_j]) + bias[e_j, n]) over the slots j with e_j = ids[t, j] in [0, E), o_j the
    # last slot of t naming e_j (whose program wrote h); float32 sums in a fixed order, rounded
    # once. No tensor cores, no combine launch: the down rows of the BLOCK_N outputs stream whole,
    # slot after slot, in one pipelined loop.
    # BLOCK_K2 > 0 (then BLOCK_K < NI <= BLOCK_K + BLOCK_K2): a second tile of BLOCK_K2 columns at
    # BLOCK_K each step, so that I = 768 runs as 512 + 256 columns, not as 1024 with a masked
    # quarter. SLOT_SUM: each step sums its products into BLOCK_N dots and scales those (s[e_j, n]
    # * w_j once an output, not once a weight).
    t = tl.program_id(1).to(tl.int64)
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < H
    q = tl.arange(0, BLOCK_K8)
    qm = q < TOPK
    idq = tl.load(ids_ptr + t * sit + q * sij, mask=qm, other=-1)
    twq = tl.load(tw_ptr + t * stt + q * stj, mask=qm, other=0.0).to(tl.float32)
    n_k = 1 if BLOCK_K2 > 0 else tl.cdiv(NI, BLOCK_K)
    acc = tl.zeros([BLOCK_N, 1 if SLOT_SUM else BLOCK_K], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_N, BLOCK_K2 if (BLOCK_K2 > 0) and not SLOT_SUM else 1], dtype=tl.float32)
    extra = tl.zeros([BLOCK_N], dtype=tl.float32)  # biases, and SLOT_SUM's scaled dots
    for it in tl.range(0, TOPK * n_k, num_stages=STAGES):
        j = it // n_k
        k0 = (it % n_k) * BLOCK_K
        e = _entry(idq, q, j).to(tl.int64)
        valid = (e >= 0) & (e < E)
        e = tl.where(valid, e, 0)
        owner = tl.max(tl.where(idq == e, q, -1), axis=0)
        wj = _entry(twq, q, j)
        # bounds, not `mask & valid`: Triton's interpreter makes a bool vector & a bool scalar int
        n_lim = tl.where(valid, H, 0)
        k_lim = tl.where(valid, NI, 0)
        rmask = offs_n < n_lim
        hrow = h_ptr + (t * TOPK + owner) * NI
        wrow = w_ptr + e * swe
        offs_k = k0 + tl.arange(0, BLOCK_K)
        wd, hk = _down_rows_tile(hrow, wrow, offs_n, offs_k, rmask, offs_k < k_lim, swn, swk, MODE, E5M2)
        if BLOCK_K2 > 0:
            offs_k2 = BLOCK_K + tl.arange(0, BLOCK_K2)
            wd2, hk2 = _down_rows_tile(hrow, wrow, offs_n, offs_k2, rmask, offs_k2 < k_lim, swn, swk, MODE, E5M2)
        if HAS_SCALE:
            scw = tl.load(s_ptr + e * sse + offs_n * ssn, mask=rmask, other=0.0) * wj
        else:
            scw = tl.zeros([BLOCK_N], dtype=tl.float32) + wj
        if SLOT_SUM:
            dots = tl.sum(wd * hk[None, :], axis=1)
            if BLOCK_K2 > 0:
                dots += tl.sum(wd2 * hk2[None, :], axis=1)
            extra += dots * scw
        elif HAS_SCALE:
            acc += wd * (scw[:, None] * hk[None, :])
            if BLOCK_K2 > 0:
                acc2 += wd2 * (scw[:, None] * hk2[None, :])
        else:
            acc += wd * (hk * wj)[None, :]
            if BLOCK_K2 > 0:
                acc2 += wd2 * (hk2 * wj)[None, :]
        if HAS_BIAS:
            bias = tl.load(b_ptr + e * sbe + offs_n * sbn, mask=offs_n < tl.where(k0 == 0, n_lim, 0),
                           other=0.0).to(tl.float32)
            extra += wj * bias
    pdl_trigger(PDL)
    res = extra
    if not SLOT_SUM:
        res += tl.sum(acc, axis=1)
        if BLOCK_K2 > 0:
            res += tl.sum(acc2, axis=1)
    tl.store(out_ptr + t * sot + offs_n * soh, _cast(res, out_ptr.dtype.element_ty, RNE), mask=nmask)


@triton.jit
def _down_kernel(h_ptr, ids_ptr, tw_ptr, w_ptr, s_ptr, b_ptr, y_ptr, T, H, NI, E,
                 sit, sij, stt, stj, swe, swn, swk, sse, ssn, sbe, sbn,
                 TOPK: tl.constexpr, BY_PAIR: tl.constexpr, MODE: tl.constexpr, E5M2: tl.constexpr,
                 HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, DT: tl.constexpr,
                 BLOCK_P: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # y[t * TOPK + j, n] = w[t, j] * (h[t * TOPK + slot] . D[e, n] + bias) for every slot j with
    # ids[t, j] == e (float32).
    e, offs_t, tmask, slot, idle = _routed_tile(ids_ptr, sit, sij, T, E, TOPK, BY_PAIR, BLOCK_P, BLOCK_T)
    if idle:
        return
    hit = slot >= 0
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    nmask = offs_n < H
    a_rows = h_ptr + (offs_t * TOPK + slot).to(tl.int64)[:, None] * NI
    b_cols = w_ptr + e * swe + offs_n.to(tl.int64)[None, :] * swn
    acc = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, NI, BLOCK_K):
        offs_k = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        kmask = offs_k < NI
        a = tl.load(a_rows + offs_k[None, :], mask=hit[:, None] & kmask[None, :], other=0.0).to(DT)
        b = _load_as(b_cols + offs_k[:, None] * swk, kmask[:, None] & nmask[None, :], MODE, E5M2, DT)
        acc += _mm(a, b, DT)
    if HAS_SCALE:
        acc = acc * tl.load(s_ptr + e * sse + offs_n * ssn, mask=nmask, other=0.0)[None, :]
    if HAS_BIAS:
        acc = acc + tl.load(b_ptr + e * sbe + offs_n * sbn, mask=nmask, other=0.0).to(tl.float32)[None, :]
    for j in tl.static_range(TOPK):
        m = tl.load(ids_ptr + offs_t * sit + j * sij, mask=tmask, other=-1) == e
        wj = tl.load(tw_ptr + offs_t * stt + j * stj, mask=m, other=0.0).to(tl.float32)
        rows = (offs_t * TOPK + j).to(tl.int64)
        tl.store(y_ptr + rows[:, None] * H + offs_n[None, :], acc * wj[:, None], mask=m[:, None] & nmask[None, :])


@triton.jit
def _align_kernel(ids_ptr, offs_ptr, src_ptr, pos_ptr, P, E, sid, TOPK: tl.constexpr, BLOCK_P: tl.constexpr,
                  BLOCK_E: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # One program sorts the P = T * TOPK (token, slot) pairs by expert, stably (ids outside
    # [0, E) last, as the trailing bucket E): offs[e] = pairs with an expert <= e (cumulative
    # group ends, e < E), src[r] = the token of sorted row r, pos[pair] = its sorted row.
    # Sort keys are expert * BLOCK_P + pair, so ties keep the pair order.
    i = tl.arange(0, BLOCK_P)
    real = i < P
    e = tl.load(ids_ptr + i * sid, mask=real, other=0)  # ids flattened, stride sid
    e = tl.where(real & (e >= 0) & (e < E), e, E).to(tl.int32)  # range-checked in the ids' own type
    srt = tl.sort(e * BLOCK_P + i, 0)
    pair = srt & (BLOCK_P - 1)
    tl.store(src_ptr + i, pair // TOPK, mask=real)
    tl.store(pos_ptr + pair, i, mask=real)
    ends = tl.cumsum(tl.histogram(e, BLOCK_E), 0)
    be = tl.arange(0, BLOCK_E)
    tl.store(offs_ptr + be, ends, mask=be < E)


@triton.jit
def _combine_kernel(y_ptr, ids_ptr, tw_ptr, pos_ptr, out_ptr, H, E, sit, sij, stt, stj, syr, sot, soh,
                    TOPK: tl.constexpr, GATHER: tl.constexpr, WEIGHTED: tl.constexpr, RNE: tl.constexpr,
                    BLOCK: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # out[t] = sum_{j = 0..TOPK-1, ids[t, j] in [0, E)} (w[t, j] *) y[row(t, j)], in float32,
    # row(t, j) = t * TOPK + j, or pos[t * TOPK + j] (GATHER: rows sorted by expert).
    t = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = offs < H
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for j in tl.static_range(TOPK):
        idj = tl.load(ids_ptr + t * sit + j * sij)
        valid = (idj >= 0) & (idj < E)
        row = t * TOPK + j
        if GATHER:
            row = tl.load(pos_ptr + row).to(tl.int64)
        row = tl.where(valid, row, 0)  # an invalid slot reads row 0 and adds nothing
        v = tl.load(y_ptr + row * syr + offs, mask=m, other=0.0).to(tl.float32)
        if WEIGHTED:
            v = v * tl.load(tw_ptr + t * stt + j * stj).to(tl.float32)
        acc += tl.where(valid, v, 0.0)
    tl.store(out_ptr + t * sot + offs * soh, _cast(acc, out_ptr.dtype.element_ty, RNE), mask=m)


@triton.jit
def _act_kernel(gu_ptr, h_ptr, R, NI, sgr, sgc, col_mul, up_off, alpha, limit,
                ACT: tl.constexpr, RNE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # h[r, i] = act(gu[r, i * col_mul], gu[r, i * col_mul + up_off]), h contiguous (R, I).
    offs_r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_i = tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I)
    mask = (offs_r < R)[:, None] & (offs_i < NI)[None, :]
    base = gu_ptr + offs_r.to(tl.int64)[:, None] * sgr
    cols = (offs_i * col_mul).to(tl.int64)[None, :]
    g = tl.load(base + cols * sgc, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(base + (cols + up_off) * sgc, mask=mask, other=0.0).to(tl.float32)
    h = _act(g, u, ACT, alpha, limit)
    h = _cast(h, h_ptr.dtype.element_ty, RNE)
    tl.store(h_ptr + offs_r.to(tl.int64)[:, None] * NI + offs_i[None, :], h, mask=mask)


# ---------------------------------------------------------------------------- plans

#: Token rows of the decode tile (a tl.dot operand needs at least 16).
MIN_BLOCK_T, MAX_BLOCK_T = 16, 64
#: Programs per SM the decode kernels aim to stream weights with.
PROGRAMS_PER_SM = 2
#: Interpreter blocks: small, so that the tests cross block edges and masked tails.
INTERPRET_BLOCKS = dict(block_i=16, block_h=16, block_n=16, block_k=16, block_c=32)


@dataclass(frozen=True)
class DecodePlan:
    by_pair: bool  # grid over (token, slot) pairs instead of experts
    block_p: int  # pairs a program scans for an earlier duplicate (BY_PAIR)
    block_t: int  # token rows of the tl.dot tile
    block_i: int  # gate/up kernel: I columns per program
    block_h: int  # gate/up kernel: H chunk of the reduction
    block_n: int  # down kernel: H columns per program
    block_k: int  # down kernel: I chunk of the reduction
    block_c: int  # combine kernel: H columns per program
    warps: int


def _largest_block(choices, active: int, n: int, target: int) -> int:
    """The largest block in ``choices`` (descending) that still gives ``target`` programs."""
    for b in choices:
        if active * cdiv(n, b) >= target:
            return b
    return choices[-1]


def decode_plan(T: int, k: int, E: int, H: int, NI: int, device: torch.device, w_bytes: int) -> DecodePlan:
    """Block sizes of the decode kernels, plain int math. Expert programs that find no token
    exit at once, so the blocks are chosen for the experts that can be active,
    ``min(E, T * k)``, to give every SM ``PROGRAMS_PER_SM`` programs that stream weights."""
    pairs = T * k
    block_t = max(MIN_BLOCK_T, next_pow2(min(T, MAX_BLOCK_T)))
    by_pair = pairs < E and T <= block_t
    block_p = next_pow2(pairs) if by_pair else 1
    if INTERPRET:
        b = INTERPRET_BLOCKS
        return DecodePlan(by_pair, block_p, block_t, b["block_i"], b["block_h"], b["block_n"], b["block_k"],
                          b["block_c"], 4)
    active = min(E, pairs)
    target = PROGRAMS_PER_SM * num_sms(device)
    # 64 columns also at 64 token rows (two 64 x 64 float32 accumulators): Qwen3-30B-A3B shapes,
    # 64 tokens, H200 (moe_profile.py --tokens 64 --sweep, 7bec286): fp8 experts 533 -> 427 us
    # (their x tile's float16 scaling is paid once per twice the weights), bf16 382 -> 380.
    block_i = _largest_block((64, 32, 16), active, NI, target)
    block_n = _largest_block((128, 64, 32, 16), active, H, target)
    block_h = 256 if block_i <= 32 and block_t <= 32 and w_bytes <= 2 else 128
    block_k = 128 if block_n <= 64 else 64
    block_c = min(1024, max(128, next_pow2(H)))
    return DecodePlan(by_pair, block_p, block_t, block_i, block_h, block_n, block_k, block_c, 4)


#: Tokens up to which the decode runs the row kernels (``_gate_up_rows_kernel``, one program
#: per routed pair and few I columns, then ``_down_rows_kernel``, one per token and few
#: outputs, which also adds the slots): hundreds of programs stream whole weight rows. The
#: split-I kernels they replaced ran one program per (pair, 64-column slice), 96 for
#: Qwen3-30B-A3B, too few to keep enough bytes in flight (scripts/stream_probe.py). Each pair
#: streams its expert again, so from 16 tokens the three kernels (each active expert once)
#: win. H200, Qwen3-30B-A3B shapes (scripts/moe_profile.py --rows-t, 58784e5), rows / three
#: kernels: fp8 1 token 16.6 / 30.8 us, 4 tokens 50.6 / 56.6, 8 tokens 91.5 / 103.4, 16
#: tokens 167.3 / 151.3; bf16 23.5 / 30.6, 72.2 / 78.8, 125.7 / 131.9, 221.9 / 201.8.
ROWS_MAX_T = 8


@dataclass(frozen=True)
class RowsPlan:
    block_i: int  # gate/up: I columns (gate and up rows) per program
    block_h: int  # gate/up: H chunk of a loop step
    block_n: int  # down: outputs per program
    block_k: int  # down: I chunk of a loop step
    block_k8: int  # slots, rounded up to a power of two
    warps: int
    stages: int
    block_k2: int = 0  # down: a second I tile of a step (_down_rows_kernel's BLOCK_K2; 0: none)
    row_sum: bool = False  # gate/up: a step's products summed at once (ROW_SUM)
    slot_sum: bool = False  # down: a step's slot summed into dots before its scale (SLOT_SUM)


#: (block_i, block_h, block_n, block_k cap, warps, stages) by weight bytes. H200, Qwen3-30B-A3B
#: shapes, 24 one-token calls with different experts in one graph (scripts/moe_profile.py
#: --rows, e30c2f8): fp8 16.9 us (split-I slices 24.9, three kernels 32.0), bf16 23.2 (25.6,
#: 30.5); the plans within 3% of the best share these blocks. float32: not measured. Deeper fp8
#: pipelines (H100, --rows-focused, 91ab736): gate/up 3 / 4 / 5 / 6 stages 18.85 / 18.80 / 19.27 /
#: 19.12 us, down 18.82 / 19.31 / 19.95 / 20.35: no gain (the kernels are not bound by bytes in flight).
#: The H100 sweeps' best fp8 down plan (16 outputs, 4 stages) lost on the H200 (gpu_pending.sh 187: FP8
#: layer +1.6%, Qwen3-30B-A3B FP8 -0.7%, LFM2.5 FP8 -2.1%): choose these on the H200.
ROWS_TUNED = {1: (16, 256, 8, 1024, 4, 3), 2: (16, 256, 8, 1024, 4, 3), 4: (8, 256, 4, 1024, 4, 3)}


#: The down row kernel covers an I that is not a power of two, when one step would hold it, in two
#: power-of-two tiles (I = 768: 512 + 256) instead of one with masked columns (1024, a quarter idle).
DOWN_TAIL = True
#: Where I takes at most DOWN_SLOT_SUM_STEPS steps (0: never), the down row kernel sums each step's
#: products into dots before scaling them (one multiply an output and step instead of one a weight).
#: H100, 16 layers: one step (Qwen3-30B-A3B) +2.2% FP8, +0.4% bf16; two (LFM2.5's I = 1792) -0.6%.
DOWN_SLOT_SUM_STEPS = 1
#: Weight bytes (1: fp8) at which the gate/up row kernel sums each step's products into its BLOCK_I
#: gate and up sums at once instead of keeping [BLOCK_I, BLOCK_H] float32 partial sums. H200, 16
#: layers (gpu_pending.sh 180, 3b849e4): Qwen3-30B-A3B FP8 +1.2%, bf16 -0.1%, LFM2.5 FP8 +0.0%.
GATE_UP_ROW_SUM = (1,)


def down_k_blocks(NI: int, cap: int) -> tuple:
    """(BLOCK_K, BLOCK_K2) of the down row kernel for I = NI, K steps of at most ``cap``."""
    full = min(cap, max(8, next_pow2(NI)))
    if DOWN_TAIL and full == next_pow2(NI):  # one step holds I: split it where that saves columns
        lo = full // 2
        tail = max(8, next_pow2(NI - lo))
        if lo + tail < full:
            return lo, tail
    return full, 0


def rows_plan(k: int, NI: int, w_bytes: int) -> RowsPlan:
    """Block sizes of the row kernels (plain int math)."""
    k8 = max(2, next_pow2(k))
    if INTERPRET:  # tests: H 40, I 24: several blocks and masked tails, or I as 16 + 8 (DOWN_TAIL)
        bk, bk2 = down_k_blocks(NI, 32)
        bk = bk if bk2 else 16
        return RowsPlan(16, 16, 16, bk, k8, 4, 1, bk2, w_bytes in GATE_UP_ROW_SUM, down_slot_sum(NI, bk, bk2))
    bi, bh, bn, bk, warps, stages = ROWS_TUNED[w_bytes]
    bk, bk2 = down_k_blocks(NI, bk)
    return RowsPlan(bi, bh, bn, bk, k8, warps, stages, bk2, w_bytes in GATE_UP_ROW_SUM, down_slot_sum(NI, bk, bk2))


def down_slot_sum(NI: int, bk: int, bk2: int) -> bool:
    """Whether the down row kernel sums its steps into dots (SLOT_SUM) at these I tiles."""
    return 0 < (1 if bk2 else -(-NI // bk)) <= DOWN_SLOT_SUM_STEPS
