"""``scaled_mm``: FP8 x FP8 matmul with tensor-, row- or block-wise scales.

* ``_mm_kernel``: tiled ``tl.dot`` GEMM for ``M > 16``. ``NATIVE`` feeds fp8 tiles to the
  tensor cores (compute capability >= 8.9, same fp8 dtype on both sides); otherwise the
  operands are loaded as ``uint8`` and decoded in-kernel (``_decode``) to bfloat16 (exact
  for every fp8 value) or to float32 in the interpreter (whose bf16 ``tl.dot`` is broken).
  ``TMA``: the tiles come through tensor descriptors (the copy engine of capability 9.0+,
  pipelined over ``num_stages``) when both operands are K-contiguous and 16-byte aligned
  (``mat_b`` as ``weight.t()``); other layouts take masked pointer loads.
* ``M <= 16`` (decode) takes the matrix-vector kernel shared with ``linear``
  (:mod:`fastpath.ops.matvec`), which streams the weight columns once for all rows and
  splits K when N alone cannot fill the GPU.
"""
from __future__ import annotations

import enum
from typing import Optional

import torch

from ..._core import alloc
from ..._core.backend import INTERPRET, tl, tma_on, triton, use_triton
from ..._core.errors import KERNEL_DTYPES, check_tensor, require_fp8
from ..._core.launch import cdiv
from ..._core.memo import LaunchMemo
from ..._core.registry import register_op
from .. import matvec
from ..matvec import _block_scales, _epilogue, _mm, _tile_order
from .bits import _decode, _fp8_dtypes, _native_fp8


class ScalingType(enum.Enum):
    """How a scale tensor maps onto its fp8 operand; names and values mirror
    ``torch.nn.functional.ScalingType``. BlockWise1x16 / BlockWise1x32 (MX / NV formats)
    exist for compatibility and raise ``NotImplementedError``."""
    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5




@triton.jit
def _tile_mm(a, b, NATIVE: tl.constexpr, DOT_F32: tl.constexpr):
    """One K tile's product in float32: fp8 tensor cores, or the decoded operands as bfloat16
    (exact: every fp8 value fits) or float32 (the interpreter, whose bf16 tl.dot is broken)."""
    if NATIVE:
        return tl.dot(a, b)
    elif DOT_F32:
        return _mm(a, b, tl.float32)
    else:
        return _mm(a, b.to(tl.bfloat16), tl.bfloat16)


