"""``grouped_mm``: grouped (jagged) matrix products for mixture-of-experts layers, with the
semantics of ``torch.nn.functional.grouped_mm``, plus FP8 weights with per-column scales.

One tiled ``tl.dot`` kernel, ``_gmm_kernel``, serves the four forms through ``JAG``:

* ``JAG=1`` jagged rows (2D x 3D). The program grid is an upper bound on the number of
  row tiles, fixed by the shapes alone: ``min(cdiv(total, BLOCK_M) + G, total)``. Every
  program loads ``offs`` (``G`` int32, L2-resident), clamps the ends into ``[0, total]``,
  makes them non-decreasing (a running maximum), counts each group's row tiles, and finds
  its own group and tile with a prefix sum. Programs past the last tile read nothing else
  and store nothing. Rows past ``offs[-1]`` form one more segment whose tiles store zeros. No
  host synchronisation and no data-dependent shape: capturable in a CUDA graph.
  3D x 2D (jagged columns) runs as the same kernel on transposed views:
  ``out.T = mat_b.T @ mat_a[g].T`` per group (strides are free, nothing is copied).
* ``JAG=2`` jagged K (2D x 2D): one program per (group, row tile, column tile); each
  reduces over its group's slice of K (an empty group stores zeros, as PyTorch does).
* ``JAG=0`` batched (3D x 3D).

Tiles are visited in ``GROUP_M``-row super-rows (L2 reuse of ``a`` tiles across column
tiles); the heuristic picks ``BLOCK_M`` from the mean rows per group, a quantity of the
shapes (decode: 16-row tiles, each expert's weight tile read once per tile; prefill: up to
128). Operands are converted in registers to the ``tl.dot`` dtype: fp8 weights through the
hardware conversion (NVIDIA 8.9+) or bit decoding (elsewhere, and in the interpreter whose
own float8 conversion reads NaN as 480); both conversions are exact into bf16/fp16/fp32.
Accumulation is float32; the per-column fp8 scale and the bias are applied in the epilogue.
"""
from __future__ import annotations

from typing import Optional

import torch

from .._core import alloc
from .._core.backend import INTERPRET, TL_DTYPES, tl, triton, triton_reason, use_triton
from .._core.errors import KERNEL_DTYPES, check_tensor
from .._core.launch import cdiv, next_pow2
from .._core.registry import register_op
from .fp8.bits import _fp8_dtypes, fp8_load_mode
from .matvec import _load_as, _mm, _tile_order


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _segments(offs_ptr, s_offs, G, total, GP: tl.constexpr):
    """Starts and ends (each ``GP`` long) of the ``G`` groups, index ``G`` being the tail
    ``[offs[-1], total)`` and later indices empty. Ends are clamped into ``[0, total]`` and
    made non-decreasing, so the segments always partition ``[0, total)``."""
    idx = tl.arange(0, GP)
    ends = tl.load(offs_ptr + idx * s_offs, mask=idx < G, other=0)
    ends = tl.where(idx < G, ends, total)
    prev = tl.load(offs_ptr + (idx - 1) * s_offs, mask=(idx >= 1) & (idx <= G), other=0)
    prev = tl.where(idx <= G, prev, total)
    ends = tl.associative_scan(tl.minimum(tl.maximum(ends, 0), total), 0, _max_combine)
    starts = tl.associative_scan(tl.minimum(tl.maximum(prev, 0), total), 0, _max_combine)
    return idx, starts, ends


@triton.jit
def _pick(idx, vec, g):
    """``vec[g]`` as a scalar (0 when ``g`` is out of range)."""
    return tl.sum(tl.where(idx == g, vec, 0), 0)


