"""``pad``: ``torch.nn.functional.pad`` (constant, reflect, replicate, circular) in one kernel.

Every output element is computed from its own source index: no fill-then-copy, no padded
temporary, nothing but the output is allocated. The input is read in place through its
strides (non-contiguous views, channels-last, expanded dimensions).

Layout handled on the host: the dimensions are taken in the output's memory order
(contiguous, or channels-last where PyTorch keeps it), dimensions of size 1 that are not
padded are dropped, and neighbouring unpadded dimensions whose input strides nest are
merged. The last remaining dimension becomes the kernel's column axis, the others (at
most :data:`MAX_DIMS` - 1) its rows. A program writes a ``[BLOCK_R, BLOCK_W]`` tile of the
output seen as ``(rows, columns)``: the source offset of each row is computed once per row
(its multi-index split off in int32, int64 from :data:`WIDE_ROWS` rows on) and of each
column once per column, so each element costs one add, one load and one store. Offsets
are int64 (temporal padding of a video with ``H*W >= 65536``, more than ``2**31``
elements). With an unpadded contiguous column axis (temporal or channel padding: the
planes merge into one long row) loads and stores stay contiguous and can vectorise.

The kernel moves bits: every dtype is read and written as a signed integer of its width
(1, 2, 4 or 8 bytes), and the constant is handed over as the bit pattern of ``value``
converted to the dtype as PyTorch converts it. complex128 takes the reference path.
"""
from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Optional

import torch
import torch.nn.functional as F

from .._core import alloc
from .._core.backend import INTERPRET, num_sms, tl, triton, triton_reason, use_triton
from .._core.errors import check_tensor
from .._core.launch import Launcher, cdiv, next_pow2
from .._core.memo import LaunchMemo
from .._core.registry import register_op

MODES = ("constant", "reflect", "replicate", "circular")
#: Dimensions the kernel indexes after the host has simplified the layout (5 row dims +
#: the column dim): any 5-D input in any mode; layouts needing more take the reference path.
MAX_DIMS = 6
#: Columns per program at most, and elements per program aimed at.
MAX_W = 4096 if INTERPRET else 1024
TILE = 16384 if INTERPRET else 4096
#: From this many rows on, the kernel splits row indices in int64 (reflect forms 2*n).
WIDE_ROWS = 2**30

_BITS_VIEW = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


# ---------------------------------------------------------------------------- kernel

@triton.jit
def _src(x, n, MODE: tl.constexpr):
    """Source index of position ``x = out_index - pad_before`` in a dimension of size ``n``.
    constant: ``x`` itself (the caller masks what falls outside); reflect: mirrored without
    repeating the edge; replicate: clamped; circular: wrapped once (the host has cropped the
    input and checked that a pad does not exceed the cropped size)."""
    if MODE == 1:
        x = tl.where(x < 0, -x, x)
        x = tl.where(x >= n, 2 * (n - 1) - x, x)
    elif MODE == 2:
        x = tl.minimum(tl.maximum(x, 0), n - 1)
    elif MODE == 3:
        x = tl.where(x < 0, x + n, x)
        x = tl.where(x >= n, x - n, x)
    return x


@triton.jit
def _row_dim(r, O, L, N, S, roff, rok, MODE: tl.constexpr, OUTER: tl.constexpr):
    """Peel one row dimension (innermost first) off the row indices ``r``: add its source
    offset to ``roff``; in constant mode ``rok`` turns False where it falls outside the
    input. The outermost dimension (``OUTER``) takes what is left of ``r``."""
    if OUTER:
        o = r
    else:
        o = r % O
        r = r // O
    x = o - L
    roff += _src(x, N, MODE).to(tl.int64) * S
    if MODE == 0:
        rok = rok & (x >= 0) & (x < N)
    return r, roff, rok