@triton.jit
def _mm_kernel(a_ptr, b_ptr, sa_ptr, sb_ptr, bias_ptr, out_ptr, M, N, K,
               sam, sak, sbk, sbn, ssa_m, ssa_k, ssb_k, ssb_n, som, son,
               BLOCKWISE: tl.constexpr, HAS_BIAS: tl.constexpr, NATIVE: tl.constexpr,
               A_E5M2: tl.constexpr, B_E5M2: tl.constexpr, DOT_F32: tl.constexpr, TMA: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # One (BLOCK_M, BLOCK_N) output tile. TMA: a_ptr / b_ptr are tensor descriptors of a (M, K)
    # and of b's transpose (N, K), both K-contiguous (the hardware copies the tiles and
    # zero-fills past the edges); else masked pointer loads of any strides.
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = _tile_order(tl.program_id(0), grid_m, grid_n, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    mmask = offs_m < M
    nmask = offs_n < N
    a_ptrs = a_ptr
    b_ptrs = b_ptr
    if not TMA:
        a_ptrs = a_ptr + offs_m.to(tl.int64)[:, None] * sam + offs_k[None, :] * sak
        b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n.to(tl.int64)[None, :] * sbn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if TMA:
            a = a_ptr.load([pid_m * BLOCK_M, k0])
            b = b_ptr.load([pid_n * BLOCK_N, k0]).T
        else:
            kmask = (k0 + offs_k) < K
            if NATIVE:  # (a float8 tensor takes a float `other`, the uint8 bits an int)
                a = tl.load(a_ptrs, mask=mmask[:, None] & kmask[None, :], other=0.0)
                b = tl.load(b_ptrs, mask=kmask[:, None] & nmask[None, :], other=0.0)
            else:
                a = tl.load(a_ptrs, mask=mmask[:, None] & kmask[None, :], other=0)
                b = tl.load(b_ptrs, mask=kmask[:, None] & nmask[None, :], other=0)
            a_ptrs += BLOCK_K * sak
            b_ptrs += BLOCK_K * sbk
        if not NATIVE:
            a = _decode(a, A_E5M2)
            b = _decode(b, B_E5M2)
        if BLOCKWISE:
            sa, sb = _block_scales(sa_ptr, sb_ptr, offs_m, offs_n, mmask, nmask, k0, ssa_m, ssa_k, ssb_k, ssb_n)
            acc += _tile_mm(a, b, NATIVE, DOT_F32) * sa[:, None] * sb[None, :]
        elif NATIVE:
            acc = tl.dot(a, b, acc)
        else:
            acc += _tile_mm(a, b, NATIVE, DOT_F32)
    _epilogue(acc, sa_ptr, sb_ptr, bias_ptr, out_ptr, offs_m, offs_n, M, N, ssa_m, ssb_n, som, son,
              not BLOCKWISE, not BLOCKWISE, HAS_BIAS)


#: Tuning knobs (the interpreter uses small blocks so that tests cross block edges and tails).
MV_MAX_M = 16  # M up to this takes the matrix-vector kernel


MM_BLOCKS = (32, 32, 32) if INTERPRET else (128, 128, 64)  # M, N, K


#: H200, ``scripts/tune_scaled_mm.py`` (commit dbb4ace), against torch._scaled_mm in the same
#: run, tensorwise / rowwise: 4096^3 0.95x / 1.03x, 4096x14336x4096 0.91x / 1.07x, 8192^3
#: 0.98x / 1.00x with tensor descriptors, 128x256x128 tiles, 8 warps, 3 stages, a program per
#: tile (masked pointer loads: 0.65x, the loads not pipelined; persistent programs, one or two
#: an SM walking the tiles: 0.66-0.94x at 128x128, no better at 128x256: not kept).
MM_BLOCKS_NATIVE = (128, 256, 128)
MM_WARPS_STAGES = (8, 3)  # num_warps, num_stages of the compiled tiled kernel
#: Tensor descriptors (TMA copies on NVIDIA capability 9.0+; the interpreter emulates them)
#: when both operands are K-contiguous and 16-byte aligned.
MM_TMA = True


def _tma_ok(a: torch.Tensor, b: torch.Tensor) -> bool:
    """a (M, K) and b (K, N) both K-contiguous with 16-byte aligned rows and bases, on a GPU
    with TMA and a Triton with tensor descriptors (or in the interpreter)."""
    if not MM_TMA or not tma_on(a.device):
        return False
    return (a.stride(1) == 1 and b.stride(0) == 1 and a.stride(0) % 16 == 0 and b.stride(1) % 16 == 0
            and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0)


def _scale_strides(s: torch.Tensor, blockwise: bool, is_a: bool):
    """(stride over M or N, stride over K-blocks) for the kernels; 0 broadcasts."""
    if s.numel() == 1:
        return 0, 0
    if blockwise:
        return (s.stride(0), s.stride(1)) if is_a else (s.stride(1), s.stride(0))
    return (s.stride(0), 0) if is_a else (s.stride(1), 0)


def _mm_launch(a, b, sa, sb, bias, out_dtype, blockwise: bool) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    out = alloc.empty(M, N, dtype=out_dtype, device=a.device)
    if M == 0 or N == 0:
        return out
    if K == 0:
        out.zero_()
        if bias is not None:
            out += bias
        return out
    native = _native_fp8(a, b)
    a_k, b_k = (a, b) if native else (a.view(torch.uint8), b.view(torch.uint8))
    ssa_m, ssa_k = _scale_strides(sa, blockwise, True)
    ssb_n, ssb_k = _scale_strides(sb, blockwise, False)
    bias_arg = bias if bias is not None else out
    flags = dict(BLOCKWISE=blockwise, HAS_BIAS=bias is not None, NATIVE=native,
                 A_E5M2=a.dtype == torch.float8_e5m2, B_E5M2=b.dtype == torch.float8_e5m2)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), ssa_m, ssa_k, ssb_k, ssb_n)
    if M <= MV_MAX_M:
        # block scales: BLOCK_K divides 128, so one scale pair covers a tile
        dot = a.dtype if (native and matvec.FP8_DOT is not None) else torch.bfloat16
        plan = matvec.plan(M, N, K, a.device, dot, b_bytes=1, max_block_k=128 if blockwise else 1 << 20)
        mode = 1 if native else 2
        return matvec.launch(
            matvec.Operand(a_k, mode, flags["A_E5M2"]), matvec.Operand(b_k, mode, flags["B_E5M2"]), out,
            plan=plan, sa=sa, sb=sb, sa_strides=(ssa_m, ssa_k),
            sb_strides=(ssb_n, ssb_k), blockwise=blockwise, bias=bias)
    bm, bn, bk = MM_BLOCKS_NATIVE if native else MM_BLOCKS
    grid = (cdiv(M, bm) * cdiv(N, bn),)
    tma = _tma_ok(a_k, b_k)
    if tma:
        from triton.tools.tensor_descriptor import TensorDescriptor
        a_k = TensorDescriptor(a_k, [M, K], [a_k.stride(0), 1], [bm, bk])
        b_k = TensorDescriptor(b_k.t(), [N, K], [b_k.stride(1), 1], [bn, bk])
    _mm_kernel[grid](a_k, b_k, sa, sb, bias_arg, out, M, N, K, *strides, out.stride(0), out.stride(1),
                     DOT_F32=INTERPRET, TMA=tma,
                     BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                     num_warps=4 if INTERPRET else MM_WARPS_STAGES[0],
                     num_stages=1 if INTERPRET else MM_WARPS_STAGES[1], **flags)
    return out