@triton.jit
def _gmm_kernel(a_ptr, b_ptr, out_ptr, offs_ptr, scale_ptr, bias_ptr,
                G, M, N, K, grid_m, s_offs,
                sag, sam, sak, sbg, sbk, sbn, sog, som, son, ssg, ssn, sxg, sxn,
                JAG: tl.constexpr, B_MODE: tl.constexpr, B_E5M2: tl.constexpr,
                HAS_SCALE: tl.constexpr, HAS_BIAS: tl.constexpr, DT: tl.constexpr, GP: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # out[g][rows, cols] = a[g][rows, k_lo:k_hi] @ b[g][k_lo:k_hi, cols] (* scale[g]) (+ bias[g]).
    # JAG=1: M is the total of the jagged rows, a / out have no group stride; JAG=2: K is
    # the total of the jagged K, b has no group stride; JAG=0: M rows in every group.
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_order(pid, grid_m, grid_n, GROUP_M)
    if JAG == 1:
        idx, starts, ends = _segments(offs_ptr, s_offs, G, M, GP)
        tiles = (ends - starts + (BLOCK_M - 1)) // BLOCK_M
        cum = tl.cumsum(tiles, 0)
        g = tl.sum((cum <= pid_m).to(tl.int32), 0)  # G: the tail; > G: past the last tile
        row0 = _pick(idx, starts, g) + (pid_m - _pick(idx, cum - tiles, g)) * BLOCK_M
        row_end = _pick(idx, ends, g)  # 0 past the last tile: nothing loaded or stored
        k_lo = 0
        k_hi = tl.where(g < G, K, 0)
    else:
        tiles_m = tl.cdiv(M, BLOCK_M)
        g = pid_m // tiles_m
        row0 = (pid_m % tiles_m) * BLOCK_M
        row_end = M
        if JAG == 2:
            idx, starts, ends = _segments(offs_ptr, s_offs, G, K, GP)
            k_lo = _pick(idx, starts, g)
            k_hi = _pick(idx, ends, g)
        else:
            k_lo = 0
            k_hi = K
    g64 = g.to(tl.int64)
    offs_m = row0 + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mmask = offs_m < row_end
    nmask = offs_n < N
    a_rows = a_ptr + g64 * sag + offs_m.to(tl.int64)[:, None] * sam
    b_cols = b_ptr + g64 * sbg + offs_n.to(tl.int64)[None, :] * sbn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(k_lo, k_hi, BLOCK_K):
        offs_k = (k0 + tl.arange(0, BLOCK_K)).to(tl.int64)
        kmask = offs_k < k_hi
        a = _load_as(a_rows + offs_k[None, :] * sak, mmask[:, None] & kmask[None, :], 0, False, DT)
        b = _load_as(b_cols + offs_k[:, None] * sbk, kmask[:, None] & nmask[None, :], B_MODE, B_E5M2, DT)
        acc += _mm(a, b, DT)
    live = nmask & (tl.zeros_like(offs_n) + g < G)  # the tail segment stores zeros
    if HAS_SCALE:
        acc = acc * tl.load(scale_ptr + g64 * ssg + offs_n * ssn, mask=live, other=0.0)[None, :]
    if HAS_BIAS:
        acc = acc + tl.load(bias_ptr + g64 * sxg + offs_n * sxn, mask=live, other=0.0).to(tl.float32)[None, :]
    ptrs = out_ptr + g64 * sog + offs_m.to(tl.int64)[:, None] * som + offs_n.to(tl.int64)[None, :] * son
    tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mmask[:, None] & nmask[None, :])


# ---------------------------------------------------------------------------- launcher

#: Interpreter blocks (BLOCK_M, BLOCK_N, BLOCK_K): small, so that tests cross tile edges.
INTERPRET_BLOCKS = (16, 16, 16)
#: Tests set this to force (BLOCK_M, BLOCK_N, BLOCK_K) on any backend.
BLOCKS_OVERRIDE: Optional[tuple] = None
#: Tests set this: force the fp8 decoding ("native" loads float8, "bits" decodes uint8).
FP8_DECODE: Optional[str] = None
GROUP_M = 8


def blocks(rows_per_group: int, dtype: torch.dtype) -> tuple:
    """``(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)`` from the mean rows per group
    (a function of the shapes, not of ``offs``) and the ``tl.dot`` operand dtype."""
    bm = min(128, max(16, next_pow2(rows_per_group)))
    if bm <= 32:  # decode-like: weight streaming; narrower column tiles, more programs
        bn, bk, warps, stages = 64, 128, 4, 4
    elif bm == 64:
        bn, bk, warps, stages = 128, 64, 4, 4
    else:
        bn, bk, warps, stages = 128, 64, 8, 3
    if dtype == torch.float32:
        bk = 32
    if INTERPRET:
        bm, bn, bk = INTERPRET_BLOCKS
        warps, stages = 4, 1
    if BLOCKS_OVERRIDE is not None:
        bm, bn, bk = BLOCKS_OVERRIDE
    return bm, bn, bk, warps, stages