@triton.jit
def _pad_kernel(x_ptr, o_ptr, fill, n_rows, n_ct,
                O1, O2, O3, O4, O5, L1, L2, L3, L4, L5, N1, N2, N3, N4, N5,
                S1, S2, S3, S4, S5, OW, LW, NW, SW,
                MODE: tl.constexpr, NDIM: tl.constexpr, COL_PAD: tl.constexpr, WIDE: tl.constexpr,
                BLOCK_R: tl.constexpr, BLOCK_W: tl.constexpr):
    # A [BLOCK_R, BLOCK_W] tile of the output seen as (n_rows, OW), row-major. Row dims are
    # numbered from the innermost (1) outwards: O = output size, L = pad before, N = input
    # size, S = input stride; the column dim: OW, LW, NW, SW.
    pid = tl.program_id(0)
    rows = (pid // n_ct).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid % n_ct).to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    live = rows < n_rows
    cmask = c < OW
    if COL_PAD:
        xc = c - LW
        coff = _src(xc, NW, MODE) * SW
        if MODE == 0:
            cok = cmask & (xc >= 0) & (xc < NW)
        else:
            cok = cmask
    else:
        coff = c * SW
        cok = cmask
    # the row multi-index in int32 unless there are WIDE_ROWS rows or more
    if WIDE:
        r = rows
    else:
        r = rows.to(tl.int32)
    roff = rows * 0
    rok = live
    if NDIM >= 1:
        r, roff, rok = _row_dim(r, O1, L1, N1, S1, roff, rok, MODE, NDIM == 1)
    if NDIM >= 2:
        r, roff, rok = _row_dim(r, O2, L2, N2, S2, roff, rok, MODE, NDIM == 2)
    if NDIM >= 3:
        r, roff, rok = _row_dim(r, O3, L3, N3, S3, roff, rok, MODE, NDIM == 3)
    if NDIM >= 4:
        r, roff, rok = _row_dim(r, O4, L4, N4, S4, roff, rok, MODE, NDIM == 4)
    if NDIM >= 5:
        r, roff, rok = _row_dim(r, O5, L5, N5, S5, roff, rok, MODE, True)
    src = x_ptr + (roff[:, None] + coff[None, :])
    if MODE == 0:
        v = tl.load(src, mask=rok[:, None] & cok[None, :], other=fill)
    else:
        v = tl.load(src, mask=live[:, None] & cmask[None, :])
    tl.store(o_ptr + (rows[:, None] * OW + c[None, :]), v, mask=live[:, None] & cmask[None, :])


_PAD = Launcher(_pad_kernel)


# ---------------------------------------------------------------------------- host side

def _full_pads(ndim: int, pad: Sequence[int]) -> list:
    """(before, after) per input dimension, from F.pad's last-dimension-first list."""
    pads = [(0, 0)] * ndim
    for k in range(len(pad) // 2):
        pads[ndim - 1 - k] = (pad[2 * k], pad[2 * k + 1])
    return pads


def _out_shape(shape, pad: Sequence[int]) -> list:
    return [n + lo + hi for n, (lo, hi) in zip(shape, _full_pads(len(shape), pad))]


def _strides_like_channels_last(sizes, strides) -> bool:
    """ATen's ``is_channels_last_strides_{2,3}d``: channels innermost, then W, H, (D), N,
    with ATen's tie-breaks for size-1 dimensions (ambiguous cases stay contiguous)."""
    if strides[1] == 0:
        return False
    low = 0
    for d in [1] + list(range(len(sizes) - 1, 1, -1)) + [0]:
        if sizes[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * max(1, sizes[d])
    return True


def _perm(x: torch.Tensor, mode: str) -> list:
    """Memory order of the output, outermost first: channels-last where PyTorch keeps it
    (constant, reflect and replicate follow ``Tensor.suggest_memory_format``; circular not)."""
    if mode != "circular" and x.dim() in (4, 5) and _strides_like_channels_last(x.shape, x.stride()):
        return [0] + list(range(2, x.dim())) + [1]
    return list(range(x.dim()))


def _alloc_out(x: torch.Tensor, pad: Sequence[int], mode: str, factory=None):
    """The output (dense, in the memory order of :func:`_perm`) and that order."""
    shape, perm = _out_shape(x.shape, pad), _perm(x, mode)
    phys = [shape[p] for p in perm]
    if factory is None:
        buf = alloc.empty(phys, dtype=x.dtype, device=x.device)
    else:
        buf = factory(phys, dtype=x.dtype, device=x.device)
    inv = sorted(range(len(perm)), key=perm.__getitem__)
    return buf.permute(inv), perm


@functools.lru_cache(maxsize=256)
def _fill_bits(value: float, dtype: torch.dtype) -> int:
    """The bit pattern (as a signed integer of the dtype's width) of ``value`` converted to
    ``dtype`` exactly as F.pad converts it (its checks differ from ``fill_``'s): F.pad itself
    pads a one-element CPU tensor. Cached; a host computation, no device sync."""
    try:
        t = F.pad(torch.zeros(1, dtype=dtype, device="cpu"), (1, 0), value=value)[0]
    except RuntimeError as exc:
        raise ValueError(f"value: {value!r} cannot be converted to {dtype} without overflow") from exc
    return int(t.view(_BITS_VIEW[t.element_size()]).item())


def _layout(x: torch.Tensor, pads: list, perm: list):
    """Dimensions in output memory order as [out, before, in, stride], trivial ones dropped
    and unpadded neighbours merged; None if more than MAX_DIMS remain."""
    dims = []
    for d in perm:
        n, (lo, hi), s = x.shape[d], pads[d], x.stride(d)
        if n == 1 and lo == 0 and hi == 0:
            continue
        if dims and lo == hi == 0 and dims[-1][0] == dims[-1][2] and dims[-1][1] == 0 \
                and dims[-1][3] == s * n:
            dims[-1] = [dims[-1][0] * n, 0, dims[-1][2] * n, s]
            continue
        dims.append([n + lo + hi, lo, n, s])
    if not dims:
        dims = [[1, 0, 1, 0]]
    return dims if len(dims) <= MAX_DIMS else None


def _launch(x: torch.Tensor, pads: list, mode: str, fill: int, out: torch.Tensor, perm: list) -> bool:
    """Run the kernel into ``out``; False (nothing written) if the layout needs too many dims."""
    dims = _layout(x, pads, perm)
    if dims is None:
        return False
    (OW, LW, NW, SW), rows = dims[-1], dims[-2::-1]  # rows: innermost first
    ndim = len(rows)
    rows = rows + [[1, 0, 1, 0]] * (MAX_DIMS - 1 - ndim)
    n_rows = 1
    for r in rows:
        n_rows *= r[0]
    # the column block that wastes the fewest lanes (ties: the wider), 128 wide at least
    top = min(next_pow2(OW), MAX_W)
    block_w = min((w for w in (top, top // 2, top // 4) if w >= min(top, 128)),
                  key=lambda w: (cdiv(OW, w) * w, -w))
    n_ct = cdiv(OW, block_w)
    block_r = max(1, min(TILE // block_w, next_pow2(n_rows)))
    while block_r > 1 and n_ct * cdiv(n_rows, block_r) < 4 * num_sms(x.device):
        block_r //= 2  # enough programs to fill the GPU
    grid = (n_ct * cdiv(n_rows, block_r),)
    bits = _BITS_VIEW[x.element_size()]
    xv = x.view(bits) if x.dtype != bits else x
    ov = out.view(bits) if out.dtype != bits else out
    col = [OW, LW, NW, SW]
    _PAD[grid](xv, ov, fill, n_rows, n_ct, *(r[0] for r in rows), *(r[1] for r in rows),
               *(r[2] for r in rows), *(r[3] for r in rows), *col,
               MODE=MODES.index(mode), NDIM=ndim, COL_PAD=(LW != 0 or OW != NW),
               WIDE=n_rows >= WIDE_ROWS, BLOCK_R=block_r, BLOCK_W=block_w,
               num_warps=max(1, min(4, block_r * block_w // 1024)))
    return True


# ---------------------------------------------------------------------------- reference

#: dtypes whose reflect / replicate padding PyTorch does not implement; the reference path
#: pads their bits as a signed integer of the same width instead.
_NO_NATIVE_REFLECT = {torch.bool, torch.uint16, torch.uint32, torch.uint64, torch.complex32,
                      getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)} - {None}


def reference_pad(x: torch.Tensor, pad: Sequence[int], mode: str = "constant",
                  value: Optional[float] = None) -> torch.Tensor:
    """PyTorch path: ``F.pad`` itself (on devices Triton does not serve, and where the
    kernel's layout limit is exceeded). Reflect / replicate of dtypes PyTorch lacks them for
    (bool, uint16/32/64, float8, complex32) pad the same bits viewed as signed integers."""
    pad = list(pad)
    if mode == "constant":
        return F.pad(x, pad, mode, 0.0 if value is None else float(value))
    if x.dtype in _NO_NATIVE_REFLECT:
        bits = _BITS_VIEW[x.element_size()]
        return F.pad(x.view(bits), pad, mode).view(x.dtype)
    return F.pad(x, pad, mode)


# ---------------------------------------------------------------------------- op

def _fake(x: torch.Tensor, pad: list[int], mode: str, value: float) -> torch.Tensor:
    return _alloc_out(x, pad, mode, factory=torch.empty)[0]


def _setup(ctx, inputs, output):
    x, pad, mode, _ = inputs
    ctx.shape, ctx.pad, ctx.mode = tuple(x.shape), list(pad), mode


def _index_1d(mode: str, n_out: int, lo: int, n: int, device) -> torch.Tensor:
    """The source index of each output position along one padded dimension (non-constant)."""
    x = torch.arange(n_out, device=device) - lo
    if mode == "reflect":
        x = x.abs()
        return torch.where(x >= n, 2 * (n - 1) - x, x)
    if mode == "replicate":
        return x.clamp(0, n - 1)
    return torch.remainder(x, n)


def _backward(ctx, grad):
    """The adjoint of padding: crop (constant), or scatter-add each padded dimension's
    gather back onto its source positions (reflect, replicate, circular)."""
    if ctx.mode == "constant":
        return pad(grad, [-p for p in ctx.pad]), None, None, None
    pads = _full_pads(len(ctx.shape), ctx.pad)
    crop = ctx.mode == "circular"  # circular pads the input cropped by the negative pads
    g = grad
    for d, (lo, hi) in enumerate(pads):
        if lo == hi == 0:
            continue
        n = ctx.shape[d] - (max(-lo, 0) + max(-hi, 0) if crop else 0)
        lo_eff = max(lo, 0) if crop else lo
        idx = _index_1d(ctx.mode, g.shape[d], lo_eff, n, g.device)
        shape = list(g.shape)
        shape[d] = n
        g = g.new_zeros(shape).index_add_(d, idx, g)
    if crop:
        g = pad(g, [c for lo, hi in reversed(pads) for c in (max(-lo, 0), max(-hi, 0))])
    return g, None, None, None


@register_op("pad", fake=_fake, backward=_backward, setup_context=_setup)
def _pad_op(x: torch.Tensor, pad: list[int], mode: str, value: float) -> torch.Tensor:
    pad = list(pad)
    if x.dtype == torch.complex128 or not use_triton(x):
        return reference_pad(x, pad, mode, value)
    out, perm = _alloc_out(x, pad, mode)
    if out.numel() == 0:
        return out
    src, pads = x, _full_pads(x.dim(), pad)
    if mode == "circular":  # PyTorch crops by the negative pads first, then wraps
        for d, (lo, hi) in enumerate(pads):
            src = src.narrow(d, max(-lo, 0), src.shape[d] - max(-lo, 0) - max(-hi, 0))
        pads = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    fill = _fill_bits(value, x.dtype) if mode == "constant" else 0
    if not _launch(src, pads, mode, fill, out, perm):
        return reference_pad(x, pad, mode, value)  # a layout of more than MAX_DIMS dims
    return out


# ---------------------------------------------------------------------------- checks

def _check(x, pad, mode, value):
    """PyTorch's rules for F.pad, with messages naming the argument. Returns (pad, value)."""
    check_tensor("input", x)
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode: expected one of {', '.join(map(repr, MODES))}, got {mode!r}")
    if isinstance(pad, torch.Tensor) or not isinstance(pad, Sequence):
        raise TypeError(f"pad: expected a tuple or list of ints, got {type(pad).__name__}")
    for i, p in enumerate(pad):
        if isinstance(p, bool) or not isinstance(p, int):
            raise TypeError(f"pad: expected ints, got {type(p).__name__} at position {i}")
    pad = [int(p) for p in pad]
    if value is not None and (isinstance(value, complex) or not isinstance(value, (int, float))):
        raise TypeError(f"value: expected a real number or None, got {type(value).__name__}")
    if mode != "constant" and value is not None and value != 0:
        raise ValueError(f"value: padding mode {mode!r} takes no value (only mode='constant' does), "
                         f"got {value!r}")
    if len(pad) % 2:
        raise ValueError(f"pad: needs an even number of entries (before, after per dimension), "
                         f"got {len(pad)}")
    k = len(pad) // 2
    if k > x.dim():
        raise ValueError(f"pad: {len(pad)} entries pad {k} dimensions, but input has {x.dim()} "
                         f"(at most {2 * x.dim()} entries)")
    pads = _full_pads(x.dim(), pad)
    if mode == "constant":
        for d, (lo, hi) in enumerate(pads):
            if x.shape[d] + min(lo, 0) + min(hi, 0) < 0:
                raise ValueError(f"pad: ({lo}, {hi}) at dimension {d} crops more than its size "
                                 f"{x.shape[d]}")
        value = 0.0 if value is None else float(value)
        if x.element_size() <= 8 and not torch.compiler.is_compiling():
            _fill_bits(value, x.dtype)  # ValueError if value overflows (else in the op itself)
        return pad, value
    if k not in (1, 2, 3) or x.dim() not in (k + 1, k + 2):
        raise NotImplementedError(
            f"pad: mode {mode!r} pads the last 1, 2 or 3 dimensions of a 2-D/3-D, 3-D/4-D or "
            f"4-D/5-D input respectively; got {len(pad)} entries for a {x.dim()}-D input")
    if mode != "circular" and any(x.shape[d] == 0 for d in range(x.dim() - k - 1, x.dim())):
        raise ValueError(f"input: mode {mode!r} needs non-empty dimensions (only a leading batch "
                         f"dimension may be 0), got shape {tuple(x.shape)}")
    outs = [x.shape[d] + lo + hi for d, (lo, hi) in enumerate(pads)][x.dim() - k:]
    if mode != "circular" and all(o < 1 for o in outs):
        raise ValueError(f"pad: mode {mode!r} needs an output size of at least 1 in some padded "
                         f"dimension, got {outs} from input {tuple(x.shape)}")
    for d in range(x.dim() - k, x.dim()):
        n, (lo, hi) = x.shape[d], pads[d]
        if n + lo + hi < 0:
            raise ValueError(f"pad: ({lo}, {hi}) at dimension {d} of size {n} gives a negative "
                             f"output size {n + lo + hi}")
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(f"pad: reflect padding must be smaller than the padded dimension, "
                             f"got ({lo}, {hi}) at dimension {d} of size {n}")
        if mode == "circular":
            kept = n - max(-lo, 0) - max(-hi, 0)
            if lo > n or hi > n:
                raise ValueError(f"pad: circular padding wraps around more than once: ({lo}, {hi}) "
                                 f"at dimension {d} of size {n}")
            if kept < 0 or max(lo, 0) > kept or max(hi, 0) > kept:
                raise ValueError(
                    f"pad: circular padding ({lo}, {hi}) at dimension {d} of size {n} wraps around "
                    f"the {max(kept, 0)} element(s) left after cropping more than once (PyTorch "
                    f"reads uninitialised memory there)")
    return pad, 0.0


def pad(input: torch.Tensor, pad: Sequence[int], mode: str = "constant",
        value: Optional[float] = None) -> torch.Tensor:
    """Pad (or crop, with negative pads) the last dimensions, as ``torch.nn.functional.pad``.

    Parameters
    ----------
    input : Tensor of any dtype and layout; read in place (non-contiguous views, expanded
        and channels-last tensors included). Every dtype takes the kernel (it moves bits),
        except complex128, which takes ``F.pad``.
    pad : ints ``(before_last, after_last, before_2nd_last, after_2nd_last, ...)``, at most
        ``2 * input.dim()`` of them. Negative entries crop.
    mode : ``"constant"`` (any rank, any number of padded dimensions), ``"reflect"``
        (mirror without repeating the edge), ``"replicate"`` (repeat the edge) or
        ``"circular"`` (wrap around); the last three pad the last 1, 2 or 3 dimensions of a
        2-D/3-D, 3-D/4-D or 4-D/5-D input, as in PyTorch. Circular crops by the negative
        pads first and then wraps, as PyTorch does.
    value : the constant for ``mode="constant"`` (default 0), converted to the dtype as
        PyTorch converts it (2.7 -> 2 for integers, any nonzero -> True for bool).

    Returns
    -------
    A new tensor of shape ``input.shape`` with each padded size ``n + before + after``, of
    ``input``'s dtype; channels-last for channels-last input (except circular), as PyTorch.
    One kernel launch, no host sync (CUDA-graph capturable), no temporary. Autograd and
    ``torch.compile(fullgraph=True)`` are supported. Reflect and replicate also work for
    dtypes PyTorch lacks them for (bool, uint16/32/64, float8, complex32).

    Raises
    ------
    ValueError naming ``pad`` for an odd number of entries, more than ``2 * input.dim()``,
    cropping more than a dimension holds, reflect pads not smaller than the dimension,
    an empty reflect/replicate output, circular pads wrapping more than once; naming
    ``value`` for a non-zero value with a non-constant mode or one that overflows the dtype;
    naming ``mode`` for an unknown mode; naming ``input`` for empty non-batch dimensions in
    reflect/replicate. NotImplementedError naming ``pad`` for a non-constant mode on ranks
    PyTorch does not support. TypeError for a non-tensor input, non-int pads, a non-real value.

    Example
    -------
    >>> import torch
    >>> from fastpath.ops.pad import pad
    >>> x = torch.arange(6.0).view(1, 2, 3)
    >>> pad(x, (1, 2), mode="reflect")
    tensor([[[1., 0., 1., 2., 1., 0.],
             [4., 3., 4., 5., 4., 3.]]])
    >>> pad(torch.ones(1, 8, 3, 90, 160), (1, 1, 1, 1, 2, 0)).shape  # causal video padding
    torch.Size([1, 8, 5, 92, 162])
    """
    pad_list, value = _check(input, pad, mode, value)
    # the value by its bits as a double (what the fill is made from) in the memo's key: -0.0
    # is not 0.0 there, and a NaN finds its entry
    return _MEMO.call(lambda: _pad_op(input, pad_list, mode, value), (input,),
                      (tuple(pad_list), mode, struct.pack("<d", value)))


_MEMO = LaunchMemo()


FAMILY = {"name": "pad", "ops": ["pad"], "reason": triton_reason}
