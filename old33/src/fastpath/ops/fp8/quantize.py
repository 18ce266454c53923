"""``quantize_fp8``: tensor-, row- and block-wise scales.

``_quant_kernel``: one program owns a scaling group (a row tile, a 1x128 / 128x128 block)
and reads it twice: once for ``amax``, once to quantise. Tensor-wise scaling runs the same
kernel twice (``PHASE=1`` writes per-chunk ``amax`` partials, ``PHASE=2`` reduces them in a
fixed order and quantises): no atomics, deterministic, no host sync.
"""
from __future__ import annotations

import math

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, num_sms, tl, triton, use_triton
from ..._core.errors import KERNEL_DTYPES, check_tensor, require_fp8
from ..._core.launch import cdiv, next_pow2, workspace
from ..._core.registry import register_op
from .bits import _encode, _fp8_dtypes, fp8_max




_RECIPES = {"tensorwise": 0, "rowwise": 1, "blockwise": 2}


@triton.jit
def _tile(x_ptr, rows64, cols, r_hi, c_hi, sxr, sxc):
    """One [BLOCK_R, BLOCK_C] tile of x as float32 (0 outside the group) and its mask."""
    mask = (rows64[:, None] < r_hi) & (cols[None, :] < c_hi)
    x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxc, mask=mask, other=0.0)
    return x.to(tl.float32), mask


@triton.jit
def _scale_of(amax, FP8_MAX):
    """Dequantisation scale from a group's amax: NaN for non-finite groups, 1 for all-zero."""
    return tl.where(amax == float("inf"), float("nan"),
                    tl.where(amax == 0.0, 1.0, tl.math.div_rn(amax, FP8_MAX)))


@triton.jit
def _quant_kernel(x_ptr, q_ptr, s_ptr, part_ptr, R, C, sxr, sxc, GR, GC, n_gc, n_parts,
                  FP8_MAX: tl.constexpr, MB: tl.constexpr, BIAS: tl.constexpr,
                  ROWS: tl.constexpr, PHASE: tl.constexpr, P_PAD: tl.constexpr,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # Groups are (GR, GC) tiles of the (R, C) input; ROWS: GR == 1 and this program owns
    # BLOCK_R consecutive row groups of one column group. q is contiguous (R, C) uint8.
    pid = tl.program_id(0)
    gi = pid // n_gc
    gj = pid % n_gc
    c_lo = gj * GC
    c_hi = tl.minimum(C, c_lo + GC)
    ar = tl.arange(0, BLOCK_R)
    ac = tl.arange(0, BLOCK_C)
    if ROWS:
        rows = gi * BLOCK_R + ar
        rmask = rows < R
        rows64 = rows.to(tl.int64)
        amax = tl.zeros([BLOCK_R], dtype=tl.float32)
        bad = tl.zeros([BLOCK_R], dtype=tl.int32)
        for c0 in range(c_lo, c_hi, BLOCK_C):
            cols = c0 + ac
            mask = rmask[:, None] & (cols[None, :] < c_hi)
            x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxc, mask=mask, other=0.0).to(tl.float32)
            ax = tl.abs(x)
            nonfinite = (x != x) | (ax == float("inf"))
            bad = tl.maximum(bad, tl.max(nonfinite.to(tl.int32), axis=1))
            amax = tl.maximum(amax, tl.max(tl.where(nonfinite, 0.0, ax), axis=1))
        scale = tl.where(bad > 0, float("nan"), tl.where(amax == 0.0, 1.0, tl.math.div_rn(amax, FP8_MAX)))
        tl.store(s_ptr + rows64 * n_gc + gj, scale, mask=rmask)
        for c0 in range(c_lo, c_hi, BLOCK_C):
            cols = c0 + ac
            mask = rmask[:, None] & (cols[None, :] < c_hi)
            x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxc, mask=mask, other=0.0).to(tl.float32)
            y = tl.math.div_rn(x, scale[:, None])
            y = tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX)
            y = tl.where(bad[:, None] > 0, float("nan"), y)
            tl.store(q_ptr + rows64[:, None] * C + cols[None, :], _encode(y, MB, BIAS), mask=mask)
    else:
        r_lo = gi * GR
        r_hi = tl.minimum(R, r_lo + GR)
        if PHASE == 2:
            j = tl.arange(0, P_PAD)
            parts = tl.load(part_ptr + j, mask=j < n_parts, other=0.0)
            amax = tl.max(parts, axis=0)
            scale = _scale_of(amax, FP8_MAX)
            if pid == 0:
                tl.store(s_ptr, scale)
        else:
            acc = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
            for r0 in range(r_lo, r_hi, BLOCK_R):
                rows64 = (r0 + ar).to(tl.int64)
                for c0 in range(c_lo, c_hi, BLOCK_C):
                    cols = c0 + ac
                    x, mask = _tile(x_ptr, rows64, cols, r_hi, c_hi, sxr, sxc)
                    ax = tl.abs(x)
                    acc = tl.maximum(acc, tl.where(x != x, float("inf"), ax))  # non-finite -> inf
            amax = tl.max(tl.max(acc, axis=1), axis=0)
            if PHASE == 1:
                tl.store(part_ptr + pid, amax)
            else:
                scale = _scale_of(amax, FP8_MAX)
                tl.store(s_ptr + pid, scale)
        if PHASE != 1:
            for r0 in range(r_lo, r_hi, BLOCK_R):
                rows64 = (r0 + ar).to(tl.int64)
                for c0 in range(c_lo, c_hi, BLOCK_C):
                    cols = c0 + ac
                    x, mask = _tile(x_ptr, rows64, cols, r_hi, c_hi, sxr, sxc)
                    y = tl.math.div_rn(x, scale)
                    y = tl.minimum(tl.maximum(y, -FP8_MAX), FP8_MAX)
                    y = tl.where(scale != scale, float("nan"), y)
                    tl.store(q_ptr + rows64[:, None] * C + cols[None, :], _encode(y, MB, BIAS), mask=mask)


