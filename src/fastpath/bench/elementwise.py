"""elementwise suite: the ops of issue 10 that PyTorch lacked or got wrong (frexp, heaviside,
take, comparisons on unsigned integers) against the PyTorch op on the same inputs.

Every check is exact equality with PyTorch's result (these ops have exact answers). Bytes:
each input read once and each output written once (``take`` also reads the gathered element:
random indices, so those reads cost a full sector each; the count stays the fewest bytes).
Unsigned comparisons: where PyTorch's CUDA build lacks the op for a dtype, the native side is
the way a user works around it today (flip the sign bit, compare as signed integers), and the
check compares with our reference path instead. The issue's target: 85% of copy bandwidth.
"""
from __future__ import annotations

import math

from .harness import Case

_BITS = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _numel(shape) -> int:
    return math.prod(shape)


def _exact(inputs, out, ref):
    import torch
    out = out if isinstance(out, tuple) else (out,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for a, b in zip(out, ref):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, f"got {a.dtype} {tuple(a.shape)}, torch gives {b.dtype} {tuple(b.shape)}"
        same = torch.equal(a, b) if not a.is_floating_point() else bool(
            ((a == b) | (a.isnan() & b.isnan())).all())
        if not same:
            return False, "differs from torch"
    return True, f"equal to torch ({len(out)} output{'s' * (len(out) > 1)})"


def _floats(special: bool):
    """x with normals, and (special) zeros, infinities, NaN and subnormals mixed in."""
    def make(shape, dtype, device, seed):
        import torch
        g = torch.Generator(device=device).manual_seed(seed)
        dt = getattr(torch, dtype)
        x = torch.randn(shape, generator=g, device=device).mul_(1e3).to(dt)
        if special:
            tiny = torch.finfo(dt).tiny
            pick = torch.randint(0, 64, shape, generator=g, device=device)
            x = torch.where(pick == 0, torch.zeros((), dtype=dt, device=device), x)
            x = torch.where(pick == 1, torch.full((), float("inf"), dtype=dt, device=device), x)
            x = torch.where(pick == 2, torch.full((), float("nan"), dtype=dt, device=device), x)
            x = torch.where(pick == 3, (x.float() * tiny * 1e-3).to(dt), x)
        return (x, torch.randn(shape, generator=g, device=device).to(dt)) if not special else (x,)
    return make


def _unsigned(shape, dtype, device, seed):
    """Two tensors spread over the whole unsigned range (half above the signed maximum)."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    bits = _BITS[dtype]
    signed = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[bits]
    info = torch.iinfo(signed)
    a, b = (torch.randint(info.min, info.max, shape, generator=g, device=device, dtype=signed)
            .view(getattr(torch, dtype)) for _ in range(2))
    b[::7] = a[::7]  # some equal pairs
    return a, b


def _signflip(op):
    """PyTorch-native workaround for unsigned compares: flip the sign bit, compare signed."""
    def go(a, b):
        import torch
        bits = a.element_size() * 8
        signed = {8: torch.int8, 16: torch.int16, 32: torch.int32, 64: torch.int64}[bits]
        flip = torch.tensor(-(1 << (bits - 1)), dtype=signed, device=a.device)
        sa, sb = a.view(signed) ^ flip, b.view(signed) ^ flip
        r = getattr(torch, op)(sa, sb)
        return (r ^ flip).view(a.dtype) if op in ("minimum", "maximum") else r
    return go


def _native_cmp(op, dtype):
    """torch's own op where its CUDA build has it for ``dtype``, else the sign-flip way."""
    import torch
    a = torch.tensor([1, 2], dtype=getattr(torch, dtype), device="cuda" if torch.cuda.is_available() else "cpu")
    try:
        getattr(torch, op)(a, a)
        return getattr(torch, op), "torch." + op
    except (RuntimeError, NotImplementedError, TypeError):
        return _signflip(op), "sign-flip"


def _cmp_case(op, shape, dtype, **kw):
    from ..ops import elementwise as ew
    native, how = _native_cmp(op, dtype)
    item_out = 1 if op not in ("minimum", "maximum") else None
    return Case(suite="elementwise", name=f"{op} {dtype} ({how})", shape=shape, dtype=dtype,
                ours=getattr(ew, op), native=native, check=_exact, make=_unsigned, cpu_shape=(4099,),
                nbytes=lambda s, i: _numel(s) * (2 * i + (item_out or i)), **kw)


def _take_inputs(shape, dtype, device, seed, order="random"):
    """``take``'s source and int64 indices: uniform over [-n, n) (``random``), the same wrapped
    into [0, n) and sorted (``sorted``: the same reads in address order), or ``0 .. m - 1``
    (``contiguous``: a copy). A random 4-byte read costs DRAM a whole sector, so only the last
    can reach copy bandwidth (``scripts/gather_floor.py``)."""
    import torch
    g = torch.Generator(device=device).manual_seed(seed)
    n_src, n_idx = shape
    x = torch.randn(n_src, generator=g, device=device).to(getattr(torch, dtype))
    idx = torch.randint(-n_src, n_src, (n_idx,), generator=g, device=device)
    if order == "sorted":
        idx = torch.where(idx < 0, idx + n_src, idx).sort().values
    elif order == "contiguous":
        idx = torch.arange(n_idx, device=device)
    return x, idx


def cases() -> list:
    import functools

    import torch

    from ..ops import elementwise as ew
    return [
        Case(suite="elementwise", name="frexp (with specials)", shape=(1 << 26,), dtype="float32", ours=ew.frexp,
             native=torch.frexp, check=_exact, make=_floats(True), cpu_shape=(4099,),
             nbytes=lambda s, i: _numel(s) * (2 * i + 4), quick=True, target=("pct_copy", 85.0)),
        Case(suite="elementwise", name="frexp", shape=(1 << 26,), dtype="bfloat16", ours=ew.frexp,
             native=torch.frexp, check=_exact, make=_floats(True), cpu_shape=(4099,),
             nbytes=lambda s, i: _numel(s) * (2 * i + 4), target=("pct_copy", 85.0)),
        Case(suite="elementwise", name="heaviside", shape=(1 << 26,), dtype="float32", ours=ew.heaviside,
             native=torch.heaviside, check=_exact, make=_floats(False), cpu_shape=(4099,),
             nbytes=lambda s, i: 3 * _numel(s) * i, target=("pct_copy", 85.0)),
        Case(suite="elementwise", name="take 16M of 64M", shape=(1 << 26, 1 << 24), dtype="float32",
             ours=ew.take, native=torch.take, check=_exact, make=_take_inputs, cpu_shape=(5000, 777),
             nbytes=lambda s, i: s[1] * (8 + 2 * i), target=("pct_copy", 85.0), capturable=False),
        *(Case(suite="elementwise", name=f"take nosync 16M of 64M{label}", shape=(1 << 26, 1 << 24),
               dtype="float32", ours=lambda x, i: ew.take(x, i, validate=False), native=torch.take, check=_exact,
               make=functools.partial(_take_inputs, order=order), cpu_shape=(5000, 777),
               nbytes=lambda s, i: s[1] * (8 + 2 * i))
          for label, order in (("", "random"), (", sorted", "sorted"), (", contiguous", "contiguous"))),
        _cmp_case("lt", (1 << 26,), "uint32", target=("pct_copy", 85.0), quick=True),
        _cmp_case("ge", (1 << 26,), "uint64", target=("pct_copy", 85.0)),
        _cmp_case("eq", (1 << 26,), "uint8", target=("pct_copy", 85.0)),
        _cmp_case("maximum", (1 << 26,), "uint64", target=("pct_copy", 85.0)),
        _cmp_case("minimum", (1 << 26,), "uint16", target=("pct_copy", 85.0)),
    ]
