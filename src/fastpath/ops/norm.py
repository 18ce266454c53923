"""RMSNorm over the last dimension, with the variants of the Llama / Qwen3 / Qwen3.5 / LFM2
families in one kernel: an optional residual add before the norm (vLLM's fused_add_rms_norm),
zero-centred weights ``(1 + w)`` (Qwen3.5 / Qwen3-Next / Gemma) and a gate ``norm(x) * w *
act(gate)`` (Qwen3.5's RMSNormGated in its Gated DeltaNet layers).

The roundings follow transformers, so that 16-bit results match bit for bit up to the
order of the float32 sum of squares:

* plain (Llama, Qwen3, LFM2): ``w * (x * rsqrt(mean(x^2) + eps)).to(x.dtype)`` (the product
  in ``promote(w, x)``'s dtype, then stored in ``x``'s dtype);
* ``zero_centered``: ``(x * rsqrt(...) * (1 + w.float())).to(x.dtype)``: one rounding;
* ``gate`` (after either): ``(y * act(gate.float())).to(x.dtype)`` with ``y`` the plain or
  zero-centred product before its final rounding (transformers' RMSNormGated:
  ``(w * normed.to(dtype)) * silu(gate.float())``, then ``.to(dtype)``);
* ``residual``: ``h = (x + residual)`` rounded to ``x``'s dtype is returned as the new
  residual and normalised (transformers: ``hidden = residual + hidden``; then the norm).

A block holds ``BLOCK_M`` rows of up to ``ROW_MAX`` columns in registers (one read, one
write); wider rows loop over column chunks twice (sum of squares, then normalise).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from .._core import alloc
from .._core.backend import (INTERPRET, TL_DTYPES, pdl_start, pdl_trigger, tl, triton, triton_reason, needs_grad,
                             use_triton)
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.memo import LaunchMemo
from .._core.registry import register_op

ACTIVATIONS = {"silu": 0, "swish": 0, "sigmoid": 1}


@triton.jit
def round_to(x, DT: tl.constexpr):
    """float32 ``x`` rounded to ``DT`` to nearest-even. bfloat16 is rounded on the bits here:
    Triton's interpreter truncates float32 -> bfloat16 casts (the GPU rounds to nearest even,
    as these bits do), and bit-exact tests of 16-bit results run in the interpreter."""
    if DT == tl.bfloat16:
        b = x.to(tl.uint32, bitcast=True)
        b = (b + (0x7FFF + ((b >> 16) & 1))) & 0xFFFF0000
        return tl.where(x == x, b.to(tl.float32, bitcast=True), x).to(tl.bfloat16)  # NaN stays NaN
    else:
        return x.to(DT)


@triton.jit
def _act(g, ACT: tl.constexpr):
    if ACT == 0:
        return g / (1.0 + tl.exp(-g))
    else:
        return 1.0 / (1.0 + tl.exp(-g))


@triton.jit
def _load_rows(x_ptr, r_ptr, nr_ptr, rows64, cols, mask, sxr, sxn, srr, srn, snr,
               HAS_RES: tl.constexpr, STORE_RES: tl.constexpr):
    """The row chunk as float32: ``x``, or ``x + residual`` rounded to x's dtype (stored as
    the new residual when ``STORE_RES``)."""
    x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxn, mask=mask, other=0.0)
    if HAS_RES:
        r = tl.load(r_ptr + rows64[:, None] * srr + cols[None, :] * srn, mask=mask, other=0.0)
        x = round_to(x.to(tl.float32) + r.to(tl.float32), x_ptr.dtype.element_ty)
        if STORE_RES:
            tl.store(nr_ptr + rows64[:, None] * snr + cols[None, :], x, mask=mask)
    return x.to(tl.float32)


@triton.jit
def _norm_value(h, rstd, w, YDT: tl.constexpr, ZERO_CENTERED: tl.constexpr, PROD_DT: tl.constexpr):
    """float32 ``y`` of the rows ``h`` (float32) times ``rstd`` and the weights ``w``, before
    its final rounding to ``YDT``."""
    n = h * rstd[:, None]
    if ZERO_CENTERED:
        return n * (1.0 + w)[None, :]
    # Llama: the normalised row is rounded to x's dtype, then multiplied by w
    n = round_to(n, YDT).to(tl.float32)
    return round_to(n * w[None, :], PROD_DT).to(tl.float32)


@triton.jit
def rows_rstd(x_ptr, r_ptr, nr_ptr, rows64, rmask, N, sxr, sxn, srr, srn, snr, eps, HAS_RES: tl.constexpr,
              STORE_RES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """``rsqrt(mean(h^2) + eps)`` of the rows ``rows64`` of ``h = x`` (or ``x + residual``
    rounded to x's dtype, stored into ``nr`` with ``STORE_RES``), their N columns read in
    chunks of ``BLOCK_N``."""
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = rmask[:, None] & (cols < N)[None, :]
        h = _load_rows(x_ptr, r_ptr, nr_ptr, rows64, cols, mask, sxr, sxn, srr, srn, snr, HAS_RES, STORE_RES)
        acc += h * h
    return tl.rsqrt(tl.sum(acc, axis=1) / N + eps)


@triton.jit
def normed_rows(x_ptr, r_ptr, w_ptr, nr_ptr, y_ptr, rows64, cols, mask, cmask, rstd, sxr, sxn, srr, srn, snr, sw,
                store, HAS_RES: tl.constexpr, STORE_Y: tl.constexpr, ZERO_CENTERED: tl.constexpr,
                PROD_DT: tl.constexpr):
    """A chunk of the normalised rows as a kernel that reads them (a projection, the router)
    takes them: the values :func:`rms_norm` returns (x's dtype), in float32. Where ``store``
    holds (one program of a grid), the new residual ``h = x + residual`` goes into ``nr``
    (with ``HAS_RES``) and the normalised rows into ``y`` (with ``STORE_Y``); both have rows
    ``snr`` apart and contiguous columns."""
    h, w, offs, smask = _rows_and_weights(x_ptr, r_ptr, w_ptr, nr_ptr, rows64, cols, mask, cmask, sxr, sxn, srr,
                                          srn, snr, sw, store, HAS_RES)
    XDT: tl.constexpr = x_ptr.dtype.element_ty
    y = round_to(_norm_value(h, rstd, w, XDT, ZERO_CENTERED, PROD_DT), XDT)
    if STORE_Y:
        tl.store(y_ptr + offs, y, mask=smask)
    return y.to(tl.float32)


@triton.jit
def weighted_rows(x_ptr, r_ptr, w_ptr, nr_ptr, rows64, cols, mask, cmask, sxr, sxn, srr, srn, snr, sw, store,
                  HAS_RES: tl.constexpr, ZERO_CENTERED: tl.constexpr):
    """A chunk of ``h = x (+ residual)`` times the norm's weights (``1 + w`` zero-centred),
    in float32, and the chunk's sum of ``h^2`` per row: the norm with its ``rstd`` left for
    later (a projection multiplies its sums by it once the whole row is summed). The new
    residual goes into ``nr`` where ``store`` holds, as :func:`normed_rows`."""
    h, w, offs, smask = _rows_and_weights(x_ptr, r_ptr, w_ptr, nr_ptr, rows64, cols, mask, cmask, sxr, sxn, srr,
                                          srn, snr, sw, store, HAS_RES)
    w = (1.0 + w) if ZERO_CENTERED else w
    return h * w[None, :], tl.sum(h * h, axis=1)


@triton.jit
def group_gated_rows(x_ptr, g_ptr, w_ptr, rows64, cols, mask, sxr, sxn, sgr, sgn, sw, eps, G: tl.constexpr,
                     PROD_DT: tl.constexpr):
    """A chunk of rows (``cols`` whole groups of ``G``) as :func:`rms_norm` with a ``silu`` gate
    returns them for ``x`` viewed as ``(..., N // G, G)``: each group normalised on its own,
    times the weights ``w`` (G,) and ``silu(g)``, rounded to x's dtype; in float32. Every
    group lies inside the chunk, so a projection can normalise its K tiles as it loads them."""
    x = tl.load(x_ptr + rows64[:, None] * sxr + cols[None, :] * sxn, mask=mask, other=0.0).to(tl.float32)
    R: tl.constexpr = x.shape[0]
    C: tl.constexpr = x.shape[1]
    x3 = tl.reshape(x, [R, C // G, G])
    rstd = tl.rsqrt(tl.sum(x3 * x3, axis=2) / G + eps)
    n = tl.reshape(x3 * rstd[:, :, None], [R, C])
    w = tl.load(w_ptr + (cols % G) * sw).to(tl.float32)
    g = tl.load(g_ptr + rows64[:, None] * sgr + cols[None, :] * sgn, mask=mask, other=0.0).to(tl.float32)
    XDT: tl.constexpr = x_ptr.dtype.element_ty
    y = _norm_value(n, tl.full([R], 1.0, tl.float32), w, XDT, False, PROD_DT) * _act(g, 0)
    return round_to(y, XDT).to(tl.float32)


@triton.jit
def _rows_and_weights(x_ptr, r_ptr, w_ptr, nr_ptr, rows64, cols, mask, cmask, sxr, sxn, srr, srn, snr, sw, store,
                      HAS_RES: tl.constexpr):
    """The row chunk ``h`` (float32; with ``HAS_RES`` also stored into ``nr`` where ``store``
    holds), the norm's weights of its columns (float32), ``nr``'s offsets and store mask."""
    h = _load_rows(x_ptr, r_ptr, nr_ptr, rows64, cols, mask, sxr, sxn, srr, srn, snr, HAS_RES, False)
    # (the interpreter takes no scalar bool in a mask: broadcast by hand)
    smask = mask & (store.to(tl.int32) + tl.zeros_like(mask.to(tl.int32)) > 0)
    offs = rows64[:, None] * snr + cols[None, :]
    if HAS_RES:
        tl.store(nr_ptr + offs, h.to(nr_ptr.dtype.element_ty), mask=smask)
    w = tl.load(w_ptr + cols * sw, mask=cmask, other=0.0).to(tl.float32)
    return h, w, offs, smask


@triton.jit
def _finish(h, rstd, w_ptr, g_ptr, y_ptr, rows64, cols, mask, cmask, sw, sgr, sgn, syr,
            ZERO_CENTERED: tl.constexpr, PROD_DT: tl.constexpr, HAS_GATE: tl.constexpr,
            ACT: tl.constexpr):
    w = tl.load(w_ptr + cols * sw, mask=cmask, other=0.0).to(tl.float32)
    y = _norm_value(h, rstd, w, y_ptr.dtype.element_ty, ZERO_CENTERED, PROD_DT)
    if HAS_GATE:
        g = tl.load(g_ptr + rows64[:, None] * sgr + cols[None, :] * sgn, mask=mask, other=0.0)
        y = y * _act(g.to(tl.float32), ACT)
    tl.store(y_ptr + rows64[:, None] * syr + cols[None, :], round_to(y, y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rms_norm_kernel(x_ptr, r_ptr, g_ptr, w_ptr, y_ptr, nr_ptr, n_rows, N, eps,
                     sxr, sxn, srr, srn, sgr, sgn, sw, syr, snr,
                     HAS_RES: tl.constexpr, HAS_GATE: tl.constexpr, ZERO_CENTERED: tl.constexpr,
                     PROD_DT: tl.constexpr, ACT: tl.constexpr, ONE_PASS: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rows64 = rows.to(tl.int64)
    rmask = rows < n_rows
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        cmask = cols < N
        mask = rmask[:, None] & cmask[None, :]
        h = _load_rows(x_ptr, r_ptr, nr_ptr, rows64, cols, mask, sxr, sxn, srr, srn, snr, HAS_RES, True)
        rstd = tl.rsqrt(tl.sum(h * h, axis=1) / N + eps)
        pdl_trigger(PDL)
        _finish(h, rstd, w_ptr, g_ptr, y_ptr, rows64, cols, mask, cmask, sw, sgr, sgn, syr,
                ZERO_CENTERED, PROD_DT, HAS_GATE, ACT)
    else:
        rstd = rows_rstd(x_ptr, r_ptr, nr_ptr, rows64, rmask, N, sxr, sxn, srr, srn, snr, eps, HAS_RES, True,
                         BLOCK_M, BLOCK_N)
        pdl_trigger(PDL)
        for start in range(0, N, BLOCK_N):  # x + residual is recomputed: no read of our own writes
            cols = start + tl.arange(0, BLOCK_N)
            cmask = cols < N
            mask = rmask[:, None] & cmask[None, :]
            h = _load_rows(x_ptr, r_ptr, nr_ptr, rows64, cols, mask, sxr, sxn, srr, srn, snr, HAS_RES, False)
            _finish(h, rstd, w_ptr, g_ptr, y_ptr, rows64, cols, mask, cmask, sw, sgr, sgn, syr,
                    ZERO_CENTERED, PROD_DT, HAS_GATE, ACT)


# ---------------------------------------------------------------------------- launcher

#: Widest row held in registers by one block; wider rows take the two-pass loop. The
#: interpreter uses a small value so that CI runs the loop too.
ROW_MAX = 64 if INTERPRET else 16384
CHUNK = 32 if INTERPRET else 4096  # column chunk of the two-pass loop
_KERNEL = Launcher(_rms_norm_kernel, pdl=True)


def _rows(t: torch.Tensor, N: int) -> torch.Tensor:
    rows = math.prod(t.shape[:-1])  # (not -1: ambiguous when N is 0)
    try:
        return t.view(rows, N)
    except RuntimeError:  # leading dims that cannot be collapsed: one documented copy
        return t.reshape(rows, N)


def _launch(x, weight, eps, residual, zero_centered, gate, act):
    N = x.shape[-1]
    x2 = _rows(x, N)
    n_rows = x2.shape[0]
    y = alloc.empty(n_rows, N, dtype=x.dtype, device=x.device)
    nr = alloc.empty(n_rows, N, dtype=x.dtype, device=x.device) if residual is not None else y
    if n_rows == 0 or N == 0:
        return y.view(x.shape), nr.view(x.shape)
    r2 = _rows(residual, N) if residual is not None else x2
    g2 = _rows(gate, N) if gate is not None else x2
    one_pass = N <= ROW_MAX
    block_n = next_pow2(N) if one_pass else CHUNK
    block_m = min(next_pow2(n_rows), max(1, (256 if INTERPRET else 2048) // block_n))
    prod = TL_DTYPES[torch.promote_types(weight.dtype, x.dtype)]
    _KERNEL[(cdiv(n_rows, block_m),)](
        x2, r2, g2, weight, y, nr, n_rows, N, float(eps),
        x2.stride(0), x2.stride(1), r2.stride(0), r2.stride(1), g2.stride(0), g2.stride(1),
        weight.stride(0), y.stride(0), nr.stride(0),
        HAS_RES=residual is not None, HAS_GATE=gate is not None, ZERO_CENTERED=zero_centered,
        PROD_DT=prod, ACT=act, ONE_PASS=one_pass, BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=max(1, min(16, block_m * block_n // 512)))
    return y.view(x.shape), nr.view(x.shape)


# ---------------------------------------------------------------------------- reference

def reference_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
                       residual: Optional[torch.Tensor] = None, zero_centered: bool = False,
                       gate: Optional[torch.Tensor] = None, gate_activation: str = "silu"):
    """PyTorch path, written as transformers writes these norms (same casts, same order)."""
    if residual is not None:
        x = x + residual
    h = x.float() if x.dtype != torch.float64 else x
    n = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    if zero_centered:
        y = n * (1.0 + weight.to(n.dtype))
    else:
        y = weight * n.to(x.dtype)
    if gate is not None:
        gf = gate.to(n.dtype)
        y = y * (torch.sigmoid(gf) if ACTIVATIONS[gate_activation] else torch.nn.functional.silu(gf))
    y = y.to(x.dtype)
    return (y, x) if residual is not None else y


# ---------------------------------------------------------------------------- op

def _fake(x, weight, eps, zero_centered, gate, act):
    return torch.empty_like(x)


def _add_fake(x, residual, weight, eps, zero_centered, gate, act):
    return torch.empty_like(x), torch.empty_like(x)


#: The kernel's row indices and column offsets are int32 (row offsets int64): more rows than
#: this, or a strided last dim spanning this, take the PyTorch path (a knob for tests).
INT32_END = 2**31


def _kernel_ok(x, weight, residual, gate) -> bool:
    ts = [t for t in (x, weight, residual, gate) if t is not None]
    if not (x.dim() > 0 and use_triton(x) and all(t.dtype in KERNEL_DTYPES for t in ts)):
        return False
    N = x.shape[-1]
    return (x.numel() // max(N, 1) + 2048 < INT32_END
            and all((N - 1) * abs(t.stride(-1)) < INT32_END for t in ts))


@register_op("rms_norm", fake=_fake)
def _rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float, zero_centered: bool,
                 gate: Optional[torch.Tensor], act: int) -> torch.Tensor:
    if not _kernel_ok(x, weight, None, gate):
        return reference_rms_norm(x, weight, eps, zero_centered=zero_centered, gate=gate,
                                  gate_activation="sigmoid" if act else "silu")
    return _launch(x, weight, eps, None, zero_centered, gate, act)[0]


@register_op("add_rms_norm", fake=_add_fake)
def _add_rms_norm_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                     zero_centered: bool, gate: Optional[torch.Tensor], act: int
                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    if not _kernel_ok(x, weight, residual, gate):
        return reference_rms_norm(x, weight, eps, residual=residual, zero_centered=zero_centered,
                                  gate=gate, gate_activation="sigmoid" if act else "silu")
    return _launch(x, weight, eps, residual, zero_centered, gate, act)


def _check(x, weight, residual, gate, gate_activation, eps, xn="x", wn="weight"):
    """The checks of :func:`rms_norm`; ``xn`` / ``wn``: the names of ``x`` / ``weight`` in the caller."""
    check_tensor(xn, x)
    check_tensor(wn, weight)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{xn}: rms_norm needs a floating-point tensor, got {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{xn}: expected at least one dimension (the normalised one), got a 0-d tensor")
    if not weight.dtype.is_floating_point:
        raise TypeError(f"{wn}: expected a floating-point tensor, got {weight.dtype}")
    if weight.shape != (x.shape[-1],):
        raise ValueError(f"{wn}: expected shape ({x.shape[-1]},) ({xn}'s last dimension), got {tuple(weight.shape)}")
    for name, t in (("residual", residual), ("gate", gate)):
        if t is None:
            continue
        check_tensor(name, t)
        if t.shape != x.shape:
            raise ValueError(f"{name}: expected {xn}'s shape {tuple(x.shape)}, got {tuple(t.shape)}")
        if t.device != x.device:
            raise ValueError(f"{name}: expected a tensor on {x.device}, got {t.device}")
    if residual is not None and residual.dtype != x.dtype:
        raise TypeError(f"residual: expected {xn}'s dtype {x.dtype}, got {residual.dtype}")
    if gate is not None and not gate.dtype.is_floating_point:
        raise TypeError(f"gate: expected a floating-point tensor, got {gate.dtype}")
    if weight.device != x.device:
        raise ValueError(f"{wn}: expected a tensor on {x.device}, got {weight.device}")
    if gate_activation not in ACTIVATIONS:
        raise NotImplementedError(f"gate_activation: {gate_activation!r} is not supported; "
                                  f"supported: {', '.join(ACTIVATIONS)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps >= 0:
        raise ValueError(f"eps: expected a non-negative float, got {eps!r}")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6, *,
             residual: Optional[torch.Tensor] = None, zero_centered: bool = False,
             gate: Optional[torch.Tensor] = None, gate_activation: str = "silu"):
    """Root-mean-square normalisation over the last dimension, with an optional residual add,
    zero-centred weights and an output gate, in one kernel.

    ``h = x`` (or ``x + residual``, rounded to ``x.dtype``), ``n = h / sqrt(mean(h^2) + eps)``
    in float32, then ``y = w * n.to(x.dtype)`` (Llama, Qwen3, LFM2) or, with
    ``zero_centered``, ``y = n * (1 + w)`` (Qwen3.5 / Qwen3-Next, weights stored around 0),
    then with ``gate``: ``y * act(gate)`` (Qwen3.5's ``RMSNormGated``: ``silu``). Roundings
    as in transformers (see the module docstring), so 16-bit results equal theirs except
    for rare last-bit differences from the order of the float32 sum.

    Parameters
    ----------
    x : Tensor ``(..., N)``, float16 / bfloat16 / float32 (float64 takes the reference path);
        any strides (leading dims that cannot be collapsed are copied once). Rows of any
        width: head-dim norms ``(B, H, 128)`` as well as hidden sizes 2048..8192 and beyond.
    weight : Tensor ``(N,)``, any float dtype.
    eps : added to the mean of squares.
    residual : optional Tensor of ``x``'s shape and dtype: the sum ``x + residual`` is
        normalised and returned too (as vLLM's ``fused_add_rms_norm``, but out of place).
    zero_centered : use ``1 + weight`` (float32) and round once at the end.
    gate : optional Tensor of ``x``'s shape, any float dtype, read as float32.
    gate_activation : ``"silu"`` (alias ``"swish"``) or ``"sigmoid"``.

    Returns
    -------
    ``out`` of ``x``'s shape and dtype; ``(out, new_residual)`` when ``residual`` is given.
    No host synchronisation (CUDA-graph capturable); ``torch.compile(fullgraph=True)``
    traces it. Under autograd (an input that requires grad) the PyTorch path, which autograd
    records.

    Raises
    ------
    TypeError for non-float tensors or a residual of another dtype; ValueError for shape or
    device mismatches and a negative ``eps``; NotImplementedError for another activation.

    Example
    -------
    >>> import torch, fastpath
    >>> x, r = torch.randn(2, 2048, dtype=torch.bfloat16), torch.randn(2, 2048, dtype=torch.bfloat16)
    >>> out, r = fastpath.rms_norm(x, torch.zeros(2048), residual=r, zero_centered=True)
    """
    return _MEMO.call(lambda: _checked_rms_norm(x, weight, eps, residual, zero_centered, gate, gate_activation),
                      (x, weight, gate, residual), (eps, zero_centered, gate_activation))


def _checked_rms_norm(x, weight, eps, residual, zero_centered, gate, gate_activation):
    _check(x, weight, residual, gate, gate_activation, eps)
    if needs_grad(x, weight, residual, gate):  # the kernels have no backward: torch's ops, which autograd records
        return reference_rms_norm(x, weight, eps, residual=residual, zero_centered=zero_centered, gate=gate,
                                  gate_activation=gate_activation)
    if residual is None:
        return _rms_norm_op(x, weight, float(eps), bool(zero_centered), gate, ACTIVATIONS[gate_activation])
    return _add_rms_norm_op(x, residual, weight, float(eps), bool(zero_centered), gate, ACTIVATIONS[gate_activation])


#: Eager calls with the properties of an earlier call replay its launch (fastpath._core.memo).
_MEMO = LaunchMemo()


FAMILY = {"name": "norm", "ops": ["rms_norm"], "reason": triton_reason}