def _b_mode(b: torch.Tensor):
    """(tensor as loaded, MODE, e5m2) for ``mat_b``: float (0), fp8 loaded natively (1), or
    fp8 bits decoded in registers (2)."""
    if b.dtype not in _fp8_dtypes():
        return b, 0, False
    e5m2 = b.dtype == torch.float8_e5m2
    mode = fp8_load_mode(b.device, FP8_DECODE)
    return (b, 1, e5m2) if mode == 1 else (b.view(torch.uint8), 2, e5m2)


def _run(jag: int, a, sa, b, sb, out, so, offs, G: int, M: int, N: int, K: int,
         rows_per_group: int, scale_b, bias, dot_dtype: torch.dtype):
    if N == 0:
        return
    bk_t, mode, e5m2 = _b_mode(b)
    dt = torch.float32 if INTERPRET else dot_dtype
    bm, bn, bk, warps, stages = blocks(rows_per_group, dt)
    # jagged rows: an upper bound on the row tiles of G groups and the tail, from shapes only
    grid_m = min(cdiv(M, bm) + G, M) if jag == 1 else G * cdiv(M, bm)
    if grid_m == 0:
        return
    ss = (scale_b.stride(0), scale_b.stride(1)) if scale_b is not None else (0, 0)
    sx = (bias.stride(0), bias.stride(1)) if bias is not None else (0, 0)

    def ptr(t):  # absent or empty tensors (never read) are replaced by the output
        return t if t is not None and t.numel() > 0 else out

    if offs is not None and offs.numel() == 0:  # no groups: offs is loaded (all masked) as int32
        offs = torch.zeros(1, dtype=torch.int32, device=out.device)
    _gmm_kernel[(grid_m * cdiv(N, bn),)](
        ptr(a), ptr(bk_t), out, ptr(offs), ptr(scale_b), ptr(bias),
        G, M, N, K, grid_m, offs.stride(0) if offs is not None else 0,
        *sa, *sb, *so, *ss, *sx,
        JAG=jag, B_MODE=mode, B_E5M2=e5m2, HAS_SCALE=scale_b is not None, HAS_BIAS=bias is not None,
        DT=TL_DTYPES[dt], GP=max(16, next_pow2(G + 1)), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
        num_warps=warps, num_stages=stages)


def _launch(mat_a, mat_b, offs, bias, scale_b, out_dtype) -> torch.Tensor:
    a, b = mat_a, mat_b
    dot_dtype = a.dtype
    dev = a.device
    if a.dim() == 2 and b.dim() == 3:  # jagged rows
        T, K = a.shape
        G, _, N = b.shape
        out = alloc.empty(T, N, dtype=out_dtype, device=dev)
        _run(1, a, (0, a.stride(0), a.stride(1)), b, b.stride(), out, (0, out.stride(0), out.stride(1)),
             offs, G, T, N, K, cdiv(T, max(G, 1)), scale_b, bias, dot_dtype)
    elif a.dim() == 3 and b.dim() == 2:  # jagged columns: out.T = b.T @ a[g].T, rows of out.T jagged
        G, M, K = a.shape
        T = b.shape[1]
        out = alloc.empty(M, T, dtype=out_dtype, device=dev)
        _run(1, b, (0, b.stride(1), b.stride(0)), a, (a.stride(0), a.stride(2), a.stride(1)),
             out, (0, out.stride(1), out.stride(0)), offs, G, T, M, K, cdiv(T, max(G, 1)),
             None, None, dot_dtype)
    elif a.dim() == 2:  # jagged K
        M, K = a.shape
        N = b.shape[1]
        G = offs.shape[0]
        out = alloc.empty(G, M, N, dtype=out_dtype, device=dev)
        _run(2, a, (0, a.stride(0), a.stride(1)), b, (0, b.stride(0), b.stride(1)), out, out.stride(),
             offs, G, M, N, K, M, None, bias, dot_dtype)
    else:  # batched
        G, M, K = a.shape
        N = b.shape[2]
        out = alloc.empty(G, M, N, dtype=out_dtype, device=dev)
        _run(0, a, a.stride(), b, b.stride(), out, out.stride(), None, G, M, N, K, M,
             scale_b, bias, dot_dtype)
    return out


# ---------------------------------------------------------------------------- reference