def reference_scaled_mm(mat_a, mat_b, scale_a, scale_b, blockwise: bool = False, bias=None,
                        output_dtype=torch.bfloat16) -> torch.Tensor:
    """PyTorch path of :func:`scaled_mm`: dequantise to float32, matmul, add bias, cast."""
    a, b = mat_a.float(), mat_b.float()
    M, K = a.shape
    N = b.shape[1]
    if blockwise:
        sa = scale_a.float()[:, :cdiv(K, 128)].repeat_interleave(128, 1)[:, :K]
        sb = scale_b.float()[:cdiv(K, 128), :cdiv(N, 128)].repeat_interleave(128, 0).repeat_interleave(128, 1)[:K, :N]
        out = (a * sa) @ (b * sb)
    else:
        out = (a @ b) * scale_a.float().reshape(-1, 1) * scale_b.float().reshape(1, -1)
    if bias is not None:
        out = out + bias.float()
    return out.to(output_dtype)


def _recipe(name: str, r) -> ScalingType:
    if isinstance(r, (list, tuple)) and len(r) == 1:
        r = r[0]
    if isinstance(r, ScalingType):
        return r
    if isinstance(r, str) or hasattr(r, "name"):  # also torch.nn.functional.ScalingType
        key = (r if isinstance(r, str) else r.name).lower()
        for s in ScalingType:
            if s.name.lower() == key:
                return s
    elif isinstance(r, int) and not isinstance(r, bool):
        try:
            return ScalingType(r)
        except ValueError:
            pass
    raise ValueError(f"{name}: expected a ScalingType, got {r!r}")


_SUPPORTED = "(TensorWise, TensorWise), (RowWise, RowWise), (BlockWise1x128, BlockWise128x128)"


