"""FP8 formats: their dtypes and limits, and exact bit conversion in-kernel.

Triton's interpreter cannot load float8 tensors with a mask, so off tensor-core hardware
(and always in the interpreter) fp8 data travels as ``uint8`` and ``_encode`` / ``_decode``
convert bits (round to nearest even, as ``Tensor.to(float8)``).
"""
from __future__ import annotations


import torch

from ..._core.backend import capability, INTERPRET, tl, triton


def _fp8_dtypes():
    return tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def fp8_max(dtype: torch.dtype) -> float:
    """Largest finite value of an fp8 dtype (448 for e4m3fn, 57344 for e5m2)."""
    return float(torch.finfo(dtype).max)


def fp8_load_mode(device: torch.device, override=None) -> int:
    """How kernels load an fp8 operand: 1 = as float8, converted by the hardware; 2 = as
    uint8 bits decoded exactly in registers (older GPUs, ROCm, the interpreter). Tests force
    one with ``override`` = "native" or "bits"."""
    if override is not None:
        return 1 if override == "native" else 2
    return 1 if fp8_hardware(device) else 2


def fp8_hardware(device: torch.device) -> bool:
    """Whether fp8 loads convert in hardware and fp8 tensor cores exist: NVIDIA compute
    capability 8.9+ (Ada, Hopper, ...). Not in the interpreter (it reads the e4m3fn NaN code
    0x7F as 480) nor on ROCm."""
    if INTERPRET or device.type != "cuda" or torch.version.hip is not None:
        return False
    return capability(device.index if device.index is not None else torch.cuda.current_device()) >= (8, 9)


def _native_fp8(t: torch.Tensor, other: torch.Tensor) -> bool:
    """fp8 tensor-core path: fp8 hardware and the same fp8 dtype on both operands."""
    return t.dtype == other.dtype and fp8_hardware(t.device)


@triton.jit
def _decode(b, E5M2: tl.constexpr):
    """uint8 fp8 bits -> float32 (exact)."""
    if E5M2:  # e5m2 is the top byte of a float16
        return (b.to(tl.int16) << 8).to(tl.float16, bitcast=True).to(tl.float32)
    else:
        u = b.to(tl.int32)
        e = (u >> 3) & 15
        m = u & 7
        bits = ((u & 128) << 24) | ((e + 120) << 23) | (m << 20)
        v = bits.to(tl.float32, bitcast=True)
        sub = m.to(tl.float32) * 0.001953125  # 2**-9
        sub = tl.where((u & 128) != 0, -sub, sub)
        v = tl.where(e == 0, sub, v)
        return tl.where((e == 15) & (m == 7), float("nan"), v)


@triton.jit
def _encode(v, MB: tl.constexpr, BIAS: tl.constexpr):
    """float32 (already within +-fp8 max, or NaN) -> uint8 fp8 bits, round to nearest even."""
    u = v.to(tl.int32, bitcast=True)
    sign = (u >> 24) & 128
    a = u & 0x7FFFFFFF
    r = a + ((1 << (22 - MB)) - 1) + ((a >> (23 - MB)) & 1)
    normal = (r >> (23 - MB)) - ((127 - BIAS) << MB)
    e = a >> 23
    m = (a & 0x7FFFFF) | 0x800000
    s = tl.minimum(151 - BIAS - MB - e, 30)  # >= 21 wherever the subnormal branch is taken
    s = tl.maximum(s, 1)
    q = m >> s
    rem = m & ((1 << s) - 1)
    half = 1 << (s - 1)
    q = q + ((rem > half) | ((rem == half) & ((q & 1) == 1))).to(tl.int32)
    code = tl.where(a >= ((128 - BIAS) << 23), normal, q)
    code = tl.where(a > 0x7F800000, 127, code)  # NaN
    return (code | sign).to(tl.uint8)
