"""1-D convolutions: depthwise causal conv1d with a rolling state (LFM2's short convolutions,
Qwen3.5's GatedDeltaNet, Mamba-style layers), and ``conv1d`` with ``F.conv1d`` semantics.

``_dw_kernel`` is one depthwise kernel for all of them: each program computes a
``(BLOCK_L, BLOCK_C)`` tile of ``out[b, c, l] = bias[c] + sum_j w[c, j] * x[b, c, l*s + j*d - p]``,
reading positions before the first one from the state (``HAS_STATE``) and the rest of the
padding as zeros, with an optional SiLU. ``STATE_OUT`` programs also write the new state
(the last ``S`` columns of ``[state, x]``); ``IN_PLACE`` writes it over the old one after a
barrier, which is how :func:`causal_conv1d_update` updates its state in one launch, with no
host synchronisation (CUDA-graph capturable). ``GATED`` reads the input as ``b * x`` and
multiplies the output by ``c`` from a ``[b | c | x]`` projection: LFM2's whole short
convolution (:func:`short_conv`) in one launch.

``x`` is read through its strides, so both ``(B, C, T)`` tensors and the ``(B, T, C)``
activations of a transformer seen as ``x.transpose(1, 2)`` (what transformers' LFM2 and
Qwen3.5 pass) are read in place. Dense ``conv1d`` (``groups == 1``) runs on the implicit-GEMM
kernel of :mod:`.conv3d`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import INTERPRET, pdl_start, pdl_trigger, tl, triton, needs_grad, use_triton
from .._core.errors import FLOAT_DTYPES, KERNEL_DTYPES, check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.registry import register_op
from .conv3d import igemm_conv
from .norm import round_to


@triton.jit
def _dw_input(ptrs, gofs, mask, GATED: tl.constexpr):
    """The conv's input at ``ptrs``; ``GATED``: the product ``b * x`` of channels ``c`` and
    ``c + 2 * gofs`` (elements), rounded to the input dtype as a separate multiply would."""
    v = tl.load(ptrs, mask=mask, other=0.0)
    if GATED:
        v = round_to(v.to(tl.float32) * tl.load(ptrs + 2 * gofs, mask=mask, other=0.0).to(tl.float32), v.dtype)
    return v


@triton.jit
def _dw_kernel(x_ptr, s_ptr, w_ptr, b_ptr, y_ptr, n_ptr,
               C, L, L_out, S, NS,
               sxb, sxc, sxl, ssb, ssc, ssl, swc, swk, syb, syc, syl, snb, snc, snl,
               stride, dil, pad, gofs,
               K: tl.constexpr, HAS_STATE: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
               STATE_OUT: tl.constexpr, IN_PLACE: tl.constexpr, NS_PAD: tl.constexpr,
               BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr, GATED: tl.constexpr = 0, PDL: tl.constexpr = 0):
    pdl_start(PDL)
    b = tl.program_id(0).to(tl.int64)
    offs_c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    pid_l = tl.program_id(2)
    offs_l = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    cmask = offs_c < C
    lmask = offs_l < L_out
    xc = x_ptr + b * sxb + offs_c.to(tl.int64)[None, :] * sxc
    sc = s_ptr + b * ssb + offs_c.to(tl.int64)[None, :] * ssc
    acc = tl.zeros((BLOCK_L, BLOCK_C), dtype=tl.float32)
    for j in tl.static_range(K):
        p = offs_l * stride + j * dil - pad  # position in x; p < 0 is history
        m = lmask[:, None] & cmask[None, :]
        v = _dw_input(xc + p.to(tl.int64)[:, None] * sxl, gofs, m & ((p >= 0) & (p < L))[:, None], GATED)
        if HAS_STATE:
            hist = (p < 0) & (p >= -S)
            v += tl.load(sc + (p + S).to(tl.int64)[:, None] * ssl, mask=m & hist[:, None], other=0.0)
        wj = tl.load(w_ptr + offs_c * swc + j * swk, mask=cmask, other=0.0).to(tl.float32)
        acc += v.to(tl.float32) * wj[None, :]
    pdl_trigger(PDL)
    if HAS_BIAS:
        acc += tl.load(b_ptr + offs_c, mask=cmask, other=0.0).to(tl.float32)[None, :]
    if SILU:
        acc = acc / (1.0 + tl.exp(-acc))
    if STATE_OUT:
        # new state column s holds [state, x] column S + L - NS + s, i.e. x at q = L - NS + s
        if pid_l == 0:
            s_idx = tl.arange(0, NS_PAD)
            q = L - NS + s_idx
            smask = (s_idx < NS)[:, None] & cmask[None, :]
            nv = _dw_input(xc + q.to(tl.int64)[:, None] * sxl, gofs, smask & (q >= 0)[:, None], GATED)
            if HAS_STATE:
                nv += tl.load(sc + (q + S).to(tl.int64)[:, None] * ssl,
                              mask=smask & ((q < 0) & (q + S >= 0))[:, None], other=0.0)
            if IN_PLACE:
                tl.debug_barrier()  # every read of the old state above is done
            n_ptrs = n_ptr + b * snb + offs_c.to(tl.int64)[None, :] * snc + s_idx.to(tl.int64)[:, None] * snl
            tl.store(n_ptrs, nv.to(n_ptr.dtype.element_ty), mask=smask)
    if GATED:  # times the output gate c, rounded like the two-step c * conv(b * x)
        cg = tl.load(xc + gofs + offs_l.to(tl.int64)[:, None] * sxl, mask=lmask[:, None] & cmask[None, :], other=0.0)
        acc = round_to(acc, y_ptr.dtype.element_ty).to(tl.float32) * cg.to(tl.float32)
    y_ptrs = y_ptr + b * syb + offs_c.to(tl.int64)[None, :] * syc + offs_l.to(tl.int64)[:, None] * syl
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=lmask[:, None] & cmask[None, :])


# ---------------------------------------------------------------------------- launcher

_DW = Launcher(_dw_kernel, pdl=True)
#: CUDA's limit on a grid's third dimension (blocks of L here; a knob for tests).
GRID_Z_MAX = 65535
#: Longest ``T`` that :func:`causal_conv1d_update` handles in one in-place launch.
UPDATE_MAX_T = 64


def _dw_launch(x, weight, bias, out, stride: int, dilation: int, pad: int, silu: bool,
               state=None, new_state=None, in_place: bool = False, gated: bool = False) -> None:
    """x (B, C, L), weight (C, K) (any strides), out (B, C, L_out); ``state`` (B, C, S) is the
    history before x; ``new_state`` (B, C, NS) receives the last NS columns of [state, x].
    ``gated``: x is the ``b`` third of a ``[b | c | x]`` tensor (channel stride apart), the
    input is ``b * x`` and the output is multiplied by ``c`` (LFM2's short convolution)."""
    B, C, L = x.shape
    L_out = out.shape[2]
    K = weight.shape[1]
    if B * C == 0:
        return
    block_l = max(2, next_pow2(L_out)) if in_place else min(64 if not INTERPRET else 32, max(2, next_pow2(L_out)))
    if not in_place:  # the grid's third dimension holds at most GRID_Z_MAX blocks of L: wider ones then
        block_l = max(block_l, next_pow2(cdiv(L_out, GRID_Z_MAX)))
    block_c = max(16, min(256 if not INTERPRET else 64, 4096 // block_l))
    if x.stride(1) == 1:  # channels-last activations: wide channel tiles coalesce
        block_c = max(block_c, 32)
    grid_l = 1 if in_place else max(1, cdiv(L_out, block_l))
    S = state.shape[2] if state is not None else 0
    NS = new_state.shape[2] if new_state is not None else 0
    st = state if state is not None else x
    ns = new_state if new_state is not None else out
    _DW[(B, cdiv(C, block_c), grid_l)](
        x, st, weight, bias if bias is not None else weight, out, ns,
        C, L, L_out, S, NS, *x.stride(), *st.stride(), *weight.stride(), *out.stride(), *ns.stride(),
        stride, dilation, pad, C * x.stride(1) if gated else 0,
        K=K, HAS_STATE=state is not None and S > 0, HAS_BIAS=bias is not None, SILU=silu,
        STATE_OUT=new_state is not None and NS > 0, IN_PLACE=in_place, NS_PAD=max(2, next_pow2(NS)),
        BLOCK_L=block_l, BLOCK_C=block_c, GATED=gated, num_warps=4)


# ---------------------------------------------------------------------------- reference

def reference_causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                            state: Optional[torch.Tensor] = None, activation: Optional[str] = None,
                            state_len: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path: ``F.conv1d`` over ``[history, x]`` (float32 arithmetic for 16-bit inputs)."""
    B, C, T = x.shape
    K = weight.shape[-1]
    S = state.shape[2] if state is not None else (state_len if state_len is not None else K - 1)
    hist = state if state is not None else x.new_zeros(B, C, max(K - 1, S))
    wide = torch.promote_types(hist.dtype, x.dtype)  # the old state's columns are carried exactly
    full = torch.cat([hist.to(wide), x.to(wide)], dim=2)
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    w = weight.reshape(C, 1, K).to(ct)
    out = F.conv1d(full[:, :, full.shape[2] - T - (K - 1):].to(ct), w, None if bias is None else bias.to(ct),
                   groups=C)
    if activation == "silu":
        out = F.silu(out)
    new = full[:, :, full.shape[2] - S:]
    new_state = new.to(state.dtype if state is not None else x.dtype).clone()
    return out.to(x.dtype), new_state


# ---------------------------------------------------------------------------- ops

def _check_dw(x, weight, bias, state, activation, fname: str):
    check_tensor("x", x, dtypes=FLOAT_DTYPES)
    check_tensor("weight", weight)
    if weight.dim() == 3 and weight.shape[1] == 1:
        weight = weight[:, 0]  # nn.Conv1d's depthwise (C, 1, K)
    C = x.shape[1] if x.dim() >= 2 else None
    if weight.dim() != 2 or weight.shape[0] != C:
        raise ValueError(f"weight: {fname} expects a depthwise (C, K) or (C, 1, K) weight with C = {C} "
                         f"(x.shape[1]), got shape {tuple(weight.shape)}")
    if weight.shape[1] < 1:
        raise ValueError(f"weight: expected a kernel of at least 1 tap, got shape {tuple(weight.shape)}")
    if weight.device != x.device:
        raise ValueError(f"weight: expected device {x.device} (x's), got {weight.device}")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.shape != (C,) or bias.device != x.device:
            raise ValueError(f"bias: expected shape ({C},) on {x.device}, got {tuple(bias.shape)} on {bias.device}")
    if activation not in (None, "silu", "swish"):
        raise NotImplementedError(f"activation: supported are None and 'silu', got {activation!r}")
    if state is not None:
        check_tensor("state", state, dtypes=FLOAT_DTYPES)
        B = x.shape[0]
        K = weight.shape[1]
        if state.dim() != 3 or state.shape[:2] != (B, C) or state.shape[2] < K - 1:
            raise ValueError(f"state: expected shape ({B}, {C}, S) with S >= {K - 1} (kernel size - 1), "
                             f"got {tuple(state.shape)}")
        if state.device != x.device:
            raise ValueError(f"state: expected device {x.device} (x's), got {state.device}")
    return weight, activation is not None


def _ccf_fake(x, weight, bias, state, silu, state_len):
    B, C, _ = x.shape
    S = state.shape[2] if state is not None else state_len
    return (torch.empty_like(x, memory_format=torch.contiguous_format),
            x.new_empty(B, C, S, dtype=state.dtype if state is not None else x.dtype))


@register_op("causal_conv1d", fake=_ccf_fake)
def _causal_conv1d_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor],
                      state: Optional[torch.Tensor], silu: bool, state_len: int
                      ) -> Tuple[torch.Tensor, torch.Tensor]:
    if x.dtype not in KERNEL_DTYPES or not use_triton(x):
        return reference_causal_conv1d(x, weight, bias, state, "silu" if silu else None, state_len)
    B, C, T = x.shape
    K = weight.shape[1]
    out = alloc.empty(B, C, T, dtype=x.dtype, device=x.device)
    S = state.shape[2] if state is not None else state_len
    new_state = alloc.empty(B, C, S, dtype=state.dtype if state is not None else x.dtype, device=x.device)
    _dw_launch(x, weight, bias, out, 1, 1, K - 1, silu, state, new_state)
    return out, new_state


def causal_conv1d(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  state: Optional[torch.Tensor] = None, activation: Optional[str] = None, *,
                  state_len: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Depthwise causal 1-D convolution over a sequence (prefill), continuing from ``state``.

    ``out[b, c, t] = act(bias[c] + sum_j weight[c, j] * [state, x][b, c, S + t + j - (K - 1)])``,
    i.e. ``F.conv1d(F.pad(x, (K - 1, 0)), weight[:, None], bias, groups=C)`` with the last
    ``K - 1`` state columns in place of the zeros.

    Parameters
    ----------
    x : (B, C, T), float16 / bfloat16 / float32 (float64: PyTorch path); any strides, e.g.
        the ``(B, T, C)`` hidden states as ``h.transpose(1, 2)``.
    weight : (C, K) or ``nn.Conv1d``'s depthwise (C, 1, K), any float dtype.
    bias : (C,) or None.
    state : (B, C, S) with ``S >= K - 1``, or None (zeros): the columns before ``x``.
    activation : None or ``"silu"``.
    state_len : length of the new state when ``state`` is None (default ``K - 1``).

    Returns
    -------
    ``(out, new_state)``: out (B, C, T) contiguous in x's dtype (float32 arithmetic);
    new_state (B, C, S): the last S columns of ``[state, x]`` (a new tensor, state's dtype).

    Raises
    ------
    ValueError for a non-depthwise weight, mismatched shapes or a too short state;
    NotImplementedError for another activation; TypeError for non-float input.
    """
    weight, silu = _check_dw(x, weight, bias, state, activation, "causal_conv1d")
    if x.dim() != 3:
        raise ValueError(f"x: expected a 3-D (B, C, T) tensor, got shape {tuple(x.shape)}")
    K = weight.shape[1]
    if state_len is None:
        state_len = K - 1
    if state is None and (isinstance(state_len, bool) or not isinstance(state_len, int) or state_len < 0):
        raise ValueError(f"state_len: expected a non-negative int, got {state_len!r}")
    if needs_grad(x, weight, bias, state):
        return reference_causal_conv1d(x, weight, bias, state, "silu" if silu else None, state_len)
    return _causal_conv1d_op(x, weight, bias, state, silu, state_len)


def _ccu_fake(x, state, weight, bias, silu):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@register_op("causal_conv1d_update", fake=_ccu_fake, mutates_args=("state",))
def _causal_conv1d_update_op(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor,
                             bias: Optional[torch.Tensor], silu: bool) -> torch.Tensor:
    x3 = x if x.dim() == 3 else x[:, :, None]
    if x.dtype not in KERNEL_DTYPES or not use_triton(x):
        out, new_state = reference_causal_conv1d(x3, weight, bias, state, "silu" if silu else None)
    elif x3.shape[2] > UPDATE_MAX_T:  # several programs along T: the new state goes through a copy
        out, new_state = _causal_conv1d_op(x3, weight, bias, state, silu, state.shape[2])
    else:
        out = alloc.empty(x3.shape, dtype=x.dtype, device=x.device)
        _dw_launch(x3, weight, bias, out, 1, 1, weight.shape[1] - 1, silu, state, state, in_place=True)
        return out.view(x.shape)
    state.copy_(new_state)
    return out.view(x.shape)


def causal_conv1d_update(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor,
                         bias: Optional[torch.Tensor] = None, activation: Optional[str] = None) -> torch.Tensor:
    """One decode step (or a few tokens) of a depthwise causal conv1d; updates ``state`` in place.

    The same computation as :func:`causal_conv1d` with ``state`` given, after which ``state``
    holds the last S columns of ``[state, x]``: one kernel launch, no host synchronisation,
    capturable in a CUDA graph (T up to ``UPDATE_MAX_T``; longer inputs take two launches).
    Argument order and semantics of transformers' / causal-conv1d's ``causal_conv1d_update``.

    Parameters
    ----------
    x : (B, C) for one token or (B, C, T); any strides.
    state : (B, C, S) with ``S >= K - 1``, updated in place (transformers keeps ``S = K``).
    weight : (C, K) or (C, 1, K). bias : (C,) or None. activation : None or ``"silu"``.

    Returns
    -------
    out, x's shape and dtype.
    """
    if x.dim() not in (2, 3):
        raise ValueError(f"x: expected (B, C) or (B, C, T), got shape {tuple(x.shape)}")
    check_tensor("state", state)
    weight, silu = _check_dw(x, weight, bias, state, activation, "causal_conv1d_update")
    if needs_grad(x, weight, bias):
        x3 = x if x.dim() == 3 else x[:, :, None]
        out, new_state = reference_causal_conv1d(x3, weight, bias, state, "silu" if silu else None)
        with torch.no_grad():
            state.copy_(new_state)
        return out.view(x.shape)
    return _causal_conv1d_update_op(x, state, weight, bias, silu)


def reference_short_conv(bcx: torch.Tensor, state: torch.Tensor, weight: torch.Tensor,
                         bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """PyTorch path of :func:`short_conv`: ``c * causal_conv1d(b * x)`` in three steps (what
    transformers' LFM2 runs). Returns ``(out, new_state)``; ``state`` is not touched."""
    b, c, x = bcx.chunk(3, dim=-1)
    out, new_state = reference_causal_conv1d((b * x).transpose(1, 2), weight, bias, state)
    return c * out.transpose(1, 2), new_state


def _sc_fake(bcx, state, weight, bias):
    return bcx.new_empty(*bcx.shape[:-1], bcx.shape[-1] // 3)


@register_op("short_conv", fake=_sc_fake, mutates_args=("state",))
def _short_conv_op(bcx: torch.Tensor, state: torch.Tensor, weight: torch.Tensor,
                   bias: Optional[torch.Tensor]) -> torch.Tensor:
    B, T, C3 = bcx.shape
    C = C3 // 3
    if bcx.dtype not in KERNEL_DTYPES or not use_triton(bcx):
        out, new_state = reference_short_conv(bcx, state, weight, bias)
        state.copy_(new_state)
        return out
    out = alloc.empty(B, T, C, dtype=bcx.dtype, device=bcx.device)
    b, o, K = bcx.transpose(1, 2)[:, :C], out.transpose(1, 2), weight.shape[1]
    if T <= UPDATE_MAX_T:  # one program along T: the state is rewritten in place
        _dw_launch(b, weight, bias, o, 1, 1, K - 1, False, state, state, in_place=True, gated=True)
    else:
        new_state = alloc.empty(state.shape, dtype=state.dtype, device=state.device)
        _dw_launch(b, weight, bias, o, 1, 1, K - 1, False, state, new_state, gated=True)
        state.copy_(new_state)
    return out


def short_conv(bcx: torch.Tensor, state: torch.Tensor, weight: torch.Tensor,
               bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """LFM2's gated short convolution in one launch: ``c * causal_conv1d(b * x, state)`` for
    ``[b | c | x] = bcx`` (the in-projection's output), continuing from ``state`` and updating
    it in place (it then holds the last S columns of ``[state, b * x]``).

    Decode steps and prefill chunks alike (capturable in a CUDA graph for T up to
    ``UPDATE_MAX_T``; longer chunks write the new state through a copy). The products are
    rounded to bcx's dtype as the three separate PyTorch operations would round them.

    Parameters
    ----------
    bcx : (B, T, 3C), float16 / bfloat16 / float32 (float64: PyTorch path); the last dim
        contiguous or not.
    state : (B, C, S) with ``S >= K - 1``, updated in place.
    weight : (C, K) or (C, 1, K). bias : (C,) or None.

    Returns
    -------
    (B, T, C) in bcx's dtype.

    Raises
    ------
    ValueError naming the argument for a last dim not divisible by 3, mismatched channels or
    batch, or a too short state; TypeError for non-float input.
    """
    check_tensor("bcx", bcx, dtypes=FLOAT_DTYPES)
    if bcx.dim() != 3 or bcx.shape[-1] % 3:
        raise ValueError(f"bcx: expected (B, T, 3C) (the [b | c | x] projection), got shape {tuple(bcx.shape)}")
    check_tensor("state", state)
    C = bcx.shape[-1] // 3
    weight, _ = _check_dw(bcx.transpose(1, 2)[:, :C], weight, bias, state, None, "short_conv")
    if needs_grad(bcx, weight, bias):
        out, new_state = reference_short_conv(bcx, state, weight, bias)
        with torch.no_grad():
            state.copy_(new_state)
        return out
    return _short_conv_op(bcx, state, weight, bias)


# ---------------------------------------------------------------------------- conv1d

def _conv1d_pads(padding, K: int, dilation: int, stride: int) -> Tuple[int, int]:
    if isinstance(padding, str):
        if padding == "valid":
            return 0, 0
        if padding == "same":
            if stride != 1:
                raise ValueError(f"padding: 'same' needs stride 1, got stride {stride}")
            total = dilation * (K - 1)
            return total // 2, total - total // 2
        raise ValueError(f"padding: expected an int, 'valid' or 'same', got {padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 1:
        padding = padding[0]
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding: expected a non-negative int, 'valid' or 'same', got {padding!r}")
    return padding, padding


def _one(name: str, v) -> int:
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name}: expected a positive int, got {v!r}")
    return v


def _conv1d_fake(x, weight, bias, stride, pad_l, pad_r, dilation, groups):
    L_out = (x.shape[2] + pad_l + pad_r - dilation * (weight.shape[2] - 1) - 1) // stride + 1
    return x.new_empty(x.shape[0], weight.shape[0], L_out)


def reference_conv1d(x, weight, bias, stride, pad_l, pad_r, dilation, groups) -> torch.Tensor:
    """PyTorch path: ``F.conv1d`` (an asymmetric padding is applied with ``F.pad`` first)."""
    if pad_l != pad_r:
        return F.conv1d(F.pad(x, (pad_l, pad_r)), weight, bias, stride, 0, dilation, groups)
    return F.conv1d(x, weight, bias, stride, pad_l, dilation, groups)


#: Dense convolutions with fewer input channels than this take F.conv1d (tensor-core tiles
#: would be mostly padding).
MIN_DENSE_CHANNELS = 16


#: The dense implicit-GEMM kernel on compiled GPUs. Off: on the H200 it ran at 0.43-0.83x of
#: cuDNN on Whisper-like shapes (docs/perf-notes.md); it still serves Triton's interpreter.
DENSE_ON_GPU = False


@register_op("conv1d", fake=_conv1d_fake)
def _conv1d_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], stride: int,
               pad_l: int, pad_r: int, dilation: int, groups: int) -> torch.Tensor:
    B, C, L = x.shape
    N, _, K = weight.shape
    depthwise = groups == C and N == C
    dense = groups == 1 and C >= MIN_DENSE_CHANNELS and (INTERPRET or DENSE_ON_GPU)
    if x.dtype not in KERNEL_DTYPES or not use_triton(x) or not (depthwise or dense):
        return reference_conv1d(x, weight, bias, stride, pad_l, pad_r, dilation, groups)
    L_out = (L + pad_l + pad_r - dilation * (K - 1) - 1) // stride + 1
    out = alloc.empty(B, N, L_out, dtype=x.dtype, device=x.device)
    if depthwise:
        _dw_launch(x, weight[:, 0], bias, out, stride, dilation, pad_l, False)
    else:
        igemm_conv(x[:, :, None, None, :], weight[:, :, None, None, :], bias, out[:, :, None, None, :],
                   (0, 0, pad_l), (1, 1, stride), (1, 1, dilation))
    return out


def conv1d(input: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, stride=1,
           padding=0, dilation=1, groups: int = 1) -> torch.Tensor:
    """``torch.nn.functional.conv1d`` with Triton paths for depthwise and dense convolutions.

    Paths: depthwise (``groups == C_in == C_out``, any kernel size, stride, dilation) on the
    depthwise kernel; dense (``groups == 1``) on ``F.conv1d`` (cuDNN was faster than the
    implicit-GEMM kernel on the H200; ``DENSE_ON_GPU`` turns the kernel on, and Triton's
    interpreter always runs it); float64 and calls that need autograd take ``F.conv1d``.

    Parameters
    ----------
    input : (B, C_in, L) or unbatched (C_in, L); any strides.
    weight : (C_out, C_in / groups, K), input's dtype. bias : (C_out,) or None.
    stride, dilation : positive ints. padding : non-negative int, ``"valid"`` or ``"same"``.
    groups : positive int dividing C_in and C_out.

    Returns
    -------
    (B, C_out, L_out) contiguous (unbatched input: (C_out, L_out)).

    Raises
    ------
    ValueError naming the argument for mismatched channels / groups, wrong ranks, bad
    padding, stride or dilation, or an input shorter than the dilated kernel; TypeError for
    non-float input or a weight dtype other than input's.
    """
    check_tensor("input", input, dtypes=FLOAT_DTYPES)
    check_tensor("weight", weight)
    if input.dim() not in (2, 3):
        raise ValueError(f"input: expected (B, C_in, L) or (C_in, L), got shape {tuple(input.shape)}")
    if weight.dim() != 3:
        raise ValueError(f"weight: expected (C_out, C_in / groups, K), got shape {tuple(weight.shape)}")
    if weight.dtype != input.dtype:
        raise TypeError(f"weight: expected dtype {input.dtype} (input's), got {weight.dtype}")
    x = input if input.dim() == 3 else input[None]
    C, (N, Cg, K) = x.shape[1], weight.shape
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"groups: expected a positive int, got {groups!r}")
    if C % groups or N % groups or Cg * groups != C:
        raise ValueError(f"groups: {groups} groups need C_in ({C}) = weight.shape[1] ({Cg}) * groups "
                         f"and C_out ({N}) divisible by groups")
    if bias is not None:
        check_tensor("bias", bias)
        if bias.shape != (N,) or bias.dtype != x.dtype:
            raise ValueError(f"bias: expected shape ({N},) and dtype {x.dtype}, got {tuple(bias.shape)} {bias.dtype}")
    stride, dilation = _one("stride", stride), _one("dilation", dilation)
    pad_l, pad_r = _conv1d_pads(padding, K, dilation, stride)
    if x.shape[2] + pad_l + pad_r < dilation * (K - 1) + 1:
        raise ValueError(f"input: length {x.shape[2]} with padding ({pad_l}, {pad_r}) is shorter than the "
                         f"dilated kernel ({dilation * (K - 1) + 1})")
    if needs_grad(x, weight, bias):
        out = reference_conv1d(x, weight, bias, stride, pad_l, pad_r, dilation, groups)
    else:
        out = _conv1d_op(x, weight, bias, stride, pad_l, pad_r, dilation, groups)
    return out if input.dim() == 3 else out[0]