def _check_mm(mat_a, mat_b, scale_a, ra: ScalingType, scale_b, rb: ScalingType, bias, output_dtype):
    fp8 = _fp8_dtypes()
    check_tensor("mat_a", mat_a, dtypes=fp8)
    check_tensor("mat_b", mat_b, dtypes=fp8)
    check_tensor("scale_a", scale_a)
    check_tensor("scale_b", scale_b)
    for name, t in (("mat_a", mat_a), ("mat_b", mat_b)):
        if t.dim() != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {tuple(t.shape)}")
    (M, K), (K2, N) = mat_a.shape, mat_b.shape
    if K != K2:
        raise ValueError(f"mat_b: expected {K} rows to match mat_a's (M, K) = ({M}, {K}), got shape ({K2}, {N})")
    if output_dtype not in KERNEL_DTYPES:
        raise TypeError(f"output_dtype: expected one of float32, float16, bfloat16, got {output_dtype}")
    for name, t in (("mat_b", mat_b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if t.device != mat_a.device:
            raise ValueError(f"{name}: expected a tensor on {mat_a.device} like mat_a, got {t.device}")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.dtype != output_dtype:
            raise TypeError(f"bias: dtype must equal output_dtype {output_dtype}, got {bias.dtype}")
        if tuple(bias.shape) != (N,):
            raise ValueError(f"bias: expected shape ({N},), got {tuple(bias.shape)}")
        if bias.device != mat_a.device:
            raise ValueError(f"bias: expected a tensor on {mat_a.device} like mat_a, got {bias.device}")
    pair = (ra, rb)
    if pair not in ((ScalingType.TensorWise,) * 2, (ScalingType.RowWise,) * 2,
                    (ScalingType.BlockWise1x128, ScalingType.BlockWise128x128)):
        raise NotImplementedError(f"scale_recipe_a, scale_recipe_b: ({ra.name}, {rb.name}) is not supported; "
                                  f"supported pairs are {_SUPPORTED}")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise TypeError(f"{name}: {pair[name == 'scale_b'].name} scaling needs float32 scales, got {s.dtype}")
    if ra == ScalingType.TensorWise:
        for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
            if s.numel() != 1:
                raise ValueError(f"{name}: TensorWise scaling needs one element, got shape {tuple(s.shape)}")
    elif ra == ScalingType.RowWise:
        if tuple(scale_a.shape) != (M, 1):
            raise ValueError(f"scale_a: RowWise scaling needs shape ({M}, 1), got {tuple(scale_a.shape)}")
        if tuple(scale_b.shape) != (1, N):
            raise ValueError(f"scale_b: RowWise scaling needs shape (1, {N}), got {tuple(scale_b.shape)}")
    else:
        kb = cdiv(K, 128)
        if tuple(scale_a.shape) != (M, kb):
            raise ValueError(f"scale_a: BlockWise1x128 scaling needs shape ({M}, {kb}), got {tuple(scale_a.shape)}")
        rows_ok = scale_b.dim() == 2 and scale_b.shape[0] in (kb, cdiv(kb, 4) * 4)  # PyTorch pads to 4
        if not rows_ok or scale_b.shape[1] != cdiv(N, 128):
            raise ValueError(f"scale_b: BlockWise128x128 scaling needs shape ({kb}, {cdiv(N, 128)}), "
                             f"got {tuple(scale_b.shape)}")


def _mm_fake(mat_a, mat_b, scale_a, recipe_a, scale_b, recipe_b, bias, output_dtype):
    return mat_a.new_empty((mat_a.shape[0], mat_b.shape[1]), dtype=output_dtype)


@register_op("scaled_mm", fake=_mm_fake)
def _scaled_mm_op(mat_a: torch.Tensor, mat_b: torch.Tensor, scale_a: torch.Tensor, recipe_a: int,
                  scale_b: torch.Tensor, recipe_b: int, bias: Optional[torch.Tensor],
                  output_dtype: torch.dtype) -> torch.Tensor:
    blockwise = recipe_a == ScalingType.BlockWise1x128.value
    if not use_triton(mat_a):
        return reference_scaled_mm(mat_a, mat_b, scale_a, scale_b, blockwise, bias, output_dtype)
    return _mm_launch(mat_a, mat_b, scale_a, scale_b, bias, output_dtype, blockwise)


def scaled_mm(mat_a: torch.Tensor, mat_b: torch.Tensor, scale_a: torch.Tensor, scale_recipe_a,
              scale_b: torch.Tensor, scale_recipe_b, swizzle_a=None, swizzle_b=None,
              bias: Optional[torch.Tensor] = None, output_dtype: Optional[torch.dtype] = torch.bfloat16,
              contraction_dim=(), use_fast_accum: bool = False) -> torch.Tensor:
    """Scaled fp8 matrix product, with the arguments of ``torch.nn.functional.scaled_mm``.

    ``out = (mat_a * scale_a) @ (mat_b * scale_b) + bias``, accumulated in float32 and cast
    to ``output_dtype``.

    Parameters
    ----------
    mat_a : (M, K) float8_e4m3fn or float8_e5m2, any strides.
    mat_b : (K, N) fp8, any strides; typically ``weight_q.t()`` of a row-major (N, K) weight.
    scale_a, scale_recipe_a, scale_b, scale_recipe_b : float32 dequantisation scales and how
        they map onto the operands (a :class:`ScalingType`, ``torch.nn.functional.ScalingType``,
        its name or value, or a one-element list of these). Supported pairs:

        * ``TensorWise`` / ``TensorWise``: one element each (shape ``()``, ``(1,)``, ``(1, 1)``).
        * ``RowWise`` / ``RowWise``: ``scale_a`` (M, 1), ``scale_b`` (1, N).
        * ``BlockWise1x128`` / ``BlockWise128x128``: ``scale_a`` (M, cdiv(K, 128)),
          ``scale_b`` (cdiv(K, 128), cdiv(N, 128)) (rows padded to a multiple of 4, as
          PyTorch lays them out, are accepted). Any strides.
    swizzle_a, swizzle_b : ``None`` or ``NO_SWIZZLE`` only (positional slots as in PyTorch,
        so pass ``bias`` and ``output_dtype`` by keyword).
    bias : optional (N,) tensor of ``output_dtype``, added in float32.
    output_dtype : float32, float16 or bfloat16 (default; ``None`` means bfloat16).
    contraction_dim : ``()`` or ``(1, 0)`` only.
    use_fast_accum : accepted for compatibility; accumulation is float32 in every path.

    Returns
    -------
    (M, N) tensor of ``output_dtype``, contiguous. NaN or inf scales propagate to the output.
    M <= 16 takes a matrix-vector kernel (split over K, deterministically, when N is small);
    larger M a tiled ``tl.dot`` kernel fed fp8 directly on GPUs with fp8 tensor cores.

    Raises
    ------
    TypeError for wrong dtypes (operands, scales, ``output_dtype``, ``bias``); ValueError for
    wrong shapes, a K mismatch, devices or an unknown recipe, each naming the argument;
    NotImplementedError for unsupported recipe pairs, swizzles or contraction dims.

    Example
    -------
    >>> qa, sa = fastpath.quantize_fp8(x, "rowwise")          # x (M, K)
    >>> qw, sw = fastpath.quantize_fp8(w, "rowwise")          # w (N, K)
    >>> y = fastpath.scaled_mm(qa, qw.t(), sa, ScalingType.RowWise, sw.t(), ScalingType.RowWise,
    ...                        output_dtype=torch.bfloat16)   # ~ x @ w.t()
    """
    require_fp8()
    if isinstance(scale_a, (list, tuple)) and len(scale_a) == 1:
        scale_a = scale_a[0]
    if isinstance(scale_b, (list, tuple)) and len(scale_b) == 1:
        scale_b = scale_b[0]
    ra = _recipe("scale_recipe_a", scale_recipe_a)
    rb = _recipe("scale_recipe_b", scale_recipe_b)
    for name, sw in (("swizzle_a", swizzle_a), ("swizzle_b", swizzle_b)):
        if isinstance(sw, (list, tuple)) and len(sw) == 1:
            sw = sw[0]
        if isinstance(sw, torch.Tensor):
            raise TypeError(f"{name}: expected a SwizzleType or None, got a Tensor "
                            "(pass bias= and output_dtype= by keyword, as in torch.nn.functional.scaled_mm)")
        if sw is not None and getattr(sw, "name", sw) not in ("NO_SWIZZLE", 0):
            raise NotImplementedError(f"{name}: only None / NO_SWIZZLE is supported, got {sw!r}")
    if tuple(contraction_dim) not in ((), (1, 0)):
        raise NotImplementedError(f"contraction_dim: only () or (1, 0) is supported, got {contraction_dim!r}")
    output_dtype = torch.bfloat16 if output_dtype is None else output_dtype
    return _MEMO.call(lambda: _checked_scaled_mm(mat_a, mat_b, scale_a, ra, scale_b, rb, bias, output_dtype),
                      (mat_a, mat_b, scale_a, scale_b, bias), (ra, rb, output_dtype))


def _checked_scaled_mm(mat_a, mat_b, scale_a, ra, scale_b, rb, bias, output_dtype):
    _check_mm(mat_a, mat_b, scale_a, ra, scale_b, rb, bias, output_dtype)
    return _scaled_mm_op(mat_a, mat_b, scale_a, ra.value, scale_b, rb.value, bias, output_dtype)


#: Eager calls with the properties of an earlier call replay its launch (fastpath._core.memo):
#: the matrix-vector path (M <= 16); the tiled path launches its kernel directly and is never
#: recorded.
_MEMO = LaunchMemo()