def _bounds(offs: torch.Tensor, total: int) -> list:
    """(start, end) per group, with the kernel's treatment of bad ``offs``: ends clamped
    into ``[0, total]``, then a running maximum. Reads ``offs`` on the host (a sync)."""
    ends = offs.to(torch.int64).clamp(0, total)
    if ends.numel():
        ends = ends.cummax(0).values
    ends = ends.tolist()
    return list(zip([0] + ends[:-1], ends))


def validate_offs(offs: torch.Tensor, total: int, name: str = "offs") -> None:
    """Check ``offs`` on the host (a device synchronisation; not for captured code): int32,
    1-D, ``0 <= offs[0] <= offs[1] <= ... <= offs[-1] <= total``. Raises ValueError / TypeError
    naming the first offending entry. :func:`grouped_mm` itself does not check the values
    (that would need a sync); out-of-range or decreasing values are clamped there."""
    check_tensor(name, offs, dtypes=(torch.int32,))
    if offs.dim() != 1:
        raise ValueError(f"{name}: expected a 1-D tensor of group ends, got shape {tuple(offs.shape)}")
    if offs.numel() == 0:
        return
    v = offs.to(torch.int64).cpu()
    neg = (v < 0).nonzero()
    if neg.numel():
        i = int(neg[0])
        raise ValueError(f"{name}: expected non-negative group ends, got {name}[{i}] = {int(v[i])}")
    down = (v[1:] < v[:-1]).nonzero()
    if down.numel():
        i = int(down[0]) + 1
        raise ValueError(f"{name}: expected non-decreasing group ends, got {name}[{i - 1}] = {int(v[i - 1])} "
                         f"> {name}[{i}] = {int(v[i])}")
    if int(v[-1]) > total:
        raise ValueError(f"{name}: expected group ends at most {total} (the grouped dimension), "
                         f"got {name}[-1] = {int(v[-1])}")


def reference_grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, *, offs: Optional[torch.Tensor] = None,
                         bias: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None,
                         scale_b: Optional[torch.Tensor] = None) -> torch.Tensor:
    """PyTorch path of :func:`grouped_mm` (the oracle in tests and the path on devices Triton
    does not serve): a loop over groups in float32 (float64 for float64 inputs), one cast at
    the end. Rows / columns past ``offs[-1]`` are zero, as in the kernel. Reads ``offs`` on the
    host."""
    acc = torch.float64 if mat_a.dtype == torch.float64 else torch.float32
    out_dtype = out_dtype or mat_a.dtype
    a, b = mat_a.to(acc), mat_b.to(acc)
    if scale_b is not None:
        b = b * scale_b.to(acc).unsqueeze(-2)
    x = bias.to(acc) if bias is not None else None
    if a.dim() == 2 and b.dim() == 3:
        out = a.new_zeros(a.shape[0], b.shape[2])
        for g, (s, e) in enumerate(_bounds(offs, a.shape[0])):
            out[s:e] = a[s:e] @ b[g] + (x[g] if x is not None else 0)
    elif a.dim() == 3 and b.dim() == 2:
        out = a.new_zeros(a.shape[1], b.shape[1])
        for g, (s, e) in enumerate(_bounds(offs, b.shape[1])):
            out[:, s:e] = a[g] @ b[:, s:e]
    elif a.dim() == 2:
        bounds = _bounds(offs, a.shape[1])
        out = a.new_zeros(len(bounds), a.shape[0], b.shape[1])
        for g, (s, e) in enumerate(bounds):
            out[g] = a[:, s:e] @ b[s:e] + (x[g] if x is not None else 0)
    else:
        out = a @ b
        if x is not None:
            out = out + x.unsqueeze(1)
    return out.to(out_dtype)


# ---------------------------------------------------------------------------- op

def _out_shape(mat_a, mat_b, offs) -> tuple:
    if mat_a.dim() == 2 and mat_b.dim() == 3:
        return (mat_a.shape[0], mat_b.shape[2])
    if mat_a.dim() == 3 and mat_b.dim() == 2:
        return (mat_a.shape[1], mat_b.shape[1])
    if mat_a.dim() == 2:
        return (offs.shape[0], mat_a.shape[0], mat_b.shape[1])
    return (mat_a.shape[0], mat_a.shape[1], mat_b.shape[2])


def _fake(mat_a, mat_b, offs, bias, scale_b, out_dtype):
    return mat_a.new_empty(_out_shape(mat_a, mat_b, offs), dtype=out_dtype)


