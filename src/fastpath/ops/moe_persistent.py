"""The few-token expert MLPs (gate/up, activation, down, weighted sum over the slots) in one
persistent launch, for :func:`fastpath.ops.moe.fused_experts` and the fused MoE layer.

The row kernels of :mod:`.moe_kernels` take two launches: ``_gate_up_rows_kernel`` writes
``h``, then ``_down_rows_kernel`` streams the down rows. Here every program of one launch,
all of them resident at once, does a gate/up item (``_gate_up_pair``: a (token, slot) pair
and a block of I columns), announces it on a counter of its (token, I split), then a down
item (token, block of outputs, I split, ``_down_sum``) once the counter of that split says
every h column it reads is written. Before its gate/up stream a program asks L2 for its down
item's weight rows (``prefetch.global.L2``, ``PREFETCH``), so they arrive while the gate/up
weights stream and the down part reads them from L2. The I splits' partial sums are added by
the split that finishes last, in the fixed order of the splits (deterministic, no atomics on
values). Counters return to zero before the launch ends (the last program past a wait, and
the last split of an output block, reset them).

A program that waits needs every program it waits on resident: the grid is at most the
programs the GPU holds at once for the compiled kernel's registers and shared memory
(:func:`resident_programs`), and each program loops over its items. Triton's interpreter runs
programs one after another, so there the gate/up and down parts are two launches
(``PHASES`` 1 and 2), or one program does everything (``PHASES`` 3, grid 1).
"""
from __future__ import annotations

import functools

import torch

from .._core import backend
from .._core.backend import INTERPRET, num_sms, pdl_start, pdl_trigger, tl, triton
from .._core.launch import Launcher, cdiv, next_pow2, workspace
from .moe_kernels import _cast, _down_sum, _gate_up_pair, _slot_ids

#: Tokens up to which the row path takes this one launch (``fused_experts`` and the fused
#: layer); 0 turns it off (the two row kernels).
MAX_T = 1
#: The down part's (outputs a program, I splits) for one token: the default gives as many
#: down items as gate/up items at Qwen3-30B-A3B's shapes (16 x 3 x 128 = 384).
BLOCK_N, SPLITS = 16, 3
#: L2 prefetch of each program's down rows: 1 before its gate/up stream, 2 after it (before
#: the wait), 0 none.
PREFETCH = 1
#: Registers a thread is held to (Triton's ``maxnreg``), so that more programs fit; None: as
#: compiled.
MAXNREG = None
#: Programs of the launch (tests; None: one an item, at most the resident ones). The
#: interpreter runs programs one at a time, so there only 1 takes the one-launch mode.
FORCE_GRID = None