Q_BLOCK_C = 32 if INTERPRET else 128


Q_TILE = 512 if INTERPRET else 4096  # elements of one quantisation tile


def _quant_launch(x2: torch.Tensor, q2: torch.Tensor, scale: torch.Tensor, GR: int, GC: int, dtype) -> None:
    """x2 (R, C) any strides; q2 contiguous (R, C) uint8; scale holds one float per group,
    laid out (cdiv(R, GR), cdiv(C, GC)) contiguous. GR == 0: one tensor-wise scale."""
    R, C = x2.shape
    fmax = fp8_max(dtype)
    e5 = dtype == torch.float8_e5m2
    consts = dict(FP8_MAX=fmax, MB=2 if e5 else 3, BIAS=15 if e5 else 7)
    if GR == 1:
        bc = min(Q_BLOCK_C, next_pow2(min(C, GC)))
        br = max(1, min(next_pow2(R), Q_TILE // bc))
        n_gc = cdiv(C, GC)
        _quant_kernel[(cdiv(R, br) * n_gc,)](x2, q2, scale, scale, R, C, x2.stride(0), x2.stride(1), 1, GC, n_gc, 1,
                                             ROWS=True, PHASE=0, P_PAD=1, BLOCK_R=br, BLOCK_C=bc, **consts)
        return
    bc = min(Q_BLOCK_C, next_pow2(C))
    br = max(1, min(next_pow2(R), Q_TILE // bc))
    if GR > 0:
        n_gc = cdiv(C, GC)
        _quant_kernel[(cdiv(R, GR) * n_gc,)](x2, q2, scale, scale, R, C, x2.stride(0), x2.stride(1), GR, GC, n_gc, 1,
                                             ROWS=False, PHASE=0, P_PAD=1, BLOCK_R=br, BLOCK_C=bc, **consts)
        return
    # tensor-wise: chunks of whole tiles, at most `target` of them
    target = 2 * num_sms(x2.device)
    n_gr = min(cdiv(R, br), target)
    GR = cdiv(cdiv(R, n_gr), br) * br
    n_gr = cdiv(R, GR)
    GC = cdiv(cdiv(C, max(1, target // n_gr)), bc) * bc
    n_gc = cdiv(C, GC)
    P = n_gr * n_gc
    part = workspace(x2.device, "fp8.amax", P, torch.float32)
    for phase in (1, 2):
        _quant_kernel[(P,)](x2, q2, scale, part, R, C, x2.stride(0), x2.stride(1), GR, GC, n_gc, P,
                            ROWS=False, PHASE=phase, P_PAD=next_pow2(P), BLOCK_R=br, BLOCK_C=bc, **consts)


def reference_quantize_fp8(x: torch.Tensor, recipe: str = "tensorwise", *, block=128,
                           dtype: torch.dtype = None):
    """PyTorch path of :func:`quantize_fp8` (same semantics and arguments, also for non-finite
    input; ``block`` an int or a pair, as there)."""
    dtype = dtype or torch.float8_e4m3fn
    if isinstance(block, int) and not isinstance(block, bool):
        block = (block, block)
    fmax = fp8_max(dtype)
    xf = x.float()
    if recipe == "tensorwise":
        groups = xf.reshape(1, 1, 1, -1)
        br, bc = 1, max(1, xf.numel())
        out_shape = ()
    elif recipe == "rowwise":
        K = xf.shape[-1]
        groups = xf.reshape(math.prod(xf.shape[:-1]), 1, 1, K)
        br, bc = 1, K
        out_shape = tuple(x.shape[:-1]) + (1,)
    else:
        br, bc = block
        M, K = xf.shape
        pm, pk = cdiv(M, br) * br, cdiv(K, bc) * bc
        padded = torch.zeros(pm, pk, dtype=torch.float32, device=x.device)
        padded[:M, :K] = xf
        groups = padded.view(pm // br, br, pk // bc, bc).permute(0, 2, 1, 3)
        out_shape = (pm // br, pk // bc)
    if recipe == "blockwise":
        gflat = groups.reshape(groups.shape[0], groups.shape[1], br * bc)
    else:
        gflat = groups.reshape(groups.shape[0], groups.shape[-1])
    bad = ~torch.isfinite(gflat).all(-1)
    amax = gflat.abs().nan_to_num(0.0, 0.0, 0.0).amax(-1) if gflat.shape[-1] else gflat.new_zeros(gflat.shape[:-1])
    # a 0-d tensor on amax's device, not a Python number: CUDA divides by a CPU scalar as a
    # multiplication by its reciprocal, one ulp off the kernels' correctly rounded division
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / amax.new_tensor(fmax))
    scale = torch.where(bad, torch.full_like(scale, float("nan")), scale)
    if recipe == "blockwise":
        full = scale.repeat_interleave(br, 0).repeat_interleave(bc, 1)[:xf.shape[0], :xf.shape[1]]
    elif recipe == "rowwise":
        full = scale.reshape(out_shape)
    else:
        full = scale.reshape(())
    y = (xf / full).clamp(-fmax, fmax)
    q = y.to(dtype)
    return q.reshape(x.shape), scale.reshape(out_shape).contiguous()


def _quant_fake(x, recipe, block_r, block_c, dtype):
    return torch.empty(x.shape, dtype=dtype, device=x.device), torch.empty(
        _scale_shape(x, recipe, (block_r, block_c)), dtype=torch.float32, device=x.device)


def _scale_shape(x, recipe, block):
    if recipe == "tensorwise":
        return ()
    if recipe == "rowwise":
        return tuple(x.shape[:-1]) + (1,)
    return (cdiv(x.shape[0], block[0]), cdiv(x.shape[1], block[1]))


@register_op("quantize_fp8", fake=_quant_fake)
def _quantize_op(x: torch.Tensor, recipe: str, block_r: int, block_c: int,
                 dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    if not use_triton(x) or x.dtype not in KERNEL_DTYPES or x.numel() == 0:
        return reference_quantize_fp8(x, recipe, block=(block_r, block_c), dtype=dtype)
    if recipe == "blockwise":
        x2 = x
    else:
        C = x.shape[-1] if x.dim() else 1
        try:
            x2 = x.view(-1, C)
        except RuntimeError:  # leading dims that cannot be collapsed: one documented copy
            x2 = x.reshape(-1, C)
    q = alloc.empty(x.shape, dtype=dtype, device=x.device)
    scale = alloc.empty(_scale_shape(x, recipe, (block_r, block_c)), dtype=torch.float32, device=x.device)
    GR, GC = {"tensorwise": (0, 0), "rowwise": (1, x2.shape[1])}.get(recipe, (block_r, block_c))
    _quant_launch(x2, q.view(torch.uint8).view(x2.shape), scale, GR, GC, dtype)
    return q, scale


def quantize_fp8(x: torch.Tensor, recipe: str = "tensorwise", *, block=128,
                 dtype: torch.dtype = getattr(torch, "float8_e4m3fn", None)) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise ``x`` to fp8 with float32 dequantisation scales: ``x ~= q.float() * scale``.

    Parameters
    ----------
    x : Tensor, float32 / float16 / bfloat16 (float64 takes the reference path), any strides.
    recipe : ``"tensorwise"`` (one scale, shape ``()``), ``"rowwise"`` (one scale per row of
        the last dimension, shape ``x.shape[:-1] + (1,)``) or ``"blockwise"`` (2-D ``x`` of
        shape (M, K) only, scale ``(cdiv(M, bm), cdiv(K, bk))``).
    block : blockwise tile, ``128`` (128x128, for weights) or a pair such as ``(1, 128)``
        (activation-style 1x128 blocks: scale ``(M, cdiv(K, 128))``).
    dtype : ``torch.float8_e4m3fn`` (default, max 448) or ``torch.float8_e5m2`` (max 57344).

    Returns
    -------
    ``(q, scale)``: ``q`` of ``x``'s shape and ``dtype`` (contiguous), ``scale`` float32.
    Each group's scale is ``amax / fp8_max`` (division rounded to nearest), ``q`` is
    ``x / scale`` rounded to nearest even and clamped to ``+-fp8_max``. A group that is all
    zeros gets scale ``1.0`` and ``q = 0``.

    Non-finite input: a group (the tensor, a row or a block) that holds any NaN or +-inf
    gets a NaN scale and NaN in every ``q`` of the group, so dequantising gives NaN there and
    nothing downstream looks finite. Other groups are unaffected. No host sync is made to
    check this (the function stays CUDA-graph capturable).

    Raises
    ------
    RuntimeError if torch has no float8 dtypes; TypeError for a bad ``x`` dtype or ``dtype``;
    ValueError for an unknown ``recipe``, a bad ``block`` or a non-2-D blockwise ``x``.

    Example
    -------
    >>> q, s = fastpath.quantize_fp8(torch.tensor([[1.0, -448.0], [0.5, 2.0]]), "rowwise")
    >>> s
    tensor([[1.0000],
            [0.0045]])
    """
    require_fp8()
    dtype = dtype or torch.float8_e4m3fn
    check_tensor("x", x, dtypes=KERNEL_DTYPES + (torch.float64,))
    if dtype not in _fp8_dtypes():
        raise TypeError(f"dtype: expected torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    if not isinstance(recipe, str) or recipe.lower() not in _RECIPES:
        raise ValueError(f"recipe: expected one of {', '.join(_RECIPES)}, got {recipe!r}")
    recipe = recipe.lower()
    if isinstance(block, int) and not isinstance(block, bool):
        block = (block, block)
    if (not isinstance(block, (tuple, list)) or len(block) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in block)):
        raise ValueError(f"block: expected a positive int or a pair of them such as (1, 128), got {block!r}")
    if recipe == "blockwise" and x.dim() != 2:
        raise ValueError(f"x: blockwise scaling needs a 2-D (M, K) tensor, got shape {tuple(x.shape)}")
    if recipe == "rowwise" and x.dim() == 0:
        raise ValueError("x: rowwise scaling needs at least one dimension, got a 0-d tensor")
    return _quantize_op(x, recipe, int(block[0]), int(block[1]), dtype)