def _setup(ctx, inputs, output):
    mat_a, mat_b, offs, bias, scale_b, out_dtype = inputs
    ctx.bias_dtype = bias.dtype if bias is not None else None
    ctx.save_for_backward(mat_a, mat_b, offs, scale_b)


def _backward(ctx, grad):
    """Every form's gradients are grouped products of the same ``offs``, in another form:
    ``grad_a = grouped_mm(grad, b^T)`` and ``grad_b = grouped_mm(a^T, grad)`` (2D x 3D gives
    2D x 3D and 2D x 2D, 3D x 2D gives 2D x 2D and 3D x 2D, ...)."""
    a, b, offs, scale_b = ctx.saved_tensors
    if scale_b is not None:  # fp8 weight: no gradient of its own; dequantise for grad_a
        b = (b.float() * scale_b.unsqueeze(-2)).to(a.dtype)
    g = grad.to(a.dtype)
    ga = gb = gbias = None
    if ctx.needs_input_grad[0]:
        ga = grouped_mm(g, b.transpose(-2, -1), offs=offs)
    if ctx.needs_input_grad[1] and scale_b is None:
        gb = grouped_mm(a.transpose(-2, -1), g, offs=offs)
    if ctx.bias_dtype is not None and ctx.needs_input_grad[3]:
        if a.dim() == 2 and b.dim() == 3:  # per-group sums of the rows of grad: a (1, T) x (T, N) product
            ones = torch.ones(1, grad.shape[0], dtype=grad.dtype, device=grad.device)
            gbias = grouped_mm(ones, grad, offs=offs, out_dtype=torch.float32)[:, 0]
        else:
            gbias = grad.float().sum(1)
        gbias = gbias.to(ctx.bias_dtype)
    return ga, gb, None, gbias, None, None


@register_op("grouped_mm", fake=_fake, backward=_backward, setup_context=_setup)
def _grouped_mm_op(mat_a: torch.Tensor, mat_b: torch.Tensor, offs: Optional[torch.Tensor],
                   bias: Optional[torch.Tensor], scale_b: Optional[torch.Tensor],
                   out_dtype: torch.dtype) -> torch.Tensor:
    if not use_triton(mat_a) or mat_a.dtype not in KERNEL_DTYPES or out_dtype not in KERNEL_DTYPES:
        return reference_grouped_mm(mat_a, mat_b, offs=offs, bias=bias, out_dtype=out_dtype, scale_b=scale_b)
    return _launch(mat_a, mat_b, offs, bias, scale_b, out_dtype)


_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_FORMS = "2D x 3D (offs over rows), 3D x 2D (offs over columns), 2D x 2D (offs over K), 3D x 3D (no offs)"


def _shape(t) -> tuple:
    return tuple(t.shape)


def _same_device(name, t, ref):
    if t.device != ref.device:
        raise ValueError(f"{name}: expected a tensor on {ref.device} like mat_a, got {t.device}")