@triton.jit
def _prefetch_rows(w_ptr, idq, E, offs_n, k_lo, k_hi, H, swe, swn, TOPK: tl.constexpr, BLOCK_K8: tl.constexpr,
                   LINES: tl.constexpr):
    # Ask L2 for the down rows D[e_j, n, k_lo:k_hi] of every valid slot (rows contiguous in k),
    # one prefetch a 128-byte line.
    q = tl.arange(0, BLOCK_K8)
    e = idq.to(tl.int64)
    ok = (q < TOPK) & (e >= 0) & (e < E)
    base = w_ptr.to(tl.pointer_type(tl.int8))
    esize: tl.constexpr = w_ptr.dtype.element_ty.primitive_bitwidth // 8
    nbytes = (k_hi - k_lo) * esize
    line = tl.arange(0, LINES) * 128
    ptrs = (base + (tl.where(ok, e, 0) * swe * esize)[:, None, None]
            + (offs_n.to(tl.int64) * swn * esize)[None, :, None] + (k_lo * esize + line)[None, None, :])
    m = ok[:, None, None] & (offs_n < H)[None, :, None] & (line < nbytes)[None, None, :]
    tl.inline_asm_elementwise("{ .reg .pred p; setp.ne.s32 p, $2, 0; @p prefetch.global.L2 [$1]; mov.u32 $0, 0; }",
                              "=r,l,r", [ptrs, m.to(tl.int32)], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _prefetch_item(w_ptr, idq, E, pid, D, nN, NB_SPLIT, NI, H, swe, swn, TOPK: tl.constexpr, BLOCK_K8: tl.constexpr,
                   BLOCK_I: tl.constexpr, BLOCK_N: tl.constexpr, SPLITS: tl.constexpr, LINES: tl.constexpr):
    # _prefetch_rows of down item pid (if there is one): its outputs and I split, ids idq
    if pid < D:
        k_lo = (pid // nN) % SPLITS * NB_SPLIT * BLOCK_I
        _prefetch_rows(w_ptr, idq, E, pid % nN * BLOCK_N + tl.arange(0, BLOCK_N), k_lo,
                       tl.minimum(NI, k_lo + NB_SPLIT * BLOCK_I), H, swe, swn, TOPK, BLOCK_K8, LINES)


@triton.jit
def _wait_split(cnt_ptr, c, target, waiters):
    # Spin until counter c reaches target (acquire: the h columns its arrivals wrote are
    # visible), then count this waiter past; the last of `waiters` returns the counter to zero.
    seen = tl.atomic_add(cnt_ptr + c, 0, sem="acquire")
    while seen < target:
        seen = tl.atomic_add(cnt_ptr + c, 0, sem="acquire")
    if tl.atomic_add(cnt_ptr + c, 1, sem="relaxed") == target + waiters - 1:
        tl.atomic_xchg(cnt_ptr + c, 0)
    tl.debug_barrier()


@triton.jit
def _experts_kernel(x_ptr, ids_ptr, tw_ptr, w1_ptr, s1_ptr, b1_ptr, h_ptr, w2_ptr, s2_ptr, b2_ptr, out_ptr,
                    part_ptr, cnt_ptr, tick_ptr, T, H, NI, E, NB_SPLIT,
                    sxt, sxh, sit, sij, stt, stj, swe1, swn1, swk1, sse1, ssn1, sbe1, sbn1, row_mul, up_off,
                    alpha, limit, swe2, swn2, swk2, sse2, ssn2, sbe2, sbn2, sot, soh,
                    lg_ptr, rb_ptr, rscale, reps,
                    TOPK: tl.constexpr, MODE1: tl.constexpr, E5M2_1: tl.constexpr, MODE2: tl.constexpr,
                    E5M2_2: tl.constexpr, HAS_SCALE1: tl.constexpr, HAS_SCALE2: tl.constexpr, HAS_BIAS1: tl.constexpr,
                    HAS_BIAS2: tl.constexpr, ACT: tl.constexpr, RNE: tl.constexpr, BLOCK_K8: tl.constexpr,
                    BLOCK_I: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    SPLITS: tl.constexpr, STAGES: tl.constexpr, PHASES: tl.constexpr, LINES: tl.constexpr,
                    PREFETCH_AT: tl.constexpr,
                    ROUTE: tl.constexpr = False, SIGMOID: tl.constexpr = False, HAS_RBIAS: tl.constexpr = False,
                    RNORM: tl.constexpr = False, SHARED: tl.constexpr = 0, BLOCK_E: tl.constexpr = 2,
                    BITONIC: tl.constexpr = False, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    # Gate/up item g = ((t * TOPK + j) * nI + ib): pair (t, j), column block ib, in I split
    # ib // NB_SPLIT; down item d = ((t * SPLITS + s) * nN + nb). Counter t * SPLITS + s counts
    # the gate/up items of (t, s) (TOPK x its blocks), then the nN down items past their wait.
    # LINES: 128-byte lines of a down row's split (0: no prefetch).
    pid = tl.program_id(0)
    P = tl.num_programs(0)
    nI = tl.cdiv(NI, BLOCK_I)
    nN = tl.cdiv(H, BLOCK_N)
    G = T * TOPK * nI
    D = T * SPLITS * nN
    # the first down item's token, routed once: its ids serve the prefetch, the gate/up items of
    # the same token and the down item
    t0 = (tl.minimum(pid, D - 1) // (nN * SPLITS)).to(tl.int64)
    idq_d, twq_d = _slot_ids(ids_ptr, tw_ptr, t0, sit, sij, stt, stj, lg_ptr, rb_ptr, E, rscale, reps, TOPK,
                             BLOCK_K8, ROUTE, SIGMOID, HAS_RBIAS, RNORM, SHARED, BLOCK_E, BITONIC)
    if PHASES % 2 == 1:
        if LINES > 0 and PREFETCH_AT == 1:
            _prefetch_item(w2_ptr, idq_d, E, pid, D, nN, NB_SPLIT, NI, H, swe2, swn2, TOPK, BLOCK_K8, BLOCK_I, BLOCK_N,
                           SPLITS, LINES)
        for g in range(pid, G, P):
            pair = g // nI
            ib = g % nI
            t = (pair // TOPK).to(tl.int64)
            idq, twq = idq_d, twq_d
            if t != t0:
                idq, twq = _slot_ids(ids_ptr, tw_ptr, t, sit, sij, stt, stj, lg_ptr, rb_ptr, E, rscale, reps, TOPK,
                                     BLOCK_K8, ROUTE, SIGMOID, HAS_RBIAS, RNORM, SHARED, BLOCK_E, BITONIC)
            _gate_up_pair(x_ptr, ids_ptr, w1_ptr, s1_ptr, b1_ptr, h_ptr, pair, ib, idq, twq, H, NI, E,
                          sxt, sxh, sit, sij, swe1, swn1, swk1, sse1, ssn1, sbe1, sbn1, row_mul, up_off, alpha, limit,
                          tw_ptr, stt, TOPK, MODE1, E5M2_1, HAS_SCALE1, HAS_BIAS1, ACT, RNE, BLOCK_K8, BLOCK_I,
                          BLOCK_H, STAGES, ROUTE, 0)
            if PHASES == 3:
                tl.debug_barrier()  # every thread's h columns are written before the release
                tl.atomic_add(cnt_ptr + (pair // TOPK) * SPLITS + ib // NB_SPLIT, 1, sem="release")
        if LINES > 0 and PREFETCH_AT == 2:
            _prefetch_item(w2_ptr, idq_d, E, pid, D, nN, NB_SPLIT, NI, H, swe2, swn2, TOPK, BLOCK_K8, BLOCK_I, BLOCK_N,
                           SPLITS, LINES)
    if PHASES >= 2:
        for d in range(pid, D, P):
            nb = d % nN
            ts = d // nN
            s = ts % SPLITS
            t = (ts // SPLITS).to(tl.int64)
            k_lo = s * NB_SPLIT * BLOCK_I
            b_lo = s * NB_SPLIT
            idq, twq = idq_d, twq_d
            if t != t0:
                idq, twq = _slot_ids(ids_ptr, tw_ptr, t, sit, sij, stt, stj, lg_ptr, rb_ptr, E, rscale, reps, TOPK,
                                     BLOCK_K8, ROUTE, SIGMOID, HAS_RBIAS, RNORM, SHARED, BLOCK_E, BITONIC)
            if PHASES == 3:
                _wait_split(cnt_ptr, ts, TOPK * (tl.minimum(nI, b_lo + NB_SPLIT) - b_lo), nN)
            offs_n = nb * BLOCK_N + tl.arange(0, BLOCK_N)
            res = _down_sum(h_ptr, idq, twq, w2_ptr, s2_ptr, b2_ptr, t, offs_n, k_lo,
                            tl.minimum(NI, k_lo + NB_SPLIT * BLOCK_I), H, NI, E, swe2, swn2, swk2, sse2, ssn2, sbe2,
                            sbn2, TOPK, MODE2, E5M2_2, HAS_SCALE2, HAS_BIAS2, BLOCK_K8, BLOCK_N, BLOCK_K, STAGES,
                            PHASES == 3)
            nmask = offs_n < H
            if SPLITS == 1:
                tl.store(out_ptr + t * sot + offs_n * soh, _cast(res, out_ptr.dtype.element_ty, RNE), mask=nmask)
            else:
                tl.store(part_ptr + ts * H + offs_n, res, mask=nmask)
                tl.debug_barrier()  # every thread's partial sums are written before the release
                tk = t * nN + nb
                if tl.atomic_add(tick_ptr + tk, 1, sem="acq_rel") == SPLITS - 1:
                    tl.atomic_xchg(tick_ptr + tk, 0)
                    tot = tl.zeros([BLOCK_N], dtype=tl.float32)
                    for s2 in tl.static_range(SPLITS):
                        tot += tl.load(part_ptr + (t * SPLITS + s2) * H + offs_n, mask=nmask, other=0.0,
                                       cache_modifier=".cg")
                    tl.store(out_ptr + t * sot + offs_n * soh, _cast(tot, out_ptr.dtype.element_ty, RNE),
                             mask=nmask)
    pdl_trigger(PDL)


_EXPERTS = Launcher(_experts_kernel, pdl=True)


def _regs_per_warp(regs: int) -> int:
    return -(-regs * 32 // 256) * 256  # allocated per warp in units of 256


@functools.lru_cache(maxsize=None)
def _sm_limits(index: int) -> tuple:
    p = torch.cuda.get_device_properties(index)
    regs = getattr(p, "regs_per_multiprocessor", 65536)
    smem = getattr(p, "shared_memory_per_multiprocessor", 0) or 233472
    threads = getattr(p, "max_threads_per_multi_processor", 2048)
    return regs, smem, threads


def resident_programs(kernel, index: int) -> int:
    """How many programs of the compiled ``kernel`` the GPU ``index`` holds at once (every
    multiprocessor full, nothing else running), from its registers, shared memory and warps;
    at least 1."""
    kernel._init_handles()
    warps = kernel.metadata.num_warps
    regs, smem, threads = _sm_limits(index)
    by_regs = (regs // _regs_per_warp(max(kernel.n_regs, 1))) // warps
    shared = kernel.metadata.shared
    by_smem = smem // (shared + 1024) if shared else 32
    per_sm = max(1, min(by_regs, by_smem, threads // (32 * warps), 32))
    return per_sm * num_sms(torch.device("cuda", index))


_GRIDS: dict = {}


def launch(x, ids, tw, w1, mode1, e5m2_1, w2, mode2, e5m2_2, gu_scale, d_scale, gu_bias, d_bias, h, out, code,
           row_mul, up_off, alpha, limit, p, rargs, rflags, strides) -> None:
    """One launch of :func:`_experts_kernel` for the row path's operands (``p``: its
    ``RowsPlan``; ``rargs`` / ``rflags``: the routing arguments and flags, as the gate/up row
    kernel takes them: ``(logits, expert bias, tw, tw's row stride, scale, eps)``; ``strides``:
    a 2-D tensor or None -> its two strides, or (0, 0))."""
    T, H = x.shape
    k, E, NI = ids.shape[1], w1.shape[0], w2.shape[2]
    nI = cdiv(NI, p.block_i)
    splits = max(1, min(SPLITS, nI))
    nb_split = cdiv(nI, splits)
    splits = cdiv(nI, nb_split)  # no empty split
    block_n = 16 if INTERPRET else BLOCK_N
    nN = cdiv(H, block_n)
    block_k = next_pow2(nb_split * p.block_i)
    esize = w2.element_size()
    lines = 0
    if PREFETCH and not INTERPRET and w2.stride(2) == 1:
        lines = next_pow2(cdiv(nb_split * p.block_i * esize, 128))
    part = workspace(x.device, "moe.persist.part", T * splits * H, torch.float32)
    cnt = workspace(x.device, "moe.persist.cnt", T * splits, torch.int32, zeroed=True)
    tick = workspace(x.device, "moe.persist.tick", T * nN, torch.int32, zeroed=True)
    dummy = out
    lg, rb, _, _, rscale, reps = rargs
    args = (x, ids, tw, w1, gu_scale if gu_scale is not None else dummy, gu_bias if gu_bias is not None else dummy,
            h, w2, d_scale if d_scale is not None else dummy, d_bias if d_bias is not None else dummy, out,
            part, cnt, tick, T, H, NI, E, nb_split, x.stride(0), x.stride(1), ids.stride(0), ids.stride(1),
            tw.stride(0), tw.stride(1), w1.stride(0), w1.stride(1), w1.stride(2), *strides(gu_scale),
            *strides(gu_bias), row_mul, up_off, float(alpha), float(limit), w2.stride(0), w2.stride(1), w2.stride(2),
            *strides(d_scale), *strides(d_bias), out.stride(0), out.stride(1), lg, rb, float(rscale), float(reps))
    flags = dict(TOPK=k, MODE1=mode1, E5M2_1=e5m2_1, MODE2=mode2, E5M2_2=e5m2_2,
                 HAS_SCALE1=gu_scale is not None, HAS_SCALE2=d_scale is not None,
                 HAS_BIAS1=gu_bias is not None, HAS_BIAS2=d_bias is not None,
                 ACT=code, RNE=INTERPRET, BLOCK_K8=p.block_k8, BLOCK_I=p.block_i, BLOCK_H=p.block_h,
                 BLOCK_N=block_n, BLOCK_K=block_k, SPLITS=splits, STAGES=p.stages, LINES=lines,
                 PREFETCH_AT=int(PREFETCH), num_warps=p.warps,
                 **rflags, **({"maxnreg": MAXNREG} if MAXNREG and not INTERPRET else {}))
    items = max(T * k * nI, T * splits * nN)
    if INTERPRET:
        if FORCE_GRID is not None:
            _EXPERTS[(FORCE_GRID,)](*args, PHASES=3 if FORCE_GRID == 1 else 1, **flags)
            if FORCE_GRID == 1:
                return
        else:
            _EXPERTS[(items,)](*args, PHASES=1, **flags)
        _EXPERTS[(items if FORCE_GRID is None else FORCE_GRID,)](*args, PHASES=2, **flags)
        return
    cap = items
    if x.device.type == "cuda":  # (else: compiled offline by scripts/compile_sm90.py, not run)
        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        key = (index, x.dtype, w1.dtype, w2.dtype, tuple(sorted(flags.items())))
        cap = _GRIDS.get(key)
        if cap is None:
            kernel = _EXPERTS.fn.warmup(*args, PHASES=3, grid=(1,), **flags, **_pdl_kw(index))
            cap = _GRIDS[key] = resident_programs(kernel, index)
    _EXPERTS[(min(items, cap, FORCE_GRID or items),)](*args, PHASES=3, **flags)


def _pdl_kw(index: int) -> dict:
    """The PDL arguments a launch through ``_EXPERTS`` passes on GPU ``index`` (so the warm-up
    compiles the same kernel)."""
    on = backend.pdl_on(index)
    return {"PDL": backend.pdl_value(_EXPERTS.module) if on else 0, **({"launch_pdl": True} if on else {})}