def _checked(mat_a, mat_b, offs, bias, scale_b, out_dtype) -> torch.dtype:
    check_tensor("mat_a", mat_a)
    check_tensor("mat_b", mat_b)
    fp8 = _fp8_dtypes()
    if mat_a.dtype in fp8:
        raise NotImplementedError(f"mat_a: float8 activations are not supported (got {mat_a.dtype}); "
                                  "pass bfloat16 / float16 activations with an fp8 mat_b and scale_b")
    check_tensor("mat_a", mat_a, dtypes=_FLOATS)
    if mat_a.dim() not in (2, 3):
        raise ValueError(f"mat_a: expected a 2-D or 3-D tensor, got shape {_shape(mat_a)}")
    if mat_b.dim() not in (2, 3):
        raise ValueError(f"mat_b: expected a 2-D or 3-D tensor, got shape {_shape(mat_b)}")
    _same_device("mat_b", mat_b, mat_a)
    a3, b3 = mat_a.dim() == 3, mat_b.dim() == 3
    K = mat_a.shape[-1]
    Kb = mat_b.shape[-2]
    if K != Kb:
        raise ValueError(f"mat_b: expected the contraction size {K} (mat_a's last dimension, mat_a shape "
                         f"{_shape(mat_a)}) in dimension {mat_b.dim() - 2}, got shape {_shape(mat_b)}")
    if a3 and b3:
        if offs is not None:
            raise ValueError("offs: must be None when mat_a and mat_b are both 3-D (a batched product); "
                             f"got a tensor of shape {_shape(offs)}")
        if mat_a.shape[0] != mat_b.shape[0]:
            raise ValueError(f"mat_b: expected {mat_a.shape[0]} groups like mat_a {_shape(mat_a)}, "
                             f"got shape {_shape(mat_b)}")
    else:
        if offs is None:
            raise ValueError(f"offs: required when mat_a or mat_b is 2-D (forms: {_FORMS}); got None")
        check_tensor("offs", offs)
        if offs.dtype != torch.int32:
            raise TypeError(f"offs: expected dtype int32 (cumulative group ends), got {offs.dtype}")
        if offs.dim() != 1:
            raise ValueError(f"offs: expected a 1-D tensor of group ends, got shape {_shape(offs)}")
        if offs.device != mat_a.device:
            raise ValueError(f"offs: expected a tensor on {mat_a.device} like mat_a, got {offs.device} "
                             "(it is read on the device, without a host synchronisation)")
        G = mat_b.shape[0] if b3 else (mat_a.shape[0] if a3 else None)
        if G is not None and offs.shape[0] != G:
            who = "mat_b" if b3 else "mat_a"
            raise ValueError(f"offs: expected length {G} (one end per group of {who}, shape "
                             f"{_shape(mat_b if b3 else mat_a)}), got shape {_shape(offs)}")
    G = mat_a.shape[0] if a3 else (mat_b.shape[0] if b3 else offs.shape[0])
    N = mat_b.shape[-1]
    if scale_b is None:
        if mat_b.dtype in fp8:
            raise TypeError(f"mat_b: a {mat_b.dtype} mat_b needs scale_b (float32, shape ({G}, {N}) for a "
                            "3-D mat_b); got scale_b=None")
        if mat_b.dtype != mat_a.dtype:
            raise TypeError(f"mat_b: expected dtype {mat_a.dtype} like mat_a, got {mat_b.dtype}")
    else:
        check_tensor("scale_b", scale_b)
        if mat_b.dtype not in fp8:
            raise TypeError(f"mat_b: scale_b needs a float8 mat_b, got {mat_b.dtype}")
        if not b3:
            raise NotImplementedError("scale_b: fp8 mat_b with scale_b is supported for a 3-D mat_b "
                                      "(2D x 3D and 3D x 3D forms); got a 2-D mat_b")
        if mat_a.dtype not in (torch.float16, torch.bfloat16, torch.float32):
            raise TypeError(f"mat_a: fp8 weights need float16 / bfloat16 / float32 activations, got {mat_a.dtype}")
        if scale_b.dtype != torch.float32:
            raise TypeError(f"scale_b: expected dtype float32, got {scale_b.dtype}")
        if _shape(scale_b) != (G, N):
            raise ValueError(f"scale_b: expected shape ({G}, {N}) (per group, per output column), "
                             f"got {_shape(scale_b)}")
        _same_device("scale_b", scale_b, mat_a)
    out_dtype = mat_a.dtype if out_dtype is None else out_dtype
    if not isinstance(out_dtype, torch.dtype) or out_dtype not in _FLOATS:
        raise TypeError(f"out_dtype: expected None or one of float32, float16, bfloat16, float64, got {out_dtype}")
    if mat_a.dtype == torch.float64 and out_dtype != torch.float64:
        raise TypeError(f"out_dtype: float64 inputs give a float64 result, got out_dtype={out_dtype}")
    if bias is not None:
        check_tensor("bias", bias)
        if a3 and not b3:
            raise NotImplementedError("bias: supported for the 2D x 3D, 2D x 2D and 3D x 3D forms, "
                                      "not 3D x 2D (jagged columns)")
        if bias.dtype not in (mat_a.dtype, out_dtype):
            raise TypeError(f"bias: expected dtype {mat_a.dtype} (mat_a) or {out_dtype} (out_dtype), "
                            f"got {bias.dtype}")
        if _shape(bias) != (G, N):
            raise ValueError(f"bias: expected shape ({G}, {N}) (per group, per output column), got {_shape(bias)}")
        _same_device("bias", bias, mat_a)
    return out_dtype


def grouped_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, *, offs: Optional[torch.Tensor] = None,
               bias: Optional[torch.Tensor] = None, out_dtype: Optional[torch.dtype] = None,
               scale_b: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Grouped matrix product with the semantics of ``torch.nn.functional.grouped_mm``, plus
    FP8 weights with per-group, per-column scales (mixture-of-experts layers).

    ``offs`` holds cumulative group *ends* (int32, on ``mat_a``'s device): group ``g`` spans
    ``offs[g-1]:offs[g]`` (``0:offs[0]`` for ``g = 0``) of the jagged dimension; equal
    neighbours make empty groups. The four forms:

    ======================  ==========================  =========================  ==========
    ``mat_a``               ``mat_b``                   result                     jagged
    ======================  ==========================  =========================  ==========
    ``(total_M, K)``        ``(G, K, N)``               ``(total_M, N)``           rows
    ``(G, M, K)``           ``(K, total_N)``            ``(M, total_N)``           columns
    ``(M, total_K)``        ``(total_K, N)``            ``(G, M, N)``              K
    ``(G, M, K)``           ``(G, K, N)``               ``(G, M, N)``              none
    ======================  ==========================  =========================  ==========

    Parameters
    ----------
    mat_a : float16 / bfloat16 / float32 (float64 takes the PyTorch path), any strides.
    mat_b : the same dtype as ``mat_a``, any strides (a transposed view such as
        ``w.transpose(1, 2)`` of experts stored ``(G, N, K)`` is read in place, not copied);
        or, with a 3-D ``mat_b``, ``float8_e4m3fn`` / ``float8_e5m2`` together with ``scale_b``.
    offs : int32 ``(G,)``, required unless both operands are 3-D (then it must be None).
    bias : optional ``(G, N)``, dtype of ``mat_a`` or ``out_dtype``, added per group (not for
        the 3D x 2D form). PyTorch's own ``grouped_mm`` does not support a bias yet.
    out_dtype : result dtype, default ``mat_a.dtype``; float32 / float16 / bfloat16 for any
        16-bit or float32 input (PyTorch allows fewer combinations).
    scale_b : optional float32 ``(G, N)``: dequantisation scale of an fp8 ``mat_b``; the
        product is ``mat_a[rows of g] @ (mat_b[g].float() * scale_b[g][None, :])``.

    Returns
    -------
    Tensor of ``out_dtype``, contiguous, of the shape in the table. Arithmetic is float32
    (one rounding at the end). Rows (2D x 3D) or columns (3D x 2D) past ``offs[-1]`` are set
    to zero (PyTorch leaves them uninitialised); an empty group of the 2D x 2D form gives a
    zero matrix.

    ``offs`` is read on the device: no host synchronisation, capturable in a CUDA graph. Its
    values are therefore not checked: ends are clamped into ``[0, total]`` and made
    non-decreasing (a running maximum), so bad ``offs`` never read or write out of bounds,
    but give the result of those clamped groups. Call :func:`validate_offs` (which
    synchronises) to check them. Autograd: gradients of ``mat_a``, ``mat_b`` (not of an fp8
    one) and ``bias`` are grouped products of the same ``offs``. On devices
    Triton does not serve, and for float64, :func:`reference_grouped_mm` runs.

    Raises
    ------
    TypeError for wrong dtypes (``offs`` not int32, ``mat_b`` unlike ``mat_a``, fp8 ``mat_b``
    without ``scale_b``, ``scale_b`` not float32, ``bias``, ``out_dtype``); ValueError for
    shapes (ranks, K mismatch, ``offs`` length, ``bias`` / ``scale_b`` shapes, ``offs`` given
    for 3D x 3D or missing otherwise) and devices, each naming the argument;
    NotImplementedError for fp8 ``mat_a``, ``scale_b`` with a 2-D ``mat_b`` and ``bias``
    with the 3D x 2D form.

    Example
    -------
    >>> import torch, fastpath
    >>> x = torch.randn(10, 64, dtype=torch.bfloat16, device="cuda")       # tokens sorted by expert
    >>> w = torch.randn(4, 128, 64, dtype=torch.bfloat16, device="cuda")   # experts (G, N, K)
    >>> offs = torch.tensor([3, 3, 7, 10], dtype=torch.int32, device="cuda")
    >>> fastpath.grouped_mm(x, w.transpose(1, 2), offs=offs).shape
    torch.Size([10, 128])
    """
    out_dtype = _checked(mat_a, mat_b, offs, bias, scale_b, out_dtype)
    return _grouped_mm_op(mat_a, mat_b, offs, bias, scale_b, out_dtype)


FAMILY = {"name": "grouped_mm", "ops": ["grouped_mm"], "reason": triton_reason}
